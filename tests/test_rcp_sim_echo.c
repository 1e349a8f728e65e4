/*
 * tests/test_rcp_sim_echo.c — the protocol core on a simulated network:
 * the echo exchange of every size, piggybacked acks, streams sent at once,
 * copied sends, owed acks, message ids of cancelled sends and the
 * advertised window.
 * Shared helpers: tests/rcp_sim_test.h.
 */
#include "rcp_sim_test.h"

/* Runs until both requests of O complete; on a stall, fails with both
 * channels' state (the first thing to read when a protocol change hangs). */
static void run_two_or_dump(struct sim *s, struct sim_one *o, const char *what, size_t size,
                            uint64_t seed)
{
	char d0[1024], d1[1024];
	if (!sim_run(s, sim_two_done, o, 100 * SEC))
		return;
	rcpc_chan_debug(sim_chan(s, 0, 1), d0, sizeof d0);
	rcpc_chan_debug(sim_chan(s, 1, 0), d1, sizeof d1);
	fail_msg("size %zu: %s stalled (seed %#llx)\n  0: %s\n  1: %s", size, what,
	         (unsigned long long)seed, d0, d1);
}

/* The exchange of test_rcp (send each size, echo it back, receives posted
 * late or early) with udp-like frames and the fault injector's mix. */
static void echo_run(uint64_t seed, uint32_t mtu, uint32_t rxf, int rma)
{
	static const size_t sz[] = {0,     1,      257,     4096,    16384,  65000,
	                            65536, 100000, 1 << 20, 3 << 20, 8 << 20};
	struct sim_opts o = {0};
	struct sim *s;
	unsigned char *a = malloc(8 << 20), *b = malloc(8 << 20), *c = malloc(8 << 20);

	o.n = 2;
	o.seed = seed;
	o.link.drop = 0.1;
	o.link.dup = 0.02;
	o.link.reorder = 0.1;
	o.link.reorder_max = 20000;
	o.link.latency = 10000;
	o.rma = rma;
	rcpc_params_default(&o.params);
	o.params.mtu = mtu;
	o.params.rx_frames = rxf;
	o.params.crc = 1;
	o.params.rma_split = 65536; /* split transfers from 64 KiB */
	s = sim_new(&o);
	sim_chan(s, 0, 1);
	sim_chan(s, 1, 0);
	for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
		struct sim_one x[2] = {{0}}, y[2] = {{0}};
		test_fill(a, sz[i], i);
		/* Child posts first; parent sends. */
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 100 + i, b, sz[i],
		                            sim_now(s), &x[1].r),
		                 0);
		/* With RMA, let the READY arrive first (unless lost): the
		 * receiver-first put and split paths. */
		if (rma)
			sim_run(s, never, NULL, 200000);
		assert_int_equal(
		    rcpc_isend(sim_chan(s, 0, 1), 100 + i, a, sz[i], sim_now(s), &x[0].r), 0);
		run_two_or_dump(s, x, "send", sz[i], seed);
		assert_int_equal(x[0].st.error, 0);
		assert_int_equal(x[1].st.error, 0);
		assert_int_equal(test_check(b, sz[i], i), -1);
		/* Echo: child sends, parent posts after. */
		assert_int_equal(
		    rcpc_isend(sim_chan(s, 1, 0), 200 + i, b, sz[i], sim_now(s), &y[0].r), 0);
		assert_int_equal(rcpc_irecv(sim_core(s, 0), sim_chan(s, 0, 1), 200 + i, c, sz[i],
		                            sim_now(s), &y[1].r),
		                 0);
		run_two_or_dump(s, y, "echo", sz[i], seed);
		assert_int_equal(y[0].st.error, 0);
		assert_int_equal(y[1].st.error, 0);
		assert_int_equal(test_check(c, sz[i], i), -1);
	}
	sim_free(s);
	free(a);
	free(b);
	free(c);
}

/* Acks ride on the reverse traffic: a ping-pong where each side answers
 * 15 us after a frame arrives (round trip 40 us, under the 50 us ack
 * delay) needs no pure ACK and no resend at all, also after a warm-up of
 * instant answers taught srtt 10 us.  Two bugs this caught: a piggybacked
 * ack left its delayed-ack timer armed, which then fired just after the
 * next frame arrived and sent an ACK ahead of the reply; and the tail-loss
 * probe (2 srtt = 20 us) resent every request whose answer took longer,
 * so Karn's rule never let srtt learn the 25 us. */
