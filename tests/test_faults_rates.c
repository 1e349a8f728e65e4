/*
 * tests/test_faults_rates.c — the fault-injecting nic wrapper (nic/faults.c): determinism
 * (same seed, same pattern), rates within 4 sigma over 100k frames, and what
 * must never happen (the sender's data corrupted, loss by reordering, a
 * MORE batch broken, stats that disagree with the receiver).
 * The loopback backend and the frames every test uses: tests/faults_test.h.
 */
#include "faults_test.h"

/* ---- determinism -------------------------------------------------------- */

static void pattern(uint64_t fseed, uint64_t wseed, struct rxlog *l, struct rcp_nic_stats *st)
{
	char spec[160];
	rcp_nic *nic;
	struct workload w = {.n = 10000,
	                     .batch = 200,
	                     .ndest = 3,
	                     .maxlen = 160,
	                     .more = true,
	                     .split = true,
	                     .seed = wseed};

	snprintf(spec, sizeof spec, "drop=0.05,dup=0.05,reorder=0.1,corrupt=0.05,seed=%llu",
	         (unsigned long long)fseed);
	nic = wrap_run(spec, &w, l);
	*st = stats_of(nic);
	rcp_nic_close(nic);
	CHECK(l->bad == 0, "%llu garbled frames", (unsigned long long)l->bad);
}

/* Same seed and same calls: the same frames, in the same order, with the
 * same damage; another seed: another pattern. */
static void t_same_seed_same_pattern(void **state)
{
	struct rxlog a, b, c;
	struct rcp_nic_stats sa, sb, sc;

	g_seed = test_seed(0x5eed0001);
	pattern(g_seed, g_seed ^ 0xabcdef, &a, &sa);
	pattern(g_seed, g_seed ^ 0xabcdef, &b, &sb);
	CHECK(a.nseq == b.nseq, "%zu vs %zu arrivals", a.nseq, b.nseq);
	CHECK(!memcmp(a.seq, b.seq, a.nseq * sizeof *a.seq), "arrival sequences differ");
	CHECK(!memcmp(&sa, &sb, sizeof sa), "statistics differ");
	/* The pattern is not trivial. */
	CHECK(sa.f_dropped && sa.f_duplicated && sa.f_reordered && sa.f_corrupted,
	      "some fault never fired");

	pattern(g_seed + 1, g_seed ^ 0xabcdef, &c, &sc);
	CHECK(a.nseq != c.nseq || memcmp(a.seq, c.seq, a.nseq * sizeof *a.seq),
	      "seeds %llu and %llu gave the same pattern", (unsigned long long)g_seed,
	      (unsigned long long)g_seed + 1);
	log_free(&a);
	log_free(&b);
	log_free(&c);
}

/* ---- rates -------------------------------------------------------------- */

#define RATE_N 100000

/* Square root by Newton's method: the tests do not link libm. */
static double sqrt_n(double x)
{
	double r = x > 1 ? x : 1;
	for (int i = 0; i < 60; i++)
		r = 0.5 * (r + x / r);
	return r;
}

static void check_rate(const char *what, uint64_t hits, double p)
{
	double obs = (double)hits / RATE_N, tol = 4 * sqrt_n(p * (1 - p) / RATE_N);
	CHECK(obs - p < tol && p - obs < tol, "%s: observed %.5f, asked %.5f (tolerance %.5f)",
	      what, obs, p, tol);
}

static void rate_run(const char *fault, double p, struct rxlog *l, struct rcp_nic_stats *st)
{
	char spec[128];
	rcp_nic *nic;
	struct workload w = {.n = RATE_N, .batch = 500, .ndest = 1, .maxlen = 96, .seed = g_seed};

	snprintf(spec, sizeof spec, "%s=%g,seed=%llu", fault, p, (unsigned long long)g_seed);
	nic = wrap_lb(spec, NULL);
	log_init(l, w.n, w.maxlen);
	run(nic, &w, l);
	*st = stats_of(nic);
	rcp_nic_close(nic);
	CHECK(l->bad == 0, "%llu garbled frames", (unsigned long long)l->bad);
}

