/*
 * rcpio/meta.c — the manager's block table (meta.h).
 *
 * A chained hash table on (file id, block).  Every decision a manager
 * makes is here, as a pure function of the table and the request, so the
 * protocol is unit-tested without a network (tests/test_rcpio_meta.c);
 * rcpio/xfer.c only carries requests and replies.
 */
#include <stdlib.h>
#include <string.h>

#include <rcp/error.h>

#include "rcpio/meta.h"

#define NBUCKETS 4096u

struct ent {
	struct ent *next;
	uint64_t fid, block, gen;
	uint32_t owner, slot;
	int state, probing;
};

struct rcpio_meta {
	struct ent *b[NBUCKETS];
	struct rcpio_meta_stats st;
};

static uint32_t bucket(uint64_t fid, uint64_t block)
{
	uint64_t h = (fid ^ (block * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return (uint32_t)(h >> 40) % NBUCKETS;
}

static struct ent **find(rcpio_meta *m, uint64_t fid, uint64_t block)
{
	struct ent **e = &m->b[bucket(fid, block)];
	while (*e && !((*e)->fid == fid && (*e)->block == block))
		e = &(*e)->next;
	return e;
}

int rcpio_meta_create(rcpio_meta **out)
{
	if (!out)
		return RCP_EINVAL;
	*out = calloc(1, sizeof **out);
	return *out ? 0 : RCP_ENOMEM;
}

void rcpio_meta_destroy(rcpio_meta *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < NBUCKETS; i++)
		while (m->b[i]) {
			struct ent *e = m->b[i];
			m->b[i] = e->next;
			free(e);
		}
	free(m);
}

static int add(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot,
               uint64_t gen, int state)
{
	struct ent *e = malloc(sizeof *e);
	uint32_t k = bucket(fid, block);
	if (!e)
		return RCP_ENOMEM;
	e->fid = fid;
	e->block = block;
	e->owner = owner;
	e->slot = slot;
	e->gen = gen;
	e->state = state;
	e->probing = 0;
	e->next = m->b[k];
	m->b[k] = e;
	m->st.entries++;
	return 0;
}

int rcpio_meta_query(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t requester,
                     int64_t offer_slot, uint64_t offer_gen, struct rcpio_meta_reply *r)
{
	struct ent *e;
	int rc;
	if (!m || !r || !fid)
		return RCP_EINVAL;
	memset(r, 0, sizeof *r);
	m->st.queries++;
	e = *find(m, fid, block);
	if (e && e->state == RCPIO_FILLING) {
		m->st.busy++;
		r->kind = RCPIO_BUSY;
		r->owner = e->owner; /* the filler: the manager may probe it */
		r->slot = e->slot;
		r->gen = e->gen;
		return 0;
	}
	if (e) {
		m->st.hits++;
		r->kind = RCPIO_HIT;
		r->owner = e->owner;
		r->slot = e->slot;
		r->gen = e->gen;
		return 0;
	}
	if (offer_slot < 0 || offer_slot > UINT32_MAX) {
		m->st.none++;
		r->kind = RCPIO_NONE;
		return 0;
	}
	/* Pre-update: the offered slot becomes the cached copy now. */
	if ((rc = add(m, fid, block, requester, (uint32_t)offer_slot, offer_gen, RCPIO_FILLING)))
		return rc;
	m->st.misses++;
	r->kind = RCPIO_MISS;
	r->owner = requester;
	r->slot = (uint32_t)offer_slot;
	r->gen = offer_gen;
	return 0;
}

int rcpio_meta_peek(rcpio_meta *m, uint64_t fid, uint64_t block, struct rcpio_meta_reply *r)
{
	struct ent *e = *find(m, fid, block);
	if (!e || e->state != RCPIO_VALID)
		return 0;
	r->kind = RCPIO_HIT;
	r->owner = e->owner;
	r->slot = e->slot;
	r->gen = e->gen;
	m->st.peeks++;
	return 1;
}

int rcpio_meta_probe(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot)
{
	struct ent *e = *find(m, fid, block);
	if (!e || e->state != RCPIO_FILLING || e->owner != owner || e->slot != slot || e->probing)
		return 0;
	e->probing = 1;
	m->st.probes++;
	return 1;
}

int rcpio_meta_probed(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot,
                      int alive)
{
	struct ent **pe = find(m, fid, block), *e = *pe;
	if (!e || e->owner != owner || e->slot != slot)
		return 0;
	e->probing = 0;
	if (alive || e->state != RCPIO_FILLING)
		return 0;
	/* The filler is gone before READY: nobody holds the block. */
	*pe = e->next;
	free(e);
	m->st.lost++;
	m->st.entries--;
	return 1;
}

int rcpio_meta_ready(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot)
{
	struct ent *e = *find(m, fid, block);
	if (!e || e->owner != owner || e->slot != slot) {
		m->st.stale++;
		return RCP_ENOENT;
	}
	e->state = RCPIO_VALID;
	m->st.ready++;
	return 0;
}

int rcpio_meta_evict(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot)
{
	struct ent **pe = find(m, fid, block), *e = *pe;
	if (!e || e->owner != owner || e->slot != slot) {
		m->st.stale++;
		return RCP_ENOENT;
	}
	*pe = e->next;
	free(e);
	m->st.evicted++;
	m->st.entries--;
	return 0;
}

int rcpio_meta_insert(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot,
                      uint64_t gen)
{
	int rc;
	if (*find(m, fid, block))
		return RCP_EADDRINUSE;
	if ((rc = add(m, fid, block, owner, slot, gen, RCPIO_VALID)))
		return rc;
	m->st.inserted++;
	return 0;
}

uint64_t rcpio_meta_drop_file(rcpio_meta *m, uint64_t fid)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < NBUCKETS; i++) {
		struct ent **pe = &m->b[i];
		while (*pe) {
			struct ent *e = *pe;
			if (e->fid != fid) {
				pe = &e->next;
				continue;
			}
			*pe = e->next;
			free(e);
			n++;
		}
	}
	m->st.entries -= n;
	return n;
}

void rcpio_meta_get_stats(const rcpio_meta *m, struct rcpio_meta_stats *st)
{
	*st = m->st;
}
