# rcpio/: the MPI-IO block cache (docs/rcpio.md), built when libpmem2 and
# Open MPI are present (configure's summary says why not otherwise).
EXTRA_DIST += rcpio/pool.h rcpio/meta.h rcpio/xfer.h rcpio/cache.h
if HAVE_RCPIO
lib_LTLIBRARIES += librcpio.la
librcpio_la_SOURCES = rcpio/pool.c rcpio/meta.c rcpio/xfer.c rcpio/cache.c rcpio/mpiio.c
librcpio_la_CFLAGS = $(AM_CFLAGS) $(PMEM2_CFLAGS) $(MPI_CFLAGS)
librcpio_la_LIBADD = librcp.la $(PMEM2_LIBS) $(MPI_LIBS)
endif
