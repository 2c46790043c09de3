"""Calls the client would not make (headers it would refuse, odd chunks), straight on a grpcio
channel, for the tests of what the server refuses."""
import grpc

from gpuscan.errors import from_rpc_error
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc


def call(target, method: str, *requests):
    """One call of `method` (a GpuScan RPC) with these request messages: its responses, grpc
    errors as gpuscan's."""
    with grpc.insecure_channel(target) as ch:
        try:
            return list(getattr(pb_grpc.GpuScanStub(ch), method)(iter(requests), timeout=30))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
