#!/bin/bash
# perf/cluster_loss_ab.sh — 1 MiB bandwidth between two hosts of an
# rcp-cluster under random loss, RCP/udp built two or more ways (A/B:
# librcp.so.0 directories) and kernel TCP, interleaved so that each
# library's lossy rounds sit next to its loss-free ones and the other
# library's (issue 20, session 19: on this shared machine the loss-free
# 10 Gbit/s rate swings from ~1,100 to ~1,550 MB/s between minutes, so
# runs of one library after the other compare the machine's moods, not
# the libraries).  Per round, per loss (the cluster's loss rule changed in
# place), per library in alternating order: one rcp-pingpong session
# h1 -> h2, spinning, --target-ms TMS (default 150).
#
#   perf/cluster_loss_ab.sh ROUNDS LINK LOSSES NAME:LIBDIR... [tcp]
#     e.g. perf/cluster_loss_ab.sh 4 10gbit:9000 "0 5%" old:/tmp/old new:.libs tcp
#
# Run as root from the build directory (./perf/.libs/rcp-pingpong serves
# every library), under `flock -x /tmp/bench.lock`.  It brings up a 2-host
# cluster named RCP_AB_CLUSTER (default lossab) and takes it down.  Prints
# CSV: impl,loss,round,rtt_us,MBps,retx,rack,tlp,rto,acks,frames,msgs,
# samp_us,pipe,rackwait_us,srtt_us,minrtt_us,cwnd
# (rtt_us the median 1 MiB round trip, MBps = size / (rtt / 2); the rest
# both ends' rcp-pingpong "loss-stats" counters: resends, of those by
# RACK, tail-loss probes, timeouts, ACK frames and all frames sent, over
# msgs messages; then the two ends' mean of: the mean RTT sample, frames
# in the network at a sample, a RACK resend's wait (the frame's age), and
# at the end srtt, least RTT and cwnd; session 20).
set -u
[ $# -ge 4 ] || { sed -n 2,23p "$0" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
rcpc=${RCP_CLUSTER_TOOL:-$here/../tools/rcp-cluster}
bin=$PWD/perf/.libs/rcp-pingpong
[ -x "$bin" ] || { echo "$0: run from the build directory ($bin missing)" >&2; exit 2; }
rounds=$1 link=$2 losses=$3
shift 3
rate=${link%%:*} mtu=${link#*:}
C() { "$rcpc" --name "${RCP_AB_CLUSTER:-lossab}" "$@"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/loss-ab.XXXXXX") || exit 1
trap 'C down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM
echo "impl,loss,round,rtt_us,MBps,retx,rack,tlp,rto,acks,frames,msgs,samp_us,pipe,rackwait_us,srtt_us,minrtt_us,cwnd"
port=7500
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="$*"; else order=$(printf '%s\n' "$@" | tac); fi
	for loss in $losses; do
		C up 2 --rate "$rate" --mtu "$mtu" --loss "$loss" >/dev/null || exit 1
		for lab in $order; do
			port=$((port + 1)) name=${lab%%:*} lib=${lab#*:} proto=udp loc="--local udp:198.18.0.1:"
			# tcp: the build's own library (the binary needs one to start)
			if [ "$lab" = tcp ]; then name=tcp lib=.libs proto=tcp loc=""; fi
			case $lib in /* | "") ;; *) lib=$PWD/$lib ;; esac
			rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
			C exec h2 env LD_LIBRARY_PATH="$lib" timeout 60 "$bin" --listen \
				"$proto:198.18.0.2:$port" --spin >"$tmp/fifo" 2>"$tmp/srv.err" &
			spid=$!
			exec 3<"$tmp/fifo"
			read -r _ <&3 # "serving ...": it listens
			# shellcheck disable=SC2086
			C exec h1 env LD_LIBRARY_PATH="$lib" timeout 60 "$bin" --connect \
				"$proto:198.18.0.2:$port" $loc --spin --sizes 1M --target-ms "${TMS:-150}" \
				>"$tmp/pp.out" 2>"$tmp/cli.err" ||
				{ echo "$0: $name $loss round $r failed" >&2; cat "$tmp/cli.err" "$tmp/srv.err" >&2; }
			cat <&3 >/dev/null
			exec 3<&-
			wait "$spid"
			# loss-stats WHO size N msgs M retx R rack K tlp T rto O dup D ooo O acks A frames F
			#   rtt_us R pipe P rackwait_us W srtt_us S rttvar_us V minrtt_us M cwnd C
			awk -v p="$name,$loss,$r" '
				$1 == "loss-stats" { m += $6; x += $8; k += $10; t += $12; o += $14
					a += $20; f += $22; e++
					sm += $24; pp += $26; rw += $28; sr += $30; mr += $34; cw += $36
					next }
				$1 == "udp" || $1 == "tcp" { rtt = $4; bw = $6 }
				END { if (rtt == "") exit
					printf "%s,%s,%s", p, rtt, bw
					if (m) printf ",%d,%d,%d,%d,%d,%d,%d,%.0f,%.1f,%.0f,%.0f,%.0f,%.0f",
						x, k, t, o, a, f, m, sm / e, pp / e, rw / e, sr / e, mr / e, cw / e
					printf "\n" }' "$tmp/cli.err" "$tmp/srv.err" "$tmp/pp.out"
		done
	done
done
