#!/bin/sh
# perf/xdp_bench.sh — issue 21's closing figures between two rcp-cluster
# hosts, side by side in one run, everything spinning:
#   frame  8 B round trip of a bare frame: xdp nic, udp nic, kernel UDP,
#          and kernel TCP (rcp-xdp-pingpong --cluster)
#   rcp    RCP channels over xdp and over udp, 8 B and 4 MiB (rcp-pingpong)
#   tcp    kernel TCP, 4 MiB each way (rcp-xdp-pingpong kernel-tcp)
#   pvm    relinked PVM across the hosts over xdp, over udp, and stock
#          (rcp-pvm-pingpong, child on h2 by PVMPP_HOST; 8 B .. 4 MiB)
#   gap    what RCP adds over the bare frame, 8 B, for a figure one can
#          trust (session 20): per round, PAIRS pairs of short runs of the
#          bare xdp frame and RCP/xdp (--gap-iters round trips each), the
#          order flipped pair by pair (frame,rcp then rcp,frame: a drift
#          during the pair hits both sides alike).  One run's median
#          moves by a microsecond when another task wakes; the median of
#          many pairs' differences does not.  Rows "gap-frame" and
#          "gap-rcp" (round = ROUND.PAIR); a summary on stderr: per
#          round and over all pairs, the median bare and RCP round trips,
#          the median of the pairs' differences and how many pairs were
#          within 0.6 us.  --base DIR adds a third run to each pair:
#          DIR's rcp-pingpong (another build directory: an A/B of a
#          change in the same hold), rows "gap-base".
# ROUNDS rounds, interleaved (each round runs every transport once), so
# drift on a shared machine hits all alike.
#
#   perf/xdp_bench.sh [--rounds N] [--mtu MTU] [--only LIST] [--out FILE]
#                     [--pairs P] [--gap-iters N] [--base DIR]
#   (root; from the build directory; run it under `flock -x /tmp/bench.lock`
#   on a shared machine, a round or two per hold: --only frame,rcp keeps a
#   round of the 8 B figures under a minute)
#   --only   the benches to run, comma-separated (default frame,rcp,tcp,pvm;
#            gap only when named: --only gap --rounds 2 --pairs 8 is a hold
#            of about a minute)
#
# CSV: round,bench,transport,size,iters,rtt_median_us,bandwidth_MBps
# (bandwidth = size / half the median round trip).  The cluster ("xbench",
# --rate none: the link is not shaped; MTU 1500 unless --mtu) is removed
# at exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rcpc=${RCP_CLUSTER_TOOL:-$here/../tools/rcp-cluster}
rounds=3 mtu=1500 out=/dev/stdout only=frame,rcp,tcp,pvm pairs=8 gap_iters=5000 base=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--mtu) mtu=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--pairs) pairs=$2; shift 2 ;;
	--gap-iters) gap_iters=$2; shift 2 ;;
	--base) base=$(cd "$2" && pwd) || exit 2; shift 2 ;;
	*) echo "usage: $0 [--rounds N] [--mtu MTU] [--only LIST] [--out FILE]" \
		"[--pairs P] [--gap-iters N] [--base DIR]" >&2; exit 2 ;;
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

# rcp_pp ROUND TRANSPORT LISTEN CONNECT LOCAL [SIZES ITERS BENCH BUILD]:
# RCP channels h1 -> h2
rcp_pp() {
	rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
	pp=${9:-.}/perf/rcp-pingpong
	C exec h2 "$pp" --listen "$3" --spin >"$tmp/fifo" 2>"$tmp/srv.err" &
	exec 3<"$tmp/fifo"
	read -r _ <&3 # "serving ...": its endpoint is open
	C exec h1 "$pp" --connect "$4" --local "$5" --spin --sizes "${6:-8,4M}" \
		${7:+--iters "$7"} --csv >"$tmp/csv" || echo "$0: rcp $2 failed: $(cat "$tmp/srv.err")" >&2
	cat <&3 >/dev/null
	exec 3<&-
	wait
	# transport,size,iters,rtt_median_us,rtt_p99_us,bandwidth_MBps
	awk -F, -v r="$1" -v t="$2" -v b="${8:-rcp}" \
		'NR > 1 { printf "%s,%s,%s,%s,%s,%s,%s\n", r, b, t, $2, $3, $4, $6 }' "$tmp/csv" >>"$out"
}

# gap ROUND: PAIRS pairs of the bare xdp frame and RCP/xdp, 8 B
gap() {
	for p in $(seq 1 "$pairs"); do
		order="frame rcp${base:+ base}"
		[ $((p % 2)) = 1 ] || order="${base:+base }rcp frame"
		for g in $order; do
			case $g in
			frame) frame "$1.$p" gap-frame --transport xdp --size 8 --iters "$gap_iters" ;;
			rcp) rcp_pp "$1.$p" xdp xdp:eth0 xdp:eth0@198.18.0.2 xdp:eth0 8 "$gap_iters" gap-rcp ;;
			base) rcp_pp "$1.$p" xdp xdp:eth0 xdp:eth0@198.18.0.2 xdp:eth0 8 "$gap_iters" \
				gap-base "$base" ;;
			esac
		done
	done
}

# The gap summary from the CSV: per round, then over every pair.
gap_summary() {
	awk -F, '
	function med(a, n,   i, j, t) {
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	$2 == "gap-frame" { f[$1] = $6 } $2 == "gap-rcp" { g[$1] = $6 } $2 == "gap-base" { b[$1] = $6 }
	END {
		for (k in f) if (k in g) {
			split(k, rp, "."); r = rp[1]; rounds[r] = 1
			n[r]++; F[r, n[r]] = f[k]; G[r, n[r]] = g[k]; D[r, n[r]] = g[k] - f[k]
			N++; aF[N] = f[k]; aG[N] = g[k]; aD[N] = g[k] - f[k]; ok += (g[k] - f[k] <= 0.6)
			if (k in b) { NB++; aB[NB] = b[k]; aBD[NB] = b[k] - f[k]; aAB[NB] = g[k] - b[k]; fast += (g[k] < b[k]); okb += (b[k] - f[k] <= 0.6) }
		}
		for (r = 1; r in rounds; r++) {
			delete x; delete y; delete z; m = 0
			for (i = 1; i <= n[r]; i++) { x[i] = F[r, i]; y[i] = G[r, i]; z[i] = D[r, i]; m += (z[i] <= 0.6) }
			printf "gap round %d: %d pairs, bare %.2f us, RCP %.2f us, RCP - bare %+.2f us (median of the pairs), %d of %d pairs <= 0.6\n",
				r, n[r], med(x, n[r]), med(y, n[r]), med(z, n[r]), m, n[r]
		}
		if (N)
			printf "gap all: %d pairs, bare %.2f us, RCP %.2f us, RCP - bare %+.2f us (median of the pairs), %d of %d pairs <= 0.6\n",
				N, med(aF, N), med(aG, N), med(aD, N), ok, N
		if (NB)
			printf "gap base: %d pairs, base %.2f us, base - bare %+.2f us, %d of %d <= 0.6; RCP - base %+.2f us (median), RCP faster in %d of %d\n",
				NB, med(aB, NB), med(aBD, NB), okb, NB, med(aAB, NB), fast, NB
	}' "$1" >&2
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
	on gap && gap "$r"
done
on gap && gap_summary "$out"
C pvm halt >/dev/null 2>&1
