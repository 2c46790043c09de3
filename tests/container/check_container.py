#!/usr/bin/env python3
"""The gpuscan image, run and checked from the host (ctest label container; `make test-container`).

Runs the image named by GPUSCAN_CONTAINER_IMAGE (exit 77, skipped, when it names none) with
docker or podman where their `run` works here, else `buildah run --isolation chroot` (which needs
no OCI runtime); GPUSCAN_CONTAINER_ENGINE=docker|podman|buildah picks one. Host networking, free
ports, configured only through GPUSCAN_* variables. From the host it checks:

  image        config: ENTRYPOINT gpuscan-server, numeric non-root USER, a HEALTHCHECK running
               `gpuscan health`; contents: only gpuscan and gpuscan-server in /usr/local/bin, no
               compiler, no -dev package
  config       the server listens where GPUSCAN_ADDRESS says, serves /metrics where
               GPUSCAN_METRICS_ADDRESS says, reports GPUSCAN_MAX_CONCURRENT/_QUEUED in `info`
  calls        health, info; scan, reduce, compact, sort, histogram of random arrays against
               numpy, through the CLI (build/bin/gpuscan) and through the Python client
  user         the server process runs as uid/gid 10001
  healthcheck  the image's HEALTHCHECK command, run inside the container, exits 0
  sigterm      SIGTERM to the container's process under load: every call ends with its correct
               result or UNAVAILABLE/CANCELLED, the process exits 0 within the shutdown grace

Exit 0 pass, 1 fail, 77 skipped.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
# Checker and free_port: the deploy checks' own (tests/deploy/deploy_common.py).
sys.path.insert(0, os.path.join(HERE, "..", "deploy"))
from deploy_common import Checker, free_port  # noqa: E402

UID = 10001
GRACE_MS = 4000
LISTENING = re.compile(r"listening on (\S+)")
# The packages of the builder that must not reach the runtime image.
BUILD_ONLY = re.compile(r"^(gcc(-\d+)?|g\+\+(-\d+)?|cpp(-\d+)?|clang(-\d+)?|binutils|cmake|make|build-essential"
                        r"|cuda-nvcc.*|cuda-toolkit.*|.*-dev)$")


def run(argv, timeout=120, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def works(argv, timeout=60):
    try:
        return run(argv, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# --------------------------------------------------------------------------- engines

class Engine:
    """One container of the image: start() runs its ENTRYPOINT in the foreground (a LoggedProcess
    whose exit status is the container's), exec() runs a command inside it, pid() is the host pid
    of its main process, terminate() sends that process SIGTERM, as `docker stop` does."""

    def __init__(self, image, name):
        self.image, self.name = image, name

    def cleanup(self):
        pass


class DockerLike(Engine):
    def __init__(self, tool, image, name):
        super().__init__(image, name)
        self.tool = tool
        self.env = {}

    def config(self):
        info = json.loads(run([self.tool, "image", "inspect", self.image]).stdout)[0]
        cfg = dict(info.get("Config") or {})
        # podman keeps the Docker-format health check outside Config.
        cfg.setdefault("Healthcheck", info.get("HealthCheck") or info.get("Healthcheck"))
        return cfg

    def start(self, env, LoggedProcess):
        self.env = env
        argv = [self.tool, "run", "--rm", "--name", self.name, "--network", "host"]
        for k, v in env.items():
            argv += ["-e", f"{k}={v}"]
        return LoggedProcess(argv + [self.image], LISTENING, "container", ready_s=120)

    def exec(self, argv, timeout=60):
        return run([self.tool, "exec", self.name, *argv], timeout=timeout)

    def pid(self):
        return int(run([self.tool, "inspect", "-f", "{{.State.Pid}}", self.name]).stdout.strip())

    def terminate(self):
        run([self.tool, "kill", "--signal", "TERM", self.name])

    def cleanup(self):
        run([self.tool, "rm", "-f", self.name])


class Buildah(Engine):
    """`buildah run` starts the given command, not the ENTRYPOINT (read from the image), and does
    not forward signals (it kills its child): terminate() signals the server process itself,
    which shares the host's pid namespace under chroot isolation."""

    def __init__(self, image, name):
        super().__init__(image, name)
        p = run(["buildah", "from", "--pull=never", "--name", name, image])
        if p.returncode != 0:
            raise RuntimeError(f"buildah from {image}: {p.stderr.strip()}")
        self.env = {}
        self._pid = None

    def config(self):
        info = json.loads(run(["buildah", "inspect", "--type", "image", self.image]).stdout)
        return (info.get("Docker") or {}).get("config") or {}

    def _run_argv(self, env):
        argv = ["buildah", "run", "--isolation", "chroot", "--network", "host"]
        for k, v in env.items():
            argv += ["--env", f"{k}={v}"]
        return argv + [self.name]

    def start(self, env, LoggedProcess):
        self.env = env
        return LoggedProcess(self._run_argv(env) + self.config()["Entrypoint"], LISTENING, "container", ready_s=120)

    def exec(self, argv, timeout=60):
        # A second process in the same root file system and network, with the same environment.
        return run(self._run_argv(self.env) + list(argv), timeout=timeout)

    def pid(self):
        if self._pid is None:
            want = f"GPUSCAN_ADDRESS={self.env['GPUSCAN_ADDRESS']}".encode()
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    if os.path.basename(os.readlink(f"/proc/{d}/exe")) != "gpuscan-server":
                        continue
                    with open(f"/proc/{d}/environ", "rb") as f:
                        if want in f.read().split(b"\0"):
                            self._pid = int(d)
                            break
                except OSError:
                    continue
        if self._pid is None:
            raise RuntimeError("no gpuscan-server process with this container's GPUSCAN_ADDRESS")
        return self._pid

    def terminate(self):
        os.kill(self.pid(), signal.SIGTERM)

    def cleanup(self):
        run(["buildah", "rm", self.name])


def pick_engine(image, name):
    want = os.environ.get("GPUSCAN_CONTAINER_ENGINE", "")
    if want in ("docker", "podman"):
        return DockerLike(want, image, name)
    if want == "buildah":
        return Buildah(image, name)
    if shutil.which("docker") and works(["docker", "info"]) and works(["docker", "image", "inspect", image]):
        return DockerLike("docker", image, name)
    # podman's run needs an OCI runtime that some sandboxes refuse (crun: setrlimit RLIMIT_NOFILE).
    if shutil.which("podman") and works(["podman", "run", "--rm", "--network", "host", "--entrypoint", "true", image]):
        return DockerLike("podman", image, name)
    if shutil.which("buildah"):
        return Buildah(image, name)
    raise RuntimeError("no docker engine answers, podman cannot run containers here and buildah is not installed")


# --------------------------------------------------------------------------- checks

def check_config(chk, cfg):
    chk.check(cfg.get("Entrypoint") == ["gpuscan-server"], "image ENTRYPOINT is [\"gpuscan-server\"]",
              cfg.get("Entrypoint"))
    user = str(cfg.get("User", ""))
    chk.check(user.split(":")[0] == str(UID), f"image USER is numeric {UID}", user)
    test = (cfg.get("Healthcheck") or {}).get("Test") or []
    chk.check(test[:1] == ["CMD"] and test[1:3] == ["gpuscan", "health"],
              "image HEALTHCHECK is CMD gpuscan health … (kept: the image is in Docker format)", cfg.get("Healthcheck"))
    env = dict(e.split("=", 1) for e in cfg.get("Env") or [])
    chk.check(env.get("GPUSCAN_ADDRESS") == "0.0.0.0:50051", "image ENV GPUSCAN_ADDRESS=0.0.0.0:50051", env)
    return test[1:], (cfg.get("Healthcheck") or {}).get("Timeout") or 0


def check_contents(chk, engine):
    p = engine.exec(["ls", "/usr/local/bin"])
    chk.check(p.returncode == 0 and sorted(p.stdout.split()) == ["gpuscan", "gpuscan-server"],
              "/usr/local/bin holds gpuscan and gpuscan-server only", p.stdout + p.stderr)
    tools = "cc c++ gcc g++ clang nvcc cmake make ld as"
    p = engine.exec(["sh", "-c", f"for t in {tools}; do command -v $t; done; true"])
    chk.check(p.returncode == 0 and not p.stdout.strip(), f"no compiler or build tool on PATH ({tools})",
              p.stdout + p.stderr)
    p = engine.exec(["dpkg-query", "-W", "-f", "${Package}\\n"])
    build_only = [n for n in p.stdout.split() if BUILD_ONLY.match(n.split(":")[0])]
    chk.check(p.returncode == 0 and not build_only, "no compiler, binutils, cmake or -dev package installed",
              build_only or p.stderr)
    print(f"note: {len(p.stdout.split())} packages in the image")


def cli(a, addr, *args, timeout=120):
    return run([a.cli, "--server", addr, "--no-progress", *args], timeout=timeout)


def check_cli_calls(chk, a, addr, rng, np):
    d = a.work_dir
    x = rng.integers(-1000, 1000, size=200_003, dtype=np.int32)
    x[x == 0] = 7  # never zeros: a missing element must change the result
    f = rng.standard_normal(100_001).astype(np.float64) + 0.5
    h = rng.integers(1, 1000, size=150_000, dtype=np.int32)
    np.save(f"{d}/x.npy", x)
    np.save(f"{d}/f.npy", f)
    np.save(f"{d}/h.npy", h)

    def result(args, out, expected, what, exact=True):
        p = cli(a, addr, *args, "-o", out)
        if not chk.check(p.returncode == 0, f"CLI {what}: exits 0", p.stderr.strip()):
            return
        got = np.load(out)
        same = got.shape == expected.shape and (np.array_equal(got, expected) if exact else
                                                np.allclose(got, expected, rtol=1e-9, atol=1e-6))
        chk.check(same, f"CLI {what}: equals numpy", f"got {got[:8]}… ({got.shape}), want {expected[:8]}… "
                                                       f"({expected.shape})")

    result(["scan", "-i", f"{d}/x.npy"], f"{d}/scan.npy", np.cumsum(x, dtype=np.int32), "scan int32")
    result(["scan", "-i", f"{d}/f.npy"], f"{d}/fscan.npy", np.cumsum(f), "scan float64", exact=False)
    result(["compact", "-i", f"{d}/x.npy", "--predicate", "gt", "--threshold", "0"], f"{d}/compact.npy",
           x[x > 0], "compact gt 0")
    result(["sort", "-i", f"{d}/x.npy"], f"{d}/sort.npy", np.sort(x, kind="stable"), "sort int32")
    result(["histogram", "-i", f"{d}/h.npy", "--bins", "50", "--range", "0,1000"], f"{d}/hist.npy",
           np.histogram(h, 50, range=(0, 1000))[0].astype(np.uint64), "histogram 50 bins")
    for op, want in (("sum", int(x.astype(np.int64).sum().astype(np.int32))), ("max", int(x.max())),
                     ("min", int(x.min()))):
        p = cli(a, addr, "--json", "reduce", "-i", f"{d}/x.npy", "--op", op)
        try:
            got = json.loads(p.stdout)["value"]
        except (ValueError, KeyError):
            got = None
        chk.check(p.returncode == 0 and got == want, f"CLI reduce {op}: equals numpy ({want})",
                  f"exit {p.returncode}, {p.stdout.strip()} {p.stderr.strip()}")


def check_python_calls(chk, gpuscan, addr, rng, np):
    x = rng.integers(-10**6, 10**6, size=300_007, dtype=np.int64)
    x[x == 0] = 3
    f = rng.random(100_000, dtype=np.float32) + 0.25
    with gpuscan.Client(addr, timeout=60) as c:
        chk.check(np.array_equal(c.scan(x), np.cumsum(x)), "Python scan int64 equals numpy", "differs")
        chk.check(np.array_equal(c.scan(x, exclusive=True), np.concatenate(([0], np.cumsum(x)[:-1]))),
                  "Python exclusive scan equals numpy", "differs")
        chk.check(np.allclose(c.scan(f), np.cumsum(f, dtype=np.float64), rtol=1e-3), "Python scan float32 ≈ numpy",
                  "differs")
        chk.check(int(c.reduce(x)) == int(x.sum()) and int(c.reduce(x, op="max")) == int(x.max()),
                  "Python reduce sum/max equal numpy", (c.reduce(x), x.sum()))
        v, i = c.compact(x, predicate=("lt", 0), indices=True)
        chk.check(np.array_equal(v, x[x < 0]) and np.array_equal(i, np.nonzero(x < 0)[0]),
                  "Python compact (values and indices) equals numpy", (v[:5], i[:5]))
        chk.check(np.array_equal(c.sort(x), np.sort(x, kind="stable")), "Python sort equals numpy", "differs")
        chk.check(np.array_equal(c.argsort(x), np.argsort(x, kind="stable")), "Python argsort equals numpy",
                  "differs")
        counts, edges = c.histogram(f, 32, range=(0.25, 1.25))
        want_counts, want_edges = np.histogram(f, 32, range=(0.25, 1.25))
        chk.check(np.array_equal(counts, want_counts) and np.allclose(edges, want_edges),
                  "Python histogram equals numpy.histogram", (counts[:5], want_counts[:5]))


def check_uid(chk, engine):
    try:
        with open(f"/proc/{engine.pid()}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
    except (OSError, RuntimeError, ValueError) as e:
        chk.check(False, f"the server process runs as uid {UID}", e)
        return
    uids, gids = status["Uid"].split(), status["Gid"].split()
    chk.check(set(uids) == {str(UID)} and set(gids) == {str(UID)},
              f"the server process runs as uid/gid {UID} (not root)", f"Uid {uids} Gid {gids}")


def check_sigterm(chk, engine, proc, gpuscan, addr, np, seed):
    """Clients scan in a loop; SIGTERM once some calls completed. Every call must end with its
    correct result or a clean status; the container's process must exit 0 within the grace."""
    stop = threading.Event()
    lock = threading.Lock()
    tally = {"correct": 0, "wrong": 0, "clean": {}, "other": [], "in_flight_ok": 0}
    term_at = [None]

    def client(k):
        rng = np.random.default_rng(seed + 1000 + k)
        with gpuscan.Client(addr, timeout=60, retries=0) as c:
            while not stop.is_set():
                x = rng.integers(1, 100, size=1_000_000 + k, dtype=np.int32)  # never zeros
                started = time.monotonic()
                try:
                    y = c.scan(x)
                    ok = np.array_equal(y, np.cumsum(x, dtype=np.int32))
                    with lock:
                        tally["correct" if ok else "wrong"] += 1
                        if ok and term_at[0] is not None and started < term_at[0]:
                            tally["in_flight_ok"] += 1
                except (gpuscan.Unavailable, gpuscan.Cancelled) as e:
                    with lock:
                        name = type(e).__name__
                        tally["clean"][name] = tally["clean"].get(name, 0) + 1
                    if term_at[0] is None:
                        time.sleep(0.05)
                    else:
                        time.sleep(0.2)  # the server is going or gone: no busy loop
                except Exception as e:  # noqa: BLE001: any other end is the finding
                    with lock:
                        tally["other"].append(f"{type(e).__name__}: {e}"[:300])

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and tally["correct"] + tally["wrong"] < 8:
        time.sleep(0.05)
    pid = engine.pid()
    gone_at = [None]

    def watch():  # when the server process itself is gone (the runner may take longer to exit)
        while os.path.exists(f"/proc/{pid}") and not stop.is_set():
            time.sleep(0.02)
        gone_at[0] = time.monotonic()

    watcher = threading.Thread(target=watch, daemon=True)
    term_at[0] = time.monotonic()
    engine.terminate()
    watcher.start()
    try:
        rc = proc.proc.wait(GRACE_MS / 1000 + 15)
        took = time.monotonic() - term_at[0]
    except subprocess.TimeoutExpired:
        rc, took = "still running", None
    watcher.join(1)
    time.sleep(0.5)  # let the clients see the closed port
    stop.set()
    for t in threads:
        t.join(70)
    for line in proc.log_text().splitlines():
        if re.search(r"SIGTERM|shut|grace|cancel", line, re.I):
            print(f"  container: {line}")
    print(f"sigterm: {tally['correct']} correct calls ({tally['in_flight_ok']} of them in flight at the SIGTERM), "
          f"{tally['wrong']} wrong, clean errors {tally['clean']}, other errors {len(tally['other'])}; "
          f"server gone {'%.2f s' % (gone_at[0] - term_at[0]) if gone_at[0] else '?'}, container exit {rc} "
          f"{'%.2f s' % took if took is not None else ''} after SIGTERM")
    chk.check(tally["correct"] >= 8, "load before the SIGTERM: calls completed correctly", tally["correct"])
    chk.check(tally["wrong"] == 0, "SIGTERM under load: no wrong result", tally["wrong"])
    chk.check(not tally["other"], "SIGTERM under load: every failed call ends UNAVAILABLE or CANCELLED",
              tally["other"][:5])
    chk.check(all(not t.is_alive() for t in threads), "SIGTERM under load: no call hangs", "a client is stuck")
    chk.check(rc == 0, f"the container's process exits 0 after SIGTERM (within grace {GRACE_MS} ms + 15 s)",
              f"exit {rc}\n{proc.log_text()[-3000:]}")
    return rc


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", required=True, help="the host's gpuscan CLI (build/bin/gpuscan)")
    p.add_argument("--python-pkg", required=True, help="the gpuscan Python package's directory (build/python/pkg)")
    p.add_argument("--work-dir", default=os.getcwd())
    a = p.parse_args()

    image = os.environ.get("GPUSCAN_CONTAINER_IMAGE", "")
    if not image:
        print("skip: GPUSCAN_CONTAINER_IMAGE names no image (`make test-container` builds gpuscan:latest and runs this)")
        return SKIP
    sys.path.insert(0, a.python_pkg)
    try:
        import numpy as np
        import gpuscan
        from gpuscan.testing import LoggedProcess
    except ImportError as e:
        print(f"FAIL: the gpuscan Python package ({a.python_pkg}) does not import: {e}")
        return 1
    a.work_dir = os.path.join(a.work_dir, "container-work")
    os.makedirs(a.work_dir, exist_ok=True)

    chk = Checker()
    seed = int(os.environ.get("GPUSCAN_TEST_SEED", time.time_ns() % 2**32))
    print(f"image {image}; seed {seed} (GPUSCAN_TEST_SEED repeats it)")
    rng = np.random.default_rng(seed)
    try:
        engine = pick_engine(image, f"gpuscan-test-{os.getpid()}")
    except RuntimeError as e:
        print(f"FAIL: {e}")
        return 1
    print(f"engine: {type(engine).__name__} {getattr(engine, 'tool', 'buildah')}")
    t0 = time.monotonic()
    proc = None
    try:
        health_cmd, hc_timeout_ns = check_config(chk, engine.config())
        addr = f"127.0.0.1:{free_port()}"
        metrics = f"127.0.0.1:{free_port()}"
        # Everything through the environment, as a deployment sets it; GPUSCAN_SERVER points the
        # image's HEALTHCHECK (the CLI's default 127.0.0.1:50051) at the moved port.
        env = {"GPUSCAN_ADDRESS": addr, "GPUSCAN_METRICS_ADDRESS": metrics, "GPUSCAN_SERVER": addr,
               "GPUSCAN_SHUTDOWN_GRACE": str(GRACE_MS), "GPUSCAN_MAX_CONCURRENT": "7",
               "GPUSCAN_MAX_QUEUED": "33", "GPUSCAN_LOG_LEVEL": "info"}
        try:
            proc = engine.start(env, LoggedProcess)
        except RuntimeError as e:
            chk.check(False, "the container starts and its server listens", e)
            return chk.done()
        chk.check(proc.ready.group(1) == addr, "the server listens on GPUSCAN_ADDRESS", proc.ready.group(0))
        print(f"container up in {time.monotonic() - t0:.1f} s")

        p = cli(a, addr, "health")
        chk.check(p.returncode == 0 and "SERVING" in p.stdout, "host `gpuscan health`: SERVING, exit 0",
                  f"exit {p.returncode}: {p.stdout} {p.stderr}")
        p = cli(a, addr, "info")
        chk.check(p.returncode == 0 and re.search(r"engine\s+\S+", p.stdout), "host `gpuscan info` exits 0",
                  f"exit {p.returncode}: {p.stderr}")
        chk.check(re.search(r"\b7 calls at once, 33 queued", p.stdout),
                  "info shows GPUSCAN_MAX_CONCURRENT=7 and GPUSCAN_MAX_QUEUED=33", p.stdout)
        m = re.search(r"engine\s+(.*)", p.stdout)
        print(f"note: engine {m.group(1).strip() if m else '?'}")

        check_contents(chk, engine)
        check_cli_calls(chk, a, addr, rng, np)
        check_python_calls(chk, gpuscan, addr, rng, np)

        try:
            with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as r:
                status, body = r.status, r.read().decode(errors="replace")
        except OSError as e:
            status, body = None, str(e)
        served = re.search(r'^gpuscan_requests_total\{[^}]*\}\s+([0-9.e+]+)', body, re.M)
        chk.check(status == 200 and served and float(served.group(1)) > 0,
                  "/metrics on GPUSCAN_METRICS_ADDRESS answers 200 with gpuscan_requests_total > 0",
                  f"{status}: {body[:500]}")

        check_uid(chk, engine)

        timeout_s = hc_timeout_ns / 1e9 if hc_timeout_ns else 30
        try:
            p = engine.exec(health_cmd, timeout=timeout_s + 30)
            chk.check(p.returncode == 0, f"HEALTHCHECK ({' '.join(health_cmd)}) run inside the container exits 0",
                      f"exit {p.returncode}: {p.stdout} {p.stderr}")
        except subprocess.TimeoutExpired:
            chk.check(False, "HEALTHCHECK run inside the container exits 0", f"ran past {timeout_s + 30} s")

        check_sigterm(chk, engine, proc, gpuscan, addr, np, seed)
        p = cli(a, addr, "--timeout", "3", "health")
        chk.check(p.returncode != 0, "health fails once the container has stopped", f"exit {p.returncode}")
    finally:
        if proc is not None:
            if proc.alive() or chk.failures:
                print(f"container log (tail):\n{proc.log_text()[-3000:]}")
            proc.stop()
        engine.cleanup()
    print(f"container checks took {time.monotonic() - t0:.1f} s")
    return chk.done()


if __name__ == "__main__":
    sys.exit(main())
