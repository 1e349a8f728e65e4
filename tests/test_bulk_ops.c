/*
 * tests/test_bulk_ops.c — bulk/ handles and transfers: exactly one
 * completion per operation, cancel, EBUSY, the registration cache.
 * What every bulk test shares: tests/bulk_test.h.
 */
#include "bulk_test.h"

/* ---- unit: completion, cancel, busy handles, the registration cache ---- */

static int ncb;
static int last_status;
static void count_cb(void *arg, int status)
{
	(void)arg;
	ncb++;
	last_status = status;
}

struct stopper {
	int chunks, stop_after;
};

static int stop_cb(void *arg, int status, size_t index, uint64_t off, size_t len)
{
	struct stopper *s = arg;
	(void)index;
	(void)off;
	(void)len;
	if (status)
		return 0;
	return ++s->chunks >= s->stop_after ? RCP_ECANCELED : 0;
}

static void t_ops(void **state)
{
	struct pair p;
	static char a[1 << 16], b[1 << 16];
	void *pa[1] = {a}, *pb[1] = {b};
	size_t l[1] = {sizeof a};
	rcp_bulk *ha, *ha2, *hb, *r;
	rcp_bulk_op *op;
	struct rcp_bulk_stats st;
	int status;
	(void)state;

	/* Closing below waits for a send to a peer nobody progresses. */
	setenv("RCP_PEER_TIMEOUT", "1000", 1);
	pair_open(&s_udp, &p);
	unsetenv("RCP_PEER_TIMEOUT");
	assert_int_equal(rcp_bulk_create(p.a, 1, pa, l, RCP_BULK_READWRITE, &ha), 0);
	assert_int_equal(rcp_bulk_create(p.b, 1, pb, l, RCP_BULK_READWRITE, &hb), 0);
	r = to_remote(&p, ha, NULL);
	/* Callback only: runs once, the op releases itself. */
	ncb = 0;
	test_fill(a, sizeof a, 9);
	assert_int_equal(rcp_bulk_transfer(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, sizeof a,
	                                   count_cb, NULL, NULL),
	                 0);
	/* The local and remote handles are in use. */
	assert_int_equal(rcp_bulk_free(hb), RCP_EBUSY);
	assert_int_equal(rcp_bulk_free(r), RCP_EBUSY);
	while (ncb == 0) {
		rcp_bulk_progress(p.a);
		rcp_bulk_progress(p.b);
	}
	assert_int_equal(last_status, 0);
	assert_memory_equal(a, b, sizeof a);
	for (int i = 0; i < 100; i++)
		rcp_bulk_progress(p.b);
	assert_int_equal(ncb, 1);
	/* Cancel before the owner serves: exactly one completion,
	 * RCP_ECANCELED, callback and test agree. */
	ncb = 0;
	assert_int_equal(
	    rcp_bulk_transfer(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, sizeof a, count_cb, NULL, &op),
	    0);
	assert_int_equal(rcp_bulk_cancel(op), 0);
	assert_int_equal(drive(op, p.a), RCP_ECANCELED);
	assert_int_equal(ncb, 1);
	assert_int_equal(last_status, RCP_ECANCELED);
	/* A wait that times out leaves the op pending. */
	assert_int_equal(
	    rcp_bulk_transfer(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, sizeof a, NULL, NULL, &op), 0);
	assert_int_equal(rcp_bulk_wait(op, 1000, &status), RCP_ETIMEDOUT);
	assert_int_equal(drive(op, p.a), 0);
	/* A pipeline stopped by its chunk callback, and one canceled: one
	 * completion each, with the stop value / RCP_ECANCELED. */
	{
		struct stopper st2 = {0, 2};
		ncb = 0;
		assert_int_equal(rcp_bulk_pipeline(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, sizeof a,
		                                   4096, 2, stop_cb, count_cb, &st2, &op),
		                 0);
		assert_int_equal(drive(op, p.a), RCP_ECANCELED);
		assert_int_equal(ncb, 1);
		assert_true(st2.chunks >= 2 && st2.chunks < (int)(sizeof a / 4096));
		st2.chunks = 0;
		st2.stop_after = 1000;
		ncb = 0;
		assert_int_equal(rcp_bulk_pipeline(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, sizeof a,
		                                   4096, 2, stop_cb, count_cb, &st2, &op),
		                 0);
		assert_int_equal(rcp_bulk_cancel(op), 0);
		assert_int_equal(rcp_bulk_cancel(op), 0);
		assert_int_equal(drive(op, p.a), RCP_ECANCELED);
		assert_int_equal(ncb, 1);
		assert_true(st2.chunks <= 2);
		assert_int_equal(rcp_bulk_pipeline(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, 10, 0, 2,
		                                   NULL, NULL, NULL, &op),
		                 RCP_EINVAL);
		assert_int_equal(rcp_bulk_pipeline(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, 10, 1, 0,
		                                   NULL, NULL, NULL, &op),
		                 RCP_EINVAL);
	}
	/* The registration cache (shm only registers): same memory and
	 * permission share; udp registers nothing. */
	assert_int_equal(rcp_bulk_create(p.a, 1, pa, l, RCP_BULK_READWRITE, &ha2), 0);
	assert_int_equal(rcp_bulk_get_stats(p.a, &st), 0);
	assert_int_equal(st.regcache_hits + st.regcache_misses, 0);
	assert_int_equal(rcp_bulk_free(ha2), 0);
	assert_int_equal(rcp_bulk_free(r), 0);
	assert_int_equal(rcp_bulk_free(ha), 0);
	assert_int_equal(rcp_bulk_free(hb), 0);
	/* Closing with an operation pending completes it with RCP_ECLOSED. */
	assert_int_equal(rcp_bulk_create(p.a, 1, pa, l, RCP_BULK_READWRITE, &ha), 0);
	assert_int_equal(rcp_bulk_create(p.b, 1, pb, l, RCP_BULK_READWRITE, &hb), 0);
	r = to_remote(&p, ha, NULL);
	ncb = 0;
	assert_int_equal(rcp_bulk_transfer(p.b, p.ch, RCP_BULK_PULL, r, 0, hb, 0, sizeof a,
	                                   count_cb, NULL, NULL),
	                 0);
	rcp_bulk_ctx_close(p.a); /* the owner goes first: b's piece gets no answer */
	p.a = NULL;
	rcp_bulk_ctx_close(p.b);
	p.b = NULL;
	assert_int_equal(ncb, 1);
	assert_true(last_status == RCP_ECLOSED || last_status == 0);
	pair_close(&p);
}

