#!/bin/sh
# tests/cluster_xdp.sh — RCP_TRANSPORT=xdp between rcp-cluster hosts
# (issue 21): RPC calls over xdp (cluster-xdp-rpc: a server on h2, calls
# of 8 B to 256 KiB from h1, checked byte for byte; then from h1 and h3 at
# once: two peers and channels on the server's one socket), relinked PVM
# across the hosts (pvmt transport-hosts: the pair across hosts must be on
# xdp, the pair within h1 on shm, 1 MiB round trips checked), then the
# same RPC calls with the faults wrapper under RCP (RCP_FAULTS: drop, dup,
# reorder, corrupt), then the first RPC round again at MTU 9000 (jumbo
# frames); after the RPC rounds rcp-pingpong by the peer's IP and the
# bare frame's rcp-xdp-pingpong and rcp-nic-pingpong --cluster (session 21).  TAP.  Skips (77) without
# root, namespaces or XDP;
# the PVM part skips without pvm.
set -u
. "${srcdir:-.}/tests/cluster_lib.sh"
name="x$$"
rpc="$b/tests/cluster-xdp-rpc"
[ -x "$rpc" ] || { echo "SKIP: tests/cluster-xdp-rpc not built"; exit 77; }
cl_tmp rcpc-xdp
cl_up 3 --rate none
export RCP_LOG=${RCP_LOG:-warn} RCP_TRANSPORT=xdp
rc=0

# rpc_round LABEL [HOST...]: a server on h2, the calls from each HOST at
# once (default h1), environment as set
rpc_round() {
	label=$1
	shift
	[ $# -gt 0 ] || set -- h1
	rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
	timeout 120 "$rcpc" --name "$name" exec h2 "$rpc" serve eth0 $# >"$tmp/fifo" 2>"$tmp/srv.err" &
	spid=$!
	exec 3<"$tmp/fifo"
	if ! read -r word addr <&3 || [ "$word" != ready ]; then
		exec 3<&-
		wait $spid
		if grep -q "not permitted\|not supported" "$tmp/srv.err"; then
			echo "SKIP: xdp cannot open here: $(cat "$tmp/srv.err")"
			exit 77
		fi
		echo "not ok - $label: server did not start: $(cat "$tmp/srv.err")"
		rc=1
		return
	fi
	cpids=""
	for h in "$@"; do
		timeout 120 "$rcpc" --name "$name" exec "$h" "$rpc" call eth0 "$addr" \
			>"$tmp/cli.$h" 2>&1 &
		cpids="$cpids $!"
	done
	cst=0
	for p in $cpids; do wait "$p" || cst=1; done
	cat <&3 >/dev/null
	exec 3<&-
	wait $spid
	sst=$?
	res=""
	for h in "$@"; do
		r=$(cat "$tmp/cli.$h")
		res="$res [$h: $r]"
		case $addr in xdp:*) ;; *) cst=1 res="$res (server on $addr, not xdp)" ;; esac
		# under faults the wrapper must have run and RCP must have repaired
		case "${RCP_FAULTS:-}:$r" in
		:*" on xdp,"*) ;;
		?*:*" on faults+xdp, 0 retransmits"*) cst=1 res="$res (no faults seen)" ;;
		?*:*" on faults+xdp,"*) ;;
		*) cst=1 res="$res (wrong backend)" ;;
		esac
	done
	if [ $cst -eq 0 ] && [ $sst -eq 0 ]; then
		echo "ok - $label:$res"
	else
		echo "not ok - $label: clients $cst,$res server $sst ($(cat "$tmp/srv.err"))"
		rc=1
	fi
}

rpc_round "RPC over xdp h1 -> h2"
rpc_round "RPC over xdp h1 and h3 -> h2 at once (one server socket)" h1 h3
RCP_FAULTS="drop=0.02,dup=0.01,reorder=0.02,corrupt=0.01,seed=${RCP_TEST_SEED:-7}" \
	rpc_round "RPC over faults+xdp h1 -> h2 (seed ${RCP_TEST_SEED:-7})"

# The tools between hosts (session 21): rcp-pingpong --listen xdp:eth0 on
# h2 and --connect xdp:eth0@198.18.0.2 (h2's IP: its MAC from h1's
# neighbour table) on h1, 8 B and 64 KiB, every byte checked (--verify);
# then the bare frame's ping-pong between the same hosts
# (rcp-xdp-pingpong --cluster, the nic ping-pong for a link backend).
pp="$b/perf/rcp-pingpong" xpp="$b/perf/rcp-xdp-pingpong"
if [ ! -x "$pp" ] || [ ! -x "$xpp" ]; then
	echo "ok - rcp-pingpong and rcp-xdp-pingpong over xdp # SKIP not built"
