"""A gpuscan-server process on a loopback port (a free one, port 0, read back from its log, unless
one is given), for tests and the bench. Not needed to use the client."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from typing import Optional, Sequence

_LISTENING = re.compile(r"listening on (\S+)")


class ServerProcess:
    """gpuscan-server --address 127.0.0.1:PORT --engine ENGINE [--shm-dir SHM_DIR] [extra...];
    stopped by stop() or `with`, killed by kill(). shm_dir: serve shared memory from that directory
    (it must exist). port: 0 picks a free one; another (e.g. a killed server's, to restart it at
    the same address) must be free."""

    def __init__(self, binary: str, engine: str = "cpu", extra: Sequence[str] = (), ready_s: float = 30.0,
                 shm_dir: Optional[str] = None, port: int = 0):
        self.log = tempfile.NamedTemporaryFile(prefix="gpuscan-server-", suffix=".log", delete=False)
        self.shm_dir = shm_dir
        args = [binary, "--address", f"127.0.0.1:{int(port)}", "--engine", engine, "--log-level", "info",
                *(["--shm-dir", shm_dir] if shm_dir else []), *extra]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.target = self._wait_listening(ready_s)

    def _wait_listening(self, ready_s: float) -> str:
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            m = _LISTENING.search(self.log_text())
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                raise RuntimeError(f"gpuscan-server exited with {self.proc.returncode}:\n{self.log_text()}")
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"gpuscan-server did not report its address in {ready_s} s:\n{self.log_text()}")

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

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def default_server_binary() -> Optional[str]:
    """$GPUSCAN_SERVER, else build/bin/gpuscan-server of the repository this file lives in."""
    env = os.environ.get("GPUSCAN_SERVER")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.join(here, "..", ".."), os.path.join(here, "..", "..", "..")):
        cand = os.path.normpath(os.path.join(root, "build", "bin", "gpuscan-server"))
        if os.access(cand, os.X_OK):
            return cand
    return None
