#!/usr/bin/env python3
"""Deployment checks that need no Docker engine and no cluster (ctest label `deploy`).

  manifests            deploy/k8s/*.yaml and deploy/docker-compose.yml parse and hold what they must
  dockerfile           the Dockerfile's stages, user, ports, health check, entry point, install steps
  runtime_packages     scripts/install-deps.sh --print resolves every package name on this machine
  runtime_libraries    the --runtime packages (with their dependencies) own every library ldd finds
  container_commands   the Dockerfile's ENTRYPOINT and HEALTHCHECK, run with the built binaries

Every failure says what was found. Exit 0 pass, 1 fail, 77 skipped (ctest SKIP_RETURN_CODE).
"""
import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

SKIP = 77
GRPC_PORT = 50051
METRICS_PORT = 9090
CUDA_ARCHS = ("80", "86", "89", "90")

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


# --------------------------------------------------------------------------- manifests

def cmd_manifests(a):
    chk = Checker()
    k8s = os.path.join(a.source_dir, "deploy", "k8s")
    docs = {}
    for name in ("configmap.yaml", "deployment.yaml", "service.yaml"):
        path = os.path.join(k8s, name)
        try:
            docs[name] = load_yaml(path)
            chk.ok(f"{name} parses ({len(docs[name])} document(s))")
        except Exception as e:  # noqa: BLE001: any parse error is the finding
            chk.check(False, f"{name} parses", e)
            docs[name] = []

    def find(kind):
        return next((d for ds in docs.values() for d in ds if d.get("kind") == kind), None)

    cm, dep, svc = find("ConfigMap"), find("Deployment"), find("Service")
    for kind, d in (("ConfigMap", cm), ("Deployment", dep), ("Service", svc)):
        chk.check(d is not None, f"a {kind} is defined", [d.get("kind") for ds in docs.values() for d in ds])
    if not (cm and dep and svc):
        return chk.done()

    kust = os.path.join(k8s, "kustomization.yaml")
    if os.path.exists(kust):
        res = dig(load_yaml(kust), 0, "resources", default=[])
        chk.check(sorted(res) == sorted(docs), "kustomization.yaml lists the three manifests", res)

    # ConfigMap: known names, listening addresses on the declared ports.
    data = cm.get("data") or {}
    check_env_keys(chk, "ConfigMap", data.keys(), a.server)
    chk.check(all(isinstance(v, str) for v in data.values()), "ConfigMap values are strings",
              {k: type(v).__name__ for k, v in data.items()})
    chk.check(data.get("GPUSCAN_ADDRESS", "").endswith(f":{GRPC_PORT}") and
              data.get("GPUSCAN_ADDRESS", "").startswith("0.0.0.0"),
              f"ConfigMap GPUSCAN_ADDRESS listens on 0.0.0.0:{GRPC_PORT}", data.get("GPUSCAN_ADDRESS"))
    chk.check(data.get("GPUSCAN_METRICS_ADDRESS", "").endswith(f":{METRICS_PORT}"),
              f"ConfigMap GPUSCAN_METRICS_ADDRESS on port {METRICS_PORT}", data.get("GPUSCAN_METRICS_ADDRESS"))

    # Deployment: pod template, container, GPU, ports, probes, scraping, shutdown, user.
    pod = dig(dep, "spec", "template", default={})
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    chk.check(len(containers) == 1, "Deployment has one container", [c.get("name") for c in containers])
    c = containers[0] if containers else {}
    sel = dig(dep, "spec", "selector", "matchLabels", default={})
    labels = dig(pod, "metadata", "labels", default={})
    chk.check(sel and all(labels.get(k) == v for k, v in sel.items()),
              "Deployment selector matches the pod labels", f"selector {sel}, labels {labels}")

    gpu = dig(c, "resources", "limits", "nvidia.com/gpu")
    chk.check(str(gpu) == "1", "container limits nvidia.com/gpu: 1", dig(c, "resources"))

    ports = {p.get("containerPort"): p.get("name") for p in c.get("ports") or []}
    chk.check(ports.get(GRPC_PORT) == "grpc", f"container port {GRPC_PORT} named grpc", ports)
    chk.check(ports.get(METRICS_PORT) == "metrics", f"container port {METRICS_PORT} named metrics", ports)

    live, ready = c.get("livenessProbe") or {}, c.get("readinessProbe") or {}
    chk.check(dig(live, "grpc", "port") == GRPC_PORT, f"livenessProbe is gRPC on port {GRPC_PORT}", live)
    chk.check(dig(ready, "grpc", "port") == GRPC_PORT, f"readinessProbe is gRPC on port {GRPC_PORT}", ready)
    chk.check(dig(ready, "grpc", "service") == "gpuscan.v1.GpuScan",
              "readinessProbe asks for service gpuscan.v1.GpuScan", ready)
    chk.check(dig(live, "grpc", "service", default="") in ("", "gpuscan.v1.GpuScan"),
              "livenessProbe asks for a service the server reports", live)

    ann = dig(pod, "metadata", "annotations", default={})
    chk.check(str(ann.get("prometheus.io/scrape")) == "true", "pod annotated prometheus.io/scrape: \"true\"", ann)
    chk.check(ann.get("prometheus.io/port") == str(METRICS_PORT),
              f"pod annotated prometheus.io/port: \"{METRICS_PORT}\" (a string)", ann)
    chk.check(ann.get("prometheus.io/path") == "/metrics", "pod annotated prometheus.io/path: /metrics", ann)

    refs = [dig(e, "configMapRef", "name") for e in c.get("envFrom") or []]
    cm_name = dig(cm, "metadata", "name")
    chk.check(cm_name in refs, f"container takes envFrom the ConfigMap {cm_name}", c.get("envFrom"))
    env_names = {e.get("name") for e in c.get("env") or []}
    if env_names:
        check_env_keys(chk, "Deployment env", {n for n in env_names if n.startswith("GPUSCAN_")}, a.server)

    grace_s = spec.get("terminationGracePeriodSeconds", 30)
    grace_ms = int(data.get("GPUSCAN_SHUTDOWN_GRACE", "5000"))
    chk.check(grace_s * 1000 > grace_ms,
              "terminationGracePeriodSeconds exceeds GPUSCAN_SHUTDOWN_GRACE",
              f"{grace_s} s vs {grace_ms} ms")

    non_root = dig(spec, "securityContext", "runAsNonRoot") or dig(c, "securityContext", "runAsNonRoot")
    chk.check(non_root is True, "securityContext runAsNonRoot: true",
              {"pod": spec.get("securityContext"), "container": c.get("securityContext")})

    # Service: headless, the gRPC port, selecting the pods.
    chk.check(dig(svc, "spec", "clusterIP") == "None",
              "Service is headless (clusterIP: None) so clients balance per call", dig(svc, "spec", "clusterIP"))
    sports = dig(svc, "spec", "ports", default=[])
    chk.check(any(p.get("port") == GRPC_PORT and p.get("targetPort") in (GRPC_PORT, "grpc") for p in sports),
              f"Service exposes the gRPC port {GRPC_PORT}", sports)
    ssel = dig(svc, "spec", "selector", default={})
    chk.check(ssel and all(labels.get(k) == v for k, v in ssel.items()),
              "Service selector matches the pod labels", f"selector {ssel}, labels {labels}")

    # Compose: server replicas (an nvidia GPU reserved each, both ports offered, built from the
    # repository) behind a balancer service running deploy/haproxy/haproxy.cfg, and the nginx
    # one (deploy/nginx/nginx.conf) under its profile.
    compose_path = os.path.join(a.source_dir, "deploy", "docker-compose.yml")
    try:
        compose = load_yaml(compose_path)[0]
        chk.ok("docker-compose.yml parses")
    except Exception as e:  # noqa: BLE001
        chk.check(False, "docker-compose.yml parses", e)
        return chk.done()
    services = compose.get("services") or {}
    balancers = {n: s for n, s in services.items() if "haproxy" in str(s.get("image", ""))}
    nginxes = {n: s for n, s in services.items() if "nginx" in str(s.get("image", ""))}
    servers = {n: s for n, s in services.items() if n not in balancers and n not in nginxes}
    chk.check(len(servers) >= 1, "compose defines a server service", list(services))
    check_balancer(chk, a, balancers, servers)
    check_nginx_balancer(chk, a, nginxes, servers)
    for name, s in servers.items():
        devices = dig(s, "deploy", "resources", "reservations", "devices", default=[])
        chk.check(any(d.get("driver") == "nvidia" and ("gpu" in (d.get("capabilities") or [])) for d in devices),
                  f"compose service {name} reserves an nvidia GPU (deploy.resources.reservations.devices)", devices)
        offered = [str(p) for p in (s.get("ports") or []) + (s.get("expose") or [])]
        for port in (GRPC_PORT, METRICS_PORT):
            chk.check(any(p.endswith(f":{port}") or p == str(port) for p in offered),
                      f"compose service {name} publishes or exposes container port {port}", offered)
        ctx = dig(s, "build", "context")
        if ctx is not None:
            df = os.path.join(os.path.dirname(compose_path), ctx, dig(s, "build", "dockerfile", default="Dockerfile"))
            chk.check(os.path.isfile(df), f"compose service {name} builds from an existing Dockerfile", df)
        env = s.get("environment") or {}
        keys = env.keys() if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
        check_env_keys(chk, f"compose {name} environment", {k for k in keys if k.startswith("GPUSCAN_")}, a.server)
    check_shared_memory_examples(chk, a)
    check_dask_example(chk, a)
    return chk.done()


