/*
 * rcpio/cache.c — block reads and writes, eviction, commit, recovery
 * (cache.h, docs/rcpio.md).
 *
 * Locking: one mutex (g.lock) over the pool's DRAM state and the manager
 * table; the progress thread (rcpio/xfer.c) takes it in its handlers.  The
 * application thread never holds it across a network wait, except in the
 * commit's two MPI_Allreduce calls — every rank of the file is in the
 * same collective then, so no peer needs our handlers meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rcp/error.h>

#include "rcpio/cache.h"
#include "rcpio/hints.h"
#include "rcpio/meta.h"
#include "rcpio/pool.h"
#include "rcpio/xfer.h"

struct rcpio_file {
	rcpio_file *next;
	MPI_Comm comm;
	int rank, size, fd, fidx;
	uint64_t fid, maxend;
	rcpio_peer **peers;
	char path[RCPIO_PATH_MAX];
};

struct counters {
	uint64_t hits_local, hits_remote, puts_remote, misses, bypass, busy, stale;
	uint64_t evictions, writebacks, writeback_bytes, recovered, dropped_stale, commits,
	    rollbacks, fs_reads, bg_writebacks;
	uint64_t hinted, hints_stale; /* accesses without a query; hints found stale */
	uint64_t hints_ahead;         /* locations learned ahead from query replies */
};

static struct {
	int started, failed, wrank, stats;
	pthread_mutex_t lock;
	rcpio_pool *pool;
	rcpio_meta *meta;
	rcpio_net *net;
	struct rcpio_pool_info pinfo;
	rcpio_file *files;
	uint32_t hand; /* eviction clock */
	size_t block;
	struct counters c;
	struct rcpio_hint hints[RCPIO_NHINTS];
	int fail_commit; /* RCPIO_FAIL_COMMIT: this rank's commits fail (tests) */
	/* Background write-back (RCPIO_WRITEBACK_MS > 0): a thread writes
	 * dirty blocks back while the application computes.  wb_busy: a
	 * write of a snapshot is in flight (without the lock); commits and
	 * evictions wait for it (wb_cond) so that an older snapshot never
	 * lands after newer bytes, and pause the thread (wb_pause). */
	pthread_t wb;
	pthread_cond_t wb_cond;
	int wb_on, wb_stop, wb_busy, wb_pause;
	long wb_ms;
	unsigned char *wb_buf;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .wb_cond = PTHREAD_COND_INITIALIZER};

static int64_t env_size(const char *name, int64_t def)
{
	const char *v = getenv(name);
	char *end;
	long long x;
	if (!v || !*v)
		return def;
	x = strtoll(v, &end, 0);
	if (*end == 'k' || *end == 'K')
		x <<= 10;
	else if (*end == 'm' || *end == 'M')
		x <<= 20;
	else if (*end == 'g' || *end == 'G')
		x <<= 30;
	return x > 0 ? x : def;
}

static rcpio_file *file_of(uint64_t fid);

/* Waits (lock held) until no background write is in flight. */
static void wb_quiet(void)
{
	while (g.wb_busy)
		pthread_cond_wait(&g.wb_cond, &g.lock);
}

/* The background writer: one dirty block at a time, a snapshot of its
 * dirty range taken and the range marked clean under the lock, the write
 * done without it.  A write landing in the slot meanwhile re-dirties it
 * and goes out later; a failed write re-dirties the range. */
static void *wb_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.lock);
	while (!g.wb_stop) {
		struct timespec ts;
		uint32_t n = rcpio_pool_nslots(g.pool), s, lo = 0, hi = 0;
		uint64_t gen = 0, off = 0;
		int fd = -1;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += g.wb_ms * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&g.wb_cond, &g.lock, &ts);
		if (g.wb_stop || g.wb_pause)
			continue;
		for (s = 0; s < n; s++) {
			struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
			rcpio_file *f;
			if (!sl->used || !sl->gen || sl->pins || sl->lo >= sl->hi ||
			    !(f = file_of(sl->fid)))
				continue;
			lo = sl->lo;
			hi = sl->hi;
			gen = sl->gen;
			fd = f->fd;
			off = sl->block * g.block + lo;
			memcpy(g.wb_buf, rcpio_pool_data(g.pool, s) + lo, hi - lo);
			sl->lo = UINT32_MAX;
			sl->hi = 0;
			break;
		}
		if (s == n)
			continue;
		g.wb_busy = 1;
		pthread_mutex_unlock(&g.lock);
		{
			size_t done = 0;
			while (done < hi - lo) {
				ssize_t w = pwrite(fd, g.wb_buf + done, hi - lo - done,
				                   (off_t)(off + done));
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					break;
				done += (size_t)w;
			}
			pthread_mutex_lock(&g.lock);
			if (done < hi - lo) {
				struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
				if (sl->used && sl->gen == gen) {
					sl->lo = lo < sl->lo ? lo : sl->lo;
					sl->hi = hi > sl->hi ? hi : sl->hi;
				}
			} else {
				g.c.bg_writebacks++;
				g.c.writeback_bytes += hi - lo;
			}
		}
		g.wb_busy = 0;
		pthread_cond_broadcast(&g.wb_cond);
	}
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

