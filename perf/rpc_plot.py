#!/usr/bin/env python3
"""perf/rpc_plot.py CSV PNG [MERCURY_CSV] — plots an rpc_sweep.sh CSV:
left, RPC rate vs calls in flight (one line per transport/wait/mode/arg
size); right, bulk bandwidth vs size.  Mercury's rows (same columns, if the
file exists and has them) are drawn dashed."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    rows = load(sys.argv[1])
    merc = []
    if len(sys.argv) > 3 and os.path.exists(sys.argv[3]):
        try:
            merc = [r for r in load(sys.argv[3]) if "op" in r and "inflight" in r]
        except Exception:
            merc = []
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5))
    series = {}
    for r in rows:
        if r["op"] != "rpc":
            continue
        key = (r["transport"], r.get("wait", ""), r["mode"], r["size"])
        series.setdefault(key, []).append((int(r["inflight"]), float(r["rate_ops"]) / 1e6))
    for key, pts in sorted(series.items()):
        pts.sort()
        a.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
               label="%s %s %s %sB" % key)
    for r in merc:
        pass
    mser = {}
    for r in merc:
        if r.get("op") == "rpc":
            k = ("mercury", r.get("transport", ""), r.get("wait", r.get("mode", "")))
            mser.setdefault(k, []).append((int(r["inflight"]), float(r["rate_ops"]) / 1e6))
    for key, pts in sorted(mser.items()):
        pts.sort()
        a.plot([p[0] for p in pts], [p[1] for p in pts], "--", marker="x",
               label=" ".join(key))
    a.set_xscale("log", base=2)
    a.set_xlabel("calls in flight")
    a.set_ylabel("M RPC/s (successful)")
    a.set_title("RPC rate")
    a.legend(fontsize=6)
    bser = {}
    for r in rows + merc:
        if r.get("op") in ("pull", "push"):
            src = "mercury " if r in merc else ""
            k = src + "%s %s %s" % (r.get("transport", ""), r.get("wait", ""), r["op"])
            bser.setdefault(k, []).append((int(r["size"]), float(r["bandwidth_MBps"]) / 1e3))
    for key, pts in sorted(bser.items()):
        pts.sort()
        b.plot([p[0] for p in pts], [p[1] for p in pts],
               "--" if key.startswith("mercury") else "-", marker="o", label=key)
    b.set_xscale("log", base=2)
    b.set_xlabel("bytes")
    b.set_ylabel("GB/s")
    b.set_title("bulk (one call per transfer)")
    b.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print(sys.argv[2])


main()
