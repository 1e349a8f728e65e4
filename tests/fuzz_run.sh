#!/bin/sh
# Runs one libFuzzer target briefly: its regression inputs once each, then
# a few seconds of fuzzing from a seed corpus written by tests/fuzz_seed
# from the current code.  Usage: fuzz_run.sh TARGET (wire core bulk ...).
# FUZZ_SECONDS (default 5) and FUZZ_RUNS (default unbounded)
# bound the run; docs/fuzzing.md has the long campaign.  A crash leaves
# its input as tests/fuzz-TARGET-crash-* in the build directory.
t=$1
fuzz=./tests/fuzz_$t
top=${srcdir:-.}
reg=$top/tests/corpus/regress/$t
# A frame inside a regression input (raw bytes a script injects) must carry
# the current wire version, else the parser refuses it at the first check
# and the input tests nothing: core/ack-2pow31 kept version 2 from wire
# version 3 on (found in session 19).  A frame here: magic 0x5243 (bytes
# 43 52), a type 1..6 and a header length of 64 or 48 (rcp/wire.h).
ver=$(sed -n 's/^#define RCPW_VERSION \([0-9]*\)u.*/\1/p' "$top/rcp/wire.h")
# Checked before the fuzzer is looked for: it needs only od and awk.
for f in "$reg"/*; do
	[ -f "$f" ] || continue
	stale=$(od -An -v -tu1 "$f" | tr -s ' ' '\n' | awk -v v="$ver" 'NF { b[n++] = $1 }
		END { for (i = 0; i + 7 < n; i++)
			if (b[i] == 67 && b[i+1] == 82 && b[i+2] != v && b[i+3] >= 1 && b[i+3] <= 6 &&
			    (b[i+6] == 64 || b[i+6] == 48) && b[i+7] == 0) { print b[i+2]; exit } }')
	if [ -n "$stale" ]; then
		echo "FAIL: $f holds a frame of wire version $stale, not $ver: raise its version byte (docs/fuzzing.md)"
		exit 1
	fi
done
if [ ! -x "$fuzz" ] || [ ! -x ./tests/fuzz_seed ]; then
	echo "SKIP: fuzz_$t not built (needs clang with libFuzzer: apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rcp-fuzz-$t.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/corpus" && ./tests/fuzz_seed "$t" "$tmp/corpus" || exit 1
# Per input: 10 s is ~1000x a normal execution; an input that spins (the
# 2^31 ack walk took 8.6 s) fails as a timeout instead of hanging.
opts="-error_exitcode=1 -timeout_exitcode=1 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -artifact_prefix=./tests/fuzz-$t-"
# The entropic scheduler's bookkeeping costs fuzz_core and fuzz_wire (many
# counters per execution) 3/4 of their time, and mutating the 200 KB seeds
# of recorded frames is slow: both measured (docs/fuzzing.md).
case $t in
core) extra="-entropic=0" ;;
wire) extra="-entropic=0 -max_len=16384" ;;
udp) extra="-max_len=16384" ;;
*) extra= ;;
esac
if [ -d "$reg" ] && ls "$reg"/* >/dev/null 2>&1; then
	# Given files, libFuzzer runs each once and fails on the first crash.
	if ! "$fuzz" $opts "$reg"/* >"$tmp/log" 2>&1; then
		cat "$tmp/log"
		echo "FAIL: fuzz_$t on a regression input (tests/corpus/regress/$t)"
		exit 1
	fi
	echo "fuzz_$t: $(ls "$reg" | wc -l) regression inputs pass"
fi
"$fuzz" $opts $extra -seed=1 -max_total_time="${FUZZ_SECONDS:-5}" -runs="${FUZZ_RUNS:--1}" \
	-print_final_stats=1 "$tmp/corpus" >"$tmp/log" 2>&1
rc=$?
# The progress lines are noise here; the start, the end and any report stay.
grep -v '^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\)' "$tmp/log"
[ $rc -eq 0 ] || echo "FAIL: fuzz_$t (exit $rc; the input is ./tests/fuzz-$t-*)"
exit $rc
