#!/bin/sh
# perf/callgrind_smoke.sh — `make check` smoke run of perf/callgrind.sh: a
# few round trips of each mode under callgrind, checking that it produced
# numbers (a positive instruction count per round trip, two frames per
# round trip for nic and chan, the ratios), not what they are: targets are
# for the measurement (docs/results.md), never a test.  SKIP (77) without
# valgrind or in a sanitizer build; the pvm row is checked where PVM is.
set -eu
srcdir=${srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
csv=$(mktemp "${TMPDIR:-/tmp}/rcp-cg-smoke.XXXXXX")
trap 'rm -f "$csv"' EXIT
rc=0
OUT=$csv "$srcdir/perf/callgrind.sh" 40 >"$csv.out" 2>&1 || rc=$?
cat "$csv.out"
rm -f "$csv.out"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: callgrind.sh exited $rc"; exit 1; }
head -1 "$csv" | grep -qx 'mode,round_trips,instructions,instr_per_rt,frames_per_rt,ratio,ratio_of'
grep -Eq '^nic,40,[1-9][0-9]*,[1-9][0-9.]*,2\.00,,$' "$csv"
grep -Eq '^chan,40,[1-9][0-9]*,[1-9][0-9.]*,2\.00,[0-9.]+,nic$' "$csv"
if [ -x ./perf/rcp-instr-pvm ] && [ -x "${PVM_ROOT:-/usr/lib/pvm3}/lib/pvmd" ]; then
	grep -Eq '^pvm,40,[1-9][0-9]*,[1-9][0-9.]*,,[0-9.]+,chan$' "$csv"
else
	echo "(pvm row skipped: no PVM here)"
fi
echo "callgrind smoke: ok"
