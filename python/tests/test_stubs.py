"""The generated stubs are current (regenerated from proto/ into a temp dir and compared), and the
data path's hand framing (gpuscan._wire) matches the generated messages byte for byte."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import gpuscan.v1
from gpuscan import _chunking, _wire
from gpuscan.v1 import gpuscan_pb2 as pb

HERE = Path(__file__).resolve().parent
TOOLS = HERE.parent / "tools" / "gen_stubs.py"
PROTO = HERE.parent.parent / "proto"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_stubs", TOOLS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stubs_are_not_stale(tmp_path):
    if not (PROTO / "gpuscan" / "v1" / "gpuscan.proto").exists():
        pytest.skip("no proto/ next to the package")
    gen = _gen()
    try:
        out = gen.generate(tmp_path, proto_root=PROTO)
    except RuntimeError as e:  # no protoc here (e.g. the GPU machine)
        pytest.skip(str(e))
    installed = Path(gpuscan.v1.__file__).parent
    for name in gen.GENERATED:
        fresh, used = (out / name).read_text(), (installed / name).read_text()
        assert fresh == used, f"{installed / name} is stale: rebuild the package (it is generated from proto/)"


def test_no_stub_in_the_source_tree_is_tracked():
    # The stubs are build outputs; python/gpuscan/v1/ is ignored by git.
    ignore = (HERE.parent.parent / ".gitignore")
    if ignore.exists():
        assert "/python/gpuscan/v1/" in ignore.read_text()


def test_data_framing_matches_generated_messages():
    header = pb.ScanHeader(dtype=pb.DTYPE_INT64, op=pb.OPERATOR_MAX, element_count=300)
    x = np.arange(300, dtype=np.int64)  # 2400 bytes: a two-byte length varint
    reqs = list(_chunking.data_requests(pb.ScanRequest(header=header), _wire.SCAN_DATA, x, 200))
    assert reqs[0] == pb.ScanRequest(header=header, data=x[:200].tobytes()).SerializeToString()
    assert reqs[1] == pb.ScanRequest(data=x[200:].tobytes()).SerializeToString()
    flags = (x % 3 == 0).view(np.uint8)
    creq = pb.CompactRequest(header=pb.CompactHeader(dtype=pb.DTYPE_INT64, use_flags=True))
    reqs = list(_chunking.data_requests(creq, _wire.COMPACT_VALUES, x, 128, flags))
    want = pb.CompactRequest(header=creq.header, values=x[:128].tobytes(), flags=flags[:128].tobytes())
    assert reqs[0] == want.SerializeToString() and len(reqs) == 3
    assert list(_chunking.data_requests(creq, _wire.COMPACT_VALUES, x[:0], 128)) == [creq.SerializeToString()]
    t = list(_chunking.transport_requests(3000, 1000, True))
    assert pb.TransportRequest.FromString(t[0]).echo and len(pb.TransportRequest.FromString(t[2]).data) == 1000


def test_parse_matches_generated_messages():
    timing = pb.Timing(total_us=12345, bytes_in=1 << 40, engine="cpu", chunks=3)
    raw = pb.ScanResponse(data=b"\x01" * 300, offset=2**33, timing=timing, element_count=7).SerializeToString()
    f = _wire.parse(raw)
    s, e = f[1]
    assert raw[s:e] == b"\x01" * 300 and f[2] == 2**33 and f[4] == 7
    assert pb.Timing.FromString(raw[f[3][0]:f[3][1]]) == timing
    for v in (0, 1, 127, 128, 300, 2**63 - 1, 2**64 - 1):
        assert _wire._read_varint(_wire.varint(v), 0) == (v, len(_wire.varint(v)))
