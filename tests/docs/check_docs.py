#!/usr/bin/env python3
"""The docs tests (label docs; docs/testing.md, "Docs").

  check_docs.py links --source-dir DIR
      Every relative link and image of README.md, docs/*.md, deploy/README.md and CONTRIBUTING.md
      (when present) resolves to a file or folder of the tree, and every #anchor to a heading of
      its page (GitHub's slugs); README.md has at most 260 lines.
  check_docs.py example {python,bash,cpp} --source-dir DIR --server gpuscan-server ...
      Runs the README's fenced block(s) of that language as written against a CPU server on a
      free port; the address 127.0.0.1:50051 in the block is the one thing substituted.
      python: the blocks run with --python (default: this interpreter), PYTHONPATH as given.
      bash: the blocks run with `bash -euo pipefail` in an empty folder, --cli's folder on PATH.
      cpp: --binary is the README's block compiled by tests/docs/CMakeLists.txt, run with the
      server's address in GPUSCAN_DOCS_TARGET (the literal's substitute there).

The server is started by python/gpuscan/testing.py's ServerProcess (--engine cpu, a free port).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

README_MAX_LINES = 260
TARGET = "127.0.0.1:50051"
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def pages(root: Path) -> list[Path]:
    out = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "deploy" / "README.md"]
    if (root / "CONTRIBUTING.md").exists():
        out.append(root / "CONTRIBUTING.md")
    return [p for p in out if p.exists()]


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)[0] * len(m.group(2))
            continue
        if fence is not None:
            if m and m.group(2).startswith(fence) and not m.group(3).strip():
                fence = None
            continue
        yield n, line


def all_blocks(text: str) -> list[tuple[int, str, str, str]]:
    """(line, lang, contents, the last non-blank line before the fence) of every fenced block, in
    order: line is the fence's (1-based), lang the first word of its info string."""
    lines = text.split("\n")
    blocks, cur, fence = [], None, None
    for n, line in enumerate(lines):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence, start = m.group(2), n
                lang = (m.group(3).strip().split(" ") + [""])[0]
                before = next((lines[j].strip() for j in range(n - 1, -1, -1) if lines[j].strip()), "")
                cur = []
            continue
        if m and m.group(2).startswith(fence) and not m.group(3).strip():
            blocks.append((start + 1, lang, "\n".join(cur) + "\n", before))
            fence, cur = None, None
        else:
            cur.append(line)
    return blocks


def fenced_blocks(text: str, lang: str) -> list[str]:
    """The contents of the ```lang blocks, in order."""
    return [body for _, block_lang, body, _ in all_blocks(text) if block_lang == lang]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation removed, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path, cache: dict) -> set:
    if path not in cache:
        seen: dict = {}
        out = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            out.add(s if k == 0 else f"{s}-{k}")
            seen[s] = k + 1
        cache[path] = out
    return cache[path]


