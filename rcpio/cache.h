/*
 * rcpio/cache.h — the distributed block cache of one MPI job
 * (docs/rcpio.md).  rcpio/mpiio.c maps MPI-IO calls onto it.
 *
 * One runtime per process (pool, manager table, network), started at the
 * first open.  A file handle belongs to one communicator; open, sync,
 * set_size and close are collective over it, like their MPI-IO calls.
 * Byte offsets; the MPI layer resolves views and datatypes.
 */
#ifndef RCPIO_CACHE_H
#define RCPIO_CACHE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rcpio_file rcpio_file;

/* Opens PATH (already opened by MPI with AMODE on COMM).  Returns 0,
 * RCP_ESYS (the file or the pool), or an RCP code from the network. */
int rcpio_cache_open(MPI_Comm comm, const char *path, int amode, rcpio_file **out);
/* Reads up to LEN bytes at OFF (bytes past the end of the file: *GOT
 * says how many were read).  Returns 0 or a negative code. */
int rcpio_cache_read(rcpio_file *f, uint64_t off, void *buf, size_t len, size_t *got);
int rcpio_cache_write(rcpio_file *f, uint64_t off, const void *buf, size_t len);
/* Collective: write-back of dirty blocks, then the commit (docs/rcpio.md).
 * Returns 0 or a negative code (the same on every rank). */
int rcpio_cache_sync(rcpio_file *f);
/* Collective: sync, drop every cached block of the file, then the caller
 * sets the size. */
int rcpio_cache_drop(rcpio_file *f);
/* The size as this rank sees it: the file's, or past it if this rank wrote
 * there and has not synced. */
uint64_t rcpio_cache_size(rcpio_file *f);
/* Collective: sync, then closes.  F is freed. */
int rcpio_cache_close(rcpio_file *f);
/* Stops the runtime (MPI_Finalize); prints the counters if RCPIO_STATS. */
void rcpio_cache_finalize(void);

#endif