/* Reads the RCPIO_* variables (once) and starts pool, table, network. */
static int start(void)
{
	struct rcpio_pool_cfg cfg;
	char path[PATH_MAX];
	const char *dir = getenv("RCPIO_POOL_DIR");
	const char *fc = getenv("RCPIO_FAIL_COMMIT");
	int64_t psize;
	int rc;

	if (g.started)
		return g.failed;
	g.started = 1;
	PMPI_Comm_rank(MPI_COMM_WORLD, &g.wrank);
	g.stats =
	    getenv("RCPIO_STATS") && *getenv("RCPIO_STATS") && strcmp(getenv("RCPIO_STATS"), "0");
	g.fail_commit = fc && atoi(fc) == g.wrank + 1;
	g.block = (size_t)env_size("RCPIO_BLOCK", 1 << 20);
	g.block = (g.block + 4095) / 4096 * 4096;
	psize = env_size("RCPIO_POOL_SIZE", 256 << 20);
	cfg.block = g.block;
	cfg.nslots = (uint32_t)(psize / (int64_t)g.block);
	if (cfg.nslots < 4)
		cfg.nslots = 4;
	snprintf(path, sizeof path, "%s/rcpio-%d.pool", dir && *dir ? dir : "/dev/shm", g.wrank);
	if ((rc = rcpio_pool_open(path, &cfg, &g.pool, &g.pinfo)) ||
	    (rc = rcpio_meta_create(&g.meta)) ||
	    (rc = rcpio_net_start(getenv("RCPIO_TRANSPORT"), &g.lock, g.meta, g.pool, &g.net))) {
		fprintf(stderr, "rcpio: rank %d: cannot start (%s): %s\n", g.wrank, path,
		        rcp_strerror(rc));
		g.failed = rc;
		return rc;
	}
	g.wb_ms = (long)env_size("RCPIO_WRITEBACK_MS", 0);
	if (g.wb_ms > 0 && (g.wb_buf = malloc(g.block)) &&
	    !pthread_create(&g.wb, NULL, wb_main, NULL))
		g.wb_on = 1;
	return g.failed;
}

static rcpio_file *file_of(uint64_t fid)
{
	for (rcpio_file *f = g.files; f; f = f->next)
		if (f->fid == fid)
			return f;
	return NULL;
}

