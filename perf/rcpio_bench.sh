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
#  MODE=all (default, session 21): MODE=ior, then MODE=ckpt, in one run,
#    then a summary on stderr: rcpio / MPI-IO per read phase and the
#    write, the checkpoint's seconds and the restart's, side by side.
#  MODE=ior: segmented and strided N-1, the phases above.
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
#  HUGEPOOL: where the pools get 2 MiB pages (session 21: the default,
#    auto).  /dev/shm if its mount says huge=always/within_size/advise,
#    else (root) a tmpfs of their own mounted huge=within_size, unmounted
#    at the end — 2 MiB pages, as a DAX device maps persistent memory,
#    where /dev/shm (huge=never here) maps 4 KiB ones and a process pays
#    a fault per 64 KiB the first time it touches pool memory
#    (docs/results.md, sessions 20, 21) — else /dev/shm with 4 KiB pages.
#    HUGEPOOL=0: /dev/shm, 4 KiB pages; HUGEPOOL=1: huge pages or fail.
#    Which one was used goes to stderr, with what the ranks' pools really
#    got (rcpio-stats pool_huge_kb), and column impl says rcpio-huge for
#    2 MiB pages.  (hugetlbfs is reported, not used: the pool's libpmem2
#    mapping and its byte-sized file are not hugetlbfs's.)
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
MODE=${MODE:-all}
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
# The ranks' stderr (rcpio-stats lines: the pools' pages) goes to a file,
# shown at the end without the stats lines.
rc() { mpi -x LD_PRELOAD="$lib" -x RCPIO_PREFIX="$dir/c" -x RCPIO_POOL_DIR="$pooldir" \
	-x RCPIO_BLOCK=1m -x RCPIO_POOL_SIZE="$pool" -x RCPIO_TRANSPORT="$transport" \
	-x RCPIO_STATS=1 "$@" 2>>"$dir/stderr"; }
rcwb() { rc -x RCPIO_WRITEBACK_MS=20 "$@"; }
# A new job's lines: its open is P, its read R.
label() { sed "s/^/$fs,$1,/"; }
newjob() { sed "s/^/$fs,$1,/; s/,r,/,R,/; s/,O,/,P,/"; }
# Pools on /dev/shm (DRAM standing in for persistent memory), unless POOLDIR.
pooldir=${POOLDIR:-/dev/shm/rcpio-bench-$$}
rcname=rcpio
hugepool=${HUGEPOOL:-auto}
shmem=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)
htlb=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo 2>/dev/null)
how="/dev/shm, 4 KiB pages"
[ "$hugepool" = 0 ] && how="$how (HUGEPOOL=0)"
if [ "$hugepool" != 0 ] && [ -z "${POOLDIR:-}" ] && [ -z "${CLUSTER:-}" ]; then
	if findmnt -no OPTIONS -T /dev/shm 2>/dev/null | grep -qE 'huge=(always|within_size|advise)'; then
		rcname=rcpio-huge how="/dev/shm: $(findmnt -no OPTIONS -T /dev/shm | grep -oE 'huge=[a-z_]*')"
	else
		hp=$(mktemp -d /tmp/rcpio-hugepool.XXXXXX)
		if mount -t tmpfs -o "huge=within_size,size=$((NP * (${pool%m} + 64)))m" rcpio-bench "$hp" 2>/dev/null; then
			trap 'umount "$hp"; rmdir "$hp"' EXIT
			pooldir="$hp/p" rcname=rcpio-huge how="a tmpfs of their own, huge=within_size"
		else
			rmdir "$hp"
			how="/dev/shm, 4 KiB pages: its mount is huge=never and a tmpfs with huge pages cannot be mounted (not root?)"
		fi
	fi
fi
if [ "$hugepool" = 1 ] && [ $rcname != rcpio-huge ]; then
	echo "rcpio_bench.sh: HUGEPOOL=1 but no pool directory with 2 MiB pages: $how" >&2
	exit 1
