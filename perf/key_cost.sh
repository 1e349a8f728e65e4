#!/bin/bash
# perf/key_cost.sh — what the job key (RCP_SESSION_KEY, nic/auth.c) costs:
# RCP over udp without and with the key, in alternating rounds (the host's
# speed drifts within a minute; one long run of each would measure the
# drift), 8 B round trip and 4 MiB bandwidth, spinning.
#
# usage: perf/key_cost.sh [OUT_PREFIX]
#   run from a build directory (uses ./perf/rcp-pingpong) or set PERF_BIN.
#   Writes OUT_PREFIX.csv (default perf-key-cost) and, where python3 has
#   matplotlib, OUT_PREFIX.png; prints the median ratios (key / none).
# Environment: ROUNDS=5, TRANSPORT=udp.  Each run holds /tmp/bench.lock.
set -euo pipefail

bin=${PERF_BIN:-./perf}
if [ ! -x "$bin/rcp-pingpong" ]; then
	echo "key_cost.sh: no $bin/rcp-pingpong; run from a build directory or set PERF_BIN" >&2
	exit 2
fi
out=${1:-perf-key-cost}
rounds=${ROUNDS:-5}
tr=${TRANSPORT:-udp}
key=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# run KEY SIZE -> "rtt_us,bw_MBps"
run() {
	RCP_SESSION_KEY=$1 flock -x /tmp/bench.lock "$bin/rcp-pingpong" --transport "$tr" \
		--sizes "$2" --spin --csv | tail -1 | cut -d, -f4,6
}

echo "round,size,none_rtt_us,none_MBps,key_rtt_us,key_MBps,rtt_ratio,bw_ratio" | tee "$out.csv"
r8=() r4=()
for r in $(seq "$rounds"); do
	for size in 8 4194304; do
		a=$(run "" "$size")
		b=$(run "$key" "$size")
		row=$(awk -F, -v r="$r" -v s="$size" -v a="$a" -v b="$b" 'BEGIN {
			split(a, x, ","); split(b, y, ",");
			printf "%s,%s,%s,%s,%s,%s,%.3f,%.3f", r, s, x[1], x[2], y[1], y[2], y[1] / x[1], y[2] / x[2] }')
		echo "$row" | tee -a "$out.csv"
		if [ "$size" = 8 ]; then r8+=("$(echo "$row" | cut -d, -f7)"); else r4+=("$(echo "$row" | cut -d, -f8)"); fi
	done
done
echo "# $tr 8 B round trip, key/none: median $(printf '%s\n' "${r8[@]}" | median) over $rounds rounds"
echo "# $tr 4 MiB bandwidth, key/none: median $(printf '%s\n' "${r4[@]}" | median) over $rounds rounds"
if python3 -c 'import matplotlib' 2>/dev/null; then
	python3 - "$out.csv" "$out.png" <<'EOF'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
for a, size, cols, label in ((ax[0], "8", ("none_rtt_us", "key_rtt_us"), "8 B round trip (us)"),
                              (ax[1], "4194304", ("none_MBps", "key_MBps"), "4 MiB bandwidth (MB/s)")):
    rs = [r for r in rows if r["size"] == size]
    x = [int(r["round"]) for r in rs]
    a.plot(x, [float(r[cols[0]]) for r in rs], "o-", label="no key")
    a.plot(x, [float(r[cols[1]]) for r in rs], "s--", label="job key")
    a.set_xlabel("round"); a.set_title(label); a.legend(); a.set_ylim(bottom=0)
fig.tight_layout(); fig.savefig(sys.argv[2], dpi=100)
EOF
	echo "# plot: $out.png"
fi
