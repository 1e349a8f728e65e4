/*
 * tests/test_rcp_limits.c — what a peer can make a receiver hold, and what
 * closing owes a peer (issue 18, items 4 and 11), through the simulated
 * network of tests/sim.c on virtual time.  Deterministic: each case names
 * its seeds and a failure prints them; RCP_TEST_SEED overrides the base.
 *
 * - t_unexp_bound_*: a sender isends many small messages (and a few larger
 *   than a frame, which go by RTS) with no receive posted.  The receiver's
 *   unexpected messages (count and bytes, read from the core's stats) stay
 *   under the channel's bounds, the sender's sends stay queued (none fails,
 *   none is dropped), and once receives are posted every message arrives,
 *   in order, with its bytes.
 * - t_unexp_hostile: a peer that ignores credits makes the receiver hold no
 *   more than its grant, and the channel fails (RCP_EPROTO).
 * - t_demand_*: a receive waits for a message behind more unconsumed ones
 *   than the credits allow: granted on demand up to the hard bound, then
 *   RCP_ENOMEM, never a hang (DEMAND in rcp/msg.c).
 * - t_close_linger: under loss, the receiver of a sender's last message
 *   closes (lingers while rcpc_core_linger says so, then disappears); the
 *   sender's send completes with 0 in every seed.
 */
#include "rcp_sim_test.h"

static struct sim_opts opts(uint64_t seed, double drop)
{
	struct sim_opts o = pair_opts(seed, drop, 0, 4096);
	o.params.rx_frames = 32;
	return o;
}

struct many {
	struct sim *s;
	int n;
	size_t *len;
	unsigned char **sbuf, **rbuf;
	rcp_req **sreq, **rreq;
	int sent_ok, sent_err, recv_done, bad;
	uint64_t seed;
};

/* Message I: mostly 8 bytes; every 997th is three frames long (RTS). */
static size_t many_len(int i)
{
	return i % 997 == 500 ? 3 * 4032 : 8;
}

static uint64_t many_tag(int i)
{
	return (uint64_t)(i % 5);
}

static void many_reap_sends(struct many *m)
{
	struct rcp_status st;
	for (int i = 0; i < m->n; i++) {
		if (m->sreq[i] && rcpc_req_done(m->sreq[i], &st)) {
			m->sreq[i] = NULL;
			if (st.error) {
				print_error("send %d: %s (seed %#llx)\n", i, rcp_strerror(st.error),
				            (unsigned long long)m->seed);
				m->sent_err++;
			} else {
				m->sent_ok++;
			}
		}
	}
}

static int many_done(void *arg)
{
	struct many *m = arg;
	struct rcp_status st;
	for (; m->recv_done < m->n && rcpc_req_done(m->rreq[m->recv_done], &st); m->recv_done++) {
		int i = m->recv_done;
		if (st.error || st.len != m->len[i] || st.tag != many_tag(i) ||
		    test_check(m->rbuf[i], m->len[i], (uint64_t)i) >= 0) {
			if (m->bad++ < 5)
				print_error("recv %d: err %s len %zu/%zu tag %llu (seed %#llx)\n",
				            i, rcp_strerror(st.error), st.len, m->len[i],
				            (unsigned long long)st.tag,
				            (unsigned long long)m->seed);
		}
	}
	return m->recv_done == m->n;
}

/* N messages to a receiver that posts nothing for 2 s of virtual time,
 * then posts them all.  The receiver's core must never hold more than
 * MAX_COUNT messages and MAX_BYTES bytes for the channel. */
