"""gpuscan.Error and its subclasses: every failed call raises one, with the gRPC status code and the
server's message. The mapping from grpc.RpcError lives here and nowhere else."""
from __future__ import annotations

from types import TracebackType
from typing import Any, Dict, Literal, Optional, Tuple, Type

import grpc


class Error(Exception):
    """A failed gpuscan call. `code` is the grpc.StatusCode, `message` the server's message alone."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str = "", code: Optional[grpc.StatusCode] = None):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)

    def __reduce__(self) -> Tuple[Type[Error], Tuple[str, Any], Dict[str, Any]]:
        # Rebuilt from the message and code alone: the default (the class called with args, the
        # formatted text) would prefix the code twice. Errors cross processes (multiprocessing,
        # dask workers: gpuscan.dask).
        return type(self), (self.message, self.code), self.__dict__


def _make(name: str, code: grpc.StatusCode, doc: str) -> Type[Error]:
    return type(name, (Error,), {"code": code, "__doc__": doc, "__module__": __name__})


Cancelled = _make("Cancelled", grpc.StatusCode.CANCELLED, "The call was cancelled.")
Unknown = _make("Unknown", grpc.StatusCode.UNKNOWN, "An error without a better code.")
InvalidArgument = _make("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT,
                        "The server rejected the request (dtype/operator pair, predicate, counts, ...).")
DeadlineExceeded = _make("DeadlineExceeded", grpc.StatusCode.DEADLINE_EXCEEDED,
                         "The call ran past the client's timeout.")
NotFound = _make("NotFound", grpc.StatusCode.NOT_FOUND, "Not found.")
AlreadyExists = _make("AlreadyExists", grpc.StatusCode.ALREADY_EXISTS, "Already exists.")
PermissionDenied = _make("PermissionDenied", grpc.StatusCode.PERMISSION_DENIED, "Permission denied.")
ResourceExhausted = _make("ResourceExhausted", grpc.StatusCode.RESOURCE_EXHAUSTED,
                          "A server limit was hit (chunk or request size, queue, device memory).")
FailedPrecondition = _make("FailedPrecondition", grpc.StatusCode.FAILED_PRECONDITION,
                           "The server cannot do this now (e.g. Benchmark on a cpu server).")
Aborted = _make("Aborted", grpc.StatusCode.ABORTED, "Aborted.")
OutOfRange = _make("OutOfRange", grpc.StatusCode.OUT_OF_RANGE, "Out of range.")
Unimplemented = _make("Unimplemented", grpc.StatusCode.UNIMPLEMENTED,
                      "The server does not offer this (e.g. a scan algorithm its engine lacks).")
Internal = _make("Internal", grpc.StatusCode.INTERNAL, "Internal server error.")
Unavailable = _make("Unavailable", grpc.StatusCode.UNAVAILABLE,
                    "The server cannot be reached or is shutting down.")
DataLoss = _make("DataLoss", grpc.StatusCode.DATA_LOSS, "Data loss.")
Unauthenticated = _make("Unauthenticated", grpc.StatusCode.UNAUTHENTICATED, "Unauthenticated.")

_BY_CODE: Dict[Any, Type[Error]] = {cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
    PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented,
    Internal, Unavailable, DataLoss, Unauthenticated)}


def error_for(code: grpc.StatusCode, message: str) -> Error:
    """The Error subclass instance for a status code."""
    cls = _BY_CODE.get(code)
    return cls(message) if cls else Error(message, code)


def from_rpc_error(e: grpc.RpcError) -> Error:
    """Maps a grpc.RpcError (sync or aio) to the matching Error subclass."""
    code = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
    details = e.details() if callable(getattr(e, "details", None)) else str(e)
    return error_for(code or grpc.StatusCode.UNKNOWN, details or "")


class Raised:
    """Context manager: grpc.RpcError inside becomes gpuscan.Error (chained)."""

    def __enter__(self) -> Raised:
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        if et is not None and issubclass(et, grpc.RpcError) and not isinstance(ev, Error):
            raise from_rpc_error(ev) from ev
        return False


def raised() -> Raised:
    """A Raised: `with raised(): stub.Call(...)` raises gpuscan.Error for a failed call."""
    return Raised()
