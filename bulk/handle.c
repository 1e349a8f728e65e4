/*
 * bulk/handle.c — bulk handles: creation over segments, the logical offset
 * map, serialisation, and the owner's key table.
 *
 * Serialised form (host byte order, the magic tells a reader of the other
 * order; 32-byte header, then arrays):
 *
 *   u32 magic "RCPB"   u8 version (1)   u8 perm   u16 flags (bit 0: rkeys)
 *   u32 nseg           u32 rkeylen (0 without rkeys)
 *   u64 key            u64 size
 *   u64 len[nseg]      u8 rkey[nseg][rkeylen]   (zero-length segments: zeros)
 *
 * The reader checks everything it can without the key: exact length,
 * segment count, permission bits, that the lengths sum to size without
 * overflow.  Only the owner can check the key (bulk/serve.c, or the nic's
 * table on one-sided paths).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "bulk/bulk_int.h"
#include "common/rcp_common.h"

#define SER_MAGIC   0x42504352u /* "RCPB" read as little-endian bytes */
#define SER_VERSION 1u
#define SER_HDR     32u
#define FLAG_RKEYS  1u

uint64_t rcpb_random64(void)
{
	static uint64_t s;
	uint64_t v = 0;
	while (v == 0) {
		if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
			/* splitmix64 over clock and pid: unpredictable enough to
			 * catch stale handles, the kernel RNG is the normal path. */
			uint64_t z;
			if (!s)
				s = rcpi_now_ns() ^ ((uint64_t)getpid() << 32);
			z = (s += 0x9e3779b97f4a7c15ull);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			v = z ^ (z >> 31);
		}
	}
	return v;
}

/* ---- key table ---- */

static size_t bucket_of(const rcp_bulk_ctx *ctx, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (ctx->nbuckets - 1);
}

int rcpb_key_insert(rcp_bulk_ctx *ctx, rcp_bulk *h)
{
	size_t b;
	if (ctx->nkeys + 1 > ctx->nbuckets) {
		size_t n = ctx->nbuckets ? ctx->nbuckets * 2 : 64;
		rcp_bulk **nb = calloc(n, sizeof *nb);
		if (!nb)
			return RCP_ENOMEM;
		for (size_t i = 0; i < ctx->nbuckets; i++) {
			while (ctx->buckets[i]) {
				rcp_bulk *x = ctx->buckets[i];
				size_t j =
				    (size_t)((x->key * 0x9e3779b97f4a7c15ull) >> 32) & (n - 1);
				ctx->buckets[i] = x->hnext;
				x->hnext = nb[j];
				nb[j] = x;
			}
		}
		free(ctx->buckets);
		ctx->buckets = nb;
		ctx->nbuckets = n;
	}
	/* A fresh key never equals a live one (2^-64 odds, but cheap). */
	while (rcpb_key_find(ctx, h->key))
		h->key = rcpb_random64();
	b = bucket_of(ctx, h->key);
	h->hnext = ctx->buckets[b];
	ctx->buckets[b] = h;
	ctx->nkeys++;
	return 0;
}

rcp_bulk *rcpb_key_find(rcp_bulk_ctx *ctx, uint64_t key)
{
	if (!ctx->nbuckets || !key)
		return NULL;
	for (rcp_bulk *h = ctx->buckets[bucket_of(ctx, key)]; h; h = h->hnext)
		if (h->key == key)
			return h;
	return NULL;
}

void rcpb_key_remove(rcp_bulk_ctx *ctx, rcp_bulk *h)
{
	rcp_bulk **pp;
	if (h->revoked || !ctx->nbuckets)
		return;
	for (pp = &ctx->buckets[bucket_of(ctx, h->key)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == h) {
			*pp = h->hnext;
			ctx->nkeys--;
			break;
		}
	}
	h->revoked = 1;
}

/* ---- creation ---- */

static rcp_bulk *handle_alloc(rcp_bulk_ctx *ctx, int nseg)
{
	rcp_bulk *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->ctx = ctx;
	h->nseg = nseg;
	h->segs = calloc((size_t)nseg, sizeof *h->segs);
	if (!h->segs) {
		free(h);
		return NULL;
	}
	return h;
}

static void handle_link(rcp_bulk_ctx *ctx, rcp_bulk *h)
{
	h->next = ctx->handles;
	if (h->next)
		h->next->prev = h;
	ctx->handles = h;
}

/* Frees H's memory and registrations (no checks). */
void rcpb_handle_destroy(rcp_bulk *h)
{
	rcp_bulk_ctx *ctx = h->ctx;
	if (!h->remote)
		rcpb_key_remove(ctx, h);
	if (h->regs)
		for (int i = 0; i < h->nseg; i++)
			if (h->regs[i])
				rcpb_reg_put(ctx, h->regs[i]);
	if (h->prev)
		h->prev->next = h->next;
	else if (ctx->handles == h)
		ctx->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	free(h->regs);
	free(h->rkeys);
	free(h->segs);
	free(h);
}

