/*
 * tests/test_rcp_cb.c — completion callbacks (include/rcp/rcp.h,
 * "completion callbacks"): each request's callback runs exactly once,
 * with its status, from progress and never from the call that posts or
 * cancels it; for sends (completed at once and acknowledged), receives,
 * cancels, closed channels, a peer gone, a closing endpoint; callbacks
 * that post new requests and progress again from inside; many requests.
 *
 * Endpoints are shm endpoints of this process; one thread drives both
 * ends with rcp_progress.  Every check counts calls, nothing is timed.
 */
#include <rcp/rcp.h>

#include "testutil.h"

/* What one request's callback saw. */
struct got {
	int calls;
	rcp_req *req;
	struct rcp_status st;
};

static void got_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct got *g = user;
	g->calls++;
	g->req = req;
	g->st = *st;
}

static void pair(const char *tag, rcp_ep **a, rcp_ep **b, rcp_chan **ab, rcp_chan **ba)
{
	char an[64], bn[64];
	snprintf(an, sizeof an, "shm:%s-%d-a", tag, (int)getpid());
	snprintf(bn, sizeof bn, "shm:%s-%d-b", tag, (int)getpid());
	assert_int_equal(rcp_ep_open(an, NULL, a), 0);
	assert_int_equal(rcp_ep_open(bn, NULL, b), 0);
	assert_int_equal(rcp_connect(*a, bn, ab), 0);
	assert_int_equal(rcp_connect(*b, an, ba), 0);
}

/* Rounds of progress a loop below may take before the test fails: a
 * callback that never comes fails the test rather than hanging it (a count
 * of rounds, not a time; each test needs far fewer). */
#define ROUNDS_MAX 20000000L
static long rounds;

static void both(rcp_ep *a, rcp_ep *b)
{
	if (++rounds > ROUNDS_MAX)
		fail_msg("no progress after %ld rounds: a callback never came", rounds);
	assert_true(rcp_progress(a) >= 0);
	if (b)
		assert_true(rcp_progress(b) >= 0);
}

/* Progresses both until *N reaches WANT (one thread plays both ends). */
static void until(rcp_ep *a, rcp_ep *b, const int *n, int want)
{
	rounds = 0;
	while (*n < want)
		both(a, b);
}

static void close_pair(rcp_ep *a, rcp_ep *b)
{
	setenv("RCP_LINGER_MS", "0", 1); /* one thread cannot serve the other's linger */
	rcp_ep_close(b);
	rcp_ep_close(a);
	unsetenv("RCP_LINGER_MS");
}

/* Sends (one that completes at once from a copy, one of 1 MiB that waits
 * for the receiver, a synchronous one) and their receives: one call
 * each, with the right status, none from inside the posting call, none
 * more however long progress goes on. */
static void t_send_recv_once(void **state)
{
	static unsigned char big[1 << 20], bigin[1 << 20];
	char small[8] = "callback", smallin[8];
	struct got s1 = {0}, s2 = {0}, s3 = {0}, r1 = {0}, r2 = {0}, r3 = {0};
	rcp_req *q1, *q2;
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	int total = 0;
	(void)state;

	pair("cbonce", &a, &b, &ab, &ba);
	test_fill(big, sizeof big, 7);
	assert_int_equal(rcp_isend_cb(ab, 1, small, sizeof small, got_cb, &s1, &q1), 0);
	assert_int_equal(rcp_isend_cb(ab, 2, big, sizeof big, got_cb, &s2, &q2), 0);
	assert_int_equal(rcp_issend_cb(ab, 3, small, 4, got_cb, &s3, NULL), 0);
	assert_int_equal(s1.calls + s2.calls + s3.calls, 0); /* never from the post */
	assert_int_equal(rcp_irecv_cb(b, ba, 1, smallin, sizeof smallin, got_cb, &r1, NULL), 0);
	assert_int_equal(rcp_irecv_cb(b, RCP_ANY_CHAN, 2, bigin, sizeof bigin, got_cb, &r2, NULL),
	                 0);
	assert_int_equal(rcp_irecv_cb(b, ba, RCP_ANY_TAG, smallin, 2, got_cb, &r3, NULL), 0);
	rounds = 0;
	while (total < 6) {
		both(a, b);
		total = s1.calls + s2.calls + s3.calls + r1.calls + r2.calls + r3.calls;
	}
	for (int i = 0; i < 1000; i++)
		both(a, b);
	assert_int_equal(s1.calls, 1);
	assert_int_equal(s2.calls, 1);
	assert_int_equal(s3.calls, 1);
	assert_int_equal(r1.calls, 1);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r3.calls, 1);
	assert_ptr_equal(s1.req, q1);
	assert_ptr_equal(s2.req, q2);
	assert_int_equal(s1.st.error, 0);
	assert_int_equal(s2.st.error, 0);
	assert_int_equal(s3.st.error, 0);
	assert_int_equal(s2.st.len, sizeof big);
	assert_int_equal(r1.st.error, 0);
	assert_int_equal(r1.st.len, sizeof small);
	assert_ptr_equal(r1.st.chan, ba);
	assert_int_equal(r2.st.error, 0);
	assert_int_equal(r2.st.tag, 2);
	assert_int_equal(test_check(bigin, sizeof bigin, 7), -1);
	assert_int_equal(r3.st.error, RCP_ETRUNC); /* 4 bytes into 2 */
	assert_int_equal(r3.st.len, 4);
	close_pair(a, b);
}

