#!/usr/bin/env python3
"""The docs pages' code blocks, run as written (label docs; docs/testing.md, "Docs").

  run_pages.py page PAGE --source-dir DIR --server gpuscan-server --cli gpuscan --python PY
               [--pythonpath DIR] [--cpp-binary BIN]
      Every ```python, ```sh, ```bash and ```cpp block of PAGE runs against a CPU server on a free
      port (--resident-bytes, so resident arrays and pipelines work), unless the line before it
      says why not: `<!-- docs-test: skip: REASON -->` (a GPU, a cluster, a benchmark, another
      host) or `<!-- docs-test: run by PATH -->` (a test that runs it as written: PATH must exist).
      README.md's python, bash and cpp blocks are run by check_docs.py example (docs_readme_*).
      python: each block alone, with --python and PYTHONPATH; a block is a whole program.
      sh/bash: each block with `bash -euo pipefail` in a folder holding the inputs the pages name
      (data.npy, keys.npy, matrix.npy, ...: random arrays) and $X, $K, $V, $H, $M, ids of resident
      arrays of 65,536 elements (float32 values, int32 keys in runs, float64 values, uint8 heads,
      a uint8 mask)
      that a reader would have put; the CLI's folder first on PATH; GPUSCAN_SERVER the server's
      address. A block that starts `gpuscan-server ... &` gets `--address` of a free port (its
      CLI calls follow it through GPUSCAN_SERVER), waits until it answers, and stops it at its end.
      cpp: the page's blocks compiled as one program by tests/docs/CMakeLists.txt (extract-cpp),
      run with the server's address in GPUSCAN_DOCS_TARGET.
      In every block, 127.0.0.1:50051 is replaced by the server's address and build/bin/ by the
      build's; nothing else is changed.
  run_pages.py extract-cpp PAGE OUT
      The page's unmarked ```cpp blocks as one program: their #include lines first, then the
      rest of every block, in order, inside main() (a block that has main() stays as it is).
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from check_docs import TARGET, all_blocks, server_process_class  # this folder's


LANGS = ("python", "sh", "bash", "cpp")
MARK = re.compile(r"^<!-- docs-test: (skip: .+|run by \S+) -->$")
SERVER_LINE = re.compile(r"^(\s*)((?:build/bin/)?gpuscan-server)\b(.*?)\s*&\s*(#.*)?$")
N_RESIDENT = 65536


def blocks(text: str):
    """(line, lang, body, mark) of each fenced block; mark: the docs-test comment before it, or ''."""
    out = []
    for line, lang, body, before in all_blocks(text):
        mark = MARK.match(before)
        out.append((line, lang, body, mark.group(1) if mark else ""))
    return out


def extract_cpp(page: Path, out: Path) -> None:
    cpp = [b for _, lang, b, mark in blocks(page.read_text()) if lang == "cpp" and not mark]
    includes, body = [], []
    for b in cpp:
        for line in b.splitlines():
            (includes if line.startswith("#include") else body).append(line)
    text = (f"// Generated from {page.name}'s ```cpp blocks by tests/docs/run_pages.py: edit the page.\n"
            "#include <cstdlib>\n" + "\n".join(includes) + "\n"
            "static const char* gpuscan_docs_target() {\n"
            "  const char* t = std::getenv(\"GPUSCAN_DOCS_TARGET\");\n"
            f"  return t ? t : \"{TARGET}\";\n}}\n")
    code = "\n".join(body).replace(f'"{TARGET}"', "gpuscan_docs_target()")
    text += code + "\n" if "int main(" in code else "int main() {\n" + code + "\n  return 0;\n}\n"
    if not out.exists() or out.read_text() != text:
        out.write_text(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fixtures(work: Path, python: str, env: dict) -> None:
    """The inputs the pages' shell blocks name, as a reader would have them."""
    code = f"""
import numpy as np
rng = np.random.default_rng()
n, r = 100_000, {N_RESIDENT}
d = rng.integers(-1000, 1000, n, dtype=np.int32)
np.save("data.npy", d); d.tofile("data.bin"); np.save("x.npy", d)
np.save("big.npy", rng.integers(-1000, 1000, 1_000_000, dtype=np.int32))
np.save("matrix.npy", rng.integers(-100, 100, (64, 1000), dtype=np.int32))
np.save("image.npy", rng.uniform(0, 1, (480, 640)).astype(np.float32))
rng.uniform(-1, 1, 4096 * 16).astype(np.float32).tofile("flat.bin")
np.save("keys.npy", rng.integers(-1000, 1000, n, dtype=np.int32))
np.save("rows.npy", rng.uniform(-1, 1, n))
np.save("amounts.npy", rng.uniform(0, 100, n))
np.save("customer.npy", np.sort(rng.integers(0, 1000, n)).astype(np.int32))
h = (rng.random(n) < 0.01).astype(np.uint8); h[0] = 1; np.save("starts.npy", h)
np.save("edges.npy", np.linspace(-1000, 1000, 17))
np.save("mask.npy", rng.random(n) < 0.3)
np.save("res_x.npy", rng.uniform(-1, 1, r).astype(np.float32))
np.save("res_k.npy", np.sort(rng.integers(0, 100, r)).astype(np.int32))
np.save("res_v.npy", rng.uniform(-1, 1, r))
hr = (rng.random(r) < 0.01).astype(np.uint8); hr[0] = 1; np.save("res_h.npy", hr)
np.save("res_m.npy", (rng.random(r) < 0.3).astype(np.uint8))
"""
    subprocess.run([python, "-c", code], cwd=work, env=env, check=True)
    for var, name in (("X", "res_x"), ("K", "res_k"), ("V", "res_v"), ("H", "res_h"), ("M", "res_m")):
        done = subprocess.run(["gpuscan", "put", f"{name}.npy", "--label", name], cwd=work, env=env,
                              capture_output=True, text=True, check=True)
        env[var] = done.stdout.strip()


