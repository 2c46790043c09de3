// Segmented scans as plain scans over (head, value) pairs (issue 13). With
//   (ha, a) ⊕ (hb, b) = (ha | hb, hb ? b : a op b)
// the inclusive scan of the pairs carries, in each element's value, the scan of its segment
// alone (a head restarts the value), and ⊕ is associative whenever op is. So the engines' scan
// machinery (blocked CPU scans, the canonical tree, device scans) runs a segmented scan
// unchanged, with SegOp as its operator and SegItem as its element. Host and device code.
#pragma once

#include <cstdint>

#include "gpuscan/kernels/operators.h"

namespace gpuscan::seg {

// One element of a segmented scan: `head` is 1 where a segment begins. 8 bytes for 4-byte
// values, 16 for 8-byte ones (the padding is a named member that MakeItem zeroes, so packed
// buffers are fully defined).
template <class T, bool kWide = sizeof(T) == 8>
struct SegItem {
  T value;
  uint32_t head;
};
template <class T>
struct SegItem<T, true> {
  T value;
  uint32_t head;
  uint32_t pad;
};

template <class T>
GPUSCAN_HD SegItem<T> MakeItem(T value, uint32_t head) {
  SegItem<T> item{};
  item.value = value;
  item.head = head;
  return item;
}

template <class T, class Op>
struct SegOp {
  using Item = SegItem<T>;
  static constexpr bool kCommutative = false;  // associative only: the left operand comes first
  // Never added by the canonical tree (it skips missing sides); the blocked scans start from
  // it, where identity op x == x holds exactly for the pairs that take that path (integers and
  // float MIN/MAX; float SUM/PRODUCT always take the tree).
  GPUSCAN_HD static Item identity() { return MakeItem<T>(Op::identity(), 0); }
  GPUSCAN_HD Item operator()(const Item& a, const Item& b) const {
    return MakeItem<T>(b.head ? b.value : Op()(a.value, b.value), a.head | b.head);
  }
};

}  // namespace gpuscan::seg
