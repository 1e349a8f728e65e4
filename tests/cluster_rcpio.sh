#!/bin/sh
# tests/cluster_rcpio.sh — the rcpio MPI-IO cache across a 4-host
# rcp-cluster (docs/rcpio.md): mpirun on h1 starts one rank per host
# through its rsh agent (`rcp-cluster exec`), the ranks' RCP endpoints
# talk udp over the virtual LAN (1% loss on the wire), the backing file is
# /tmp, shared by all hosts like a network file system.  The unmodified
# MPI-IO program of tests/rcpio_mpi.sh writes, reads back and checks every
# byte; the counters show blocks pulled between hosts by bulk; a second
# job on the hosts recovers every block from the pools.  Then a commit
# that fails on one host (RCPIO_FAIL_COMMIT) is rolled back on every host,
# and 8 ranks, two a host, write, read and recover.
# TAP.  Skips (77) without root/namespaces, mpirun or librcpio.
set -u
. "${srcdir:-.}/tests/cluster_lib.sh"
lib="$b/.libs/librcpio.so"
prog="$b/tests/rcpio_mpi"
name="r$$"
[ -x "$prog" ] && [ -f "$lib" ] || { echo "SKIP: librcpio or tests/rcpio_mpi not built (libpmem2-dev, libopenmpi-dev)"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (openmpi-bin)"; exit 77; }
if ldd "$lib" | grep -q libasan; then
	echo "SKIP: sanitizer build (tests/rcpio_mpi.sh covers librcpio under ASan)"
	exit 77
fi
cl_tmp rcpio-cl
out=$(C up 4 --rate 1gbit --loss 1% 2>&1)
st=$?
[ $st -eq 77 ] && { echo "$out"; exit 77; }
[ $st -eq 0 ] || { echo "$out"; exit 1; }
cat >"$tmp/agent" <<A
#!/bin/sh
# mpirun's rsh agent: AGENT HOST CMD...
h=\$1; shift
exec "$rcpc" --name "$name" exec "\$h" sh -c "\$*"
A
chmod +x "$tmp/agent"
mkdir -p "$tmp/pool"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
np=4 H=h1,h2,h3,h4 extra=
mpi() { timeout 240 "$rcpc" --name "$name" exec h1 mpirun --allow-run-as-root --oversubscribe \
	--mca plm_rsh_agent "$tmp/agent" -H "$H" -np "$np" $extra "$@"; }
n=0 fails=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else fails=$((fails + 1)); echo "not ok $n - $2"; fi; }
sum() { grep '^rcpio-stats' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | awk '{s += $1} END {print s + 0}'; }
run() { out=$1; shift; mpi -x LD_PRELOAD="$lib" -x RCPIO_PREFIX="$tmp/c" -x RCPIO_POOL_DIR="$tmp/pool" \
	-x RCPIO_BLOCK=64k -x RCPIO_POOL_SIZE=16m -x RCPIO_STATS=1 -x RCPIO_TRANSPORT=udp \
	"$prog" "$tmp/c.dat" "$@" >"$out" 2>&1; }

hosts=$(mpi hostname 2>/dev/null | sort -u | tr '\n' ' ')
[ "$hosts" = "h1 h2 h3 h4 " ]
check $? "mpirun on h1 starts one rank on each host through rcp-cluster exec ($hosts)"
run "$tmp/o1"
st=$?
check $st "4 hosts, udp, 1% loss: writes, read_at, read_all, strided read and the file on disk match"
[ $st = 0 ] || tail -5 "$tmp/o1"
hr=$(sum "$tmp/o1" hits_remote) pb=$(sum "$tmp/o1" pull_bytes)
echo "# remote hits $hr, $pb bytes pulled between hosts"
[ "$hr" -gt 0 ] && [ "$pb" -gt 0 ]
check $? "blocks moved between hosts by bulk ($pb bytes)"
run "$tmp/o2" read
st=$?
rec=$(sum "$tmp/o2" recovered) fr=$(sum "$tmp/o2" fs_reads)
echo "# second job: recovered $rec blocks, $fr file system reads"
[ $st = 0 ] && [ "$rec" -gt 0 ] && [ "$fr" = 0 ]
check $? "a second job on the hosts reads everything from the pools"

# Rank 2 (on h3) fails every commit: all four commit points are rolled
# back on every host, the data is still right, nothing is recovered.
rm -f "$tmp"/pool/* "$tmp/c.dat"
extra="-x RCPIO_FAIL_COMMIT=3"
run "$tmp/o3"
st=$?
extra=
cm=$(sum "$tmp/o3" commits) rb=$(sum "$tmp/o3" rollbacks)
echo "# a failing host: commits $cm, rollbacks $rb"
[ $st = 0 ] && [ "$cm" = 0 ] && [ "$rb" = $((4 * np)) ]
check $? "a commit failing on h3 is rolled back on all 4 hosts ($rb rollbacks), data still right"
run "$tmp/o4" read
st=$?
rec=$(sum "$tmp/o4" recovered)
[ $st = 0 ] && [ "$rec" = 0 ]
check $? "after the rolled-back commits the next job reads right and recovers nothing ($rec)"

# 8 ranks, two a host.
rm -f "$tmp"/pool/* "$tmp/c.dat"
np=8 H=h1:2,h2:2,h3:2,h4:2
hosts=$(mpi hostname 2>/dev/null | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
[ "$hosts" = "h1:2 h2:2 h3:2 h4:2 " ]
check $? "8 ranks, two on each host ($hosts)"
run "$tmp/o5"
st=$?
[ $st = 0 ] || tail -5 "$tmp/o5"
hr=$(sum "$tmp/o5" hits_remote)
run "$tmp/o6" read
st2=$?
rec=$(sum "$tmp/o6" recovered) fr=$(sum "$tmp/o6" fs_reads)
echo "# 8 ranks: remote hits $hr; second job recovered $rec, fs reads $fr"
[ $st = 0 ] && [ "$hr" -gt 0 ] && [ $st2 = 0 ] && [ "$rec" -gt 0 ] && [ "$fr" = 0 ]
check $? "8 ranks on 4 hosts: every byte right, blocks pulled between ranks, a second job recovers all"
echo "1..$n"
[ $fails = 0 ]
