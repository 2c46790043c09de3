#!/usr/bin/env python3
"""Reads kernel-suite logs of an A/B of builds (`scripts/gpu run ab`).

    ab_summary.py LOG_DIR [BUILD ...]     for each row (op, algorithm, dtype, n) and build over the
                                          logs LOG_DIR/<build>_<round>.txt (default builds: main
                                          new): the range of its time, the median and range of its
                                          time / CUB's, and the median % of copy
    ab_summary.py --rows LOG              one log's rows: copy / CUB / ours (us), ours / CUB's
                                          time, % of copy
"""
import collections
import glob
import os
import statistics
import sys


def rows(path):
    """(op, algorithm, dtype, n) -> (us, us / CUB's us, % of copy, copy us, CUB us) for one log."""
    copy = {}
    cub = {}
    out = {}
    for line in open(path):
        p = line.split()
        if len(p) < 8 or p[0].startswith("#") or p[0] == "op":
            continue
        try:  # a row's time; anything else (an error a failed run printed) is not a row
            float(p[4])
        except ValueError:
            continue
        if p[0] == "copy":
            copy[(p[1], p[2], p[3])] = float(p[4])
            continue
        key = (p[0], p[2], p[3])
        if p[1] == "cub":
            cub[key] = float(p[4])
            continue
        us = float(p[4])
        out[(p[0], p[1], p[2], p[3])] = (us, us / cub[key] if cub.get(key) else float("nan"), p[6],
                                         copy.get(key, float("nan")), cub.get(key, float("nan")))
    return out


def print_rows(path):
    for key, (us, ratio, copy_pct, copy_us, cub_us) in rows(path).items():
        print(" ".join(key), f"{copy_us:.2f}/{cub_us:.2f}/{us:.2f} us {ratio:.3f}x {copy_pct}")  # the suite prints 2 decimals


def main():
    if sys.argv[1] == "--rows":
        print_rows(sys.argv[2])
        return
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
