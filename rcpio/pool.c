/*
 * rcpio/pool.c — the persistent pool: layout, undo log, recovery (pool.h).
 *
 * Layout (offsets in the header, all 4 KiB aligned):
 *   header | undo log (RCPIO_LOG_BYTES) | file table (RCPIO_NFILES x 512)
 *   | slot table (nslots x 32) | bitmap (nslots bits) | block area
 *   (nslots x (block + RCPIO_TAG)).
 *
 * Undo log protocol.  To change bytes [off, off+len) of the pool inside a
 * transaction: (1) copy the old bytes into the next log record with its
 * checksum and persist the record, (2) bump the log's record count (one
 * aligned 8-byte store) and persist it, (3) change and persist the bytes.
 * Commit persists nothing new: it stores count = 0 and persists that.  A
 * crash before (2) leaves a record that is not counted: the change had not
 * started.  A crash after (2) leaves a counted record: recovery copies the
 * old bytes back, newest record first (a range logged twice ends with its
 * oldest copy), then truncates.  So every transaction is all or nothing,
 * whatever store was torn.  A counted record whose checksum fails cannot
 * be undone: the pool is refused (re-initialised) — cached data is only a
 * cache, the file system still has every committed byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpmem2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rcp/error.h>

#include "rcpio/pool.h"

#define MAGIC       0x4c4f4f504f495052ull /* "RPIOPOOL" */
#define VERSION     1u
#define ALIGN(x, a) (((x) + (a)-1) / (a) * (a))

struct hdr {
	uint64_t magic, version, block, nslots, nfiles;
	uint64_t off_log, off_files, off_slots, off_bitmap, off_area, total;
	uint64_t boots; /* opens so far: the high half of generations */
	uint64_t sum;
};

struct loghdr {
	uint64_t count, used;
	uint64_t pad[6];
};

struct logrec {
	uint64_t off, len, sum, pad;
};

struct sentry {
	uint64_t fid, block, gen, sum;
};

struct fentry {
	struct rcpio_fident id;
	uint64_t sum;
	unsigned char pad[512 - sizeof(struct rcpio_fident) - 8];
};
_Static_assert(sizeof(struct fentry) == 512, "file entry is 512 bytes");

struct rcpio_pool {
	int fd;
	struct pmem2_map *map;
	pmem2_persist_fn persist;
	unsigned char *base;
	size_t len; /* of the mapping */
	struct hdr *h;
	size_t block, stride;
	uint32_t nslots;
	struct rcpio_slot *slots;
	uint32_t *freeq, nfree; /* stack of free slots */
	uint64_t gen;
	int in_tx;
};

uint64_t rcpio_sum(const void *p, size_t len, uint64_t seed)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h ? h : 1;
}

uint64_t rcpio_fid(const char *path)
{
	return rcpio_sum(path, strlen(path), 0x726370696full);
}

void rcpio_pool_persist(rcpio_pool *p, const void *addr, size_t len)
{
	p->persist(addr, len);
}

static struct loghdr *loghdr(const rcpio_pool *p)
{
	return (struct loghdr *)(p->base + p->h->off_log);
}
static struct sentry *sentry(const rcpio_pool *p, uint32_t slot)
{
	return (struct sentry *)(p->base + p->h->off_slots) + slot;
}
static struct fentry *fentry(const rcpio_pool *p, uint32_t idx)
{
	return (struct fentry *)(p->base + p->h->off_files) + idx;
}
static uint64_t *bitmap(const rcpio_pool *p)
{
	return (uint64_t *)(p->base + p->h->off_bitmap);
}

static uint64_t hdr_sum(const struct hdr *h)
{
	return rcpio_sum(h, offsetof(struct hdr, sum), 0);
}
static uint64_t sentry_sum(const struct sentry *e, uint32_t slot)
{
	return rcpio_sum(e, offsetof(struct sentry, sum), slot + 1);
}
static uint64_t fentry_sum(const struct fentry *e, uint32_t idx)
{
	return rcpio_sum(&e->id, sizeof e->id, idx + 1);
}