/* Drops H's registrations and rkeys (it is then reached by emulation). */
static void unregister(rcp_bulk_ctx *ctx, rcp_bulk *h)
{
	for (int i = 0; i < h->nseg; i++)
		if (h->regs[i]) {
			rcpb_reg_put(ctx, h->regs[i]);
			h->regs[i] = NULL;
		}
	free(h->rkeys);
	h->rkeys = NULL;
	h->rkeylen = 0;
}

int rcp_bulk_create(rcp_bulk_ctx *ctx, int nseg, void *const ptrs[], const size_t lens[],
                    unsigned perm, rcp_bulk **out)
{
	rcp_bulk *h;
	uint64_t total = 0;
	unsigned access = 0;
	int rc;

	if (!ctx || !ptrs || !lens || !out || nseg < 1 || nseg > RCP_BULK_MAX_SEGS || !perm ||
	    (perm & ~(unsigned)RCP_BULK_READWRITE))
		return RCP_EINVAL;
	for (int i = 0; i < nseg; i++) {
		if (!ptrs[i] && lens[i])
			return RCP_EINVAL;
		if (lens[i] > UINT64_MAX - total)
			return RCP_ERANGE;
		total += lens[i];
	}
	h = handle_alloc(ctx, nseg);
	if (!h)
		return RCP_ENOMEM;
	h->perm = perm;
	h->size = total;
	h->key = rcpb_random64();
	total = 0;
	for (int i = 0; i < nseg; i++) {
		h->segs[i].ptr = ptrs[i];
		h->segs[i].len = lens[i];
		h->segs[i].start = total;
		total += lens[i];
	}
	if (perm & RCP_BULK_READ_ONLY)
		access |= RCP_NIC_ACCESS_READ;
	if (perm & RCP_BULK_WRITE_ONLY)
		access |= RCP_NIC_ACCESS_WRITE;
	if (ctx->rma) {
		h->regs = calloc((size_t)nseg, sizeof *h->regs);
		if (!h->regs) {
			rc = RCP_ENOMEM;
			goto fail;
		}
		for (int i = 0; i < nseg; i++) {
			const uint8_t *rk;
			uint32_t rl;
			if (!lens[i])
				continue;
			rc = rcpb_reg_get(ctx, ptrs[i], lens[i], access, &h->regs[i]);
			if (rc) {
				/* No registration (table full, memory the nic
				 * cannot take): peers reach this handle through
				 * emulation, which the owner serves. */
				rcpi_info("bulk: registration failed (%s): handle served by "
				          "emulation",
				          rcp_strerror(rc));
				unregister(ctx, h);
				break;
			}
			rk = rcpb_reg_rkey(h->regs[i], &rl);
			if (!h->rkeys) {
				h->rkeylen = rl;
				h->rkeys = calloc((size_t)nseg, rl);
				if (!h->rkeys) {
					rc = RCP_ENOMEM;
					goto fail;
				}
			}
			if (rl != h->rkeylen) {
				unregister(ctx, h); /* cannot happen with one nic */
				break;
			}
			memcpy(h->rkeys + (size_t)i * rl, rk, rl);
		}
	}
	rc = rcpb_key_insert(ctx, h);
	if (rc)
		goto fail;
	handle_link(ctx, h);
	*out = h;
	return 0;
fail:
	h->revoked = 1; /* never inserted */
	h->prev = h->next = NULL;
	rcpb_handle_destroy(h);
	return rc;
}

int rcp_bulk_free(rcp_bulk *h)
{
	rcp_bulk_ctx *ctx;
	if (!h)
		return 0;
	if (h->users)
		return RCP_EBUSY;
	ctx = h->ctx;
	if (!h->remote) {
		/* Revoke first: from now on every new access is refused. */
		rcpb_key_remove(ctx, h);
		if (h->serving) {
			rcpb_serves_revoke(ctx, h);
			while (h->serving)
				if (rcp_bulk_progress(ctx) < 0)
					break;
			if (h->serving) /* the endpoint failed: forget H */
				rcpb_serves_detach(ctx, h);
		}
	}
	rcpb_handle_destroy(h);
	return 0;
}

uint64_t rcp_bulk_size(const rcp_bulk *h)
{
	return h ? h->size : 0;
}

unsigned rcp_bulk_perm(const rcp_bulk *h)
{
	return h ? h->perm : 0;
}

int rcp_bulk_nseg(const rcp_bulk *h)
{
	return h ? h->nseg : 0;
}

/* ---- the logical map ---- */

