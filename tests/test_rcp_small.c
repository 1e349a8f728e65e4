/*
 * tests/test_rcp_small.c — the small-message path (rcp/isend.c, SMALL
 * SENDS): a send of one inline frame with nothing ahead of it is done when
 * rcpc_isend returns, with its own status, and needs no request when
 * detached; but never past what the general path would refuse (no credit
 * left, frames queued ahead), and never out of order; the express input
 * (rcp/express.c) takes the plain frame and leaves every other to the
 * general path (t_express).  Run on the simulator (tests/sim.c):
 * deterministic, seeded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rcp/chan.h" /* t_plain_word reads the express word (PLAIN) */
#include "rcp/core.h"
#include "rcp/wire.h"
#include "sim.h"
#include "testutil.h"

#define SEC 1000000000ull

static struct sim *pair(uint64_t seed, double drop)
{
	struct sim_opts o = {0};
	struct sim *s;
	o.n = 2;
	o.seed = seed;
	o.link.drop = drop;
	o.link.latency = 5000;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 64;
	o.params.crc = 1;
	s = sim_new(&o);
	sim_chan(s, 0, 1);
	sim_chan(s, 1, 0);
	return s;
}

static int never(void *arg)
{
	(void)arg;
	return 0;
}

/* A small send is done at once, each with its own status (not the last
 * one's); past the receiver's credits (nothing consumed) the next send
 * waits, as the general path makes it, and goes once receives are posted;
 * all arrive in order. */
static void t_small_done_at_once(void **state)
{
	uint64_t seed = test_seed(1900);
	struct sim *s = pair(seed, 0);
	rcp_chan *ab = sim_chan(s, 0, 1), *ba = sim_chan(s, 1, 0);
	enum { N = 40 };
	rcp_req *r[N];
	unsigned char out[N][8], in[N][8];
	struct rcp_status st;
	int at_once = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		memset(out[i], i + 1, sizeof out[i]);
		assert_int_equal(rcpc_isend(ab, 100 + (uint64_t)i, out[i], (size_t)(i % 8) + 1,
		                            sim_now(s), &r[i]),
		                 0);
	}
	for (int i = 0; i < N; i++) {
		if (!rcpc_req_done(r[i], &st))
			continue; /* still out: finished below */
		if (st.error || st.tag != 100 + (uint64_t)i || st.len != (size_t)(i % 8) + 1 ||
		    st.chan != ab)
			fail_msg("send %d: error %d tag %llu len %zu (seed %#llx)", i, st.error,
			         (unsigned long long)st.tag, st.len, (unsigned long long)seed);
		if (at_once != i)
			fail_msg("send %d done at once after send %d was not (seed %#llx)", i,
			         at_once, (unsigned long long)seed);
		at_once++;
		r[i] = NULL;
	}
	/* Before it hears the receiver a sender assumes 8 credits (msg.c,
	 * CREDITS): no more went at once, and all of those did. */
	if (at_once != 8)
		fail_msg("%d sends done at once, 8 credits (seed %#llx)", at_once,
		         (unsigned long long)seed);
	for (int i = 0; i < N; i++) {
		struct sim_one x = {0};
		memset(in[i], 0, sizeof in[i]);
		assert_int_equal(rcpc_irecv(sim_core(s, 1), ba, RCP_ANY_TAG, in[i], sizeof in[i],
		                            sim_now(s), &x.r),
		                 0);
		assert_int_equal(sim_run(s, sim_one_done, &x, SEC), 0);
		if (x.st.tag != 100 + (uint64_t)i || x.st.len != (size_t)(i % 8) + 1)
			fail_msg("receive %d got tag %llu (seed %#llx)", i,
			         (unsigned long long)x.st.tag, (unsigned long long)seed);
		assert_memory_equal(in[i], out[i], (size_t)(i % 8) + 1);
	}
	for (int i = 0; i < N; i++) {
		struct sim_one x = {r[i], {0}, 0};
		if (!r[i])
			continue;
		assert_int_equal(sim_run(s, sim_one_done, &x, SEC), 0);
		assert_int_equal(x.st.error, 0);
		assert_int_equal(x.st.tag, 100 + (uint64_t)i);
	}
	sim_free(s);
}

static void drop_cb(rcp_req *r, const struct rcp_status *st, void *user)
{
	(void)r;
	(void)st;
	(void)user;
}

/* Releases the requests on CORE's completion list; returns how many. */
static int take_cbq(rcpc_core *core)
{
	int n = 0;
	for (rcp_req *r = rcpc_cb_take(core), *next; r; r = next) {
		rcp_req_cb cb;
		void *user;
		struct rcp_status st;
		next = rcpc_req_cb_get(r, &cb, &user, &st);
		assert_int_equal(st.error, 0);
		rcpc_req_release(r);
		n++;
	}
	return n;
}

/* A detached small send leaves no request behind; one that cannot go at
 * once (no credit) is kept, copied, and arrives after the earlier ones,
 * under loss. */