/* Reads block B of F into DST (a whole block; zeros past the end). */
static int fill(rcpio_file *f, uint64_t b, unsigned char *dst)
{
	size_t got = 0;
	g.c.fs_reads++;
	while (got < g.block) {
		ssize_t r = pread(f->fd, dst + got, g.block - got, (off_t)(b * g.block + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return RCP_ESYS;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	memset(dst + got, 0, g.block - got);
	return 0;
}

static int pwrite_all(int fd, const unsigned char *src, size_t len, uint64_t off)
{
	while (len) {
		ssize_t w = pwrite(fd, src, len, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return RCP_ESYS;
		src += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Writes back the dirty range of slot S (lock held). */
static int writeback(uint32_t s)
{
	struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
	rcpio_file *f = file_of(sl->fid);
	int rc;
	if (sl->lo >= sl->hi)
		return 0;
	if (!f)
		return RCP_ENOENT;
	rc = pwrite_all(f->fd, rcpio_pool_data(g.pool, s) + sl->lo, sl->hi - sl->lo,
	                sl->block * g.block + sl->lo);
	if (rc)
		return rc;
	g.c.writebacks++;
	g.c.writeback_bytes += sl->hi - sl->lo;
	sl->lo = UINT32_MAX;
	sl->hi = 0;
	return 0;
}

static void uncommit(uint32_t s)
{
	if (rcpio_pool_slot(g.pool, s)->committed && !rcpio_pool_tx_begin(g.pool)) {
		if (rcpio_pool_tx_slot_clear(g.pool, s))
			rcpio_pool_tx_abort(g.pool);
		else
			rcpio_pool_tx_commit(g.pool);
	}
}

/* Frees one slot: a clean one if there is one (clock order), else a dirty
 * one after writing it back.  Returns 0 or RCP_EAGAIN (all pinned). */
static int evict_one(void)
{
	uint32_t n = rcpio_pool_nslots(g.pool), victim = UINT32_MAX;
	struct rcpio_slot *sl, saved;
	rcpio_file *f;
	int rc = 0;

	pthread_mutex_lock(&g.lock);
	wb_quiet(); /* a snapshot of the victim may be on its way out */
	for (int pass = 0; pass < 2 && victim == UINT32_MAX; pass++)
		for (uint32_t i = 0; i < n; i++) {
			uint32_t s = (g.hand + i) % n;
			sl = rcpio_pool_slot(g.pool, s);
			if (sl->used && !sl->pins && sl->gen && (pass || sl->lo >= sl->hi)) {
				victim = s;
				g.hand = s + 1;
				break;
			}
		}
	if (victim == UINT32_MAX) {
		pthread_mutex_unlock(&g.lock);
		return RCP_EAGAIN;
	}
	sl = rcpio_pool_slot(g.pool, victim);
	/* Refuse puts (gen) and pulls (tag) from now on; peers ask again. */
	saved = *sl;
	sl->gen = 0;
	rcpio_pool_tag_clear(g.pool, victim);
	if (saved.lo < saved.hi) {
		sl->gen = saved.gen;
		rc = writeback(victim);
		sl->gen = 0;
	}
	f = file_of(saved.fid);
	pthread_mutex_unlock(&g.lock);
	if (rc)
		return rc;
	if (f) {
		int mgr = (int)(saved.block % (uint64_t)f->size);
		if (mgr == f->rank) {
			pthread_mutex_lock(&g.lock);
			rcpio_meta_evict(g.meta, saved.fid, saved.block, (uint32_t)f->rank, victim);
			pthread_mutex_unlock(&g.lock);
		} else
			rcpio_net_evict(g.net, f->peers[mgr], saved.fid, saved.block,
			                (uint32_t)f->rank, victim);
	}
	pthread_mutex_lock(&g.lock);
	uncommit(victim);
	rcpio_pool_release(g.pool, victim);
	g.c.evictions++;
	pthread_mutex_unlock(&g.lock);
	return 0;
}

static void hint_set(uint64_t fid, uint64_t b, uint32_t owner, uint32_t slot, uint64_t gen)
{
	*rcpio_hint_of(g.hints, fid, b) = (struct rcpio_hint){fid, b, gen, owner, slot};
}

/* Asks B's manager.  A remote manager also says where the next blocks it
 * manages are cached (RCPIO_AHEAD_MAX of them): they become hints, so a
 * reader going through a cached file makes one query per manager and
 * RCPIO_AHEAD_MAX blocks. */
static int query(rcpio_file *f, uint64_t b, int64_t offer, uint64_t gen, struct rcpio_meta_reply *r)
{
	int mgr = (int)(b % (uint64_t)f->size), rc;
	if (mgr != f->rank) {
		struct rcpio_loc next[RCPIO_AHEAD_MAX];
		rc = rcpio_net_query_ahead(g.net, f->peers[mgr], f->fid, b, (uint32_t)f->rank,
		                           offer, gen, r, (uint32_t)f->size, RCPIO_AHEAD_MAX, next);
		for (uint32_t i = 0; !rc && i < RCPIO_AHEAD_MAX; i++)
			if (next[i].gen && next[i].owner < (uint32_t)f->size &&
			    next[i].slot < rcpio_pool_nslots(g.pool)) {
				hint_set(f->fid, b + (uint64_t)(i + 1) * (uint64_t)f->size,
				         next[i].owner, next[i].slot, next[i].gen);
				g.c.hints_ahead++;
			}
		return rc;
	}
	pthread_mutex_lock(&g.lock);
	rc = rcpio_meta_query(g.meta, f->fid, b, (uint32_t)f->rank, offer, gen, r);
	pthread_mutex_unlock(&g.lock);
	return rc;
}

static int ready(rcpio_file *f, uint64_t b, uint32_t slot)
{
	int mgr = (int)(b % (uint64_t)f->size), rc;
	if (mgr != f->rank)
		return rcpio_net_ready(g.net, f->peers[mgr], f->fid, b, (uint32_t)f->rank, slot);
	pthread_mutex_lock(&g.lock);
	rc = rcpio_meta_ready(g.meta, f->fid, b, (uint32_t)f->rank, slot);
	pthread_mutex_unlock(&g.lock);
	return rc;
}

/* Local copy in or out of our own slot, if it still holds the block. */
static int local_io(uint32_t s, uint64_t fid, uint64_t b, uint64_t gen, uint32_t off, size_t len,
                    void *buf, int write)
{
	struct rcpio_slot *sl;
	pthread_mutex_lock(&g.lock);
	sl = rcpio_pool_slot(g.pool, s);
	if (!sl || !sl->used || sl->fid != fid || sl->block != b || sl->gen != gen) {
		pthread_mutex_unlock(&g.lock);
		return RCP_ENOENT;
	}
	if (write) {
		uncommit(s);
		memcpy(rcpio_pool_data(g.pool, s) + off, buf, len);
		if (off < sl->lo)
			sl->lo = off;
		if (off + len > sl->hi)
			sl->hi = off + (uint32_t)len;
	} else
		memcpy(buf, rcpio_pool_data(g.pool, s) + off, len);
	pthread_mutex_unlock(&g.lock);
	return 0;
}

/* A block access where the hint says, without asking the manager: 0 done,
 * RCP_ENOENT (no hint, or a stale one: ask), or an error of the owner. */
static int hinted_io(rcpio_file *f, uint64_t b, uint32_t off, size_t len, void *buf, int write)
{
	struct rcpio_hint *h = rcpio_hint_of(g.hints, f->fid, b);
	int rc;
	if (h->fid != f->fid || h->block != b || h->owner >= (uint32_t)f->size)
		return RCP_ENOENT;
	if ((int)h->owner == f->rank)
		rc = local_io(h->slot, f->fid, b, h->gen, off, len, buf, write);
	else if (write)
		rc = rcpio_net_put(g.net, f->peers[h->owner], f->fid, b, h->slot, h->gen, off, buf,
		                   len);
	else
		rc = rcpio_net_pull(g.net, f->peers[h->owner], f->fid, b, h->slot, h->gen, off, buf,
		                    len);
	if (rc && (int)h->owner != f->rank) {
		/* Stale (RCP_ENOENT), or the guessed owner failed us: the
		 * manager decides (a dead owner's error comes back from the
		 * query's path, not from a guess). */
		h->fid = 0;
		g.c.hints_stale++;
		return RCP_ENOENT;
	}
	if (rc == RCP_ENOENT) {
		h->fid = 0;
		g.c.hints_stale++;
		return rc;
	}
	if (!rc) {
		g.c.hinted++;
		if ((int)h->owner == f->rank)
			g.c.hits_local++;
		else if (write)
			g.c.puts_remote++;
		else
			g.c.hits_remote++;
	}
	return rc;
}

/* One block-sized piece of a read or write: the protocol of
 * docs/rcpio.md, "a block access". */
static int block_io(rcpio_file *f, uint64_t b, uint32_t off, size_t len, void *buf, int write)
{
	int hrc = hinted_io(f, b, off, len, buf, write);
	if (hrc != RCP_ENOENT)
		return hrc;
	for (;;) {
		struct rcpio_meta_reply r;
		int64_t offer;
		uint64_t gen = 0;
		int rc;

		/* Pre-update: offer a free slot with the query (none: no eviction
		 * yet — most queries hit). */
		pthread_mutex_lock(&g.lock);
		offer = rcpio_pool_alloc(g.pool);
		if (offer >= 0) {
			struct rcpio_slot *sl = rcpio_pool_slot(g.pool, (uint32_t)offer);
			gen = rcpio_pool_next_gen(g.pool);
			sl->fid = f->fid;
			sl->block = b;
		}
		pthread_mutex_unlock(&g.lock);
		if (offer < 0)
			offer = -1;
		rc = query(f, b, offer, gen, &r);
		if ((rc || r.kind != RCPIO_MISS) && offer >= 0) {
			pthread_mutex_lock(&g.lock);
			rcpio_pool_release(g.pool, (uint32_t)offer);
			pthread_mutex_unlock(&g.lock);
		}
		if (rc)
			return rc;
		switch (r.kind) {
		case RCPIO_HIT:
			if ((int)r.owner == f->rank) {
				rc = local_io(r.slot, f->fid, b, r.gen, off, len, buf, write);
				if (!rc)
					g.c.hits_local++;
			} else if (r.owner >= (uint32_t)f->size) {
				return RCP_EPROTO;
			} else if (write) {
				rc = rcpio_net_put(g.net, f->peers[r.owner], f->fid, b, r.slot,
				                   r.gen, off, buf, len);
				if (!rc)
					g.c.puts_remote++;
			} else {
				rc = rcpio_net_pull(g.net, f->peers[r.owner], f->fid, b, r.slot,
				                    r.gen, off, buf, len);
				if (!rc)
					g.c.hits_remote++;
			}
			if (rc == RCP_ENOENT) {
				g.c.stale++;
				continue;
			}
			if (!rc)
				hint_set(f->fid, b, r.owner, r.slot, r.gen);
			return rc;
		case RCPIO_BUSY:
			g.c.busy++;
			rcpio_net_poll(g.net);
			sched_yield();
			continue;
		case RCPIO_NONE:
			if (evict_one() == 0)
				continue;
			/* Every slot pinned: go to the file system. */
			g.c.bypass++;
			if (write)
				return pwrite_all(f->fd, buf, len, b * g.block + off);
			{
				ssize_t n = pread(f->fd, buf, len, (off_t)(b * g.block + off));
				if (n < 0)
					return RCP_ESYS;
				memset((char *)buf + n, 0, len - (size_t)n);
			}
			return 0;
		default: { /* MISS: our offered slot caches the block now */
			uint32_t s = (uint32_t)offer;
			unsigned char *d = rcpio_pool_data(g.pool, s);
			struct rcpio_slot *sl;
			g.c.misses++;
			if (!write || off || len != g.block)
				rc = fill(f, b, d);
			pthread_mutex_lock(&g.lock);
			sl = rcpio_pool_slot(g.pool, s);
			sl->gen = gen;
			if (!rc && write) {
				memcpy(d + off, buf, len);
				sl->lo = off;
				sl->hi = off + (uint32_t)len;
			} else if (!rc)
				memcpy(buf, d + off, len);
			if (!rc)
				rcpio_pool_tag_set(g.pool, s, f->fid, b, gen);
			pthread_mutex_unlock(&g.lock);
			if (rc) {
				/* Give the block up again so others do not wait on it. */
				int mgr = (int)(b % (uint64_t)f->size);
				if (mgr == f->rank) {
					pthread_mutex_lock(&g.lock);
					rcpio_meta_evict(g.meta, f->fid, b, (uint32_t)f->rank, s);
					pthread_mutex_unlock(&g.lock);
				} else
					rcpio_net_evict(g.net, f->peers[mgr], f->fid, b,
					                (uint32_t)f->rank, s);
				pthread_mutex_lock(&g.lock);
				rcpio_pool_release(g.pool, s);
				pthread_mutex_unlock(&g.lock);
				return rc;
			}
			hint_set(f->fid, b, (uint32_t)f->rank, s, gen);
			return ready(f, b, s);
		}
		}
	}
}

static int span_io(rcpio_file *f, uint64_t off, unsigned char *buf, size_t len, int write)
{
	while (len) {
		uint64_t b = off / g.block;
		uint32_t in = (uint32_t)(off % g.block);
		size_t n = g.block - in < len ? g.block - in : len;
		int rc = block_io(f, b, in, n, buf, write);
		if (rc)
			return rc;
		off += n;
		buf += n;
		len -= n;
	}
	return 0;
}

uint64_t rcpio_cache_size(rcpio_file *f)
{
	struct stat st;
	uint64_t sz = fstat(f->fd, &st) ? 0 : (uint64_t)st.st_size;
	return sz > f->maxend ? sz : f->maxend;
}

int rcpio_cache_read(rcpio_file *f, uint64_t off, void *buf, size_t len, size_t *got)
{
	uint64_t size = rcpio_cache_size(f);
	*got = 0;
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	*got = len;
	return span_io(f, off, buf, len, 0);
}

int rcpio_cache_write(rcpio_file *f, uint64_t off, const void *buf, size_t len)
{
	int rc = span_io(f, off, (unsigned char *)(uintptr_t)buf, len, 1);
	if (!rc && off + len > f->maxend)
		f->maxend = off + len;
	return rc;
}

static int all_ok(rcpio_file *f, int rc)
{
	int mine = rc ? 1 : 0, any = 0;
	if (PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, f->comm) != MPI_SUCCESS)
		return RCP_EPEER;
	return any ? (rc ? rc : RCP_EPEER) : 0;
}

/* The commit of docs/rcpio.md: write-back, then every rank logs and
 * applies its new committed entries; if any rank failed, all undo. */
int rcpio_cache_sync(rcpio_file *f)
{
	uint32_t n = rcpio_pool_nslots(g.pool);
	struct rcpio_fident id;
	struct stat st;
	int rc = rcpio_net_drain(g.net), rc2 = 0;

	/* Every rank's puts into our slots are served before we write back:
	 * a put is synchronous, so once every rank is here none is in flight.
	 * Without this, a rank still in a put to us when we write back would
	 * see its sync return with its bytes dirty here, neither in the file
	 * nor committed (found by the write_at_all crash test). */
	PMPI_Barrier(f->comm);
	pthread_mutex_lock(&g.lock);
	g.wb_pause++;
	wb_quiet();
	for (uint32_t s = 0; s < n && !rc; s++) {
		struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
		if (sl->used && sl->fid == f->fid && sl->gen)
			rc = writeback(s);
	}
	pthread_mutex_unlock(&g.lock);
	if (!rc && fsync(f->fd) && errno != EINVAL)
		rc = RCP_ESYS;
	if ((rc = all_ok(f, rc))) {
		pthread_mutex_lock(&g.lock);
		g.wb_pause--;
		pthread_mutex_unlock(&g.lock);
		return rc;
	}
	/* Every write-back is done: the file's identity is now final. */
	memset(&id, 0, sizeof id);
	if (fstat(f->fd, &st))
		rc2 = RCP_ESYS;
	id.fid = f->fid;
	id.dev = (uint64_t)st.st_dev;
	id.ino = (uint64_t)st.st_ino;
	id.size = (uint64_t)st.st_size;
	id.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	snprintf(id.path, sizeof id.path, "%s", f->path);
	pthread_mutex_lock(&g.lock);
	if (f->fidx < 0)
		rc2 = RCP_EAGAIN; /* file table full: nothing to commit into */
	if (!rc2 && !(rc2 = rcpio_pool_tx_begin(g.pool))) {
		rc2 = rcpio_pool_tx_file(g.pool, (uint32_t)f->fidx, &id);
		for (uint32_t s = 0; s < n && !rc2; s++) {
			struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
			if (sl->used && sl->fid == f->fid && sl->gen && !sl->committed &&
			    !sl->pins && sl->lo >= sl->hi) {
				/* The bytes and tag first: a committed entry is only
				 * ever over persistent data. */
				rcpio_pool_persist(g.pool, rcpio_pool_data(g.pool, s),
				                   rcpio_pool_stride(g.pool));
				rc2 = rcpio_pool_tx_slot(g.pool, s, sl->fid, sl->block, sl->gen);
			}
		}
		if (g.fail_commit)
			rc2 = RCP_ESYS;
		if (all_ok(f, rc2)) {
			rcpio_pool_tx_abort(g.pool);
			g.c.rollbacks++;
			rc2 = rc2 ? rc2 : RCP_EPEER;
		} else {
			rcpio_pool_tx_commit(g.pool);
			g.c.commits++;
		}
	} else
		all_ok(f, rc2 ? rc2 : RCP_EBUSY);
	g.wb_pause--;
	pthread_mutex_unlock(&g.lock);
	return rc2;
}

/* Claims committed blocks of F from our pool (identity permitting) and
 * tells their managers: recovery after a crash and re-open alike. */
static int claim(rcpio_file *f)
{
	uint32_t n = rcpio_pool_nslots(g.pool);
	int *scount = calloc((size_t)f->size, sizeof(int)),
	    *rcount = calloc((size_t)f->size, sizeof(int));
	int *sdisp = calloc((size_t)f->size, sizeof(int)),
	    *rdisp = calloc((size_t)f->size, sizeof(int));
	uint64_t *sbuf = NULL, *rbuf = NULL;
	struct rcpio_fident id;
	struct stat st;
	int ok = 0, rc = RCP_ENOMEM, total = 0, rtotal = 0;

	if (!scount || !rcount || !sdisp || !rdisp)
		goto out;
	pthread_mutex_lock(&g.lock);
	f->fidx = rcpio_pool_file_find(g.pool, f->fid);
	if (f->fidx >= 0 && !fstat(f->fd, &st) &&
	    !rcpio_pool_file_get(g.pool, (uint32_t)f->fidx, &id))
		ok = id.dev == (uint64_t)st.st_dev && id.ino == (uint64_t)st.st_ino &&
		     id.size == (uint64_t)st.st_size &&
		     id.mtime_ns == (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec &&
		     !strncmp(id.path, f->path, sizeof id.path);
	if (f->fidx < 0)
		f->fidx = rcpio_pool_file_free(g.pool);
	for (uint32_t s = 0; s < n; s++) {
		struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
		if (!sl->used || sl->fid != f->fid)
			continue;
		if (ok && sl->committed && sl->lo >= sl->hi &&
		    rcpio_tag_ok(rcpio_pool_data(g.pool, s) + g.block, sl->fid, sl->block,
		                 sl->gen)) {
			scount[sl->block % (uint64_t)f->size]++;
			total++;
			continue;
		}
		/* Not provably the file's bytes: never trusted. */
		g.c.dropped_stale++;
		rcpio_pool_tag_clear(g.pool, s);
		uncommit(s);
		rcpio_pool_release(g.pool, s);
	}
	pthread_mutex_unlock(&g.lock);
	if (!(sbuf = malloc(3 * sizeof(uint64_t) * (size_t)(total + 1))))
		goto out;
	for (int i = 1; i < f->size; i++)
		sdisp[i] = sdisp[i - 1] + 3 * scount[i - 1];
	{
		int *at = calloc((size_t)f->size, sizeof(int));
		if (!at)
			goto out;
		pthread_mutex_lock(&g.lock);
		for (uint32_t s = 0; s < n; s++) {
			struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
			int m;
			if (!sl->used || sl->fid != f->fid)
				continue;
			m = (int)(sl->block % (uint64_t)f->size);
			sbuf[sdisp[m] + at[m]++] = sl->block;
			sbuf[sdisp[m] + at[m]++] = s;
			sbuf[sdisp[m] + at[m]++] = sl->gen;
		}
		pthread_mutex_unlock(&g.lock);
		free(at);
	}
	for (int i = 0; i < f->size; i++)
		scount[i] *= 3;
	PMPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, f->comm);
	for (int i = 0; i < f->size; i++) {
		rdisp[i] = rtotal;
		rtotal += rcount[i];
	}
	if (!(rbuf = malloc(sizeof(uint64_t) * (size_t)(rtotal + 1))))
		goto out; /* (the collective below is then missed: fatal anyway) */
	PMPI_Alltoallv(sbuf, scount, sdisp, MPI_UINT64_T, rbuf, rcount, rdisp, MPI_UINT64_T,
	               f->comm);
	/* The manager's verdict goes back in place of each claim's block
	 * number: 1 taken, 0 refused (another pool claimed the block first —
	 * possible after a job that did not see this pool; the loser's copy
	 * is dropped, so two committed copies never both live on). */
	pthread_mutex_lock(&g.lock);
	for (int src = 0; src < f->size; src++)
		for (int k = rdisp[src]; k + 2 < rdisp[src] + rcount[src]; k += 3)
			rbuf[k] = !rcpio_meta_insert(g.meta, f->fid, rbuf[k], (uint32_t)src,
			                             (uint32_t)rbuf[k + 1], rbuf[k + 2]);
	pthread_mutex_unlock(&g.lock);
	PMPI_Alltoallv(rbuf, rcount, rdisp, MPI_UINT64_T, sbuf, scount, sdisp, MPI_UINT64_T,
	               f->comm);
	pthread_mutex_lock(&g.lock);
	for (int m = 0; m < f->size; m++)
		for (int k = sdisp[m]; k + 2 < sdisp[m] + scount[m]; k += 3) {
			uint32_t s = (uint32_t)sbuf[k + 1];
			if (sbuf[k]) {
				struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
				hint_set(f->fid, sl->block, (uint32_t)f->rank, s, sl->gen);
				continue;
			}
			g.c.dropped_stale++;
			total--;
			rcpio_pool_tag_clear(g.pool, s);
			uncommit(s);
			rcpio_pool_release(g.pool, s);
		}
	pthread_mutex_unlock(&g.lock);
	/* No query before every manager holds its claims (a zero-length part
	 * of an all-to-all need not wait for anybody). */
	PMPI_Barrier(f->comm);
	g.c.recovered += (uint64_t)total;
	rc = 0;
out:
	free(scount);
	free(rcount);
	free(sdisp);
	free(rdisp);
	free(sbuf);
	free(rbuf);
	return rc;
}

int rcpio_cache_open(MPI_Comm comm, const char *path, int amode, rcpio_file **out)
{
	rcpio_file *f;
	unsigned char *blobs = NULL, mine[RCPIO_BLOB];
	int rc = start(), bad = 0, anybad = 0;

	if (!(f = calloc(1, sizeof *f)))
		return RCP_ENOMEM;
	f->fd = -1;
	f->fidx = -1;
	PMPI_Comm_dup(comm, &f->comm);
	PMPI_Comm_rank(f->comm, &f->rank);
	PMPI_Comm_size(f->comm, &f->size);
	snprintf(f->path, sizeof f->path, "%s", path);
	f->fid = rcpio_fid(f->path);
	f->peers = calloc((size_t)f->size, sizeof *f->peers);
	blobs = malloc((size_t)f->size * RCPIO_BLOB);
	memset(mine, 0, sizeof mine);
	if (rc || !f->peers || !blobs || rcpio_net_blob(g.net, mine))
		bad = 1;
	if (!bad) {
		f->fd = open(path, (amode & MPI_MODE_RDONLY) ? O_RDONLY : O_RDWR);
		if (f->fd < 0)
			bad = 1;
	}
	PMPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, f->comm);
	if (anybad) {
		rc = rc ? rc : RCP_ESYS;
		goto fail;
	}
	PMPI_Allgather(mine, RCPIO_BLOB, MPI_BYTE, blobs, RCPIO_BLOB, MPI_BYTE, f->comm);
	for (int i = 0; i < f->size; i++)
		if (i != f->rank &&
		    rcpio_net_peer(g.net, blobs + (size_t)i * RCPIO_BLOB, &f->peers[i]))
			bad = 1;
	if (!bad && rcpio_net_members(g.net, f->fid, (uint32_t)f->rank, (uint32_t)f->size, blobs))
		bad = 1;
	PMPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, f->comm);
	if (anybad) {
		rcpio_net_members_drop(g.net, f->fid);
		rc = RCP_EPEER;
		goto fail;
	}
	pthread_mutex_lock(&g.lock);
	f->next = g.files;
	g.files = f;
	pthread_mutex_unlock(&g.lock);
	if ((rc = claim(f))) {
		pthread_mutex_lock(&g.lock);
		g.files = f->next;
		pthread_mutex_unlock(&g.lock);
		rcpio_net_members_drop(g.net, f->fid);
		goto fail;
	}
	free(blobs);
	*out = f;
	return 0;
fail:
	free(blobs);
	for (int i = 0; f->peers && i < f->size; i++)
		rcpio_net_peer_free(f->peers[i]);
	free(f->peers);
	if (f->fd >= 0)
		close(f->fd);
	PMPI_Comm_free(&f->comm);
	free(f);
	return rc;
}

int rcpio_cache_drop(rcpio_file *f)
{
	uint32_t n = rcpio_pool_nslots(g.pool);
	int rc = rcpio_cache_sync(f);
	pthread_mutex_lock(&g.lock);
	for (uint32_t s = 0; s < n; s++) {
		struct rcpio_slot *sl = rcpio_pool_slot(g.pool, s);
		if (sl->used && sl->fid == f->fid && sl->gen) {
			rcpio_pool_tag_clear(g.pool, s);
			uncommit(s);
			rcpio_pool_release(g.pool, s);
		}
	}
	rcpio_meta_drop_file(g.meta, f->fid);
	pthread_mutex_unlock(&g.lock);
	rcpio_hints_drop(g.hints, f->fid);
	PMPI_Barrier(f->comm);
	f->maxend = 0;
	return rc;
}

int rcpio_cache_close(rcpio_file *f)
{
	int rc = rcpio_cache_sync(f);
	pthread_mutex_lock(&g.lock);
	rcpio_meta_drop_file(g.meta, f->fid);
	pthread_mutex_unlock(&g.lock);
	/* Nobody asks about this file once every rank is here. */
	PMPI_Barrier(f->comm);
	pthread_mutex_lock(&g.lock);
	wb_quiet(); /* the background writer may hold our fd */
	for (rcpio_file **p = &g.files; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	pthread_mutex_unlock(&g.lock);
	rcpio_net_members_drop(g.net, f->fid);
	rcpio_hints_drop(g.hints, f->fid);
	for (int i = 0; i < f->size; i++)
		rcpio_net_peer_free(f->peers[i]);
	free(f->peers);
	close(f->fd);
	PMPI_Comm_free(&f->comm);
	free(f);
	return rc;
}

void rcpio_cache_finalize(void)
{
	if (!g.started || g.failed)
		return;
	if (g.stats) {
		struct rcpio_net_stats ns;
		struct rcpio_meta_stats ms;
		rcpio_net_get_stats(g.net, &ns);
		rcpio_meta_get_stats(g.meta, &ms);
		fprintf(stderr,
		        "rcpio-stats rank=%d hits_local=%" PRIu64 " hits_remote=%" PRIu64
		        " pull_bytes=%" PRIu64 " puts_remote=%" PRIu64 " put_bytes=%" PRIu64
		        " misses=%" PRIu64 " fs_reads=%" PRIu64 " bypass=%" PRIu64 " busy=%" PRIu64
		        " stale=%" PRIu64 " evictions=%" PRIu64 " writebacks=%" PRIu64
		        " writeback_bytes=%" PRIu64 " recovered=%" PRIu64 " dropped_stale=%" PRIu64
		        " commits=%" PRIu64 " rollbacks=%" PRIu64 " bg_writebacks=%" PRIu64
		        " queries_served=%" PRIu64 " puts_served=%" PRIu64 " puts_failed=%" PRIu64
		        " held_bytes=%" PRIu64 " probes=%" PRIu64 " fillers_lost=%" PRIu64
		        " hinted=%" PRIu64 " hints_stale=%" PRIu64 " hints_ahead=%" PRIu64
		        " queries=%" PRIu64 " pulls_mapped=%" PRIu64 " pools_mapped=%" PRIu64
		        " pool_committed=%u pool_refused=%d pool_rolled_back=%d\n",
		        g.wrank, g.c.hits_local, g.c.hits_remote, ns.pull_bytes, g.c.puts_remote,
		        ns.put_bytes, g.c.misses, g.c.fs_reads, g.c.bypass, g.c.busy, g.c.stale,
		        g.c.evictions, g.c.writebacks, g.c.writeback_bytes, g.c.recovered,
		        g.c.dropped_stale, g.c.commits, g.c.rollbacks, g.c.bg_writebacks,
		        ns.queries_served, ns.puts_served, ns.puts_failed, ns.held_bytes, ns.probes,
		        ns.fillers_lost, g.c.hinted, g.c.hints_stale, g.c.hints_ahead,
		        ns.queries_sent, ns.pulls_mapped, ns.pools_mapped, g.pinfo.committed,
		        g.pinfo.refused, g.pinfo.rolled_back);
	}
	if (g.wb_on) {
		pthread_mutex_lock(&g.lock);
		g.wb_stop = 1;
		pthread_cond_broadcast(&g.wb_cond);
		pthread_mutex_unlock(&g.lock);
		pthread_join(g.wb, NULL);
		g.wb_on = 0;
	}
	free(g.wb_buf);
	g.wb_buf = NULL;
	rcpio_net_stop(g.net);
	rcpio_meta_destroy(g.meta);
	rcpio_pool_close(g.pool);
	g.net = NULL;
	g.meta = NULL;
	g.pool = NULL;
	g.started = 0;
}
