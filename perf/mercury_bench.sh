#!/usr/bin/env bash
# perf/mercury_bench.sh MERCURY_BUILD_DIR — Mercury RPC peer figures on this host,
# for the table next to rcp-rpcbench (issue 5).  Prints CSV on stdout:
#   system,transport,mode,op,size,inflight,rate_ops,latency_us,bandwidth_MBps
# It downloads nothing and contains no Mercury code: it only runs the perf
# programs of a Mercury build made beforehand, like this (as done 2026-11-21,
# mercury v2.4.1-6-gf62eeb52):
#   - source: the public repository mercury-hpc/mercury (fetched read-only with
#     the session's repository fetch tool; exported with
#     `git --git-dir=<mirror> archive HEAD | tar -x -C /work/mercury-src`).
#     Its submodules (kwsys, mchecksum, boost preprocessor) are NOT needed for
#     this configuration: kwsys only for unit tests, mchecksum and boost-pp are
#     off by default.
#   - deps: apt-get install cmake pkg-config libfabric-dev   (for ofi+tcp)
#   - build, outside any repository:
#       mkdir /work/mercury-build && cd /work/mercury-build
#       cmake /work/mercury-src -DNA_USE_SM=ON -DNA_USE_OFI=ON -DBUILD_TESTING=ON \
#             -DBUILD_TESTING_PERF=ON -DBUILD_TESTING_UNIT=OFF -DCMAKE_BUILD_TYPE=Release
#       flock -s /tmp/bench.lock make -j2
#   - then: perf/mercury_bench.sh /work/mercury-build > perf/results/mercury.csv
#
# What runs (loopback only).  Every server+client pair runs inside one
# `flock -x $BENCH_LOCK` (default /tmp/bench.lock), so nothing else measured
# on the machine runs meanwhile; the lock is released between pairs.
#   transports/modes: na+sm busy (-b on both sides), na+sm wait (no -b: Mercury
#   sleeps on its fds), ofi+tcp busy (-H 127.0.0.1).
#   op=rpc   hg_rate: empty RPC (size 0) with 1/4/16/64 handles in flight (-x);
#            4 KiB-class arguments: -y 1k -z 4k (sizes 1024, 2048, 4096) at 1 and 16.
#   op=pull  hg_bw_read  (server pulls client memory) at 64k, 1m, 4m
#   op=push  hg_bw_write (server pushes into client memory) at 64k, 1m, 4m
#   op=first hg_first: the first RPC of a fresh client (connection set-up
#            included), FIRST_RUNS clients per repetition.
#            (op=first is an addition to the rpc|pull|push set of rcp-rpcbench.)
#   mode=busy-msglogoff / wait-msglogoff: na+sm empty RPC at 16 and 64 in
#            flight again with HG_LOG_SUBSYS=~msg (see the comment at the end).
#   The whole set runs REPS times (default 3), interleaved; each printed row is
#   the median repetition (by rate, bandwidth or first-RPC time).
# Column meanings:
#   rpc:   rate_ops = Mercury's "Rate (ops/s)".  Mercury's loop forwards
#          `inflight` RPCs and waits for all of them, then starts again (batches,
#          not a sliding window); latency_us = inflight * 1e6 / rate, i.e. the
#          time of one batch, which for inflight=1 is the round trip.
#   pull/push: each RPC makes the server issue 64 bulk transfers of `size`
#          bytes at once (Mercury's default bulk count, 1 handle), so
#          inflight=64; rate_ops = transfers/s.  bandwidth_MBps is in MB/s =
#          10^6 bytes/s: the clients run with -M, which makes Mercury print
#          MB/s instead of its default MiB/s (x 1.048576), so no conversion here.
#   latency_us is empty for pull/push.
# Errors: Mercury's perf harness counts a failed RPC as completed (its
# completion callback ignores the status), so a figure alone proves nothing.
# Each pair's logs are scanned for Mercury error/warning lines, non-zero exit
# codes and missing result rows; any finding goes to stderr, the row is still
# printed, and the script exits 1 at the end.  Logs stay in $KEEP_LOGS (a
# directory) when set, otherwise in a temporary directory removed at exit.
# Env: BENCH_LOCK, SCALE (multiplies loop counts; default 1), REPS (3),
#      FIRST_RUNS (3), KEEP_LOGS.  A full run took 4.5 minutes here (2026-11-21).
set -u
build=${1:?usage: $0 MERCURY_BUILD_DIR}
bin=$build/bin
for p in hg_perf_server hg_rate hg_bw_read hg_bw_write hg_first; do
	[ -x "$bin/$p" ] || { echo "$bin/$p missing: build Mercury with BUILD_TESTING_PERF=ON" >&2; exit 2; }
done
lock=${BENCH_LOCK:-/tmp/bench.lock}
scale=${SCALE:-1}
first_runs=${FIRST_RUNS:-3}
reps=${REPS:-3}
if [ -n "${KEEP_LOGS:-}" ]; then
	work=$KEEP_LOGS
	mkdir -p "$work"
