#!/usr/bin/env python3
"""The paper's table from perf/cluster_bench.sh's CSV: a PNG and a summary.

usage: cluster_plot.py CLUSTER.csv OUT.png     (PNG + markdown on stdout)
       cluster_plot.py --no-png CLUSTER.csv    (markdown only)

Rounds of the same (link, loss, part, impl, size) are reduced to their
median.  The PNG has one row per link (rate/MTU): 1 MiB bandwidth as a
percentage of the link rate and 8 B round trip per loss, RCP/udp next to
kernel TCP; relinked vs stock PVM 8 B round trip; pmcast vs unicasts vs
stock pvm_mcast aggregate bandwidth.  The markdown tables (stdout) give the
same figures with the ratios the issue's targets are stated in.
"""
import csv
import statistics
import sys
from collections import defaultdict


def load(path):
    acc = defaultdict(list)
    cpu = defaultdict(list)
    for r in csv.DictReader(open(path)):
        k = (r["rate"], int(r["mtu"]), r["loss"], r["part"], r["impl"], int(r["size"]))
        acc[k].append((float(r["rtt_us"]), float(r["MBps"]), float(r["pct_link"] or 0),
                       int(r["retx"]) if r["retx"] else None))
        try:  # empty, or a failed process's time(1) line
            t = (float(r["cpu_client_s"]), float(r["cpu_server_s"]), float(r["wall_s"]))
            cpu[k[:5]].append(t)
        except ValueError:
            pass
    med = {}
    for k, v in acc.items():
        retx = [x[3] for x in v if x[3] is not None]
        med[k] = {"rtt": statistics.median(x[0] for x in v),
                  "bw": statistics.median(x[1] for x in v),
                  "pct": statistics.median(x[2] for x in v),
                  "retx": statistics.median(retx) if retx else None, "n": len(v)}
    return med, cpu


def links_of(med):
    seen = []
    for k in med:
        if k[3] in ("pp", "pvm", "mcast") and (k[0], k[1]) not in seen:
            seen.append((k[0], k[1]))
    return seen


def losses_of(med, link):
    ls = sorted({k[2] for k in med if (k[0], k[1]) == link},
                key=lambda s: float(s.rstrip("%") or 0))
    return ls


def g(med, *k):
    return med.get(tuple(k))


def fmt(v, f="%.1f"):
    return "—" if v is None else f % v


