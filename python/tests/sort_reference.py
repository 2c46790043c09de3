"""The sort tests' reference and inputs (test_sort.py, test_sort_wire.py): the server's order as
a stable argsort of order-preserving unsigned keys built from the bit pattern (IEEE 754 totalOrder
for floats, NaN payloads too), bit views for comparing floats bit for bit, and random keys with
many duplicates and the floats' specials."""
import numpy as np

UINT = {4: np.uint32, 8: np.uint64}


def order_keys(x):
    """x's bit patterns as unsigned integers whose order is the server's: unsigned as they are,
    signed with the top bit flipped, floats negative (sign bit set) with every bit flipped, the
    rest with the sign bit flipped: IEEE 754 totalOrder, NaNs by their payloads too (what the
    server does; equal bits keep input order)."""
    x = np.asarray(x)
    bits = 8 * x.dtype.itemsize
    u = x.view(UINT[x.dtype.itemsize]).copy()
    sign = u.dtype.type(1) << u.dtype.type(bits - 1)
    if x.dtype.kind == "u":
        return u
    if x.dtype.kind == "i":
        return u ^ sign
    return u ^ (((u >> u.dtype.type(bits - 1)) * u.dtype.type(-1 & ((1 << bits) - 1))) | sign)


def ref_argsort(x, descending=False):
    t = order_keys(x)
    return np.argsort(~t if descending else t, kind="stable")


def bits(a):
    a = np.asarray(a)
    return a.view(UINT[a.dtype.itemsize]) if a.dtype.itemsize in UINT else a


def random_keys(rng, dtype, n, distinct=None):
    """Random keys of dtype; `distinct`: drawn from that many values (many duplicates); floats
    include NaN of both signs, +-inf, +-0, subnormals and the extremes."""
    if dtype.kind == "f":
        pool = rng.standard_normal(max(distinct or n, 1)).astype(dtype) * dtype.type(100)
        fi = np.finfo(dtype)
        special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, fi.tiny / 4, -fi.tiny / 4, fi.max, fi.min,
                            fi.tiny, -fi.tiny], dtype)
        special[1] = -np.abs(special[0])  # -NaN: sign bit set
        pool = np.concatenate((pool, special))
    else:
        info = np.iinfo(dtype)
        pool = rng.integers(info.min, info.max, max(distinct or n, 1), dtype=dtype, endpoint=True)
        pool = np.concatenate((pool, np.array([info.min, info.max, 0], dtype)))
    return pool[rng.integers(0, len(pool), n)] if n else np.zeros(0, dtype)
