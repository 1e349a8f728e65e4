#!/bin/sh
# tests/cluster_pvm.sh — a PVM virtual machine across a 4-host rcp-cluster
# (issue 20 item 2): `rcp-cluster pvm start` starts pvmd on h1..h4 the way
# PVM starts remote hosts (PVM_RSH), tasks started with `rcp-cluster exec`
# are tasks of that VM, and pvm_spawn places the suite's children on every
# host.  Runs a part of tests/pvm/pvmt relinked (pairs across hosts on udp,
# within a host on shm, nothing pretended: transport-hosts checks each
# pair) and the same tests on stock libpvm3, from h1 and from h3; then
# PVM's example programs (tests/pvm/examples.sh's) relinked and stock.
# pmcast-1-3-16 spreads its receivers over the hosts: one pmcast reaches
# shm and udp peers at once (one rcp_mcast per endpoint).
# TAP (pvmt's lines).  Skips (77) without root, namespaces or pvm.
set -u
. "${srcdir:-.}/tests/cluster_lib.sh"
name="p$$"

[ -x "$b/tests/pvm/pvmt" ] || { echo "SKIP: tests/pvm/pvmt not built (no pvm)"; exit 77; }
cl_tmp rcpc-pvm
cl_up 4 --rate none
cl_pvm "$b/tests/pvm/pvmt" "$b/tests/pvm/pvmt-stock"
export RCP_LOG=${RCP_LOG:-warn}
cl_lsan_pvm
rc=0
# fail SECTION: a timeout (124) printed nothing for the case it hung in
fail() {
	[ $? -eq 124 ] && echo "not ok - TIMEOUT: $1 killed after 120 s"
	rc=1
}
common="datatypes+0len truncation mixed-order wildcards contexts probe-nrecv-trecv fallback
	order-runs tag-order source-select peer-killed 64MiB pmcast-1-3-16 packed-raw-xdr packed-order
	packed-mcast"
echo "== relinked, from h1 =="
(cd "$tmp" && timeout 120 "$rcpc" --name "$name" exec h1 "$tmp/ep/pvmt" transport-hosts \
	transport-per-pair $common) || fail "relinked, from h1"
echo "== relinked, from h3 =="
(cd "$tmp" && timeout 120 "$rcpc" --name "$name" exec h3 "$tmp/ep/pvmt" transport-hosts) || fail "relinked, from h3"
echo "== stock libpvm3, same tests, from h2 =="
# shellcheck disable=SC2086
(cd "$tmp" && timeout 120 "$rcpc" --name "$name" exec h2 "$tmp/ep/pvmt-stock" $common) || fail "stock, from h2"

# PVM's example programs across the hosts, relinked and stock, outputs
# compared as tests/pvm/examples.sh does (numbers and tids masked, sorted).
# One ep= per VM: the relinked VM first, then a stock one on the same hosts.
tar=/usr/share/doc/pvm-examples/examples.tar.gz
[ -f "$b/tests/pvm/env.sh" ] && . "$b/tests/pvm/env.sh"
# norm FILE: the comparable form of an output (as in examples.sh)
norm() {
	sed -e 's/^\[t[0-9a-f]*\] //' -e 's/\<t\{0,1\}[0-9a-f]*[0-9][0-9a-f]*\>/N/g' \
		-e 's/-\{0,1\}[0-9][0-9.e+-]*/N/g' -e 's/[[:space:]][[:space:]]*/ /g' \
		-e 's/N[-+.N]*/N/g' -e 's/^ //' -e 's/ $//' "$1" |
		grep -v '^BEGIN$\|^EOF$\|^$\|still running' | sort
}
exlist="timing:1:timing master1:1:master1 spmd:4:spmd bwtest:2:bwtest ptest:4:ptest_4"
# run_ex FLAVOUR DRIVER: every example through DRIVER (pvmt run N PROG), on h1
run_ex() {
	for e in $exlist; do
		p=${e%%:*} n=${e#*:}; n=${n%%:*} args=$(echo "${e##*:}" | tr _ ' ')
		# shellcheck disable=SC2086
		(cd "$tmp" && timeout 60 "$rcpc" --name "$name" exec h1 "$2" run $n $args) \
			>"$tmp/out.$1.$p" 2>&1
		echo "exit $?" >>"$tmp/out.$1.$p"
	done
}
if [ ! -f "$tar" ] || [ -z "${CC:-}" ]; then
	echo "ok - PVM examples across hosts # SKIP pvm-examples not installed"
elif [ -n "${SAN_CFLAGS:-}" ]; then
	echo "ok - PVM examples across hosts # SKIP sanitizer build (tests/pvm/examples.sh runs them)"
else
	mkdir -p "$tmp/src" "$tmp/eps" && tar xzf "$tar" -C "$tmp/src" || exit 99
	defs="-DHASSTDLIB -DSYSVSIGNAL -DNOWAIT3 -DSYSVSTR -DUSESTRERROR -w -O1"
	for p in timing timing_slave bwtest ptest master1 slave1 spmd; do
		extra=""
		case $p in bwtest | ptest | spmd) extra="-lgpvm3" ;; esac
		$CC $defs -o "$tmp/ep/$p" "$tmp/src/examples/$p.c" -L"$b/.libs" -Wl,-rpath,"$b/.libs" \
			-lpvmrcp $extra $PVM_LIBS &&
			$CC $defs -o "$tmp/eps/$p" "$tmp/src/examples/$p.c" $extra $PVM_LIBS || exit 99
	done
	cp "$b/tests/pvm/pvmt-stock" "$tmp/eps/"
	run_ex rcp "$tmp/ep/pvmt"
	C pvm halt
	out=$(C pvm start --ep "$tmp/eps" 2>&1) || { echo "$out"; exit 1; }
	run_ex stock "$tmp/eps/pvmt-stock"
	pat_timing="RTT Avg uSec" pat_master1="I got" pat_spmd="token ring done"
	pat_bwtest="doubles received correctly" pat_ptest="Data validated from all tasks"
	for e in $exlist; do
		p=${e%%:*}
		eval pat=\$pat_$p
		why=""
		grep -q "^exit 0" "$tmp/out.rcp.$p" || why="relinked run failed"
		grep -q "^exit 0" "$tmp/out.stock.$p" || why="$why stock run failed"
		grep -q "$pat" "$tmp/out.rcp.$p" || why="$why relinked output lacks '$pat'"
		grep -qi "error\|fail\|trouble" "$tmp/out.rcp.$p" && why="$why relinked output reports an error"
		norm "$tmp/out.rcp.$p" >"$tmp/norm.rcp"
		norm "$tmp/out.stock.$p" >"$tmp/norm.stock"
		cmp -s "$tmp/norm.rcp" "$tmp/norm.stock" || why="$why outputs differ"
		if [ -z "$why" ]; then
			echo "ok - example $p across hosts, same as stock"
		else
			echo "not ok - example $p across hosts:$why"
			tail -n 15 "$tmp/out.rcp.$p" | sed 's/^/# rcp: /'
			diff "$tmp/norm.stock" "$tmp/norm.rcp" | head -20
			rc=1
		fi
	done
fi

cl_pvm_halt 4
exit $rc