static void t_small_detached(void **state)
{
	uint64_t seed = test_seed(1910);
	struct sim *s = pair(seed, 0.05);
	rcp_chan *ab = sim_chan(s, 0, 1), *ba = sim_chan(s, 1, 0);
	int none = 0;

	(void)state;
	for (int i = 0; i < 24; i++) {
		unsigned char b[4] = {(unsigned char)i, 1, 2, 3};
		rcp_req *r = (rcp_req *)(uintptr_t)1;
		assert_int_equal(rcpc_isend_detached(ab, 7, b, sizeof b, sim_now(s), drop_cb, &r),
		                 0);
		assert_null(r);
		none += !rcpc_core_busy(sim_core(s, 0)) ? 0 : 1;
		memset(b, 0xee, sizeof b); /* the caller's buffer is free again */
	}
	assert_int_equal(none, 24);
	/* Nothing finished with a callback yet: the 8 that went (the credits
	 * a sender assumes) needed no request, the 16 past them wait in the
	 * start queue. */
	assert_int_equal(take_cbq(sim_core(s, 0)), 0);
	for (int i = 0; i < 24; i++) {
		unsigned char in[4] = {0};
		struct sim_one x = {0};
		assert_int_equal(rcpc_irecv(sim_core(s, 1), ba, 7, in, sizeof in, sim_now(s), &x.r),
		                 0);
		assert_int_equal(sim_run(s, sim_one_done, &x, 10 * SEC), 0);
		assert_int_equal(x.st.error, 0);
		if (in[0] != i || in[1] != 1)
			fail_msg("message %d arrived as %d (seed %#llx)", i, in[0],
			         (unsigned long long)seed);
	}
	sim_run(s, never, NULL, SEC / 10);
	assert_int_equal(take_cbq(sim_core(s, 0)), 16);
	sim_free(s);
}

/* Delivers the next N messages on node 1 (any tag), checks nothing. */
static void drain(struct sim *s, int n, uint64_t seed)
{
	for (int i = 0; i < n; i++) {
		unsigned char in[8];
		struct sim_one x = {0};
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG, in,
		                            sizeof in, sim_now(s), &x.r),
		                 0);
		if (sim_run(s, sim_one_done, &x, SEC) || x.st.error)
			fail_msg("message %d of %d not delivered (seed %#llx)", i, n,
			         (unsigned long long)seed);
	}
}

/* SENT REQUESTS (rcp/isend.c): the requests of small sends that finished
 * at once are kept on their own list and taken again with only their
 * channel, tag and length written.  Over rounds of reuse each still has
 * its own status; one that had a callback given after it finished runs
 * it once and comes back without it; a receive's request freed between
 * rounds never becomes a send's (its status would name no channel). */
static void t_sent_requests(void **state)
{
	uint64_t seed = test_seed(1915);
	struct sim *s = pair(seed, 0);
	rcp_chan *ab = sim_chan(s, 0, 1);
	enum { N = 4, ROUNDS = 6 };
	unsigned char out[N][8];
	rcp_req *r[N], *first[N];
	struct rcp_status st;

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < N; i++) {
			size_t len = (size_t)((i + round) % 8) + 1;
			memset(out[i], round * N + i, sizeof out[i]);
			assert_int_equal(rcpc_isend(ab, 1000 + (uint64_t)(round * N + i), out[i],
			                            len, sim_now(s), &r[i]),
			                 0);
			for (int j = 0; j < i; j++)
				if (r[j] == r[i])
					fail_msg("round %d: sends %d and %d share a request (seed "
					         "%#llx)",
					         round, j, i, (unsigned long long)seed);
		}
		if (round == 0)
			memcpy(first, r, sizeof first);
		/* A callback given after the send finished: queued once
		 * (take_cbq releases it), and the request comes back without it. */
		rcpc_req_set_cb(r[round % N], drop_cb, NULL);
		assert_int_equal(rcpc_cancel(r[round % N], sim_now(s)), 0); /* done: nothing */
		for (int i = 0; i < N; i++) {
			size_t len = (size_t)((i + round) % 8) + 1;
			if (i == round % N)
				continue;
			memset(&st, 0xa5, sizeof st);
			if (rcpc_req_done(r[i], &st) != 1)
				fail_msg("round %d send %d: not done at once (seed %#llx)", round,
				         i, (unsigned long long)seed);
			if (st.error || st.chan != ab ||
			    st.tag != 1000 + (uint64_t)(round * N + i) || st.len != len)
				fail_msg("round %d send %d: error %d chan %p tag %llu len %zu "
				         "(seed %#llx)",
				         round, i, st.error, (void *)st.chan,
				         (unsigned long long)st.tag, st.len,
				         (unsigned long long)seed);
		}
		assert_int_equal(take_cbq(sim_core(s, 0)), 1);
		/* A receive on the sending side, canceled and freed: its request
		 * is the general pool's, never taken for a send. */
		{
			unsigned char in[8];
			rcp_req *q;
			assert_int_equal(
			    rcpc_irecv(sim_core(s, 0), ab, 5, in, sizeof in, sim_now(s), &q), 0);
			assert_int_equal(rcpc_cancel(q, sim_now(s)), 0);
			assert_int_equal(rcpc_req_done(q, &st), 1);
			assert_int_equal(st.error, RCP_ECANCELED);
		}
		/* The receiver takes them: credits back for the next round. */
		drain(s, N, seed);
		sim_run(s, never, NULL, SEC / 100);
	}
	/* The first round's requests served every round after it. */
	for (int i = 0; i < N; i++) {
		int seen = 0;
		for (int j = 0; j < N; j++)
			seen += first[j] == r[i];
		if (!seen)
			fail_msg("last round's send %d: a request the first round never had "
			         "(seed %#llx)",
			         i, (unsigned long long)seed);
	}
	sim_free(s);
}

