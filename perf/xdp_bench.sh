#!/bin/sh
# perf/xdp_bench.sh — issue 21's closing figures between two rcp-cluster
# hosts, side by side in one run, everything spinning:
#   frame  8 B round trip of a bare frame: xdp nic, udp nic, kernel UDP,
#          and kernel TCP (rcp-xdp-pingpong --cluster)
#   rcp    RCP channels over xdp and over udp, 8 B and 4 MiB (rcp-pingpong)
#   tcp    kernel TCP, 4 MiB each way (rcp-xdp-pingpong kernel-tcp)
#   pvm    relinked PVM across the hosts over xdp, over udp, and stock
#          (rcp-pvm-pingpong, child on h2 by PVMPP_HOST; 8 B .. 4 MiB)
# ROUNDS rounds, interleaved (each round runs every transport once), so
# drift on a shared machine hits all alike.
#
#   perf/xdp_bench.sh [--rounds N] [--mtu MTU] [--only LIST] [--out FILE]
#   (root; from the build directory; run it under `flock -x /tmp/bench.lock`
#   on a shared machine, a round or two per hold: --only frame,rcp keeps a
#   round of the 8 B figures under a minute)
#   --only   the benches to run, comma-separated (default frame,rcp,tcp,pvm)
#
# CSV: round,bench,transport,size,iters,rtt_median_us,bandwidth_MBps
# (bandwidth = size / half the median round trip).  The cluster ("xbench",
# --rate none: the link is not shaped; MTU 1500 unless --mtu) is removed
# at exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rcpc=${RCP_CLUSTER_TOOL:-$here/../tools/rcp-cluster}
rounds=3 mtu=1500 out=/dev/stdout only=frame,rcp,tcp,pvm
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--mtu) mtu=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	*) echo "usage: $0 [--rounds N] [--mtu MTU] [--only LIST] [--out FILE]" >&2; exit 2 ;;
	esac
done
for p in perf/rcp-pingpong perf/rcp-xdp-pingpong perf/rcp-pvm-pingpong; do
	[ -x "$p" ] || { echo "$0: run from the build directory ($p missing)" >&2; exit 2; }
done
C() { "$rcpc" --name xbench "$@"; }
on() { case ",$only," in *",$1,"*) return 0 ;; esac; return 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/xdp-bench.XXXXXX") || exit 1
trap 'C down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM
C up 2 --rate none --mtu "$mtu" >/dev/null || exit $?
if on pvm; then
	mkdir -p "$tmp/ep" && cp perf/rcp-pvm-pingpong "$tmp/ep/" || exit 1
	C pvm start --ep "$tmp/ep" >/dev/null || exit 1
fi
echo "round,bench,transport,size,iters,rtt_median_us,bandwidth_MBps" >"$out"

# rcp_pp ROUND TRANSPORT LISTEN CONNECT LOCAL: RCP channels h1 -> h2
rcp_pp() {
	rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
	C exec h2 ./perf/rcp-pingpong --listen "$3" --spin >"$tmp/fifo" 2>"$tmp/srv.err" &
	exec 3<"$tmp/fifo"
	read -r _ <&3 # "serving ...": its endpoint is open
	C exec h1 ./perf/rcp-pingpong --connect "$4" --local "$5" --spin --sizes 8,4M --csv \
		>"$tmp/csv" || echo "$0: rcp $2 failed: $(cat "$tmp/srv.err")" >&2
	cat <&3 >/dev/null
	exec 3<&-
	wait
	# transport,size,iters,rtt_median_us,rtt_p99_us,bandwidth_MBps
	awk -F, -v r="$1" -v t="$2" 'NR > 1 { printf "%s,rcp,%s,%s,%s,%s,%s\n", r, t, $2, $3, $4, $6 }' \
		"$tmp/csv" >>"$out"
}

# frame ROUND ARGS...: rcp-xdp-pingpong on the cluster
frame() {
	r=$1 b=$2
	shift 2
	./perf/rcp-xdp-pingpong --cluster xbench --csv "$@" >"$tmp/csv" ||
		echo "$0: rcp-xdp-pingpong $* failed" >&2
	awk -F, -v r="$r" -v b="$b" 'NR > 1 { printf "%s,%s,%s,%s,%s,%s,%s\n", r, b, $1, $2, $3, $4, $6 }' \
		"$tmp/csv" >>"$out"
}

# pvm ROUND TRANSPORT: rcp-pvm-pingpong from h1, child on h2
pvm() {
	if [ "$2" = stock ]; then mode=stock tr=udp; else mode=rcp tr=$2; fi
	(cd "$tmp" && RCP_TRANSPORT=$tr PVM_EXPORT=RCP_TRANSPORT PVMPP_HOST=h2 \
		"$rcpc" --name xbench exec h1 "$tmp/ep/rcp-pvm-pingpong" "$2" $mode default spin 400) \
		>"$tmp/csv" 2>"$tmp/pvm.err" || echo "$0: pvm $2 failed: $(cat "$tmp/pvm.err")" >&2
	# label,bytes,iters,rtt_median_us,rtt_p5_us,rtt_p99_us,MBps
	awk -F, -v r="$1" 'NF == 7 { printf "%s,pvm,%s,%s,%s,%s,%s\n", r, $1, $2, $3, $4, $7 }' \
		"$tmp/csv" >>"$out"
}

for r in $(seq 1 "$rounds"); do
	on frame && frame "$r" frame --transport xdp,udp,kernel-udp,kernel-tcp --size 8 --iters 20000
	if on rcp; then
		rcp_pp "$r" xdp xdp:eth0 xdp:eth0@198.18.0.2 xdp:eth0
		rcp_pp "$r" udp udp:198.18.0.2:7100 udp:198.18.0.2:7100 udp:198.18.0.1:
	fi
	on tcp && frame "$r" tcp --transport kernel-tcp --size 4194304 --iters 40
	if on pvm; then
		for t in xdp udp stock; do pvm "$r" $t; done
	fi
done
C pvm halt >/dev/null 2>&1
