#!/bin/sh
# perf/bwtest_modes.sh [BUILDDIR] — PVM's own bwtest example (Debian's
# pvm-examples), stock and relinked with libpvmrcp, in each RCP wait mode
# (default spin-then-sleep, RCP_WAIT=spin, RCP_WAIT=sleep), on an idle
# machine and beside one and two CPU hogs (`sh -c 'while :; do :; done'`,
# killed after).  As the example is meant to be run: two copies started
# from the shell find each other through a group (pvmgs), validate 100,000
# doubles, then psend/precv ping-pong, 20 round trips per size.
# Prints a CSV: hogs,flavour,mode,run,bytes,rtt_us (bwtest's own figure).
#   flock -x /tmp/bench.lock perf/bwtest_modes.sh build/check
# Env: RUNS (runs per configuration, default 3), HOGS (default "0 1 2"),
# MODES (default "stock default spin sleep"), OUT (CSV file; default
# perf/results/bwtest-modes-DATE.csv).  Needs pvm, pvm-dev, pvm-examples.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
b=$(cd "${1:-$here/../build/check}" && pwd)
lib="$b/.libs"
[ -f "$lib/libpvmrcp.so" ] || { echo "no $lib/libpvmrcp.so (build first)" >&2; exit 1; }
tar=/usr/share/doc/pvm-examples/examples.tar.gz
[ -f "$tar" ] || { echo "pvm-examples not installed" >&2; exit 1; }
runs=${RUNS:-3}
hogs_list=${HOGS:-0 1 2}
modes=${MODES:-stock default spin sleep}
export PVM_ROOT=${PVM_ROOT:-/usr/lib/pvm3} PVM_ARCH=${PVM_ARCH:-LINUX64}
[ "$(id -u)" -eq 0 ] && export PVM_ALLOW_ROOT=1
tmp=$(mktemp -d /tmp/bwmodes.XXXXXX)
export PVM_VMID="bwm$$" PVM_TMP="$tmp" TMPDIR="$tmp"
hogs=""
cleanup() {
	for h in $hogs; do kill "$h" 2>/dev/null || true; done
	echo halt | pvm >/dev/null 2>&1 || true
	rm -f /dev/shm/rcp-pvmrcp-"$(printf %.12s "$PVM_VMID")"-*
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tar xzf "$tar" -C "$tmp"
defs="-DHASSTDLIB -DSYSVSIGNAL -DNOWAIT3 -DSYSVSTR -DUSESTRERROR -w -O1"
${CC:-cc} $defs -o "$tmp/bw-stock" "$tmp/examples/bwtest.c" -lgpvm3 -lpvm3
${CC:-cc} $defs -o "$tmp/bw-rcp" "$tmp/examples/bwtest.c" -L"$lib" -Wl,-rpath,"$lib" \
	-lpvmrcp -lgpvm3 -lpvm3
printf '* ep=%s:/usr/bin\n%s\n' "$tmp" "$(uname -n)" >"$tmp/hosts"
echo conf | pvm "$tmp/hosts" >/dev/null 2>&1

out=${OUT:-$here/results/bwtest-modes-$(date +%Y%m%d-%H%M%S).csv}
mkdir -p "$(dirname "$out")"
echo "hogs,flavour,mode,run,bytes,rtt_us" >"$out"
for nh in $hogs_list; do
	hogs=""
	i=0
	while [ "$i" -lt "$nh" ]; do
		nice -n 0 sh -c 'while :; do :; done' &
		hogs="$hogs $!"
		i=$((i + 1))
	done
	# Runs interleave the modes (stock, default, spin, sleep, stock, ...):
	# beside CPU hogs the host drifts over minutes, and a mode run in one
	# block took that drift for its own difference.
	r=1
	while [ "$r" -le "$runs" ]; do
		for mode in $modes; do
			case $mode in
			stock) bin=bw-stock fl=stock w= ;;
			default) bin=bw-rcp fl=rcp w= ;;
			*) bin=bw-rcp fl=rcp w=$mode ;;
			esac
			# two copies from the shell, as the example is run; a hung
			# pair is killed after 120 s and reported with no figures
			(cd "$tmp" && RCP_WAIT=$w timeout 120 "./$bin" >"$tmp/o1" 2>&1) &
			p1=$!
			(cd "$tmp" && RCP_WAIT=$w timeout 120 "./$bin" >"$tmp/o2" 2>&1) &
			p2=$!
			wait "$p1" || echo "bwtest ($fl $mode, $nh hogs) failed" >&2
			wait "$p2" || echo "bwtest ($fl $mode, $nh hogs) failed" >&2
			cat "$tmp/o1" "$tmp/o2" | awk -v h="$nh" -v f="$fl" -v m="$mode" -v r="$r" \
				'/Roundtrip T =/ { t = $4; sz = $NF; printf "%s,%s,%s,%s,%s,%s\n", h, f, m, r, sz, t }' >>"$out"
		done
		r=$((r + 1))
	done
	for h in $hogs; do kill "$h" 2>/dev/null || true; done
	hogs=""
done
cat "$out"
echo
# median over runs, per (hogs, mode, bytes), sizes up to 8 KB in one row
awk -F, 'NR > 1 { k = $1 "," $3 "," $5; v[k] = v[k] " " $6; if (!(k in seen)) { seen[k] = 1; key[++n] = k } }
END {
	print "hogs,mode,bytes,rtt_us_median";
	for (i = 1; i <= n; i++) {
		m = split(v[key[i]], a, " ");
		for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
		printf "%s,%s\n", key[i], a[int((m + 1) / 2)];
	}
}' "$out"
