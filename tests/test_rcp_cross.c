/*
 * tests/test_rcp_cross.c — first sends that cross (rcp/chan.c, CHANNELS;
 * rcp/handshake.c, HANDSHAKE).  Two accepting udp endpoints on loopback
 * each open a channel to the other and send one message at once.  When B
 * has already answered A's first frame with a cookie challenge (naming its
 * endpoint epoch) before B opens its own channel, B's channel must send
 * under that same epoch: with a second one, A took B's first frame as a
 * restart claim, and the handshake that followed reset a channel and
 * failed what was pending on it; A's message, sent by copy and already
 * complete for its sender, was lost without a word (found by the
 * relinked PVM glue's cluster test).  Counted: messages delivered with the
 * right bytes, requests failed, channel restarts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <rcp/rcp.h>

#include "testutil.h"

struct side {
	rcp_ep *ep;
	rcp_chan *ch;
	rcp_req *s, *r;
	int sent, got, serr, rerr;
	char buf[16];
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void open_side(struct side *x)
{
	struct rcp_ep_config cfg = {.flags = RCP_EP_ACCEPT};
	memset(x, 0, sizeof *x);
	assert_int_equal(rcp_ep_open("udp:", &cfg, &x->ep), 0);
}

static void connect_to(struct side *x, const struct side *to)
{
	char addr[128];
	assert_int_equal(rcp_ep_addr(to->ep, addr, sizeof addr), 0);
	assert_int_equal(rcp_connect(x->ep, addr, &x->ch), 0);
}

static void poll_side(struct side *x)
{
	struct rcp_status st;
	int rc;
	if (!x->sent && (rc = rcp_test(x->s, &st)) != RCP_EAGAIN) {
		x->sent = 1;
		x->serr = rc;
	}
	if (!x->got && (rc = rcp_test(x->r, &st)) != RCP_EAGAIN) {
		x->got = 1;
		x->rerr = rc;
	}
}

/* MODE 0: both open, then both send.  MODE 1: A sends first and B's
 * endpoint answers that frame (a cookie challenge) before B opens its
 * channel and sends.  MODE 2: as 1, and A hears the challenge too before
 * B opens. */
static void cross(int mode)
{
	struct side a, b;
	uint64_t t0;

	open_side(&a);
	open_side(&b);
	connect_to(&a, &b);
	if (mode >= 1) {
		assert_int_equal(rcp_isend(a.ch, 1, "from-a", 7, &a.s), 0);
		/* B answers A's first frame; A hears the answer (mode 2).
		 * Loopback delivers at once, but a frame may still be on its
		 * way: progress until the challenge was sent (counted). */
		t0 = now_ns();
		for (;;) {
			struct rcp_ep_stats st;
			rcp_progress(b.ep);
			rcp_ep_get_stats(b.ep, &st);
			if (st.challenges_sent > 0)
				break;
			assert_true(now_ns() - t0 < 5000000000ull);
		}
		if (mode == 2)
			rcp_progress(a.ep);
	}
	connect_to(&b, &a);
	if (mode == 0)
		assert_int_equal(rcp_isend(a.ch, 1, "from-a", 7, &a.s), 0);
	assert_int_equal(rcp_isend(b.ch, 1, "from-b", 7, &b.s), 0);
	assert_int_equal(rcp_irecv(a.ep, a.ch, 1, a.buf, sizeof a.buf, &a.r), 0);
	assert_int_equal(rcp_irecv(b.ep, b.ch, 1, b.buf, sizeof b.buf, &b.r), 0);
	t0 = now_ns();
	while (!(a.sent && a.got && b.sent && b.got) && now_ns() - t0 < 5000000000ull) {
		rcp_progress(a.ep);
		rcp_progress(b.ep);
		poll_side(&a);
		poll_side(&b);
	}
	if (!(a.got && b.got) || a.rerr || b.rerr || a.serr || b.serr)
		fail_msg("mode %d: A got %d (%d), B got %d (%d), sends %d/%d (%d/%d); restarts "
		         "A %u B %u",
		         mode, a.got, a.rerr, b.got, b.rerr, a.sent, b.sent, a.serr, b.serr,
		         rcp_chan_restarts(a.ch), rcp_chan_restarts(b.ch));
	assert_string_equal(a.buf, "from-b");
	assert_string_equal(b.buf, "from-a");
	assert_int_equal(rcp_chan_restarts(a.ch), 0);
	assert_int_equal(rcp_chan_restarts(b.ch), 0);
	rcp_ep_close(a.ep);
	rcp_ep_close(b.ep);
}

static void t_cross_at_once(void **state)
{
	(void)state;
	cross(0);
}

static void t_cross_after_challenge(void **state)
{
	(void)state;
	cross(1);
}

static void t_cross_challenge_heard(void **state)
{
	(void)state;
	cross(2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_cross_at_once),
	    cmocka_unit_test(t_cross_after_challenge),
	    cmocka_unit_test(t_cross_challenge_heard),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
