#!/bin/sh
# perf/cluster_bench.sh — issue 20 item 4, SKELETON: RCP/udp across two
# rcp-cluster hosts per link configuration and loss, as CSV.
#
#   perf/cluster_bench.sh [--hosts N] [--sizes LIST] [--out FILE]   (root)
#
# Brings up a cluster (name "bench") for each of: 1gbit MTU 1500 and
# 10gbit MTU 9000, each with 0, 1% and 5% loss on the wire, and runs
# rcp-pingpong (spinning) h1 -> h2.  Columns: rate,mtu,loss,size,
# rtt_median_us,bandwidth_MBps,pct_of_link (bandwidth as a share of the
# link rate; bandwidth = size / (median / 2), one direction at a time).
# Not yet (see docs/cluster.md): kernel TCP across the same hosts (needs a
# --listen/--connect TCP mode in rcp-pingpong), relinked vs stock PVM
# across hosts, pvm_pmcast to 4 hosts, PNG.  Run it under
# `flock -x /tmp/bench.lock` on a shared machine; the 2 vCPUs run every
# host, so the CPU, not the link, may be the limit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rcpc=${RCP_CLUSTER_TOOL:-$here/../tools/rcp-cluster}
pp=${PP:-./perf/rcp-pingpong}
hosts=2 sizes=8,64k,1M out=/dev/stdout
while [ $# -gt 0 ]; do
	case $1 in
	--hosts) hosts=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--hosts N] [--sizes LIST] [--out FILE]" >&2; exit 2 ;;
	esac
done
[ -x "$pp" ] || { echo "$0: run from the build directory ($pp missing)" >&2; exit 2; }
C() { "$rcpc" --name bench "$@"; }
trap 'C down >/dev/null 2>&1' EXIT
trap 'exit 130' HUP INT TERM
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cluster-bench.XXXXXX") || exit 1
echo "rate,mtu,loss,size,rtt_median_us,bandwidth_MBps,pct_of_link" >"$out"
for link in 1gbit:1500:1000 10gbit:9000:10000; do
	rate=${link%%:*} mtu=${link#*:}; mtu=${mtu%%:*} mbit=${link##*:}
	for loss in 0 1% 5%; do
		C up "$hosts" --rate "$rate" --mtu "$mtu" --loss "$loss" >/dev/null || exit $?
		rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
		C exec h2 "$pp" --listen udp:198.18.0.2:7100 --spin >"$tmp/fifo" 2>/dev/null &
		exec 3<"$tmp/fifo"
		read -r _ <&3 # "serving ...": its endpoint is open
		C exec h1 "$pp" --connect udp:198.18.0.2:7100 --local udp:198.18.0.1: --spin \
			--sizes "$sizes" --csv >"$tmp/csv" || echo "$0: $rate $mtu $loss: run failed" >&2
		cat <&3 >/dev/null
		exec 3<&-
		wait
		# transport,size,iters,rtt_median_us,rtt_p99_us,bandwidth_MBps
		awk -F, -v r="$rate" -v m="$mtu" -v l="$loss" -v mb="$mbit" 'NR > 1 {
			printf "%s,%s,%s,%s,%s,%s,%.1f\n", r, m, l, $2, $4, $6, $6 * 8 / mb * 100 }' \
			"$tmp/csv" >>"$out"
	done
done
rm -rf "$tmp"
