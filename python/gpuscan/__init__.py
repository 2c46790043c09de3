"""gpuscan: prefix scans, reductions, stream compaction and histograms of numpy arrays on a gpuscan
server.

    import numpy as np, gpuscan
    with gpuscan.Client("127.0.0.1:50051") as c:
        y = c.scan(np.arange(1, 11, dtype=np.int32))          # inclusive prefix sum
        s = c.reduce(np.random.rand(1000), op="max")           # numpy scalar of x's dtype
        v, i = c.compact(x, predicate=("gt", 0), indices=True)
        counts, edges = c.histogram(x, 256, range=(-4, 4))     # numpy.histogram's bins
        z = c.segmented_scan(x, keys)                          # each run of equal keys on its own
        k, v = c.reduce_by_key(x, keys)                        # one (key, value) per run
        xs, order = c.sort(x), c.argsort(x)                   # stable, floats in total order
        with c.shared_array(1 << 20, "int32") as a:            # on the server's host: no copy
            a[:] = 1
            y = c.scan(a)                                      # a SharedArray too
        with c.put(x) as r:                                    # kept by the server (--resident-bytes)
            s, t = c.reduce(r), c.scan(r, keep=True)           # computed there; t a RemoteArray too
        p = c.pipeline()                                       # stages run on the server as one call
        m = p.reduce(p.scan(p.compact(x, predicate=("gt", 0))), op="max")
        print(p.run()[m])                                      # only the max comes back

The gRPC stubs (gpuscan.v1) are generated from proto/ when the package is built.
"""
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Error,
                     FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                     PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable, Unimplemented,
                     Unknown)
from ._types import (DTYPE_NAMES, OPERATORS, PREDICATES, DataPath, HistogramResult, Table, Timing,
                     TransportResult)
from ._resident import RemoteArray, ResidentArrays
from ._pipeline import Pipeline, PipelineResult, Stage, StageOutput
from .client import Client, Tls
from .shared import SharedArray
from .shared import create as shared_array

__version__ = "0.1.0"


def __getattr__(name):
    # grpc.aio is imported only when AsyncClient is used.
    if name == "AsyncClient":
        from .aio import AsyncClient
        return AsyncClient
    raise AttributeError(f"module 'gpuscan' has no attribute {name!r}")


__all__ = [
    "Client", "AsyncClient", "Tls", "SharedArray", "shared_array", "RemoteArray", "ResidentArrays", "Pipeline",
    "PipelineResult", "Stage", "StageOutput", "Timing",
    "TransportResult", "Table", "DataPath",
    "HistogramResult", "DTYPE_NAMES", "OPERATORS", "PREDICATES", "Error", "Aborted", "AlreadyExists", "Cancelled",
    "DataLoss", "DeadlineExceeded", "FailedPrecondition", "Internal", "InvalidArgument", "NotFound", "OutOfRange",
    "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable", "Unimplemented", "Unknown",
]
