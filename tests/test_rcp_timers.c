/*
 * tests/test_rcp_timers.c — the core's timer heap stays exact (rcp/timers.c,
 * TIMERS): an entry point that changes what a channel waits for must mark
 * the channel to be keyed anew, or its timers fire late, early or never.
 * tests/sim.c checks every core's keys (rcpc_timers_check) at each step of
 * every simulated run; these cases reach the entry points the other
 * simulator tests do not, where a channel's last pending work goes away
 * without a frame: a cancel.  Deterministic (no link faults).
 *
 * - t_cancel_recv: a receive posted for a channel keeps its liveness timer
 *   armed; cancelling it leaves the channel idle, with no deadline.
 * - t_cancel_queued_send: a send queued for want of credits (the peer
 *   holds every message it was granted, unconsumed) keeps the timer armed;
 *   cancelling it leaves the channel idle, with no deadline.
 * - t_credit_return_owed: a receive that consumes a held message returns
 *   a credit, which a flush must send: the channel is due at once.
 * - t_rack_cleared: a hole below a selectively acked frame arms the
 *   reordering timer; the late frame fills it before the timer runs out.
 *   When it fires with nothing left to resend, the flush must disarm it
 *   (msg.c and timers.c: the pump's first look, which skips the resend
 *   walk that used to), or the channel stays due for ever.
 */
#include "rcp_sim_test.h"

#define MS 1000000ull

static struct sim_opts opts(void)
{
	struct sim_opts o = pair_opts(1, 0, 0, 4096);
	o.params.rx_frames = 32;
	o.params.credits = 16;
	o.params.crc = 0;
	return o;
}

static void t_cancel_recv(void **state)
{
	struct sim_opts o = opts();
	struct sim *s = sim_new(&o);
	rcpc_core *a = sim_core(s, 0);
	rcp_chan *ch = sim_chan(s, 0, 1);
	unsigned char buf[64];
	rcp_req *r = NULL;
	(void)state;

	sim_chan(s, 1, 0);
	assert_true(rcpc_deadline(a) == UINT64_MAX); /* nothing pending */
	assert_int_equal(rcpc_irecv(a, ch, 5, buf, sizeof buf, sim_now(s), &r), 0);
	sim_run(s, never, NULL, 10 * MS);
	assert_true(rcpc_deadline(a) != UINT64_MAX); /* liveness: the peer may die */
	assert_int_equal(rcpc_cancel(r, sim_now(s)), 0);
	assert_int_equal(rcpc_timers_check(a), 0);
	assert_true(rcpc_deadline(a) == UINT64_MAX);
	assert_int_equal(rcpc_req_done(r, NULL), 1);
	sim_run(s, never, NULL, 10 * MS);
	sim_free(s);
}

