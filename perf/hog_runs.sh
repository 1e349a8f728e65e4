#!/bin/bash
# perf/hog_runs.sh — the empty-RPC latency of rcp-rpcbench (shm, reply mode,
# one call in flight) over many short runs with CPU hogs beside it: clusters
# share CPUs, and a library that spins must not fall off a cliff when
# another process wants the same core.  Each run is one line of the CSV;
# the summary (stderr) gives min / median / p90 / max of the per-run
# latency for each number of hogs.
#
# usage: perf/hog_runs.sh [RUNS [HOGS...]]   (default: 20 runs, hogs 0 1 2)
#   run from a build directory (uses ./perf/rcp-rpcbench) or set PERF_BIN.
# Environment: TARGET_MS=300 per run; EXTRA="--spin" etc. passed to the tool.
# Each run holds /tmp/bench.lock.  Hogs are `while :; do :; done` shells at
# the default nice level, killed at the end (and on exit).
set -euo pipefail

bin=${PERF_BIN:-./perf}
if [ ! -x "$bin/rcp-rpcbench" ]; then
	echo "hog_runs.sh: no $bin/rcp-rpcbench; run from a build directory or set PERF_BIN" >&2
	exit 2
fi
runs=${1:-20}
shift || true
hogset=${*:-0 1 2}
hogs=()
stop_hogs() {
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
	hogs=()
}
trap stop_hogs EXIT

echo "hogs,run,calls_per_s,lat_us"
for h in $hogset; do
	for _ in $(seq "$h"); do
		sh -c 'while :; do :; done' &
		hogs+=($!)
	done
	lats=()
	for r in $(seq "$runs"); do
		# shellcheck disable=SC2086
		row=$(flock -x /tmp/bench.lock "$bin/rcp-rpcbench" --transport shm --mode reply \
			--inflight 1 --args 0 --target-ms "${TARGET_MS:-300}" --csv ${EXTRA:-} | tail -1)
		ops=$(echo "$row" | awk -F, '{print $(NF-2)}')
		lat=$(echo "$row" | awk -F, '{print $(NF-1)}')
		echo "$h,$r,$ops,$lat"
		lats+=("$lat")
	done
	stop_hogs
	printf '%s\n' "${lats[@]}" | sort -n | awk -v h="$h" '{a[NR] = $1}
		END {
			med = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
			p90 = a[int(0.9 * NR + 0.999)]
			printf "# hogs %d: %d runs, latency us min %.3f median %.3f p90 %.3f max %.3f\n",
				h, NR, a[1], med, p90, a[NR] > "/dev/stderr"
		}'
done
