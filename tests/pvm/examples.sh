#!/bin/sh
# tests/pvm/examples.sh TMPDIR — PVM's own example programs (Debian's
# pvm-examples) built twice, relinked with libpvmrcp and stock, run in the
# virtual machine run.sh started (ep= includes TMPDIR/ex) and in a second,
# stock one (ep=TMPDIR/exs, halted by a trap), and compared: outputs with
# numbers and task ids masked must be equal line for line (sorted, as tasks
# interleave), and each program's own correctness lines must be there.
set -u
tmp=$1
. "${abs_builddir:-$PWD}/tests/pvm/env.sh"
tar=/usr/share/doc/pvm-examples/examples.tar.gz
if [ ! -f "$tar" ]; then
	echo "SKIP: PVM example programs not installed (apt-get install pvm-examples)"
	exit 0
fi
mkdir -p "$tmp/src" "$tmp/ex" "$tmp/exs"
tar xzf "$tar" -C "$tmp/src" || exit 1
src="$tmp/src/examples"
defs="-DHASSTDLIB -DSYSVSIGNAL -DNOWAIT3 -DSYSVSTR -DUSESTRERROR -w -O1"
lib="$abs_builddir/.libs"
if [ -n "$SAN_CFLAGS" ]; then
	# PVM's example programs (1997 K&R code) do not free what they allocate.
	echo "note: sanitizer build: the example programs get ASan without UBSan and without"
	echo "      leak checks (bwtest.c overflows an int by itself; they do not free their buffers)"
	SAN_CFLAGS="$SAN_CFLAGS -fno-sanitize=undefined"
	export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" PVM_EXPORT=ASAN_OPTIONS
fi
rc=0
for p in timing timing_slave bwtest ptest master1 slave1 spmd; do
	extra=""
	case $p in bwtest | ptest | spmd) extra="-lgpvm3" ;; esac
	# relinked: libpvmrcp before libpvm3, nothing else changed
	$CC $SAN_CFLAGS $defs -o "$tmp/ex/$p" "$src/$p.c" -L"$lib" -Wl,-rpath,"$lib" \
		-lpvmrcp $extra $PVM_LIBS || rc=1
	$CC $SAN_CFLAGS $defs -o "$tmp/exs/$p" "$src/$p.c" $extra $PVM_LIBS || rc=1
done
[ $rc -eq 0 ] || { echo "FAIL: building the examples"; exit 1; }
cp "$abs_builddir/tests/pvm/pvmt-stock" "$tmp/exs/"

# second VM: stock binaries only
vm1=$PVM_VMID
vm2="${PVM_VMID}s"
printf '* ep=%s:/usr/bin\n%s\n' "$tmp/exs" "$(uname -n)" >"$tmp/hostfile2"
halt2() { PVM_VMID=$vm2 sh -c 'echo halt | pvm' >/dev/null 2>&1; }
trap halt2 EXIT
PVM_VMID=$vm2 sh -c "echo conf | pvm $tmp/hostfile2" >/dev/null 2>&1 || { echo "FAIL: 2nd pvmd"; exit 1; }


# run FLAVOUR N PROG ARGS...: output, task ids and numbers masked, sorted.
# A masked number is one N whatever its form ("12", "0.5", "1e+03", and
# bwtest's "inf" and "-nan" rates when a round trip rounds to 0 us, as
# relinked ones may): the same value may print as an integer in one run
# and a decimal in another.
run() {
	fl=$1
	shift
	if [ "$fl" = rcp ]; then
		(cd "$tmp" && PVM_VMID=$vm1 timeout 60 "$tmp/bin/pvmt" run "$@")
	else
		(cd "$tmp" && PVM_VMID=$vm2 timeout 60 "$tmp/exs/pvmt-stock" run "$@")
	fi >"$tmp/out.$fl" 2>&1
	echo "exit $?" >>"$tmp/out.$fl"
	sed -e 's/^\[t[0-9a-f]*\] //' -e 's/\<t\{0,1\}[0-9a-f]*[0-9][0-9a-f]*\>/N/g' \
		-e 's/-\{0,1\}\<nan\>/N/g' -e 's/\<inf\>/N/g' -e 's/-\{0,1\}[0-9][0-9.e+-]*/N/g' -e 's/[[:space:]][[:space:]]*/ /g' \
		-e 's/N[-+.N]*/N/g' -e 's/^ //' -e 's/ $//' "$tmp/out.$fl" | grep -v '^BEGIN$\|^EOF$\|^$\|still running' | sort >"$tmp/norm.$fl"
}