static void t_cancel_queued_send(void **state)
{
	struct sim_opts o = opts();
	struct sim *s = sim_new(&o);
	rcpc_core *a = sim_core(s, 0);
	rcp_chan *ch = sim_chan(s, 0, 1);
	unsigned char msg[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	rcp_req *r[17] = {0};
	struct rcp_ep_stats st;
	(void)state;

	sim_chan(s, 1, 0);
	/* B posts nothing: it holds the 16 messages it grants, the 17th
	 * waits at A for a credit. */
	for (int i = 0; i < 17; i++)
		assert_int_equal(rcpc_isend(ch, 7, msg, sizeof msg, sim_now(s), &r[i]), 0);
	sim_run(s, never, NULL, 10 * MS);
	for (int i = 0; i < 16; i++)
		assert_int_equal(rcpc_req_done(r[i], NULL), 1);
	assert_int_equal(rcpc_req_done(r[16], NULL), 0);
	rcpc_core_stats(sim_core(s, 1), &st);
	assert_int_equal(st.unexp_count, 16);
	assert_true(rcpc_deadline(a) != UINT64_MAX);
	assert_int_equal(rcpc_cancel(r[16], sim_now(s)), 0);
	assert_int_equal(rcpc_timers_check(a), 0);
	assert_true(rcpc_deadline(a) == UINT64_MAX);
	assert_int_equal(rcpc_req_done(r[16], NULL), 1);
	sim_run(s, never, NULL, 10 * MS);
	sim_free(s);
}

/* B holds every message A may send it; a receive takes one of them (no
 * frame comes in): the credit B returns rides on an ack that a flush must
 * arm, so B is due at once, and A's queued send goes out.  (Keyed only on
 * its armed timers, B had no deadline and nobody flushed it: PVM's
 * order-runs hung, the sender stalled for want of credits.) */
static void t_credit_return_owed(void **state)
{
	struct sim_opts o = opts();
	struct sim *s = sim_new(&o);
	rcpc_core *b = sim_core(s, 1);
	rcp_chan *ch = sim_chan(s, 0, 1);
	unsigned char msg[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[8];
	rcp_req *r[17] = {0}, *rr = NULL;
	(void)state;

	sim_chan(s, 1, 0);
	for (int i = 0; i < 17; i++)
		assert_int_equal(rcpc_isend(ch, 7, msg, sizeof msg, sim_now(s), &r[i]), 0);
	sim_run(s, never, NULL, 10 * MS);
	assert_int_equal(rcpc_req_done(r[16], NULL), 0); /* waits for a credit */
	assert_true(rcpc_deadline(b) == UINT64_MAX);
	assert_int_equal(rcpc_irecv(b, NULL, 7, in, sizeof in, sim_now(s), &rr), 0);
	assert_int_equal(rcpc_req_done(rr, NULL), 1);
	assert_true(rcpc_deadline(b) <= sim_now(s)); /* a flush is owed */
	{
		struct sim_one w = {.r = r[16]};
		assert_int_equal(sim_run(s, sim_one_done, &w, SEC), 0);
		assert_int_equal(w.st.error, 0);
	}
	for (int i = 0; i < 15; i++) {
		assert_int_equal(rcpc_irecv(b, NULL, 7, in, sizeof in, sim_now(s), &rr), 0);
		assert_int_equal(rcpc_req_done(rr, NULL), 1);
	}
	sim_free(s);
}

/* Delays the first frame A sends B by 8 us: B sees the second one first. */
static int64_t delay_first(void *arg, int from, int to, const void *frame, size_t len)
{
	int *n = arg;
	(void)frame;
	(void)len;
	if (from == 0 && to == 1 && (*n)++ == 0)
		return 8000;
	return 0;
}

static void t_rack_cleared(void **state)
{
	struct sim_opts o = opts();
	struct sim *s = sim_new(&o);
	rcpc_core *a = sim_core(s, 0), *b = sim_core(s, 1);
	rcp_chan *ab = sim_chan(s, 0, 1), *ba = sim_chan(s, 1, 0);
	unsigned char msg[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[2][8], keep[8];
	struct sim_one w[2] = {{0}}, snd[2] = {{0}};
	rcp_req *k = NULL;
	struct rcp_ep_stats st;
	int n = 0;
	(void)state;

	sim_set_fate(s, delay_first, &n);
	assert_int_equal(rcpc_irecv(a, ab, 9, keep, sizeof keep, sim_now(s), &k), 0);
	assert_int_equal(rcpc_irecv(b, ba, 7, in[0], 8, sim_now(s), &w[0].r), 0);
	assert_int_equal(rcpc_irecv(b, ba, 7, in[1], 8, sim_now(s), &w[1].r), 0);
	/* Synchronous: flagged ACKREQ, B acks each at once, so the late
	 * frame's ack comes back (~18 us) before the hole's reordering
	 * window (20 us at least) runs out. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(rcpc_issend(ab, 7, msg, sizeof msg, sim_now(s), &snd[i].r), 0);
	assert_int_equal(sim_run(s, sim_two_done, snd, SEC), 0);
	assert_int_equal(sim_two_done(w), 1);
	rcpc_core_stats(b, &st);
	assert_int_equal(st.ooo_frames, 1); /* the hole was there */
	rcpc_core_stats(a, &st);
	assert_int_equal(st.retransmits, 0); /* and the late frame filled it */
	/* A keeps work (its receive: liveness); all it sent is acked.  Its
	 * timers run past the reordering window: then nothing is due until
	 * the liveness ping.  (A's own, not sim_run: a deadline stuck in the
	 * past would keep sim_run from ever reaching its time limit.) */
	{
		uint64_t t = sim_now(s) + 100000;
		rcpc_timers(a, t);
		assert_int_equal(rcpc_timers_check(a), 0);
		assert_true(rcpc_deadline(a) > t);
	}
	assert_int_equal(rcpc_cancel(k, sim_now(s)), 0);
	assert_int_equal(rcpc_req_done(k, NULL), 1);
	sim_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_cancel_recv),
	    cmocka_unit_test(t_cancel_queued_send),
	    cmocka_unit_test(t_credit_return_owed),
	    cmocka_unit_test(t_rack_cleared),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
