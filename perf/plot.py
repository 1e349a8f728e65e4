#!/usr/bin/env python3
"""Plot rcp-pingpong CSV: round trip and bandwidth vs message size, RCP vs TCP.

usage: plot.py RESULTS.csv [OUT.png]

Input: the CSV of `rcp-pingpong --csv [--compare tcp]`, optionally with a
leading `mode` column (perf/sweep.sh adds it: spin, sleep, ...).  Output: one
PNG with two panels on log-log axes, median round trip (us) and bandwidth
(MB/s, size / (rtt/2)), one line per (transport, mode) for RCP and one dashed
grey-scale line per mode for kernel TCP.  When several runs measured TCP for
the same mode and size (one per transport), their mean is drawn.
Size 0 rows cannot sit on a log axis and are skipped.
"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

TRANSPORT_COLOURS = {"shm": "tab:blue", "udp": "tab:orange"}
MODE_STYLES = {"spin": "-", "sleep": "--", "spin-then-sleep": ":", "default": ":"}
MODE_MARKERS = {"spin": "o", "sleep": "s", "spin-then-sleep": "^", "default": "^"}
TCP_GREYS = {"spin": "0.15", "sleep": "0.55", "spin-then-sleep": "0.35", "default": "0.35"}


def num(s):
    return float(s) if s not in ("", None) else None


def size_label(v, _pos=None):
    v = int(v)
    for unit, shift in (("M", 20), ("k", 10)):
        if v >= 1 << shift and v % (1 << shift) == 0:
            return "%d%s" % (v >> shift, unit)
    return str(v)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.splitext(src)[0] + ".png"

    rcp = defaultdict(list)  # (transport, mode) -> [(size, rtt, bw)]
    tcp = defaultdict(lambda: defaultdict(list))  # mode -> size -> [(rtt, bw)]
    with open(src, newline="") as f:
        for row in csv.DictReader(f):
            size = int(row["size"])
            if size == 0:
                continue
            mode = row.get("mode") or "default"
            rcp[(row["transport"], mode)].append(
                (size, float(row["rtt_median_us"]), float(row["bandwidth_MBps"]))
            )
            t_rtt = num(row.get("tcp_rtt_median_us"))
            if t_rtt is not None:
                tcp[mode][size].append((t_rtt, float(row["tcp_bandwidth_MBps"])))
    if not rcp:
        sys.exit("plot.py: no rows in %s" % src)

    fig, (ax_lat, ax_bw) = plt.subplots(1, 2, figsize=(13, 5.2))
    for (transport, mode), pts in sorted(rcp.items()):
        pts.sort()
        xs = [p[0] for p in pts]
        style = dict(
            color=TRANSPORT_COLOURS.get(transport),
            linestyle=MODE_STYLES.get(mode, "-."),
            marker=MODE_MARKERS.get(mode, "x"),
            markersize=3.5,
            label="RCP %s, %s" % (transport, mode),
        )
        ax_lat.plot(xs, [p[1] for p in pts], **style)
        ax_bw.plot(xs, [p[2] for p in pts], **style)
    for mode, by_size in sorted(tcp.items()):
        xs = sorted(by_size)
        rtt = [sum(v[0] for v in by_size[s]) / len(by_size[s]) for s in xs]
        bw = [sum(v[1] for v in by_size[s]) / len(by_size[s]) for s in xs]
        style = dict(
            color=TCP_GREYS.get(mode, "0.4"),
            linestyle=MODE_STYLES.get(mode, "-."),
            linewidth=2.2,
            alpha=0.8,
            label="kernel TCP loopback, %s" % mode,
        )
        ax_lat.plot(xs, rtt, **style)
        ax_bw.plot(xs, bw, **style)

    for ax, title, ylabel in (
        (ax_lat, "Round trip (median)", "round trip [us]"),
        (ax_bw, "Bandwidth = size / (rtt/2)", "bandwidth [MB/s, 1e6 B]"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(size_label))
        # Labels at 1, 2, 5 x 10^k: a reader should not have to count decades.
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: "%g" % v))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("message size [bytes]")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.4)
        ax.grid(True, which="minor", alpha=0.12)
        ax.tick_params(axis="x", labelrotation=45)
    ax_lat.legend(fontsize=8, loc="upper left")
    fig.suptitle("rcp-pingpong: RCP channels vs kernel TCP (%s)" % os.path.basename(src))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
