#!/bin/sh
# perf/rcpio_bench.sh — rcpio vs Open MPI's own MPI-IO on the same files,
# 4 ranks (docs/rcpio.md, "Measured").  CSV on stdout:
#   fs,impl,pattern,phase,nprocs,xfer,bytes,seconds,MBps
# Phases (perf/rcpio_bench.c): O the first open (rcpio: recovery), w write,
# s sync (rcpio: write-back + commit), r read own pieces, o read another
# rank's pieces, c close+open, then r/o again (a file already cached), z
# compute (BENCH_COMPUTE_MS asleep), and P, R: a new job's open and read
# (rcpio: recovered from the pools after the previous job ended).
# usage: perf/rcpio_bench.sh [BUILDDIR] [PER_RANK_BYTES] [XFER]
# Env:
#  MODE=ior (default): segmented and strided N-1, the phases above.
#  MODE=ckpt: a checkpoint and a restart, segmented pieces (rows say
#    pattern ckpt): the job writes (w),
#    computes (z), syncs (s) and is killed (SIGKILL); a new job opens and
#    reads it back (O, R).  Plain MPI-IO; rcpio with background write-back
#    (impl rcpio-wb, RCPIO_WRITEBACK_MS=20) and without (rcpio); and
#    rcpio-cold: the restart with the pools removed (re-read from the file
#    system through the cache).
#  UNCACHED=1: the backing file is dropped from the page cache (fdatasync +
#    posix_fadvise DONTNEED on every rank) before every read phase and
#    before each new job, so that plain MPI-IO reads the disk.
#  THROTTLE=BYTES_PER_S: the run joins the blkio cgroup rcpio-bench with
#    that read limit on DIR's device (cgroup v1, root): a slower disk.
#  HUGEPOOL=1: the pools on a tmpfs of their own mounted with
#    huge=within_size (root), unmounted at the end: 2 MiB pages, as a DAX
#    device maps persistent memory, where /dev/shm (huge=never here) maps
#    4 KiB ones and a process pays a fault per 64 KiB the first time it
#    touches pool memory (docs/results.md, session 20).  Column impl then
#    says rcpio-huge.
#  FS: the first column (default: pagecache, disk with UNCACHED, or
#    disk-<THROTTLE/1e6>MBps).  DIR (backing files, default a fresh dir
#    under /var/tmp: on the disk, not tmpfs), POOLDIR (the pools, default
#    under /dev/shm), NP (4), CLUSTER (the name of a running rcp-cluster of
#    at least NP hosts: mpirun on h1 starts rank i on h(i+1) through
#    rcp-cluster exec, and rcpio uses udp between the hosts).
set -u
b=$(cd "${1:-.}" && pwd)
per=${2:-67108864}
xfer=${3:-1048576}
NP=${NP:-4}
MODE=${MODE:-ior}
UNCACHED=${UNCACHED:-}
lib="$b/.libs/librcpio.so"
prog="$b/perf/rcpio_bench"
[ -x "$prog" ] && [ -f "$lib" ] || { echo "rcpio_bench.sh: build perf/rcpio_bench and librcpio first" >&2; exit 1; }
dir=${DIR:-$(mktemp -d /var/tmp/rcpio-bench.XXXXXX)}
fs=${FS:-pagecache}
[ -n "$UNCACHED" ] && fs=${FS:-disk}
if [ -n "${THROTTLE:-}" ]; then
	cg=/sys/fs/cgroup/blkio/rcpio-bench
	dev=$(findmnt -no MAJ:MIN -T "$dir")
	{ mkdir -p "$cg" && echo "$dev $THROTTLE" >"$cg/blkio.throttle.read_bps_device" &&
		echo $$ >"$cg/cgroup.procs"; } 2>/dev/null ||
		{ echo "rcpio_bench.sh: cannot throttle (needs root and cgroup v1 blkio)" >&2; exit 1; }
	fs=${FS:-disk-$((THROTTLE / 1000000))MBps}
fi
d=
[ -n "$UNCACHED" ] && d=d
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { mpirun --allow-run-as-root --oversubscribe -np "$NP" "$@"; }
transport=shm
if [ -n "${CLUSTER:-}" ]; then
	rcpc=$(cd "$(dirname "$0")/.." && pwd)/tools/rcp-cluster
	agent="$dir/agent"
	printf '#!/bin/sh\nh=$1; shift\nexec "%s" --name "%s" exec "$h" sh -c "$*"\n' "$rcpc" "$CLUSTER" >"$agent"
	chmod +x "$agent"
	hosts=$(seq -s, -f 'h%g' 1 "$NP")
	mpi() { "$rcpc" --name "$CLUSTER" exec h1 mpirun --allow-run-as-root --oversubscribe \
		--mca plm_rsh_agent "$agent" -H "$hosts" -np "$NP" "$@"; }
	transport=udp
