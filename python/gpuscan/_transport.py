"""The one place a prepared call (_ops.Prepared) picks its transport: device memory, shared
memory, the native C API, lanes, or one grpcio stream (_t_*.py, one module each). run() is a
program of effects (_effects) that Client and AsyncClient drive alike."""
from __future__ import annotations

from . import _t_device, _t_lanes, _t_native, _t_shared, _t_stream
from ._effects import Info
from .errors import Unimplemented


_NOT_SERVED = {"scan_axis": "scans along an axis", "scan_carry": "scans with a carry"}


def served(c, p):
    """Unimplemented unless the server lists p.needs in info()["operations"] (an older server would
    ignore the field and answer a wrong result, not an error: "scan_axis" the 2-D scan,
    "scan_carry" the scan without its carry); asked until it does."""
    if p.needs not in c._served:
        if p.needs not in (yield Info(p.timeout))["operations"]:
            raise Unimplemented(f"the server does not serve {_NOT_SERVED.get(p.needs, p.needs)} (no {p.needs!r} in "
                                "info()[\"operations\"]: an older version)")
        c._served.add(p.needs)


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