static void layout(struct hdr *h, size_t block, uint32_t nslots)
{
	memset(h, 0, sizeof *h);
	h->magic = MAGIC;
	h->version = VERSION;
	h->block = block;
	h->nslots = nslots;
	h->nfiles = RCPIO_NFILES;
	h->off_log = 4096;
	h->off_files = h->off_log + RCPIO_LOG_BYTES;
	h->off_slots = h->off_files + ALIGN(RCPIO_NFILES * sizeof(struct fentry), 4096);
	h->off_bitmap = h->off_slots + ALIGN((uint64_t)nslots * sizeof(struct sentry), 4096);
	h->off_area = h->off_bitmap + ALIGN(((uint64_t)nslots + 63) / 64 * 8, 4096);
	h->total = h->off_area + (uint64_t)nslots * (block + RCPIO_TAG);
}

/* Rolls back a counted log; returns 0 or RCP_EPROTO (a record is bad). */
static int log_recover(rcpio_pool *p, int *rolled)
{
	struct loghdr *lh = loghdr(p);
	unsigned char *log = (unsigned char *)lh + sizeof *lh;
	uint64_t n = lh->count, at = 0, cap = RCPIO_LOG_BYTES - sizeof *lh;
	uint64_t *pos;

	*rolled = 0;
	if (!n)
		return 0;
	if (n > cap / sizeof(struct logrec) || !(pos = malloc(n * sizeof *pos)))
		return RCP_EPROTO;
	/* Check every counted record before touching anything. */
	for (uint64_t i = 0; i < n; i++) {
		struct logrec *r = (struct logrec *)(log + at);
		if (at + sizeof *r > cap || r->len > cap || at + sizeof *r + r->len > cap ||
		    r->off < p->h->off_files || r->off + r->len > p->h->off_area ||
		    r->sum != rcpio_sum(log + at + sizeof *r, r->len, r->off ^ r->len)) {
			free(pos);
			return RCP_EPROTO;
		}
		pos[i] = at;
		at += sizeof *r + ALIGN(r->len, 8);
	}
	while (n--) {
		struct logrec *r = (struct logrec *)(log + pos[n]);
		memcpy(p->base + r->off, (unsigned char *)r + sizeof *r, r->len);
		p->persist(p->base + r->off, r->len);
	}
	free(pos);
	lh->count = 0;
	lh->used = 0;
	p->persist(lh, sizeof *lh);
	*rolled = 1;
	return 0;
}

static void reinit(rcpio_pool *p, size_t block, uint32_t nslots)
{
	struct hdr h;
	layout(&h, block, nslots);
	/* The header's magic goes last: a crash while re-initialising leaves a
	 * pool that is refused again, never a half-cleared one taken as good. */
	memset(p->base, 0, h.off_area);
	p->persist(p->base, h.off_area);
	h.sum = hdr_sum(&h);
	memcpy(p->base, &h, sizeof h);
	p->persist(p->base, sizeof h);
}

static int map_file(rcpio_pool *p, const char *path, uint64_t total)
{
	struct pmem2_config *cfg = NULL;
	struct pmem2_source *src = NULL;
	struct stat st;
	int rc = RCP_ESYS;

	if (fstat(p->fd, &st))
		return RCP_ESYS;
	if ((uint64_t)st.st_size != total) {
		if (ftruncate(p->fd, (off_t)total))
			return RCP_ESYS;
		/* A new pool's memory is taken now, once, not at each first
		 * touch by a job (session 21): a tmpfs page written first in a
		 * job costs a fault that allocates and zeroes it — and on this
		 * VM a 2 MiB page freed a while ago comes back from the host,
		 * 0.5 GB/s (docs/rcpio.md, "Pages") — and a pool larger than
		 * its file system can hold is refused here (RCP_ESYS) rather
		 * than killing the job with SIGBUS at a write.  A file system
		 * without fallocate leaves the pool sparse, as before. */
		if (fallocate(p->fd, 0, 0, (off_t)total) && errno == ENOSPC)
			return RCP_ESYS;
	}
	if (pmem2_config_new(&cfg) ||
	    pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE) ||
	    pmem2_source_from_fd(&src, p->fd) || pmem2_map_new(&p->map, cfg, src))
		goto out;
	p->base = pmem2_map_get_address(p->map);
	p->persist = pmem2_get_persist_fn(p->map);
	p->len = (size_t)total;
