/*
 * tests/test_bulk.c — bulk/ handles and transfers: the logical
 * offset map, serialisation, and the owner's checks on every transport.
 * What every bulk test shares: tests/bulk_test.h.
 */
#include "bulk_test.h"

/* ---- unit: the offset map ---- */

static void t_locate(void **state)
{
	rcp_ep *ep;
	rcp_bulk_ctx *ctx;
	static char mem[4096];
	uint64_t r = seed;
	(void)state;

	assert_int_equal(open_ep(&s_udp, 0, &ep, &ctx), 0);
	{
		/* Fixed case: empty segments at both ends and in the middle. */
		size_t lens[] = {0, 5, 0, 0, 3, 10, 0};
		void *ptrs[7];
		rcp_bulk *h;
		int seg;
		uint64_t so;
		static const int want_seg[] = {1, 1, 1, 1, 1, 4, 4, 4, 5,
		                               5, 5, 5, 5, 5, 5, 5, 5, 5};
		for (int i = 0; i < 7; i++)
			ptrs[i] = mem;
		assert_int_equal(rcp_bulk_create(ctx, 7, ptrs, lens, RCP_BULK_READWRITE, &h), 0);
		assert_int_equal(rcp_bulk_size(h), 18);
		assert_int_equal(rcp_bulk_nseg(h), 7);
		for (uint64_t off = 0; off < 18; off++) {
			assert_int_equal(rcp_bulk_locate(h, off, &seg, &so), 0);
			assert_int_equal(seg, want_seg[off]);
		}
		assert_int_equal(rcp_bulk_locate(h, 5, &seg, &so), 0);
		assert_int_equal(so, 0);
		assert_int_equal(rcp_bulk_locate(h, 18, &seg, &so), 0);
		assert_int_equal(seg, 7);
		assert_int_equal(so, 0);
		assert_int_equal(rcp_bulk_locate(h, 19, &seg, &so), RCP_ERANGE);
		assert_int_equal(rcp_bulk_free(h), 0);
	}
	/* Random segmentations against a brute-force map. */
	for (int it = 0; it < 200; it++) {
		void *ptrs[40];
		size_t lens[40];
		rcp_bulk *h;
		size_t len = (size_t)(test_rand(&r) % sizeof mem) + 1;
		int n = scatter(&r, mem, len, 40, ptrs, lens);
		assert_int_equal(rcp_bulk_create(ctx, n, ptrs, lens, RCP_BULK_READ_ONLY, &h), 0);
		assert_int_equal(rcp_bulk_size(h), len);
		for (int s = 0, b = 0; s < n; b += (int)lens[s], s++) {
			for (size_t k = 0; k < lens[s]; k++) {
				int seg;
				uint64_t so;
				if (rcp_bulk_locate(h, (uint64_t)b + k, &seg, &so) || seg != s ||
				    so != k) {
					note_seed();
					fail_msg("offset %zu: segment %d+%llu, want %d+%zu",
					         (size_t)b + k, seg, (unsigned long long)so, s, k);
				}
			}
		}
		assert_int_equal(rcp_bulk_free(h), 0);
	}
	/* Argument errors. */
	{
		void *p[2] = {mem, NULL};
		size_t l[2] = {8, 1};
		size_t big[2] = {SIZE_MAX, SIZE_MAX};
		rcp_bulk *h;
		assert_int_equal(rcp_bulk_create(ctx, 2, p, l, RCP_BULK_READ_ONLY, &h), RCP_EINVAL);
		assert_int_equal(rcp_bulk_create(ctx, 0, p, l, RCP_BULK_READ_ONLY, &h), RCP_EINVAL);
		assert_int_equal(rcp_bulk_create(ctx, 1, p, l, 0, &h), RCP_EINVAL);
		assert_int_equal(rcp_bulk_create(ctx, 1, p, l, 8, &h), RCP_EINVAL);
		p[1] = mem;
		if (sizeof(size_t) == 8)
			assert_int_equal(rcp_bulk_create(ctx, 2, p, big, RCP_BULK_READ_ONLY, &h),
			                 RCP_ERANGE);
	}
	rcp_bulk_ctx_close(ctx);
	rcp_ep_close(ep);
}