else
	rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
	timeout 60 "$rcpc" --name "$name" exec h2 "$pp" --listen xdp:eth0 >"$tmp/fifo" \
		2>"$tmp/pps.err" &
	spid=$!
	exec 3<"$tmp/fifo"
	read -r _ <&3
	out=$(timeout 60 "$rcpc" --name "$name" exec h1 "$pp" --connect xdp:eth0@198.18.0.2 \
		--local xdp:eth0 --sizes 8,64K --iters 200 --verify --csv 2>&1)
	cst=$?
	cat <&3 >/dev/null
	exec 3<&-
	wait $spid
	sst=$?
	if [ $cst -eq 0 ] && [ $sst -eq 0 ] && echo "$out" | grep -q "^xdp,8,200," &&
		echo "$out" | grep -q "^xdp,65536,"; then
		echo "ok - rcp-pingpong h1 -> h2 over xdp by IP: $(echo "$out" | grep "^xdp," | cut -d, -f2,4 | tr '\n' ' ')"
	else
		echo "not ok - rcp-pingpong h1 -> h2 over xdp by IP: client $cst server $sst: $out $(cat "$tmp/pps.err")"
		rc=1
	fi
	out=$(timeout 60 "$xpp" --cluster "$name" --transport xdp --size 8 --iters 200 --csv 2>&1)
	st=$?
	if [ $st -eq 0 ] && echo "$out" | grep -q "^xdp,8,200,"; then
		echo "ok - rcp-xdp-pingpong h1 -> h2, bare xdp frame: $(echo "$out" | grep "^xdp," | cut -d, -f4) us"
	else
		echo "not ok - rcp-xdp-pingpong h1 -> h2 (exit $st): $out"
		rc=1
	fi
fi
# the installed rcp-nic-pingpong between the same hosts (--cluster: its
# parent enters h1, its forked peer h2, before each opens xdp:eth0)
npp="$b/perf/rcp-nic-pingpong"
if [ ! -x "$npp" ]; then
	echo "ok - rcp-nic-pingpong --cluster over xdp # SKIP not built"
else
	out=$(timeout 60 "$npp" --cluster "$name" --transports xdp --modes spin --size 8 \
		--iters 200 --csv 2>&1)
	st=$?
	if [ $st -eq 0 ] && echo "$out" | grep -q "^xdp,spin,8,200,"; then
		echo "ok - rcp-nic-pingpong --cluster h1 -> h2, bare xdp frame: $(echo "$out" | grep "^xdp," | cut -d, -f5) us"
	else
		echo "not ok - rcp-nic-pingpong --cluster h1 -> h2 (exit $st): $out"
		rc=1
	fi
fi

if [ ! -x "$b/tests/pvm/pvmt" ]; then
	echo "ok - relinked PVM over xdp # SKIP tests/pvm/pvmt not built (no pvm)"
else
	mkdir -p "$tmp/ep"
	cp "$b/tests/pvm/pvmt" "$tmp/ep/" || exit 99
	out=$(C pvm start --ep "$tmp/ep" 2>&1)
	st=$?
	[ $st -eq 0 ] || { echo "$out"; exit $st; }
	printf 'leak:libpvm3\nleak:libgpvm3\nleak:pvm_\n' >"$tmp/lsan.supp"
	export LSAN_OPTIONS="suppressions=$tmp/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
	# the task on h1 owns h1's eth0; its echo child on h1 keeps udp
	(cd "$tmp" && PVM_EXPORT=RCP_TRANSPORT:RCP_LOG timeout 120 "$rcpc" --name "$name" \
		exec h1 "$tmp/ep/pvmt" transport-hosts) >"$tmp/pvm.out" 2>&1
	st=$?
	grep -v "^libpvmrcp: .*udp to other hosts" "$tmp/pvm.out"
	if [ $st -ne 0 ] || ! grep -q "^ok .*transport-hosts" "$tmp/pvm.out" ||
		grep -q "transport-hosts.*SKIP" "$tmp/pvm.out"; then
		echo "not ok - relinked PVM across hosts over xdp (exit $st)"
		rc=1
	else
		echo "ok - relinked PVM across hosts over xdp"
	fi
	C pvm halt >/dev/null 2>&1
fi

# Jumbo frames: the RPC calls again on a cluster at MTU 9000, where a frame
# takes three UMEM buffers (nic/xdp/rx.c's multi-buffer chains)
C down >/dev/null 2>&1
out=$(C up 3 --rate none --mtu 9000 2>&1)
st=$?
[ $st -eq 0 ] || { echo "$out"; exit $st; }
rpc_round "RPC over xdp h1 -> h2 at MTU 9000"
exit $rc