static void t_piggyback(void **state)
{
	uint64_t seed = test_seed(600);
	struct sim *s = pair(seed, 0, 0, 4096);
	unsigned char out[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[8];
	struct rcp_ep_stats st0, st1;
	const int rounds = 200;

	(void)state;
	for (int i = 0; i < rounds; i++) {
		for (int side = 0; side < 2; side++) {
			struct sim_one x[2] = {{0}};
			int to = !side;
			assert_int_equal(rcpc_irecv(sim_core(s, to), sim_chan(s, to, side),
			                            RCP_ANY_TAG, in, sizeof in, sim_now(s),
			                            &x[1].r),
			                 0);
			assert_int_equal(rcpc_isend(sim_chan(s, side, to), (uint64_t)i, out,
			                            sizeof out, sim_now(s), &x[0].r),
			                 0);
			run_two_or_dump(s, x, "ping-pong", sizeof out, seed);
			assert_int_equal(x[1].st.error, 0);
			assert_memory_equal(in, out, sizeof out);
			if (i >= 20)
				sim_run(s, never, NULL, 15000); /* the answer takes 15 us */
		}
	}
	rcpc_core_stats(sim_core(s, 0), &st0);
	rcpc_core_stats(sim_core(s, 1), &st1);
	if (st0.acks_sent + st1.acks_sent > 2)
		fail_msg("%llu + %llu pure ACKs, %llu + %llu resent in %d round trips (seed %#llx)",
		         (unsigned long long)st0.acks_sent, (unsigned long long)st1.acks_sent,
		         (unsigned long long)st0.retransmits, (unsigned long long)st1.retransmits,
		         rounds, (unsigned long long)seed);
	assert_int_equal(st0.retransmits + st1.retransmits, 0);
	assert_int_equal(st0.msgs_recv, rounds);
	assert_int_equal(st1.msgs_recv, rounds);
	{
		/* Each message is one frame that isend sends at once: it
		 * rings the nic itself, unbatched (isend.c isend, xmit_now). */
		struct sim_stats ss;
		sim_stats(s, &ss);
		assert_int_equal(ss.more, 0);
	}
	sim_free(s);
}

/* Receiver first, a message of several frames: the isend that takes the
 * READY puts every frame the window allows on the wire at once.  (The
 * lone-send fast path once sent only the first one; the rest went when
 * its ack came back: a round trip and a delayed ack per message.) */
static void t_stream_at_once(void **state)
{
	uint64_t seed = test_seed(700);
	struct sim *s = pair(seed, 0, 0, 4096);
	const size_t len = 5 * 4000;
	unsigned char *out = malloc(len), *in = malloc(len);
	struct rcp_ep_stats a, b;

	(void)state;
	assert_non_null(out);
	assert_non_null(in);
	for (size_t i = 0; i < len; i++)
		out[i] = (unsigned char)(i * 7 + 3);
	for (int i = 0; i < 3; i++) {
		struct sim_one x[2] = {{0}};
		const uint64_t payload = 4096 - RCPW_HLEN, frames = (len + payload - 1) / payload;
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG, in, len,
		                            sim_now(s), &x[1].r),
		                 0);
		sim_run(s, never, NULL, 20000); /* the READY arrives */
		rcpc_core_stats(sim_core(s, 0), &a);
		assert_int_equal(
		    rcpc_isend(sim_chan(s, 0, 1), (uint64_t)i, out, len, sim_now(s), &x[0].r), 0);
		rcpc_core_stats(sim_core(s, 0), &b);
		if (b.frames_sent - a.frames_sent != frames)
			fail_msg("round %d: isend put %llu frames out, the message has %llu (seed "
			         "%#llx)",
			         i, (unsigned long long)(b.frames_sent - a.frames_sent),
			         (unsigned long long)frames, (unsigned long long)seed);
		run_two_or_dump(s, x, "stream", len, seed);
		assert_int_equal(x[1].st.error, 0);
		assert_memory_equal(in, out, len);
		memset(in, 0, len);
	}
	free(out);
	free(in);
	sim_free(s);
}

/* A one-frame message above inline_max is copied into a pool buffer
 * while send_buf allows: its send completes at once, without ACKREQ, and
 * the user may overwrite the buffer at once; the copy is what goes (and is
 * resent: half the frames are lost).  Past the budget a send waits for its
 * ack again, and acked copies give their buffers back.  rcpc_issend never
 * completes before the ack. */
