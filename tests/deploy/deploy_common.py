"""What the deploy checks share (check_deploy.py and its manifests module, check_monitoring.py,
tests/container/check_container.py): the Checker that prints and counts findings, the YAML
helpers, the ports the deployment serves on, the server's configuration contract (its GPUSCAN_
environment names, checked against `gpuscan-server --help`) and free_port."""
import re
import socket
import subprocess
import sys

GRPC_PORT = 50051
METRICS_PORT = 9090

# The configuration contract (server flags and their environment names). While `gpuscan-server
# --help` shows no GPUSCAN_ names yet, keys are checked against this list; once it does, against
# the help text itself.
SERVER_ENV = {
    "GPUSCAN_ADDRESS", "GPUSCAN_ENGINE", "GPUSCAN_DEVICE", "GPUSCAN_STREAMS",
    "GPUSCAN_MAX_CONCURRENT", "GPUSCAN_MAX_QUEUED", "GPUSCAN_MAX_REQUEST_BYTES",
    "GPUSCAN_CHUNK_BYTES", "GPUSCAN_WORKERS", "GPUSCAN_CPU_THREADS", "GPUSCAN_SHUTDOWN_GRACE",
    "GPUSCAN_LOG_LEVEL", "GPUSCAN_METRICS_ADDRESS", "GPUSCAN_TLS_CERT", "GPUSCAN_TLS_KEY",
    "GPUSCAN_TLS_CLIENT_CA",
}


class Checker:
    def __init__(self):
        self.failures = []

    def ok(self, what):
        print(f"ok: {what}")

    def check(self, cond, what, found=""):
        if cond:
            self.ok(what)
        else:
            self.failures.append(what)
            print(f"FAIL: {what}\n      found: {found}")
        return cond

    def parsed(self, what, load):
        """load()'s value, `what` reported ok; None, `what` failed with the error, when it raises
        (any parse error is the finding)."""
        try:
            value = load()
        except Exception as e:  # noqa: BLE001
            self.check(False, what, e)
            return None
        self.ok(what)
        return value

    def done(self):
        if self.failures:
            print(f"\n{len(self.failures)} check(s) failed:")
            for f in self.failures:
                print(f"  - {f}")
            return 1
        return 0


def load_yaml(path):
    try:
        import yaml
    except ImportError:
        sys.exit("PyYAML missing: install python3-yaml (scripts/install-deps.sh does)")
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def dig(obj, *keys, default=None):
    for k in keys:
        if isinstance(obj, dict) and k in obj:
            obj = obj[k]
        elif isinstance(obj, list) and isinstance(k, int) and -len(obj) <= k < len(obj):
            obj = obj[k]
        else:
            return default
    return obj


_help_cache = {}


def run_help(binary):
    """(exit code, output) of `binary --help`, once per binary."""
    if binary not in _help_cache:
        try:
            p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
            _help_cache[binary] = (p.returncode, p.stdout + p.stderr)
        except OSError as e:
            _help_cache[binary] = (127, f"cannot run {binary}: {e}")
    return _help_cache[binary]


def known_env_names(server, chk):
    """The GPUSCAN_* names the server accepts: from its --help once it lists them, else the contract."""
    first = server not in _help_cache
    rc, text = run_help(server)
    listed = set(re.findall(r"\bGPUSCAN_[A-Z0-9_]+", text))
    if first:
        chk.check(rc == 0, "gpuscan-server --help exits 0", f"exit {rc}: {text[-500:]}")
        if listed:
            print(f"note: --help lists {len(listed)} GPUSCAN_ names: strict check against them")
        else:
            print("note: --help lists no GPUSCAN_ names yet (env support not merged): checking against "
                  "the contract's names, and each key's flag where --help already has it")
    return (listed, text, True) if listed else (SERVER_ENV, text, False)


def check_env_keys(chk, where, keys, server):
    names, help_text, strict = known_env_names(server, chk)
    for key in sorted(keys):
        if strict:
            chk.check(key in names, f"{where}: {key} is listed by gpuscan-server --help",
                      f"--help lists {sorted(names)}")
            continue
        flag = "--" + key[len("GPUSCAN_"):].lower().replace("_", "-")
        chk.check(key in names, f"{where}: {key} is a contract name ({flag})",
                  f"not among {sorted(names)}")
        if key in names and flag not in help_text:
            print(f"note: {where}: {flag} not in --help yet (being added)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