/* ---- unit: serialisation ---- */

static void t_serialize(void **state)
{
	const struct setup *sus[] = {&s_udp, &s_shm};
	(void)state;
	for (int t = 0; t < 2; t++) {
		rcp_ep *ep;
		rcp_bulk_ctx *ctx;
		static char mem[1000];
		void *ptrs[4] = {mem, mem + 100, mem + 100, mem + 500};
		size_t lens[4] = {100, 0, 300, 500};
		rcp_bulk *h, *rh, *rh2;
		unsigned char buf[4096], buf2[4096], bad[4096];
		size_t len = sizeof buf, len2 = sizeof buf2, small = 10;

		assert_int_equal(open_ep(sus[t], 0, &ep, &ctx), 0);
		assert_int_equal(rcp_bulk_create(ctx, 4, ptrs, lens, RCP_BULK_WRITE_ONLY, &h), 0);
		assert_int_equal(rcp_bulk_serialize(h, buf, &small), RCP_ERANGE);
		assert_int_equal(small, rcp_bulk_serialized_size(h));
		assert_int_equal(rcp_bulk_serialize(h, buf, &len), 0);
		assert_int_equal(len, rcp_bulk_serialized_size(h));
		assert_int_equal(rcp_bulk_deserialize(ctx, buf, len, &rh), 0);
		assert_int_equal(rcp_bulk_size(rh), 900);
		assert_int_equal(rcp_bulk_nseg(rh), 4);
		assert_int_equal(rcp_bulk_perm(rh), RCP_BULK_WRITE_ONLY);
		/* Forwarding a remote handle gives the same bytes. */
		assert_int_equal(rcp_bulk_serialize(rh, buf2, &len2), 0);
		assert_int_equal(len2, len);
		assert_memory_equal(buf, buf2, len);
		/* Every truncation and every extension is refused. */
		for (size_t l = 0; l < len; l++)
			assert_int_equal(rcp_bulk_deserialize(ctx, buf, l, &rh2), RCP_EPROTO);
		memcpy(bad, buf, len);
		bad[len] = 0;
		assert_int_equal(rcp_bulk_deserialize(ctx, bad, len + 1, &rh2), RCP_EPROTO);
		/* Bad magic, version, permission, segment count, size. */
		{
			static const struct {
				size_t off;
				unsigned char val;
			} f[] = {{0, 0x00}, {4, 9}, {5, 0},     {5, 4},
			         {6, 2},    {8, 0}, {11, 0xff}, {24, 1}};
			for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
				memcpy(bad, buf, len);
				bad[f[i].off] = f[i].val;
				assert_int_equal(rcp_bulk_deserialize(ctx, bad, len, &rh2),
				                 RCP_EPROTO);
			}
		}
		/* Segment lengths whose sum overflows to the stated size. */
		{
			uint64_t l0 = UINT64_MAX, l1 = 901, sz = 900;
			memcpy(bad, buf, len);
			memcpy(bad + 32, &l0, 8);
			memcpy(bad + 40, &l1, 8);
			memcpy(bad + 24, &sz, 8);
			assert_int_equal(rcp_bulk_deserialize(ctx, bad, len, &rh2), RCP_EPROTO);
		}
		assert_int_equal(rcp_bulk_deserialize(ctx, NULL, len, &rh2), RCP_EINVAL);
		assert_int_equal(rcp_bulk_free(rh), 0);
		assert_int_equal(rcp_bulk_free(h), 0);
		assert_int_equal(rcp_bulk_free(NULL), 0);
		rcp_bulk_ctx_close(ctx);
		rcp_ep_close(ep);
	}
}