def check_links(root: Path) -> int:
    errors, count, cache = [], 0, {}
    for page in pages(root):
        rel_page = page.relative_to(root)
        for n, line in prose_lines(page.read_text(encoding="utf-8")):
            for m in LINK.finditer(INLINE_CODE.sub("", line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
                    continue
                count += 1
                path_part, _, frag = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                where = f"{rel_page}:{n}: {target}"
                try:
                    dest.relative_to(root.resolve())
                except ValueError:
                    errors.append(f"{where}: outside the tree")
                    continue
                if not dest.exists():
                    errors.append(f"{where}: {dest.relative_to(root.resolve())} does not exist")
                    continue
                if frag and dest.is_file() and dest.suffix == ".md" and frag not in anchors(dest, cache):
                    errors.append(f"{where}: no heading with anchor #{frag} in {dest.relative_to(root.resolve())}")
    lines = (root / "README.md").read_text(encoding="utf-8").count("\n")
    if lines > README_MAX_LINES:
        errors.append(f"README.md: {lines} lines, more than {README_MAX_LINES}: move the depth to docs/")
    for e in errors:
        print("error:", e)
    print(f"{count} relative links in {len(pages(root))} pages checked; README.md {lines} lines; "
          f"{len(errors)} error(s)")
    return 1 if errors else 0


def substituted(block: str, target: str, lang: str) -> str:
    if TARGET not in block:
        raise SystemExit(f"error: README's {lang} example does not name {TARGET}: the test substitutes that "
                         f"address (and only that) with its own server's")
    return block.replace(TARGET, target)


def server_process_class(root: Path):
    """python/gpuscan/testing.py's ServerProcess, loaded from the source tree by path: it needs only
    the standard library, so the bash and cpp examples run without grpcio or numpy."""
    spec = importlib.util.spec_from_file_location("gpuscan_testing", root / "python" / "gpuscan" / "testing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ServerProcess


def run_example(args) -> int:
    root = Path(args.source_dir).resolve()
    text = (root / "README.md").read_text(encoding="utf-8")
    blocks = [] if args.lang == "cpp" else fenced_blocks(text, args.lang)
    if args.lang == "cpp":
        if len(fenced_blocks(text, "cpp")) != 1:
            print("error: README.md must hold exactly one ```cpp block (tests/docs/CMakeLists.txt compiles it)")
            return 1
    elif not blocks:
        print(f"error: README.md has no ```{args.lang} block")
        return 1
    ServerProcess = server_process_class(root)

    with ServerProcess(args.server, engine="cpu") as server, tempfile.TemporaryDirectory() as work:
        env = dict(os.environ)
        for i, block in enumerate(blocks or [""]):
            if args.lang == "python":
                script = Path(work, f"readme_{i}.py")
                script.write_text(substituted(block, server.target, "python"))
                cmd = [args.python or sys.executable, str(script)]
                if args.pythonpath:
                    env["PYTHONPATH"] = os.path.abspath(args.pythonpath)
            elif args.lang == "bash":
                script = Path(work, f"readme_{i}.sh")
                script.write_text(substituted(block, server.target, "bash"))
                cmd = ["bash", "-euo", "pipefail", str(script)]
                env["PATH"] = os.pathsep.join([str(Path(args.cli).resolve().parent), env.get("PATH", "")])
            else:
                cmd = [os.path.abspath(args.binary)]
                env["GPUSCAN_DOCS_TARGET"] = server.target
            print(f"--- README {args.lang} example {i + 1} against {server.target}: {' '.join(cmd)}", flush=True)
            done = subprocess.run(cmd, cwd=work, env=env, timeout=args.timeout)
            if done.returncode != 0:
                print(f"error: README {args.lang} example {i + 1} exited with {done.returncode}\n"
                      f"--- server log ---\n{server.log_text()}")
                return 1
    print(f"README {args.lang} example(s) ran as written")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    links = sub.add_parser("links")
    links.add_argument("--source-dir", required=True)
    ex = sub.add_parser("example")
    ex.add_argument("lang", choices=["python", "bash", "cpp"])
    ex.add_argument("--source-dir", required=True)
    ex.add_argument("--server", required=True, help="gpuscan-server binary")
    ex.add_argument("--python", help="interpreter of the python example (default: this one)")
    ex.add_argument("--pythonpath", help="PYTHONPATH of the python example")
    ex.add_argument("--cli", help="gpuscan binary (bash: its folder goes first on PATH)")
    ex.add_argument("--binary", help="cpp: the compiled README example")
    ex.add_argument("--timeout", type=float, default=240)
    args = ap.parse_args()
    if args.cmd == "links":
        return check_links(Path(args.source_dir).resolve())
    if args.lang == "bash" and not args.cli:
        ap.error("bash needs --cli")
    if args.lang == "cpp" and not args.binary:
        ap.error("cpp needs --binary")
    return run_example(args)


if __name__ == "__main__":
    sys.exit(main())
