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
 * relinked PVM glue's cluster test).  The same orders again after both
 * ended a conversation with a third endpoint (the epoch is chosen per
 * peer: rcp/chan.c, PER PEER), a reopen to the same peer (a new epoch,
 * also when another peer took the freed nic index), and a peer kept for
 * its record challenged when it speaks again.  Counted: messages
 * delivered with the right bytes, requests failed, channel restarts,
 * restart claims and challenges.
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

/* X holds a conversation with C (a synchronous send C's RCP holds) and
 * closes it: a conversation of X's endpoint, with another peer, ended.
 * Before the epoch choice was per peer (rcp/chan.c, PER PEER), every
 * channel X opened after that sent a conversation epoch, and first sends
 * crossing with a new peer restarted a channel as before (a PVM master
 * whose earlier workers exited, meeting a new one). */
static void talk_and_close(struct side *x, struct side *c)
{
	rcp_req *s;
	struct rcp_status st;
	int rc, tries = 0;
	connect_to(x, c);
	assert_int_equal(rcp_issend(x->ch, 9, "before", 7, &s), 0);
	while ((rc = rcp_test(s, &st)) == RCP_EAGAIN) {
		rcp_progress(x->ep);
		rcp_progress(c->ep);
		assert_true(++tries < 10000000);
	}
	assert_int_equal(rc, 0);
	rcp_chan_close(x->ch);
	x->ch = NULL;
}

/* B sends "again" on its channel and A takes it on any channel
 * (progressing both, 5 s at most): it must arrive intact. */
static void again_b_to_a(struct side *b, struct side *a)
{
	uint64_t t0;

	assert_int_equal(rcp_isend(b->ch, 1, "again", 6, &b->s), 0);
	assert_int_equal(rcp_irecv(a->ep, NULL, 1, a->buf, sizeof a->buf, &a->r), 0);
	t0 = now_ns();
	while (!a->got && now_ns() - t0 < 5000000000ull) {
		rcp_progress(a->ep);
		rcp_progress(b->ep);
		poll_side(a);
	}
	assert_true(a->got);
	assert_int_equal(a->rerr, 0);
	assert_string_equal(a->buf, "again");
}

/* MODE 0: both open, then both send.  MODE 1: A sends first and B's
 * endpoint answers that frame (a cookie challenge) before B opens its
 * channel and sends.  MODE 2: as 1, and A hears the challenge too before
 * B opens. */
