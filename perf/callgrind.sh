#!/bin/sh
# perf/callgrind.sh [N] — instructions per 8 B round trip (issue 19, item 5),
# counted by valgrind --tool=callgrind: deterministic where time on these
# shared VMs is not.  N round trips each (default 20000) of
#   nic   the bare shm nic frame (perf/rcp-instr nic: two nic endpoints in
#         one process, rcp_nic_send/recv)
#   chan  an RCP channel (perf/rcp-instr chan: two rcp endpoints in one
#         process, rcp_irecv/rcp_isend, both endpoints progressed)
#   pvm   relinked pvm_psend/pvm_precv over RCP shm (perf/rcp-instr-pvm: two
#         tasks under a private pvmd; one task's psend+precv counted, the
#         waiting left out, doubled for the round trip: see the program)
# and the ratios chan/nic and pvm/chan (issue 19's targets: chan <= 1,500
# and <= 2.5x nic; pvm <= 1.2x chan).  Prints a table and writes a CSV:
#   mode,round_trips,instructions,instr_per_rt,frames_per_rt,ratio,ratio_of
# (instructions: callgrind's total for the counted calls; for pvm one
# task's, instr_per_rt twice that / N; frames_per_rt: frames both sides sent,
# per round trip, empty for pvm).
#
# Env: BUILD (build directory holding perf/rcp-instr; default: the current
# directory if it has one, else build/release, build/check), OUT (CSV; default
# perf/results/callgrind-DATE.csv, "-" for none), TOP=K (also print each
# mode's K costliest functions, callgrind_annotate), FUNCS=1 (also print
# the chan row per function, self and inclusive, inlined code summed into
# the function it ran in: perf/cg_funcs.py; session 20; and the pvm row's,
# per psend+precv of the counted task: session 21), RCP_LOG.
# Exits 77 with "SKIP: reason" without valgrind or without rcp-instr; the
# pvm row says SKIP (and the rest still runs) without pvm or rcp-instr-pvm.
# Counts depend on the compiler and flags (-O2 -g with LTO in the
# quickstart's builds); compare figures of one build configuration.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
n=${1:-20000}
case $n in '' | *[!0-9]*) echo "usage: $0 [ROUND_TRIPS]" >&2; exit 2;; esac

if [ -z "${BUILD:-}" ]; then
	for d in "$PWD" "$top/build/release" "$top/build/check"; do
		[ -x "$d/perf/rcp-instr" ] && { BUILD=$d; break; }
	done
fi
BUILD=${BUILD:-$PWD}
instr=$BUILD/perf/rcp-instr
pinstr=$BUILD/perf/rcp-instr-pvm
if ! command -v valgrind >/dev/null 2>&1; then
	echo "SKIP: valgrind not installed (apt-get install valgrind)"
	exit 77
fi
if [ ! -x "$instr" ]; then
	echo "SKIP: $instr not built (make perf/rcp-instr, or set BUILD)"
	exit 77
fi
# valgrind cannot run what AddressSanitizer instrumented.
if ldd "$instr" 2>/dev/null | grep -q 'libasan'; then
	echo "SKIP: $instr is built with sanitizers; valgrind cannot run it"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rcp-callgrind.XXXXXX")
