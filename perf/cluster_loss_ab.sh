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
# samp_us,pipe,rackwait_us,srtt_us,minrtt_us,cwnd,ksd_ms,sirq_ms,steal_ms
# (rtt_us the median 1 MiB round trip, MBps = size / (rtt / 2); the rest
# both ends' rcp-pingpong "loss-stats" counters: resends, of those by
# RACK, tail-loss probes, timeouts, ACK frames and all frames sent, over
# msgs messages; then the two ends' mean of: the mean RTT sample, frames
# in the network at a sample, a RACK resend's wait (the frame's age), and
# at the end srtt, least RTT and cwnd; session 20).
# PINS (session 21): CPU placements to alternate inside each round, for
# every library and TCP alike: "C:S" runs the client under `taskset -c C`
# and the server under `taskset -c S` (both --no-pin), "free" runs both
# unpinned (--no-pin), "tool" leaves rcp-pingpong's own placement (client
# CPU 0, server CPU 1: what every run before session 21 had).  With PINS
# set, impl is NAME@PLACEMENT.  Default: tool.
# Three more columns per session (session 21), the whole machine's, from
# just before the server starts to after both ends exit: ksd_ms the
# ksoftirqd threads' run time (softirq work deferred to a thread that
# must win the CPU from the spinning ends), sirq_ms and steal_ms the
# softirq and hypervisor-steal time of /proc/stat (10 ms ticks).
set -u
[ $# -ge 4 ] || { sed -n 2,35p "$0" >&2; exit 2; }
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
echo "impl,loss,round,rtt_us,MBps,retx,rack,tlp,rto,acks,frames,msgs,samp_us,pipe,rackwait_us,srtt_us,minrtt_us,cwnd,ksd_ms,sirq_ms,steal_ms"
ksd=$(pgrep -x 'ksoftirqd/[0-9]*' | tr '\n' ' ')
# snap: ksoftirqd run ns, softirq and steal ticks of the whole machine
snap() {
	k=0
	for p in $ksd; do read -r n _ <"/proc/$p/schedstat" && k=$((k + n)); done
	read -r _ _ _ _ _ _ _ si st _ </proc/stat
	echo "$k $si $st"
}
port=7500
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="$*"; else order=$(printf '%s\n' "$@" | tac); fi
	for loss in $losses; do
		C up 2 --rate "$rate" --mtu "$mtu" --loss "$loss" >/dev/null || exit 1
		for lab in $order; do
		for pin in ${PINS:-tool}; do
			port=$((port + 1)) name=${lab%%:*} lib=${lab#*:} proto=udp loc="--local udp:198.18.0.1:"
			# tcp: the build's own library (the binary needs one to start)
			if [ "$lab" = tcp ]; then name=tcp lib=.libs proto=tcp loc=""; fi
			case $lib in /* | "") ;; *) lib=$PWD/$lib ;; esac
			tc="" ts="" np=""
			case $pin in
			tool) ;;
			free) np=--no-pin ;;
			*:*) tc="taskset -c ${pin%%:*}" ts="taskset -c ${pin#*:}" np=--no-pin ;;
			*) echo "$0: PINS: C:S, free or tool, not $pin" >&2; exit 2 ;;
			esac
			[ -n "${PINS:-}" ] && name=$name@$pin
			rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
			s0=$(snap)
			# shellcheck disable=SC2086
			C exec h2 env LD_LIBRARY_PATH="$lib" timeout 60 $ts "$bin" --listen \
				"$proto:198.18.0.2:$port" --spin $np >"$tmp/fifo" 2>"$tmp/srv.err" &
			spid=$!
			exec 3<"$tmp/fifo"
			read -r _ <&3 # "serving ...": it listens
			# shellcheck disable=SC2086
			C exec h1 env LD_LIBRARY_PATH="$lib" timeout 60 $tc "$bin" --connect \
				"$proto:198.18.0.2:$port" $loc --spin $np --sizes 1M --target-ms "${TMS:-150}" \
				>"$tmp/pp.out" 2>"$tmp/cli.err" ||
				{ echo "$0: $name $loss round $r failed" >&2; cat "$tmp/cli.err" "$tmp/srv.err" >&2; }
			cat <&3 >/dev/null
			exec 3<&-
			wait "$spid"
			s1=$(snap)
			# loss-stats WHO size N msgs M retx R rack K tlp T rto O dup D ooo O acks A frames F
			#   rtt_us R pipe P rackwait_us W srtt_us S rttvar_us V minrtt_us M cwnd C
			awk -v p="$name,$loss,$r" -v s0="$s0" -v s1="$s1" '
				$1 == "loss-stats" { m += $6; x += $8; k += $10; t += $12; o += $14
					a += $20; f += $22; e++
					sm += $24; pp += $26; rw += $28; sr += $30; mr += $34; cw += $36
					next }
				$1 == "udp" || $1 == "tcp" { rtt = $4; bw = $6 }
				END { if (rtt == "") exit
					printf "%s,%s,%s", p, rtt, bw
					if (m) printf ",%d,%d,%d,%d,%d,%d,%d,%.0f,%.1f,%.0f,%.0f,%.0f,%.0f",
						x, k, t, o, a, f, m, sm / e, pp / e, rw / e, sr / e, mr / e, cw / e
					else printf ",,,,,,,,,,,,,"
					split(s0, b); split(s1, c)
					printf ",%.1f,%d,%d\n", (c[1] - b[1]) / 1e6, (c[2] - b[2]) * 10, (c[3] - b[3]) * 10 }' "$tmp/cli.err" "$tmp/srv.err" "$tmp/pp.out"
		done
		done
	done
done
