"""HAProxy in front of gpuscan replicas on loopback, from the shipped deploy/haproxy/haproxy.cfg
with only its addresses replaced: the balancer under test is the one users deploy. Used by
tests/lb and by scripts/gpu-lb.sh (lanes through the balancer against lanes direct)."""
from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Sequence

from gpuscan.testing import LoggedProcess

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy" / "haproxy.cfg"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render_config(text: str, port: int, servers: Sequence[str]) -> str:
    """The shipped config listening on 127.0.0.1:port with `servers` (host:port) as its replicas
    in place of the compose DNS template (and without the resolvers it needs)."""
    out: List[str] = []
    skipping = False
    for line in text.splitlines():
        s = line.strip()
        if skipping:  # the resolvers section ends at the next section or the end
            if s and not line[0].isspace():
                skipping = False
            else:
                continue
        if s.startswith("resolvers "):
            skipping = True
            continue
        if s.startswith("bind :50051"):
            line = line.replace("bind :50051", f"bind 127.0.0.1:{port}")
        elif s.startswith("server-template "):
            out.extend(f"  server r{i} {addr}" for i, addr in enumerate(servers))
            continue
        out.append(line)
    rendered = "\n".join(out) + "\n"
    if f"127.0.0.1:{port}" not in rendered or any(f"server r{i} " not in rendered for i in range(len(servers))):
        raise ValueError(f"{CONFIG}: its frontend bind or server-template line moved; update render_config")
    return rendered


class Balancer(LoggedProcess):
    """haproxy -db on a free loopback port in front of `servers`; ready once it listens. Its log
    (health-check transitions) is `log_text()`."""

    def __init__(self, servers: Sequence[str], binary: str = "", port: int = 0, config: Path = CONFIG):
        binary = binary or os.environ.get("GPUSCAN_HAPROXY") or shutil.which("haproxy") or ""
        if not binary:
            raise FileNotFoundError("haproxy not found (scripts/install-deps.sh installs it)")
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="gpuscan-lb-")
        cfg = os.path.join(self.dir, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(render_config(config.read_text(), self.port, servers))
        # HAProxy prints nothing when all is well: ready at once, then wait for the port itself.
        super().__init__([binary, "-db", "-f", cfg], re.compile(""), "haproxy", 30.0)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or not self.alive():
                    text = self.log_text()
                    self.stop()
                    raise RuntimeError(f"haproxy did not listen on {self.port}:\n{text}")
                time.sleep(0.05)
        self.target = f"127.0.0.1:{self.port}"

    def wait_log(self, pattern: str, timeout_s: float, after: int = 0) -> bool:
        """Whether `pattern` (a regex) shows up in the log past offset `after` within timeout_s."""
        deadline = time.monotonic() + timeout_s
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            if rx.search(self.log_text()[after:]):
                return True
            time.sleep(0.05)
        return False

    def stop(self, grace_s: float = 10.0):
        rc = super().stop(grace_s)
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


def scrape(metrics_address: str) -> str:
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=5) as r:
        return r.read().decode()


def requests_by_op(metrics_text: str) -> Dict[str, float]:
    """gpuscan_requests_total summed over codes, dtypes and devices, by its `op` label."""
    out: Dict[str, float] = {}
    for line in metrics_text.splitlines():
        if line.startswith("gpuscan_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            m = re.search(r'op="([^"]+)"', labels)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(value)
    return out