def shell_script(block: str, bindir: str) -> str:
    """The block with any `gpuscan-server ... &` on a free port, waited for and stopped at the end."""
    out = ["trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for line in block.replace(TARGET, os.environ["DOCS_TARGET"]).split("\n"):
        m = SERVER_LINE.match(line)
        if not m:
            out.append(line.replace("build/bin/", bindir + "/"))
            continue
        port = free_port()
        flags = re.sub(r"--address\s+\S+", "", m.group(3))
        out.append(f"{m.group(1)}{bindir}/gpuscan-server --address 127.0.0.1:{port}{flags} &")
        out.append(f"export GPUSCAN_SERVER=127.0.0.1:{port}")
        out.append("for _ in $(seq 300); do gpuscan health --timeout 1 >/dev/null 2>&1 && break; sleep 0.1; done")
    return "\n".join(out) + "\n"


def run_page(args) -> int:
    root = Path(args.source_dir).resolve()
    page = (root / args.page).resolve()
    todo, problems = [], []
    for line, lang, body, mark in blocks(page.read_text()):
        if lang not in LANGS:
            continue
        where = f"{args.page}:{line} ```{lang}"
        if mark.startswith("run by "):
            if not (root / mark[len("run by "):]).exists():
                problems.append(f"{where}: marked '{mark}', and that file does not exist")
            continue
        if mark or (page.name == "README.md" and lang in ("python", "bash", "cpp")):
            continue
        todo.append((where, lang, body))
    for p in problems:
        print("error:", p)
    if not todo:
        print(f"{args.page}: no block to run here (each is marked or run by docs_readme_*)")
        return 1 if problems else 0
    ServerProcess = server_process_class(root)

    bindir = str(Path(args.cli).resolve().parent)
    failed = 0
    with tempfile.TemporaryDirectory() as work, \
            ServerProcess(args.server, engine="cpu", extra=["--resident-bytes", str(1 << 30)]) as server:
        env = dict(os.environ, PATH=os.pathsep.join([bindir, os.environ.get("PATH", "")]),
                   GPUSCAN_SERVER=server.target, DOCS_TARGET=server.target, PYTHONDONTWRITEBYTECODE="1")
        os.environ["DOCS_TARGET"] = server.target
        if args.pythonpath:
            env["PYTHONPATH"] = os.path.abspath(args.pythonpath)
        if any(lang in ("sh", "bash") for _, lang, _ in todo):
            fixtures(Path(work), args.python, env)
        for i, (where, lang, body) in enumerate(todo):
            if lang == "python":
                script = Path(work, f"block_{i}.py")
                script.write_text(body.replace(TARGET, server.target))
                cmd = [args.python, str(script)]
            elif lang in ("sh", "bash"):
                script = Path(work, f"block_{i}.sh")
                script.write_text(shell_script(body, bindir))
                cmd = ["bash", "-euo", "pipefail", str(script)]
            else:
                if not args.cpp_binary:
                    print(f"error: {where}: no --cpp-binary (tests/docs/CMakeLists.txt builds the page's blocks)")
                    failed += 1
                    continue
                if i > 0 and todo[i - 1][1] == "cpp":
                    continue  # the page's cpp blocks are one program, run once
                cmd = [os.path.abspath(args.cpp_binary)]
                env["GPUSCAN_DOCS_TARGET"] = server.target
            print(f"--- {where}", flush=True)
            try:
                done = subprocess.run(cmd, cwd=work, env=env, timeout=args.timeout)
                rc = done.returncode
            except subprocess.TimeoutExpired:
                rc = "a timeout"
            if rc != 0:
                failed += 1
                print(f"error: {where} ended with {rc}\n--- server log ---\n{server.log_text()[-4000:]}")
    print(f"{args.page}: {len(todo) - failed} of {len(todo)} blocks ran as written")
    return 1 if failed or problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    pg = sub.add_parser("page")
    pg.add_argument("page")
    pg.add_argument("--source-dir", required=True)
    pg.add_argument("--server", required=True)
    pg.add_argument("--cli", required=True)
    pg.add_argument("--python", default=sys.executable)
    pg.add_argument("--pythonpath")
    pg.add_argument("--cpp-binary")
    pg.add_argument("--timeout", type=float, default=180)
    ex = sub.add_parser("extract-cpp")
    ex.add_argument("page")
    ex.add_argument("out")
    args = ap.parse_args()
    if args.cmd == "extract-cpp":
        extract_cpp(Path(args.page), Path(args.out))
        return 0
    return run_page(args)


if __name__ == "__main__":
    sys.exit(main())