/* Cancel: the callback runs once, from the next progress, with
 * RCP_ECANCELED; canceling again changes nothing. */
static void t_cancel(void **state)
{
	char buf[16];
	struct got g = {0}, h = {0};
	rcp_req *rq, *rq2;
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	(void)state;

	pair("cbcancel", &a, &b, &ab, &ba);
	assert_int_equal(rcp_irecv_cb(b, ba, 9, buf, sizeof buf, got_cb, &g, &rq), 0);
	assert_int_equal(rcp_irecv_cb(b, RCP_ANY_CHAN, 10, buf, sizeof buf, got_cb, &h, &rq2), 0);
	assert_int_equal(rcp_cancel(rq), 0);
	assert_int_equal(g.calls, 0); /* not from inside rcp_cancel */
	assert_int_equal(rcp_cancel(rq), 0);
	until(a, b, &g.calls, 1);
	assert_int_equal(rcp_cancel(rq2), 0);
	until(a, b, &h.calls, 1);
	for (int i = 0; i < 100; i++)
		both(a, b);
	assert_int_equal(g.calls, 1);
	assert_int_equal(g.st.error, RCP_ECANCELED);
	assert_ptr_equal(g.req, rq);
	assert_int_equal(h.calls, 1);
	assert_int_equal(h.st.error, RCP_ECANCELED);
	/* The canceled receives took nothing: a message goes to the next. */
	{
		struct got r = {0};
		assert_int_equal(rcp_send(ab, 9, "x", 1), 0);
		assert_int_equal(rcp_irecv_cb(b, ba, 9, buf, sizeof buf, got_cb, &r, NULL), 0);
		until(a, b, &r.calls, 1);
		assert_int_equal(r.st.error, 0);
	}
	close_pair(a, b);
}

/* A closed channel fails its pending requests once with RCP_ECLOSED; a
 * peer gone fails them once with RCP_EPEER (after RCP_PEER_TIMEOUT). */
static void t_failures(void **state)
{
	static unsigned char big[1 << 20];
	char buf[16];
	struct got c1 = {0}, p1 = {0}, p2 = {0};
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	(void)state;

	setenv("RCP_PEER_TIMEOUT", "300", 1);
	pair("cbfail", &a, &b, &ab, &ba);
	unsetenv("RCP_PEER_TIMEOUT");
	assert_int_equal(rcp_irecv_cb(b, ba, 1, buf, sizeof buf, got_cb, &c1, NULL), 0);
	rcp_chan_close(ba);
	assert_int_equal(c1.calls, 0);
	until(a, b, &c1.calls, 1);
	assert_int_equal(c1.st.error, RCP_ECLOSED);

	/* Peer gone: b closes (lingering for nothing) and a's channel times
	 * out with a receive and an unacknowledged send pending. */
	assert_int_equal(rcp_send(ab, 5, "hi", 2), 0);
	assert_int_equal(rcp_irecv_cb(a, ab, 2, buf, sizeof buf, got_cb, &p1, NULL), 0);
	assert_int_equal(rcp_isend_cb(ab, 3, big, sizeof big, got_cb, &p2, NULL), 0);
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(b);
	unsetenv("RCP_LINGER_MS");
	rounds = 0;
	while (p1.calls + p2.calls < 2)
		both(a, NULL);
	for (int i = 0; i < 100; i++)
		rcp_progress(a);
	assert_int_equal(p1.calls, 1);
	assert_int_equal(p2.calls, 1);
	assert_int_equal(p1.st.error, RCP_EPEER);
	assert_int_equal(p2.st.error, RCP_EPEER);
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(a);
	unsetenv("RCP_LINGER_MS");
}

