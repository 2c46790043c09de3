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
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (the modules below are this folder's)
from deploy_common import GRPC_PORT, METRICS_PORT, Checker, check_env_keys, free_port, run_help  # noqa: E402
from deploy_manifests import cmd_manifests  # noqa: E402

SKIP = 77
CUDA_ARCHS = ("80", "86", "89", "90")


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
