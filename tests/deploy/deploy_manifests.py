"""The `manifests` deploy check (check_deploy.py manifests): deploy/k8s/*.yaml and
deploy/docker-compose.yml parse and hold what they must: the ConfigMap's names and listeners, the
Deployment's container, GPU, ports, probes, scraping, shutdown and user, the headless Service, the
compose servers and their HAProxy and nginx balancers (with their configs), and the shared-memory
and dask examples."""
import os

from deploy_common import GRPC_PORT, METRICS_PORT, Checker, check_env_keys, dig, load_yaml


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
    compose = chk.parsed("docker-compose.yml parses", lambda: load_yaml(compose_path)[0])
    if compose is None:
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
    both = chk.parsed("shared-memory examples parse", lambda: (load_yaml(os.path.join(base, "docker-compose.yml"))[0],
                                                                load_yaml(os.path.join(base, "pod-with-sidecar.yaml"))[0]))
    if both is None:
        return
    compose, pod = both
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
    compose = chk.parsed("dask compose parses", lambda: load_yaml(os.path.join(base, "docker-compose.yml"))[0])
    if compose is None:
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
