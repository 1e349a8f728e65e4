#!/bin/bash
# perf/cluster_rtt_ab.sh — 8 B round trip between two hosts of an
# rcp-cluster, RCP/udp built two ways (A/B: two librcp.so.0 directories)
# against kernel TCP, both spinning (rcp-pingpong --spin), in alternating
# rounds (A B tcp, then tcp B A, ...), optionally beside CPU hogs: the
# check of a wait-policy change on the issue 20 8 B target (common/wait.c,
# CROWDED).  Each round is one rcp-pingpong session h1 -> h2.
#
#   perf/cluster_rtt_ab.sh ROUNDS HOGS NAME:LIBDIR[:VAR=VAL]... [tcp] [frame]
#     e.g. perf/cluster_rtt_ab.sh 3 1 old:/tmp/old new:build/check/.libs tcp
#
# Run as root from the build directory (./perf/.libs/rcp-pingpong is the
# client and server for every library), under `flock -x /tmp/bench.lock`,
# with a cluster up: `rcp-cluster --name ab up 2` (RCP_AB_CLUSTER names it,
# default ab).  Prints CSV: impl,hogs,round,rtt_med_us,rtt_p99_us,cs_rt
# (cs_rt: the client's voluntary context switches per round trip, about 1
# when its waits sleep).  TMS: --target-ms per session (default 400).
# The label "frame" (session 21) runs rcp-xdp-pingpong between the same
# hosts instead: a bare 8 B frame over the udp nic (frame-udp), a plain
# connected UDP socket (frame-kudp) and a TCP_NODELAY socket (frame-ktcp),
# both ends spinning on non-blocking receives, FITERS round trips each
# (default 20000), on the CPUs rcp-pingpong takes (client 0, server 1):
# what the nic and the kernel cost without the protocol.
set -u
[ $# -ge 3 ] || { sed -n 2,23p "$0" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
rcpc=${RCP_CLUSTER_TOOL:-$here/../tools/rcp-cluster}
bin=$PWD/perf/.libs/rcp-pingpong
[ -x "$bin" ] || { echo "$0: run from the build directory ($bin missing)" >&2; exit 2; }
rounds=$1 nh=$2
shift 2
C() { "$rcpc" --name "${RCP_AB_CLUSTER:-ab}" "$@"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rtt-ab.XXXXXX") || exit 1
hogs=""
stop_hogs() { for h in $hogs; do kill "$h" 2>/dev/null; done; }
trap 'stop_hogs; rm -rf "$tmp"' EXIT
for _ in $(seq 1 "$nh"); do
	sh -c 'while :; do :; done' &
	hogs="$hogs $!"
done
echo "impl,hogs,round,rtt_med_us,rtt_p99_us,cs_rt"
port=7400
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="$*"; else order=$(printf '%s\n' "$@" | tac); fi
	for lab in $order; do
		if [ "$lab" = frame ]; then
			./perf/rcp-xdp-pingpong --cluster "${RCP_AB_CLUSTER:-ab}" --csv --size 8 \
				--iters "${FITERS:-20000}" --transport udp,kernel-udp,kernel-tcp >"$tmp/f.csv" ||
				echo "$0: frame round $r failed" >&2
			# transport,size,iters,rtt_median_us,rtt_p99_us,bandwidth_MBps
			awk -F, -v p="$nh,$r" 'NR > 1 { t = $1; sub(/^kernel-/, "k", t)
				print "frame-" t "," p "," $4 "," $5 "," }' "$tmp/f.csv"
			continue
		fi
		port=$((port + 1)) name=${lab%%:*} lib=${lab#*:} proto=udp loc="--local udp:198.18.0.1:"
		# NAME:LIBDIR:VAR=VAL runs both ends with that variable set too
		xenv=""
		case $lib in *:*) xenv=${lib#*:} lib=${lib%%:*} ;; esac
		if [ "$lab" = tcp ]; then name=tcp lib=.libs proto=tcp loc=""; fi # the binary needs a library to start
		case $lib in /* | "") ;; *) lib=$PWD/$lib ;; esac
		rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
		# shellcheck disable=SC2086
		C exec h2 env LD_LIBRARY_PATH="$lib" $xenv timeout 60 "$bin" --listen "$proto:198.18.0.2:$port" \
			--spin >"$tmp/fifo" 2>"$tmp/srv.err" &
		spid=$!
		exec 3<"$tmp/fifo"
		read -r _ <&3 # "serving ...": it listens
		# shellcheck disable=SC2086
		C exec h1 env LD_LIBRARY_PATH="$lib" $xenv timeout 60 "$bin" --connect "$proto:198.18.0.2:$port" \
			$loc --spin --sizes 8 --target-ms "${TMS:-400}" >"$tmp/pp.out" 2>&1 ||
			{ echo "$0: $name round $r failed" >&2; cat "$tmp/pp.out" "$tmp/srv.err" >&2; }
		cat <&3 >/dev/null
		exec 3<&-
		wait "$spid"
		# transport size iters rtt_med rtt_p99 bw retx cs/rt (the text table)
		awk -v p="$name,$nh,$r" '$1 == "udp" || $1 == "tcp" { print p "," $4 "," $5 "," $8 }' "$tmp/pp.out"
	done
done
