/*
 * rcpio/wb.c — background write-back (wb.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rcp/error.h>

#include "rcpio/wb.h"

static struct {
	pthread_mutex_t *lock;
	rcpio_pool *pool;
	int (*fd_of)(uint64_t fid);
	pthread_t thr;
	pthread_cond_t cond;
	/* busy: a write of a snapshot is in flight (without the lock) */
	int on, stop, busy, pause;
	long ms;
	unsigned char *buf;
	uint64_t writes, bytes;
} w = {.cond = PTHREAD_COND_INITIALIZER};

void rcpio_wb_quiet(void)
{
	while (w.busy)
		pthread_cond_wait(&w.cond, w.lock);
}

void rcpio_wb_pause(int delta)
{
	w.pause += delta;
}

void rcpio_wb_counts(uint64_t *writes, uint64_t *bytes)
{
	*writes = w.writes;
	*bytes = w.bytes;
}

/* One dirty block at a time, a snapshot of its dirty range taken and the
 * range marked clean under the lock, the write done without it.  A write
 * landing in the slot meanwhile re-dirties it and goes out later; a
 * failed write re-dirties the range. */
static void *wb_main(void *arg)
{
	size_t block = rcpio_pool_block(w.pool);
	(void)arg;
	pthread_mutex_lock(w.lock);
	while (!w.stop) {
		struct timespec ts;
		uint32_t n = rcpio_pool_nslots(w.pool), s, lo = 0, hi = 0;
		uint64_t gen = 0, off = 0;
		int fd = -1;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += w.ms * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&w.cond, w.lock, &ts);
		if (w.stop || w.pause)
			continue;
		for (s = 0; s < n; s++) {
			struct rcpio_slot *sl = rcpio_pool_slot(w.pool, s);
			if (!sl->used || !sl->gen || sl->pins || sl->lo >= sl->hi ||
			    (fd = w.fd_of(sl->fid)) < 0)
				continue;
			lo = sl->lo;
			hi = sl->hi;
			gen = sl->gen;
			off = sl->block * block + lo;
			memcpy(w.buf, rcpio_pool_data(w.pool, s) + lo, hi - lo);
			sl->lo = UINT32_MAX;
			sl->hi = 0;
			break;
		}
		if (s == n)
			continue;
		w.busy = 1;
		pthread_mutex_unlock(w.lock);
		{
			size_t done = 0;
			while (done < hi - lo) {
				ssize_t r =
				    pwrite(fd, w.buf + done, hi - lo - done, (off_t)(off + done));
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					break;
				done += (size_t)r;
			}
			pthread_mutex_lock(w.lock);
			if (done < hi - lo) {
				struct rcpio_slot *sl = rcpio_pool_slot(w.pool, s);
				if (sl->used && sl->gen == gen) {
					sl->lo = lo < sl->lo ? lo : sl->lo;
					sl->hi = hi > sl->hi ? hi : sl->hi;
				}
			} else {
				w.writes++;
				w.bytes += hi - lo;
			}
		}
		w.busy = 0;
		pthread_cond_broadcast(&w.cond);
	}
	pthread_mutex_unlock(w.lock);
	return NULL;
}

int rcpio_wb_start(pthread_mutex_t *lock, rcpio_pool *pool, long ms, int (*fd_of)(uint64_t fid))
{
	w.lock = lock;
	w.pool = pool;
	w.ms = ms;
	w.fd_of = fd_of;
	w.stop = 0;
	if (!(w.buf = malloc(rcpio_pool_block(pool))))
		return RCP_ENOMEM;
	if (pthread_create(&w.thr, NULL, wb_main, NULL)) {
		free(w.buf);
		w.buf = NULL;
		return RCP_ESYS;
	}
	w.on = 1;
	return 0;
}

void rcpio_wb_stop(void)
{
	if (!w.on)
		return;
	pthread_mutex_lock(w.lock);
	w.stop = 1;
	pthread_cond_broadcast(&w.cond);
	pthread_mutex_unlock(w.lock);
	pthread_join(w.thr, NULL);
	w.on = 0;
	free(w.buf);
	w.buf = NULL;
}
