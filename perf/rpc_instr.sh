#!/bin/sh
# perf/rpc_instr.sh [N] — instructions per empty RPC at 16 in flight,
# counted by callgrind (deterministic where time on these shared VMs is
# not): perf/rcp-rpc-instr in each call mode (reply, fetch), N calls
# (default 20000), both sides of each call counted (see rpc_instr.c).
# Prints  mode,calls,instructions,instr_per_call,loops_per_call
# Env: BUILD (directory holding perf/rcp-rpc-instr; default .), MODES,
#      INFLIGHT (16), TOP=K (also each mode's K costliest functions),
#      SIDE=server|client (count that side's progress only; rpc_instr.c).
set -eu
n=${1:-20000}
b=${BUILD:-.}/perf/rcp-rpc-instr
[ -x "$b" ] || { echo "SKIP: $b not built"; exit 77; }
command -v valgrind >/dev/null || { echo "SKIP: no valgrind"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rpc-instr.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "mode,calls,instructions,instr_per_call,loops_per_call"
for m in ${MODES:-reply fetch}; do
	valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$tmp/$m.out" \
		"$b" "$m" "$n" "${INFLIGHT:-16}" >"$tmp/$m.txt" 2>"$tmp/$m.err" ||
		{ cat "$tmp/$m.err" >&2; exit 1; }
	ir=$(sed -n 's/^summary: //p;s/^totals: //p' "$tmp/$m.out" | head -1 | awk '{print $1}')
	loops=$(sed -n 's/.* loops=\([0-9]*\).*/\1/p' "$tmp/$m.txt")
	awk -v m="$m" -v n="$n" -v ir="$ir" -v l="$loops" \
		'BEGIN { printf "%s,%d,%d,%.0f,%.2f\n", m, n, ir, ir / n, l / n }'
	if [ -n "${TOP:-}" ]; then
		callgrind_annotate --inclusive=no "$tmp/$m.out" 2>/dev/null |
			grep -E '^ *[0-9,]+ ' | head -n "$TOP" >&2
	fi
done
