"""The client's channels: TLS, channel arguments (keepalive, lanes' own connections), method paths
and the health check's hand-framed messages, for Client and AsyncClient alike."""
from __future__ import annotations

import dataclasses
import time
from typing import Any, List, Optional

import grpc

from . import _types, _wire
from .v1 import gpuscan_pb2 as pb

_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


@dataclasses.dataclass(frozen=True)
class Tls:
    """TLS towards the server (PEM file paths; None = not used). tls=True means Tls()."""
    ca_file: Optional[str] = None      # CAs that sign the server's certificate; None = system roots
    cert_file: Optional[str] = None    # client certificate chain, for mutual TLS
    key_file: Optional[str] = None     # its private key
    server_name: Optional[str] = None  # name to verify the certificate against (default: target's host)

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path):
            if path is None:
                return None
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise ValueError(f"gpuscan: cannot read TLS file {path}: {e.strerror}") from None
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("gpuscan: TLS cert_file and key_file go together")
        return grpc.ssl_channel_credentials(read(self.ca_file), read(self.key_file), read(self.cert_file))


def method_path(name: str) -> str:
    """'/gpuscan.v1.GpuScan/Scan', from the generated descriptor."""
    m = pb.DESCRIPTOR.services_by_name["GpuScan"].methods_by_name[name]
    return f"/{m.containing_service.full_name}/{m.name}"


def check_lanes(lanes) -> int:
    """A lanes argument as an int >= 1 (ValueError otherwise: 0, negatives, 2.5, "4", True)."""
    return _types.check_int(lanes, "lanes", 1)


def lane_channel_args(chunk_bytes: int, options, tls, lane: int) -> list:
    """Channel arguments of lane `lane`'s channel. As the C++ client does: a distinct argument per
    lane and a channel-local subchannel pool, so each lane gets its own TCP connection (channels
    with equal arguments would share one). No load-balancing policy: pick_first sends every lane
    of an array to the same server, which the server needs to join them."""
    return channel_args(chunk_bytes, None, options, tls) + [
        ("gpuscan.lane", lane), ("grpc.use_local_subchannel_pool", 1)]


# Keepalive while calls are active, as the C++ client sets it (docs/configuration.md, "Keepalive"):
# an unanswered ping closes a connection whose link went silent within time + timeout, failing its
# calls with UNAVAILABLE instead of leaving them to TCP (~15 min). The server accepts pings this
# often. The caller's options= win: a default whose key they name is left out.
KEEPALIVE_ARGS = [("grpc.keepalive_time_ms", 2000), ("grpc.keepalive_timeout_ms", 2000)]


def channel_args(chunk_bytes: int, load_balancing_policy: Optional[str], options, tls=None) -> list:
    args = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    user = list(options.items()) if isinstance(options, dict) else list(options or ())
    args += [kv for kv in KEEPALIVE_ARGS if kv[0] not in {k for k, _ in user}]
    if isinstance(tls, Tls) and tls.server_name:
        args.append(("grpc.ssl_target_name_override", tls.server_name))
    if load_balancing_policy:
        args.append(("grpc.lb_policy_name", load_balancing_policy))
    return args + user


def channel_credentials(tls, credentials):
    if credentials is not None:
        return credentials
    if tls is True:
        tls = Tls()
    return tls.credentials() if isinstance(tls, Tls) else None


def encode_health_request(service: str) -> bytes:
    s = service.encode()
    return _wire.field_prefix(1, len(s)) + s if s else b""



def decode_health_response(raw: bytes) -> str:
    return _HEALTH_STATUS.get(_wire.parse(raw).get(1, 0), "UNKNOWN")


def sleep_watching(channels: List[Any], seconds: float) -> None:
    """Client's wait before a retry, watching its channels: a sync channel advances a connection
    only while polled (else at grpc's 5 s backup poll); a connectivity subscription polls, on a
    grpc thread. (Not try_to_connect: grpc's poller would ask again after the subscription ends,
    failing if the client was closed meanwhile.)"""
    def ignore(_state: Any) -> None:
        pass
    for ch in channels:
        ch.subscribe(ignore)
    try:
        time.sleep(seconds)
    finally:
        for ch in channels:
            ch.unsubscribe(ignore)
