"""A gpuscan-server process on a loopback port (a free one, port 0, read back from its log, unless
one is given), for tests and the bench. Not needed to use the client."""
from __future__ import annotations

import os
import warnings
import re
import signal
import subprocess
import tempfile
import time
from typing import Dict, Optional, Sequence

_LISTENING = re.compile(r"listening on (\S+)")


class LoggedProcess:
    """A child process whose stdout and stderr go to a temporary log file, started by the
    constructor, which returns once `ready` (a compiled pattern) matches the log (self.ready: that
    match); stopped (SIGTERM, then SIGKILL after grace_s; the log removed) by stop() or `with`,
    killed by kill(). env: the child's environment (default: ours). Shared by ServerProcess and the
    bench's peer (gpuscan._peer.PeerProcess)."""

    def __init__(self, args: Sequence[str], ready: "re.Pattern[str]", name: str, ready_s: float = 30.0,
                 env: Optional[Dict[str, str]] = None):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix=f"{name}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(list(args), stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        self.ready = self._wait_ready(ready, ready_s)

    def _wait_ready(self, ready: "re.Pattern[str]", ready_s: float) -> "re.Match[str]":
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            m = ready.search(self.log_text())
            if m:
                return m
            if self.proc.poll() is not None:
                text = self.log_text()
                self.stop()
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.02)
        text = self.log_text()
        self.stop()
        raise RuntimeError(f"{self.name} did not report its address in {ready_s} s:\n{text}")

    def log_text(self) -> str:
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash: no graceful shutdown, calls in flight break off. stop() still
        removes the log."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stop(self, grace_s: float = 10.0) -> Optional[int]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class ServerProcess(LoggedProcess):
    """gpuscan-server --address 127.0.0.1:PORT --engine ENGINE [--shm-dir SHM_DIR] [extra...];
    stopped by stop() or `with`, killed by kill(). shm_dir: serve shared memory from that directory
    (it must exist). port: 0 picks a free one; another (e.g. a killed server's, to restart it at
    the same address) must be free."""

    def __init__(self, binary: str, engine: str = "cpu", extra: Sequence[str] = (), ready_s: float = 30.0,
                 shm_dir: Optional[str] = None, port: int = 0):
        self.shm_dir = shm_dir
        args = [binary, "--address", f"127.0.0.1:{int(port)}", "--engine", engine, "--log-level", "info",
                *(["--shm-dir", shm_dir] if shm_dir else []), *extra]
        super().__init__(args, _LISTENING, "gpuscan-server", ready_s)
        self.target = self.ready.group(1)


def default_server_binary() -> Optional[str]:
    """$GPUSCAN_SERVER_BIN, else build/bin/gpuscan-server of the repository this file lives in.
    GPUSCAN_SERVER is the server's address (the CLI's meaning); naming a file there still works
    for this release, with a DeprecationWarning."""
    env = os.environ.get("GPUSCAN_SERVER_BIN")
    if env:
        return env
    old = os.environ.get("GPUSCAN_SERVER")
    if old and os.path.isfile(old):
        warnings.warn("gpuscan: GPUSCAN_SERVER names the server binary here; that is GPUSCAN_SERVER_BIN now "
                      "(GPUSCAN_SERVER is the server's address, as the CLI reads it)", DeprecationWarning, stacklevel=2)
        return old
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.join(here, "..", ".."), os.path.join(here, "..", "..", "..")):
        cand = os.path.normpath(os.path.join(root, "build", "bin", "gpuscan-server"))
        if os.access(cand, os.X_OK):
            return cand
    return None
