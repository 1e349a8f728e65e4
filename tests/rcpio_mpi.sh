#!/bin/sh
# tests/rcpio_mpi.sh — the rcpio MPI-IO cache under mpirun (docs/rcpio.md).
# An unmodified MPI-IO program (tests/rcpio_mpi.c, built with mpicc and
# not linked with rcpio) runs on 4 ranks with LD_PRELOAD=librcpio.so:
#  1. plain MPI-IO (no preload) writes the reference file;
#  2. through the cache: interleaved writes, reads back three ways, file on
#     disk after close equals the reference; the counters prove the blocks
#     moved between ranks by bulk (remote hits, pulled bytes) and that the
#     file system was read at most once per block;
#  3. restart (a new job, read only): every block is recovered from the
#     pools, the file system is not read at all; query replies carry the
#     locations of the next blocks (fewer queries than hinted accesses);
#  4. crash: a job overwrites the records of the file's first half
#     without committing and is killed; the next job reads the last committed data (the reference),
#     with the overwritten blocks refused from the pools, the rest recovered;
#     the same with only the owner or only the others writing;
# 4a. whole-block writes: claims deferred to the sync, many a call; over
#     blocks another rank caches, refused and put there (session 21);
#  4b. collective calls commit: a job writes with MPI_File_write_at_all
#     only, never syncs, and is killed; the next job recovers every block;
#     re-reads go where location hints say, without a query;
#  5. pool full: 4 slots per rank for 37 blocks: clean blocks evicted,
#     dirty ones written back, the file still equals the reference, hints
#     made stale by the evictions caught (counted);
#     the same with background write-back (RCPIO_WRITEBACK_MS=1);
#  5b. writes through strided views (write, then write_all after a seek),
#     set_size cutting and growing the file, get_size: the same file as
#     plain MPI-IO;
#  6. a corrupted pool header: refused (counted), data still right;
#  7. one rank's commits fail (RCPIO_FAIL_COMMIT): every rank rolls back
#     at each of the 4 commit points (2 syncs, read_all, close),
#     the next job recovers nothing and reads the right data anyway;
#  8. rcpio-cachectl show counts the committed blocks, drop removes pools
#     (not one in use: pools are locked while open);
#  9. RCP on udp under the faults wrapper (drops, duplicates, reordering,
#     corruption): the same program, the same bytes; and with a full pool;
# 9c. every rank computes for 2.5 s between writing and reading, on udp
#     with RCP_PEER_TIMEOUT=1000: no rank is taken for dead (its client
#     endpoint is tended between calls; docs/rcpio.md, session 19);
# 10. 8 ranks (more than the cores: --oversubscribe): run 2 and restart.
# TAP.  Skips (77) without mpirun or librcpio.
set -u
b=${abs_builddir:-$PWD}
lib="$b/.libs/librcpio.so"
prog="$b/tests/rcpio_mpi"
[ -x "$prog" ] && [ -f "$lib" ] || { echo "SKIP: librcpio or tests/rcpio_mpi not built (libpmem2-dev, libopenmpi-dev)"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (openmpi-bin)"; exit 77; }
# A sanitizer build: its runtime must be loaded first; Open MPI's own
# allocations at exit are not ours to report.
preload=$lib
asan=$(ldd "$lib" 2>/dev/null | sed -n 's/^[[:space:]]*\(libasan\.so[^ ]*\) => \([^ ]*\).*/\2/p')
if [ -n "$asan" ]; then
	preload="$asan $lib"
	export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rcpio-mpi.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
NP=4
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
no() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
check() { if [ "$1" = 0 ]; then shift; ok "$@"; else shift; no "$@"; fi; }
# A job (output to OUT) for at most 300 s.  Past that, every rank's
# threads' backtraces and counters (gdb, when installed: tests/rcpio_gdb.py)
# go to this test's log before
# the job is ended, so that a hang explains itself (session 19: after a
# rank's error, Open MPI's mpirun was seen hanging in its abort, the other
# ranks waiting in a collective for ever).
limit() { # out-file, command...
	lo=$1
	shift
	"$@" >"$lo" 2>&1 &
	lp=$!
	(
		i=0
		while [ $i -lt 300 ] && kill -0 $lp 2>/dev/null; do
			sleep 1
			i=$((i + 1))
		done
		kill -0 $lp 2>/dev/null || exit 0
		echo "still running after 300 s: $*"
		tail -20 "$lo"
		for r in $(pgrep -P $lp); do
			echo "rank process $r:"
			command -v gdb >/dev/null &&
				timeout 60 gdb -p $r -batch -x "${srcdir:-.}/tests/rcpio_gdb.py" 2>&1 |
				grep -E '^(#|Thread|rcp|thread)'
		done
		kill $lp
	) 2>&1 | sed 's/^/# /' &
	lw=$!
	wait $lp
	st=$?
	kill $lw 2>/dev/null
	return $st
}
run() { # out-file, pool-size, args...
	out=$1 psize=$2
	shift 2
	limit "$out" mpirun --allow-run-as-root --oversubscribe -np $NP $extra \
		-x LD_PRELOAD="$preload" -x ASAN_OPTIONS -x RCPIO_PREFIX="$tmp/c" -x RCPIO_POOL_DIR="$tmp/pool" \
		-x RCPIO_BLOCK=64k -x RCPIO_POOL_SIZE="$psize" -x RCPIO_STATS=1 \
		"$prog" "$@"
}
# Sum of counter NAME over the ranks' stats lines of FILE.
sum() { grep '^rcpio-stats' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | awk '{s += $1} END {print s + 0}'; }
mkdir -p "$tmp/pool"
extra=

limit "$tmp/o0" mpirun --allow-run-as-root --oversubscribe -np $NP "$prog" "$tmp/plain.dat"
check $? "plain MPI-IO writes and reads back the reference file"

run "$tmp/o1" 16m "$tmp/c.dat"
st=$?
check $st "through rcpio: writes, read_at, read_all (view), strided read (vector view) all match"
[ $st = 0 ] || cat "$tmp/o1"
cmp -s "$tmp/plain.dat" "$tmp/c.dat"
check $? "file on disk after close equals the plain MPI-IO reference"
blocks=$(( ($(stat -c %s "$tmp/plain.dat") + 65535) / 65536 ))
hr=$(sum "$tmp/o1" hits_remote) pb=$(sum "$tmp/o1" pull_bytes) fr=$(sum "$tmp/o1" fs_reads)
pr=$(sum "$tmp/o1" puts_remote) ps=$(sum "$tmp/o1" puts_served)
echo "# run: remote hits $hr, pulled $pb bytes, remote puts $pr (served $ps), fs reads $fr, $blocks blocks"
[ "$hr" -gt 0 ] && [ "$pb" -ge $((3 * $(stat -c %s "$tmp/plain.dat"))) ]
check $? "reads of other ranks' bytes came from their pools ($pb bytes)"
# On shm (one host, RCP_NIC_CAP_SHARED_SEG) by a copy from the owner's pool
# mapped here, each rank mapping the 3 others' pools (session 20).
pm=$(sum "$tmp/o1" pulls_mapped) po=$(sum "$tmp/o1" pools_mapped)
[ "$pm" -ge "$hr" ] && [ "$po" = $((NP * (NP - 1))) ]
check $? "on shm they were copies from the owners' pools mapped here ($pm reads, $po pools mapped)"
hb=$(sum "$tmp/o1" held_bytes) pf=$(sum "$tmp/o1" puts_failed)
[ "$pr" -gt 0 ] && [ "$pr" = "$ps" ] && [ "$pf" = 0 ] && [ "$hb" = 0 ]
check $? "writes into blocks other ranks own went by rcpio.put ($pr, all served, $hb bytes still held)"
[ "$fr" -le "$blocks" ]
check $? "the file system was read at most once per block ($fr <= $blocks)"
hi=$(sum "$tmp/o1" hinted)
[ "$hi" -gt 0 ]
check $? "re-reads went where the location hints said, without a query ($hi accesses)"

run "$tmp/o2" 16m "$tmp/c.dat" read
st=$?
check $st "restart: a new job reads the file back through the cache"
rec=$(sum "$tmp/o2" recovered) fr=$(sum "$tmp/o2" fs_reads) mi=$(sum "$tmp/o2" misses)
echo "# restart: recovered $rec blocks, fs reads $fr, misses $mi"
[ "$rec" = "$blocks" ] && [ "$fr" = 0 ] && [ "$mi" = 0 ]
check $? "restart: all $blocks blocks recovered from the pools, no file system read"
ha=$(sum "$tmp/o2" hints_ahead) q=$(sum "$tmp/o2" queries) hi=$(sum "$tmp/o2" hinted)
echo "# restart: queries $q, locations learned ahead $ha, accesses by hint $hi"
[ "$ha" -gt 0 ] && [ "$q" -lt "$hi" ]
check $? "restart: query replies carried the next blocks' locations ($ha), fewer queries ($q) than accesses by hint ($hi)"

ctl="$b/rcpio/rcpio-cachectl"
cb=$("$ctl" show "$tmp"/pool/*.pool | sed -n 's/^  .*c\.dat: \([0-9]*\) blocks.*/\1/p' | awk '{s += $1} END {print s + 0}')
[ "$cb" = "$blocks" ]
check $? "rcpio-cachectl show: the pools hold $cb committed blocks of the file"

run "$tmp/o3" 16m "$tmp/c.dat" crash
echo "# crash job exit status $? (killed on purpose)"
run "$tmp/o4" 16m "$tmp/c.dat" read
st=$?
check $st "after a crash between write and commit: the last committed data is read"
[ $st = 0 ] || cat "$tmp/o4"
cmp -s "$tmp/plain.dat" "$tmp/c.dat"
check $? "after the crash the file on disk is still the committed one"
rec=$(sum "$tmp/o4" recovered) dr=$(sum "$tmp/o4" dropped_stale) fr=$(sum "$tmp/o4" fs_reads)
echo "# after crash: recovered $rec, fs reads $fr"
[ "$rec" -gt 0 ] && [ "$rec" -lt "$blocks" ] && [ "$fr" = $((blocks - rec)) ]
check $? "blocks written but never committed were refused, the others recovered ($rec of $blocks)"

# The two ways a committed slot changes, one at a time: rank 0 caches
# every block (fresh pools), then only the others write (rcpio.put at the
# owner), or only rank 0 writes (its own copies).
for who in except0 only0; do
	rm -f "$tmp"/pool/*
	run "$tmp/t-$who" 16m "$tmp/c.dat" touch0
	run "$tmp/k-$who" 16m "$tmp/c.dat" crash-$who
	run "$tmp/r-$who" 16m "$tmp/c.dat" read
	st=$?
	rec=$(sum "$tmp/r-$who" recovered)
	[ $st = 0 ] && [ "$rec" -gt 0 ] && [ "$rec" -lt "$blocks" ]
	check $? "crash with writes by $who of the owner: committed data read, $rec of $blocks blocks recovered"
done

# 4a. Whole blocks (two 64 KiB blocks a record): a write of a block
# managed by another rank goes into the writer's own slot, its claim
# deferred and sent with others in one rcpio.claim at the sync (session
# 21).  Then the same over a file whose every block rank 0 caches first
# (touch0 on the complement): each claim is refused, the bytes go to rank
# 0's copy by put, and every rank reads the new bytes after the sync.
limit "$tmp/oW0" mpirun --allow-run-as-root --oversubscribe -np $NP "$prog" "$tmp/plainW.dat" both 131072 8
rm -f "$tmp"/pool/*
run "$tmp/oW" 16m "$tmp/cW.dat" both 131072 8
st=$?
cmp -s "$tmp/plainW.dat" "$tmp/cW.dat"
[ $st = 0 ] && [ $? = 0 ]
check $? "whole-block writes: every read and the file equal plain MPI-IO's"
de=$(sum "$tmp/oW" deferred) cs=$(sum "$tmp/oW" claims_sent) rf=$(sum "$tmp/oW" refused) q=$(sum "$tmp/oW" queries)
echo "# whole blocks: $de claims deferred in $cs calls, $rf refused, $q queries"
[ "$de" -gt 0 ] && [ "$cs" -gt 0 ] && [ "$cs" -lt "$de" ] && [ "$rf" = 0 ]
check $? "whole blocks of other ranks' managers: $de claims deferred, sent in $cs calls"
rm -f "$tmp"/pool/*
run "$tmp/oV1" 16m "$tmp/cV.dat" inv 131072 8
rm -f "$tmp"/pool/*
run "$tmp/oV2" 16m "$tmp/cV.dat" touch0 131072 8
run "$tmp/oV3" 16m "$tmp/cV.dat" both 131072 8
st=$?
cmp -s "$tmp/plainW.dat" "$tmp/cV.dat"
[ $st = 0 ] && [ $? = 0 ]
check $? "whole blocks over rank 0's cached copies: every read and the file are the new bytes"
[ $st = 0 ] || tail -5 "$tmp/oV3"
rf=$(sum "$tmp/oV3" refused) pr=$(sum "$tmp/oV3" puts_remote)
echo "# over cached copies: $rf claims refused, $pr remote puts"
[ "$rf" -gt 0 ] && [ "$pr" -ge "$rf" ]
check $? "claims of blocks rank 0 holds were refused ($rf) and their bytes put there"

rm -f "$tmp"/pool/*
run "$tmp/o4a" 16m "$tmp/c4.dat" crash-all
echo "# crash-all job exit status $? (killed on purpose)"
run "$tmp/o4b" 16m "$tmp/c4.dat" read
st=$?
rec=$(sum "$tmp/o4b" recovered) fr=$(sum "$tmp/o4b" fs_reads)
echo "# after write_at_all and a kill: recovered $rec, fs reads $fr"
[ $st = 0 ] && [ "$rec" = "$blocks" ] && [ "$fr" = 0 ]
check $? "write_at_all is a commit point: after a kill with no sync, all $rec of $blocks blocks recovered"
[ $st = 0 ] || tail -3 "$tmp/o4b"

run "$tmp/o5" 256k "$tmp/c2.dat" both 3000 200
st=$?
check $st "pool full (4 slots a rank, 37 blocks): data still right"
[ $st = 0 ] || tail -5 "$tmp/o5"
ev=$(sum "$tmp/o5" evictions) wb=$(sum "$tmp/o5" writebacks)
echo "# pool full: evictions $ev, write-backs $wb"
[ "$ev" -gt 0 ] && [ "$wb" -gt 0 ]
check $? "pool full: blocks evicted ($ev), dirty ones written back"
hs=$(sum "$tmp/o5" hints_stale)
[ "$hs" -gt 0 ]
check $? "pool full: location hints made stale by evictions were caught ($hs) and the data is still right"

extra="-x RCPIO_WRITEBACK_MS=1"
run "$tmp/o5b" 256k "$tmp/c3.dat" both 3000 400
st=$?
check $st "background write-back (every 1 ms) with a full pool: data and file on disk right"
[ $st = 0 ] || tail -5 "$tmp/o5b"
echo "# background write-back: $(sum "$tmp/o5b" bg_writebacks) blocks written in the background (timing-dependent, not checked)"
extra=

# Writes through strided views (write_all, then write after a seek), a cut
# by set_size and a growth back: plain MPI-IO and rcpio leave the same file.
limit "$tmp/ov0" mpirun --allow-run-as-root --oversubscribe -np $NP "$prog" "$tmp/pv.dat" views
st0=$?
run "$tmp/ov1" 16m "$tmp/cv.dat" views
st=$?
[ $st = 0 ] || tail -5 "$tmp/ov1"
[ $st0 = 0 ] && [ $st = 0 ] && cmp -s "$tmp/pv.dat" "$tmp/cv.dat"
check $? "strided views: write and write_all, set_size cut and growth, get_size: same bytes as plain MPI-IO"

printf 'garbage!' | dd of="$tmp/pool/rcpio-1.pool" bs=1 seek=16 conv=notrunc 2>/dev/null
run "$tmp/o6" 16m "$tmp/c.dat" read
st=$?
check $st "a corrupted pool: data still right"
rf=$(sum "$tmp/o6" pool_refused)
[ "$rf" = 1 ]
check $? "a corrupted pool header is refused, not trusted ($rf)"

rm -f "$tmp"/pool/* "$tmp/c.dat"
extra="-x RCPIO_FAIL_COMMIT=2"
run "$tmp/o7" 16m "$tmp/c.dat"
check $? "rank 1's commits fail: the program still reads and writes right"
cm=$(sum "$tmp/o7" commits) rb=$(sum "$tmp/o7" rollbacks)
echo "# failed commits: commits $cm, rollbacks $rb"
[ "$cm" = 0 ] && [ "$rb" = $((4 * NP)) ]
check $? "a commit failing on one rank is rolled back on all ($rb rollbacks, $cm commits)"
extra=
run "$tmp/o8" 16m "$tmp/c.dat" read
check $? "after the rolled-back commits the data is right"
rec=$(sum "$tmp/o8" recovered)
[ "$rec" = 0 ]
check $? "nothing rolled back is recovered ($rec blocks)"

rm -f "$tmp"/pool/* "$tmp/c.dat"
extra="-x RCPIO_TRANSPORT=udp -x RCP_FAULTS=drop=0.02,dup=0.01,reorder=0.02,corrupt=0.01,seed=7"
run "$tmp/o9" 16m "$tmp/c.dat"
st=$?
check $st "udp under faults (seed 7): writes and reads match"
[ $st = 0 ] || tail -5 "$tmp/o9"
cmp -s "$tmp/plain.dat" "$tmp/c.dat"
check $? "udp under faults: file on disk equals the reference"
hr=$(sum "$tmp/o9" hits_remote)
pm=$(sum "$tmp/o9" pulls_mapped)
[ "$hr" -gt 0 ] && [ "$pm" = 0 ]
check $? "udp under faults: remote hits by bulk ($hr), none from a mapped pool ($pm)"
# A full pool under the same faults: evictions, write-backs and stale
# hints while frames are dropped, duplicated, reordered and corrupted.
extra="-x RCPIO_TRANSPORT=udp -x RCP_FAULTS=drop=0.02,dup=0.01,reorder=0.02,corrupt=0.01,seed=11"
run "$tmp/o9b" 256k "$tmp/c9.dat" both 3000 200
st=$?
extra=
[ $st = 0 ] || tail -5 "$tmp/o9b"
ev=$(sum "$tmp/o9b" evictions) hs=$(sum "$tmp/o9b" hints_stale)
echo "# pool full under faults: evictions $ev, stale hints $hs"
[ $st = 0 ] && [ "$ev" -gt 0 ]
check $? "pool full on udp under faults (seed 11): data right, blocks evicted ($ev)"
# A rank away from rcpio longer than the peer timeout (it computes, or
# waits in MPI for slower ranks: on a crowded machine, seconds): before
# session 19 its managers took it for dead (RCP_EPEER at its next read).
rm -f "$tmp"/pool/*
extra="-x RCPIO_TRANSPORT=udp -x RCP_PEER_TIMEOUT=1000"
run "$tmp/o9c" 16m "$tmp/c9c.dat" both 3000 200 2500
st=$?
extra=
[ $st = 0 ] || tail -5 "$tmp/o9c"
check $st "every rank computes 2.5 s between writes and reads (RCP_PEER_TIMEOUT=1000, udp): data right"

# More ranks than cores: 8 (--oversubscribe), every check of the first run
# and the restart again.
rm -f "$tmp"/pool/*
NP=8
run "$tmp/o10" 16m "$tmp/c8.dat"
st=$?
[ $st = 0 ] || tail -5 "$tmp/o10"
# (rank 0 checks the file on disk after close byte for byte itself.)
check $st "8 ranks: writes and reads match, and the file on disk after close"
b8=$(( ($(stat -c %s "$tmp/c8.dat") + 65535) / 65536 ))
hr=$(sum "$tmp/o10" hits_remote) pr=$(sum "$tmp/o10" puts_remote) fr=$(sum "$tmp/o10" fs_reads)
run "$tmp/o11" 16m "$tmp/c8.dat" read
st=$?
rec=$(sum "$tmp/o11" recovered) fr2=$(sum "$tmp/o11" fs_reads) mi=$(sum "$tmp/o11" misses)
echo "# 8 ranks: remote hits $hr, remote puts $pr, fs reads $fr; restart recovered $rec of $b8 blocks, fs reads $fr2, misses $mi"
[ $st = 0 ] && [ "$hr" -gt 0 ] && [ "$pr" -gt 0 ] && [ "$fr" -le "$b8" ] && [ "$rec" = "$b8" ] &&
	[ "$fr2" = 0 ] && [ "$mi" = 0 ]
check $? "8 ranks: bulk hits and puts, at most one fs read per block; restart recovers all $b8 blocks, no fs read"
NP=4

# A running job's pool is locked (flock(1) holds it here as a job would):
# show and drop leave it alone.
p0="$tmp/pool/rcpio-0.pool"
flock -n "$p0" sh -c '! "$1" show "$2" >/dev/null && ! "$1" drop "$2" 2>/dev/null && [ -f "$2" ]' sh "$ctl" "$p0"
check $? "rcpio-cachectl show and drop leave a pool in use (locked) alone"
"$ctl" drop "$tmp"/pool/*.pool >/dev/null && [ -z "$(ls "$tmp/pool")" ]
check $? "rcpio-cachectl drop removes the pools"
"$ctl" drop "$tmp/plain.dat" >/dev/null 2>&1
[ $? != 0 ] && [ -f "$tmp/plain.dat" ]
check $? "rcpio-cachectl drop leaves a file that is not a pool alone"

echo "1..$n"
[ $fails = 0 ]
