#!/bin/bash
# perf/rpc_sweep.sh — rcp-rpcbench over every transport, wait mode and call
# mode: RPC rate per in-flight count (empty and 4 KiB arguments), bulk pull
# and push 4 KiB .. 4 MiB.  Writes perf/results/rcp-rpcbench-DATE.csv (the
# tool's CSV with a leading `wait` column) and a PNG next to it
# (perf/rpc_plot.py).  Mercury's figures, if perf/results/mercury.csv
# exists, are plotted alongside.
#
# usage: perf/rpc_sweep.sh [path/to/rcp-rpcbench]
# Environment (optional): TRANSPORTS="shm udp", WAITS="spin sleep",
#   MODES="reply fetch", INFLIGHT=1,4,16,64, SIZES=4K:4M, TARGET_MS=300,
#   RESULTS=dir.  Each run holds /tmp/bench.lock; a failed run fails the
#   sweep (no CSV with holes).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-}
if [ -z "$bin" ]; then
	if [ -x ./perf/rcp-rpcbench ]; then
		bin=./perf/rcp-rpcbench
	elif command -v rcp-rpcbench >/dev/null; then
		bin=rcp-rpcbench
	else
		echo "rpc_sweep.sh: no rcp-rpcbench here; pass its path" >&2
		exit 2
	fi
fi
transports=${TRANSPORTS:-shm udp}
waits=${WAITS:-spin sleep}
modes=${MODES:-reply fetch}
inflight=${INFLIGHT:-1,4,16,64}
sizes=${SIZES:-4K:4M}
target_ms=${TARGET_MS:-300}
results=${RESULTS:-$here/results}

mkdir -p "$results"
out=$results/rcp-rpcbench-$(date +%Y%m%d-%H%M%S).csv
tmp=$(mktemp "$results/.rpcsweep.XXXXXX")
run=$(mktemp)
trap 'rm -f "$tmp" "$run"' EXIT

first=1
for w in $waits; do
	for t in $transports; do
		for m in $modes; do
			# remote fetch exists on shm only; bulk rows once per wait mode
			if [ "$m" = fetch ] && [ "$t" != shm ]; then continue; fi
			bulk=()
			if [ "$m" = reply ]; then bulk=(--bulk both --sizes "$sizes"); fi
			echo "rpc_sweep.sh: $t $w $m" >&2
			flock /tmp/bench.lock "$bin" --transport "$t" --mode "$m" "--$w" \
				--inflight "$inflight" "${bulk[@]}" --target-ms "$target_ms" --csv >"$run"
			if [ $first = 1 ]; then
				sed -n '1s/^/wait,/p' "$run" >"$tmp"
				first=0
			fi
			sed -n "2,\$s/^/$w,/p" "$run" >>"$tmp"
		done
	done
done
mv "$tmp" "$out"
echo "$out"
py=""
for p in /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null && "$p" -c 'import matplotlib' 2>/dev/null; then
		py=$p
		break
	fi
done
if [ -n "$py" ]; then
	"$py" "$here/rpc_plot.py" "$out" "${out%.csv}.png" "$results/mercury.csv"
else
	echo "rpc_sweep.sh: no matplotlib; CSV only" >&2
fi