#ifdef MADV_HUGEPAGE
	/* 2 MiB pages where the pool's file system leaves it to us (a tmpfs
	 * mounted huge=advise); elsewhere a no-op or EINVAL, ignored.  A
	 * tmpfs mounted huge=always or within_size (or a DAX device) maps
	 * huge pages without being asked; /dev/shm is usually huge=never
	 * (docs/rcpio.md, "The pool"). */
	(void)madvise(p->base, p->len, MADV_HUGEPAGE);
#endif
	rc = 0;
out:
	if (src)
		pmem2_source_delete(&src);
	if (cfg)
		pmem2_config_delete(&cfg);
	return rc;
}

int rcpio_pool_open(const char *path, const struct rcpio_pool_cfg *cfg, rcpio_pool **out,
                    struct rcpio_pool_info *info)
{
	struct rcpio_pool_info dummy;
	struct hdr want, have;
	rcpio_pool *p;
	struct stat st;
	int rc, rolled = 0;

	if (!info)
		info = &dummy;
	memset(info, 0, sizeof *info);
	if (!path || !cfg || !out || !cfg->nslots || !cfg->block || cfg->block % 4096 ||
	    cfg->block > (1u << 30))
		return RCP_EINVAL;
	layout(&want, cfg->block, cfg->nslots);
	if (!(p = calloc(1, sizeof *p)))
		return RCP_ENOMEM;
	/* One process per pool file.  Two jobs on a host with the same pool
	 * directory (the default is /dev/shm) have ranks of the same numbers:
	 * each would map the other's pool and overwrite its blocks, tags and
	 * undo log.  The second is refused instead.  The lock goes with its
	 * process, so a killed job's pool is free for the next (recovery). */
	p->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (p->fd < 0) {
		rc = RCP_ESYS;
		goto fail;
	}
	if (flock(p->fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? RCP_EBUSY : RCP_ESYS;
		goto fail;
	}
	memset(&have, 0, sizeof have);
	if (!stat(path, &st) && (uint64_t)st.st_size >= sizeof have) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (pread(fd, &have, sizeof have, 0) != (ssize_t)sizeof have)
				memset(&have, 0, sizeof have);
			close(fd);
		}
	} else
		info->created = 1;
	if ((rc = map_file(p, path, want.total)))
		goto fail;
	p->h = (struct hdr *)p->base;
	want.boots = have.boots;
	want.sum = have.sum;
	if (!info->created && memcmp(&have, &want, sizeof have)) {
		/* Another geometry, or a header that does not check out. */
		info->refused = have.magic == MAGIC && have.sum == hdr_sum(&have) ? 0 : 1;
		info->created = 1;
	}
	if (info->created)
		reinit(p, cfg->block, cfg->nslots);
	else if (log_recover(p, &rolled)) {
		info->refused = info->created = 1;
		reinit(p, cfg->block, cfg->nslots);
	}
	info->rolled_back = rolled;
	p->h->boots++;
	p->h->sum = hdr_sum(p->h);
	p->persist(p->h, sizeof *p->h);
	p->gen = p->h->boots << 32;
	p->block = cfg->block;
	p->stride = cfg->block + RCPIO_TAG;
	p->nslots = cfg->nslots;
	p->slots = calloc(p->nslots, sizeof *p->slots);
	p->freeq = calloc(p->nslots, sizeof *p->freeq);
	if (!p->slots || !p->freeq) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	/* Rebuild DRAM state from the committed entries; bad ones are dropped
	 * (cleared in a transaction of their own). */
	rcpio_pool_tx_begin(p);
	for (uint32_t s = p->nslots; s-- > 0;) {
		struct sentry *e = sentry(p, s);
		int bit = (bitmap(p)[s / 64] >> (s % 64)) & 1;
		if (bit && e->fid && e->sum == sentry_sum(e, s)) {
			struct rcpio_slot *sl = &p->slots[s];
			sl->used = sl->committed = 1;
			sl->fid = e->fid;
			sl->block = e->block;
			sl->gen = e->gen;
			info->committed++;
			continue;
		}
		if (bit || e->fid || e->sum) {
			info->dropped++;
			rcpio_pool_tx_slot_clear(p, s);
		}
		p->freeq[p->nfree++] = s;
	}
	for (uint32_t i = 0; i < RCPIO_NFILES; i++) {
		struct fentry *f = fentry(p, i);
		if (f->id.fid && f->sum != fentry_sum(f, i)) {
			struct rcpio_fident z;
			memset(&z, 0, sizeof z);
			info->dropped++;
			rcpio_pool_tx_file(p, i, &z);
		}
	}
	rcpio_pool_tx_commit(p);
	*out = p;
	return 0;