def markdown(med, cpu):
    out = []
    for link in links_of(med):
        rate, mtu = link
        rows = []
        base = {}
        for loss in losses_of(med, link):
            r8, t8 = g(med, rate, mtu, loss, "pp", "rcp", 8), g(med, rate, mtu, loss, "pp", "tcp", 8)
            if not r8 and not g(med, rate, mtu, loss, "pp", "rcp", 1 << 20):
                continue
            cells = [loss]
            cells += [fmt(r8 and r8["rtt"]), fmt(t8 and t8["rtt"]),
                      fmt(r8 and t8 and r8["rtt"] / t8["rtt"], "%.2f")]
            for size in (1 << 20, 4 << 20):
                r, t = g(med, rate, mtu, loss, "pp", "rcp", size), g(med, rate, mtu, loss, "pp", "tcp", size)
                if loss == "0" and r:
                    base[size] = r["bw"]
                cells += ["%s (%s%%)" % (fmt(r and r["bw"], "%.0f"), fmt(r and r["pct"], "%.0f")),
                          "%s (%s%%)" % (fmt(t and t["bw"], "%.0f"), fmt(t and t["pct"], "%.0f")),
                          fmt(r and t and r["bw"] / t["bw"], "%.2f"),
                          fmt(r and base.get(size) and r["bw"] / base[size], "%.2f"),
                          fmt(r and r["retx"], "%.0f")]
            rows.append(cells)
        if rows:
            out.append("\n**%s, MTU %d: RCP/udp vs kernel TCP, h1 ↔ h2, spinning** "
                       "(medians of the rounds)\n" % (rate, mtu))
            out.append("| loss | RCP 8 B µs | TCP 8 B µs | RCP/TCP | RCP 1 MiB MB/s (% link) | "
                       "TCP 1 MiB | RCP/TCP | RCP vs loss-free | retx | RCP 4 MiB (% link) | "
                       "TCP 4 MiB | RCP/TCP | RCP vs loss-free | retx |")
            out.append("|" + "---|" * 15)
            for c in rows:
                out.append("| " + " | ".join(c) + " |")
        prow = []
        for loss in losses_of(med, link):
            rc = g(med, rate, mtu, loss, "pvm", "rcp-spin", 8)
            sd = g(med, rate, mtu, loss, "pvm", "stock-default", 8)
            sr = g(med, rate, mtu, loss, "pvm", "stock-direct", 8)
            rb = g(med, rate, mtu, loss, "pvm", "rcp-spin", 1 << 20)
            sb = [x for x in (g(med, rate, mtu, loss, "pvm", "stock-default", 1 << 20),
                              g(med, rate, mtu, loss, "pvm", "stock-direct", 1 << 20)) if x]
            if not (rc or sd or sr):
                continue
            best = min([x["rtt"] for x in (sd, sr) if x], default=None)
            bestb = max([x["bw"] for x in sb], default=None)
            prow.append([loss, fmt(rc and rc["rtt"]), fmt(sd and sd["rtt"]), fmt(sr and sr["rtt"]),
                         fmt(rc and best and best / rc["rtt"], "%.1f"),
                         fmt(rb and rb["bw"], "%.0f"), fmt(bestb, "%.0f"),
                         fmt(rb and bestb and rb["bw"] / bestb, "%.2f")])
        if prow:
            out.append("\n**%s, MTU %d: PVM h1 ↔ h2, relinked (spinning) vs stock**\n" % (rate, mtu))
            out.append("| loss | relinked 8 B µs | stock default route | stock direct | stock best / relinked "
                       "| relinked 1 MiB MB/s | stock best 1 MiB | ratio |")
            out.append("|" + "---|" * 8)
            for c in prow:
                out.append("| " + " | ".join(c) + " |")
        mrow = []
        for loss in losses_of(med, link):
            pm = g(med, rate, mtu, loss, "mcast", "pmcast", 1 << 20)
            un = g(med, rate, mtu, loss, "mcast", "unicast", 1 << 20)
            st = g(med, rate, mtu, loss, "mcast", "stock-mcast", 1 << 20)
            if not (pm or un or st):
                continue
            mrow.append([loss, fmt(pm and pm["bw"], "%.0f"), fmt(un and un["bw"], "%.0f"),
                         fmt(st and st["bw"], "%.0f"),
                         fmt(pm and un and pm["bw"] / un["bw"], "%.2f"),
                         fmt(pm and st and pm["bw"] / st["bw"], "%.2f")])
        if mrow:
            out.append("\n**%s, MTU %d: 1 MiB from h1 to h2..h5, aggregate delivered MB/s**\n"
                       % (rate, mtu))
            out.append("| loss | pvm_pmcast | 4 pvm_psend | stock pvm_mcast | pmcast / unicasts "
                       "| pmcast / stock |")
            out.append("|" + "---|" * 6)
            for c in mrow:
                out.append("| " + " | ".join(c) + " |")
    ceil = sorted({k[1] for k in med if k[3] == "ceil"})
    if ceil:
        out.append("\n**CPU ceiling: no rate limit, no loss (the 2 vCPUs carry both programs, "
                   "the veths and the bridge)**\n")
        out.append("| MTU | RCP 1 MiB MB/s | TCP 1 MiB | RCP 4 MiB | TCP 4 MiB | RCP 8 B µs | TCP 8 B µs |")
        out.append("|" + "---|" * 7)
        for mtu in ceil:
            c = [str(mtu)]
            for size in (1 << 20, 4 << 20):
                for impl in ("rcp", "tcp"):
                    x = g(med, "none", mtu, "0", "ceil", impl, size)
                    c.append(fmt(x and x["bw"], "%.0f"))
            for impl in ("rcp", "tcp"):
                x = g(med, "none", mtu, "0", "ceil", impl, 8)
                c.append(fmt(x and x["rtt"]))
            out.append("| " + " | ".join(c) + " |")
    if cpu:
        out.append("\n**CPU seconds per process (user+system, all sizes of a session; "
                   "spinning: both sides busy the whole session)**\n")
        out.append("| link | loss | part | impl | client | server | wall |")
        out.append("|" + "---|" * 7)
        for k in sorted(cpu):
            v = cpu[k]
            out.append("| %s/%d | %s | %s | %s | %.2f | %.2f | %.2f |" % (
                k[0], k[1], k[2], k[3], k[4], statistics.median(x[0] for x in v),
                statistics.median(x[1] for x in v), statistics.median(x[2] for x in v)))
    return "\n".join(out) + "\n"