def one_balancer(chk, kind, balancers, servers):
    """(name, service) of the one compose balancer of this kind, checked to depend on the server
    service; None (a failed check) unless there is exactly one."""
    chk.check(len(balancers) == 1, f"compose defines one {kind} balancer service", list(balancers))
    if len(balancers) != 1:
        return None
    name, b = next(iter(balancers.items()))
    deps = b.get("depends_on") or []
    chk.check(any(n in deps for n in servers), f"balancer {name} depends on the server service", deps)
    return name, b


def config_lines(a, *path):
    """A deploy/ config file's lines, comments dropped and stripped."""
    with open(os.path.join(a.source_dir, "deploy", *path)) as f:
        return [ln.split("#", 1)[0].strip() for ln in f.read().splitlines()]


def check_balancer(chk, a, balancers, servers):
    """The compose balancer: HAProxy with deploy/haproxy/haproxy.cfg mounted, publishing the gRPC
    port, in front of the server service; the config hashes lanes on their array-id header and
    health-checks over gRPC (tests/lb runs it for real)."""
    found = one_balancer(chk, "haproxy", balancers, servers)
    if found is None:
        return
    name, b = found
    chk.check(any(str(p).endswith(f":{GRPC_PORT}") for p in b.get("ports") or []),
              f"balancer {name} publishes the gRPC port {GRPC_PORT}", b.get("ports"))
    chk.check(any("haproxy/haproxy.cfg:" in str(v) for v in b.get("volumes") or []),
              f"balancer {name} mounts deploy/haproxy/haproxy.cfg", b.get("volumes"))
    lines = config_lines(a, "haproxy", "haproxy.cfg")
    chk.check("balance hdr(gpuscan-array-id)" in lines, "haproxy.cfg hashes on the gpuscan-array-id header", "")
    chk.check("hash-type consistent" in lines, "haproxy.cfg hashes consistently", "")
    chk.check(any(ln.startswith("bind :50051 proto h2") for ln in lines), "haproxy.cfg serves HTTP/2 on 50051", "")
    chk.check(any(ln.startswith("tcp-check expect binary 00000000020801") for ln in lines),
              "haproxy.cfg health-checks for a SERVING grpc.health.v1 answer", "")
    chk.check(any(ln.startswith("server-template ") and any(f"{n}:{GRPC_PORT}" in ln for n in servers)
                  for ln in lines), "haproxy.cfg's servers are the compose server service's replicas", "")


