#!/bin/bash
# perf/udp_ratio.sh — RCP over udp against the kernel UDP socket, 8 B round
# trip, in alternating short rounds: kernel (unconnected sendto/recvfrom, as
# a socket that accepts unknown senders must be), then RCP, ROUNDS times.
# One long run of each is not a fair comparison on this kind of host: its
# speed drifts by 10-30% within a minute, more than the margin measured.
# Prints one CSV row per round and the median ratio (rcp / kernel).
#
# usage: perf/udp_ratio.sh [spin|sleep ...]   (default: spin sleep)
#   run from a build directory (uses ./perf/rcp-nic-pingpong and
#   ./perf/rcp-pingpong), or set PERF_BIN to the directory holding them.
# Environment: ROUNDS=10, ITERS=20000 round trips per run (sleep: ITERS/2),
#   SIZE=8.  Each run holds /tmp/bench.lock (never overlaps another
#   benchmark).
set -euo pipefail

bin=${PERF_BIN:-./perf}
for p in rcp-nic-pingpong rcp-pingpong; do
	if [ ! -x "$bin/$p" ]; then
		echo "udp_ratio.sh: no $bin/$p; run from a build directory or set PERF_BIN" >&2
		exit 2
	fi
done
rounds=${ROUNDS:-10}
size=${SIZE:-8}
modes=${*:-spin sleep}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "mode,round,size,kernel_udp_rtt_us,rcp_udp_rtt_us,ratio"
for m in $modes; do
	it=${ITERS:-20000}
	[ "$m" = sleep ] && it=$((it / 2))
	ratios=()
	for r in $(seq "$rounds"); do
		k=$(flock -x /tmp/bench.lock "$bin/rcp-nic-pingpong" --transport kernel-udp-unconn \
			--mode "$m" --size "$size" --iters "$it" --warmup 2000 --csv | tail -1 | cut -d, -f5)
		n=$(flock -x /tmp/bench.lock "$bin/rcp-pingpong" --transport udp --sizes "$size" \
			--"$m" --iters "$it" --csv | tail -1 | cut -d, -f4)
		x=$(awk -v a="$n" -v b="$k" 'BEGIN {printf "%.3f", a / b}')
		ratios+=("$x")
		echo "$m,$r,$size,$k,$n,$x"
	done
	echo "# $m: median ratio $(printf '%s\n' "${ratios[@]}" | median) over $rounds rounds" >&2
done