/* rcp_ep_close runs the callbacks of what was pending, once, with
 * RCP_ECLOSED; a request posted from one of them is refused. */
struct closing {
	struct got g;
	rcp_ep *ep;
	int post_rc;
};

static void closing_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct closing *c = user;
	static char buf[4];
	rcp_req *r;
	got_cb(req, st, &c->g);
	c->post_rc = rcp_irecv(c->ep, RCP_ANY_CHAN, 1, buf, sizeof buf, &r);
}

static void t_ep_close(void **state)
{
	char buf[3][16];
	struct closing c[3];
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	(void)state;

	pair("cbclose", &a, &b, &ab, &ba);
	for (int i = 0; i < 3; i++) {
		memset(&c[i], 0, sizeof c[i]);
		c[i].ep = b;
		assert_int_equal(rcp_irecv_cb(b, i ? ba : RCP_ANY_CHAN, (uint64_t)i, buf[i],
		                              sizeof buf[i], closing_cb, &c[i], NULL),
		                 0);
	}
	close_pair(a, b);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(c[i].g.calls, 1);
		assert_int_equal(c[i].g.st.error, RCP_ECLOSED);
		assert_int_equal(c[i].post_rc, RCP_ECLOSED);
	}
}

/* Callbacks that post: B's receive callback posts the next receive and
 * answers; A's callback on the answer sends the next message.  ROUNDS
 * round trips driven only by rcp_progress; every callback once. */
#define ROUNDS 2000
struct chain {
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	int recv_calls[ROUNDS], ans_calls[ROUNDS], send_calls;
	uint32_t in, ans;
	int errors;
};

static void chain_send_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct chain *c = user;
	(void)req;
	c->send_calls++;
	if (st->error)
		c->errors++;
}

static void chain_recv_cb(rcp_req *req, const struct rcp_status *st, void *user);

static void chain_ans_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct chain *c = user;
	uint64_t i = st->tag;
	(void)req;
	if (st->error || i >= ROUNDS || c->ans != i) {
		c->errors++;
		return;
	}
	c->ans_calls[i]++;
	if (i + 1 < ROUNDS) {
		/* The next round: its answer's receive first, then the send. */
		if (rcp_irecv_cb(c->a, c->ab, i + 1, &c->ans, sizeof c->ans, chain_ans_cb, c,
		                 NULL) ||
		    rcp_isend_cb(c->ab, i + 1, &c->ans_calls[i + 1] /* any 4 bytes */, 4,
		                 chain_send_cb, c, NULL))
			c->errors++;
	}
}

static void chain_recv_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct chain *c = user;
	uint64_t i = st->tag;
	static uint32_t out[ROUNDS];
	(void)req;
	if (st->error || i >= ROUNDS) {
		c->errors++;
		return;
	}
	c->recv_calls[i]++;
	if (i + 1 < ROUNDS &&
	    rcp_irecv_cb(c->b, c->ba, i + 1, &c->in, sizeof c->in, chain_recv_cb, c, NULL))
		c->errors++;
	out[i] = (uint32_t)i;
	if (rcp_isend_cb(c->ba, i, &out[i], sizeof out[i], chain_send_cb, c, NULL))
		c->errors++;
}

static void t_post_from_callback(void **state)
{
	static struct chain c;
	(void)state;
	memset(&c, 0, sizeof c);
	pair("cbchain", &c.a, &c.b, &c.ab, &c.ba);
	assert_int_equal(rcp_irecv_cb(c.b, c.ba, 0, &c.in, sizeof c.in, chain_recv_cb, &c, NULL),
	                 0);
	assert_int_equal(rcp_irecv_cb(c.a, c.ab, 0, &c.ans, sizeof c.ans, chain_ans_cb, &c, NULL),
	                 0);
	assert_int_equal(rcp_isend_cb(c.ab, 0, &c.ans_calls[0], 4, chain_send_cb, &c, NULL), 0);
	rounds = 0;
	while (c.ans_calls[ROUNDS - 1] == 0 && !c.errors)
		both(c.a, c.b);
	for (int i = 0; i < 100; i++)
		both(c.a, c.b);
	assert_int_equal(c.errors, 0);
	for (int i = 0; i < ROUNDS; i++) {
		if (c.recv_calls[i] != 1 || c.ans_calls[i] != 1)
			fail_msg("round %d: %d receive calls, %d answer calls", i, c.recv_calls[i],
			         c.ans_calls[i]);
	}
	assert_int_equal(c.send_calls, 2 * ROUNDS);
	close_pair(c.a, c.b);
}