def check_nginx_balancer(chk, a, nginxes, servers):
    """The compose nginx balancer: under a profile (HAProxy is the default), deploy/nginx/nginx.conf
    mounted and used; the config hashes lanes on their array-id header with one shared view of
    the replicas (tests/lb runs it for real)."""
    found = one_balancer(chk, "nginx", nginxes, servers)
    if found is None:
        return
    name, b = found
    chk.check(bool(b.get("profiles")), f"balancer {name} starts only under a profile", b.get("profiles"))
    mounts = [str(v) for v in b.get("volumes") or []]
    target = next((v.split(":")[1] for v in mounts if v.startswith("./nginx/nginx.conf:")), None)
    chk.check(target is not None, f"balancer {name} mounts deploy/nginx/nginx.conf", mounts)
    chk.check(target is not None and target in [str(c) for c in b.get("command") or []],
              f"balancer {name} runs nginx with the mounted config", b.get("command"))
    lines = config_lines(a, "nginx", "nginx.conf")
    chk.check("hash $http_gpuscan_array_id consistent;" in lines, "nginx.conf hashes on the gpuscan-array-id header", "")
    chk.check(any(ln.startswith("zone ") for ln in lines), "nginx.conf shares the replicas' state between workers", "")
    chk.check(any(ln.startswith("listen 50051 http2") for ln in lines), "nginx.conf serves HTTP/2 on 50051", "")
    chk.check("grpc_pass grpc://gpuscan;" in lines, "nginx.conf passes gRPC to the upstream", "")
    chk.check(any(ln.startswith("server ") and any(f"{n}:{GRPC_PORT}" in ln for n in servers) for ln in lines),
              "nginx.conf's servers are the compose server service's replicas", "")


