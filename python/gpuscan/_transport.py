"""The one place a prepared call (_ops.Prepared) picks its transport: device memory, shared
memory, the native C API, lanes, or one grpcio stream (_t_*.py, one module each). run() is a
program of effects (_effects) that Client and AsyncClient drive alike."""
from __future__ import annotations

from . import _t_device, _t_lanes, _t_native, _t_shared, _t_stream
from ._effects import Info
from .errors import Unimplemented


def served(c, p):
    """Unimplemented unless the server lists p.needs in info()["operations"] ("scan_axis": an
    older server would ignore the axis and answer the 2-D scan, a wrong result, not an error);
    asked until it does."""
    if not c._axis_served:
        c._axis_served = p.needs in (yield Info(p.timeout))["operations"]
        if not c._axis_served:
            raise Unimplemented("the server does not serve scans along an axis (no \"scan_axis\" in "
                                "info()[\"operations\"]: an older version)")


def run(c, p):
    """p's result, as its method returns it; its Timing kept as the client's last_timing."""
    if p.needs is not None:
        yield from served(c, p)
    if p.device is not None:
        transport = _t_device
    elif p.shared is not None:
        transport = _t_shared
    elif _t_native.takes(c, p):
        transport = _t_native
    elif p.striped:
        transport = _t_lanes
    else:
        transport = _t_stream
    result, timing = yield from transport.run(c, p)
    c._set_timing(timing)
    return p.returns(result)
