#!/bin/sh
# perf/rounds.sh [ROUNDS] — issue 19's side-by-side 8 B round trips, in
# alternating rounds so a phase of the shared host hits every tool alike:
#   floor  cache-line ping-pong between two processes (../shared/peers/
#          floor.c, built here if present; skipped otherwise)
#   ucx    ucx_perftest posix tag_lat 8 B (Debian ucx-utils; skipped if
#          missing), its median one-way latency doubled
#   rcp    rcp-pingpong --transport shm --sizes 8 --spin (median)
#   pvm    relinked pvm_psend/pvm_precv, rcp-pvm-pingpong rcp default spin
#          (8 B row), in a private PVM VM
# Prints a CSV (round,tool,rtt_us) and the medians over rounds with the
# ratios rcp/ucx, rcp/floor and pvm/rcp (issue 19's targets: <= 0.6,
# <= 3, <= 1.15).  Run from a build directory on a quiet machine:
#   flock -x /tmp/bench.lock ../../perf/rounds.sh 5
# Env: OUT (CSV; default perf/results/rounds-DATE.csv), FLOOR_SRC,
# TOOLS (the tools to run, default "floor ucx rcp pvm"), AB=DIR (another
# build directory, e.g. the tree before a change: each round also runs its
# rcp and pvm, right after ours, as the tools rcp_b and pvm_b, and prints
# pvm_b/rcp_b beside pvm/rcp: an A/B in the same rounds).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-5}
bin=${PERF_BIN:-./perf}
[ -x "$bin/rcp-pingpong" ] || { echo "rounds.sh: no $bin/rcp-pingpong (run from a build dir)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/rounds.XXXXXX)
out=${OUT:-$here/results/rounds-$(date +%Y%m%d-%H%M%S).csv}
floor_src=${FLOOR_SRC:-$here/../../shared/peers/floor.c}
tools=" ${TOOLS:-floor ucx rcp pvm} "
ab=${AB:-}
[ -z "$ab" ] || [ -x "$ab/perf/rcp-pingpong" ] || { echo "rounds.sh: no $ab/perf/rcp-pingpong" >&2; exit 2; }
floor=""
case $tools in *" floor "*) ;; *) floor_src=/nonexistent ;; esac
if [ -f "$floor_src" ] && cc -O2 -pthread -o "$tmp/floor" "$floor_src" 2>/dev/null; then
	floor="$tmp/floor"
fi
ucx=$(command -v ucx_perftest || true)
case $tools in *" ucx "*) ;; *) ucx="" ;; esac
pvm=""
pvm_b=""
case $tools in *" pvm "*) want_pvm=1 ;; *) want_pvm=0 ;; esac
if [ "$want_pvm" = 1 ] && [ -x "$bin/rcp-pvm-pingpong" ] && command -v pvm >/dev/null; then
	export PVM_ROOT=${PVM_ROOT:-/usr/lib/pvm3} PVM_ARCH=${PVM_ARCH:-LINUX64}
	[ "$(id -u)" -eq 0 ] && export PVM_ALLOW_ROOT=1
	export PVM_VMID="rnd$$" PVM_TMP="$tmp" TMPDIR="$tmp"
	mkdir -p "$tmp/bin"
	cp "$bin/rcp-pvm-pingpong" "$tmp/bin/"
	# the other build's under another name: it spawns its own copy
	[ -n "$ab" ] && cp "$ab/perf/rcp-pvm-pingpong" "$tmp/bin/rcp-pvm-pingpong-b" &&
		pvm_b="$tmp/bin/rcp-pvm-pingpong-b"
	printf '* ep=%s\n%s\n' "$tmp/bin" "$(uname -n)" >"$tmp/hosts"
	echo conf | pvm "$tmp/hosts" >/dev/null 2>&1 && pvm="$tmp/bin/rcp-pvm-pingpong"
fi
cleanup() {
	[ -n "$pvm" ] && { echo halt | pvm >/dev/null 2>&1 || true; }
	rm -f /dev/shm/rcp-pvmrcp-"$(printf %.12s "${PVM_VMID:-none}")"-*
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$(dirname "$out")"
echo "round,tool,rtt_us" >"$out"
r=1
while [ "$r" -le "$rounds" ]; do
	if [ -n "$floor" ]; then
		"$floor" 2>/dev/null | awk -v r="$r" '/cache-line ping-pong, 2 processes/ {
			printf "%s,floor,%.4f\n", r, $6 / 1000 }' >>"$out"
	fi
	if [ -n "$ucx" ]; then
		UCX_TLS=posix "$ucx" -p 13400 -c 0 >/dev/null 2>&1 &
		srv=$!
		sleep 1
		UCX_TLS=posix "$ucx" 127.0.0.1 -p 13400 -c 1 -t tag_lat -s 8 -n 100000 -w 10000 \
			-f 2>/dev/null | awk -v r="$r" '$1 ~ /^[0-9]+$/ && NF >= 8 { l = $2 }
			END { if (l) printf "%s,ucx,%.4f\n", r, 2 * l }' \
			>>"$out" || true
		wait "$srv" 2>/dev/null || true
	fi
	for side in a b; do
		rb=$bin pb=$pvm sfx=""
		[ $side = b ] && { [ -n "$ab" ] || continue; rb=$ab/perf pb=$pvm_b sfx=_b; }
		case $tools in *" rcp "*)
			"$rb/rcp-pingpong" --transport shm --sizes 8 --spin --csv 2>/dev/null |
				awk -F, -v r="$r" -v t="rcp$sfx" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "rtt_median_us") c = i }
				NR > 1 && c { printf "%s,%s,%.4f\n", r, t, $c }' >>"$out" ;;
		esac
		if [ -n "$pb" ]; then
			(cd "$tmp" && "$pb" rcp rcp default spin 20000 2>/dev/null) |
				awk -F, -v r="$r" -v t="pvm$sfx" '$2 == 8 { printf "%s,%s,%.4f\n", r, t, $4 }' >>"$out"
		fi
	done
	r=$((r + 1))
done
cat "$out"
echo
awk -F, 'NR > 1 { v[$2] = v[$2] " " $3 }
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ");
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n ? (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) : 0
}
END {
	for (t in v) m[t] = median(v[t]);
	for (t in v) printf "%-6s median %.3f us  (%s )\n", t, m[t], v[t];
	if (m["ucx"]) printf "rcp/ucx   %.2f (target <= 0.6)\n", m["rcp"] / m["ucx"];
	if (m["floor"]) printf "rcp/floor %.2f (target <= 3)\n", m["rcp"] / m["floor"];
	if (m["pvm"] && m["rcp"]) printf "pvm/rcp   %.2f (target <= 1.15)\n", m["pvm"] / m["rcp"];
	if (m["pvm_b"] && m["rcp_b"]) printf "pvm_b/rcp_b %.2f (the AB build)\n", m["pvm_b"] / m["rcp_b"];
}' "$out"