int rcp_bulk_locate(const rcp_bulk *h, uint64_t off, int *seg, uint64_t *segoff)
{
	int lo, hi;
	if (!h || !seg || !segoff)
		return RCP_EINVAL;
	if (off > h->size)
		return RCP_ERANGE;
	if (off == h->size) {
		*seg = h->nseg;
		*segoff = 0;
		return 0;
	}
	/* The first segment whose end lies beyond OFF (ends never decrease,
	 * and a zero-length segment's end equals its start, so it is never
	 * the answer). */
	lo = 0;
	hi = h->nseg - 1;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (h->segs[mid].start + h->segs[mid].len > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	*seg = lo;
	*segoff = off - h->segs[lo].start;
	return 0;
}

int rcpb_check_access(const rcp_bulk *h, uint64_t off, uint64_t len, unsigned perm, int *seg)
{
	uint64_t so;
	if ((h->perm & perm) != perm)
		return RCP_EACCES;
	if (off > h->size || len > h->size - off || len == 0)
		return RCP_EACCES;
	if (rcp_bulk_locate(h, off, seg, &so))
		return RCP_EACCES;
	if (len > h->segs[*seg].len - so)
		return RCP_EPROTO;
	return 0;
}

/* ---- serialisation ---- */

size_t rcp_bulk_serialized_size(const rcp_bulk *h)
{
	if (!h)
		return 0;
	return SER_HDR + (size_t)h->nseg * (8 + h->rkeylen);
}

static void put32(uint8_t **p, uint32_t v)
{
	memcpy(*p, &v, 4);
	*p += 4;
}

static void put64(uint8_t **p, uint64_t v)
{
	memcpy(*p, &v, 8);
	*p += 8;
}

static uint32_t get32(const uint8_t **p)
{
	uint32_t v;
	memcpy(&v, *p, 4);
	*p += 4;
	return v;
}

static uint64_t get64(const uint8_t **p)
{
	uint64_t v;
	memcpy(&v, *p, 8);
	*p += 8;
	return v;
}

int rcp_bulk_serialize(const rcp_bulk *h, void *buf, size_t *len)
{
	size_t need;
	uint8_t *p = buf;
	if (!h || !buf || !len)
		return RCP_EINVAL;
	need = rcp_bulk_serialized_size(h);
	if (*len < need) {
		*len = need;
		return RCP_ERANGE;
	}
	put32(&p, SER_MAGIC);
	*p++ = SER_VERSION;
	*p++ = (uint8_t)h->perm;
	*p++ = h->rkeylen ? FLAG_RKEYS : 0;
	*p++ = 0;
	put32(&p, (uint32_t)h->nseg);
	put32(&p, h->rkeylen);
	put64(&p, h->key);
	put64(&p, h->size);
	for (int i = 0; i < h->nseg; i++)
		put64(&p, h->segs[i].len);
	if (h->rkeylen)
		memcpy(p, h->rkeys, (size_t)h->nseg * h->rkeylen);
	*len = need;
	return 0;
}

int rcp_bulk_deserialize(rcp_bulk_ctx *ctx, const void *buf, size_t len, rcp_bulk **out)
{
	const uint8_t *p = buf;
	uint32_t magic, nseg, rkeylen;
	unsigned version, perm, flags;
	uint64_t key, size, total = 0;
	rcp_bulk *h;

	if (!ctx || !buf || !out)
		return RCP_EINVAL;
	if (len < SER_HDR)
		return RCP_EPROTO;
	magic = get32(&p);
	version = *p++;
	perm = *p++;
	flags = *p++;
	flags |= (unsigned)*p++ << 8; /* u16: unknown high bits are refused too */
	nseg = get32(&p);
	rkeylen = get32(&p);
	key = get64(&p);
	size = get64(&p);
	if (magic != SER_MAGIC || version != SER_VERSION || !perm ||
	    (perm & ~(unsigned)RCP_BULK_READWRITE) || (flags & ~FLAG_RKEYS) || nseg < 1 ||
	    nseg > RCP_BULK_MAX_SEGS || rkeylen > RCP_NIC_RKEY_MAX ||
	    !(flags & FLAG_RKEYS) != !rkeylen)
		return RCP_EPROTO;
	/* nseg <= 2^16 and rkeylen <= 64: no overflow in size_t. */
	if (len != SER_HDR + (size_t)nseg * (8 + rkeylen))
		return RCP_EPROTO;
	h = handle_alloc(ctx, (int)nseg);
	if (!h)
		return RCP_ENOMEM;
	for (uint32_t i = 0; i < nseg; i++) {
		uint64_t l = get64(&p);
		if (l > UINT64_MAX - total) {
			free(h->segs);
			free(h);
			return RCP_EPROTO;
		}
		h->segs[i].len = l;
		h->segs[i].start = total;
		total += l;
	}
	if (total != size) {
		free(h->segs);
		free(h);
		return RCP_EPROTO;
	}
	if (rkeylen) {
		h->rkeys = malloc((size_t)nseg * rkeylen);
		if (!h->rkeys) {
			free(h->segs);
			free(h);
			return RCP_ENOMEM;
		}
		memcpy(h->rkeys, p, (size_t)nseg * rkeylen);
	}
	h->remote = 1;
	h->revoked = 1;
	h->perm = perm;
	h->size = size;
	h->key = key;
	h->rkeylen = rkeylen;
	handle_link(ctx, h);
	*out = h;
	return 0;
}
