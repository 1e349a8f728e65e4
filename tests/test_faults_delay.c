/*
 * tests/test_faults_delay.c — the fault-injecting nic wrapper (nic/faults.c): delay: timing,
 * every frame arrives, the pool bound, held frames on wait, remove and
 * close.
 * The loopback backend and the frames every test uses: tests/faults_test.h.
 */
#include "faults_test.h"

/* ---- delay -------------------------------------------------------------- */

/* Calls recv (the endpoint's only progress) until N distinct ids arrived
 * or DEADLINE passes; no sleeping. */
static void drain_until(rcp_nic *nic, struct rxlog *l, uint64_t n, uint64_t deadline)
{
	while (l->distinct < n && rcpi_now_ns() < deadline)
		drain(nic, l);
}

/* A delayed frame does not arrive before its time, and does arrive by
 * recv alone afterwards. */
static void t_delay_timing(void **state)
{
	const uint64_t delay = 20000000; /* 20 ms */
	unsigned char buf[64];
	struct iovec iov = {buf, 0};
	struct rxlog l;
	uint64_t t0, t1;
	rcp_nic *nic;

	g_seed = test_seed(0x5eed000b);
	nic = wrap_lb("delay=1,delay_us=20000", NULL);
	log_init(&l, 1, sizeof buf);
	iov.iov_len = frame_len(0, sizeof buf);
	build_frame(buf, 0, iov.iov_len);
	t0 = rcpi_now_ns();
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	assert_int_equal(rcp_nic_flush(nic), 0); /* flush does not hurry delays */
	drain(nic, &l);
	t1 = rcpi_now_ns();
	if (t1 - t0 < delay)
		CHECK(l.distinct == 0, "arrived after %llu ns", (unsigned long long)(t1 - t0));
	drain_until(nic, &l, 1, t0 + 5000000000ull);
	t1 = rcpi_now_ns();
	CHECK(l.distinct == 1, "never arrived");
	CHECK(t1 - t0 >= delay, "arrived after %llu ns", (unsigned long long)(t1 - t0));
	CHECK(stats_of(nic).f_delayed == 1, "f_delayed");
	rcp_nic_close(nic);
	log_free(&l);
}

/* Mixed faults with delays: everything arrives, exactly once. */
static void t_delay_all_arrive(void **state)
{
	struct rxlog l;
	rcp_nic *nic;
	char spec[128];
	struct rcp_nic_stats st;
	struct workload w = {
	    .n = 6000, .batch = 200, .ndest = 3, .maxlen = 200, .more = true, .split = true};

	g_seed = test_seed(0x5eed000c);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "delay=0.2,delay_us=300,reorder=0.1,corrupt=0.05,seed=%llu",
	         (unsigned long long)g_seed);
	nic = wrap_lb(spec, NULL);
	log_init(&l, w.n, w.maxlen);
	run(nic, &w, &l);
	drain_until(nic, &l, w.n, rcpi_now_ns() + 10000000000ull);
	st = stats_of(nic);
	CHECK(l.bad == 0, "garbled frames");
	CHECK(count_ids(&l, 1) == w.n, "%llu frames missing, %llu extra",
	      (unsigned long long)count_ids(&l, 0), (unsigned long long)(l.arrivals - l.distinct));
	CHECK(st.f_delayed > w.n / 20, "only %llu delayed", (unsigned long long)st.f_delayed);
	CHECK(st.f_corrupted == l.corrupted_ids, "f_corrupted");
	CHECK(st.tx_frames == w.n, "tx_frames %llu", (unsigned long long)st.tx_frames);
	rcp_nic_close(nic);
	log_free(&l);
}

/* The pool of held frames is bounded: when it is full, frames go at once
 * without the delay.  The first frames fill it. */
static void t_delay_pool_bound(void **state)
{
	const uint64_t delay = 50000000; /* 50 ms */
	const uint32_t n = 1000;
	unsigned char buf[64];
	struct iovec iov = {buf, 0};
	struct rxlog l;
	uint64_t t0, t1, held = 0, now_arrived;
	rcp_nic *nic;

	g_seed = test_seed(0x5eed000d);
	nic = wrap_lb("delay=1,delay_us=50000", NULL);
	log_init(&l, n, sizeof buf);
	t0 = rcpi_now_ns();
	for (uint32_t id = 0; id < n; id++) {
		iov.iov_len = frame_len(id, sizeof buf);
		build_frame(buf, id, iov.iov_len);
		assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	}
	now_arrived = drain(nic, &l);
	t1 = rcpi_now_ns();
	if (t1 - t0 < delay) {
		held = n - now_arrived;
		CHECK(held >= 16 && held <= 256, "%llu frames held", (unsigned long long)held);
		for (uint32_t id = 0; id < n; id++)
			CHECK(l.cnt[id] == (id >= held), "id %u: the pool is not its first frames",
			      id);
	}
	drain_until(nic, &l, n, t0 + 10000000000ull);
	t1 = rcpi_now_ns();
	CHECK(count_ids(&l, 1) == n, "%llu frames lost", (unsigned long long)count_ids(&l, 0));
	CHECK(t1 - t0 >= delay, "the held frames came early");
	if (held)
		CHECK(stats_of(nic).f_delayed == held, "f_delayed %llu, held %llu",
		      (unsigned long long)stats_of(nic).f_delayed, (unsigned long long)held);
	rcp_nic_close(nic);
	log_free(&l);
}

