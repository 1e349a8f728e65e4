/*
 * tests/test_rcp_ready.c — the READY handshake when a promise and an RTS
 * cross, on the deterministic simulator (tests/sim.c).
 *
 * The receiver posts two receives on the channel, tag 1 then tag 2, both
 * larger than a frame: it promises the channel's next message to the
 * first (READY, tag filter 1).  The sender's next message has tag 2, so
 * it cannot use that promise: it sends an RTS, which the link drops once.
 * The promise reaches the sender while its RTS is out.  It must not take
 * it as the answer to the RTS (its tag filter does not take the message):
 * a sender that streamed on it sent the data ahead of the resent RTS, the
 * receiver placed those out-of-order frames into the promised tag-1
 * receive, and the tag-2 receive that the RTS then matched never got
 * them.  tests/soak.c found it (shm, drop+dup).  Checked here: the tag-2
 * receive completes with every byte right, the tag-1 receive is untouched.
 */
#include "rcp_sim_test.h"

struct fate {
	int rts_dropped;
	int data_before_rts; /* DATA frames the sender sent while its RTS was lost */
};

/* Drops the sender's first RTS; counts DATA sent before the RTS is resent. */
static int64_t drop_first_rts(void *arg, int from, int to, const void *frame, size_t len)
{
	struct fate *f = arg;
	const unsigned char *p = frame;
	(void)to;
	if (from != 0 || len < 4)
		return 0;
	if (p[3] == RCPW_RTS && !f->rts_dropped) {
		f->rts_dropped = 1;
		return -1;
	}
	if (p[3] == RCPW_RTS)
		f->rts_dropped = 2; /* resent */
	if (p[3] == RCPW_DATA && f->rts_dropped == 1)
		f->data_before_rts++;
	return 0;
}

static void t_promise_crosses_rts(void **state)
{
	enum { MTU = 4096 };
	uint64_t seed = test_seed(31);
	struct fate f = {0};
	struct sim_one w[2] = {{0}}, r1 = {0};
	static unsigned char src[3 * MTU], dst1[4 * MTU], dst2[4 * MTU];
	struct sim *s;
	(void)state;

	s = pair(seed, 0, 0, MTU);
	sim_set_fate(s, drop_first_rts, &f);

	test_fill(src, sizeof src, 2);
	memset(dst1, 0xa5, sizeof dst1);
	assert_int_equal(
	    rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 1, dst1, sizeof dst1, sim_now(s), &r1.r),
	    0);
	assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 2, dst2, sizeof dst2,
	                            sim_now(s), &w[1].r),
	                 0);
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 2, src, sizeof src, sim_now(s), &w[0].r), 0);
	if (sim_run(s, sim_two_done, w, 10 * SEC))
		fail_msg("tag-2 message never completed (send %d, receive %d); %d DATA frames went "
		         "out on the tag-1 promise while the RTS was lost (seed %#llx)",
		         w[0].done, w[1].done, f.data_before_rts, (unsigned long long)seed);
	assert_int_equal(f.rts_dropped, 2);
	assert_int_equal(f.data_before_rts, 0);
	assert_int_equal(w[0].st.error, 0);
	assert_int_equal(w[1].st.error, 0);
	assert_int_equal(w[1].st.len, sizeof src);
	assert_int_equal(test_check(dst2, sizeof src, 2), -1);
	/* The tag-1 receive took nothing. */
	assert_int_equal(sim_one_done(&r1), 0);
	for (size_t i = 0; i < sizeof dst1; i++)
		if (dst1[i] != 0xa5)
			fail_msg("byte %zu of the tag-1 receive was written (seed %#llx)", i,
			         (unsigned long long)seed);
	sim_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_promise_crosses_rts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
