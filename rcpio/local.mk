# rcpio/: the MPI-IO block cache (docs/rcpio.md), built when libpmem2 and
# Open MPI are present (configure's summary says why not otherwise).
EXTRA_DIST += rcpio/pool.h rcpio/meta.h rcpio/xfer.h rcpio/cache.h rcpio/hints.h rcpio/pmap.h rcpio/wb.h rcpio/recover.h
if HAVE_RCPIO
lib_LTLIBRARIES += librcpio.la
librcpio_la_SOURCES = rcpio/pool.c rcpio/meta.c rcpio/pmap.c rcpio/xfer.c rcpio/wb.c rcpio/recover.c rcpio/cache.c rcpio/mpiio.c
librcpio_la_CFLAGS = $(AM_CFLAGS) $(PMEM2_CFLAGS) $(MPI_CFLAGS)
librcpio_la_LIBADD = librcp.la $(PMEM2_LIBS) $(MPI_LIBS)
# Only the MPI_* entry points: nothing internal leaks into the program.
librcpio_la_LDFLAGS = -export-symbols-regex '^MPI_'
bin_PROGRAMS += rcpio/rcpio-cachectl
rcpio_rcpio_cachectl_SOURCES = rcpio/cachectl.c rcpio/pool.c
rcpio_rcpio_cachectl_CFLAGS = $(AM_CFLAGS) $(PMEM2_CFLAGS)
rcpio_rcpio_cachectl_LDADD = librcp.la $(PMEM2_LIBS)
endif

if HAVE_CMOCKA
# Unit tests of the pool (needs libpmem2) and the manager table: no MPI,
# no network.
if HAVE_RCPIO
check_PROGRAMS += tests/test_rcpio_pool
TESTS += tests/test_rcpio_pool
tests_test_rcpio_pool_SOURCES = tests/test_rcpio_pool.c rcpio/pool.c tests/testutil.h
tests_test_rcpio_pool_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(PMEM2_CFLAGS)
tests_test_rcpio_pool_LDADD = $(CMOCKA_LIBS) $(PMEM2_LIBS)
endif
check_PROGRAMS += tests/test_rcpio_meta
TESTS += tests/test_rcpio_meta
tests_test_rcpio_meta_SOURCES = tests/test_rcpio_meta.c rcpio/meta.c tests/testutil.h
tests_test_rcpio_meta_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_rcpio_meta_LDADD = $(CMOCKA_LIBS)
endif

if HAVE_RCPIO
# An unmodified MPI-IO program, run on 4 ranks with LD_PRELOAD=librcpio.so.
check_PROGRAMS += tests/rcpio_mpi
tests_rcpio_mpi_SOURCES = tests/rcpio_mpi.c
tests_rcpio_mpi_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_rcpio_mpi_LDADD = $(MPI_LIBS)
endif
# Listed even without rcpio: it then prints its SKIP reason.
TESTS += tests/rcpio_mpi.sh
EXTRA_DIST += tests/rcpio_mpi.sh tests/rcpio_gdb.py

if HAVE_RCPIO
# IOR-like benchmark, plain MPI-IO (perf/rcpio_bench.sh runs it both ways).
noinst_PROGRAMS += perf/rcpio_bench
perf_rcpio_bench_SOURCES = perf/rcpio_bench.c
perf_rcpio_bench_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
perf_rcpio_bench_LDADD = $(MPI_LIBS)
endif
EXTRA_DIST += perf/rcpio_bench.sh perf/rcpio_plot.py

# The same program across a 4-host rcp-cluster (root, rcpio; else SKIP).
TESTS += tests/cluster_rcpio.sh
EXTRA_DIST += tests/cluster_rcpio.sh

if HAVE_CMOCKA
if HAVE_RCPIO
# The owner side of rcpio.put with a requester killed mid-transfer (udp).
check_PROGRAMS += tests/test_rcpio_xfer
TESTS += tests/test_rcpio_xfer
tests_test_rcpio_xfer_SOURCES = tests/test_rcpio_xfer.c rcpio/xfer.c rcpio/pmap.c rcpio/pool.c rcpio/meta.c \
	tests/testutil.h
tests_test_rcpio_xfer_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(PMEM2_CFLAGS)
tests_test_rcpio_xfer_LDADD = librcp.la $(CMOCKA_LIBS) $(PMEM2_LIBS)
# A rank's client endpoint while its application stays away from rcpio.
check_PROGRAMS += tests/test_rcpio_idle
TESTS += tests/test_rcpio_idle
tests_test_rcpio_idle_SOURCES = tests/test_rcpio_idle.c tests/rcpio_rt.h rcpio/xfer.c rcpio/pmap.c rcpio/pool.c rcpio/meta.c \
	tests/testutil.h
tests_test_rcpio_idle_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(PMEM2_CFLAGS)
tests_test_rcpio_idle_LDADD = librcp.la $(CMOCKA_LIBS) $(PMEM2_LIBS)
# A pull from an owner whose slot changes while frames are resent (faults).
check_PROGRAMS += tests/test_rcpio_snap
TESTS += tests/test_rcpio_snap
tests_test_rcpio_snap_SOURCES = tests/test_rcpio_snap.c tests/rcpio_rt.h rcpio/xfer.c rcpio/pmap.c rcpio/pool.c rcpio/meta.c \
	tests/testutil.h
tests_test_rcpio_snap_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(PMEM2_CFLAGS)
tests_test_rcpio_snap_LDADD = librcp.la $(CMOCKA_LIBS) $(PMEM2_LIBS)
# Reads from another runtime's pool mapped on this host (shm), counted.
check_PROGRAMS += tests/test_rcpio_map
TESTS += tests/test_rcpio_map
tests_test_rcpio_map_SOURCES = tests/test_rcpio_map.c tests/rcpio_rt.h rcpio/xfer.c rcpio/pmap.c rcpio/pool.c rcpio/meta.c \
	tests/testutil.h
tests_test_rcpio_map_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(PMEM2_CFLAGS)
tests_test_rcpio_map_LDADD = librcp.la $(CMOCKA_LIBS) $(PMEM2_LIBS)
endif
endif
