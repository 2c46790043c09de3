"""A balancer in front of gpuscan replicas on loopback, HAProxy or nginx, from the shipped
deploy/haproxy/haproxy.cfg or deploy/nginx/nginx.conf with only its addresses (and nginx's
scratch paths) replaced: the balancer under test is the one users deploy. Used by tests/lb and by
`scripts/gpu run net` (lanes through the balancer against lanes direct)."""
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
NGINX_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "nginx.conf"


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


def render_nginx_config(text: str, port: int, servers: Sequence[str], scratch: str) -> str:
    """The shipped nginx config listening on 127.0.0.1:port with `servers` as its upstream in
    place of the compose service name, its pid file and temporary folders under `scratch` (the
    packaged defaults are root's)."""
    out: List[str] = [f"pid {scratch}/nginx.pid;"]
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("listen 50051 "):
            line = line.replace("listen 50051 ", f"listen 127.0.0.1:{port} ")
        elif s.startswith("server gpuscan:50051"):
            out.extend(line.replace("gpuscan:50051", addr) for addr in servers)
            continue
        out.append(line)
        if s == "http {":
            out.extend(f"  {kind}_temp_path {scratch}/{kind};"
                       for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    rendered = "\n".join(out) + "\n"
    if f"127.0.0.1:{port}" not in rendered or any(a not in rendered for a in servers):
        raise ValueError(f"{NGINX_CONFIG}: its listen or upstream server line moved; update render_nginx_config")
    return rendered


def find_binary(kind: str) -> str:
    """The balancer's binary, "haproxy" or "nginx": $GPUSCAN_HAPROXY / $GPUSCAN_NGINX, else on
    PATH, else in /usr/sbin (not on a user's PATH); "" when none is installed."""
    return os.environ.get(f"GPUSCAN_{kind.upper()}") or shutil.which(kind) or shutil.which(f"/usr/sbin/{kind}") or ""


class Balancer(LoggedProcess):
    """haproxy -db or nginx on a free loopback port in front of `servers`; ready once it listens.
    Its log (HAProxy's health-check transitions, nginx's upstream errors) is `log_text()`."""

    def __init__(self, servers: Sequence[str], kind: str = "haproxy", binary: str = "", port: int = 0):
        self.kind = kind
        binary = binary or find_binary(kind)
        if not binary:
            raise FileNotFoundError(f"{kind} not found (scripts/install-deps.sh installs it)")
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix=f"gpuscan-lb-{kind}-")
        if kind == "haproxy":
            cfg = os.path.join(self.dir, "haproxy.cfg")
            text = render_config(CONFIG.read_text(), self.port, servers)
            argv = [binary, "-db", "-f", cfg]
        else:
            cfg = os.path.join(self.dir, "nginx.conf")
            text = render_nginx_config(NGINX_CONFIG.read_text(), self.port, servers, self.dir)
            argv = [binary, "-p", self.dir, "-c", cfg]
        with open(cfg, "w") as f:
            f.write(text)
        # Neither prints anything when all is well: ready at once, then wait for the port itself.
        super().__init__(argv, re.compile(""), kind, 30.0)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or not self.alive():
                    text = self.log_text()
                    self.stop()
                    raise RuntimeError(f"{kind} did not listen on {self.port}:\n{text}")
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