static void cross(int mode, int prior)
{
	struct side a, b, c;
	uint64_t t0, chal0 = 0;

	open_side(&a);
	open_side(&b);
	if (prior) { /* both ended a conversation with a third endpoint */
		open_side(&c);
		talk_and_close(&a, &c);
		talk_and_close(&b, &c);
	}
	connect_to(&a, &b);
	if (mode >= 1) {
		assert_int_equal(rcp_isend(a.ch, 1, "from-a", 7, &a.s), 0);
		/* B answers A's first frame; A hears the answer (mode 2).
		 * Loopback delivers at once, but a frame may still be on its
		 * way: progress until the challenge was sent (counted). */
		struct rcp_ep_stats st;
		rcp_ep_get_stats(b.ep, &st);
		chal0 = st.challenges_sent;
		t0 = now_ns();
		for (;;) {
			rcp_progress(b.ep);
			rcp_ep_get_stats(b.ep, &st);
			if (st.challenges_sent > chal0)
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
		fail_msg(
		    "mode %d prior %d: A got %d (%d), B got %d (%d), sends %d/%d (%d/%d); restarts "
		    "A %u B %u",
		    mode, prior, a.got, a.rerr, b.got, b.rerr, a.sent, b.sent, a.serr, b.serr,
		    rcp_chan_restarts(a.ch), rcp_chan_restarts(b.ch));
	assert_string_equal(a.buf, "from-b");
	assert_string_equal(b.buf, "from-a");
	assert_int_equal(rcp_chan_restarts(a.ch), 0);
	assert_int_equal(rcp_chan_restarts(b.ch), 0);
	rcp_ep_close(a.ep);
	rcp_ep_close(b.ep);
	if (prior)
		rcp_ep_close(c.ep);
}

/* One case of the table in main(): cross() in MODE after PRIOR. */
struct cross_case {
	int mode, prior;
};

static void t_cross(void **state)
{
	const struct cross_case *c = *state;
	cross(c->mode, c->prior);
}

/* A cmocka case named CASE_ running cross(MODE, PRIOR). */
/* clang-format off */
#define CROSS_CASE(case_, mode, prior) \
	{.name = #case_, .test_func = t_cross, .initial_state = &(struct cross_case){mode, prior}}
/* clang-format on */

/* A genuine reopen to the SAME peer after close still takes a new
 * conversation epoch: B's first channel to A, closed, then opened again,
 * names an epoch A has not heard from B (A counts a restart claim: its
 * channel still holds B's first conversation) and the message on the new
 * conversation arrives intact. */
static void t_reopen_same_peer(void **state)
{
	struct side a, b, c;
	struct rcp_ep_stats s0, s1;
	rcp_chan *bc;
	(void)state;
	open_side(&a);
	open_side(&b);
	open_side(&c);
	talk_and_close(&b, &a);
	rcp_ep_get_stats(a.ep, &s0);
	/* Another peer in between: had B's nic forgotten A, C would take
	 * A's peer index (udp reuses the last freed), and A's record with it. */
	connect_to(&b, &c);
	bc = b.ch;
	connect_to(&b, &a);
	assert_ptr_not_equal(bc, b.ch);
	again_b_to_a(&b, &a);
	rcp_ep_get_stats(a.ep, &s1);
	if (s1.restart_claims <= s0.restart_claims)
		fail_msg("B's second conversation named the first one's epoch: A saw %llu "
		         "restart claims before, %llu after",
		         (unsigned long long)s0.restart_claims,
		         (unsigned long long)s1.restart_claims);
	rcp_ep_close(a.ep);
	rcp_ep_close(b.ep);
	rcp_ep_close(c.ep);
}

/* A peer kept for its record (its conversation with us ended, so our nic
 * still knows its address) is still an unknown sender when it speaks
 * again: a cookie challenge first, as for any address without a channel,
 * or a sender forging that address would get a channel at once. */
static void t_kept_peer_challenged(void **state)
{
	struct side a, b;
	struct rcp_ep_stats s0, s1;
	struct rcp_status st;
	rcp_req *r;
	char buf[16];
	int rc, tries = 0;
	(void)state;
	open_side(&a);
	open_side(&b);
	assert_int_equal(rcp_irecv(a.ep, NULL, 9, buf, sizeof buf, &r), 0);
	talk_and_close(&b, &a);
	while ((rc = rcp_test(r, &st)) == RCP_EAGAIN) {
		rcp_progress(a.ep);
		assert_true(++tries < 10000000);
	}
	assert_int_equal(rc, 0);
	assert_non_null(st.chan);
	rcp_chan_close(st.chan); /* A's conversation with B ended too */
	rcp_ep_get_stats(a.ep, &s0);
	connect_to(&b, &a);
	again_b_to_a(&b, &a);
	rcp_ep_get_stats(a.ep, &s1);
	if (s1.challenges_sent <= s0.challenges_sent)
		fail_msg("A took B's new first frame without a cookie challenge");
	rcp_ep_close(a.ep);
	rcp_ep_close(b.ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    CROSS_CASE(t_cross_at_once, 0, 0),
	    CROSS_CASE(t_cross_after_challenge, 1, 0),
	    CROSS_CASE(t_cross_challenge_heard, 2, 0),
	    /* The same three orders after A and B each ended a conversation
	     * with a third endpoint C: the epoch choice is per peer
	     * (rcp/chan.c, PER PEER). */
	    CROSS_CASE(t_cross_at_once_after_other, 0, 1),
	    CROSS_CASE(t_cross_after_challenge_after_other, 1, 1),
	    CROSS_CASE(t_cross_challenge_heard_after_other, 2, 1),
	    cmocka_unit_test(t_reopen_same_peer),
	    cmocka_unit_test(t_kept_peer_challenged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