/* Posts a receive on node 1 (CH NULL: any channel). */
static rcp_req *post(struct sim *s, rcp_chan *ch, uint64_t tag, unsigned char *buf)
{
	rcp_req *r = NULL;
	assert_int_equal(rcpc_irecv(sim_core(s, 1), ch, tag, buf, 8, sim_now(s), &r), 0);
	return r;
}

static void send_one(struct sim *s, uint64_t tag, unsigned char v)
{
	unsigned char b[8];
	rcp_req *r;
	memset(b, v, sizeof b);
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), tag, b, sizeof b, sim_now(s), &r), 0);
	assert_int_equal(rcpc_req_done(r, NULL), 1); /* small: done at once */
}

/* Runs until R is done; returns the first byte it received. */
static int got(struct sim *s, rcp_req *r, const unsigned char *buf, uint64_t seed)
{
	struct sim_one x = {r, {0}, 0};
	if (sim_run(s, sim_one_done, &x, SEC))
		fail_msg("a receive never completed (seed %#llx)", (unsigned long long)seed);
	assert_int_equal(x.st.error, 0);
	return buf[0];
}

/* The direct receive (rcp/chan.h, DIRECT) keeps matching order: it takes
 * a message only if it is the first posted receive that could; a receive
 * for any channel posted before it, or its tag not matching, and the
 * message goes where the lists say.  Canceled, it takes nothing; the
 * channel failing completes it once. */
static void t_direct_order(void **state)
{
	uint64_t seed = test_seed(1920);
	struct sim *s = pair(seed, 0);
	rcp_chan *ba = sim_chan(s, 1, 0);
	unsigned char b1[8], b2[8], b3[8], b4[8];
	rcp_req *r1, *r2, *r3, *r4;

	(void)state;
	/* r1 direct (tag 1), r2 any channel any tag, r3 on ba tag 2: a
	 * tag-2 message goes to r2 (posted before r3), tag 1 to r1. */
	r1 = post(s, ba, 1, b1);
	r2 = post(s, NULL, RCP_ANY_TAG, b2);
	r3 = post(s, ba, 2, b3);
	send_one(s, 2, 0x22);
	assert_int_equal(got(s, r2, b2, seed), 0x22);
	send_one(s, 1, 0x11);
	assert_int_equal(got(s, r1, b1, seed), 0x11);
	send_one(s, 2, 0x33);
	assert_int_equal(got(s, r3, b3, seed), 0x33);
	/* A receive for any channel first: a later one on ba is not direct,
	 * and the message goes to the earlier. */
	r2 = post(s, NULL, RCP_ANY_TAG, b2);
	r4 = post(s, ba, RCP_ANY_TAG, b4);
	send_one(s, 5, 0x44);
	assert_int_equal(got(s, r2, b2, seed), 0x44);
	send_one(s, 5, 0x55);
	assert_int_equal(got(s, r4, b4, seed), 0x55);
	/* A canceled direct receive takes nothing: the message waits. */
	r1 = post(s, ba, 7, b1);
	assert_int_equal(rcpc_cancel(r1, sim_now(s)), 0);
	assert_int_equal(rcpc_req_done(r1, NULL), 1);
	send_one(s, 7, 0x66);
	sim_run(s, never, NULL, SEC / 100);
	assert_int_equal(rcpc_probe(sim_core(s, 1), ba, 7, NULL), 1);
	r1 = post(s, ba, 7, b1);
	assert_int_equal(got(s, r1, b1, seed), 0x66);
	/* The peer dies: the direct receive fails, once. */
	r1 = post(s, ba, 8, b1);
	sim_kill(s, 0);
	{
		struct sim_one x = {r1, {0}, 0};
		assert_int_equal(sim_run(s, sim_one_done, &x, 30 * SEC), 0);
		assert_int_equal(x.st.error, RCP_EPEER);
	}
	sim_free(s);
}

static rcp_req *post_next(struct sim *s, uint64_t tag, unsigned char *buf, int want)
{
	rcp_req *r = NULL;
	assert_int_equal(
	    rcpc_irecv_next(sim_core(s, 1), sim_chan(s, 1, 0), tag, buf, 8, sim_now(s), &r), want);
	return r;
}

static rcp_req *post_next_len(struct sim *s, uint64_t tag, unsigned char *buf, size_t len)
{
	rcp_req *r = NULL;
	assert_int_equal(
	    rcpc_irecv_next(sim_core(s, 1), sim_chan(s, 1, 0), tag, buf, len, sim_now(s), &r), 0);
	return r;
}