static void t_copied_send(void **state)
{
	uint64_t seed = test_seed(900);
	/* Half the frames are lost: copies are resent. */
	struct sim_opts o = pair_opts(seed, 0.5, 0, 4096);
	const uint32_t payload = 4096 - RCPW_HLEN, len = 3000;
	unsigned char out[3][3000], in[3][3000];
	struct sim *s;

	(void)state;
	o.params.crc = 0;                /* a resend of the overwritten user buffer would arrive */
	o.params.send_buf = 2 * payload; /* room for two copies */
	s = pair_from(&o);
	for (int round = 0; round < 8; round++) {
		struct sim_one x[3][2];
		memset(x, 0, sizeof x);
		for (int k = 0; k < 3; k++) {
			uint64_t id = (uint64_t)(3 * round + k);
			test_fill(out[k], len, id);
			assert_int_equal(
			    rcpc_isend(sim_chan(s, 0, 1), id, out[k], len, sim_now(s), &x[k][0].r),
			    0);
			/* Acked copies gave their buffers back: two fit again. */
			x[k][0].done = rcpc_req_done(x[k][0].r, &x[k][0].st);
			if (x[k][0].done != (k < 2))
				fail_msg("round %d, send %d of %u bytes: done at once %d, expected "
				         "%d (seed %#llx)",
				         round, k, len, x[k][0].done, k < 2,
				         (unsigned long long)seed);
			if (k < 2)
				memset(out[k], 0xEE, len); /* the user reuses the buffer */
		}
		for (int k = 0; k < 3; k++)
			assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0),
			                            (uint64_t)(3 * round + k), in[k], len,
			                            sim_now(s), &x[k][1].r),
			                 0);
		for (int k = 0; k < 3; k++) {
			run_two_or_dump(s, x[k], "copied", len, seed);
			assert_int_equal(x[k][1].st.error, 0);
			assert_int_equal(x[k][1].st.len, len);
			if (test_check(in[k], len, (uint64_t)(3 * round + k)) != -1)
				fail_msg("round %d, message %d: bytes differ (seed %#llx)", round,
				         k, (unsigned long long)seed);
		}
		sim_run(s, never, NULL, 500 * 1000 * 1000); /* every frame acked */
	}
	/* rcpc_issend: never at once, small or large; done once acked. */
	for (int k = 0; k < 2; k++) {
		struct sim_one x[2] = {{0}};
		size_t n = k ? len : 8;
		test_fill(out[0], n, 100);
		assert_int_equal(
		    rcpc_issend(sim_chan(s, 0, 1), 100, out[0], n, sim_now(s), &x[0].r), 0);
		assert_int_equal(rcpc_req_done(x[0].r, &x[0].st), 0);
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 100, in[0], len,
		                            sim_now(s), &x[1].r),
		                 0);
		run_two_or_dump(s, x, "issend", n, seed);
		assert_int_equal(x[0].st.error, 0);
		assert_int_equal(x[1].st.len, n);
		assert_int_equal(test_check(in[0], n, 100), -1);
	}
	sim_free(s);
}

/* rcpc_ack_owed (an endpoint about to sleep): the ack a received message
 * owes goes out at once, not after ack_delay; with nothing owed it sends
 * nothing and says so. */
static void t_ack_owed(void **state)
{
	uint64_t seed = test_seed(800);
	struct sim *s = pair(seed, 0, 0, 4096);
	unsigned char out[8] = {9, 8, 7, 6, 5, 4, 3, 2}, in[8];
	struct rcp_ep_stats a, b;
	struct sim_one x[2] = {{0}};

	(void)state;
	assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG, in, sizeof in,
	                            sim_now(s), &x[1].r),
	                 0);
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 5, out, sizeof out, sim_now(s), &x[0].r), 0);
	sim_run(s, never, NULL, 10000); /* delivered (5 us), ack_delay (50 us) not yet over */
	assert_int_equal(rcpc_req_done(x[1].r, &x[1].st), 1);
	assert_memory_equal(in, out, sizeof out);
	rcpc_core_stats(sim_core(s, 1), &a);
	assert_int_not_equal(rcpc_ack_owed(sim_core(s, 1), sim_now(s)), 0);
	rcpc_core_stats(sim_core(s, 1), &b);
	assert_int_equal(b.acks_sent, a.acks_sent + 1);
	assert_int_equal(rcpc_ack_owed(sim_core(s, 1), sim_now(s)), 0);
	rcpc_core_stats(sim_core(s, 1), &a);
	assert_int_equal(a.acks_sent, b.acks_sent);
	/* The ack reaches the sender: nothing left to resend, ever. */
	sim_run(s, never, NULL, 5000000);
	rcpc_core_stats(sim_core(s, 0), &a);
	assert_int_equal(a.retransmits, 0);
	assert_int_equal(rcpc_core_busy(sim_core(s, 0)), 0);
	rcpc_req_done(x[0].r, &x[0].st);
	sim_free(s);
}

