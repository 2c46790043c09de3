#!/usr/bin/env python3
"""GB/s by transport mode from `gpuscan bench --e2e --json` files: each mode's calls beside its
own ceiling measured in the same run (Transport streams, or the host's own pass over the bytes for
shared memory), median over the files of that mode with the range as whiskers.

    bench/plot_transport_modes.py OUT.svg RESULT.json [RESULT.json ...]

Needs matplotlib (Debian: python3-matplotlib). Writes OUT (svg or png, by its suffix) and prints
the table it plots.
"""
import json
import statistics
import sys
from collections import defaultdict


def mode_of(doc):
    """A row's label: operation, transport mode, and how it was fed."""
    if doc.get("shm"):
        how = "shared memory"
    elif doc.get("lanes", 1) > 1:
        how = f"{doc['lanes']} lanes"
    elif doc.get("shards", 1) > 1:
        how = f"{doc['shards']} shards"
    else:
        how = "one stream"
    extras = []
    if doc.get("plain_io"):
        extras.append("copied Source")
    if doc.get("checked"):
        extras.append("checked")
    return f"{doc['op']}, {how}" + (f" ({', '.join(extras)})" if extras else "")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_transport_modes.py needs matplotlib (Debian: apt-get install python3-matplotlib)")
    out, paths = argv[1], argv[2:]
    service, ceiling, ceiling_kind = defaultdict(list), defaultdict(list), {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        level = doc["levels"][0]
        label = mode_of(doc)
        service[label].append(level["gbps"])
        ceiling[label].append(level["ceiling"]["gbps"])
        rpc = doc.get("ceiling_rpc", {})
        ceiling_kind[label] = "host " + rpc["host"] if rpc.get("name") == "host" else "Transport"
    labels = sorted(service, key=lambda k: statistics.median(service[k]))
    med = lambda v: statistics.median(v)
    print(f"{'mode':48} {'GB/s':>7} {'range':>15} {'ceiling':>8}  share  ceiling kind")
    for k in labels:
        s, c = service[k], ceiling[k]
        print(f"{k:48} {med(s):7.2f} {min(s):7.2f}-{max(s):<7.2f} {med(c):8.2f} {100 * med(s) / med(c):5.0f}%  {ceiling_kind[k]}")

    fig, ax = plt.subplots(figsize=(10, 0.55 * len(labels) + 1.5))
    y = range(len(labels))
    h = 0.38
    for offset, data, name, color in ((-h / 2, service, "the call", "#1f77b4"), (h / 2, ceiling, "its ceiling", "#bbbbbb")):
        vals = [med(data[k]) for k in labels]
        lo = [med(data[k]) - min(data[k]) for k in labels]
        hi = [max(data[k]) - med(data[k]) for k in labels]
        ax.barh([i + offset for i in y], vals, height=h, xerr=[lo, hi], color=color, label=name, capsize=2)
    ax.set_yticks(list(y))
    ax.set_yticklabels([f"{k}  [{ceiling_kind[k]}]" for k in labels], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("GB/s of input (median of rounds, whiskers: range), log scale")
    ax.set_title("1 GiB int32 calls by transport mode, each beside its ceiling in the same run", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv)
