#include "workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

#include "workload_calls.h"

namespace gpuscan::soak {
namespace {

size_t SizeOf(v1::DType d) { return DTypeSize(d); }

std::string Lower(std::string s, size_t prefix) {
  s = s.substr(prefix);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string KeyName(v1::DType d) { return Lower(v1::DType_Name(d), 6); }

}  // namespace

const char* Name(Operation op) {
  switch (op) {
    case Operation::kScan: return "scan";
    case Operation::kReduce: return "reduce";
    case Operation::kCompact: return "compact";
    case Operation::kSegmentedScanKeys: return "segscan_keys";
    case Operation::kSegmentedScanHeads: return "segscan_heads";
    case Operation::kReduceByKey: return "reduce_by_key";
    case Operation::kSort: return "sort";
    case Operation::kSortPairs: return "sort_pairs";
    case Operation::kArgsort: return "argsort";
    case Operation::kHistogram: return "histogram";
    case Operation::kScan2D: return "scan2d";
  }
  return "?";
}

const char* Name(Transport t) {
  switch (t) {
    case Transport::kStream: return "stream";
    case Transport::kLanes: return "lanes";
    case Transport::kShm: return "shm";
    case Transport::kResident: return "resident";
  }
  return "?";
}

bool HasTransports(Operation op) {
  return op == Operation::kScan || op == Operation::kReduce || op == Operation::kCompact;
}
bool HasResident(Operation op) { return op == Operation::kScan || op == Operation::kReduce; }

SharedRegion RegionPool::Take(uint64_t bytes) {
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    if (it->bytes() >= bytes && it->bytes() <= 2 * bytes + (64 << 10)) {
      SharedRegion r = std::move(*it);
      idle_.erase(it);
      idle_bytes_ -= r.bytes();
      return r;
    }
  }
  return SharedRegion::Create(dir_, bytes);
}

void RegionPool::Give(SharedRegion region) {
  if (region.bytes() == 0 || region.bytes() > keep_bytes_ / 2) return;  // deleted here
  idle_bytes_ += region.bytes();
  idle_.push_back(std::move(region));
  while (idle_bytes_ > keep_bytes_ && !idle_.empty()) {
    idle_bytes_ -= idle_.front().bytes();
    idle_.pop_front();
  }
}

std::string Plan::Describe() const {
  std::ostringstream s;
  s << Name(operation) << " " << Lower(v1::DType_Name(dtype), 6);
  switch (operation) {
    case Operation::kCompact:
      s << " " << (use_flags ? std::string("flags") : Lower(v1::PredicateOp_Name(predicate), 13)) << " "
        << Lower(v1::CompactOutput_Name(output), 15);
      break;
    case Operation::kScan:
    case Operation::kReduce:
    case Operation::kScan2D:
    case Operation::kSegmentedScanKeys:
    case Operation::kSegmentedScanHeads:
    case Operation::kReduceByKey:
      s << " " << Lower(v1::Operator_Name(op), 9);
      if (operation == Operation::kScan || operation == Operation::kSegmentedScanKeys ||
          operation == Operation::kSegmentedScanHeads) {
        s << (exclusive ? " exclusive" : " inclusive");
      }
      if (operation == Operation::kSegmentedScanKeys || operation == Operation::kReduceByKey) {
        s << " keys " << KeyName(key_dtype);
      }
      if (operation == Operation::kSegmentedScanKeys || operation == Operation::kSegmentedScanHeads ||
          operation == Operation::kReduceByKey) {
        s << " runs~" << mean_run;
      }
      if (operation == Operation::kScan2D) s << " cols=" << cols << " rows=" << elements / cols;
      break;
    case Operation::kSort:
    case Operation::kSortPairs:
    case Operation::kArgsort:
      if (operation == Operation::kSortPairs) s << " values " << KeyName(values_dtype);
      s << (descending ? " descending" : " ascending");
      break;
    case Operation::kHistogram:
      s << " " << bins << (explicit_edges ? " explicit bins" : " even bins");
      break;
  }
  if (transport == Transport::kLanes) {
    s << " lanes=" << (lanes ? std::to_string(lanes) : std::string("client default"));
  } else if (transport == Transport::kShm) {
    s << " shm" << (operation == Operation::kScan && in_place ? " in place" : "");
  } else if (transport == Transport::kResident) {
    s << " resident" << (operation == Operation::kScan && in_place ? " kept" : "");
  }
  s << " n=" << elements;
  return s.str();
}

uint64_t Plan::InputBytes() const {
  const uint64_t values = elements * SizeOf(dtype);
  switch (operation) {
    case Operation::kCompact: return values + (use_flags ? elements : 0);
    case Operation::kSegmentedScanKeys:
    case Operation::kReduceByKey: return values + elements * SizeOf(key_dtype);
    case Operation::kSegmentedScanHeads: return values + elements;
    case Operation::kSortPairs: return values + elements * SizeOf(values_dtype);
    default: return values;
  }
}

uint64_t Plan::ClientBytes() const {
  const uint64_t values = elements * SizeOf(dtype);
  const bool shm = transport == Transport::kShm;
  switch (operation) {
    case Operation::kScan: return (shm ? 3 : 2) * values;
    case Operation::kReduce: return (shm ? 2 : 1) * values;
    case Operation::kCompact: return (shm ? 3 : 2) * values + elements * (shm ? 18 : 9);
    case Operation::kSegmentedScanKeys:
    case Operation::kSegmentedScanHeads: return 2 * values + elements * (SizeOf(key_dtype) + 1);
    case Operation::kReduceByKey: return 2 * values + elements * (2 * SizeOf(key_dtype) + 1);
    case Operation::kSort: return 3 * values + 8 * elements;
    case Operation::kSortPairs: return 3 * values + 2 * elements * SizeOf(values_dtype) + 8 * elements;
    case Operation::kArgsort: return 2 * values + 16 * elements;
    case Operation::kHistogram: return values;
    case Operation::kScan2D: return 2 * values + cols * SizeOf(dtype);
  }
  return values;
}

Workload::Workload(uint64_t max_bytes, uint64_t client_chunk_bytes, Transports transports)
    : max_bytes_(max_bytes), client_chunk_bytes_(client_chunk_bytes), transports_(std::move(transports)) {}

uint64_t Workload::Size(v1::DType dtype, uint64_t max_bytes, uint32_t lanes, std::mt19937_64& rng) const {
  const uint64_t size = SizeOf(dtype);
  const uint64_t max_elems = std::max<uint64_t>(1, max_bytes / size);
  if (rng() % 4 != 0) {  // log-uniform in bytes, one element to the largest request
    const double lo = std::log(double(size)), hi = std::log(double(max_elems * size));
    const double bytes = std::exp(std::uniform_real_distribution<double>(lo, hi)(rng));
    return std::clamp<uint64_t>(uint64_t(bytes) / size, 1, max_elems);
  }
  const uint64_t chunk = std::max<uint64_t>(1, client_chunk_bytes_ / size);
  uint64_t c;
  if (lanes > 1 && (rng() & 1)) {
    // A striped call's stripes: one chunk per lane, a chunk more than the lanes hold, two
    // rounds of every lane, and the last lane's chunk cut short.
    const uint64_t centres[] = {lanes * chunk, (lanes + 1) * chunk, 2 * lanes * chunk, (2 * lanes - 1) * chunk + 1};
    c = centres[rng() % std::size(centres)];
  } else {
    // Boundaries, +-1: warps, the CUDA tiles (4 Ki / 2 Ki elements for 4- / 8-byte types), the CPU
    // engine's blocks (16 Ki) and its parallel threshold (64 Ki), the CUDA engine's 2 MiB
    // sub-chunks, the client's chunks and the server's 4 MiB chunk limit.
    const uint64_t centres[] = {2,
                                32,
                                2048,
                                4096,
                                uint64_t{1} << 14,
                                uint64_t{1} << 16,
                                (uint64_t{2} << 20) / size,
                                chunk,
                                2 * chunk,
                                (uint64_t{4} << 20) / size};
    c = centres[rng() % std::size(centres)];
  }
  const uint64_t n = c - 1 + rng() % 3;
  return std::clamp<uint64_t>(n, 1, max_elems);
}

namespace {

// The mix, in calls per hundred. Scan, Reduce and Compact carry the transports (about half of
// their calls streamed, a quarter striped, a quarter over shared memory); sorts hold their
// whole input and cost n log n on the CPU engine, so they are fewer and at most a quarter of the
// largest request.
struct Weight {
  Operation op;
  int weight;
};
constexpr Weight kMix[] = {
    {Operation::kScan, 14},          {Operation::kReduce, 11},
    {Operation::kCompact, 14},       {Operation::kSegmentedScanKeys, 8},
    {Operation::kSegmentedScanHeads, 7}, {Operation::kReduceByKey, 8},
    {Operation::kSort, 6},           {Operation::kSortPairs, 5},
    {Operation::kArgsort, 5},        {Operation::kHistogram, 11},
    {Operation::kScan2D, 11},
};

Operation DrawOperation(std::mt19937_64& rng) {
  int total = 0;
  for (const Weight& w : kMix) total += w.weight;
  int r = int(rng() % uint64_t(total));
  for (const Weight& w : kMix) {
    if (r < w.weight) return w.op;
    r -= w.weight;
  }
  return Operation::kScan;
}

uint64_t LogUniform(std::mt19937_64& rng, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  const double v = std::exp(std::uniform_real_distribution<double>(std::log(double(lo)), std::log(double(hi) + 1))(rng));
  return std::clamp<uint64_t>(uint64_t(v), lo, hi);
}

}  // namespace

Plan Workload::Draw(std::mt19937_64& rng) const {
  static constexpr v1::DType kDTypes[] = {v1::DTYPE_INT32, v1::DTYPE_INT64,   v1::DTYPE_UINT32,
                                          v1::DTYPE_UINT64, v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT64};
  static constexpr v1::DType kKeyTypes[] = {v1::DTYPE_INT32, v1::DTYPE_INT64, v1::DTYPE_UINT32, v1::DTYPE_UINT64};
  Plan p;
  p.operation = DrawOperation(rng);
  p.dtype = kDTypes[rng() % std::size(kDTypes)];
  const int ops = IsFloat(p.dtype) ? 4 : 7;
  p.op = static_cast<v1::Operator>(v1::OPERATOR_SUM + int(rng() % ops));
  p.exclusive = rng() & 1;
  p.in_place = rng() & 1;
  p.use_flags = rng() & 1;
  p.predicate = static_cast<v1::PredicateOp>(v1::PREDICATE_OP_NONZERO + int(rng() % 9));
  p.output = static_cast<v1::CompactOutput>(rng() % 3);
  p.key_dtype = kKeyTypes[rng() % std::size(kKeyTypes)];
  p.values_dtype = kDTypes[rng() % std::size(kDTypes)];
  p.descending = rng() & 1;
  p.explicit_edges = rng() % 4 == 0;
  p.bins = p.explicit_edges ? uint32_t(LogUniform(rng, 1, 1024))
                            : uint32_t(rng() % 4 == 0 ? LogUniform(rng, 1, 1u << 16) : LogUniform(rng, 1, 256));

  // The transport: lanes and shared memory where the operation has them.
  p.transport = Transport::kStream;
  p.lanes = 1;  // explicitly one stream, whatever the Client's default
  if (HasTransports(p.operation)) {
    const uint64_t r = rng() % 5;
    if (r == 0 && transports_.max_lanes >= 2) {
      p.transport = Transport::kLanes;
      p.lanes = 2 + uint32_t(rng() % (transports_.max_lanes - 1));
      if (transports_.client_lanes > 1 && (rng() & 1)) p.lanes = 0;  // ClientOptions::lanes
    } else if (r == 1 && !transports_.shm_dir.empty()) {
      p.transport = Transport::kShm;
    } else if (r == 2 && transports_.resident && HasResident(p.operation)) {
      p.transport = Transport::kResident;
    }
  }
  const uint32_t lanes =
      p.transport == Transport::kLanes ? (p.lanes ? p.lanes : transports_.client_lanes) : 1;

  uint64_t max_bytes = max_bytes_;
  switch (p.operation) {
    case Operation::kSort:
    case Operation::kSortPairs:
    case Operation::kArgsort: max_bytes = std::max<uint64_t>(8, max_bytes_ / 4); break;
    case Operation::kSegmentedScanKeys:
    case Operation::kSegmentedScanHeads:
    case Operation::kReduceByKey:
    case Operation::kScan2D: max_bytes = std::max<uint64_t>(8, max_bytes_ / 2); break;
    default: break;
  }
  p.elements = Size(p.dtype, max_bytes, lanes, rng);
  p.mean_run = LogUniform(rng, 1, std::max<uint64_t>(1, std::min<uint64_t>(p.elements, 1 << 16)));
  if (p.operation == Operation::kScan2D) {
    // Columns log-uniform from 1 to the whole array (one row), sometimes either end.
    const uint64_t r = rng() % 8;
    p.cols = r == 0 ? 1 : r == 1 ? p.elements : LogUniform(rng, 1, p.elements);
    p.elements = std::max<uint64_t>(1, p.elements / p.cols) * p.cols;
  }
  return p;
}

Outcome Workload::Run(Client& client, const Plan& plan, std::mt19937_64& rng, RegionPool* pool) const {
  Outcome out;
  out.bytes_in = plan.InputBytes();
  std::unique_ptr<RegionPool> own;  // regions for this call only
  if (plan.transport == Transport::kShm && !pool) {
    own = std::make_unique<RegionPool>(transports_.shm_dir, 0);
    pool = own.get();
  }
  try {
    RunCall(client, plan, rng, pool, out);
  } catch (const RpcError& e) {
    out.rpc_ok = false;
    out.error = StatusCodeName(e.code()) + ": " + e.message();
  } catch (const std::exception& e) {
    out.rpc_ok = false;
    out.error = std::string("client error: ") + e.what();
  }
  return out;
}

Outcome Workload::RunStreamingScan(Client& client, uint64_t bytes, uint64_t seed) const {
  Outcome out;
  const uint64_t n = bytes / sizeof(int64_t);
  out.bytes_in = n * sizeof(int64_t);
  // Both ends draw the same sequence: the source to send, the sink to check against.
  std::mt19937_64 send_rng(seed), check_rng(seed);
  auto draw = [](std::mt19937_64& r) { return static_cast<int64_t>(r() | 1); };  // never zero
  uint64_t sent = 0, checked = 0;
  uint64_t acc = 0;  // int64 sum wraps: add in the unsigned type
  bool wrong = false;
  try {
    v1::ScanHeader h;
    h.set_dtype(v1::DTYPE_INT64);
    h.set_op(v1::OPERATOR_SUM);
    h.set_element_count(n);
    client.ScanStream(
        h,
        [&](void* buf, size_t max_bytes) -> size_t {
          const uint64_t k = std::min<uint64_t>(n - sent, max_bytes / sizeof(int64_t));
          auto* p = static_cast<unsigned char*>(buf);
          for (uint64_t i = 0; i < k; ++i) {
            const int64_t v = draw(send_rng);
            std::memcpy(p + i * sizeof(int64_t), &v, sizeof(v));
          }
          sent += k;
          return k * sizeof(int64_t);
        },
        [&](const void* data, size_t size) {
          const auto* p = static_cast<const unsigned char*>(data);
          for (size_t i = 0; i + sizeof(int64_t) <= size; i += sizeof(int64_t)) {
            acc += static_cast<uint64_t>(draw(check_rng));
            int64_t got;
            std::memcpy(&got, p + i, sizeof(got));
            if (!wrong && got != static_cast<int64_t>(acc)) {
              wrong = true;
              out.error = "element " + std::to_string(checked) + ": got " + std::to_string(got) + ", expected " +
                          std::to_string(static_cast<int64_t>(acc));
            }
            ++checked;
          }
        });
    out.rpc_ok = true;
    out.bytes_out = checked * sizeof(int64_t);
    if (!wrong && checked != n) out.error = "got " + std::to_string(checked) + " elements, expected " + std::to_string(n);
    out.correct = !wrong && checked == n;
  } catch (const RpcError& e) {
    out.error = StatusCodeName(e.code()) + ": " + e.message();
  } catch (const std::exception& e) {
    out.error = std::string("client error: ") + e.what();
  }
  return out;
}

}  // namespace gpuscan::soak
