"""A gpuscan-server in a network namespace of its own, reached over a veth pair: the fixture code
of the netns tests (tests/netns, docs/RELIABILITY.md "Across a network namespace"), kept here so
another test can reuse it.

    reason = netns.unavailable_reason()      # None where namespaces can be made (root, iproute2)
    with netns.VethNamespace() as ns:         # gpuscan-t<pid>-srv, veth gst<pid>h <-> gst<pid>s
        with netns.NetnsServer(ns, binary, extra=[...]) as srv:
            srv.target                        # "10.213.X.2:PORT", reached from the root namespace
            srv.metrics()                     # the server's /metrics, scraped inside its namespace
            ns.link_down(); ns.link_up()      # the host end of the veth pair

Layout: the namespace holds one end of the veth pair (10.213.X.2/24) and its own loopback; the
other end (10.213.X.1/24) stays in the root namespace with the test's client. X is derived from
the pid and moved on while that /24 is already in use here. Everything made is removed by
destroy() (the server stopped first, then whatever still runs in the namespace, the link, the
namespace), also after a failure; leftovers of a run that was killed (its pid gone) are removed
when the next one starts.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

# The gpuscan package (PYTHONPATH=build/python/pkg) provides the logged child process.
from gpuscan.testing import LoggedProcess

_NS_PREFIX = "gpuscan-t"
_NS_RE = re.compile(r"^gpuscan-t(\d+)-(\S+)")
_LINK_RE = re.compile(r"^gst(\d+)[a-z]?[hs]$")
_LISTENING = re.compile(r"listening on (\S+)")
_METRICS_AT = re.compile(r"metrics at http://(\S+)/metrics")
_SUBNET = "10.213"


def _ip(*args: str, check: bool = True, timeout: float = 10.0) -> subprocess.CompletedProcess:
    """Runs `ip ARGS`; raises RuntimeError with its stderr when it fails and check is set."""
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def _has_cap_net_admin() -> bool:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 12))  # CAP_NET_ADMIN
    except OSError:
        pass
    return False


def unavailable_reason() -> Optional[str]:
    """Why this process cannot make network namespaces and veth pairs, or None when it can (it
    makes, enters and removes a probe namespace to find out)."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux (this is {sys.platform})"
    if not shutil.which("ip"):
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0 and not _has_cap_net_admin():
        return "needs root or CAP_NET_ADMIN to make network namespaces"
    probe = f"{_NS_PREFIX}{os.getpid()}-probe"
    try:
        p = _ip("netns", "add", probe, check=False)
        if p.returncode != 0:
            return f"`ip netns add` failed: {p.stderr.strip() or p.returncode}"
        p = subprocess.run(["ip", "netns", "exec", probe, "true"], capture_output=True, text=True, timeout=10)
        if p.returncode != 0:
            return f"`ip netns exec` failed: {p.stderr.strip() or p.returncode}"
        p = _ip("link", "add", f"gst{os.getpid()}ph", "type", "veth", "peer", "name", f"gst{os.getpid()}ps",
                "netns", probe, check=False)
        if p.returncode != 0:
            return f"cannot make a veth pair: {p.stderr.strip() or p.returncode}"
        return None
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run ip: {e}"
    finally:
        _ip("link", "del", f"gst{os.getpid()}ph", check=False)
        _ip("netns", "del", probe, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace_processes(ns: str, grace_s: float = 3.0) -> List[int]:
    """SIGTERM, then SIGKILL, to what still runs in namespace `ns` (one of ours: only processes
    that fixtures started live there). Returns their pids."""
    p = _ip("netns", "pids", ns, check=False)
    pids = [int(t) for t in p.stdout.split() if t.isdigit()] if p.returncode == 0 else []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [pid for pid in pids if _alive(pid)]
        for pid in live:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace_s
        while live and time.monotonic() < end:
            live = [pid for pid in live if _alive(pid) and not _zombie(pid)]
            time.sleep(0.05)
    return pids


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def remove_stale() -> List[str]:
    """Removes the namespaces (and what runs in them) and root-namespace veth ends that an earlier
    run of these fixtures left behind when it was killed: names gpuscan-t<pid>-* and gst<pid>*
    whose pid no longer exists. Returns what it removed."""
    removed = []
    p = _ip("netns", "list", check=False)
    for line in p.stdout.splitlines():
        m = _NS_RE.match(line.strip())
        if m and not _alive(int(m.group(1))):
            name = line.split()[0]
            _kill_namespace_processes(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    p = _ip("-o", "link", "show", check=False)
    for line in p.stdout.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        m = _LINK_RE.match(name)
        if m and not _alive(int(m.group(1))):
            _ip("link", "del", name, check=False)
            removed.append(name)
    return removed


_made = 0  # namespaces this process has made: the second and later get a letter in their names


def _subnets_in_use() -> set:
    p = _ip("-4", "-o", "addr", "show", check=False)
    q = _ip("-4", "route", "show", "table", "all", check=False)
    return set(re.findall(r"\b(10\.213\.\d+)\.", p.stdout + q.stdout))


class VethNamespace:
    """A network namespace `name` (gpuscan-t<pid>-<role>) with its loopback up and one end of a
    veth pair, `ns_if` with `ns_ip`/24; the other end, `host_if` with `host_ip`/24, in the root
    namespace. Made by the constructor (RuntimeError when any step fails, after removing what
    was made), removed by destroy() or `with`."""

    def __init__(self, role: str = "srv", subnet: Optional[int] = None):
        global _made
        remove_stale()
        pid = os.getpid()
        letter = "" if _made == 0 else chr(ord("a") + (_made - 1) % 26)
        _made += 1
        self.name = f"{_NS_PREFIX}{pid}{letter}-{role}"
        self.host_if = f"gst{pid}{letter}h"  # at most 15 characters: gst + 7 digits + 2
        self.ns_if = f"gst{pid}{letter}s"
        used = _subnets_in_use()
        x = subnet if subnet is not None else 16 + (pid * 7 + _made) % 224
        for _ in range(256):
            if f"{_SUBNET}.{x}" not in used:
                break
            x = 16 + (x - 16 + 1) % 224
        else:
            raise RuntimeError(f"no free /24 under {_SUBNET}.16-239")
        self.subnet = f"{_SUBNET}.{x}.0/24"
        self.host_ip = f"{_SUBNET}.{x}.1"
        self.ns_ip = f"{_SUBNET}.{x}.2"
        self._made_ns = self._made_link = False
        try:
            _ip("netns", "add", self.name)
            self._made_ns = True
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if, "netns", self.name)
            self._made_link = True
            _ip("addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            _ip("-n", self.name, "addr", "add", f"{self.ns_ip}/24", "dev", self.ns_if)
            _ip("-n", self.name, "link", "set", self.ns_if, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
        except BaseException:
            self.destroy()
            raise

    # -- the link
    def link_down(self) -> None:
        """The root namespace's end of the veth pair down: the peer loses its carrier, packets
        stop both ways, no connection is reset (TCP only sees silence)."""
        _ip("link", "set", self.host_if, "down")

    def link_up(self) -> None:
        _ip("link", "set", self.host_if, "up")

    def link_is_up(self) -> bool:
        """The host end administratively up (its flags hold UP)."""
        flags = re.search(r"<([^>]*)>", _ip("-o", "link", "show", self.host_if).stdout)
        return bool(flags) and "UP" in flags.group(1).split(",")

    # -- running things inside
    def exec_args(self, args: Sequence[str]) -> List[str]:
        """`args` run inside the namespace (ip netns exec execs the program: same pid)."""
        return ["ip", "netns", "exec", self.name, *args]

    def run(self, args: Sequence[str], timeout: float = 30.0, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.exec_args(args), timeout=timeout, **kw)

    def pids(self) -> List[int]:
        p = _ip("netns", "pids", self.name, check=False)
        return [int(t) for t in p.stdout.split() if t.isdigit()]

    def destroy(self) -> None:
        """Removes everything this object made: processes still in the namespace (SIGTERM, then
        SIGKILL), the veth pair, the namespace. Safe to call twice."""
        if self._made_ns:
            _kill_namespace_processes(self.name)
        if self._made_link:
            _ip("link", "del", self.host_if, check=False)
            self._made_link = False
        if self._made_ns:
            _ip("netns", "del", self.name, check=False)
            self._made_ns = False

    def exists(self) -> Tuple[bool, bool]:
        """(the namespace exists, the host's veth end exists)."""
        ns = any(line.split()[0] == self.name for line in _ip("netns", "list", check=False).stdout.splitlines()
                 if line.strip())
        link = _ip("link", "show", self.host_if, check=False).returncode == 0
        return ns, link

    def __enter__(self) -> "VethNamespace":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()


# Run inside the namespace by NetnsServer.metrics(): the endpoint on the namespace's loopback
# answers whether or not the veth link is up.
_SCRAPE = ("import sys, urllib.request\n"
           "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n")


class NetnsServer(LoggedProcess):
    """gpuscan-server --address NS_IP:PORT --engine cpu --metrics-address 127.0.0.1:0 [extra...]
    inside `ns` (port 0: a free one, read back from the log). target: "NS_IP:PORT" for clients
    in the root namespace. Stopped by stop() or `with` (SIGTERM, then SIGKILL)."""

    def __init__(self, ns: VethNamespace, binary: str, extra: Sequence[str] = (), engine: str = "cpu",
                 port: int = 0, ready_s: float = 30.0):
        self.ns = ns
        args = ns.exec_args([binary, "--address", f"{ns.ns_ip}:{int(port)}", "--engine", engine,
                             "--log-level", "info", "--metrics-address", "127.0.0.1:0", *extra])
        super().__init__(args, _LISTENING, "gpuscan-server-netns", ready_s)
        self.target = self.ready.group(1)
        m = _METRICS_AT.search(self.log_text())
        self.metrics_url = f"http://{m.group(1)}/metrics" if m else None

    def metrics_text(self) -> str:
        if not self.metrics_url:
            raise RuntimeError("the server did not report a metrics address")
        p = self.ns.run([sys.executable, "-c", _SCRAPE, self.metrics_url], capture_output=True, text=True, timeout=15)
        if p.returncode != 0:
            raise RuntimeError(f"scraping {self.metrics_url} in {self.ns.name} failed: {p.stderr.strip()}")
        return p.stdout

    def metrics(self) -> Dict[str, float]:
        """The Prometheus samples: {'name{labels}': value} ('name' alone for a series without
        labels)."""
        return parse_prometheus(self.metrics_text())


def parse_prometheus(text: str) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def metric_sum(samples: Dict[str, float], name: str, **labels: str) -> float:
    """Sum of the samples of metric `name` whose labels include `labels`."""
    total = 0.0
    for key, value in samples.items():
        base = key.split("{", 1)[0]
        if base != name:
            continue
        if all(f'{k}="{v}"' in key for k, v in labels.items()):
            total += value
    return total
