#!/bin/sh
# perf/rcpio_bench.sh — rcpio vs Open MPI's own MPI-IO on the same files,
# 4 ranks (docs/rcpio.md, "Measured").  CSV on stdout:
#   impl,pattern,phase,nprocs,xfer,bytes,seconds,MBps
# phases: w write, s sync (rcpio: write-back + commit), r read own pieces,
# o read another rank's pieces, c close+open, then r/o again (a file
# already cached), and R: a new job reading the file (rcpio: recovered
# from the pools after the previous job ended, as after a crash).
# usage: perf/rcpio_bench.sh [BUILDDIR] [PER_RANK_BYTES] [XFER]
# Env: DIR (backing files, default a fresh dir under /tmp), POOLDIR (the
# pools, default under /dev/shm), NP (4), CLUSTER (the name of a running
# rcp-cluster of at least NP hosts: mpirun on h1 starts rank i on h(i+1)
# through rcp-cluster exec, and rcpio uses udp between the hosts).
set -u
b=$(cd "${1:-.}" && pwd)
per=${2:-67108864}
xfer=${3:-1048576}
NP=${NP:-4}
lib="$b/.libs/librcpio.so"
prog="$b/perf/rcpio_bench"
[ -x "$prog" ] && [ -f "$lib" ] || { echo "rcpio_bench.sh: build perf/rcpio_bench and librcpio first" >&2; exit 1; }
dir=${DIR:-$(mktemp -d /tmp/rcpio-bench.XXXXXX)}
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
	-x RCPIO_BLOCK=1m -x RCPIO_POOL_SIZE="$pool" -x RCPIO_TRANSPORT="$transport" "$prog" "$@"; }
# Pools on /dev/shm (DRAM standing in for persistent memory), unless POOLDIR.
pooldir=${POOLDIR:-/dev/shm/rcpio-bench-$$}
echo "impl,pattern,phase,nprocs,xfer,bytes,seconds,MBps"
for pattern in segmented strided; do
	rm -rf "$pooldir" "$dir"/*.dat
	mkdir -p "$pooldir"
	mpi "$prog" "$dir/p-$pattern.dat" "$pattern" "$xfer" "$per" wsrocro | sed 's/^/mpiio,/'
	mpi "$prog" "$dir/p-$pattern.dat" "$pattern" "$xfer" "$per" r | sed 's/^/mpiio,/; s/,r,/,R,/'
	rc "$dir/c-$pattern.dat" "$pattern" "$xfer" "$per" wsrocro | sed 's/^/rcpio,/'
	rc "$dir/c-$pattern.dat" "$pattern" "$xfer" "$per" r | sed 's/^/rcpio,/; s/,r,/,R,/'
	cmp -s "$dir/p-$pattern.dat" "$dir/c-$pattern.dat" || echo "rcpio_bench.sh: $pattern files differ" >&2
done
rm -rf "$pooldir"
[ -n "${DIR:-}" ] || rm -rf "$dir"