# example NAME N PROG ARGS -- PATTERN: both flavours, compared, PATTERN required
example() {
	name=$1
	shift
	pat=$1
	shift
	run rcp "$@"
	run stock "$@"
	why=""
	grep -q "exit 0" "$tmp/out.rcp" || why="relinked run failed"
	grep -q "exit 0" "$tmp/out.stock" || why="$why stock run failed"
	grep -q "$pat" "$tmp/out.rcp" || why="$why relinked output lacks '$pat'"
	grep -qi "error\|fail\|trouble" "$tmp/out.rcp" && why="$why relinked output reports an error"
	cmp -s "$tmp/norm.rcp" "$tmp/norm.stock" || why="$why outputs differ"
	if [ -n "$why" ]; then
		echo "not ok example $name:$why"
		diff "$tmp/norm.stock" "$tmp/norm.rcp" | head -20
		sed -n 1,30p "$tmp/out.rcp"
		rc=1
	else
		echo "ok example $name ($(grep -c . "$tmp/out.rcp") lines, same as stock)"
	fi
}

# preload NAME PATTERN N PROG ARGS: the stock binaries, unchanged, in the
# stock VM with LD_PRELOAD=libpvmrcp.so exported to every task they
# spawn: same output as stock, and their messages over RCP (each task
# appends its PVMRCP_STATS line to one file; one must have sent over RCP).
preload() {
	name=$1
	pat=$2
	shift 2
	if [ -n "$SAN_CFLAGS" ]; then
		echo "SKIP: example $name by LD_PRELOAD: a sanitizer build's library cannot be preloaded into a plain binary"
		return
	fi
	run stock "$@"
	cp "$tmp/norm.stock" "$tmp/norm.plain"
	rm -f "$tmp/stats"
	LD_PRELOAD="$lib/libpvmrcp.so" PVMRCP_STATS="$tmp/stats" PVM_EXPORT=LD_PRELOAD:PVMRCP_STATS \
		run stock "$@"
	cp "$tmp/norm.stock" "$tmp/norm.pre"
	why=""
	grep -q "exit 0" "$tmp/out.stock" || why="preloaded run failed"
	grep -q "$pat" "$tmp/out.stock" || why="$why output lacks '$pat'"
	grep -q 'sent over RCP [1-9]' "$tmp/stats" 2>/dev/null || why="$why no task sent over RCP"
	cmp -s "$tmp/norm.pre" "$tmp/norm.plain" || why="$why outputs differ"
	if [ -n "$why" ]; then
		echo "not ok example $name by LD_PRELOAD:$why"
		diff "$tmp/norm.plain" "$tmp/norm.pre" | head -20
		sed -n 1,30p "$tmp/out.stock"
		rc=1
	else
		echo "ok example $name by LD_PRELOAD (unchanged binary; $(awk '{ n += $6 } END { print n }' "$tmp/stats") messages over RCP)"
	fi
}

example timing "RTT Avg uSec" 1 timing
preload timing "RTT Avg uSec" 1 timing
example master1/slave1 "I got" 1 master1
# master1: every result must be the expected one
awk '/I got/ { split($0, a, /I got | from |; \(expecting |\)/); if (a[2] + 0 != a[4] + 0) bad++ }
	END { exit bad > 0 }' "$tmp/out.rcp" || { echo "not ok master1 results differ from expected"; rc=1; }
example spmd "token ring done" 4 spmd
example bwtest "doubles received correctly" 2 bwtest
preload bwtest "doubles received correctly" 2 bwtest
example ptest "Data validated from all tasks" 4 ptest 4
exit $rc