/* Many requests at once, in random sizes, some callbacks progressing
 * their endpoint again from inside (nested): each callback exactly once. */
#define MANY 3000
struct many {
	rcp_ep *a, *b;
	int rcalls[MANY], scalls[MANY];
	int nested, bad;
	size_t len[MANY];
};

static void many_recv_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct many *m = user;
	(void)req;
	if (st->tag >= MANY || st->error || st->len != m->len[st->tag]) {
		m->bad++;
		return;
	}
	if (++m->rcalls[st->tag] == 1 && st->tag % 7 == 0) {
		m->nested++;
		if (rcp_progress(m->b) < 0) /* runs what completed since, not this one again */
			m->bad++;
	}
}

static void many_send_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct many *m = user;
	(void)req;
	if (st->tag >= MANY || st->error) {
		m->bad++;
		return;
	}
	if (++m->scalls[st->tag] == 1 && st->tag % 5 == 0 && rcp_progress(m->a) < 0)
		m->bad++;
}

static void t_many(void **state)
{
	static struct many m;
	static unsigned char out[MANY][3000], in[MANY][3000];
	uint64_t seed = test_seed(0xcb19), r;
	rcp_chan *ab, *ba;
	int nr = 0, ns = 0;
	(void)state;
	memset(&m, 0, sizeof m);
	r = seed;
	pair("cbmany", &m.a, &m.b, &ab, &ba);
	for (int i = 0; i < MANY; i++) {
		m.len[i] = (size_t)(test_rand(&r) % sizeof out[i]);
		test_fill(out[i], m.len[i], (uint64_t)i);
		assert_int_equal(rcp_irecv_cb(m.b, (i & 1) ? ba : RCP_ANY_CHAN, (uint64_t)i, in[i],
		                              sizeof in[i], many_recv_cb, &m, NULL),
		                 0);
	}
	for (int i = 0; i < MANY; i++) {
		assert_int_equal(
		    rcp_isend_cb(ab, (uint64_t)i, out[i], m.len[i], many_send_cb, &m, NULL), 0);
		if (i % 64 == 63)
			both(m.a, m.b);
	}
	rounds = 0;
	while ((nr < MANY || ns < MANY) && !m.bad) {
		both(m.a, m.b);
		nr = ns = 0;
		for (int i = 0; i < MANY; i++) {
			nr += m.rcalls[i] != 0;
			ns += m.scalls[i] != 0;
		}
	}
	for (int i = 0; i < 100; i++)
		both(m.a, m.b);
	if (m.bad)
		fail_msg("%d bad callbacks (seed %#llx)", m.bad, (unsigned long long)seed);
	for (int i = 0; i < MANY; i++) {
		if (m.rcalls[i] != 1 || m.scalls[i] != 1 ||
		    test_check(in[i], m.len[i], (uint64_t)i) != -1)
			fail_msg("message %d: %d receive calls, %d send calls (seed %#llx)", i,
			         m.rcalls[i], m.scalls[i], (unsigned long long)seed);
	}
	assert_true(m.nested > 0);
	close_pair(m.a, m.b);
}

/* The rules: a request with a callback is the library's (test, wait,
 * waitany refuse it); rcp_req_set_cb on a plain request that already
 * completed runs once; set to NULL (detached) runs nothing; replacing
 * runs only the new one; rcp_ep_close from a callback is refused. */
static int close_refused;
static void close_from_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	(void)req;
	(void)st;
	rcp_ep_close(user); /* refused: logs and returns */
	close_refused++;
}

