#!/bin/sh
# perf/pingpong_smoke.sh — `make check` smoke test of rcp-pingpong: every
# transport, a spread of sizes (frame borders, RMA threshold, multi-frame),
# every byte verified, once clean and once under injected loss, plus the
# TCP baseline and the CSV shape; and rcp-copy-ceiling's methods.  It checks that the tool works, not how
# fast: no timing is asserted, and waits sleep so a parallel `make check`
# is not starved.
set -eu
pp=./perf/rcp-pingpong

# Every byte checked; sizes around the inline limit, one frame, the RMA
# threshold and many frames.
run() {
	"$pp" --sleep --iters 30 --warmup 3 --verify --sizes 0,1,256,257,16k,64k,1M "$@" >/dev/null
}
for t in shm udp; do
	run --transport "$t"
	run --transport "$t" --faults drop=0.05,dup=0.02,reorder=0.05,seed=4
done
# --verify says how much it checked: 20 + 2 warm-up round trips of 1 B and
# 4 KiB, both directions.
"$pp" --transport shm --sleep --iters 20 --warmup 2 --verify --sizes 1,4k |
	grep -qx 'verified: 88 messages, 180268 bytes, .*'
# Many peers, one talking: the client's endpoint also holds idle channels;
# their endpoints are gone afterwards.
run --transport shm --idle-chans 5
run --transport udp --idle-chans 5
! ls /dev/shm 2>/dev/null | grep -q '^rcp-rpp-[0-9]*-i[0-9]'
rc=0; "$pp" --idle-chans -1 2>/dev/null || rc=$?; [ $rc -eq 2 ]

# CSV: one header, one row per size, the --compare columns filled (size 0
# has no TCP counterpart: empty fields).
out=$("$pp" --transport shm --sleep --iters 20 --warmup 2 --sizes 0,1,4k --compare tcp --csv)
echo "$out" | head -1 | grep -qx \
	'transport,size,iters,rtt_median_us,rtt_p99_us,bandwidth_MBps,tcp_rtt_median_us,tcp_bandwidth_MBps,rtt_ratio,bw_ratio'
[ "$(echo "$out" | wc -l)" -eq 4 ]
echo "$out" | grep -q '^shm,0,20,[0-9.]*,[0-9.]*,0.000,,,,$'
echo "$out" | grep -Eq '^shm,4096,20,([0-9.]+,){6}[0-9.]+$'

# Usage errors exit 2, a server that is not there exits 1.
rc=0; "$pp" --sizes 4:1 2>/dev/null || rc=$?; [ $rc -eq 2 ]
rc=0; "$pp" --connect shm:rcp-pingpong-nobody 2>/dev/null || rc=$?; [ $rc -eq 1 ]
# rcp-copy-ceiling (the bare copy methods under RCP's shm bandwidth):
# every method brings the stamped bytes back (it checks and exits 1 if
# not), the pipeline wraps its cells, one CSV row per method and size.
out=$(./perf/rcp-copy-ceiling --iters 5 --sizes 1,4k,100k --chunk 4k --cells 3)
echo "$out" | head -1 | grep -qx 'method,size,iters,rtt_median_us,bandwidth_MBps'
[ "$(echo "$out" | wc -l)" -eq 13 ]
echo "$out" | grep -Eq '^cma2,102400,5,[0-9.]+,[0-9.]+$'
rc=0; ./perf/rcp-copy-ceiling --methods nope 2>/dev/null || rc=$?; [ $rc -eq 2 ]
echo "rcp-pingpong smoke: ok"
