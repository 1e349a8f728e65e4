#!/usr/bin/env python3
"""perf/rcpio_plot.py PNG CSV... — plots perf/rcpio_bench.sh CSVs (one or
more runs; the fs column tells the runs apart) and prints the tables of
docs/results.md on stdout (markdown).

MODE=ior rows: read bandwidth of plain MPI-IO and rcpio per phase — the
first read of the rank's own pieces (r1) and of another rank's (o1), the
same after close+open (r2, o2: a file already cached) and a new job's
read (R) — and rcpio/MPI-IO ratios, per fs and pattern.  MODE=ckpt rows:
the checkpoint (write + sync, the compute phase between them excluded)
and the restart (the new job's open + read) in seconds, per fs and impl.
"""
import csv
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

READS = ["r1", "o1", "r2", "o2", "R"]
NAMES = {
    "r1": "own pieces",
    "o1": "another rank's",
    "r2": "own, after reopen",
    "o2": "another's, after reopen",
    "R": "new job",
}


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows += list(csv.DictReader(f))
    return rows


def ior(rows):
    """{(fs, pattern): {impl: {phase: MBps}}}, r/o numbered by order."""
    out = OrderedDict()
    seen = {}
    for r in rows:
        if r["impl"] not in ("mpiio", "rcpio") or r["phase"] not in "roRws" or r["pattern"] == "ckpt":
            continue
        key = (r["fs"], r["pattern"])
        d = out.setdefault(key, {}).setdefault(r["impl"], {})
        ph = r["phase"]
        if ph in "ro":
            n = seen.get((key, r["impl"], ph), 0) + 1
            seen[(key, r["impl"], ph)] = n
            ph = "%s%d" % (ph, n)
        d[ph] = float(r["MBps"]) if ph != "s" else float(r["seconds"])
    return out


def ckpt(rows):
    """{fs: {impl: (checkpoint s, restart s)}}."""
    out = OrderedDict()
    by = OrderedDict()
    for r in rows:
        if r["pattern"] == "ckpt":
            by.setdefault((r["fs"], r["impl"]), []).append(r)
    for (fs, impl), rs in by.items():
        phases = {r["phase"]: float(r["seconds"]) for r in rs}
        ck = phases["w"] + phases["s"] if "w" in phases else None
        out.setdefault(fs, OrderedDict())[impl] = (ck, phases.get("P", 0) + phases.get("R", 0), phases)
    return out


def main():
    png, paths = sys.argv[1], sys.argv[2:]
    rows = load(paths)
    io = ior(rows)
    ck = ckpt(rows)
    io = OrderedDict((k, v) for k, v in io.items() if "mpiio" in v and "rcpio" in v and "r1" in v["mpiio"])
    # One row per fs: segmented, strided, and its checkpoint/restart.
    fss = list(OrderedDict.fromkeys([k[0] for k in io] + list(ck)))
    fig, axes = plt.subplots(len(fss), 3, figsize=(14, 4.4 * len(fss)), squeeze=False)
    for row, fs in enumerate(fss):
        for col, pat in enumerate(["segmented", "strided"]):
            ax = axes[row][col]
            d = io.get((fs, pat))
            if not d:
                ax.axis("off")
                continue
            x = range(len(READS))
            w = 0.38
            a = [d["mpiio"].get(p, 0) for p in READS]
            b = [d["rcpio"].get(p, 0) for p in READS]
            ax.bar([i - w / 2 for i in x], a, w, label="Open MPI MPI-IO")
            ax.bar([i + w / 2 for i in x], b, w, label="rcpio")
            for i, (u, v) in enumerate(zip(a, b)):
                if u:
                    ax.text(i + w / 2, v, "%.1fx" % (v / u), ha="center", va="bottom", fontsize=7)
            ax.set_xticks(list(x))
            ax.set_xticklabels([NAMES[p] for p in READS], rotation=25, ha="right", fontsize=7)
            ax.set_title("%s, %s: read MB/s (4 ranks)" % (fs, pat), fontsize=9)
            ax.legend(fontsize=7)
        ax = axes[row][2]
        d = ck.get(fs)
        if not d:
            ax.axis("off")
            continue
        labels = list(d)
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], [d[k][0] or 0 for k in labels], 0.4,
               label="checkpoint (write+sync)")
        ax.bar([i + 0.2 for i in x], [d[k][1] for k in labels], 0.4,
               label="restart (new job: open+read)")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("seconds (slowest rank)")
        ax.set_title("%s: checkpoint, kill, restart" % fs, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)

    # Tables.
    for (fs, pat), d in io.items():
        print("\n%s, %s (MB/s, slowest rank; ratio rcpio / MPI-IO):\n" % (fs, pat))
        print("| phase | MPI-IO | rcpio | ratio |")
        print("|---|---|---|---|")
        for p in ["w"] + READS:
            u, v = d["mpiio"].get(p), d["rcpio"].get(p)
            if u is None or v is None:
                continue
            print("| %s | %.0f | %.0f | %.2f |" % ("write" if p == "w" else NAMES[p], u, v, v / u))
    for fs, d in ck.items():
        print("\n%s, checkpoint and restart (seconds, slowest rank):\n" % fs)
        print("| impl | write | sync | checkpoint | new job's open | read | restart |")
        print("|---|---|---|---|---|---|---|")
        for impl, (c, r, ph) in d.items():
            f = lambda k: ("%.3f" % ph[k]) if k in ph else "-"
            print(
                "| %s | %s | %s | %s | %s | %s | %.3f |"
                % (impl, f("w"), f("s"), ("%.3f" % c) if c is not None else "-", f("P"), f("R"), r)
            )


if __name__ == "__main__":
    main()