static void t_rules(void **state)
{
	char buf[16], buf2[16];
	struct got g = {0}, old = {0}, neu = {0};
	rcp_req *rq, *rq2, *sq;
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	int idx;
	(void)state;

	pair("cbrules", &a, &b, &ab, &ba);
	assert_int_equal(rcp_isend_cb(ab, 1, "x", 1, NULL, NULL, NULL), RCP_EINVAL);
	assert_int_equal(rcp_irecv_cb(b, ba, 1, buf, sizeof buf, NULL, NULL, NULL), RCP_EINVAL);
	assert_int_equal(rcp_req_set_cb(NULL, got_cb, &g), RCP_EINVAL);
	assert_int_equal(rcp_irecv_cb(b, ba, 1, buf, sizeof buf, got_cb, &old, &rq), 0);
	assert_int_equal(rcp_test(rq, NULL), RCP_EINVAL);
	assert_int_equal(rcp_wait(rq, NULL, 0), RCP_EINVAL);
	assert_int_equal(rcp_waitany(&rq, 1, &idx, NULL, 0), RCP_EINVAL);
	assert_int_equal(rcp_req_set_cb(rq, got_cb, &neu), 0); /* replaces */
	/* A plain send completed at once, then given a callback. */
	assert_int_equal(rcp_isend(ab, 1, "hello", 5, &sq), 0);
	assert_int_equal(rcp_req_set_cb(sq, got_cb, &g), 0);
	assert_int_equal(g.calls, 0);
	until(a, b, &neu.calls, 1);
	until(a, b, &g.calls, 1);
	for (int i = 0; i < 100; i++)
		both(a, b);
	assert_int_equal(old.calls, 0);
	assert_int_equal(neu.calls, 1);
	assert_int_equal(neu.st.len, 5);
	assert_int_equal(g.calls, 1);
	assert_ptr_equal(g.req, sq);
	/* Detached: the message lands, nobody is called. */
	{
		struct got d = {0}, s = {0};
		memset(buf2, 0, sizeof buf2);
		assert_int_equal(rcp_irecv_cb(b, ba, 2, buf2, sizeof buf2, got_cb, &d, &rq2), 0);
		assert_int_equal(rcp_req_set_cb(rq2, NULL, NULL), 0);
		assert_int_equal(rcp_isend_cb(ab, 2, "detach", 6, got_cb, &s, NULL), 0);
		until(a, b, &s.calls, 1);
		rounds = 0;
		while (memcmp(buf2, "detach", 6))
			both(a, b);
		for (int i = 0; i < 100; i++)
			both(a, b);
		assert_int_equal(d.calls, 0);
	}
	/* rcp_ep_close from a callback is refused: the endpoint still works. */
	assert_int_equal(rcp_isend_cb(ab, 3, "c", 1, close_from_cb, a, NULL), 0);
	rounds = 0;
	while (!close_refused)
		both(a, b);
	assert_int_equal(rcp_send(ab, 4, "ok", 2), 0);
	assert_int_equal(rcp_recv(b, ba, 3, buf, sizeof buf, NULL), 0);
	assert_int_equal(rcp_recv(b, ba, 4, buf, sizeof buf, NULL), 0);
	assert_int_equal(memcmp(buf, "ok", 2), 0);
	close_pair(a, b);
}

/* rcp_isend_detached: one buffer, rewritten after every call, carries
 * 300 messages while B does not progress (A's window and credits fill, so
 * later sends queue: they must have taken a copy), then B receives them
 * all, each with its own bytes.  Counted: how many came back as a request
 * to wait for (none: memory is there), and the messages' contents.  A
 * message longer than a frame is refused with nothing sent. */
static void t_detached(void **state)
{
	enum { N = 300, LEN = 200 };
	static unsigned char buf[LEN], in[N][LEN];
	static unsigned char big[1 << 20];
	struct got g[N];
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	rcp_req *r;
	int ncb = 0;
	(void)state;

	pair("det", &a, &b, &ab, &ba);
	memset(g, 0, sizeof g);
	for (int i = 0; i < N; i++) {
		memset(buf, (int)(i * 7 + 1), LEN);
		assert_int_equal(rcp_isend_detached(ab, 5, buf, LEN, &r), 0);
		assert_null(r);
		memset(buf, 0xee, LEN); /* the caller reuses its buffer at once */
		(void)rcp_progress(a);
	}
	assert_int_equal(rcp_isend_detached(ab, 5, big, sizeof big, &r), RCP_EMSGSIZE);
	assert_null(r);
	for (int i = 0; i < N; i++)
		assert_int_equal(rcp_irecv_cb(b, ba, 5, in[i], LEN, got_cb, &g[i], NULL), 0);
	rounds = 0;
	while (ncb < N) {
		both(a, b);
		ncb = 0;
		for (int i = 0; i < N; i++)
			ncb += g[i].calls;
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(g[i].calls, 1);
		assert_int_equal(g[i].st.error, 0);
		assert_int_equal(g[i].st.len, LEN);
		for (int k = 0; k < LEN; k++)
			if (in[i][k] != (unsigned char)(i * 7 + 1))
				fail_msg("message %d byte %d: %#x, not its own %#x", i, k, in[i][k],
				         (unsigned char)(i * 7 + 1));
	}
	close_pair(a, b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_send_recv_once),
	    cmocka_unit_test(t_cancel),
	    cmocka_unit_test(t_failures),
	    cmocka_unit_test(t_ep_close),
	    cmocka_unit_test(t_post_from_callback),
	    cmocka_unit_test(t_many),
	    cmocka_unit_test(t_rules),
	    cmocka_unit_test(t_detached),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