/* Runs until R is done; returns its status. */
static int ended(struct sim *s, rcp_req *r, uint64_t seed)
{
	struct sim_one x = {r, {0}, 0};
	if (sim_run(s, sim_one_done, &x, SEC))
		fail_msg("a receive never completed (seed %#llx)", (unsigned long long)seed);
	return x.st.error;
}

/* The NEXT receive (rcp/core.c, NEXT RECEIVES) takes the channel's next
 * message only if it has its tag: another tag first ends it with
 * RCP_ENOENT and that message waits, unexpected, for the caller to look
 * at; held messages decide at once; receives posted before it (for any
 * channel) still take theirs; one at a time; under loss and reordering
 * the order is the sender's. */
/* A NEXT receive larger than a frame (session 20: refused before, so
 * relinked PVM's precv into a big buffer never posted ahead) is posted,
 * promised to the sender by no READY (frames sent by its side: none),
 * and takes whole a message of its tag larger than a frame, then a small
 * one, neither held unexpected. */
static void t_next_receive_big(void **state)
{
	uint64_t seed = test_seed(1931);
	struct sim *s = pair(seed, 0);
	rcpc_core *c1 = sim_core(s, 1);
	rcp_chan *ba = sim_chan(s, 1, 0);
	enum { CAP = 64 << 10, LEN = 10000 };
	unsigned char *in = calloc(1, CAP), *out = malloc(LEN);
	struct rcp_ep_stats st0, st;
	struct sim_one x = {0};
	rcp_req *r, *w;

	(void)state;
	assert_non_null(in);
	assert_non_null(out);
	for (int i = 0; i < LEN; i++)
		out[i] = (unsigned char)(i * 7 + 1);
	sim_run(s, never, NULL, SEC / 100); /* the channels settle */
	rcpc_core_stats(c1, &st0);
	assert_int_equal(rcpc_irecv_next(c1, ba, 6, in, CAP, sim_now(s), &r), 0);
	sim_run(s, never, NULL, SEC / 100);
	rcpc_core_stats(c1, &st);
	if (st.frames_sent != st0.frames_sent)
		fail_msg("%llu frames sent for a NEXT receive: promised by READY (seed %#llx)",
		         (unsigned long long)(st.frames_sent - st0.frames_sent),
		         (unsigned long long)seed);
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 6, out, LEN, sim_now(s), &w), 0);
	x.r = r;
	if (sim_run(s, sim_one_done, &x, SEC))
		fail_msg("the NEXT receive never completed (seed %#llx)", (unsigned long long)seed);
	assert_int_equal(x.st.error, 0);
	assert_int_equal(x.st.len, LEN);
	assert_memory_equal(in, out, LEN);
	x = (struct sim_one){w, {0}, 0};
	if (sim_run(s, sim_one_done, &x, SEC) || x.st.error)
		fail_msg("the send never completed (seed %#llx)", (unsigned long long)seed);
	r = post_next_len(s, 6, in, CAP);
	send_one(s, 6, 0x61);
	assert_int_equal(got(s, r, in, seed), 0x61);
	rcpc_core_stats(c1, &st);
	assert_int_equal(st.unexpected_msgs, st0.unexpected_msgs);
	take_cbq(sim_core(s, 0));
	sim_free(s);
	free(in);
	free(out);
}