static void t_rate_drop(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;
	uint64_t lost;

	g_seed = test_seed(0x5eed0002);
	rate_run("drop", 0.05, &l, &st);
	lost = count_ids(&l, 0);
	check_rate("drop", lost, 0.05);
	CHECK(st.f_dropped == lost, "f_dropped %llu, receiver missed %llu",
	      (unsigned long long)st.f_dropped, (unsigned long long)lost);
	CHECK(l.arrivals == l.distinct && l.ooo == 0 && l.corrupted_ids == 0,
	      "drop did more than dropping");
	log_free(&l);
}

static void t_rate_dup(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;
	uint64_t twice;

	g_seed = test_seed(0x5eed0003);
	rate_run("dup", 0.03, &l, &st);
	twice = count_ids(&l, 2);
	check_rate("dup", twice, 0.03);
	CHECK(count_ids(&l, 1) + twice == RATE_N, "a frame was lost or sent 3 times");
	CHECK(st.f_duplicated == twice, "f_duplicated %llu, receiver saw %llu",
	      (unsigned long long)st.f_duplicated, (unsigned long long)twice);
	CHECK(l.ooo == 0 && l.corrupted_ids == 0, "dup did more than duplicating");
	log_free(&l);
}

static void t_rate_reorder(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;

	g_seed = test_seed(0x5eed0004);
	rate_run("reorder", 0.1, &l, &st);
	CHECK(count_ids(&l, 1) == RATE_N, "a frame was lost or duplicated");
	check_rate("reorder", l.ooo, 0.1);
	CHECK(st.f_reordered == l.ooo, "f_reordered %llu, receiver saw %llu late",
	      (unsigned long long)st.f_reordered, (unsigned long long)l.ooo);
	log_free(&l);
}

static void t_rate_corrupt(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;

	g_seed = test_seed(0x5eed0005);
	rate_run("corrupt", 0.02, &l, &st);
	CHECK(count_ids(&l, 1) == RATE_N && l.ooo == 0, "a frame was lost, duplicated or moved");
	check_rate("corrupt", l.corrupted_ids, 0.02);
	CHECK(st.f_corrupted == l.corrupted_ids, "f_corrupted %llu, receiver saw %llu",
	      (unsigned long long)st.f_corrupted, (unsigned long long)l.corrupted_ids);
	/* 1, 2 and 3 flipped bits each about a third of the time. */
	for (int k = 1; k <= 3; k++)
		CHECK(l.flipcount[k] > l.corrupted_ids / 5, "%d-bit damage %llu times of %llu", k,
		      (unsigned long long)l.flipcount[k], (unsigned long long)l.corrupted_ids);
	log_free(&l);
}

/* ---- what must never happen --------------------------------------------- */

/* Corruption works on copies: through the pass-through path, with
 * duplicates, and on held frames. */
static void t_corrupt_sender_untouched(void **state)
{
	static const char *const specs[] = {
	    "corrupt=1",
	    "corrupt=1,dup=0.5",
	    "corrupt=1,reorder=0.5",
	    "corrupt=0.5,delay=0.5,delay_us=0",
	};
	g_seed = test_seed(0x5eed0006);
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		char spec[96];
		struct rxlog l;
		rcp_nic *nic;
		struct workload w = {.n = 3000,
		                     .batch = 100,
		                     .ndest = 2,
		                     .maxlen = LB_MTU,
		                     .more = true,
		                     .split = true,
		                     .verify_sender = true,
		                     .seed = g_seed};

		snprintf(spec, sizeof spec, "%s,seed=%llu", specs[i], (unsigned long long)g_seed);
		if (i == 0) {
			/* Small frames: two flips of one bit would cancel out now
			 * and then, and the frame would arrive intact. */
			w.n = 10000;
			w.maxlen = 36;
		}
		nic = wrap_run(spec, &w, &l);
		CHECK(l.bad == 0, "\"%s\": %llu frames garbled beyond 3 bits", spec,
		      (unsigned long long)l.bad);
		CHECK(l.flip_mismatch == 0, "\"%s\": a duplicate differs from its original", spec);
		CHECK(count_ids(&l, 0) == 0, "\"%s\": a frame was lost", spec);
		if (i == 0)
			CHECK(l.corrupted_ids == w.n, "corrupt=1 left %llu frames intact",
			      (unsigned long long)(w.n - l.corrupted_ids));
		CHECK(stats_of(nic).f_corrupted == l.corrupted_ids, "\"%s\": f_corrupted", spec);
		rcp_nic_close(nic);
		log_free(&l);
	}
}

