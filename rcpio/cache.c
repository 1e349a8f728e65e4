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
#include "rcpio/recover.h"
#include "rcpio/wb.h"
#include "rcpio/xfer.h"

struct rcpio_file {
	rcpio_file *next;
	MPI_Comm comm;
	int rank, size, fd, fidx;
	uint64_t fid, maxend;
	rcpio_peer **peers;
	/* Deferred claims (below): blocks written into our slots whose
	 * managers have not been told yet, NPEND[m] of them for manager m. */
	struct rcpio_claim (*pend)[RCPIO_CLAIM_MAX];
	uint32_t *npend;
	char path[RCPIO_PATH_MAX];
};

struct counters {
	uint64_t hits_local, hits_remote, puts_remote, misses, bypass, busy, stale;
	uint64_t evictions, writebacks, writeback_bytes, recovered, dropped_stale, commits,
	    rollbacks, fs_reads, bg_writebacks;
	uint64_t hinted, hints_stale; /* accesses without a query; hints found stale */
	uint64_t hints_ahead;         /* locations learned ahead from query replies */
	uint64_t deferred, refused;   /* deferred claims; refused ones (bytes put) */
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
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

/* The background writer's view of the open files (lock held). */
static int fd_of(uint64_t fid)
{
	rcpio_file *f = file_of(fid);
	return f ? f->fd : -1;
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
	/* Background write-back (RCPIO_WRITEBACK_MS > 0: rcpio/wb.c); a
	 * thread that cannot start leaves it to the commits. */
	if (env_size("RCPIO_WRITEBACK_MS", 0) > 0)
		(void)rcpio_wb_start(&g.lock, g.pool, (long)env_size("RCPIO_WRITEBACK_MS", 0),
		                     fd_of);
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
	rcpio_pool_uncommit(g.pool, s);
}

static int flush_all(void);

/* Frees one slot: a clean one if there is one (clock order), else a dirty
 * one after writing it back.  Returns 0 or RCP_EAGAIN (all pinned). */
static int evict_one(void)
{
	uint32_t n = rcpio_pool_nslots(g.pool), victim = UINT32_MAX;
	struct rcpio_slot *sl, saved;
	rcpio_file *f;
	int rc;

	/* A slot whose claim is still deferred must not be given up
	 * unclaimed: its bytes would reach the file behind the back of
	 * another rank's cached copy of the block. */
	if ((rc = flush_all()))
		return rc;
	pthread_mutex_lock(&g.lock);
	rcpio_wb_quiet(); /* a snapshot of the victim may be on its way out */
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
			rcpio_pool_prefault(g.pool, s);
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

/* ---- deferred claims (session 21) ----------------------------------------
 *
 * A write of a whole block that no hint places (a block this rank has not
 * seen) asked the block's manager first, like any access: a round trip to
 * another rank's progress thread, which on this crowded 2-core machine
 * must first be scheduled (~1 ms a query, docs/results.md session 20) —
 * 48 of a rank's 64 first writes in the segmented benchmark, most of the
 * write's time.  The paper's delayed commit allows better: a write need
 * be seen by other ranks only after sync–barrier–sync (MPI's rule), and a
 * whole block needs nothing from the file system or from another copy.  So
 * such a write goes straight into a free slot of our own (data, then tag,
 * as a miss fills one), with a hint to it, and its manager is told later —
 * RCPIO_CLAIM_MAX claims in one rcpio.claim, at a sync point (every commit
 * flushes first), when a manager's list is full, and before an eviction
 * (a slot whose claim is deferred is never given up unclaimed: its bytes
 * would reach the file behind another rank's cached copy).  A claim is
 * taken (we own the block: VALID) or refused because the block has an
 * entry already — another rank read or wrote it meanwhile and holds a copy,
 * or is filling one: our bytes then go there as any write to a cached
 * block does (query, put) and our slot is given up.  Until the claim is
 * taken another rank's read of the block gets the file's bytes, as MPI
 * allows before a sync; ours finds our slot by its hint.  Partial blocks
 * and blocks this rank manages take the query path (the local table costs
 * no round trip).  Counters deferred and refused. */

/* Tells manager MGR of F its deferred claims; refused ones are written
 * where the manager says. */
static int flush(rcpio_file *f, int mgr)
{
	struct rcpio_claim c[RCPIO_CLAIM_MAX];
	int32_t st[RCPIO_CLAIM_MAX];
	uint32_t k = 0, n = f->npend[mgr];
	unsigned char *tmp = NULL;
	int rc;

	f->npend[mgr] = 0;
	if (!n)
		return 0;
	pthread_mutex_lock(&g.lock);
	for (uint32_t i = 0; i < n; i++) {
		const struct rcpio_claim *p = &f->pend[mgr][i];
		const struct rcpio_slot *sl = rcpio_pool_slot(g.pool, p->slot);
		if (sl && sl->used && sl->fid == f->fid && sl->block == p->block &&
		    sl->gen == p->gen)
			c[k++] = *p;
	}
	pthread_mutex_unlock(&g.lock);
	if (!k)
		return 0;
	if ((rc = rcpio_net_claim(g.net, f->peers[mgr], f->fid, (uint32_t)f->rank, c, k, st)))
		return rc;
	for (uint32_t i = 0; i < k && !rc; i++) {
		struct rcpio_slot *sl;
		struct rcpio_hint *h;
		if (!st[i])
			continue;
		g.c.refused++;
		if (!tmp && !(tmp = malloc(g.block)))
			return RCP_ENOMEM;
		/* Our bytes out of the slot, the slot given up, then an
		 * ordinary write of the whole block. */
		pthread_mutex_lock(&g.lock);
		rcpio_wb_quiet();
		sl = rcpio_pool_slot(g.pool, c[i].slot);
		if (!sl->used || sl->fid != f->fid || sl->block != c[i].block ||
		    sl->gen != c[i].gen) {
			pthread_mutex_unlock(&g.lock);
			continue;
		}
		memcpy(tmp, rcpio_pool_data(g.pool, c[i].slot), g.block);
		sl->gen = 0;
		rcpio_pool_tag_clear(g.pool, c[i].slot);
		uncommit(c[i].slot);
		rcpio_pool_release(g.pool, c[i].slot);
		pthread_mutex_unlock(&g.lock);
		h = rcpio_hint_of(g.hints, f->fid, c[i].block);
		if (h->fid == f->fid && h->block == c[i].block)
			h->fid = 0;
		rc = block_io(f, c[i].block, 0, g.block, tmp, 1);
	}
	free(tmp);
	return rc;
}

static int flush_file(rcpio_file *f)
{
	int rc = 0;
	for (int m = 0; m < f->size && f->npend; m++) {
		int r = flush(f, m);
		rc = rc ? rc : r;
	}
	return rc;
}

static int flush_all(void)
{
	int rc = 0;
	for (rcpio_file *f = g.files; f; f = f->next) {
		int r = flush_file(f);
		rc = rc ? rc : r;
	}
	return rc;
}

/* A whole block B of F written into a slot of ours, its claim deferred:
 * 0, RCP_ENOENT (not for this path: the caller queries), or an error of
 * a flush. */
static int deferred_write(rcpio_file *f, uint64_t b, const void *buf)
{
	int mgr = (int)(b % (uint64_t)f->size), s, rc;
	struct rcpio_slot *sl;
	uint64_t gen;

	if (mgr == f->rank || !f->npend)
		return RCP_ENOENT;
	if (f->npend[mgr] == RCPIO_CLAIM_MAX && (rc = flush(f, mgr)))
		return rc;
	pthread_mutex_lock(&g.lock);
	if ((s = rcpio_pool_alloc(g.pool)) < 0) {
		pthread_mutex_unlock(&g.lock);
		return RCP_ENOENT; /* none free: the query path evicts */
	}
	sl = rcpio_pool_slot(g.pool, (uint32_t)s);
	sl->fid = f->fid;
	sl->block = b;
	gen = rcpio_pool_next_gen(g.pool);
	pthread_mutex_unlock(&g.lock);
	/* Without the lock: gen 0 and a clear tag keep the slot from puts,
	 * pulls, evictions and the background writer until it is set. */
	rcpio_pool_prefault(g.pool, (uint32_t)s);
	memcpy(rcpio_pool_data(g.pool, (uint32_t)s), buf, g.block);
	pthread_mutex_lock(&g.lock);
	sl->gen = gen;
	sl->lo = 0;
	sl->hi = (uint32_t)g.block;
	rcpio_pool_tag_set(g.pool, (uint32_t)s, f->fid, b, gen);
	pthread_mutex_unlock(&g.lock);
	f->pend[mgr][f->npend[mgr]++] = (struct rcpio_claim){b, gen, (uint32_t)s, 0};
	hint_set(f->fid, b, (uint32_t)f->rank, (uint32_t)s, gen);
	g.c.deferred++;
	return 0;
}

static int span_io(rcpio_file *f, uint64_t off, unsigned char *buf, size_t len, int write)
{
	while (len) {
		uint64_t b = off / g.block;
		uint32_t in = (uint32_t)(off % g.block);
		size_t n = g.block - in < len ? g.block - in : len;
		int rc = RCP_ENOENT;
		if (write && !in && n == g.block) {
			/* A block we know goes where we know; else deferred. */
			if ((rc = hinted_io(f, b, 0, n, buf, 1)) == RCP_ENOENT)
				rc = deferred_write(f, b, buf);
		}
		if (rc == RCP_ENOENT)
			rc = block_io(f, b, in, n, buf, write);
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
	int rc = flush_file(f), rc2 = 0, drc = rcpio_net_drain(g.net);

	rc = rc ? rc : drc;

	/* Every rank's puts into our slots are served before we write back:
	 * a put is synchronous, so once every rank is here none is in flight.
	 * Without this, a rank still in a put to us when we write back would
	 * see its sync return with its bytes dirty here, neither in the file
	 * nor committed (found by the write_at_all crash test). */
	PMPI_Barrier(f->comm);
	pthread_mutex_lock(&g.lock);
	rcpio_wb_pause(1);
	rcpio_wb_quiet();
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
		rcpio_wb_pause(-1);
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
	rcpio_wb_pause(-1);
	pthread_mutex_unlock(&g.lock);
	return rc2;
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
	f->pend = calloc((size_t)f->size, sizeof *f->pend);
	f->npend = calloc((size_t)f->size, sizeof *f->npend);
	blobs = malloc((size_t)f->size * RCPIO_BLOB);
	memset(mine, 0, sizeof mine);
	if (rc || !f->peers || !f->pend || !f->npend || !blobs || rcpio_net_blob(g.net, mine))
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
	if ((rc = rcpio_recover(&(struct rcpio_recover_in){f->comm, f->rank, f->size, f->fd, f->fid,
	                                                   f->path, &g.lock, g.pool, g.meta,
	                                                   g.hints},
	                        &f->fidx, &g.c.recovered, &g.c.dropped_stale))) {
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
	free(f->pend);
	free(f->npend);
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
	rcpio_wb_quiet(); /* the background writer may hold our fd */
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
	free(f->pend);
	free(f->npend);
	close(f->fd);
	PMPI_Comm_free(&f->comm);
	free(f);
	return rc;
}

void rcpio_cache_finalize(void)
{
	if (!g.started || g.failed)
		return;
	rcpio_wb_stop();
	{
		uint64_t w, b;
		rcpio_wb_counts(&w, &b);
		g.c.bg_writebacks = w;
		g.c.writeback_bytes += b;
	}
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
		        " deferred=%" PRIu64 " refused=%" PRIu64 " claims_sent=%" PRIu64
		        " pool_huge_kb=%" PRIu64
		        " pool_committed=%u pool_refused=%d pool_rolled_back=%d\n",
		        g.wrank, g.c.hits_local, g.c.hits_remote, ns.pull_bytes, g.c.puts_remote,
		        ns.put_bytes, g.c.misses, g.c.fs_reads, g.c.bypass, g.c.busy, g.c.stale,
		        g.c.evictions, g.c.writebacks, g.c.writeback_bytes, g.c.recovered,
		        g.c.dropped_stale, g.c.commits, g.c.rollbacks, g.c.bg_writebacks,
		        ns.queries_served, ns.puts_served, ns.puts_failed, ns.held_bytes, ns.probes,
		        ns.fillers_lost, g.c.hinted, g.c.hints_stale, g.c.hints_ahead,
		        ns.queries_sent, ns.pulls_mapped, ns.pools_mapped, g.c.deferred,
		        g.c.refused, ns.claims_sent, rcpio_pool_huge_kb(g.pool), g.pinfo.committed,
		        g.pinfo.refused, g.pinfo.rolled_back);
	}
	rcpio_net_stop(g.net);
	rcpio_meta_destroy(g.meta);
	rcpio_pool_close(g.pool);
	g.net = NULL;
	g.meta = NULL;
	g.pool = NULL;
	g.started = 0;
}