/* ---- unit: owner checks, two endpoints in one process ---- */

static void forge_key(unsigned char *b, size_t len)
{
	uint32_t nseg, rkeylen;
	memcpy(&nseg, b + 8, 4);
	memcpy(&rkeylen, b + 12, 4);
	b[16] ^= 0x5a; /* the handle's key */
	for (uint32_t i = 0; rkeylen >= 8 && i < nseg; i++)
		b[32 + 8 * nseg + (i + 1) * rkeylen - 1] ^= 0x5a; /* each nic key */
	(void)len;
}

static void forge_perm(unsigned char *b, size_t len)
{
	b[5] = RCP_BULK_READWRITE;
	(void)len;
}

/* The last segment and the size claim 64 more bytes. */
static void forge_bounds(unsigned char *b, size_t len)
{
	uint32_t nseg;
	uint64_t v;
	memcpy(&nseg, b + 8, 4);
	memcpy(&v, b + 24, 8);
	v += 64;
	memcpy(b + 24, &v, 8);
	memcpy(&v, b + 32 + 8 * (nseg - 1), 8);
	v += 64;
	memcpy(b + 32 + 8 * (nseg - 1), &v, 8);
	(void)len;
}

/* Byte FORGE_AT of every segment's rkey ^= FORGE_MASK, the permission
 * READWRITE and the bounds 64 bytes longer: an edited key must not widen
 * what the owner registered, whatever the key's layout. */
static uint32_t forge_at;
static unsigned char forge_mask;
static void forge_rkeys(unsigned char *b, size_t len)
{
	uint32_t nseg, rkeylen;
	memcpy(&nseg, b + 8, 4);
	memcpy(&rkeylen, b + 12, 4);
	for (uint32_t i = 0; forge_at < rkeylen && i < nseg; i++)
		b[32 + 8 * nseg + i * rkeylen + forge_at] ^= forge_mask;
	forge_perm(b, len);
	forge_bounds(b, len);
}

static uint32_t rkeylen_of(rcp_bulk *h)
{
	unsigned char buf[4096];
	size_t len = sizeof buf;
	uint32_t rkeylen;
	assert_int_equal(rcp_bulk_serialize(h, buf, &len), 0);
	memcpy(&rkeylen, buf + 12, 4);
	return rkeylen;
}

/* RO is A's read-only handle over OWNER's three segments (holes between
 * them and after them are guards, GUARD_COPY their bytes), LH B's local
 * handle.  Every forgery of every rkey byte: a pull gives the real bytes
 * or fails, nothing past the real end is read, no push lands. */
static void rkey_forgeries(struct pair *p, rcp_bulk *ro, rcp_bulk *lh, const char *owner,
                           const char *guard_copy, char *local, const char *name)
{
	static const unsigned char masks[] = {0x01, 0x10, 0x80, 0xff};
	uint32_t rkeylen = rkeylen_of(ro);
	for (forge_at = 0; forge_at < rkeylen; forge_at++) {
		for (size_t m = 0; m < sizeof masks; m++) {
			rcp_bulk *r;
			int rc;
			forge_mask = masks[m];
			r = to_remote(p, ro, forge_rkeys);
			memset(local, 0, 1800);
			rc = xfer(p, RCP_BULK_PULL, r, 0, lh, 0, 1800);
			if (rc == 0 &&
			    (memcmp(local, owner, 500) || memcmp(local + 500, owner + 700, 600) ||
			     memcmp(local + 1100, owner + 1500, 700)))
				fail_msg("%s: rkey byte %u ^ %#x pulled other bytes", name,
				         forge_at, forge_mask);
			rc = xfer(p, RCP_BULK_PULL, r, 1800, lh, 0, 1);
			if (rc != RCP_EACCES)
				fail_msg("%s: rkey byte %u ^ %#x, pull past the end: %s", name,
				         forge_at, forge_mask, rcp_strerror(rc));
			test_fill(local, 1800, 9);
			rc = xfer(p, RCP_BULK_PUSH, r, 0, lh, 0, 1800);
			if (rc != RCP_EACCES)
				fail_msg("%s: rkey byte %u ^ %#x, push into read-only: %s", name,
				         forge_at, forge_mask, rcp_strerror(rc));
			if (memcmp(owner, guard_copy, 3000))
				fail_msg("%s: rkey byte %u ^ %#x changed the owner's memory", name,
				         forge_at, forge_mask);
			assert_int_equal(rcp_bulk_free(r), 0);
		}
	}
}