fail:
	rcpio_pool_close(p);
	return rc;
}

int rcpio_pool_geometry(const char *path, struct rcpio_pool_cfg *cfg)
{
	struct hdr h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	if (fd < 0)
		return RCP_ESYS;
	n = pread(fd, &h, sizeof h, 0);
	close(fd);
	if (n != (ssize_t)sizeof h || h.magic != MAGIC || h.version != VERSION ||
	    h.sum != hdr_sum(&h) || !h.nslots || h.nslots > UINT32_MAX || !h.block)
		return RCP_EPROTO;
	cfg->block = (size_t)h.block;
	cfg->nslots = (uint32_t)h.nslots;
	return 0;
}

void rcpio_pool_close(rcpio_pool *p)
{
	if (!p)
		return;
	if (p->map)
		pmem2_map_delete(&p->map);
	if (p->fd >= 0)
		close(p->fd);
	free(p->slots);
	free(p->freeq);
	free(p);
}

size_t rcpio_pool_block(const rcpio_pool *p)
{
	return p->block;
}
uint32_t rcpio_pool_nslots(const rcpio_pool *p)
{
	return p->nslots;
}
size_t rcpio_pool_stride(const rcpio_pool *p)
{
	return p->stride;
}
void *rcpio_pool_area(const rcpio_pool *p, size_t *len)
{
	if (len)
		*len = (size_t)p->nslots * p->stride;
	return p->base + p->h->off_area;
}
uint64_t rcpio_pool_huge_kb(const rcpio_pool *p)
{
	char line[256];
	unsigned long lo, hi;
	uint64_t kb = 0, v;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
			if (in)
				break; /* the next mapping */
			in = lo <= (uintptr_t)p->base && (uintptr_t)p->base < hi;
			continue;
		}
		if (in && (sscanf(line, "ShmemPmdMapped: %" SCNu64, &v) == 1 ||
		           sscanf(line, "FilePmdMapped: %" SCNu64, &v) == 1 ||
		           sscanf(line, "Shared_Hugetlb: %" SCNu64, &v) == 1 ||
		           sscanf(line, "Private_Hugetlb: %" SCNu64, &v) == 1))
			kb += v;
	}
	fclose(f);
	return kb;
}

int rcpio_pool_fd(const rcpio_pool *p)
{
	return p->fd;
}
uint64_t rcpio_pool_area_offset(const rcpio_pool *p)
{
	return p->h->off_area;
}
unsigned char *rcpio_pool_data(const rcpio_pool *p, uint32_t slot)
{
	return p->base + p->h->off_area + (size_t)slot * p->stride;
}
struct rcpio_slot *rcpio_pool_slot(rcpio_pool *p, uint32_t slot)
{
	return slot < p->nslots ? &p->slots[slot] : NULL;
}
uint64_t rcpio_pool_next_gen(rcpio_pool *p)
{
	return ++p->gen;
}

int rcpio_pool_alloc(rcpio_pool *p)
{
	uint32_t s;
	if (!p->nfree)
		return RCP_EAGAIN;
	s = p->freeq[--p->nfree];
	memset(&p->slots[s], 0, sizeof p->slots[s]);
	p->slots[s].used = 1;
	p->slots[s].lo = UINT32_MAX;
	return (int)s;
}