static void unexp_bound(uint32_t credits, size_t unexp_bytes, int n, uint64_t max_count,
                        uint64_t max_bytes)
{
	struct sim_opts o = opts(test_seed(0x4d454d), 0.0);
	struct many m = {0};
	struct rcp_ep_stats rs, ss;

	o.params.credits = credits;
	o.params.unexp_bytes = unexp_bytes;
	m.s = sim_new(&o);
	m.n = n;
	m.seed = o.seed;
	m.len = calloc((size_t)n, sizeof *m.len);
	m.sbuf = calloc((size_t)n, sizeof *m.sbuf);
	m.rbuf = calloc((size_t)n, sizeof *m.rbuf);
	m.sreq = calloc((size_t)n, sizeof *m.sreq);
	m.rreq = calloc((size_t)n, sizeof *m.rreq);
	sim_chan(m.s, 0, 1);
	sim_chan(m.s, 1, 0);
	for (int i = 0; i < n; i++) {
		m.len[i] = many_len(i);
		m.sbuf[i] = malloc(m.len[i]);
		m.rbuf[i] = malloc(m.len[i]);
		test_fill(m.sbuf[i], m.len[i], (uint64_t)i);
		assert_int_equal(rcpc_isend(sim_chan(m.s, 0, 1), many_tag(i), m.sbuf[i], m.len[i],
		                            sim_now(m.s), &m.sreq[i]),
		                 0);
	}
	/* No receive posted: the receiver holds what the credits allow. */
	sim_run(m.s, never, NULL, 2 * SEC);
	many_reap_sends(&m);
	rcpc_core_stats(sim_core(m.s, 1), &rs);
	rcpc_core_stats(sim_core(m.s, 0), &ss);
	print_message("credits %u unexp_bytes %zu: receiver holds %llu messages, %llu bytes "
	              "(peaks %llu, %llu); sender: %d sends done, %llu stalls\n",
	              credits, unexp_bytes, (unsigned long long)rs.unexp_count,
	              (unsigned long long)rs.unexp_bytes, (unsigned long long)rs.unexp_count_peak,
	              (unsigned long long)rs.unexp_bytes_peak, m.sent_ok,
	              (unsigned long long)ss.credit_stalls);
	assert_true(rs.unexp_count_peak <= max_count);
	assert_true(rs.unexp_bytes_peak <= max_bytes);
	assert_true(rs.unexp_count > 0);
	assert_int_equal(rs.timeouts, 0);
	/* The rest wait at the sender: none failed, none dropped. */
	assert_int_equal(m.sent_err, 0);
	assert_true((uint64_t)m.sent_ok <= max_count);
	assert_true(ss.credit_stalls > 0);
	assert_int_equal(ss.timeouts, 0);

	/* Receives posted: everything arrives, in order, with its bytes. */
	for (int i = 0; i < n; i++)
		assert_int_equal(rcpc_irecv(sim_core(m.s, 1), sim_chan(m.s, 1, 0), many_tag(i),
		                            m.rbuf[i], m.len[i], sim_now(m.s), &m.rreq[i]),
		                 0);
	assert_int_equal(sim_run(m.s, many_done, &m, 600 * SEC), 0);
	assert_int_equal(m.bad, 0);
	sim_run(m.s, never, NULL, SEC / 10); /* the last acks */
	many_reap_sends(&m);
	assert_int_equal(m.sent_err, 0);
	assert_int_equal(m.sent_ok, n);
	rcpc_core_stats(sim_core(m.s, 1), &rs);
	assert_int_equal(rs.unexp_count, 0);
	assert_int_equal(rs.unexp_bytes, 0);
	assert_true(rs.unexp_count_peak <= max_count);
	assert_true(rs.unexp_bytes_peak <= max_bytes);

	for (int i = 0; i < n; i++) {
		free(m.sbuf[i]);
		free(m.rbuf[i]);
	}
	free(m.len);
	free(m.sbuf);
	free(m.rbuf);
	free(m.sreq);
	free(m.rreq);
	sim_free(m.s);
}

/* The count binds: 10 credits, bytes plenty. */
static void t_unexp_bound_count(void **state)
{
	(void)state;
	unexp_bound(10, 0, 100000, 10, 10 * (4096 + 256));
}

/* The bytes bind: 64 KiB is 15 frame buffers with their records. */
static void t_unexp_bound_bytes(void **state)
{
	(void)state;
	unexp_bound(0, 64u << 10, 20000, 64, 64u << 10);
}

/* Default bounds: at most 64 messages held (before: one record per RTS,
 * without bound). */
static void t_unexp_bound_default(void **state)
{
	(void)state;
	unexp_bound(0, 0, 20000, 64, 4u << 20);
}

/* ---- a peer that ignores credits ---- */

struct capture {
	unsigned char frame[RCPW_HLEN + 64];
	size_t len;
};

static void tap_first(void *arg, int from, int to, const void *frame, size_t len)
{
	struct capture *cap = arg;
	if (from == 0 && to == 1 && !cap->len && len <= sizeof cap->frame) {
		memcpy(cap->frame, frame, len);
		cap->len = len;
	}
}

/* A hostile peer sends RTS after RTS (a record each at the receiver)
 * without waiting for credits: frames made from the first real frame of
 * the channel (so epochs, session and whatever else the header carries
 * are right), each the next sequence and message id.  The receiver holds
 * no more than its grant, then fails the channel (RCP_EPROTO). */