static void run_checks(const struct setup *su)
{
	struct pair p;
	static char owner[3000], guard_copy[3000], local[3000];
	void *op_[3] = {owner, owner + 700, owner + 1500};
	size_t ol[3] = {500, 600, 700}; /* holes between: guards */
	void *lp[2] = {local, local + 1000};
	size_t ll[2] = {1000, 1800};
	rcp_bulk *ro, *wo, *lh, *r;
	struct rcp_bulk_stats st;
	uint64_t total = 1800;

	pair_open(su, &p);
	test_fill(owner, sizeof owner, 1);
	memcpy(guard_copy, owner, sizeof owner);
	assert_int_equal(rcp_bulk_create(p.a, 3, op_, ol, RCP_BULK_READ_ONLY, &ro), 0);
	assert_int_equal(rcp_bulk_create(p.a, 3, op_, ol, RCP_BULK_WRITE_ONLY, &wo), 0);
	assert_int_equal(rcp_bulk_create(p.b, 2, lp, ll, RCP_BULK_READWRITE, &lh), 0);

	/* Legitimate pull across both sides' borders. */
	r = to_remote(&p, ro, NULL);
	memset(local, 0, sizeof local);
	assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 0, total), 0);
	assert_memory_equal(local, owner, 500);
	assert_memory_equal(local + 500, owner + 700, 600);
	assert_memory_equal(local + 1100, owner + 1500, 700);
	/* Sub-ranges starting and ending on borders and one byte off them. */
	{
		static const uint64_t offs[] = {0, 1, 499, 500, 501, 1099, 1100, 1101, 1799};
		for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
			uint64_t o = offs[i], n = total - o;
			memset(local, 0, sizeof local);
			assert_int_equal(xfer(&p, RCP_BULK_PULL, r, o, lh, 999, n), 0);
			for (uint64_t k = 0; k < n; k++) {
				uint64_t lo = o + k;
				char want = lo < 500    ? owner[lo]
				            : lo < 1100 ? owner[700 + lo - 500]
				                        : owner[1500 + lo - 1100];
				if (local[999 + k] != want)
					fail_msg("%s: offset %llu byte %llu", su->name,
					         (unsigned long long)o, (unsigned long long)k);
			}
		}
	}
	/* Local argument checks. */
	assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 1, lh, 0, total), RCP_ERANGE);
	assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 2800, 1), RCP_ERANGE);
	assert_int_equal(xfer(&p, RCP_BULK_PUSH, r, 0, lh, 0, 10), RCP_EACCES);
	assert_int_equal(xfer(&p, RCP_BULK_PULL, lh, 0, r, 0, 10), RCP_EINVAL);
	assert_int_equal(xfer(&p, 7, r, 0, lh, 0, 10), RCP_EINVAL);
	assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 0, 0), 0);
	assert_int_equal(rcp_bulk_free(r), 0);

	/* Forged permission: push into a read-only handle. */
	r = to_remote(&p, ro, forge_perm);
	test_fill(local, sizeof local, 2);
	assert_int_equal(xfer(&p, RCP_BULK_PUSH, r, 0, lh, 0, 100), RCP_EACCES);
	assert_memory_equal(owner, guard_copy, sizeof owner);
	assert_int_equal(rcp_bulk_free(r), 0);
	/* Wrong permission: pull from a write-only handle, forged to allow it. */
	r = to_remote(&p, wo, forge_perm);
	assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 0, 100), RCP_EACCES);
	assert_int_equal(rcp_bulk_free(r), 0);
	/* Forged key. */
	r = to_remote(&p, wo, forge_key);
	assert_int_equal(xfer(&p, RCP_BULK_PUSH, r, 0, lh, 0, total), RCP_EACCES);
	assert_memory_equal(owner, guard_copy, sizeof owner);
	assert_int_equal(rcp_bulk_free(r), 0);
	/* Forged bounds: the push may fill the real segments, never beyond. */
	r = to_remote(&p, wo, forge_bounds);
	assert_int_equal(xfer(&p, RCP_BULK_PUSH, r, 1500, lh, 0, 364), RCP_EACCES);
	assert_memory_equal(owner + 2200, guard_copy + 2200, sizeof owner - 2200);
	assert_memory_equal(owner, guard_copy, 1500);
	{
		/* A range wholly beyond the real end. */
		assert_int_equal(xfer(&p, RCP_BULK_PUSH, r, 1800, lh, 0, 64), RCP_EACCES);
		assert_memory_equal(owner + 2200, guard_copy + 2200, sizeof owner - 2200);
	}
	assert_int_equal(rcp_bulk_free(r), 0);
	rkey_forgeries(&p, ro, lh, owner, guard_copy, local, su->name);
	/* A legitimate push lands exactly in the segments. */
	r = to_remote(&p, wo, NULL);
	test_fill(local, sizeof local, 3);
	assert_int_equal(xfer(&p, RCP_BULK_PUSH, r, 0, lh, 0, total), 0);
	assert_memory_equal(owner, local, 500);
	assert_memory_equal(owner + 500, guard_copy + 500, 200);
	assert_memory_equal(owner + 700, local + 500, 600);
	assert_memory_equal(owner + 1300, guard_copy + 1300, 200);
	assert_memory_equal(owner + 1500, local + 1100, 700);
	assert_memory_equal(owner + 2200, guard_copy + 2200, sizeof owner - 2200);
	memcpy(guard_copy, owner, sizeof owner);
	/* Freed handle: the owner frees it, the stale remote handle fails. */
	assert_int_equal(rcp_bulk_free(wo), 0);
	test_fill(local, sizeof local, 4);
	assert_int_equal(xfer(&p, RCP_BULK_PUSH, r, 0, lh, 0, total), RCP_EACCES);
	assert_memory_equal(owner, guard_copy, sizeof owner);
	assert_int_equal(rcp_bulk_free(r), 0);

	assert_int_equal(rcp_bulk_get_stats(p.b, &st), 0);
	if (su->rma && !strcmp(su->transport, "shm")) {
		if (st.rma_ops == 0)
			print_message("note: %s: cross-memory attach unavailable, emulated\n",
			              su->name);
	} else {
		assert_int_equal(st.rma_ops, 0);
		assert_true(st.emu_ops > 0);
	}
	assert_int_equal(rcp_bulk_free(ro), 0);
	assert_int_equal(rcp_bulk_free(lh), 0);
	pair_close(&p);
}

static void t_checks_shm(void **state)
{
	(void)state;
	run_checks(&s_shm);
}
static void t_checks_shm_emu(void **state)
{
	(void)state;
	run_checks(&s_shm_emu);
}
static void t_checks_udp(void **state)
{
	(void)state;
	run_checks(&s_udp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_locate),     cmocka_unit_test(t_serialize),
	    cmocka_unit_test(t_checks_shm), cmocka_unit_test(t_checks_shm_emu),
	    cmocka_unit_test(t_checks_udp),
	};
	return bulk_test_main(tests, sizeof tests / sizeof tests[0]);
}