void rcpio_pool_prefault(rcpio_pool *p, uint32_t slot)
{
#ifdef MADV_POPULATE_WRITE
	/* EINVAL: a kernel without it; not asked again. */
	static int unsupported;
	uintptr_t a = (uintptr_t)rcpio_pool_data(p, slot), e = a + p->block;
	a &= ~(uintptr_t)4095;
	if (slot < p->nslots && !unsupported && madvise((void *)a, e - a, MADV_POPULATE_WRITE) &&
	    errno == EINVAL)
		unsupported = 1;
#else
	(void)p;
	(void)slot;
#endif
}

void rcpio_pool_uncommit(rcpio_pool *p, uint32_t slot)
{
	if (slot < p->nslots && p->slots[slot].committed && !rcpio_pool_tx_begin(p)) {
		if (rcpio_pool_tx_slot_clear(p, slot))
			rcpio_pool_tx_abort(p);
		else
			rcpio_pool_tx_commit(p);
	}
}

void rcpio_pool_release(rcpio_pool *p, uint32_t slot)
{
	if (slot >= p->nslots || !p->slots[slot].used)
		return;
	memset(&p->slots[slot], 0, sizeof p->slots[slot]);
	p->freeq[p->nfree++] = slot;
}

uint32_t rcpio_pool_nfree(const rcpio_pool *p)
{
	return p->nfree;
}

/* Tag layout: magic, fid, block, gen, checksum of the four. */
void rcpio_pool_tag_set(rcpio_pool *p, uint32_t slot, uint64_t fid, uint64_t block, uint64_t gen)
{
	uint64_t t[5] = {MAGIC, fid, block, gen, 0};
	t[4] = rcpio_sum(t, 32, 0);
	memcpy(rcpio_pool_data(p, slot) + p->block, t, sizeof t);
}

void rcpio_pool_tag_clear(rcpio_pool *p, uint32_t slot)
{
	memset(rcpio_pool_data(p, slot) + p->block, 0, 40);
}

int rcpio_tag_ok(const void *tag, uint64_t fid, uint64_t block, uint64_t gen)
{
	uint64_t t[5];
	memcpy(t, tag, sizeof t);
	return t[0] == MAGIC && t[1] == fid && t[2] == block && t[3] == gen &&
	       t[4] == rcpio_sum(t, 32, 0);
}

/* ---- transactions ------------------------------------------------------ */

int rcpio_pool_tx_begin(rcpio_pool *p)
{
	if (p->in_tx)
		return RCP_EBUSY;
	p->in_tx = 1;
	return 0;
}

/* Logs [off, off+len) (steps 1 and 2 of the protocol at the top). */
static int tx_log(rcpio_pool *p, uint64_t off, uint64_t len)
{
	struct loghdr *lh = loghdr(p);
	unsigned char *log = (unsigned char *)lh + sizeof *lh;
	struct logrec *r = (struct logrec *)(log + lh->used);
	if (!p->in_tx)
		return RCP_EINVAL;
	if (lh->used + sizeof *r + ALIGN(len, 8) > RCPIO_LOG_BYTES - sizeof *lh)
		return RCP_ERANGE;
	r->off = off;
	r->len = len;
	memcpy(log + lh->used + sizeof *r, p->base + off, len);
	r->sum = rcpio_sum(log + lh->used + sizeof *r, len, off ^ len);
	p->persist(r, sizeof *r + len);
	lh->used += sizeof *r + ALIGN(len, 8);
	p->persist(&lh->used, sizeof lh->used);
	lh->count++;
	p->persist(&lh->count, sizeof lh->count);
	return 0;
}

static int tx_bit(rcpio_pool *p, uint32_t slot, int on)
{
	uint64_t *w = &bitmap(p)[slot / 64];
	int rc = tx_log(p, (uint64_t)((unsigned char *)w - p->base), sizeof *w);
	if (rc)
		return rc;
	if (on)
		*w |= 1ull << (slot % 64);
	else
		*w &= ~(1ull << (slot % 64));
	p->persist(w, sizeof *w);
	return 0;
}

int rcpio_pool_tx_slot(rcpio_pool *p, uint32_t slot, uint64_t fid, uint64_t block, uint64_t gen)
{
	struct sentry *e;
	int rc;
	if (slot >= p->nslots || !fid)
		return RCP_EINVAL;
	e = sentry(p, slot);
	if ((rc = tx_log(p, (uint64_t)((unsigned char *)e - p->base), sizeof *e)))
		return rc;
	e->fid = fid;
	e->block = block;
	e->gen = gen;
	e->sum = sentry_sum(e, slot);
	p->persist(e, sizeof *e);
	if ((rc = tx_bit(p, slot, 1)))
		return rc;
	p->slots[slot].committed = 1;
	return 0;
}