static void t_unexp_hostile(void **state)
{
	struct sim_opts o = opts(test_seed(0x4057), 0.0);
	struct sim *s = sim_new(&o);
	struct capture cap = {0};
	struct rcp_ep_stats st;
	struct rcpw_hdr h0;
	rcp_req *r;
	void *rr;
	(void)state;

	sim_chan(s, 0, 1);
	sim_chan(s, 1, 0);
	sim_set_tap(s, tap_first, &cap);
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 1, "hostile!", 8, sim_now(s), &r), 0);
	sim_run(s, never, NULL, SEC / 100);
	sim_set_tap(s, NULL, NULL);
	assert_true(cap.len >= RCPW_HLEN); /* little-endian host: wire order is ours */
	memcpy(&h0, cap.frame, RCPW_HLEN);
	assert_int_equal(h0.hlen, RCPW_HLEN);
	for (uint32_t k = 1; k <= 1000; k++) {
		struct rcpw_hdr h = h0;
		h.type = RCPW_RTS;
		h.flags = RCPW_F_CRC;
		h.seq = h0.seq + k;
		h.msg = h0.msg + k;
		h.len = 0;
		h.arg = 100000;
		h.crc = 0;
		h.crc = rcpw_crc32c(0, &h, RCPW_HLEN);
		sim_inject(s, 0, 1, &h, RCPW_HLEN);
	}
	rcpc_core_stats(sim_core(s, 1), &st);
	print_message("hostile RTS x1000: receiver held at most %llu messages, %llu bytes; "
	              "%llu bad frames\n",
	              (unsigned long long)st.unexp_count_peak,
	              (unsigned long long)st.unexp_bytes_peak, (unsigned long long)st.bad_frames);
	assert_true(st.unexp_count_peak <= 64);
	assert_true(st.bad_frames > 0);
	assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 1, &rr, 8, sim_now(s), &r),
	                 RCP_EPROTO);
	sim_free(s);
}

/* ---- close ---- */

struct closing {
	struct sim *s;
	struct sim_one snd, rcv;
};

static int linger_over(void *arg)
{
	struct closing *c = arg;
	return !rcpc_core_linger(sim_core(c->s, 1), sim_now(c->s));
}

/* One seed: a few messages, the last one sent with rcpc_issend (it
 * completes on the peer's ack only); the receiver gets it, closes and is
 * gone.  Returns 0 if the last send completed with 0 and the bytes came. */
static int close_run(uint64_t seed, double drop)
{
	struct sim_opts o = opts(seed, drop);
	struct closing c = {0};
	static unsigned char sb[3 * 4032], rb[3 * 4032];
	size_t len = seed & 1 ? sizeof sb : 100; /* by RTS, or eager */
	uint64_t peer_timeout;
	int rc = 0;

	c.s = sim_new(&o);
	peer_timeout = o.params.peer_timeout;
	sim_chan(c.s, 0, 1);
	sim_chan(c.s, 1, 0);
	test_fill(sb, len, seed);
	memset(rb, 0, sizeof rb);
	assert_int_equal(
	    rcpc_irecv(sim_core(c.s, 1), sim_chan(c.s, 1, 0), 7, rb, len, sim_now(c.s), &c.rcv.r),
	    0);
	assert_int_equal(rcpc_issend(sim_chan(c.s, 0, 1), 7, sb, len, sim_now(c.s), &c.snd.r), 0);
	if (sim_run(c.s, sim_one_done, &c.rcv, 10 * SEC) || c.rcv.st.error ||
	    test_check(rb, len, seed) >= 0) {
		print_error("seed %#llx: receive failed (%s)\n", (unsigned long long)seed,
		            rcp_strerror(c.rcv.st.error));
		rc = -1;
	}
	/* The receiver closes: it lingers while the core says so, bounded by
	 * the peer timeout as rcp_ep_close bounds it, then it is gone. */
	{
		uint64_t until = sim_now(c.s) + peer_timeout;
		while (!linger_over(&c) && sim_now(c.s) < until)
			sim_run(c.s, linger_over, &c, SEC / 1000);
	}
	/* Frames it sent still arrive (the simulator's kill would drop them
	 * in flight); no resend of the sender's (>= 20 us away) comes first. */
	sim_run(c.s, never, NULL, 2 * o.link.latency);
	sim_kill(c.s, 1);
	if (sim_run(c.s, sim_one_done, &c.snd, 2 * peer_timeout) || c.snd.st.error) {
		print_error("seed %#llx: last send: %s\n", (unsigned long long)seed,
		            c.snd.done ? rcp_strerror(c.snd.st.error) : "not done");
		rc = -1;
	}
	sim_free(c.s);
	return rc;
}

