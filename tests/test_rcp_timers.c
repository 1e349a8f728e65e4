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
 */
#include "rcp/core.h"
#include "sim.h"
#include "testutil.h"

#define SEC 1000000000ull
#define MS  1000000ull

static struct sim_opts opts(void)
{
	struct sim_opts o = {0};
	o.n = 2;
	o.seed = 1;
	o.link.latency = 5000;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 32;
	o.params.credits = 16;
	return o;
}

static int never(void *arg)
{
	(void)arg;
	return 0;
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_cancel_recv),
	    cmocka_unit_test(t_cancel_queued_send),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