/* ---- message ids and the advertised window -------------------------------- */

/* Cancelling sends still queued (behind a full window) leaves no gap in
 * message ids: every other message, and one sent after, arrives, in
 * order. */
static void t_cancel_queued_ids(void **state)
{
	enum { M = 100 };
	uint64_t seed = test_seed(1200);
	struct sim *s = pair(seed, 0, 0, 4096);
	static unsigned char sb[M + 1][8], rb[M + 1][8];
	rcp_req *sr[M + 1];
	const int cancel[] = {50, 51, 70, M - 1};
	int next = 0;
	(void)state;

	for (int i = 0; i <= M; i++)
		test_fill(sb[i], 8, (uint64_t)i);
	for (int i = 0; i < M; i++)
		assert_int_equal(
		    rcpc_isend(sim_chan(s, 0, 1), (uint64_t)i, sb[i], 8, sim_now(s), &sr[i]), 0);
	for (size_t k = 0; k < sizeof cancel / sizeof cancel[0]; k++) {
		struct rcp_status st = {0};
		/* Still queued: a window of frames is out ahead of them. */
		assert_int_equal(rcpc_req_done(sr[cancel[k]], NULL), 0);
		assert_int_equal(rcpc_cancel(sr[cancel[k]], sim_now(s)), 0);
		assert_int_equal(rcpc_req_done(sr[cancel[k]], &st), 1);
		assert_int_equal(st.error, RCP_ECANCELED);
		sr[cancel[k]] = NULL;
	}
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), M, sb[M], 8, sim_now(s), &sr[M]), 0);
	for (int i = 0; i <= M; i++) {
		struct sim_one w = {0};
		int skip = 0;
		for (size_t k = 0; k < sizeof cancel / sizeof cancel[0]; k++)
			skip |= cancel[k] == i;
		if (skip)
			continue;
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG,
		                            rb[next], 8, sim_now(s), &w.r),
		                 0);
		if (sim_run(s, sim_one_done, &w, 10 * SEC))
			fail_msg("message %d never arrived after cancels (seed %#llx)", i,
			         (unsigned long long)seed);
		assert_int_equal(w.st.error, 0);
		assert_int_equal(w.st.tag, (uint64_t)i);
		assert_int_equal(test_check(rb[next], 8, (uint64_t)i), -1);
		next++;
	}
	for (int i = 0; i <= M; i++) {
		struct sim_one w = {.r = sr[i]};
		if (!sr[i])
			continue;
		assert_int_equal(sim_run(s, sim_one_done, &w, 10 * SEC), 0);
		assert_int_equal(w.st.error, 0);
	}
	sim_free(s);
}

/* Two ends with different receive windows (8 and 48 frames): once each
 * has heard the other, frames in flight never exceed what the receiver
 * advertised, and the window binds: the sender toward the small end,
 * whose cwnd (32) and ring (64) allow more, reaches exactly 8.  (The
 * other way the sender's own ring, sized from its own rx_frames, is 8.) */