int rcpio_pool_tx_slot_clear(rcpio_pool *p, uint32_t slot)
{
	struct sentry *e;
	int rc;
	if (slot >= p->nslots)
		return RCP_EINVAL;
	e = sentry(p, slot);
	/* The bit first: a slot is committed only with bit and entry. */
	if ((rc = tx_bit(p, slot, 0)))
		return rc;
	if ((rc = tx_log(p, (uint64_t)((unsigned char *)e - p->base), sizeof *e)))
		return rc;
	memset(e, 0, sizeof *e);
	p->persist(e, sizeof *e);
	p->slots[slot].committed = 0;
	return 0;
}

int rcpio_pool_tx_file(rcpio_pool *p, uint32_t idx, const struct rcpio_fident *id)
{
	struct fentry *f;
	int rc;
	if (idx >= RCPIO_NFILES || !id)
		return RCP_EINVAL;
	f = fentry(p, idx);
	if ((rc = tx_log(p, (uint64_t)((unsigned char *)f - p->base), sizeof *f)))
		return rc;
	memcpy(&f->id, id, sizeof f->id);
	f->sum = id->fid ? fentry_sum(f, idx) : 0;
	p->persist(f, sizeof *f);
	return 0;
}

int rcpio_pool_tx_commit(rcpio_pool *p)
{
	struct loghdr *lh = loghdr(p);
	if (!p->in_tx)
		return RCP_EINVAL;
	lh->count = 0;
	p->persist(&lh->count, sizeof lh->count);
	lh->used = 0;
	p->persist(&lh->used, sizeof lh->used);
	p->in_tx = 0;
	return 0;
}

int rcpio_pool_tx_abort(rcpio_pool *p)
{
	int rolled, rc;
	if (!p->in_tx)
		return RCP_EINVAL;
	rc = log_recover(p, &rolled);
	p->in_tx = 0;
	/* DRAM 'committed' flags follow the restored entries. */
	for (uint32_t s = 0; s < p->nslots; s++)
		p->slots[s].committed = !rcpio_pool_committed(p, s, NULL, NULL, NULL);
	return rc;
}

void rcpio_pool_tx_crash(rcpio_pool *p)
{
	p->in_tx = 0;
}

int rcpio_pool_committed(const rcpio_pool *p, uint32_t slot, uint64_t *fid, uint64_t *block,
                         uint64_t *gen)
{
	const struct sentry *e;
	if (slot >= p->nslots)
		return RCP_EINVAL;
	e = sentry(p, slot);
	if (!((bitmap(p)[slot / 64] >> (slot % 64)) & 1) || !e->fid ||
	    e->sum != sentry_sum(e, slot))
		return RCP_ENOENT;
	if (fid)
		*fid = e->fid;
	if (block)
		*block = e->block;
	if (gen)
		*gen = e->gen;
	return 0;
}

int rcpio_pool_file_find(const rcpio_pool *p, uint64_t fid)
{
	for (uint32_t i = 0; i < RCPIO_NFILES; i++)
		if (fentry(p, i)->id.fid == fid && fid)
			return (int)i;
	return RCP_ENOENT;
}

int rcpio_pool_file_free(const rcpio_pool *p)
{
	for (uint32_t i = 0; i < RCPIO_NFILES; i++)
		if (!fentry(p, i)->id.fid)
			return (int)i;
	return RCP_EAGAIN;
}

int rcpio_pool_file_get(const rcpio_pool *p, uint32_t idx, struct rcpio_fident *id)
{
	if (idx >= RCPIO_NFILES || !id)
		return RCP_EINVAL;
	memcpy(id, &fentry(p, idx)->id, sizeof *id);
	return 0;
}

void *rcpio_pool_entry_addr(rcpio_pool *p, uint32_t slot)
{
	return slot < p->nslots ? (void *)sentry(p, slot) : NULL;
}