static void t_regcache(void **state)
{
	struct pair p;
	static char a[8192];
	void *pa[2] = {a, a + 4096};
	size_t l[2] = {4096, 4096};
	rcp_bulk *h1, *h2, *h3, *r;
	struct rcp_bulk_stats st;
	(void)state;

	pair_open(&s_shm, &p);
	assert_int_equal(rcp_bulk_create(p.a, 2, pa, l, RCP_BULK_READ_ONLY, &h1), 0);
	assert_int_equal(rcp_bulk_create(p.a, 2, pa, l, RCP_BULK_READ_ONLY, &h2), 0);
	assert_int_equal(rcp_bulk_create(p.a, 1, pa, l, RCP_BULK_READWRITE, &h3), 0);
	assert_int_equal(rcp_bulk_get_stats(p.a, &st), 0);
	assert_int_equal(st.regcache_misses, 3);
	assert_int_equal(st.regcache_hits, 2);
	/* h1 and h2 share registrations: freeing h1 keeps h2 working ... */
	r = to_remote(&p, h2, NULL);
	assert_int_equal(rcp_bulk_free(h1), 0);
	{
		static char loc[8192];
		void *pl[1] = {loc};
		size_t ll[1] = {sizeof loc};
		rcp_bulk *lh;
		test_fill(a, sizeof a, 5);
		assert_int_equal(rcp_bulk_create(p.b, 1, pl, ll, RCP_BULK_READWRITE, &lh), 0);
		/* One-sided: done inside the call, delivered by progress; a
		 * sleeper is told not to sleep meanwhile. */
		ncb = 0;
		assert_int_equal(rcp_bulk_transfer(p.b, p.ch, RCP_BULK_PULL, r, 0, lh, 0, sizeof a,
		                                   count_cb, NULL, NULL),
		                 0);
		assert_int_equal(ncb, 0);
		assert_int_equal(rcp_bulk_get_stats(p.b, &st), 0);
		if (st.rma_ops) {
			assert_int_equal(rcp_bulk_arm(p.b), RCP_EAGAIN);
			assert_int_equal(rcp_bulk_progress(p.b), 1);
		} else { /* no cross-memory attach here: emulated */
			while (!ncb) {
				rcp_bulk_progress(p.a);
				rcp_bulk_progress(p.b);
			}
		}
		assert_int_equal(ncb, 1);
		assert_int_equal(last_status, 0);
		assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 0, sizeof a), 0);
		assert_memory_equal(loc, a, sizeof a);
		/* ... and freeing the last user invalidates them. */
		assert_int_equal(rcp_bulk_free(h2), 0);
		assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 0, sizeof a), RCP_EACCES);
		assert_int_equal(rcp_bulk_free(lh), 0);
	}
	assert_int_equal(rcp_bulk_free(r), 0);
	assert_int_equal(rcp_bulk_free(h3), 0);
	/* More handles than the nic's registration table holds: the last
	 * ones have no one-sided keys, and peers still reach them. */
	{
		enum { N = 16500 };
		static char mem[N];
		static rcp_bulk *hs[N];
		static char loc[1];
		void *pl[1] = {loc};
		size_t one = 1;
		rcp_bulk *lh;
		int i;
		test_fill(mem, sizeof mem, 6);
		for (i = 0; i < N; i++) {
			void *pp[1] = {mem + i};
			assert_int_equal(
			    rcp_bulk_create(p.a, 1, pp, &one, RCP_BULK_READ_ONLY, &hs[i]), 0);
		}
		assert_true(rcp_bulk_serialized_size(hs[N - 1]) < rcp_bulk_serialized_size(hs[0]));
		assert_int_equal(rcp_bulk_create(p.b, 1, pl, &one, RCP_BULK_READWRITE, &lh), 0);
		r = to_remote(&p, hs[N - 1], NULL);
		assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 0, 1), 0);
		assert_int_equal(loc[0], mem[N - 1]);
		assert_int_equal(rcp_bulk_free(r), 0);
		r = to_remote(&p, hs[0], NULL);
		assert_int_equal(xfer(&p, RCP_BULK_PULL, r, 0, lh, 0, 1), 0);
		assert_int_equal(loc[0], mem[0]);
		assert_int_equal(rcp_bulk_free(r), 0);
		assert_int_equal(rcp_bulk_free(lh), 0);
		for (i = 0; i < N; i++)
			assert_int_equal(rcp_bulk_free(hs[i]), 0);
	}
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_ops),
	    cmocka_unit_test(t_regcache),
	};
	return bulk_test_main(tests, sizeof tests / sizeof tests[0]);
}
