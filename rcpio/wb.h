/*
 * rcpio/wb.h — background write-back of dirty blocks (RCPIO_WRITEBACK_MS;
 * docs/rcpio.md, "Write-back and eviction").
 *
 * A thread wakes every MS ms and writes one dirty block's dirty range
 * back: a snapshot taken and the range marked clean under the cache lock,
 * the write done without it.  Commits and evictions wait for a write in
 * flight (rcpio_wb_quiet) so that an older snapshot never lands after
 * newer bytes, and pause the thread (rcpio_wb_pause).  Functions marked
 * "lock held" are called with the cache lock given at start.
 */
#ifndef RCPIO_WB_H
#define RCPIO_WB_H

#include <pthread.h>
#include <stdint.h>

#include "rcpio/pool.h"

/* Starts the thread.  FD_OF (called with LOCK held) gives the descriptor
 * of the cached file FID, or -1.  Returns 0 or RCP_ENOMEM / RCP_ESYS (no
 * thread: nothing is written in the background). */
int rcpio_wb_start(pthread_mutex_t *lock, rcpio_pool *pool, long ms, int (*fd_of)(uint64_t fid));
/* Lock held: waits until no background write is in flight. */
void rcpio_wb_quiet(void);
/* Lock held: DELTA +1 pauses the thread, -1 ends that pause. */
void rcpio_wb_pause(int delta);
/* Lock held: blocks and bytes written in the background so far. */
void rcpio_wb_counts(uint64_t *writes, uint64_t *bytes);
/* Stops the thread (lock not held).  Nothing if it was not started. */
void rcpio_wb_stop(void);

#endif