else
	work=$(mktemp -d /tmp/mercury_bench.XXXXXX)
	trap 'rm -rf "$work"' EXIT
fi
nerr=0
seq_no=0
: >"$work/notes"

# One server + one client, both under the exclusive lock.
# $1 dir, $2 bin, $3 server opts, $4 client program, $5 client opts
pair_script='
dir=$1 bin=$2 sopts=$3 client=$4 copts=$5
cd "$dir" || exit 1
rm -f hosts
timeout 600 "$bin/hg_perf_server" $sopts -f hosts >srv.log 2>&1 &
srv=$!
i=0
while [ ! -s hosts ] && [ $i -lt 400 ]; do sleep 0.025; i=$((i + 1)); done
if [ ! -s hosts ]; then
	echo "# BENCH: server did not publish its address" >cli.log
	kill $srv 2>/dev/null; wait $srv
	exit 0
fi
timeout 300 "$bin/$client" $copts -f hosts >cli.log 2>&1
crc=$?
[ $crc -ne 0 ] && kill $srv 2>/dev/null
wait $srv
src=$?
echo "# BENCH: client_rc=$crc server_rc=$src" >>cli.log
'

# run TAG SERVER_OPTS CLIENT CLIENT_OPTS -> sets $dir
run() {
	seq_no=$((seq_no + 1))
	dir=$work/$(printf %03d "$seq_no")-$1
	mkdir -p "$dir"
	printf '%s %s -f hosts\n%s %s -f hosts\n' "hg_perf_server" "$2" "$3" "$4" >"$dir/cmd"
	flock -x "$lock" bash -c "$pair_script" pair "$dir" "$bin" "$2" "$3" "$4"
	check "$1" "$dir"
}

# Scan a pair's logs; count and report problems.
check() {
	local tag=$1 d=$2 bad=0
	if ! grep -q '^# BENCH: client_rc=0 server_rc=0$' "$d/cli.log"; then
		echo "mercury_bench: $tag: $(grep '^# BENCH' "$d/cli.log" | tr '\n' ' ')" >&2
		bad=1
	fi
	# Mercury's own log lines carry [error]/[warning]; the harness prints
	# "... failed (...)" and "Canceling ..." on trouble.
	# Three messages are known and harmless, reported once as notes with
	# counts: the huge-page mmap() that falls back to normal pages (no
	# hugepages set up), the ofi "tcp" -> "tcp;ofi_rxm" provider default, and
	# na_sm's "Full queue": logged at error level, but the send returns
	# NA_AGAIN and na_sm queues it for retry, so the RPC does not fail (the
	# log writes do cost time in those runs).
	local benign='hg_mem_huge_alloc\(\) mmap\(\) failed|defaulting to "tcp;ofi_rxm"|na_sm_msg_send_post\(\) Full queue'
	grep -iE '\[error\]|\[warning\]|failed|cancel|abort|segmentation|timeout' \
		"$d/cli.log" "$d/srv.log" >"$d/all-msgs" 2>/dev/null
	grep -E "$benign" \
		"$d/all-msgs" | sed -E 's/^.*\] //' | sort | uniq -c |
		awk -v t="$tag" '{ c = $1; $1 = ""; print t ":" $0 " (x" c ")" }' >>"$work/notes"
	if grep -vE "$benign" \
		"$d/all-msgs" >"$d/errors"; then
		echo "mercury_bench: $tag: Mercury reported errors (first lines):" >&2
		head -5 "$d/errors" | sed 's/^/    /' >&2
		bad=1
	fi
	nerr=$((nerr + bad))
}

rows() { # hg_rate / hg_bw result rows: lines starting with a number
	grep -E '^[0-9]+[[:space:]]+[0-9]' "$1/cli.log"
}

emit_rate() { # transport mode inflight
	local n
	n=$(rows "$dir" | awk -v t="$1" -v m="$2" -v x="$3" '
		{ size = $1; rate = $2;
		  if (rate > 0) printf "mercury,%s,%s,rpc,%d,%d,%d,%.3f,\n", t, m, size, x, rate, x * 1e6 / rate }' |
		tee "$dir/rows.csv" | wc -l)
	cat "$dir/rows.csv"
	[ "$n" -gt 0 ] || { echo "mercury_bench: no result rows in $dir" >&2; nerr=$((nerr + 1)); }
}

emit_bw() { # transport mode op
	local n
	n=$(rows "$dir" | awk -v t="$1" -v m="$2" -v op="$3" '
		{ size = $1; mbps = $2; us = $3;
		  printf "mercury,%s,%s,%s,%d,64,%d,,%.1f\n", t, m, op, size, (us > 0 ? 1e6 / us : 0), mbps }' |
		tee "$dir/rows.csv" | wc -l)
	cat "$dir/rows.csv"
	[ "$n" -gt 0 ] || { echo "mercury_bench: no result rows in $dir" >&2; nerr=$((nerr + 1)); }
}

