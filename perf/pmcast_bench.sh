#!/bin/sh
# perf/pmcast_bench.sh — pvm_pmcast of SIZE bytes from h1 to one task on
# each of h2..h(N+1) of a running rcp-cluster: IP multicast, RCP unicasts
# (multicast off) and stock pvm_mcast, one CSV line each
# (perf/pvm_mcast_bench.c: aggregate delivered bandwidth = N * SIZE /
# median time per message, the message counted as delivered when every
# host answered).  Starts the cluster's PVM VM itself and halts it after.
#
#   perf/pmcast_bench.sh [--name NAME] [--hosts N] [--size BYTES] [--iters K]
#                        [--modes "multicast unicast stock"] [--header]
#
# Needs: a cluster NAME (default c) with at least N+1 hosts already up
# (`rcp-cluster up 5 --rate 1gbit --mtu 9000`), the build tree's
# perf/rcp-pvm-mcast-bench (run from the build directory, or set
# abs_builddir).  The caller takes the benchmark lock (flock -x).
# Output: mode,hosts,bytes,iters,median_us,min_us,agg_MBps,route,group_frames
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
b=${abs_builddir:-$PWD}
name=c hosts=4 size=1048576 iters=20 modes="multicast unicast stock" header=0
while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$2; shift 2 ;;
	--hosts) hosts=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--modes) modes=$2; shift 2 ;;
	--header) header=1; shift ;;
	*) echo "usage: $0 [--name NAME] [--hosts N] [--size BYTES] [--iters K] [--modes LIST] [--header]" >&2
		exit 2 ;;
	esac
done
rcpc="$top/tools/rcp-cluster"
bin="$b/perf/rcp-pvm-mcast-bench"
[ -x "$bin" ] || { echo "SKIP: $bin not built (no pvm?)" >&2; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pmcast-bench.XXXXXX") || exit 1
trap '"$rcpc" --name "$name" pvm halt >/dev/null 2>&1; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ep"
cp "$bin" "$tmp/ep/" || exit 1
"$rcpc" --name "$name" pvm start --ep "$tmp/ep" >"$tmp/start.out" 2>&1 ||
	{ cat "$tmp/start.out" >&2; exit 1; }
list=$(seq 2 $((hosts + 1)) | sed 's/^/h/' | tr '\n' ' ')
[ $header -eq 1 ] && echo "mode,hosts,bytes,iters,median_us,min_us,agg_MBps,route,group_frames"
rc=0
for m in $modes; do
	# shellcheck disable=SC2086
	(cd "$tmp" && timeout 300 "$rcpc" --name "$name" exec h1 "$tmp/ep/rcp-pvm-mcast-bench" \
		"$m" "$size" "$iters" $list) >"$tmp/out" 2>&1 || { sed "s/^/# $m: /" "$tmp/out" >&2; rc=1; }
	grep "^$m," "$tmp/out"
done
exit $rc