/* A sender that only waits still emits its delayed frames: arm() refuses
 * to sleep while frames are held, pending() sends them when due. */
static void t_wait_emits_held(void **state)
{
	unsigned char buf[64] = {0};
	struct iovec iov = {buf, sizeof buf};
	struct rcp_nic_frame fr[2];
	struct lb *lb;
	rcp_nic *nic;
	uint64_t t0, deadline;
	int rc;

	g_seed = test_seed(0x5eed000e);
	nic = wrap_lb("delay=1,delay_us=3000", &lb);
	assert_int_equal(rcp_nic_arm(nic), 0); /* nothing held, nothing waiting */

	/* Through arm(): rcp_nic_wait without spinning. */
	t0 = rcpi_now_ns();
	deadline = t0 + 5000000000ull;
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	assert_int_equal(rcp_nic_arm(nic), RCP_EAGAIN); /* held, or already out */
	while (lb->count == 0 && rcpi_now_ns() < deadline) {
		rc = rcp_nic_wait(nic, 1000000000, 0);
		CHECK(rc == 0, "wait: %s", rcp_strerror(rc));
	}
	CHECK(lb->count == 1, "the delayed frame never left");
	CHECK(rcpi_now_ns() - t0 >= 3000000, "left early");
	assert_int_equal(rcp_nic_arm(nic), RCP_EAGAIN); /* now it waits to be received */
	assert_int_equal(rcp_nic_recv(nic, fr, 2), 1);
	rcp_nic_release(nic, fr, 1);
	assert_int_equal(rcp_nic_arm(nic), 0);

	/* Through pending(): rcp_nic_wait's spin phase, which must end as
	 * soon as the frame is out, not when the 2 s of spinning are over. */
	t0 = rcpi_now_ns();
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	rc = rcp_nic_wait(nic, 4000000000, 2000000000);
	CHECK(rc == 0, "wait: %s", rcp_strerror(rc));
	CHECK(lb->count == 1, "the delayed frame never left");
	CHECK(rcpi_now_ns() - t0 >= 3000000, "left early");
	CHECK(rcpi_now_ns() - t0 < 1000000000, "pending() did not send the due frame");
	CHECK(stats_of(nic).f_delayed == 2, "f_delayed");
	rcp_nic_close(nic);
}

/* Held frames are sent, not lost, when their peer is removed or the
 * endpoint closed -- even when not yet due. */
static void t_held_frames_on_remove_and_close(void **state)
{
	unsigned char buf[32] = {1};
	struct iovec iov = {buf, sizeof buf};
	struct rcp_nic_frame fr[1];
	struct lb *lb;
	rcp_nic *nic;
	uint64_t t0;

	g_seed = test_seed(0x5eed000f);
	nic = wrap_lb("reorder=1", &lb);
	/* Nothing follows: flush lets it go. */
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, RCP_NIC_MORE), 0);
	assert_int_equal(lb->count, 0);
	assert_int_equal(rcp_nic_flush(nic), 0);
	assert_int_equal(lb->count, 1);
	assert_int_equal(stats_of(nic).f_reordered, 0); /* nothing overtook it */
	assert_int_equal(rcp_nic_recv(nic, fr, 1), 1);
	rcp_nic_release(nic, fr, 1);
	assert_int_equal(rcp_nic_send(nic, 1, &iov, 1, 0), 0);
	assert_int_equal(rcp_nic_send(nic, 2, &iov, 1, 0), 0);
	assert_int_equal(lb->count, 0); /* both held: nothing follows them */
	assert_int_equal(rcp_nic_peer_remove(nic, 1), 0);
	assert_int_equal(lb->count, 1);
	assert_int_equal(lb->q[lb->head].dst, 1);
	assert_int_equal(lb->removed, 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rcp_nic_send(nic, 3, &iov, 1, RCP_NIC_MORE), 0);
	rcp_nic_close(nic);
	assert_int_equal(g_lb_closed_committed, 6);

	nic = wrap_lb("delay=1,delay_us=10000000,dup=1", &lb);
	for (int i = 0; i < 10; i++)
		assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	assert_int_equal(lb->count, 0);
	t0 = rcpi_now_ns();
	rcp_nic_close(nic);
	CHECK(rcpi_now_ns() - t0 < 1000000000, "close waited for the delay");
	assert_int_equal(g_lb_closed_committed, 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_delay_timing),
	    cmocka_unit_test(t_delay_all_arrive),
	    cmocka_unit_test(t_delay_pool_bound),
	    cmocka_unit_test(t_wait_emits_held),
	    cmocka_unit_test(t_held_frames_on_remove_and_close),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