def check_shared_memory_examples(chk, a):
    """deploy/shared-memory: the server's GPUSCAN_SHM_DIR is a mount the client shares, and both
    talk over a shared unix socket."""
    base = os.path.join(a.source_dir, "deploy", "shared-memory")
    try:
        compose = load_yaml(os.path.join(base, "docker-compose.yml"))[0]
        pod = load_yaml(os.path.join(base, "pod-with-sidecar.yaml"))[0]
        chk.ok("shared-memory examples parse")
    except Exception as e:  # noqa: BLE001
        chk.check(False, "shared-memory examples parse", e)
        return
    services = compose.get("services") or {}
    server, client = services.get("gpuscan") or {}, services.get("client") or {}
    env = server.get("environment") or {}
    check_env_keys(chk, "shared-memory compose environment", {k for k in env if k.startswith("GPUSCAN_")}, a.server)
    shm_dir = env.get("GPUSCAN_SHM_DIR")
    mounts = lambda s: {str(v).split(":")[1] for v in s.get("volumes") or [] if ":" in str(v)}  # noqa: E731
    chk.check(shm_dir in mounts(server) and shm_dir in mounts(client),
              "shared-memory compose: server and client both mount GPUSCAN_SHM_DIR", (shm_dir, mounts(client)))
    chk.check(str(env.get("GPUSCAN_ADDRESS", "")).startswith("unix:"), "shared-memory compose: unix socket address",
              env.get("GPUSCAN_ADDRESS"))
    containers = dig(pod, "spec", "containers", default=[])
    volumes = {v.get("name"): v for v in dig(pod, "spec", "volumes", default=[])}
    srv = next((c for c in containers if c.get("name") == "gpuscan"), {})
    penv = {e.get("name"): e.get("value") for e in srv.get("env") or []}
    check_env_keys(chk, "shared-memory pod env", {k for k in penv if k.startswith("GPUSCAN_")}, a.server)
    shm_mounts = [m for m in srv.get("volumeMounts") or [] if m.get("mountPath") == penv.get("GPUSCAN_SHM_DIR")]
    vol = volumes.get(shm_mounts[0].get("name")) if shm_mounts else None
    chk.check(bool(vol) and dig(vol, "emptyDir", "medium") == "Memory",
              "shared-memory pod: GPUSCAN_SHM_DIR is an emptyDir of medium Memory", vol)
    chk.check(bool(shm_mounts) and all(any(m.get("name") == shm_mounts[0].get("name") for m in c.get("volumeMounts") or [])
                                       for c in containers),
              "shared-memory pod: every container mounts the regions volume", [c.get("name") for c in containers])