/* Reordering moves frames, never loses or duplicates one; each
 * destination is reordered on its own. */
static void t_reorder_no_loss(void **state)
{
	struct rxlog l;
	rcp_nic *nic;
	char spec[64];
	struct rcp_nic_stats st;
	struct workload w = {
	    .n = 20000, .batch = 300, .ndest = 3, .maxlen = 200, .more = true, .split = true};

	g_seed = test_seed(0x5eed0007);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "reorder=0.3,seed=%llu", (unsigned long long)g_seed);
	nic = wrap_run(spec, &w, &l);
	st = stats_of(nic);
	CHECK(l.bad == 0 && l.corrupted_ids == 0, "damaged frames");
	CHECK(count_ids(&l, 1) == w.n, "%llu ids lost, %llu duplicated",
	      (unsigned long long)count_ids(&l, 0), (unsigned long long)(l.arrivals - l.distinct));
	CHECK(l.ooo > w.n / 10, "only %llu frames out of order", (unsigned long long)l.ooo);
	CHECK(st.f_reordered == l.ooo, "f_reordered %llu, receiver saw %llu",
	      (unsigned long long)st.f_reordered, (unsigned long long)l.ooo);
	rcp_nic_close(nic);
	log_free(&l);
}

/* RCP_NIC_MORE: frames passed through keep the caller's memory (the
 * backend copies late), the wrapper's own copies are never handed over
 * with MORE, and a send without MORE ends the backend's batch even when
 * the wrapper dropped or held that frame.  run() checks the batch state
 * after every such send and overwrites the caller's buffers. */
static void t_more_semantics(void **state)
{
	static const char *const specs[] = {
	    "drop=0.3",
	    "reorder=0.3,dup=0.2",
	    "corrupt=0.5,dup=0.3",
	    "delay=0.3,delay_us=0,corrupt=0.2",
	    "drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1",
	};
	g_seed = test_seed(0x5eed0008);
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		char spec[96];
		struct rxlog l;
		rcp_nic *nic;
		struct workload w = {.n = 4000,
		                     .batch = 150,
		                     .ndest = 2,
		                     .maxlen = 300,
		                     .more = true,
		                     .split = true,
		                     .seed = g_seed + i};

		snprintf(spec, sizeof spec, "%s,seed=%llu", specs[i], (unsigned long long)g_seed);
		nic = wrap_run(spec, &w, &l);
		CHECK(l.bad == 0, "\"%s\": %llu frames with foreign or reused content", spec,
		      (unsigned long long)l.bad);
		CHECK(l.flip_mismatch == 0, "\"%s\": a duplicate differs", spec);
		rcp_nic_close(nic);
		log_free(&l);
	}
}

/* Every counter against what the receiver saw, all faults at once. */
static void t_stats_match_receiver(void **state)
{
	struct rxlog l;
	rcp_nic *nic;
	char spec[128];
	struct rcp_nic_stats st;
	struct workload w = {
	    .n = 20000, .batch = 250, .ndest = 2, .maxlen = 256, .more = true, .split = true};

	g_seed = test_seed(0x5eed0009);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "drop=0.05,dup=0.05,reorder=0.05,corrupt=0.05,seed=%llu",
	         (unsigned long long)g_seed);
	nic = wrap_run(spec, &w, &l);
	st = stats_of(nic);
	CHECK(l.bad == 0 && l.flip_mismatch == 0, "garbled frames");
	CHECK(st.f_dropped == count_ids(&l, 0), "f_dropped %llu, missing %llu",
	      (unsigned long long)st.f_dropped, (unsigned long long)count_ids(&l, 0));
	CHECK(st.f_duplicated == l.arrivals - l.distinct, "f_duplicated %llu, extra %llu",
	      (unsigned long long)st.f_duplicated, (unsigned long long)(l.arrivals - l.distinct));
	CHECK(count_ids(&l, 0) + count_ids(&l, 1) + count_ids(&l, 2) == w.n, "3 copies of a frame");
	CHECK(st.f_corrupted == l.corrupted_ids, "f_corrupted %llu, receiver %llu",
	      (unsigned long long)st.f_corrupted, (unsigned long long)l.corrupted_ids);
	CHECK(st.f_reordered == l.ooo, "f_reordered %llu, receiver %llu",
	      (unsigned long long)st.f_reordered, (unsigned long long)l.ooo);
	CHECK(st.f_delayed == 0, "f_delayed without delay");
	CHECK(st.tx_frames == l.arrivals && st.rx_frames == l.arrivals,
	      "tx %llu rx %llu arrivals %llu", (unsigned long long)st.tx_frames,
	      (unsigned long long)st.rx_frames, (unsigned long long)l.arrivals);
	/* The wrapper's view is the backend's plus the f_* counters. */
	CHECK(st.tx_frames == w.lb->base.stats.tx_frames &&
	          st.tx_bytes == w.lb->base.stats.tx_bytes &&
	          st.rx_bytes == w.lb->base.stats.rx_bytes,
	      "backend counters not shown");
	rcp_nic_close(nic);
	log_free(&l);
}

