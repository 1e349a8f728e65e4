#!/bin/sh
# perf/pvm_bench.sh [ITERS [MODE]] — psend/precv ping-pong (MODE psend, the
# default) or packed send/recv (MODE raw: PvmDataRaw, xdr: PvmDataDefault,
# inplace: PvmDataInPlace), stock PVM vs relinked,
# in one run: starts a private PVM VM, runs rcp-pvm-pingpong for
#   stock-default  (every message through pvmd)
#   stock-direct   (PvmRouteDirect: task-to-task TCP)
#   rcp-spin       (libpvmrcp, RCP_WAIT=spin)
#   rcp-sleep      (libpvmrcp, RCP_WAIT=sleep: every wait sleeps in ppoll)
#   rcp-preload    (the same program built stock, unchanged, run with
#                   LD_PRELOAD=libpvmrcp.so, RCP_WAIT=spin; if PVMPP_STOCK
#                   and the library are found)
# prints the CSV and, per size, round-trip and bandwidth ratios against
# stock PVM's best route.  Run it on a quiet machine:
#   flock -x /tmp/bench.lock perf/pvm_bench.sh
# Env: PVMPP (the rcp-pvm-pingpong binary), OUT (CSV file, default
# perf/results/pvm-pingpong-DATE.csv), ONLY (labels to run, e.g.
# "stock-direct rcp-spin": shorter runs to alternate builds), MAXSZ (the
# largest size; the sizes below it run too).  The tasks inherit the environment
# of the pvmd started here: PVMRCP_INPLACE_MAX=-1 gathers in-place
# messages of every size over RCP (by default above 128 KiB by pvmd).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
iters=${1:-2000}
mode=${2:-psend}
pp=${PVMPP:-$(command -v rcp-pvm-pingpong || echo "$here/rcp-pvm-pingpong")}
[ -x "$pp" ] || { echo "rcp-pvm-pingpong not found (set PVMPP)" >&2; exit 1; }
export PVM_ROOT=${PVM_ROOT:-/usr/lib/pvm3} PVM_ARCH=${PVM_ARCH:-LINUX64}
[ "$(id -u)" -eq 0 ] && export PVM_ALLOW_ROOT=1
tmp=$(mktemp -d /tmp/pvmbench.XXXXXX)
export PVM_VMID="bench$$" PVM_TMP="$tmp" TMPDIR="$tmp"
mkdir -p "$tmp/bin"
cp "$pp" "$tmp/bin/rcp-pvm-pingpong"
# the stock-built twin and the library to preload (a build tree's, else installed)
pps=${PVMPP_STOCK:-$(dirname "$pp")/rcp-pvm-pingpong-stock}
lib=${PVMRCP_LIB:-$(dirname "$pp")/../.libs/libpvmrcp.so}
[ -f "$lib" ] || lib=$(ldconfig -p 2>/dev/null | awk '/libpvmrcp.so / { print $NF; exit }')
preload=""
if [ -x "$pps" ] && [ -f "$lib" ]; then
	cp "$pps" "$tmp/bin/rcp-pvm-pingpong-stock"
	preload="rcp-preload rcp default spin"
fi
trap 'echo halt | pvm >/dev/null 2>&1; rm -f /dev/shm/rcp-pvmrcp-"$(printf %.12s "$PVM_VMID")"-*; rm -rf "$tmp"' EXIT
printf '* ep=%s\n%s\n' "$tmp/bin" "$(uname -n)" >"$tmp/hosts"
echo conf | pvm "$tmp/hosts" >/dev/null 2>&1
out=${OUT:-$here/results/pvm-pingpong-$(date +%Y%m%d-%H%M%S).csv}
mkdir -p "$(dirname "$out")"
echo "label,bytes,iters,rtt_median_us,rtt_p5_us,rtt_p99_us,MBps" >"$out"
for cfg in "stock-default stock default sleep" "stock-direct stock direct sleep" \
	"rcp-spin rcp default spin" "rcp-sleep rcp default sleep" ${preload:+"$preload"}; do
	set -- $cfg
	case " ${ONLY:-$1} " in *" $1 "*) ;; *) continue ;; esac
	if [ "$1" = rcp-preload ]; then
		(cd "$tmp" && LD_PRELOAD="$lib" PVM_EXPORT=LD_PRELOAD \
			"$tmp/bin/rcp-pvm-pingpong-stock" "$1" "$2" "$3" "$4" "$iters" "$mode" ${MAXSZ:+"$MAXSZ"}) >>"$out"
	else
		(cd "$tmp" && "$tmp/bin/rcp-pvm-pingpong" "$1" "$2" "$3" "$4" "$iters" "$mode" ${MAXSZ:+"$MAXSZ"}) >>"$out"
	fi
done
cat "$out"
echo
awk -F, 'NR > 1 { rtt[$1, $2] = $4; bw[$1, $2] = $7; if (!($2 in seen)) { seen[$2] = 1; sz[++n] = $2 } }
END {
	printf "%9s %12s %12s %12s %12s %12s %10s %10s %10s\n", "bytes", "stock_rtt", "rcp_spin",
		"rcp_sleep", "rcp_preload", "stock_MB/s", "rcp_MB/s", "rtt_x", "bw_x";
	for (i = 1; i <= n; i++) {
		s = sz[i];
		st = rtt["stock-default", s]; d = rtt["stock-direct", s];
		if (d != "" && (st == "" || d + 0 < st + 0)) st = d;
		sb = bw["stock-default", s]; if (bw["stock-direct", s] + 0 > sb + 0) sb = bw["stock-direct", s];
		rb = bw["rcp-spin", s];
		printf "%9d %12.2f %12.2f %12.2f %12.2f %12.1f %10.1f %10.1f %10.2f\n", s, st,
			rtt["rcp-spin", s], rtt["rcp-sleep", s], rtt["rcp-preload", s], sb, rb,
			rtt["rcp-spin", s] ? st / rtt["rcp-spin", s] : 0, sb ? rb / sb : 0;
	}
	print "(stock: the better of default route and PvmRouteDirect; rtt_x = stock/rcp-spin round trip; bw_x = rcp-spin/stock bandwidth)"
}' "$out"