static void t_next_receive(void **state)
{
	uint64_t seed = test_seed(1930);
	struct sim *s = pair(seed, 0);
	rcpc_core *c1 = sim_core(s, 1);
	rcp_chan *ba = sim_chan(s, 1, 0);
	unsigned char b1[8], b2[8], b3[8];
	struct rcp_ep_stats st;
	struct rcp_status ps = {0};
	rcp_req *r, *w, *q;

	(void)state;
	/* Posted ahead, the tag matches: taken, never unexpected. */
	r = post_next(s, 3, b1, 0);
	assert_int_equal(rcpc_irecv_next(c1, ba, 4, b2, 8, sim_now(s), &q), RCP_EBUSY);
	send_one(s, 3, 0x31);
	assert_int_equal(got(s, r, b1, seed), 0x31);
	rcpc_core_stats(c1, &st);
	assert_int_equal(st.unexpected_msgs, 0);
	/* Another tag first: RCP_ENOENT, both messages wait. */
	r = post_next(s, 3, b1, 0);
	send_one(s, 4, 0x41);
	send_one(s, 3, 0x32);
	assert_int_equal(ended(s, r, seed), RCP_ENOENT);
	sim_run(s, never, NULL, SEC / 100);
	assert_int_equal(rcpc_probe(c1, ba, RCP_ANY_TAG, &ps), 1);
	assert_int_equal(ps.tag, 4);
	/* Held messages decide at once: the first has tag 4. */
	post_next(s, 3, b1, RCP_ENOENT);
	r = post(s, ba, 4, b2);
	assert_int_equal(got(s, r, b2, seed), 0x41);
	r = post_next(s, 3, b1, 0); /* the held tag-3 message: taken now */
	assert_int_equal(got(s, r, b1, seed), 0x32);
	rcpc_core_stats(c1, &st);
	assert_int_equal(st.unexpected_msgs, 2);
	/* A receive posted before it takes its own messages: no miss. */
	w = post(s, NULL, 9, b3);
	r = post_next(s, 3, b1, 0);
	send_one(s, 9, 0x91);
	send_one(s, 3, 0x33);
	assert_int_equal(got(s, w, b3, seed), 0x91);
	assert_int_equal(got(s, r, b1, seed), 0x33);
	/* Canceled, it is gone: another may be posted, and takes. */
	r = post_next(s, 3, b1, 0);
	assert_int_equal(rcpc_cancel(r, sim_now(s)), 0);
	assert_int_equal(rcpc_req_done(r, NULL), 1);
	r = post_next(s, 3, b1, 0);
	send_one(s, 3, 0x34);
	assert_int_equal(got(s, r, b1, seed), 0x34);
	rcpc_core_stats(c1, &st);
	assert_int_equal(st.unexpected_msgs, 2);
	sim_free(s);

	/* Loss and reordering: a tag-5 message sent before the tag-3 one
	 * always ends the receive, whatever order the frames come in. */
	s = pair(seed + 1, 0.3);
	for (int i = 0; i < 20; i++) {
		unsigned char m5[8], m3[8];
		memset(m5, i, sizeof m5);
		memset(m3, 0x80 + i, sizeof m3);
		r = post_next(s, 3, b1, 0);
		/* (detached: under loss a send may wait for its window) */
		assert_int_equal(
		    rcpc_isend_detached(sim_chan(s, 0, 1), 5, m5, 8, sim_now(s), drop_cb, &q), 0);
		assert_null(q);
		assert_int_equal(
		    rcpc_isend_detached(sim_chan(s, 0, 1), 3, m3, 8, sim_now(s), drop_cb, &q), 0);
		assert_null(q);
		if (ended(s, r, seed) != RCP_ENOENT)
			fail_msg("round %d: the later message was taken first (seed %#llx)", i,
			         (unsigned long long)seed);
		r = post(s, sim_chan(s, 1, 0), 5, b2);
		assert_int_equal(got(s, r, b2, seed), i);
		r = post_next(s, 3, b1, 0);
		assert_int_equal(got(s, r, b1, seed), 0x80 + i);
	}
	take_cbq(sim_core(s, 0));
	sim_free(s);
}

/* ---- the express input and slot (rcp/express.c, EXPRESS) ---- */

static uint64_t express_in(struct sim *s, int node)
{
	struct rcp_ep_stats st;
	rcpc_core_stats(sim_core(s, node), &st);
	return st.express_in;
}

/* Holds node 0's next data frame back (delay 1 ms) once: the frame sent
 * after it arrives first (sim_set_fate). */
static int64_t hold_one(void *arg, int from, int to, const void *frame, size_t len)
{
	int *left = arg;
	(void)to;
	(void)frame;
	if (from == 0 && len > RCPW_CHLEN - 1 && *left > 0) {
		--*left;
		return 1000000;
	}
	return 0;
}

/* The last frame node 0 sent to node 1, as delivered (sim_set_tap). */
struct last_frame {
	unsigned char b[RCPW_HLEN + 64];
	size_t len;
};

static void keep_last(void *arg, int from, int to, const void *frame, size_t len)
{
	struct last_frame *l = arg;
	(void)to;
	if (from == 0 && len <= sizeof l->b) {
		memcpy(l->b, frame, len);
		l->len = len;
	}
}

/* Without CRC (a nic that checks frames), the plain exchange goes
 * express both ways: every message into a posted direct receive is taken
 * in one pass, under the compact header the express slot writes (48 +
 * 8 bytes).  What it declines goes the general way and keeps order: a
 * frame past a hole (the one before it held back), the frame that fills
 * the hole (frames held past it), a message with no receive posted;
 * receives for any channel are matched in posting order.
 * Hostile copies of a real frame (another session, another epoch, an
 * unknown flag, an ack of frames never sent) are refused and
 * counted as the general path counts them, and take no receive. */