fi
pool=$(( per * 3 / 1048576 + 64 ))m
rc() { mpi -x LD_PRELOAD="$lib" -x RCPIO_PREFIX="$dir/c" -x RCPIO_POOL_DIR="$pooldir" \
	-x RCPIO_BLOCK=1m -x RCPIO_POOL_SIZE="$pool" -x RCPIO_TRANSPORT="$transport" "$@"; }
rcwb() { rc -x RCPIO_WRITEBACK_MS=20 "$@"; }
# A new job's lines: its open is P, its read R.
label() { sed "s/^/$fs,$1,/"; }
newjob() { sed "s/^/$fs,$1,/; s/,r,/,R,/; s/,O,/,P,/"; }
# Pools on /dev/shm (DRAM standing in for persistent memory), unless POOLDIR.
pooldir=${POOLDIR:-/dev/shm/rcpio-bench-$$}
rcname=rcpio
if [ -n "${HUGEPOOL:-}" ]; then
	hp=$(mktemp -d /tmp/rcpio-hugepool.XXXXXX)
	mount -t tmpfs -o "huge=within_size,size=$((NP * (${pool%m} + 64)))m" rcpio-bench "$hp" ||
		{ rmdir "$hp"; echo "rcpio_bench.sh: cannot mount a huge=within_size tmpfs (root)" >&2; exit 1; }
	trap 'umount "$hp"; rmdir "$hp"' EXIT
	pooldir="$hp/p" rcname=rcpio-huge
fi
echo "fs,impl,pattern,phase,nprocs,xfer,bytes,seconds,MBps"
if [ "$MODE" = ckpt ]; then
	# Rows of this mode say pattern "ckpt" (segmented pieces).
	label() { sed "s/^/$fs,$1,/; s/,segmented,/,ckpt,/"; }
	newjob() { sed "s/^/$fs,$1,/; s/,r,/,R,/; s/,O,/,P,/; s/,segmented,/,ckpt,/"; }
	# A killed job leaves mpirun's report on stderr: not ours to show.
	for impl in mpiio rcpio rcpio-wb rcpio-cold; do
		rm -rf "$pooldir" "$dir"/*.dat
		mkdir -p "$pooldir"
		f="$dir/c-ckpt.dat" run=rc
		case $impl in
		mpiio) f="$dir/p-ckpt.dat" run=mpi ;;
		rcpio-wb) run=rcwb ;;
		esac
		if [ $impl = rcpio-cold ]; then
			rc "$prog" "$f" segmented "$xfer" "$per" ws >/dev/null
			rm -rf "$pooldir"
			mkdir -p "$pooldir"
		else
			$run "$prog" "$f" segmented "$xfer" "$per" wzsk 2>/dev/null | label $impl
		fi
		$run "$prog" "$f" segmented "$xfer" "$per" ${d}r | newjob $impl
	done
	rm -rf "$pooldir"
	[ -n "${DIR:-}" ] || rm -rf "$dir"
	exit 0
fi
for pattern in segmented strided; do
	rm -rf "$pooldir" "$dir"/*.dat
	mkdir -p "$pooldir"
	ph="ws${d}r${d}oc${d}r${d}o"
	mpi "$prog" "$dir/p-$pattern.dat" "$pattern" "$xfer" "$per" "$ph" | label mpiio
	mpi "$prog" "$dir/p-$pattern.dat" "$pattern" "$xfer" "$per" ${d}r | newjob mpiio
	rc "$prog" "$dir/c-$pattern.dat" "$pattern" "$xfer" "$per" "$ph" | label $rcname
	rc "$prog" "$dir/c-$pattern.dat" "$pattern" "$xfer" "$per" ${d}r | newjob $rcname
	cmp -s "$dir/p-$pattern.dat" "$dir/c-$pattern.dat" || echo "rcpio_bench.sh: $pattern files differ" >&2
done
rm -rf "$pooldir"
[ -n "${DIR:-}" ] || rm -rf "$dir"