static void t_window_asymmetric(void **state)
{
	uint64_t seed = test_seed(1300);
	struct sim_opts o = pair_opts(seed, 0, 0, 4096);
	static unsigned char sb[2][300000], rb[2][300000];
	struct sim *s;
	uint32_t maxin[2], pw[2];
	(void)state;

	o.rx_frames[0] = 8;
	o.rx_frames[1] = 48;
	s = pair_from(&o);
	/* Each end learns the other's window from its first frame. */
	for (int side = 0; side < 2; side++) {
		struct sim_one x[2] = {{0}};
		assert_int_equal(rcpc_irecv(sim_core(s, !side), sim_chan(s, !side, side),
		                            RCP_ANY_TAG, rb[0], 8, sim_now(s), &x[1].r),
		                 0);
		assert_int_equal(
		    rcpc_issend(sim_chan(s, side, !side), 1, sb[0], 8, sim_now(s), &x[0].r), 0);
		assert_int_equal(sim_run(s, sim_two_done, x, SEC), 0);
	}
	for (int round = 0; round < 2; round++) {
		struct sim_one x[4] = {{0}};
		for (int side = 0; side < 2; side++) {
			test_fill(sb[side], sizeof sb[side], (uint64_t)(side + 10 * round));
			/* Receiver first on round 0 (streamed), sender first on 1. */
			if (!round)
				assert_int_equal(rcpc_irecv(sim_core(s, !side),
				                            sim_chan(s, !side, side), 5, rb[side],
				                            sizeof rb[side], sim_now(s),
				                            &x[2 + side].r),
				                 0);
		}
		sim_run(s, never, NULL, 20000);
		for (int side = 0; side < 2; side++)
			assert_int_equal(rcpc_isend(sim_chan(s, side, !side), 5, sb[side],
			                            sizeof sb[side], sim_now(s), &x[side].r),
			                 0);
		if (round)
			for (int side = 0; side < 2; side++)
				assert_int_equal(rcpc_irecv(sim_core(s, !side),
				                            sim_chan(s, !side, side), 5, rb[side],
				                            sizeof rb[side], sim_now(s),
				                            &x[2 + side].r),
				                 0);
		run_two_or_dump(s, x, "window 0", sizeof sb[0], seed);
		run_two_or_dump(s, x + 2, "window 1", sizeof sb[0], seed);
		for (int side = 0; side < 2; side++) {
			assert_int_equal(x[2 + side].st.error, 0);
			assert_int_equal(x[2 + side].st.len, sizeof sb[side]);
			assert_int_equal(
			    test_check(rb[side], sizeof rb[side], (uint64_t)(side + 10 * round)),
			    -1);
		}
	}
	for (int side = 0; side < 2; side++)
		rcpc_chan_window_stats(sim_chan(s, side, !side), &maxin[side], &pw[side]);
	if (pw[1] != 8 || pw[0] != 48 || maxin[1] != 8 || maxin[0] > 48)
		fail_msg("in flight toward the 8-frame end %u (peer_wnd %u), toward the 48-frame "
		         "end %u (peer_wnd %u) (seed %#llx)",
		         maxin[1], pw[1], maxin[0], pw[0], (unsigned long long)seed);
	sim_free(s);
}

/* Every size a small message's copies handle inline (chan.h copy_bytes:
 * words with an overlapping last one, 4-byte pairs, bytes): 0..72 bytes
 * sent, into a receive buffer of every size around it (truncation), the
 * bytes past what the receive may take untouched. */
static void t_small_sizes(void **state)
{
	struct sim *s = pair(test_seed(900), 0, 0, 4096);
	(void)state;
	for (size_t len = 0; len <= 72; len++) {
		for (size_t cap = len > 3 ? len - 3 : 0; cap <= len + 1; cap++) {
			unsigned char out[80], in[96];
			struct sim_one x[2] = {{0}};
			test_fill(out, sizeof out, len * 131 + cap);
			memset(in, 0xa5, sizeof in);
			assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 3, in, cap,
			                            sim_now(s), &x[1].r),
			                 0);
			assert_int_equal(
			    rcpc_isend(sim_chan(s, 0, 1), 3, out, len, sim_now(s), &x[0].r), 0);
			assert_int_equal(sim_run(s, sim_two_done, x, SEC), 0);
			assert_int_equal(x[1].st.error, len > cap ? RCP_ETRUNC : 0);
			assert_memory_equal(in, out, len < cap ? len : cap);
			for (size_t i = len < cap ? len : cap; i < sizeof in; i++)
				if (in[i] != 0xa5)
					fail_msg("len %zu cap %zu: byte %zu written", len, cap, i);
		}
	}
	sim_free(s);
}

static void t_echo_sizes(void **state)
{
	(void)state;
	for (uint64_t k = 0; k < 6; k++)
		echo_run(test_seed(400) + k, 65000, 64, 0);
	for (uint64_t k = 0; k < 3; k++)
		echo_run(test_seed(500) + k, 16384, 64, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_piggyback),         cmocka_unit_test(t_small_sizes),
	    cmocka_unit_test(t_echo_sizes),        cmocka_unit_test(t_stream_at_once),
	    cmocka_unit_test(t_ack_owed),          cmocka_unit_test(t_copied_send),
	    cmocka_unit_test(t_cancel_queued_ids), cmocka_unit_test(t_window_asymmetric),
	};
	return cmocka_run_group_tests_name("rcp core on a simulated network: echo and windows",
	                                   tests, NULL, NULL);
}