def check_dask_example(chk, a):
    """deploy/dask: a scheduler, two dask workers and two gpuscan servers; each server reserves a
    GPU of its own and serves shared memory from a volume its worker mounts at the same path; the
    workers' image builds from deploy/dask/Dockerfile and installs the Python package."""
    base = os.path.join(a.source_dir, "deploy", "dask")
    try:
        compose = load_yaml(os.path.join(base, "docker-compose.yml"))[0]
        chk.ok("dask compose parses")
    except Exception as e:  # noqa: BLE001
        chk.check(False, "dask compose parses", e)
        return
    services = compose.get("services") or {}
    servers = {n: s for n, s in services.items() if str(s.get("image", "")).startswith("gpuscan:")}
    workers = {n: s for n, s in services.items() if "worker" in (s.get("command") or [])}
    chk.check(len(servers) == 2 and len(workers) == 2, "dask compose: two gpuscan servers and two dask workers",
              (list(servers), list(workers)))
    chk.check(any("scheduler" in (s.get("command") or []) for s in services.values()), "dask compose: a scheduler", "")
    mounts = lambda s: {tuple(str(v).split(":")[:2]) for v in s.get("volumes") or [] if ":" in str(v)}  # noqa: E731
    gpus = set()
    for name, s in servers.items():
        env = s.get("environment") or {}
        check_env_keys(chk, f"dask compose {name} environment", {k for k in env if k.startswith("GPUSCAN_")}, a.server)
        devices = dig(s, "deploy", "resources", "reservations", "devices", default=[])
        gpus |= {tuple(d.get("device_ids") or []) for d in devices if d.get("driver") == "nvidia"}
        shm = env.get("GPUSCAN_SHM_DIR")
        paired = [w for w, ws in workers.items() if any(m in mounts(ws) for m in mounts(s) if m[1] == shm)]
        chk.check(bool(shm) and len(paired) == 1,
                  f"dask compose: {name}'s GPUSCAN_SHM_DIR is a volume one worker mounts at the same path", paired)
    chk.check(len(gpus) == 2, "dask compose: each server reserves a GPU of its own", gpus)
    dockerfile = os.path.join(base, "Dockerfile")
    text = open(dockerfile).read() if os.path.isfile(dockerfile) else ""
    chk.check("python3-distributed" in text and "pip install" in text and "/src/python" in text,
              "deploy/dask/Dockerfile installs distributed and the gpuscan package", dockerfile)


# --------------------------------------------------------------------------- Dockerfile

def parse_dockerfile(path):
    """[(instruction, arguments, stage index)] with continuations joined and comments dropped."""
    out, stage, buf = [], -1, ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not buf and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if buf and line.lstrip().startswith("#"):
                continue  # comment lines inside a continuation are dropped by Docker too
            if line.endswith("\\"):
                buf += line[:-1] + " "
                continue
            buf += line
            instr, _, args = buf.strip().partition(" ")
            instr = instr.upper()
            if instr == "FROM":
                stage += 1
            out.append((instr, args.strip(), stage))
            buf = ""
    return out


def exec_form(args):
    """A JSON exec form as a list; a shell form as shlex words."""
    args = args.strip()
    if args.startswith("["):
        return json.loads(args)
    return shlex.split(args)


def env_pairs(args):
    words = shlex.split(args)
    if words and "=" not in words[0]:  # legacy `ENV KEY value`
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words)


def healthcheck_command(args):
    """(options, command) of `HEALTHCHECK [--opt=v …] CMD …`."""
    opts, _, cmd = args.partition("CMD")
    options = dict(re.findall(r"--([a-z-]+)=(\S+)", opts))
    return options, exec_form(cmd)


def final_stage(instrs):
    last = max(s for _, _, s in instrs)
    return [(i, a) for i, a, s in instrs if s == last]


