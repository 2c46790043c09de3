"""gpuscan.dask: prefix scans, reductions, stream compaction, segmented scans and histograms of 1-D
dask arrays, each block computed by a gpuscan server next to the dask worker that holds it.

    import dask.array as da, distributed, gpuscan.dask
    dc = distributed.Client(cluster)
    gpuscan.dask.register(dc, ["127.0.0.1:50051", "127.0.0.1:50052"], timeout=60, retries=3)
    x = da.random.randint(-100, 100, 10_000_000, chunks=1_000_000).astype("int64")
    y = gpuscan.dask.cumsum(x)                          # lazy, x's chunks; y.compute()
    s = gpuscan.dask.reduce(x, op="max")                # lazy 0-d array
    counts, edges = gpuscan.dask.histogram(x, 256, range=(-100, 100))
    kept = gpuscan.dask.compact(x, where=x > 0)          # chunks of unknown size, as x[x > 0]
    z = gpuscan.dask.segmented_scan(x, keys=k)          # runs of equal keys, across blocks
    s = gpuscan.dask.sort(x)                            # a sample sort around the servers' sorts
    with gpuscan.dask.persist(x) as p:                  # the blocks kept on the workers' servers
        y = gpuscan.dask.cumsum(p).compute()            # each block scanned where it lies
        with gpuscan.dask.cumsum(p, keep=True) as q:    # the result kept there too (q persisted)
            m = gpuscan.dask.reduce(q, "max").compute()

dask (and distributed) are imported by this package alone: `import gpuscan` does not need them.

How: `register` installs a distributed WorkerPlugin that opens one gpuscan.Client per worker
(towards the worker's server) and closes it on teardown; clients do not pickle, so they live on
the workers. Each function builds its own graph (no map_blocks, no cumreduction) that keeps the
block index and reads each block once: the block's call on the worker's server, a small task
per block with its element count and total, one task that combines the totals in block order
(an exclusive scan of them with the operator; the operator's identity before the first block),
and a task per block that folds the carried prefix into the block's result with numpy on the
worker (the operator itself: np.add, np.multiply, IEEE 754-2019 minimum/maximum,
np.bitwise_*). Output chunks are the input's. Empty blocks make no call. A worker on the same
host as a server that serves shared memory (--shm-dir) passes scans, reductions and compactions
through shared-memory regions it reuses (one copy in, one copy out) instead of streaming them.

Semantics (docs/dask.md): results have x's dtype, integers wrap as the server's do (numpy's
cumsum/sum widen int32 to int64: compare with np.cumsum(x, dtype=x.dtype)); an exclusive scan's
first element is the identity; integer and min/max results are exact whatever the chunking;
float sum/product bits are reproducible for a given chunking but may change with it (each block
is the server's deterministic tree from the block's start, the blocks are then combined in
order); chunk-independent float bits are not offered. reduce of an empty array is the
operator's identity.

persist(x) puts each block on its worker's server as a resident array and returns a
PersistedArray, which every function here but segmented_scan and in_shared_memory takes in place
of a dask array: the same graphs, each block's call made where the block lies, so only carries
and results cross the wire; release() (or `with`) drops the blocks (docs/dask.md, "Persisted
blocks"). scan(p, keep=True) (cumsum too) keeps the result there as well, a new PersistedArray
made by one task (each block's total, then each block scanned with its carry: only the totals
cross the wire), and reduce(p) is one task over every block (one Pipeline call of reduce stages
a server). p.reduce(op) and p.sum() give the value now, from the process that ran register()
calling the servers itself (_driver): no dask task at all.

Layout: _checks (arguments), _graphs (the public functions and their graphs), _sort (sort's),
_blocks (the block tasks), _ops (the operators in numpy), _worker (the plugin and its clients),
_register (the driver's register/unregister/worker_info), _targets (which server a worker calls),
_persisted (persist and PersistedArray, on the driver), _resident_blocks (BlockRef and the tasks on
persisted blocks), _driver (the driver's own clients of the servers, for PersistedArray.reduce).
"""
# SPLIT_EVERY, identity and Targets are public too, as they were, though __all__ leaves them out.
from ._graphs import (compact, cummax, cummin, cumprod, cumsum, histogram, in_shared_memory, reduce,
                      scan, segmented_scan)
from ._ops import SPLIT_EVERY, identity
from ._persisted import PersistedArray, PersistedArrays, persist
from ._register import register, unregister, worker_info
from ._resident_blocks import BlockRef
from ._sort import sort
from ._targets import Targets
from ._worker import PLUGIN_NAME, GpuscanPlugin

__all__ = ["register", "unregister", "worker_info", "GpuscanPlugin", "in_shared_memory", "scan", "cumsum",
           "cumprod", "cummin", "cummax", "reduce", "histogram", "compact", "segmented_scan", "sort", "persist",
           "PersistedArray", "PersistedArrays", "BlockRef", "PLUGIN_NAME"]
