#!/bin/sh
# perf/cluster_bench.sh — the paper's table on an rcp-cluster (issue 20
# item 4): 8 hosts, per link (1 Gbit/s MTU 1500, 10 Gbit/s MTU 9000) and
# per random loss on the wire (0, 1%, 5%), side by side in one run:
#   pp     8 B round trip and 1, 4 MiB bandwidth, RCP/udp vs kernel TCP
#          between h1 and h2 (rcp-pingpong --listen/--connect udp: and
#          tcp:, both spinning), in alternating rounds (rcp, tcp, then
#          tcp, rcp, ...), with retransmits and each side's CPU time;
#   pvm    relinked vs stock PVM round trip h1 -> h2 (rcp-pvm-pingpong,
#          PVMPP_HOST=h2: relinked spinning, stock by default route and
#          PvmRouteDirect) in a PVM VM over all hosts (rcp-cluster pvm);
#   mcast  1 MiB from h1 to h2..h5: pvm_pmcast vs 4 pvm_psend vs stock
#          pvm_mcast (rcp-pvm-mcast), aggregate delivered bandwidth;
#   ceil   the same pp at --rate none (no shaper), no loss: the CPU
#          ceiling of this machine for that MTU.  Where it is below the
#          link rate, the CPU, not the link, limits the shaped figures.
#
#   perf/cluster_bench.sh [--links LIST] [--losses LIST] [--rounds R]
#                         [--parts LIST] [--sizes LIST] [--hogs N]
#                         [--out DIR] [--name NAME] [--pin P] (root; build dir)
#
# --links: RATE:MTU[:PARTS] items (default "1gbit:1500 10gbit:9000
# 1gbit:9000:mcast": the last one is the issue's pmcast target link);
# --losses (default "0 1% 5%"); --rounds pp rounds per protocol (default
# 3: the tables take the median); --parts (default pp,pvm,mcast,ceil);
# --sizes the pp sizes (default 8,1M,4M); --hogs N CPU hogs (`while :;
# do :; done` shells outside the cluster, killed at the end) beside every
# measurement (default 0): the busy-machine rows of the wait policy.
# --name the rcp-cluster name (default bench): two engineers' runs side
# by side each take their own name (their hosts never see each other).
# --pin the pp ends' CPUs, RCP and TCP alike (session 21): C:S runs the
# client under `taskset -c C` and the server under `taskset -c S`, free
# leaves both unpinned, tool (default) rcp-pingpong's own placement
# (client CPU 0, server CPU 1).
# The 8 B round trip alone, idle and beside one hog, in short runs:
#   perf/cluster_bench.sh --parts pp --links 1gbit:1500 --losses 0 \
#       --rounds 2 --sizes 8 --hogs 1
# Only the mcast column after the IP-multicast pmcast is merged:
#   perf/cluster_bench.sh --parts mcast --links "1gbit:9000 1gbit:1500"
# Output in DIR (default perf/results/cluster-DATE): cluster.csv, the
# raw outputs, and (perf/cluster_plot.py) cluster.png and summary.md.
# CSV columns: rate,mtu,loss,part,impl,size,round,rtt_us,MBps,pct_link,
#   retx,cpu_client_s,cpu_server_s,wall_s,cs_rt,hogs,rack,tlp,rto,rts
# (pp: rtt_us the median round trip, MBps = size / (rtt / 2), cs_rt the
# client's voluntary context switches per round trip (about 1 when its
# waits sleep, 0 when they spin), cpu the user+system seconds of each
# process over all its sizes; rcp pp rows: of retx, rack those resent
# because a frame sent later arrived, tlp the tail-loss probes, rto the
# retransmission timeouts, both ends, over rts round trips (raw lines in
# raw/loss-*.txt); mcast: rtt_us the median round of 4
# deliveries and their answers, MBps the aggregate 4 * size / round.)
# Counts: pp --target-ms 150 per size and round (at least 20 round trips:
# about 1.5 s for 4 MiB at 1 Gbit/s); pvm 100
# round trips at small sizes, 20 at >= 1 MiB; mcast 10 rounds (+3 warm).
# With the defaults a run takes about 12 minutes here.
# Run it under `flock -x /tmp/bench.lock`: every host runs on this
# machine's CPUs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rcpc=${RCP_CLUSTER_TOOL:-$here/../tools/rcp-cluster}
b=$PWD
pp=$b/perf/rcp-pingpong
links="1gbit:1500 10gbit:9000 1gbit:9000:mcast"
losses="0 1% 5%"
rounds=3
parts=pp,pvm,mcast,ceil
sizes=8,1M,4M
nhogs=0
out=""
cname=bench
pin=tool
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || { echo "$0: $1 needs a value" >&2; exit 2; }
	case $1 in
	--links) links=$2 ;;
	--losses) losses=$2 ;;
	--rounds) rounds=$2 ;;
	--parts) parts=$2 ;;
	--sizes) sizes=$2 ;;
	--hogs) nhogs=$2 ;;
	--out) out=$2 ;;
	--name) cname=$2 ;;
	--pin) pin=$2 ;;
	*) echo "usage: $0 [--links LIST] [--losses LIST] [--rounds R] [--parts LIST]" \
		"[--sizes LIST] [--hogs N] [--out DIR] [--name NAME] [--pin C:S|free|tool]" >&2
		exit 2 ;;
	esac
	shift 2
