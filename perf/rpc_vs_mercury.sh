#!/usr/bin/env bash
# perf/rpc_vs_mercury.sh MERCURY_BUILD_DIR [RCP_RPCBENCH] — issue 19's RPC
# figure: empty RPC at 16 calls in flight over shared memory, busy polling,
# Mercury (na+sm, hg_rate -b) and rcp-rpcbench (shm --spin, every call mode)
# in alternating rounds, so that both see the same machine load.
#
# Mercury is built outside any repository as perf/mercury_bench.sh's header
# describes; this script only runs its hg_perf_server / hg_rate, twice a
# round: mode na+sm-busy as mercury_bench.sh's busy rows (the perf harness's
# log level, warning: at 16 in flight na_sm logs a "Full queue" line per
# retried send), and na+sm-busy-msglogoff with the msg subsystem's log off
# (HG_LOG_SUBSYS=~msg; Mercury's library default is silent), Mercury at its
# best.  Ratios are given against both.
#
# Each pair (server + client) holds `flock -x $BENCH_LOCK` (default
# /tmp/bench.lock); the lock is released between pairs.
#
# Output (stdout): CSV
#   round,system,mode,inflight,rate_ops
# one row per run, then per mode its median and the ratio to Mercury's
# median:
#   median,SYSTEM,MODE,16,RATE,RATIO
# Env: ROUNDS (default 5), INFLIGHT (16), MODES ("reply fetch"),
#      TARGET_MS (rcp run length, 1000), LOOPS (Mercury loops, 25000:
#      about 0.3 s at 1.3 M calls/s), BENCH_LOCK, WAITS=FILE (session 21:
#      rcp-rpcbench runs with --waits and each round's wait counters and
#      context switches of both sides are appended to FILE as
#      "round,mode,side,rate_ops,counters": a slow round shows whether it
#      yielded, slept or was preempted).
# Exit status 1 if any run failed (its row is left out).  The machine's
# load shows in every figure: run it when nothing else is measured.
set -u
build=${1:?usage: $0 MERCURY_BUILD_DIR [path/to/rcp-rpcbench]}
rpcb=${2:-./perf/rcp-rpcbench}
for p in "$build/bin/hg_perf_server" "$build/bin/hg_rate" "$rpcb"; do
	[ -x "$p" ] || { echo "rpc_vs_mercury.sh: $p missing" >&2; exit 2; }
done
rounds=${ROUNDS:-5}
x=${INFLIGHT:-16}
modes=${MODES:-reply fetch}
target_ms=${TARGET_MS:-1000}
loops=${LOOPS:-25000}
lock=${BENCH_LOCK:-/tmp/bench.lock}
work=$(mktemp -d /tmp/rpc_vs_mercury.XXXXXX)
trap 'rm -rf "$work"' EXIT
nerr=0

# One Mercury pair; prints the size-0 rate (ops/s) or nothing.
mercury_pair='
cd "$1" || exit 1
rm -f hosts
export HG_LOG_LEVEL=warning
[ "$5" = msglogoff ] && export HG_LOG_SUBSYS="~msg"
timeout 120 "$2/bin/hg_perf_server" -c na -p sm -b -f hosts >srv.log 2>&1 &
srv=$!
i=0
while [ ! -s hosts ] && [ $i -lt 400 ]; do sleep 0.025; i=$((i + 1)); done
[ -s hosts ] || { kill $srv; wait $srv; exit 1; }
timeout 120 "$2/bin/hg_rate" -c na -p sm -b -x "$3" -l "$4" -z 1 -f hosts >cli.log 2>&1
crc=$?
[ $crc -ne 0 ] && kill $srv 2>/dev/null
wait $srv
exit $(( crc || $? ))
'

mercury() { # round log(default|msglogoff)
	local d=$work/m$1-$2
	mkdir -p "$d"
	if ! flock -x "$lock" bash -c "$mercury_pair" pair "$d" "$build" "$x" "$loops" "$2" ||
		grep -vE 'na_sm_msg_send_post\(\) Full queue|hg_mem_huge_alloc' "$d/cli.log" "$d/srv.log" |
		grep -qiE '\[error\]|failed|cancel|abort|segmentation'; then
		echo "rpc_vs_mercury.sh: mercury round $1 failed (logs: $d)" >&2
		trap - EXIT
		return 1
	fi
	awk '$1 == 0 && $2 > 0 { print $2; exit }' "$d/cli.log"
}

rcp() { # round mode
	local v
	v=$(flock -x "$lock" "$rpcb" --transport shm --mode "$2" --spin --inflight "$x" --args 0 \
		--target-ms "$target_ms" --csv ${WAITS:+--waits} 2>"$work/rcp.err" |
		awk -F, -v x="$x" '$3 == "rpc" && $5 == x { print $6 }')
	[ -n "${WAITS:-}" ] && sed -n "s/^rcp-rpcbench: waits \([a-z]*\) /$1,$2,\1,$v,/p" "$work/rcp.err" >>"$WAITS"
	[ -n "$v" ] && echo "$v"
}

echo "round,system,mode,inflight,rate_ops" | tee "$work/rows.csv"
for r in $(seq "$rounds"); do
	v=$(mercury "$r" default) && [ -n "$v" ] && echo "$r,mercury,na+sm-busy,$x,$v"
	v=$(mercury "$r" msglogoff) && [ -n "$v" ] && echo "$r,mercury,na+sm-busy-msglogoff,$x,$v"
	for m in $modes; do
		v=$(rcp "$r" "$m")
		if [ -n "$v" ]; then
			echo "$r,rcp,$m,$x,$v"
		else
			echo "rpc_vs_mercury.sh: rcp $m round $r failed: $(cat "$work/rcp.err")" >&2
			nerr=$((nerr + 1))
		fi
	done
done | tee -a "$work/rows.csv"

awk -F, 'NR > 1 { k = $2 "," $3; if (!(k in n)) o[++nk] = k; v[k, ++n[k]] = $5 }
	function med(k,   m, i, j, t, a) {
		m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
		for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
	END { b1 = b2 = 0
		for (i = 1; i <= nk; i++) {
			if (o[i] == "mercury,na+sm-busy") b1 = med(o[i])
			if (o[i] == "mercury,na+sm-busy-msglogoff") b2 = med(o[i]) }
		for (i = 1; i <= nk; i++) { m = med(o[i])
			printf "median,%s,%s,%.0f,%s,%s\n", o[i], X, m, b1 ? sprintf("%.2f", m / b1) : "",
				b2 ? sprintf("%.2f", m / b2) : "" } }' \
	X="$x" "$work/rows.csv"
# (errors counted inside the pipeline's subshell surface as missing rows)
want=$((rounds * (2 + $(echo $modes | wc -w))))
got=$(($(wc -l <"$work/rows.csv") - 1))
[ "$got" -eq "$want" ] || { echo "rpc_vs_mercury.sh: $got of $want runs gave a figure" >&2; exit 1; }
exit 0
