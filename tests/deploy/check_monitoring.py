#!/usr/bin/env python3
"""deploy/monitoring against the server it watches (label deploy):

  promtool check rules alerts.yml, and promtool test rules alerts_test.yml (each alert fires on
  the series that should fire it, and only there);
  grafana-dashboard.json: parses, every panel has queries on the ${datasource} variable, unique
  ids, and every query is valid PromQL (checked by promtool as a recording rule, with Grafana's
  $__rate_interval and $instance substituted);
  every gpuscan_* metric the rules and the dashboard name is exported by a live CPU server
  (--resident-bytes, --spill-bytes; a scan, a put, a get, a drop and a refused call made with
  the CLI first), except the device-memory gauges, which only a server with a device exports:
  those must be documented in server/metrics/metrics.h, and --require-device (a CUDA server's
  /metrics, e.g. on the GPU machine) checks them live too.

usage: check_monitoring.py --source-dir DIR --server gpuscan-server --cli gpuscan
       check_monitoring.py --source-dir DIR --metrics-url URL --require-device
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from deploy_common import Checker, free_port  # this folder's

DEVICE_ONLY = {"gpuscan_device_memory_used_bytes", "gpuscan_device_memory_total_bytes",
               "gpuscan_device_memory_pool_bytes"}
PROMETHEUS_OWN = {"up"}
NAME = re.compile(r"\b(gpuscan_[a-z0-9_]+|up)\b(?=\s*[{\[(]|\s*[=!<>/*+-]|\s*\)|\s*$)")

chk = Checker()


def promtool(*args, cwd=None):
    p = subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True)
    return p.returncode == 0, (p.stdout + p.stderr).strip()


def names_in(expr):
    return {m for m in NAME.findall(expr)}


def exported_name(name, families):
    """A series name as the family /metrics declares it (a histogram's _bucket/_sum/_count)."""
    if name in families:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return None


def live_metrics(server, cli, work):
    """A CPU server's /metrics after a few calls: {family: type}."""
    port, mport = free_port(), free_port()
    target = f"127.0.0.1:{port}"
    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen([server, "--engine", "cpu", "--address", target, "--metrics-address",
                             f"127.0.0.1:{mport}", "--resident-bytes", str(64 << 20), "--spill-bytes",
                             str(64 << 20)], stdout=log, stderr=subprocess.STDOUT)
    try:
        def gpuscan(*args, stdin=None):
            return subprocess.run([cli, "-s", target, "--retries", "0", *args], input=stdin, capture_output=True,
                                  text=True, timeout=60)
        for _ in range(100):
            if gpuscan("health", "--timeout", "1").returncode == 0:
                break
            time.sleep(0.1)
        data = ", ".join(str((i * 7919) % 201 - 100) for i in range(5000))
        chk.check(gpuscan("scan", "--dtype", "int32", stdin=data).returncode == 0, "a CLI scan on the live server")
        put = gpuscan("put", "--dtype", "int64", stdin=data)
        chk.check(put.returncode == 0, "a CLI put on the live server", put.stderr)
        array_id = put.stdout.strip()
        chk.check(gpuscan("reduce", "--ref", array_id).returncode == 0, "a CLI reduce of the resident array")
        chk.check(gpuscan("drop", array_id).returncode == 0, "a CLI drop")
        gpuscan("get", "00" * 24, "-o", os.path.join(work, "none.npy"))  # NOT_FOUND: a failed call counted
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    return {m.group(1): m.group(2) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--server")
    ap.add_argument("--cli")
    ap.add_argument("--metrics-url", help="check against this /metrics instead of starting a CPU server")
    ap.add_argument("--require-device", action="store_true", help="the device-only metrics must be there too")
    args = ap.parse_args()
    mon = os.path.join(args.source_dir, "deploy", "monitoring")
    if not shutil.which("promtool"):
        print("FAIL: promtool not found: scripts/install-deps.sh installs Debian's prometheus package")
        return 1

    ok, out = promtool("check", "rules", "alerts.yml", cwd=mon)
    chk.check(ok, "promtool check rules alerts.yml", out)
    ok, out = promtool("test", "rules", "alerts_test.yml", cwd=mon)
    chk.check(ok, "promtool test rules alerts_test.yml: every alert fires where it should, only there", out)
    rules_text = open(os.path.join(mon, "alerts.yml")).read()
    exprs = {"alerts.yml": re.findall(r"expr: (?:\|\n((?:\s{10}.*\n)+)|(.*))", rules_text)}
    used = set()
    for block, line in exprs["alerts.yml"]:
        used |= names_in(block or line)
    alerts = re.findall(r"- alert: (\S+)", rules_text)
    chk.check(len(alerts) >= 5, f"alerts.yml has {len(alerts)} alerts: {', '.join(alerts)}")

    dash = json.load(open(os.path.join(mon, "grafana-dashboard.json")))
    panels = dash.get("panels", [])
    ids = [p.get("id") for p in panels]
    chk.check(len(panels) >= 8 and len(set(ids)) == len(ids), f"the dashboard has {len(panels)} panels with unique ids")
    queries = []
    for p in panels:
        targets = p.get("targets", [])
        good = bool(targets) and all(t.get("expr") and t.get("datasource", {}).get("uid") == "${datasource}"
                                     for t in targets)
        chk.check(good, f"panel {p.get('title')!r}: queries on ${{datasource}}")
        queries += [t["expr"] for t in targets]
    for q in queries:
        used |= names_in(q)
    with tempfile.TemporaryDirectory() as work:
        rules = ["groups:", "  - name: dashboard", "    rules:"]
        for i, q in enumerate(queries):
            q = q.replace("$__rate_interval", "5m").replace("$instance", ".*")
            rules += [f"      - record: dashboard:query_{i}", f"        expr: {json.dumps(q)}"]
        path = os.path.join(work, "dashboard_rules.yml")
        open(path, "w").write("\n".join(rules) + "\n")
        ok, out = promtool("check", "rules", path)
        chk.check(ok, f"the dashboard's {len(queries)} queries are valid PromQL", out)

        if args.metrics_url:
            with urllib.request.urlopen(args.metrics_url, timeout=10) as r:
                text = r.read().decode()
            families = {m.group(1): m.group(2) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M)}
        else:
            families = live_metrics(args.server, args.cli, work)
    header = open(os.path.join(args.source_dir, "server", "metrics", "metrics.h")).read()
    for name in sorted(used - PROMETHEUS_OWN):
        family = exported_name(name, families)
        if family is None and name in DEVICE_ONLY and not args.require_device:
            chk.check(name in header, f"{name}: a device's gauge (absent on a CPU server), documented in metrics.h")
            continue
        kind = f" ({families[family]})" if family else ""
        chk.check(family is not None, f"{name} is exported by the live server{kind}", "not in /metrics")
    if chk.done():
        return 1
    print(f"PASS: {len(alerts)} alerts and {len(queries)} dashboard queries on "
          f"{len(used - PROMETHEUS_OWN)} gpuscan metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