done
[ -x "$pp" ] || { echo "$0: run from the build directory ($pp missing)" >&2; exit 2; }
tc="" ts="" np=""
case $pin in
tool) ;;
free) np=--no-pin ;;
*:*) tc="taskset -c ${pin%%:*}" ts="taskset -c ${pin#*:}" np=--no-pin ;;
*) echo "$0: --pin: C:S, free or tool" >&2; exit 2 ;;
esac
out=${out:-$here/results/cluster-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/raw" || exit 1
csv=$out/cluster.csv
C() { "$rcpc" --name "$cname" "$@"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cluster-bench.XXXXXX") || exit 1
hogs=""
stop_hogs() { for h in $hogs; do kill "$h" 2>/dev/null; done; }
trap 'stop_hogs; C down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM
has() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
log() { echo "== $*" >&2; }

echo "rate,mtu,loss,part,impl,size,round,rtt_us,MBps,pct_link,retx,cpu_client_s,cpu_server_s,wall_s,cs_rt,hogs,rack,tlp,rto,rts" >"$csv"
# mbit RATE: the link rate in Mbit/s (0 for none)
mbit() {
	case $1 in
	none) echo 0 ;;
	*gbit) echo $((${1%gbit} * 1000)) ;;
	*mbit) echo "${1%mbit}" ;;
	*) echo 0 ;;
	esac
}

# pp_run IMPL ROUND: one rcp-pingpong session h1 -> h2 (server on h2)
pp_run() {
	impl=$1 r=$2 port=$((7100 + r))
	case $impl in
	rcp) srv="udp:198.18.0.2:$port" cli="--connect udp:198.18.0.2:$port --local udp:198.18.0.1:" ;;
	tcp) srv="tcp:198.18.0.2:$port" cli="--connect tcp:198.18.0.2:$port" ;;
	esac
	rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
	# shellcheck disable=SC2086
	C exec h2 /usr/bin/time -f "%e %U %S" -o "$tmp/t.srv" timeout 120 $ts "$pp" --listen "$srv" \
		--spin $np >"$tmp/fifo" 2>"$tmp/srv.err" &
	exec 3<"$tmp/fifo"
	read -r _ <&3 # "serving ...": it listens
	# shellcheck disable=SC2086
	C exec h1 /usr/bin/time -f "%e %U %S" -o "$tmp/t.cli" timeout 120 $tc "$pp" $cli --spin $np \
		--sizes "$sizes" --target-ms 150 >"$tmp/pp.out" 2>"$tmp/cli.err" ||
		{ log "$tag $impl round $r failed"; cat "$tmp/cli.err" "$tmp/srv.err" >&2; }
	cat <&3 >/dev/null
	exec 3<&-
	wait
	cat "$tmp/pp.out" >>"$out/raw/pp-$tag.txt"
	# the last line: a process that failed has "Command exited ..." first
	set -- $(tail -n 1 "$tmp/t.cli" 2>/dev/null) 0 0 0
	cu=$2 cs=$3
	set -- $(tail -n 1 "$tmp/t.srv" 2>/dev/null) 0 0 0
	wall=$1 su=$2 ss=$3
	# transport size iters rtt_med rtt_p99 bw retx cs/rt (the text table)
	# loss recovery per size, both ends (rcp-pingpong's "loss-stats" lines
	# on stderr): RACK resends, tail-loss probes, timeouts, round trips
	grep -h '^loss-stats' "$tmp/cli.err" "$tmp/srv.err" 2>/dev/null |
		sed "s/^/$tag $impl round $r: /" >>"$out/raw/loss-$tag.txt"
	awk -v pre="$rate,$mtu,$loss,$part,$impl" -v r="$r" -v mb="$mb" -v h="$nhogs" \
		-v cc="$(echo "$cu $cs" | awk '{ print $1 + $2 }')" \
		-v sc="$(echo "$su $ss" | awk '{ print $1 + $2 }')" -v w="$wall" '
		$1 == "loss-stats" { k = $4; rk[k] += $10; tl[k] += $12; to[k] += $14
			if ($2 == "client") n[k] = $6
			next }
		FILENAME ~ /err$/ { next }
		$1 == "udp" || $1 == "tcp" { pct = mb > 0 ? $6 * 8 / mb * 100 : 0
			u = $1 == "udp" && ($2 in n)
			printf "%s,%s,%s,%s,%s,%.1f,%s,%.2f,%.2f,%s,%s,%s,%s,%s,%s,%s\n", pre, $2, r, $4,
				$6, pct, $1 == "tcp" ? "" : $7, cc, sc, w, $8, h, u ? rk[$2] : "",
				u ? tl[$2] : "", u ? to[$2] : "", u ? n[$2] : "" }' \
		"$tmp/cli.err" "$tmp/srv.err" "$tmp/pp.out" >>"$csv"
}

