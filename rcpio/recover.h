/*
 * rcpio/recover.h — claims at open: recovery after a crash and re-open
 * alike (docs/rcpio.md, "Recovery and re-open").
 *
 * Every rank of the file's communicator calls it (collective: two
 * all-to-alls and a barrier).  Each claims the committed slots of the file
 * from its pool, if the file's identity (device, inode, size, mtime, path)
 * still equals the one committed — otherwise they are dropped, never
 * trusted — and the managers take each claim or refuse it (a block claimed
 * by two pools keeps one copy).  Claims taken become location hints.
 */
#ifndef RCPIO_RECOVER_H
#define RCPIO_RECOVER_H

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

#include "rcpio/hints.h"
#include "rcpio/meta.h"
#include "rcpio/pool.h"

struct rcpio_recover_in {
	MPI_Comm comm;
	int rank, size, fd;
	uint64_t fid;
	const char *path;
	pthread_mutex_t *lock; /* over POOL and META */
	rcpio_pool *pool;
	rcpio_meta *meta;
	struct rcpio_hint *hints; /* RCPIO_NHINTS */
};

/* *FIDX gets the file's entry in the pool's file table (< 0: the table is
 * full); *RECOVERED and *DROPPED grow by the blocks claimed and dropped.
 * Returns 0 or RCP_ENOMEM. */
int rcpio_recover(const struct rcpio_recover_in *in, int *fidx, uint64_t *recovered,
                  uint64_t *dropped);

#endif