static void t_close_linger(void **state)
{
	uint64_t base = test_seed(0xc105e);
	int failed = 0;
	(void)state;

	for (uint64_t k = 0; k < 60; k++)
		failed += close_run(base + k, 0.10) != 0;
	print_message("close under 10%% loss: %d of 60 last sends failed\n", failed);
	assert_int_equal(failed, 0);
}

/* DEMAND: N small tag-1 messages, then one tag-2 message; the receiver
 * waits for the tag-2 one first.  Returns the tag-2 receive's error and
 * fills *RS with the receiver's stats at that point; then every tag-1
 * message is received, in order, with its bytes (*ALL_OK). */
static int wait_behind(int n, uint32_t credits, struct rcp_ep_stats *rs, int *all_ok)
{
	uint64_t seed = test_seed(0x44454d);
	struct sim_opts o = opts(seed, 0.0);
	struct sim *s;
	unsigned char(*sb)[8] = calloc((size_t)n + 1, 8), (*rb)[8] = calloc((size_t)n + 1, 8);
	rcp_req **sr = calloc((size_t)n + 1, sizeof *sr);
	struct rcp_status st;
	struct sim_one w = {0};
	int err;

	assert_non_null(sb);
	assert_non_null(rb);
	assert_non_null(sr);
	o.params.credits = credits;
	s = sim_new(&o);
	sim_chan(s, 0, 1);
	sim_chan(s, 1, 0);
	for (int i = 0; i <= n; i++) {
		test_fill(sb[i], 8, (uint64_t)i);
		assert_int_equal(
		    rcpc_isend(sim_chan(s, 0, 1), i < n ? 1 : 2, sb[i], 8, sim_now(s), &sr[i]), 0);
	}
	assert_int_equal(
	    rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 2, rb[n], 8, sim_now(s), &w.r), 0);
	(void)sim_run(s, never, NULL, 2 * SEC);
	assert_int_equal(rcpc_req_done(w.r, &w.st), 1);
	err = w.st.error;
	if (!err && test_check(rb[n], 8, (uint64_t)n) >= 0)
		fail_msg("tag-2 message: wrong bytes (seed %#llx)", (unsigned long long)seed);
	rcpc_core_stats(sim_core(s, 1), rs);
	*all_ok = 1;
	for (int i = 0; i < n; i++) {
		rcp_req *r;
		assert_int_equal(
		    rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 1, rb[i], 8, sim_now(s), &r), 0);
		while (!rcpc_req_done(r, &st))
			assert_int_equal(sim_run(s, never, NULL, SEC / 100) == -1, 1);
		if (st.error || test_check(rb[i], 8, (uint64_t)i) >= 0)
			*all_ok = 0;
	}
	for (int i = 0; i < n; i++)
		while (sr[i] && !rcpc_req_done(sr[i], &st))
			(void)sim_run(s, never, NULL, SEC / 100);
	if (!err)
		assert_int_equal(rcpc_req_done(sr[n], &st), 1);
	sim_free(s);
	free(sb);
	free(rb);
	free(sr);
	return err;
}

/* Behind 40 messages of a channel granted 16 credits (hard bound 64):
 * the awaited message arrives, the receiver holding exactly the 40 it
 * waited behind (16 on the grant, 24 on demand, one more for the awaited
 * one), and the 40 are received afterwards in order. */
static void t_demand_behind(void **state)
{
	struct rcp_ep_stats rs;
	int ok;
	(void)state;
	assert_int_equal(wait_behind(40, 16, &rs, &ok), 0);
	assert_true(ok);
	/* 40 held: 16 on the plain grant, 24 granted on demand. */
	assert_int_equal(rs.unexp_count, 40);
	assert_int_equal(rs.demand_credits, 24 + 1);
	assert_int_equal(rs.demand_fails, 0);
}

/* Behind more than the hard bound (4 x 16 = 64): the wait fails with
 * RCP_ENOMEM once 64 are held, the memory stops there, and the channel
 * still works: every held and queued message is received afterwards. */
static void t_demand_hard(void **state)
{
	struct rcp_ep_stats rs;
	int ok;
	(void)state;
	assert_int_equal(wait_behind(200, 16, &rs, &ok), RCP_ENOMEM);
	assert_true(ok);
	assert_int_equal(rs.unexp_count, 64);
	assert_int_equal(rs.unexp_count_peak, 64);
	assert_int_equal(rs.demand_fails, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_unexp_bound_count),   cmocka_unit_test(t_unexp_bound_bytes),
	    cmocka_unit_test(t_unexp_bound_default), cmocka_unit_test(t_unexp_hostile),
	    cmocka_unit_test(t_close_linger),        cmocka_unit_test(t_demand_behind),
	    cmocka_unit_test(t_demand_hard),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