part_pp() {
	for r in $(seq 1 "$rounds"); do
		if [ $((r % 2)) -eq 1 ]; then order="rcp tcp"; else order="tcp rcp"; fi
		for impl in $order; do pp_run "$impl" "$r"; done
	done
}

part_pvm() {
	for cfg in "rcp-spin rcp default spin" "stock-default stock default sleep" \
		"stock-direct stock direct sleep"; do
		# shellcheck disable=SC2086
		set -- $cfg
		(cd "$tmp/ep" && PVMPP_HOST=h2 timeout 90 "$rcpc" --name "$cname" exec h1 \
			"$tmp/ep/rcp-pvm-pingpong" "$1" "$2" "$3" "$4" 100) >"$tmp/pvm.out" 2>&1 ||
			log "$tag pvm $1 failed: $(tail -n 2 "$tmp/pvm.out")"
		cat "$tmp/pvm.out" >>"$out/raw/pvm-$tag.txt"
		# label,bytes,iters,rtt_median_us,rtt_p5_us,rtt_p99_us,MBps
		awk -F, -v pre="$rate,$mtu,$loss,pvm" -v mb="$mb" -v h="$nhogs" 'NF == 7 && $2 ~ /^[0-9]+$/ {
			pct = mb > 0 ? $7 * 8 / mb * 100 : 0
			printf "%s,%s,%s,1,%s,%s,%.1f,,,,,%s\n", pre, $1, $2, $4, $7, pct, h }' \
			"$tmp/pvm.out" >>"$csv"
	done
}

part_mcast() {
	for cfg in "pmcast rcp pmcast" "unicast rcp unicast" "stock-mcast stock mcast"; do
		# shellcheck disable=SC2086
		set -- $cfg
		(cd "$tmp/ep" && timeout 90 "$rcpc" --name "$cname" exec h1 "$tmp/ep/rcp-pvm-mcast" \
			"$1" "$2" "$3" 1048576 10 h2 h3 h4 h5) >"$tmp/mc.out" 2>&1 ||
			log "$tag mcast $1 failed: $(tail -n 2 "$tmp/mc.out")"
		cat "$tmp/mc.out" >>"$out/raw/mcast-$tag.txt"
		# label,mode,bytes,receivers,iters,round_median_ms,aggregate_MBps
		awk -F, -v pre="$rate,$mtu,$loss,mcast" -v mb="$mb" -v h="$nhogs" 'NF == 7 && $3 ~ /^[0-9]+$/ {
			pct = mb > 0 ? $7 * 8 / mb * 100 : 0
			printf "%s,%s,%s,1,%.1f,%s,%.1f,,,,,%s\n", pre, $1, $3, $6 * 1000, $7, pct, h }' \
			"$tmp/mc.out" >>"$csv"
	done
}

pvm_on=0
pvm_up() {
	[ $pvm_on -eq 1 ] && return 0
	mkdir -p "$tmp/ep"
	cp "$b/perf/rcp-pvm-pingpong" "$b/perf/rcp-pvm-mcast" "$tmp/ep/" || return 1
	C pvm start --ep "$tmp/ep" >/dev/null || return 1
	pvm_on=1
}

i=0
while [ "$i" -lt "$nhogs" ]; do
	sh -c 'while :; do :; done' &
	hogs="$hogs $!" i=$((i + 1))
done
t0=$(date +%s)
for link in $links; do
	rate=${link%%:*} rest=${link#*:} mtu=${rest%%:*} lparts=$parts
	case $rest in *:*) lparts=$(echo "${rest#*:}" | tr '+' ',') ;; esac
	mb=$(mbit "$rate")
	for loss in $losses; do
		tag="$rate-$mtu-${loss%\%}"
		log "$rate MTU $mtu loss $loss ($(($(date +%s) - t0)) s)"
		C up 8 --rate "$rate" --mtu "$mtu" --loss "$loss" >/dev/null || exit 1
		saved=$parts parts=$lparts
		if has pp; then part=pp; part_pp; fi
		if has pvm || has mcast; then pvm_up || { log "pvm start failed"; exit 1; }; fi
		if has pvm; then part_pvm; fi
		if has mcast; then part_mcast; fi
		parts=$saved
	done
	# the CPU ceiling at this MTU: no shaper, no loss
	case ",$lparts," in *,ceil,*)
		rate=none loss=0 mb=0 tag="none-$mtu-0" part=ceil
		log "ceiling: no rate limit, MTU $mtu"
		C up 8 --rate none --mtu "$mtu" --loss 0 >/dev/null || exit 1
		for r in 1 2; do pp_run rcp "$r"; pp_run tcp "$r"; done ;;
	esac
done
log "done in $(($(date +%s) - t0)) s: $csv"
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	/usr/bin/python3 "$here/cluster_plot.py" "$csv" "$out/cluster.png" >"$out/summary.md" &&
		cat "$out/summary.md"
else
	echo "$0: matplotlib not installed (apt-get install python3-matplotlib): no PNG" >&2
	/usr/bin/python3 "$here/cluster_plot.py" --no-png "$csv" >"$out/summary.md" && cat "$out/summary.md"
fi