static void t_express(void **state)
{
	uint64_t seed = test_seed(1940);
	struct sim_opts o = {0};
	struct sim *s;
	rcp_chan *ba;
	unsigned char b1[8], b2[8];
	struct last_frame last = {{0}, 0};
	struct rcp_ep_stats st0, st1;
	rcp_req *r1, *r2;
	uint64_t e0;
	int held = 0;

	(void)state;
	o.n = 2;
	o.seed = seed;
	o.link.latency = 5000;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 64;
	o.params.crc = 0;
	s = sim_new(&o);
	sim_chan(s, 0, 1);
	ba = sim_chan(s, 1, 0);
	sim_set_tap(s, keep_last, &last);
	/* The first frames carry full headers (the window); then express. */
	for (int i = 0; i < 20; i++) {
		r1 = post(s, ba, 1, b1);
		send_one(s, 1, (unsigned char)i);
		assert_int_equal(got(s, r1, b1, seed), i);
	}
	e0 = express_in(s, 1);
	if (e0 < 15)
		fail_msg("express took %llu of 20 plain frames (seed %#llx)",
		         (unsigned long long)e0, (unsigned long long)seed);
	assert_int_equal(last.len, RCPW_CHLEN + 8);
	/* Out of order: the second frame arrives first, then the first. */
	sim_set_fate(s, hold_one, &held);
	held = 1;
	r1 = post(s, ba, 1, b1);
	r2 = post(s, ba, 2, b2);
	send_one(s, 1, 0x51);
	send_one(s, 2, 0x52);
	assert_int_equal(got(s, r1, b1, seed), 0x51);
	assert_int_equal(got(s, r2, b2, seed), 0x52);
	assert_int_equal(express_in(s, 1), e0);
	sim_set_fate(s, NULL, NULL);
	/* No receive posted: unexpected, then taken by a receive. */
	send_one(s, 3, 0x53);
	sim_run(s, never, NULL, SEC / 100);
	assert_int_equal(express_in(s, 1), e0);
	r1 = post(s, ba, 3, b1);
	assert_int_equal(got(s, r1, b1, seed), 0x53);
	/* A plain one again: express. */
	r1 = post(s, ba, 4, b1);
	send_one(s, 4, 0x54);
	assert_int_equal(got(s, r1, b1, seed), 0x54);
	assert_int_equal(express_in(s, 1), e0 + 1);
	/* Into a shorter receive: express too, truncated (rcpi_complete_recv:
	 * RCP_ETRUNC, the whole length in the status, the bytes it took in
	 * the stats). */
	{
		struct sim_one x = {0};
		memset(b1, 0, sizeof b1);
		rcpc_core_stats(sim_core(s, 1), &st0);
		assert_int_equal(rcpc_irecv(sim_core(s, 1), ba, 5, b1, 4, sim_now(s), &x.r), 0);
		send_one(s, 5, 0x55);
		assert_int_equal(sim_run(s, sim_one_done, &x, SEC), 0);
		rcpc_core_stats(sim_core(s, 1), &st1);
		if (x.st.error != RCP_ETRUNC || x.st.len != 8 || b1[3] != 0x55 || b1[4] ||
		    st1.msgs_recv != st0.msgs_recv + 1 || st1.bytes_recv != st0.bytes_recv + 4)
			fail_msg("truncated: error %d len %zu bytes %d %d, msgs +%llu bytes +%llu "
			         "(seed %#llx)",
			         x.st.error, x.st.len, b1[3], b1[4],
			         (unsigned long long)(st1.msgs_recv - st0.msgs_recv),
			         (unsigned long long)(st1.bytes_recv - st0.bytes_recv),
			         (unsigned long long)seed);
		assert_int_equal(express_in(s, 1), e0 + 2);
		e0++;
	}
	/* A receive for any channel posted first (so none is direct): the
	 * posted lists give the receive, in posting order, express too. */
	r2 = post(s, NULL, RCP_ANY_TAG, b2);
	r1 = post(s, ba, 6, b1);
	send_one(s, 6, 0x61);
	assert_int_equal(got(s, r2, b2, seed), 0x61);
	send_one(s, 6, 0x62);
	assert_int_equal(got(s, r1, b1, seed), 0x62);
	e0 += 2;
	assert_int_equal(express_in(s, 1), e0 + 1);
	/* Hostile copies of that frame, made to look like the next one, for
	 * a posted receive: refused, counted, nothing taken. */
	assert_int_equal(last.len, RCPW_CHLEN + 8);
	r1 = post(s, ba, 4, b1);
	rcpc_core_stats(sim_core(s, 1), &st0);
	for (int k = 0; k < 4; k++) {
		unsigned char f[sizeof last.b];
		uint32_t v;
		memcpy(f, last.b, last.len);
		memcpy(&v, f + 20, 4); /* seq: the next */
		v++;
		memcpy(f + 20, &v, 4);
		memcpy(&v, f + 44, 4); /* msg: the next */
		v++;
		memcpy(f + 44, &v, 4);
		if (k == 0)
			f[8] ^= 1; /* session */
		else if (k == 1)
			f[16] ^= 1; /* dst_epoch */
		else if (k == 2)
			f[5] |= 2; /* flags: bit 9, no flag of the wire's */
		else
			f[24] += 100; /* ack: past what was sent */
		sim_inject(s, 0, 1, f, last.len);
	}
	sim_run(s, never, NULL, SEC / 100);
	rcpc_core_stats(sim_core(s, 1), &st1);
	assert_int_equal(express_in(s, 1), e0 + 1);
	assert_int_equal(rcpc_req_done(r1, NULL), 0);
	/* session: stale; dst_epoch: stale; flags: bad (the gate);
	 * ack: bad (acks frames never sent). */
	assert_int_equal(st1.stale_frames - st0.stale_frames, 2);
	assert_int_equal(st1.bad_frames - st0.bad_frames, 2);
	send_one(s, 4, 0x55);
	assert_int_equal(got(s, r1, b1, seed), 0x55);
	assert_int_equal(express_in(s, 1), e0 + 2);
	sim_free(s);
}