def cmd_dockerfile(a):
    chk = Checker()
    path = os.path.join(a.source_dir, "Dockerfile")
    instrs = parse_dockerfile(path)
    # The bases are build args (scripts/image.sh passes stand-ins where nvidia/cuda cannot be
    # pulled): the checks below hold for their defaults, the ARGs before the first FROM.
    global_args = {}
    for i, arg, s in instrs:
        if i == "ARG" and s == -1 and "=" in arg:
            k, v = arg.split("=", 1)
            global_args[k.strip()] = shlex.split(v)[0] if v.strip() else ""
    raw_froms = [args for i, args, _ in instrs if i == "FROM"]
    froms = [re.sub(r"\$\{?(\w+)\}?", lambda m: global_args.get(m.group(1), m.group(0)), f) for f in raw_froms]
    chk.check(len(froms) >= 2, "Dockerfile has at least two FROM stages", froms)
    for raw, resolved in zip(raw_froms, froms):
        if "$" in raw.split()[0]:
            chk.check("$" not in resolved.split()[0],
                      f"FROM {raw.split()[0]} is an ARG with a default declared before the first FROM",
                      global_args)
    image = r"nvidia/cuda:(\d+\.\d+\.\d+)-(\w+)-(ubuntu24\.04)"
    first = re.match(image, froms[0]) if froms else None
    last = re.match(image, froms[-1]) if froms else None
    chk.check(bool(first) and first.group(1).startswith("13.0.") and first.group(2) == "devel",
              "builder FROM nvidia/cuda:13.0.x-devel-ubuntu24.04 (exact tag)", froms[:1])
    chk.check(bool(last) and last.group(2) in ("base", "runtime"),
              "runtime FROM nvidia/cuda:…-base|runtime-ubuntu24.04", froms[-1:])
    if first and last:
        chk.check(first.group(1) == last.group(1), "builder and runtime use the same CUDA version",
                  f"{first.group(1)} vs {last.group(1)}")

    args = {}
    for i, arg, _ in instrs:
        if i == "ARG" and "=" in arg:
            k, v = arg.split("=", 1)
            args[k.strip()] = shlex.split(v)[0] if v.strip() else ""
    archs = re.split(r"[;, ]+", args.get("CUDA_ARCHITECTURES", ""))
    chk.check(all(x in archs for x in CUDA_ARCHS),
              f"ARG CUDA_ARCHITECTURES defaults to include {', '.join(CUDA_ARCHS)}", args.get("CUDA_ARCHITECTURES"))
    runs = [(arg, s) for i, arg, s in instrs if i == "RUN"]
    build_runs = " ".join(r for r, s in runs if s == 0)
    chk.check("CMAKE_CUDA_ARCHITECTURES" in build_runs and "CUDA_ARCHITECTURES}" in build_runs,
              "the build passes the ARG to -DCMAKE_CUDA_ARCHITECTURES", build_runs)
    chk.check("BUILD_TESTING=OFF" in build_runs and "--install" in build_runs,
              "the build skips tests and installs with cmake --install", build_runs)

    stages = max(s for _, _, s in instrs) + 1
    for s in range(stages):
        cmds = [r for r, st in runs if st == s]
        chk.check(any("install-deps.sh" in r for r in cmds),
                  f"stage {s} installs packages with scripts/install-deps.sh", cmds)
    chk.check(any("install-deps.sh --runtime" in r for r, st in runs if st == stages - 1),
              "the runtime stage installs only --runtime packages", [r for r, st in runs if st == stages - 1])

    fin = final_stage(instrs)
    users = [arg for i, arg in fin if i == "USER"]
    user = users[-1].split(":")[0] if users else "root"
    chk.check(user not in ("root", "0") and user.isdigit(),
              "the runtime stage runs as a numeric non-root USER (runAsNonRoot can verify it)", users)
    exposed = {p.split("/")[0] for i, arg in fin if i == "EXPOSE" for p in arg.split()}
    for port in (GRPC_PORT, METRICS_PORT):
        chk.check(str(port) in exposed, f"EXPOSE {port}", sorted(exposed))

    env = {}
    for i, arg in fin:
        if i == "ENV":
            env.update(env_pairs(arg))
    chk.check(env.get("GPUSCAN_ADDRESS") == f"0.0.0.0:{GRPC_PORT}",
              f"ENV GPUSCAN_ADDRESS=0.0.0.0:{GRPC_PORT}", env)
    chk.check(env.get("GPUSCAN_METRICS_ADDRESS") == f"0.0.0.0:{METRICS_PORT}",
              f"ENV GPUSCAN_METRICS_ADDRESS=0.0.0.0:{METRICS_PORT}", env)
    check_env_keys(chk, "Dockerfile ENV", {k for k in env if k.startswith("GPUSCAN_")}, a.server)

    hcs = [arg for i, arg in fin if i == "HEALTHCHECK"]
    hc = healthcheck_command(hcs[-1])[1] if hcs else []
    chk.check(hc[:2] == ["gpuscan", "health"], "HEALTHCHECK CMD runs `gpuscan health`", hcs)
    eps = [arg for i, arg in fin if i == "ENTRYPOINT"]
    ep = exec_form(eps[-1]) if eps else []
    chk.check(eps and eps[-1].lstrip().startswith("[") and ep[:1] == ["gpuscan-server"],
              "ENTRYPOINT is [\"gpuscan-server\", …] (exec form: signals reach the server)", eps)

    ignore = os.path.join(a.source_dir, ".dockerignore")
    patterns = open(ignore).read().split() if os.path.exists(ignore) else []
    chk.check(any(p.startswith("build") for p in patterns), ".dockerignore keeps local build trees out", patterns)
    return chk.done()


# --------------------------------------------------------------------------- packages