/* Backpressure changes neither which frames are dropped, duplicated or
 * corrupted (a refused send rewinds the generator) nor loses held frames
 * the backend refused. */
static void t_eagain_same_decisions(void **state)
{
	struct rxlog a, b;
	struct rcp_nic_stats sa, sb;
	char spec[128];
	struct lb *lb;
	rcp_nic *nic;
	struct workload w = {
	    .n = 8000, .batch = 200, .ndest = 2, .maxlen = 128, .more = true, .split = true};

	g_seed = test_seed(0x5eed000a);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "drop=0.05,dup=0.1,reorder=0.1,corrupt=0.05,seed=%llu",
	         (unsigned long long)g_seed);

	nic = wrap_lb(spec, &lb);
	log_init(&a, w.n, w.maxlen);
	run(nic, &w, &a);
	sa = stats_of(nic);
	assert_int_equal(lb->eagains, 0);
	rcp_nic_close(nic);

	nic = wrap_lb(spec, &lb);
	lb->limit = 5; /* frames the backend queues before saying EAGAIN */
	log_init(&b, w.n, w.maxlen);
	run(nic, &w, &b);
	sb = stats_of(nic);
	CHECK(lb->eagains > w.n / 10, "only %llu EAGAINs", (unsigned long long)lb->eagains);
	rcp_nic_close(nic);

	CHECK(a.bad == 0 && b.bad == 0, "garbled frames");
	CHECK(!memcmp(a.cnt, b.cnt, w.n), "different frames dropped or duplicated");
	CHECK(!memcmp(a.flips, b.flips, w.n), "different frames corrupted");
	CHECK(sa.f_dropped == sb.f_dropped && sa.f_duplicated == sb.f_duplicated &&
	          sa.f_corrupted == sb.f_corrupted,
	      "counters differ: dropped %llu/%llu dup %llu/%llu corrupt %llu/%llu",
	      (unsigned long long)sa.f_dropped, (unsigned long long)sb.f_dropped,
	      (unsigned long long)sa.f_duplicated, (unsigned long long)sb.f_duplicated,
	      (unsigned long long)sa.f_corrupted, (unsigned long long)sb.f_corrupted);
	CHECK(sb.f_duplicated == b.arrivals - b.distinct, "f_duplicated %llu, extra %llu",
	      (unsigned long long)sb.f_duplicated, (unsigned long long)(b.arrivals - b.distinct));
	log_free(&a);
	log_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_same_seed_same_pattern),
	    cmocka_unit_test(t_rate_drop),
	    cmocka_unit_test(t_rate_dup),
	    cmocka_unit_test(t_rate_reorder),
	    cmocka_unit_test(t_rate_corrupt),
	    cmocka_unit_test(t_corrupt_sender_untouched),
	    cmocka_unit_test(t_reorder_no_loss),
	    cmocka_unit_test(t_more_semantics),
	    cmocka_unit_test(t_stats_match_receiver),
	    cmocka_unit_test(t_eagain_same_decisions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