pvmup=0
cleanup() {
	if [ $pvmup -eq 1 ]; then
		# (a subshell: the console dies by SIGTERM at halt, and the
		# shell's "Terminated" goes to /dev/null too)
		(echo halt | pvm) >/dev/null 2>&1 || true
		rm -f /dev/shm/rcp-pvmrcp-"$(printf %.12s "$PVM_VMID")"-* 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cg MODE OUTFILE CMD...: runs CMD under callgrind, collection toggled by
# the program itself; prints the program's own line, then the total.
cg() {
	mode=$1 out=$2
	shift 2
	if ! valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$out" \
		"$@" >"$tmp/$mode.stdout" 2>"$tmp/$mode.stderr"; then
		echo "callgrind.sh: $mode failed:" >&2
		cat "$tmp/$mode.stdout" "$tmp/$mode.stderr" >&2
		exit 1
	fi
	tot=$(awk '$1 == "totals:" { print $2 }' "$out")
	[ -n "$tot" ] || { echo "callgrind.sh: no totals in $out" >&2; exit 1; }
	if [ "$tot" -eq 0 ]; then
		echo "callgrind.sh: $mode counted nothing (built without valgrind/callgrind.h?)" >&2
		exit 1
	fi
	echo "$(grep "^$mode rt=" "$tmp/$mode.stdout") instructions=$tot"
	if [ -n "${TOP:-}" ] && command -v callgrind_annotate >/dev/null 2>&1; then
		echo "-- $mode: costliest functions (self)" >&2
		callgrind_annotate --inclusive=no "$out" 2>/dev/null |
			awk '/file:function/ { p = 1; next } p && /^-- / { exit } /^-+$/ { next } p && NF { print }' |
			sed 's| \[[^]]*\]$||' | head -n "$TOP" >&2
	fi
}

nic=$(cg nic "$tmp/cg.nic" "$instr" nic "$n")
chan=$(cg chan "$tmp/cg.chan" "$instr" chan "$n")
if [ -n "${FUNCS:-}" ] && command -v python3 >/dev/null 2>&1; then
	echo "-- chan: per function, per round trip (perf/cg_funcs.py)" >&2
	python3 "$here/cg_funcs.py" "$tmp/cg.chan" "$n" >&2
fi

pvm="" pvmskip=""
export PVM_ROOT=${PVM_ROOT:-/usr/lib/pvm3}
if [ ! -x "$pinstr" ]; then
	pvmskip="rcp-instr-pvm not built (PVM not found at configure)"
elif [ ! -x "$PVM_ROOT/lib/pvmd" ] || ! command -v pvm >/dev/null 2>&1; then
	pvmskip="pvm not installed (apt-get install pvm pvm-dev)"
else
	export PVM_ARCH=${PVM_ARCH:-$("$PVM_ROOT/lib/pvmgetarch" 2>/dev/null || echo LINUX64)}
	[ "$(id -u)" -eq 0 ] && export PVM_ALLOW_ROOT=1
	export PVM_VMID="cg$$$(date +%N | cut -c1-4)" PVM_TMP="$tmp" TMPDIR="$tmp"
	mkdir -p "$tmp/bin"
	cp "$pinstr" "$tmp/bin/rcp-instr-pvm"
	printf '* ep=%s\n%s\n' "$tmp/bin" "$(uname -n)" >"$tmp/hosts"
	pvmup=1
	if ! echo conf | pvm "$tmp/hosts" >"$tmp/pvm.out" 2>&1 || ! grep -q "$(uname -n)" "$tmp/pvm.out"; then
		cat "$tmp/pvm.out" >&2
		echo "callgrind.sh: could not start pvmd" >&2
		exit 1
	fi
	pvm=$(cd "$tmp" && cg pvm "$tmp/cg.pvm" "$tmp/bin/rcp-instr-pvm" "$n" "$tmp/flag")
	if [ -n "${FUNCS:-}" ] && command -v python3 >/dev/null 2>&1; then
		# One task's count per N: per psend+precv, half the pvm row.
		echo "-- pvm: per function, per psend+precv of one task (perf/cg_funcs.py)" >&2
		python3 "$here/cg_funcs.py" "$tmp/cg.pvm" "$n" >&2
	fi
fi

out=${OUT:-$top/perf/results/callgrind-$(date +%Y%m%d-%H%M%S).csv}
[ "$out" = - ] || mkdir -p "$(dirname "$out")"
awk -v nic="$nic" -v chan="$chan" -v pvm="$pvm" -v pvmskip="$pvmskip" -v csv="$out" '
function get(line, key,   i, a, k) {
	k = split(line, a, " ")
	for (i = 1; i <= k; i++)
		if (index(a[i], key "=") == 1)
			return substr(a[i], length(key) + 2)
	return ""
}
BEGIN {
	n = get(nic, "rt")
	ni = get(nic, "instructions"); ci = get(chan, "instructions")
	nrt = ni / n; crt = ci / get(chan, "rt")
	nf = get(nic, "frames") / n; cf = get(chan, "frames") / get(chan, "rt")
	printf "%-6s %12s %14s %12s %10s\n", "mode", "round_trips", "instr/rt", "frames/rt", "ratio"
	printf "%-6s %12d %14.1f %12.2f %10s\n", "nic", n, nrt, nf, "-"
	printf "%-6s %12d %14.1f %12.2f %10s\n", "chan", get(chan, "rt"), crt, cf, sprintf("%.2fx nic", crt / nrt)
	if (pvm != "") {
		pi = get(pvm, "instructions"); prt = 2 * pi / get(pvm, "rt")
		printf "%-6s %12d %14.1f %12s %10s\n", "pvm", get(pvm, "rt"), prt, "-", sprintf("%.2fx chan", prt / crt)
		printf "(pvm: one task counted, %.1f per psend+precv, doubled for the round trip)\n", pi / get(pvm, "rt")
	} else
		printf "%-6s SKIP: %s\n", "pvm", pvmskip
	printf "(issue 19 targets: chan <= 1500 and <= 2.5x nic; pvm <= 1.2x chan)\n"
	if (csv != "-") {
		print "mode,round_trips,instructions,instr_per_rt,frames_per_rt,ratio,ratio_of" > csv
		printf "nic,%d,%d,%.1f,%.2f,,\n", n, ni, nrt, nf > csv
		printf "chan,%d,%d,%.1f,%.2f,%.3f,nic\n", get(chan, "rt"), ci, crt, cf, crt / nrt > csv
		if (pvm != "")
			printf "pvm,%d,%d,%.1f,,%.3f,chan\n", get(pvm, "rt"), pi, prt, prt / crt > csv
		print "CSV: " csv
	}
}'