def install_deps(a, *flags):
    script = os.path.join(a.source_dir, "scripts", "install-deps.sh")
    return subprocess.run(["bash", script, *flags], capture_output=True, text=True, timeout=120)


def need_apt():
    for tool in ("apt-cache", "dpkg-query"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            print(f"skip: no {tool} here (not Debian/Ubuntu)")
            sys.exit(SKIP)


def cmd_runtime_packages(a):
    need_apt()
    chk = Checker()
    for flags in (("--runtime", "--print"), ("--print",)):
        p = install_deps(a, *flags)
        names = p.stdout.split()
        chk.check(p.returncode == 0 and names,
                  f"install-deps.sh {' '.join(flags)} resolves every package",
                  f"exit {p.returncode}, stdout {names}, stderr {p.stderr.strip()}")
        chk.check(all("|" not in n for n in names), f"install-deps.sh {' '.join(flags)} prints single names", names)
        if flags[0] == "--runtime":
            print("runtime packages: " + " ".join(names))
    return chk.done()


def dependency_closure(packages):
    """The packages and everything they depend on (installed ones), as apt sees it."""
    p = subprocess.run(["apt-cache", "depends", "--recurse", "--installed", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                       capture_output=True, text=True, timeout=120)
    names = set(packages)
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*\|?(?:Pre)?Depends:\s*<?([^\s>]+)>?", line) or re.match(r"^(\S+)$", line)
        if m:
            names.add(m.group(1).split(":")[0])
    return names


def owners(paths):
    """{path: owning package or None}, one dpkg query for all (each path tried with its
    /usr-merged twin too: ldd may say /lib/… where dpkg recorded /usr/lib/…)."""
    twins = {}
    for path in paths:
        names = {path, os.path.realpath(path)}
        for n in list(names):
            names.add(n[len("/usr"):] if n.startswith("/usr/") else "/usr" + n)
        twins[path] = names
    every = sorted(set().union(*twins.values())) if twins else []
    p = subprocess.run(["dpkg-query", "-S", *every], capture_output=True, text=True)
    shipped = {}
    for line in p.stdout.splitlines():
        pkgs, _, file = line.partition(": ")
        shipped[file.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    return {path: next((shipped[n] for n in sorted(names) if n in shipped), None)
            for path, names in twins.items()}


def cmd_runtime_libraries(a):
    need_apt()
    chk = Checker()
    p = install_deps(a, "--runtime", "--print")
    if not chk.check(p.returncode == 0, "install-deps.sh --runtime --print resolves", p.stderr.strip()):
        return chk.done()
    runtime = p.stdout.split()
    closure = dependency_closure(runtime)
    print(f"runtime packages and their dependencies: {len(closure)} packages")
    for binary in (a.server, a.cli):
        if not chk.check(os.path.isfile(binary), f"{os.path.basename(binary)} is built", binary):
            continue
        out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        missing = [l.strip() for l in out.splitlines() if "not found" in l]
        chk.check(not missing, f"ldd {os.path.basename(binary)}: every library found", missing)
        libs = re.findall(r"=>\s+(/\S+)", out) + re.findall(r"^\s+(/\S+ld-linux\S*)", out, re.M)
        owned = owners(libs)
        print(f"{os.path.basename(binary)} loads libraries of: {' '.join(sorted(set(map(str, owned.values()))))}")
        uncovered = {lib: pkg for lib, pkg in owned.items() if pkg is None or pkg not in closure}
        chk.check(not uncovered,
                  f"{os.path.basename(binary)}: all {len(libs)} libraries come from the --runtime packages or their dependencies",
                  f"library -> owning package: {uncovered} (add the package to runtime_packages in scripts/install-deps.sh)")
    return chk.done()


# --------------------------------------------------------------------------- container commands

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd_container_commands(a):
    chk = Checker()
    for b in (a.server, a.cli):
        if not os.access(b, os.X_OK):
            print(f"FAIL: binary not built: {b}")
            return 1
    instrs = parse_dockerfile(os.path.join(a.source_dir, "Dockerfile"))
    fin = final_stage(instrs)
    eps = [arg for i, arg in fin if i == "ENTRYPOINT"]
    hcs = [arg for i, arg in fin if i == "HEALTHCHECK"]
    if not eps or not hcs:
        print(f"FAIL: the Dockerfile's last stage needs ENTRYPOINT and HEALTHCHECK; found {eps} {hcs}")
        return 1
    entrypoint = exec_form(eps[-1])
    hc_opts, health = healthcheck_command(hcs[-1])
    if entrypoint[0] not in ("gpuscan-server",) or health[0] != "gpuscan":
        print(f"FAIL: expected ENTRYPOINT gpuscan-server and HEALTHCHECK gpuscan; found {entrypoint} {health}")
        return 1
    image_env = {}
    for i, arg in fin:
        if i == "ENV":
            image_env.update(env_pairs(arg))
    binaries = {"gpuscan-server": a.server, "gpuscan": a.cli}

    for name, path in binaries.items():
        rc, text = run_help(path)
        chk.check(rc == 0, f"{name} --help exits 0", f"exit {rc}: {text[-300:]}")
    server_help, cli_help = run_help(a.server)[1], run_help(a.cli)[1]

    # The image's environment, with its 0.0.0.0 listeners moved to free loopback ports.
    port = free_port()
    addr = f"127.0.0.1:{port}"
    env = dict(os.environ, **image_env)
    env["GPUSCAN_ADDRESS"] = addr
    if "GPUSCAN_METRICS_ADDRESS" in env:
        env["GPUSCAN_METRICS_ADDRESS"] = f"127.0.0.1:{free_port()}"
    env["GPUSCAN_SERVER"] = addr
    server_cmd = [binaries[entrypoint[0]]] + entrypoint[1:]
    # Until the env support lands, --help shows no GPUSCAN_ADDRESS and the flag does its job.
    if "GPUSCAN_ADDRESS" in server_help:
        print("note: server reads GPUSCAN_ADDRESS from the environment, as in the image")
    else:
        print("note: server lists no GPUSCAN_ADDRESS yet: passing --address as well")
        server_cmd += ["--address", addr]
    health_cmd = [binaries[health[0]]] + health[1:]
    if "GPUSCAN_SERVER" not in cli_help:
        health_cmd += ["--server", addr]
    hc_timeout = float(hc_opts.get("timeout", "30s").rstrip("s"))
    print("server: " + " ".join(shlex.quote(x) for x in server_cmd))
    print("health: " + " ".join(shlex.quote(x) for x in health_cmd))

    log_path = os.path.join(a.work_dir, "container_commands.server.log")
    with open(log_path, "w+") as log:
        server = subprocess.Popen(server_cmd, env=env, stdout=log, stderr=subprocess.STDOUT)

        def server_log():
            log.flush()
            log.seek(0)
            return log.read()[-3000:]

        try:
            healthy, last, deadline = False, None, time.monotonic() + 30
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    last = subprocess.run(health_cmd, env=env, capture_output=True, text=True, timeout=hc_timeout)
                except subprocess.TimeoutExpired:
                    print(f"note: health check ran past the HEALTHCHECK timeout ({hc_timeout} s)")
                    continue
                if last.returncode == 0:
                    healthy = True
                    break
                time.sleep(0.2)
            chk.check(healthy, "the HEALTHCHECK command exits 0 against the ENTRYPOINT's server",
                      f"server exit {server.poll()}; last health exit "
                      f"{last.returncode if last else None}: {(last.stderr if last else '').strip()}\n"
                      f"server log:\n{server_log()}")
            server.send_signal(signal.SIGTERM)
            try:
                rc = server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = "still running after 10 s"
            chk.check(rc == 0, "SIGTERM stops the server with exit 0 within 10 s",
                      f"exit {rc}\nserver log:\n{server_log()}")
            after = subprocess.run(health_cmd, env=env, capture_output=True, text=True, timeout=hc_timeout)
            chk.check(after.returncode != 0, "the HEALTHCHECK command fails once the server is gone",
                      f"exit {after.returncode}")
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    return chk.done()


def main():
    commands = {
        "manifests": cmd_manifests,
        "dockerfile": cmd_dockerfile,
        "runtime_packages": cmd_runtime_packages,
        "runtime_libraries": cmd_runtime_libraries,
        "container_commands": cmd_container_commands,
    }
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("check", choices=commands)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--server", required=True, help="the built gpuscan-server")
    p.add_argument("--cli", required=True, help="the built gpuscan")
    p.add_argument("--work-dir", default=os.getcwd(), help="where logs go")
    a = p.parse_args()
    sys.exit(commands[a.check](a))


if __name__ == "__main__":
    main()