loops() { awk -v n="$1" -v s="$scale" 'BEGIN { v = int(n * s); print (v < 1 ? 1 : v) }'; }

header="system,transport,mode,op,size,inflight,rate_ops,latency_us,bandwidth_MBps"
raw=$work/raw.csv
: >"$raw"

one_pass() {
	local cfg tr mode na b tag total x op prog sz s l
	for cfg in "na+sm busy" "na+sm wait" "ofi+tcp busy"; do
		set -- $cfg
		tr=$1 mode=$2
		case $tr in
		na+sm) na="-c na -p sm" ;;
		ofi+tcp) na="-c ofi -p tcp -H 127.0.0.1" ;;
		esac
		b=""
		[ "$mode" = busy ] && b="-b"
		tag=$(echo "$tr-$mode" | tr '+' '_')-r$rep
		# Size the loops so that each run lasts roughly 0.3-3 s.
		total=100000
		[ "$tr-$mode" = na+sm-busy ] && total=400000

		# Empty RPC rate, 1/4/16/64 in flight (size 0 row; -z 1 adds a
		# 1-byte row, kept too).
		for x in 1 4 16 64; do
			run "$tag-rate-x$x" "$na $b" hg_rate "$na $b -x $x -l $(loops $((total / x))) -z 1"
			emit_rate "$tr" "$mode" "$x"
		done
		# Arguments of 1, 2, 4 KiB: where the eager message overflows.
		for x in 1 16; do
			run "$tag-rate4k-x$x" "$na $b" hg_rate "$na $b -x $x -l $(loops $((total / 4 / x))) -y 1k -z 4k"
			emit_rate "$tr" "$mode" "$x"
		done
		# Bulk pull (hg_bw_read) and push (hg_bw_write); a loop = 64 transfers.
		for op in pull push; do
			prog=hg_bw_read
			[ $op = push ] && prog=hg_bw_write
			for sz in 64k:400 1m:60 4m:20; do
				s=${sz%%:*} l=${sz##*:}
				run "$tag-$op-$s" "$na $b" $prog "$na $b -M -l $(loops "$l") -y $s -z $s"
				emit_bw "$tr" "$mode" "$op"
			done
		done
		# First RPC of a fresh client process.
		for i in $(seq "$first_runs"); do
			run "$tag-first-$i" "$na $b" hg_first "$na $b"
			rows "$dir" | awk -v t="$tr" -v m="$mode" '$1 == 0 { printf "mercury,%s,%s,first,0,1,,%s,\n", t, m, $2 }' >>"$raw"
		done
	done
	# The perf harness turns Mercury's logging on at "warning"; na_sm then
	# logs "Full queue" on every retried send at 16-64 in flight, and those
	# writes cost time.  Mercury's library default is "fatal" (silent), so
	# these runs measure the same with the msg subsystem's log off
	# (HG_LOG_SUBSYS=~msg, other warnings/errors still logged); mode gets a
	# "-msglogoff" suffix.
	for mode in busy wait; do
		b=""
		[ "$mode" = busy ] && b="-b"
		total=100000
		[ "$mode" = busy ] && total=400000
		for x in 16 64; do
			HG_LOG_LEVEL=warning HG_LOG_SUBSYS='~msg' \
				run "na_sm-$mode-msglogoff-r$rep-rate-x$x" "-c na -p sm $b" hg_rate "-c na -p sm $b -x $x -l $(loops $((total / x))) -z 1"
			emit_rate na+sm "$mode-msglogoff" "$x"
		done
	done
}

for rep in $(seq "$reps"); do
	one_pass >>"$raw"
done

# Median over the repetitions of each (transport, mode, op, size, inflight):
# the row whose rate (rpc), bandwidth (pull/push) or time (first) is the
# median one (the lower middle for an even count).
echo "$header"
awk -F, '
	{ key = $2 FS $3 FS $4 FS $5 FS $6
	  v = ($4 == "rpc") ? $7 : ($4 == "first") ? $8 : $9
	  if (!(key in n)) order[++nk] = key
	  n[key]++; val[key, n[key]] = v + 0; row[key, n[key]] = $0 }
	END {
		for (k = 1; k <= nk; k++) {
			key = order[k]; m = n[key]
			for (i = 1; i <= m; i++) idx[i] = i
			for (i = 2; i <= m; i++)
				for (j = i; j > 1 && val[key, idx[j - 1]] > val[key, idx[j]]; j--) {
					t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t }
			print row[key, idx[int((m + 1) / 2)]]
		}
	}' "$raw"

if [ -s "$work/notes" ]; then
	echo "mercury_bench: known harmless messages seen:" >&2
	sed 's/^/    /' "$work/notes" >&2
fi
if [ "$nerr" -gt 0 ]; then
	echo "mercury_bench: $nerr run(s) with errors; logs in $work" >&2
	[ -z "${KEEP_LOGS:-}" ] && trap - EXIT && echo "mercury_bench: keeping $work" >&2
	exit 1
fi
exit 0