fi
echo "rcpio_bench.sh: pools on $how (shmem_enabled [$shmem] applies to memfd/SysV, not to a tmpfs mount; hugetlbfs: ${htlb:-no} free 2 MiB pages, not used)" >&2
out="$dir/out.csv"
run_ckpt() {
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
}
run_ior() {
	for pattern in segmented strided; do
		rm -rf "$pooldir" "$dir"/*.dat
		mkdir -p "$pooldir"
		ph="ws${d}r${d}oc${d}r${d}o"
		mpi "$prog" "$dir/p-$pattern.dat" "$pattern" "$xfer" "$per" "$ph" | label mpiio
		mpi "$prog" "$dir/p-$pattern.dat" "$pattern" "$xfer" "$per" ${d}r | newjob mpiio
		rc "$prog" "$dir/c-$pattern.dat" "$pattern" "$xfer" "$per" "$ph" | label $rcname
		rc "$prog" "$dir/c-$pattern.dat" "$pattern" "$xfer" "$per" ${d}r | newjob $rcname
		cmp -s "$dir/p-$pattern.dat" "$dir/c-$pattern.dat" ||
			echo "rcpio_bench.sh: $pattern files differ" >&2
	done
}
echo "fs,impl,pattern,phase,nprocs,xfer,bytes,seconds,MBps" | tee "$out"
case $MODE in
ior) run_ior ;;
ckpt) run_ckpt ;;
*) run_ior && run_ckpt ;;
esac | tee -a "$out"
# What the ranks said besides their counters (errors), then the pages their
# pools really got, then the summary: the issue's closing figures side by
# side (rcpio / MPI-IO bandwidth; the checkpoint's and the restart's
# seconds, MPI-IO first).
touch "$dir/stderr"
grep '^rcpio:' "$dir/stderr" >&2
awk '/^rcpio-stats/ { n++; for (i = 1; i <= NF; i++) if ($i ~ /^pool_huge_kb=/) { split($i, a, "="); if (a[2] > 0) h++ } }
	END { printf "rcpio_bench.sh: %d of %d rcpio rank runs had pool pages mapped 2 MiB at their end (pool_huge_kb > 0)\n", h, n }' \
	"$dir/stderr" >&2
awk -F, 'NR > 1 {
		k = $2 "," $3; ph = $4
		if (ph == "r" || ph == "o") ph = ph (++seen[k "," ph])
		bw[k "," ph] = $9; sec[k "," ph] = $8
		if ($3 != "ckpt" && $2 != "mpiio") impl[$3] = $2
		if ($3 == "ckpt") ck[$2] = 1
	}
	function x(p, i, ph) { return (bw["mpiio," p "," ph] > 0 && (i "," p "," ph) in bw) ? sprintf("%.2fx", bw[i "," p "," ph] / bw["mpiio," p "," ph]) : "-" }
	END {
		print "summary: rcpio / Open MPI MPI-IO, the same files in the same run (bandwidth ratios; seconds)"
		for (p in impl)
			printf "  %s (%s): write %s | own %s | another rank'"'"'s %s | own after reopen %s | another'"'"'s after reopen %s | new job %s\n",
			    p, impl[p], x(p, impl[p], "w"), x(p, impl[p], "r1"), x(p, impl[p], "o1"),
			    x(p, impl[p], "r2"), x(p, impl[p], "o2"), x(p, impl[p], "R")
		if (!("mpiio" in ck)) exit
		line = "  checkpoint, write + sync (s):"
		n = split("mpiio rcpio rcpio-wb", c, " ")
		for (i = 1; i <= n; i++) if ((c[i] ",ckpt,w") in sec)
			line = line sprintf(" %s %.3f |", c[i], sec[c[i] ",ckpt,w"] + sec[c[i] ",ckpt,s"])
		print line
		line = "  restart after a kill, open + read (s):"
		n = split("mpiio rcpio rcpio-wb rcpio-cold", c, " ")
		for (i = 1; i <= n; i++) if ((c[i] ",ckpt,R") in sec)
			line = line sprintf(" %s %.3f |", c[i], sec[c[i] ",ckpt,P"] + sec[c[i] ",ckpt,R"])
		print line
	}' "$out" >&2
rm -rf "$pooldir"
[ -n "${DIR:-}" ] || rm -rf "$dir"