def plot(med, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    links = links_of(med)
    fig, axes = plt.subplots(len(links), 4, figsize=(17, 3.6 * len(links)), squeeze=False)
    for row, link in enumerate(links):
        rate, mtu = link
        losses = losses_of(med, link)
        xs = range(len(losses))
        title = "%s MTU %d" % (rate, mtu)

        def bars(ax, series, key, ylabel, head):
            w = 0.8 / max(1, len(series))
            if not any(g(med, rate, mtu, l, s[1], s[2], s[3]) for s in series for l in losses):
                ax.axis("off")  # a part not run on this link
                return
            for i, (label, part, impl, size, colour) in enumerate(series):
                ys = [(g(med, rate, mtu, l, part, impl, size) or {}).get(key, 0) for l in losses]
                ax.bar([x + i * w for x in xs], ys, w, label=label, color=colour)
            ax.set_xticks([x + w * (len(series) - 1) / 2 for x in xs])
            ax.set_xticklabels(["loss %s" % l if l != "0" else "no loss" for l in losses])
            ax.set_ylabel(ylabel)
            ax.set_title("%s: %s" % (title, head), fontsize=10)
            ax.legend(fontsize=8)
            ax.grid(axis="y", alpha=0.3)

        bars(axes[row][0], [("RCP/udp 1 MiB", "pp", "rcp", 1 << 20, "tab:orange"),
                            ("TCP 1 MiB", "pp", "tcp", 1 << 20, "0.35"),
                            ("RCP/udp 4 MiB", "pp", "rcp", 4 << 20, "tab:red"),
                            ("TCP 4 MiB", "pp", "tcp", 4 << 20, "0.65")],
             "pct", "% of link rate", "bandwidth")
        bars(axes[row][1], [("RCP/udp", "pp", "rcp", 8, "tab:orange"), ("TCP", "pp", "tcp", 8, "0.35")],
             "rtt", "µs", "8 B round trip")
        bars(axes[row][2], [("relinked PVM", "pvm", "rcp-spin", 8, "tab:blue"),
                            ("stock, default route", "pvm", "stock-default", 8, "0.35"),
                            ("stock, direct", "pvm", "stock-direct", 8, "0.65")],
             "rtt", "µs", "PVM 8 B round trip")
        bars(axes[row][3], [("pvm_pmcast", "mcast", "pmcast", 1 << 20, "tab:green"),
                            ("4 pvm_psend", "mcast", "unicast", 1 << 20, "tab:olive"),
                            ("stock pvm_mcast", "mcast", "stock-mcast", 1 << 20, "0.5")],
             "bw", "aggregate MB/s", "1 MiB to 4 hosts")
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def main(argv):
    if len(argv) >= 2 and argv[0] == "--no-png":
        med, cpu = load(argv[1])
        sys.stdout.write(markdown(med, cpu))
        return 0
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    med, cpu = load(argv[0])
    plot(med, argv[1])
    sys.stdout.write(markdown(med, cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
