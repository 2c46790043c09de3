#!/usr/bin/env python3
"""Summarises an A/B of kernel-suite builds (scripts/gpu-ab.sh): for each row (op, algorithm,
dtype, n) and build, the range of its time over the rounds, the median and range of its time /
CUB's, and the median % of copy.

    ab_summary.py LOG_DIR [BUILD ...]     logs LOG_DIR/<build>_<round>.txt (default builds: main new)
"""
import collections
import glob
import os
import statistics
import sys


def rows(path):
    """(op, algorithm, dtype, n) -> (us, us / CUB's us, % of copy) for one kernel-suite log."""
    cub = {}
    out = {}
    for line in open(path):
        p = line.split()
        if len(p) < 8 or p[0] in ("#", "op", "copy"):
            continue
        key = (p[0], p[2], p[3])
        if p[1] == "cub":
            cub[key] = float(p[4])
            continue
        us = float(p[4])
        out[(p[0], p[1], p[2], p[3])] = (us, us / cub[key] if cub.get(key) else float("nan"), p[6])
    return out


def main():
    log_dir = sys.argv[1]
    builds = sys.argv[2:] or ["main", "new"]
    table = collections.defaultdict(lambda: collections.defaultdict(list))
    for b in builds:
        for path in sorted(glob.glob(os.path.join(log_dir, f"{b}_[0-9]*.txt"))):
            for key, value in rows(path).items():
                table[key][b].append(value)
    for key, per_build in table.items():
        cells = []
        for b in builds:
            v = per_build.get(b)
            if not v:
                cells.append(f"{b}: -")
                continue
            us = [x[0] for x in v]
            ratio = [x[1] for x in v]
            copy = statistics.median(float(x[2].rstrip("%")) for x in v)
            cells.append(f"{b}: {min(us):.2f}-{max(us):.2f} us, /CUB {statistics.median(ratio):.3f} "
                         f"({min(ratio):.3f}-{max(ratio):.3f}), copy {copy:.1f}%")
        print(" ".join(key), "|", " | ".join(cells))


if __name__ == "__main__":
    main()
