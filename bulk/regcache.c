/*
 * bulk/regcache.c — the registration cache.
 *
 * Handles over the same memory with the same permission share one nic
 * registration (reference counted, found by (address, length, access) in a
 * hash table), so exposing one buffer to many concurrent calls registers
 * it once.  Invalidation on free: when the last handle using a
 * registration is freed the registration is dropped at once, which revokes
 * its nic key.  A cache that kept registrations past the last free (as
 * Mercury's does, to save re-registration) would let a freed handle keep
 * working on one-sided paths, where the nic's key is the only check; we
 * refuse that trade.  Only exact matches are shared: a registration
 * covering more memory, or granting more access, would give a peer more
 * than the handle it was sent.  RCP_BULK_REGCACHE=0 turns sharing off.
 */
#include <stdlib.h>
#include <string.h>

#include "bulk/bulk_int.h"

struct rcpb_reg {
	struct rcpb_reg *hnext;
	void *addr;
	size_t len;
	unsigned access;
	int refs;
	rcp_nic_mr *mr;
	uint32_t rkeylen;
	uint8_t rkey[RCP_NIC_RKEY_MAX];
};

static size_t hash(const rcp_bulk_ctx *ctx, const void *addr, size_t len, unsigned access)
{
	uint64_t x = (uint64_t)(uintptr_t)addr * 0x9e3779b97f4a7c15ull;
	x ^= (uint64_t)len * 0xbf58476d1ce4e5b9ull + access;
	x ^= x >> 29;
	return (size_t)x & (ctx->nrbuckets - 1);
}

static int grow(rcp_bulk_ctx *ctx)
{
	size_t n = ctx->nrbuckets ? ctx->nrbuckets * 2 : 64, old = ctx->nrbuckets;
	struct rcpb_reg **ob = ctx->rbuckets, **nb = calloc(n, sizeof *nb);
	if (!nb)
		return RCP_ENOMEM;
	ctx->rbuckets = nb;
	ctx->nrbuckets = n;
	for (size_t i = 0; i < old; i++) {
		while (ob[i]) {
			struct rcpb_reg *r = ob[i];
			size_t b = hash(ctx, r->addr, r->len, r->access);
			ob[i] = r->hnext;
			r->hnext = nb[b];
			nb[b] = r;
		}
	}
	free(ob);
	return 0;
}

int rcpb_reg_get(rcp_bulk_ctx *ctx, void *addr, size_t len, unsigned access, struct rcpb_reg **out)
{
	struct rcpb_reg *r;
	size_t kl = sizeof r->rkey;
	int rc;

	if (ctx->regcache && ctx->nrbuckets) {
		for (r = ctx->rbuckets[hash(ctx, addr, len, access)]; r; r = r->hnext) {
			if (r->addr == addr && r->len == len && r->access == access) {
				r->refs++;
				ctx->stats.regcache_hits++;
				*out = r;
				return 0;
			}
		}
	}
	if (ctx->nregs + 1 > ctx->nrbuckets && grow(ctx))
		return RCP_ENOMEM;
	r = calloc(1, sizeof *r);
	if (!r)
		return RCP_ENOMEM;
	rc = rcp_nic_mr_reg(ctx->nic, addr, len, access, &r->mr);
	if (!rc) {
		rc = rcp_nic_mr_pack(r->mr, r->rkey, &kl);
		if (rc)
			rcp_nic_mr_dereg(r->mr);
	}
	if (rc) {
		free(r);
		return rc;
	}
	ctx->stats.regcache_misses++;
	r->addr = addr;
	r->len = len;
	r->access = access;
	r->refs = 1;
	r->rkeylen = (uint32_t)kl;
	if (ctx->regcache) {
		size_t b = hash(ctx, addr, len, access);
		r->hnext = ctx->rbuckets[b];
		ctx->rbuckets[b] = r;
		ctx->nregs++;
	}
	*out = r;
	return 0;
}

void rcpb_reg_put(rcp_bulk_ctx *ctx, struct rcpb_reg *r)
{
	if (--r->refs > 0)
		return;
	if (ctx->regcache) {
		struct rcpb_reg **pp = &ctx->rbuckets[hash(ctx, r->addr, r->len, r->access)];
		for (; *pp; pp = &(*pp)->hnext) {
			if (*pp == r) {
				*pp = r->hnext;
				ctx->nregs--;
				break;
			}
		}
	}
	rcp_nic_mr_dereg(r->mr); /* revokes the key at once */
	free(r);
}

const uint8_t *rcpb_reg_rkey(const struct rcpb_reg *r, uint32_t *len)
{
	*len = r->rkeylen;
	return r->rkey;
}

void rcpb_reg_clear(rcp_bulk_ctx *ctx)
{
	free(ctx->rbuckets);
	ctx->rbuckets = NULL;
	ctx->nrbuckets = 0;
	ctx->nregs = 0;
}