/* Ping-pong of N plain messages each way on a pair (reliable: the sim
 * models a nic that loses nothing, as shm), the reply posted before each
 * send; every message checked.  Returns node 0's stats. */
static struct rcp_ep_stats ping_pong(int reliable, int n, uint64_t seed, uint32_t *max_inflight)
{
	struct sim_opts o = {0};
	struct rcp_ep_stats st;
	struct sim *s;
	rcp_chan *ab, *ba;
	uint32_t wnd;

	o.n = 2;
	o.seed = seed;
	o.link.latency = 5000;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 64;
	o.params.crc = 0;
	o.params.reliable = reliable;
	s = sim_new(&o);
	ab = sim_chan(s, 0, 1);
	ba = sim_chan(s, 1, 0);
	for (int i = 0; i < n; i++) {
		unsigned char b0[8], b1[8], m[8];
		rcp_req *r0 = NULL, *r1 = NULL, *q;
		memset(m, i, sizeof m);
		assert_int_equal(rcpc_irecv(sim_core(s, 0), ab, 2, b0, 8, sim_now(s), &r0), 0);
		r1 = post(s, ba, 1, b1);
		assert_int_equal(rcpc_isend(ab, 1, m, sizeof m, sim_now(s), &q), 0);
		assert_int_equal(rcpc_req_done(q, NULL), 1); /* small: done at once */
		assert_int_equal(got(s, r1, b1, seed), (unsigned char)i);
		assert_int_equal(rcpc_isend(ba, 2, b1, sizeof b1, sim_now(s), &q), 0);
		assert_int_equal(rcpc_req_done(q, NULL), 1);
		assert_int_equal(got(s, r0, b0, seed), (unsigned char)i);
	}
	rcpc_core_stats(sim_core(s, 0), &st);
	rcpc_chan_window_stats(ab, max_inflight, &wnd);
	sim_free(s);
	return st;
}

/* EXPRESS ACKS (rcp/express.c): on a nic that loses nothing, the reply of
 * a ping-pong frees the one slot of ours it acks in the express pass:
 * every reply past the first few (full headers, the window) does, the
 * ring never holds more than that one frame, and the credits its header
 * returns keep the sender going past the receiver's grant (300 rounds
 * against 64 credits and a ring of 64 slots: a slot left in use, an ack
 * or a credit missed, and the sends stall or the ring's assert fires).
 * On a lossy nic the pass leaves every ack to the general path (RTT
 * samples), with the same messages. */
static void t_express_acks(void **state)
{
	uint64_t seed = test_seed(1950);
	struct rcp_ep_stats st;
	uint32_t maxin = 0;

	(void)state;
	st = ping_pong(1, 300, seed, &maxin);
	if (st.express_acks < 290 || st.express_acks > st.express_in)
		fail_msg("express acks %llu of 300 replies, express_in %llu (seed %#llx)",
		         (unsigned long long)st.express_acks, (unsigned long long)st.express_in,
		         (unsigned long long)seed);
	assert_int_equal(maxin, 1);
	assert_int_equal(st.credit_stalls, 0);
	assert_int_equal(st.rtt_samples, 0);
	assert_int_equal(st.retransmits, 0);
	st = ping_pong(0, 300, seed + 1, &maxin);
	assert_int_equal(st.express_acks, 0);
	if (st.express_in < 290 || st.rtt_samples < 290)
		fail_msg("lossy: express_in %llu, rtt samples %llu of 300 (seed %#llx)",
		         (unsigned long long)st.express_in, (unsigned long long)st.rtt_samples,
		         (unsigned long long)seed);
	assert_int_equal(maxin, 1);
	assert_int_equal(st.credit_stalls, 0);
}

/* PLAIN (rcp/chan.h): the express word is clear only while every part of
 * the channel's unusual state is zero.  Checked on both channels after
 * every event of a lossy, reordering, duplicating run (gaps, sacks,
 * backoff, frames held) in bursts of 16 small messages each way; the
 * parts must have been set (the run visits them) and the word cleared
 * again (express frames taken between the losses). */
struct plain_watch {
	rcp_chan *ch[2];
	struct sim_one *one;
	int n;
	uint64_t bad, busy;
};

static int plain_watch(void *arg)
{
	struct plain_watch *w = arg;
	int all = 1;
	for (int i = 0; i < 2; i++) {
		if (!chan_parts_quiet(w->ch[i])) {
			w->busy++;
			if (!w->ch[i]->unplain)
				w->bad++;
		}
	}
	if (w->bad)
		return 1; /* stop: the run below fails */
	for (int i = 0; i < w->n; i++)
		all &= sim_one_done(&w->one[i]);
	return all;
}

