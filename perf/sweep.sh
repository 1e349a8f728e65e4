#!/bin/bash
# perf/sweep.sh — RCP channels vs kernel TCP, every transport and wait mode,
# message sizes 1 B .. 4 MiB; writes perf/results/rcp-pingpong-DATE.csv and a
# PNG plot next to it (perf/plot.py).
#
# usage: perf/sweep.sh [path/to/rcp-pingpong]
#   default binary: ./perf/rcp-pingpong (run from a build directory), else
#   rcp-pingpong on PATH.
# Environment (all optional): TRANSPORTS="shm udp", MODES="spin sleep",
#   SIZES=1:4M, TARGET_MS=300 (measured time per size and run), RESULTS=dir.
#
# The CSV is the tool's --csv --compare tcp output with a leading `mode`
# column, one header line.  Each timed run holds /tmp/bench.lock so it
# never overlaps another benchmark on this machine; TCP is measured again
# in every run (it is part of the same live comparison).  A failed run
# fails the sweep: no CSV with holes, no plot of it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-}
if [ -z "$bin" ]; then
	if [ -x ./perf/rcp-pingpong ]; then
		bin=./perf/rcp-pingpong
	elif command -v rcp-pingpong >/dev/null; then
		bin=rcp-pingpong
	else
		echo "sweep.sh: no rcp-pingpong here; pass its path" >&2
		exit 2
	fi
fi
transports=${TRANSPORTS:-shm udp}
modes=${MODES:-spin sleep}
sizes=${SIZES:-1:4M}
target_ms=${TARGET_MS:-300}
results=${RESULTS:-$here/results}

# matplotlib for the plot: Debian's package serves /usr/bin/python3, which
# may not be the python3 first on PATH.  Installed with apt, never pip.
py=""
for p in /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null && "$p" -c 'import matplotlib' 2>/dev/null; then
		py=$p
		break
	fi
done
if [ -z "$py" ]; then
	echo "sweep.sh: installing python3-matplotlib" >&2
	apt-get install -y -q python3-matplotlib >/dev/null ||
		{ apt-get update -q >/dev/null && apt-get install -y -q python3-matplotlib >/dev/null; }
	py=/usr/bin/python3
fi

mkdir -p "$results"
out=$results/rcp-pingpong-$(date +%Y%m%d-%H%M%S).csv
tmp=$(mktemp "$results/.sweep.XXXXXX")
run=$(mktemp)
trap 'rm -f "$tmp" "$run"' EXIT

first=1
for mode in $modes; do
	case $mode in
	spin | sleep) flag=("--$mode") ;;
	spin-then-sleep) flag=() ;;
	*) echo "sweep.sh: unknown mode $mode" >&2; exit 2 ;;
	esac
	for t in $transports; do
		echo "sweep.sh: $t, $mode" >&2
		flock /tmp/bench.lock "$bin" --transport "$t" "${flag[@]}" --sizes "$sizes" \
			--target-ms "$target_ms" --compare tcp --csv >"$run"
		if [ $first = 1 ]; then
			sed -n '1s/^/mode,/p' "$run" >"$tmp"
			first=0
		fi
		sed -n "2,\$s/^/$mode,/p" "$run" >>"$tmp"
	done
done
mv "$tmp" "$out"
echo "$out"
"$py" "$here/plot.py" "$out" "${out%.csv}.png"