static void t_plain_word(void **state)
{
	uint64_t seed = test_seed(2020);
	struct sim_opts o = {0};
	struct plain_watch w = {{NULL, NULL}, NULL, 0, 0, 0};
	struct sim_one one[64];
	unsigned char in[32][8], out[16][8];
	struct sim *s;

	(void)state;
	o.n = 2;
	o.seed = seed;
	o.link.latency = 5000;
	o.link.drop = 0.05;
	o.link.dup = 0.02;
	o.link.reorder = 0.2;
	o.link.reorder_max = 20000;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 64;
	o.params.crc = 0;
	s = sim_new(&o);
	w.ch[0] = sim_chan(s, 0, 1);
	w.ch[1] = sim_chan(s, 1, 0);
	w.one = one;
	w.n = 64;
	for (int round = 0; round < 40; round++) {
		for (int i = 0; i < 16; i++) {
			one[i] = (struct sim_one){NULL, {0}, 0};
			one[16 + i] = (struct sim_one){NULL, {0}, 0};
			one[32 + i] = (struct sim_one){NULL, {0}, 0};
			one[48 + i] = (struct sim_one){NULL, {0}, 0};
			assert_int_equal(
			    rcpc_irecv(sim_core(s, 1), w.ch[1], 1, in[i], 8, sim_now(s), &one[i].r),
			    0);
			assert_int_equal(rcpc_irecv(sim_core(s, 0), w.ch[0], 2, in[16 + i], 8,
			                            sim_now(s), &one[16 + i].r),
			                 0);
		}
		/* (A send queued behind the window keeps its buffer: one each.) */
		for (int i = 0; i < 16; i++) {
			memset(out[i], round * 16 + i, 8);
			assert_int_equal(
			    rcpc_isend(w.ch[0], 1, out[i], 8, sim_now(s), &one[32 + i].r), 0);
			assert_int_equal(
			    rcpc_isend(w.ch[1], 2, out[i], 8, sim_now(s), &one[48 + i].r), 0);
		}
		if (sim_run(s, plain_watch, &w, 10 * SEC) || w.bad)
			fail_msg("round %d: word clear with a part set (%llu) or never completed "
			         "(seed %#llx)",
			         round, (unsigned long long)w.bad, (unsigned long long)seed);
		for (int i = 0; i < 32; i++)
			if (in[i][0] != (unsigned char)(round * 16 + i % 16))
				fail_msg("round %d message %d: %d (seed %#llx)", round, i, in[i][0],
				         (unsigned long long)seed);
	}
	if (w.bad || w.busy < 10 || express_in(s, 1) < 50)
		fail_msg("word clear with a part set %llu times (of %llu busy looks), express "
		         "%llu (seed %#llx)",
		         (unsigned long long)w.bad, (unsigned long long)w.busy,
		         (unsigned long long)express_in(s, 1), (unsigned long long)seed);
	sim_free(s);
}

/* A receive for any channel of another tag (relinked PVM keeps its
 * HELLO and FENCE ones posted) leaves a channel's receive direct (rcp/
 * core.c any_could_take, session 21): it takes its message, the other
 * tag goes to the receive for any channel.  One of the same tag, or a
 * channel's receive of any tag, posted after it is not direct, and the
 * earlier receive takes the message first. */
static void t_direct_beside_any(void **state)
{
	uint64_t seed = test_seed(1990);
	struct sim *s = pair(seed, 0);
	rcp_chan *ba = sim_chan(s, 1, 0);
	unsigned char b1[8], b2[8], bh[8];
	rcp_req *r1, *w, *h;

	(void)state;
	h = post(s, NULL, 900, bh);
	r1 = post(s, ba, 1, b1);
	assert_ptr_equal(ba->direct, r1);
	send_one(s, 1, 0x11);
	assert_int_equal(got(s, r1, b1, seed), 0x11);
	send_one(s, 900, 0x90);
	assert_int_equal(got(s, h, bh, seed), 0x90);
	/* the same tag for any channel first */
	w = post(s, NULL, 2, b2);
	r1 = post(s, ba, 2, b1);
	assert_null(ba->direct);
	send_one(s, 2, 0x21);
	assert_int_equal(got(s, w, b2, seed), 0x21);
	send_one(s, 2, 0x22);
	assert_int_equal(got(s, r1, b1, seed), 0x22);
	/* the channel's receive of any tag after one for any channel */
	w = post(s, NULL, 3, b2);
	r1 = post(s, ba, RCP_ANY_TAG, b1);
	assert_null(ba->direct);
	send_one(s, 3, 0x31);
	assert_int_equal(got(s, w, b2, seed), 0x31);
	send_one(s, 4, 0x41);
	assert_int_equal(got(s, r1, b1, seed), 0x41);
	sim_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_small_done_at_once),
	    cmocka_unit_test(t_small_detached),
	    cmocka_unit_test(t_sent_requests),
	    cmocka_unit_test(t_direct_order),
	    cmocka_unit_test(t_next_receive),
	    cmocka_unit_test(t_next_receive_big),
	    cmocka_unit_test(t_express),
	    cmocka_unit_test(t_express_acks),
	    cmocka_unit_test(t_plain_word),
	    cmocka_unit_test(t_direct_beside_any),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
