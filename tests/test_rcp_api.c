/*
 * tests/test_rcp_api.c — RCP endpoints and channels in one process:
 * the API's argument checks, posting order, address reuse, ack arming and
 * sleep slack, CRC by default, one nic poll per look of a wait, and
 * rcp_mcastv (session 21).
 * Shared: tests/rcp_test.h.
 */
#include "rcp_test.h"

static void three_eps(const char *tag, char *an, char *bn, char *cn, rcp_ep **a, rcp_ep **b,
                      rcp_ep **c)
{
	snprintf(an, 64, "shm:%s-%d-a", tag, (int)getpid());
	snprintf(bn, 64, "shm:%s-%d-b", tag, (int)getpid());
	snprintf(cn, 64, "shm:%s-%d-c", tag, (int)getpid());
	assert_int_equal(rcp_ep_open(an, NULL, a), 0);
	assert_int_equal(rcp_ep_open(bn, NULL, b), 0);
	assert_int_equal(rcp_ep_open(cn, NULL, c), 0);
}

static void three_chans(rcp_ep *a, rcp_ep *b, rcp_ep *c, const char *an, const char *bn,
                        const char *cn, rcp_chan **ab, rcp_chan **ba, rcp_chan **ac, rcp_chan **ca)
{
	assert_int_equal(rcp_connect(a, bn, ab), 0);
	assert_int_equal(rcp_connect(b, an, ba), 0);
	assert_int_equal(rcp_connect(a, cn, ac), 0);
	assert_int_equal(rcp_connect(c, an, ca), 0);
}

/* First posted, first matched, between receives for one channel and
 * receives for any channel (the core keeps them on separate lists). */
static void t_post_order(void **state)
{
	rcp_ep *a, *b, *c;
	rcp_chan *ab, *ba, *ac, *ca;
	char an[64], bn[64], cn[64], buf[4][8] = {{0}};
	rcp_req *r[4];
	struct rcp_status st;
	int idx;
	/* W1 (any), S_b (b), S_c (c), W2 (any): c1 -> W1, b1 -> S_b, b2 -> W2,
	 * c2 -> S_c. */
	static const struct {
		int from_c;
		const char *msg;
		int want;
	} steps[] = {{1, "c1", 0}, {0, "b1", 1}, {0, "b2", 3}, {1, "c2", 2}};
	(void)state;

	three_eps("tpo", an, bn, cn, &a, &b, &c);
	three_chans(a, b, c, an, bn, cn, &ab, &ba, &ac, &ca);
	assert_int_equal(rcp_irecv(a, RCP_ANY_CHAN, 7, buf[0], 8, &r[0]), 0);
	assert_int_equal(rcp_irecv(a, ab, 7, buf[1], 8, &r[1]), 0);
	assert_int_equal(rcp_irecv(a, ac, 7, buf[2], 8, &r[2]), 0);
	assert_int_equal(rcp_irecv(a, RCP_ANY_CHAN, 7, buf[3], 8, &r[3]), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(rcp_send(steps[i].from_c ? ca : ba, 7, steps[i].msg, 3), 0);
		assert_int_equal(rcp_waitany(r, 4, &idx, &st, WAIT_NS), 0);
		if (idx != steps[i].want)
			print_error("%s went to receive %d, not %d\n", steps[i].msg, idx,
			            steps[i].want);
		assert_int_equal(idx, steps[i].want);
		assert_string_equal(buf[idx], steps[i].msg);
		assert_ptr_equal(st.chan, steps[i].from_c ? ac : ab);
	}
	rcp_ep_close(b);
	rcp_ep_close(c);
	rcp_ep_close(a);
}

/* The public calls not exercised above, in one process with two shm
 * endpoints progressed in turn: probe, test, waitany, cancel, mcast,
 * the timeout hint, and argument errors. */
static void t_api(void **state)
{
	rcp_ep *a, *b, *c;
	rcp_chan *ab, *ba, *ac, *ca;
	char an[64], bn[64], cn[64], buf[64];
	rcp_req *r[3], *s1;
	struct rcp_status st;
	int idx, rc;
	(void)state;

	three_eps("tapi", an, bn, cn, &a, &b, &c);
	three_chans(a, b, c, an, bn, cn, &ab, &ba, &ac, &ca);
	assert_ptr_equal(rcp_chan_find(a, bn), ab);
	{
		rcp_chan *again;
		assert_int_equal(rcp_connect(a, bn, &again), 0);
		assert_ptr_equal(again, ab);
	}
	assert_int_equal(rcp_chan_peer_addr(ab, buf, sizeof buf), 0);
	assert_string_equal(buf, bn);
	assert_int_equal(rcp_chan_peer_addr(ab, buf, 3), RCP_ERANGE);
	assert_null(rcp_chan_get_user(ab));
	rcp_chan_set_user(ab, buf);
	assert_ptr_equal(rcp_chan_get_user(ab), buf);
	rcp_chan_set_user(ab, NULL);

	/* Argument errors. */
	assert_int_equal(rcp_isend(ab, RCP_ANY_TAG, "x", 1, &s1), RCP_EINVAL);
	assert_int_equal(rcp_isend(NULL, 1, "x", 1, &s1), RCP_EINVAL);
	assert_int_equal(rcp_irecv(NULL, NULL, 1, buf, 1, &s1), RCP_EINVAL);
	assert_int_equal(rcp_test(NULL, &st), RCP_EINVAL);
	{
		rcp_ep *none = (rcp_ep *)1;
		assert_int_equal(rcp_ep_open(NULL, NULL, &none), RCP_EINVAL);
		assert_int_equal(rcp_ep_open("nosuch:x", NULL, &none), RCP_ENOENT);
		assert_null(none);
	}

	/* Probe sees an unexpected message without taking it. */
	assert_int_equal(rcp_send(ab, 42, "hello", 5), 0);
	rc = 0;
	for (int i = 0; i < 100000 && rc == 0; i++)
		rc = rcp_probe(b, RCP_ANY_CHAN, 42, &st);
	assert_int_equal(rc, 1);
	assert_int_equal(st.len, 5);
	assert_ptr_equal(st.chan, ba);
	assert_int_equal(rcp_probe(b, ba, 43, &st), 0);
	assert_int_equal(rcp_recv(b, ba, 42, buf, sizeof buf, &st), 0);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(rcp_probe(b, RCP_ANY_CHAN, 42, &st), 0);

	/* waitany: three receives, one message for the middle one. */
	assert_int_equal(rcp_irecv(b, ba, 1, buf, 8, &r[0]), 0);
	assert_int_equal(rcp_irecv(b, ba, 2, buf + 8, 8, &r[1]), 0);
	assert_int_equal(rcp_irecv(b, ba, 3, buf + 16, 8, &r[2]), 0);
	assert_int_equal(rcp_test(r[1], &st), RCP_EAGAIN);
	assert_int_equal(rcp_send(ab, 2, "two", 3), 0);
	assert_int_equal(rcp_waitany(r, 3, &idx, &st, WAIT_NS), 0);
	assert_int_equal(idx, 1);
	assert_null(r[1]);
	assert_int_equal(st.tag, 2);
	assert_int_equal(st.len, 3);
	/* Cancel: exactly one completion, with RCP_ECANCELED. */
	assert_int_equal(rcp_cancel(r[0]), 0);
	assert_int_equal(rcp_test(r[0], &st), RCP_ECANCELED);
	assert_int_equal(st.error, RCP_ECANCELED);
	assert_int_equal(rcp_cancel(r[2]), 0);
	assert_int_equal(rcp_wait(r[2], &st, WAIT_NS), RCP_ECANCELED);
	/* A wait that cannot finish times out and leaves the request. */
	assert_int_equal(rcp_irecv(b, ba, 9, buf, 8, &r[0]), 0);
	assert_int_equal(rcp_wait(r[0], &st, 1000000), RCP_ETIMEDOUT);
	assert_int_equal(rcp_cancel(r[0]), 0);
	assert_int_equal(rcp_test(r[0], NULL), RCP_ECANCELED);

	/* Multicast one buffer to two endpoints. */
	{
		rcp_chan *to[2] = {ab, ac};
		static char big[100000];
		static char g1[100000], g2[100000];
		rcp_req *m, *q1, *q2;
		test_fill(big, sizeof big, 3);
		assert_int_equal(rcp_irecv(b, ba, 7, g1, sizeof g1, &q1), 0);
		assert_int_equal(rcp_irecv(c, ca, 7, g2, sizeof g2, &q2), 0);
		assert_int_equal(rcp_mcast(to, 2, 7, big, sizeof big, &m), 0);
		/* Drive all three endpoints until everything completes. */
		for (int done = 0, i = 0; done != 7 && i < 10000000; i++) {
			rcp_progress(a);
			rcp_progress(b);
			rcp_progress(c);
			if (!(done & 1) && rcp_test(q1, &st) != RCP_EAGAIN)
				done |= 1;
			if (!(done & 2) && rcp_test(q2, &st) != RCP_EAGAIN)
				done |= 2;
			if (!(done & 4) && rcp_test(m, &st) != RCP_EAGAIN)
				done |= 4;
		}
		assert_int_equal(test_check(g1, sizeof g1, 3), -1);
		assert_int_equal(test_check(g2, sizeof g2, 3), -1);
	}
	/* The timeout hint: -1 or a bounded wait, never garbage. */
	{
		int64_t t = rcp_ep_timeout_ns(a);
		assert_true(t == -1 || (t >= 0 && t < 10ll * 1000000000));
	}
	rcp_ep_close(c);
	rcp_ep_close(b);
	rcp_ep_close(a);
}

/* Before a sleep on the fd: rcp_ep_arm sends the acks the endpoint owes
 * (an ack may otherwise wait RCP_ACK_DELAY_US for a reply to carry it, and
 * the sleeper sends nothing), and an RCP_EP_SLEEP endpoint asks
 * rcp_ep_timeout_ns for at least RCP_SLEEP_SLACK_US.  The ack delay is
 * set to 60 s here so no timer sends that ack before the arm does. */
/* An address changes hands: B1 at "shm:...-b" sends A a message A has not
 * read yet and closes; B2 opens at the same address.  A reconnects its
 * channel (rcp_chan_reconnect) and talks to B2 first: B1's straggling
 * frames, read by A only now, must be dropped as stale on the new
 * channel, neither delivered nor taken for B2 (then B2's first frame
 * would look like a restart and reset the channel under it). */
static void t_address_reuse(void **state)
{
	rcp_ep *a, *b1, *b2;
	rcp_chan *ab, *ba, *old;
	char an[64], bn[64], buf[16];
	struct rcp_status st;
	struct rcp_ep_stats es;
	rcp_req *r;
	(void)state;

	snprintf(an, sizeof an, "shm:tre-%d-a", (int)getpid());
	snprintf(bn, sizeof bn, "shm:tre-%d-b", (int)getpid());
	assert_int_equal(rcp_ep_open(an, NULL, &a), 0);
	assert_int_equal(rcp_ep_open(bn, NULL, &b1), 0);
	assert_int_equal(rcp_connect(a, bn, &ab), 0);
	assert_int_equal(rcp_connect(b1, an, &ba), 0);
	assert_int_equal(rcp_chan_heard(ab), 0);
	/* one round trip: A's channel knows B1's incarnation */
	assert_int_equal(rcp_send(ab, 1, "a1", 2), 0);
	assert_int_equal(rcp_recv(b1, ba, 1, buf, sizeof buf, &st), 0);
	assert_int_equal(rcp_send(ba, 2, "b1", 2), 0);
	assert_int_equal(rcp_recv(a, ab, 2, buf, sizeof buf, &st), 0);
	assert_int_equal(rcp_chan_heard(ab), 1);
	assert_int_equal(rcp_chan_restarts(ab), 0);
	/* the straggler: sent, never read by A; B1 gone without lingering */
	assert_int_equal(rcp_isend(ba, 77, "stale", 5, &r), 0);
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(b1);
	unsetenv("RCP_LINGER_MS");
	assert_int_equal(rcp_ep_open(bn, NULL, &b2), 0);

	old = ab;
	assert_int_equal(rcp_chan_reconnect(&ab), 0);
	assert_non_null(ab);
	assert_int_equal(rcp_chan_heard(ab), 0);
	(void)old; /* closed: not to be used */
	assert_int_equal(rcp_connect(b2, an, &ba), 0);
	/* A speaks first to B2, then reads (B1's frames come first) */
	assert_int_equal(rcp_send(ab, 3, "a3", 2), 0);
	assert_int_equal(rcp_recv(b2, ba, 3, buf, sizeof buf, &st), 0);
	assert_int_equal(st.len, 2);
	assert_memory_equal(buf, "a3", 2);
	assert_int_equal(rcp_send(ba, 4, "b2", 2), 0);
	assert_int_equal(rcp_recv(a, ab, 4, buf, sizeof buf, &st), 0);
	assert_memory_equal(buf, "b2", 2);
	assert_int_equal(rcp_chan_heard(ab), 1);
	assert_int_equal(rcp_chan_restarts(ab), 0);       /* B1's frames were not a peer */
	assert_int_equal(rcp_probe(a, NULL, 77, &st), 0); /* nor a message */
	assert_int_equal(rcp_ep_get_stats(a, &es), 0);
	assert_true(es.stale_frames >= 1);
	/* and the pair works on: both ways again */
	assert_int_equal(rcp_send(ab, 5, "a5", 2), 0);
	assert_int_equal(rcp_recv(b2, ba, 5, buf, sizeof buf, &st), 0);
	assert_int_equal(rcp_send(ba, 6, "b6", 2), 0);
	assert_int_equal(rcp_recv(a, ab, 6, buf, sizeof buf, &st), 0);
	assert_int_equal(rcp_chan_reconnect(NULL), RCP_EINVAL);
	rcp_ep_close(b2);
	rcp_ep_close(a);
}

static void t_arm_acks_and_slack(void **state)
{
	char an[64], bn[64], buf[16];
	struct rcp_ep_config sleeper = {.flags = RCP_EP_SLEEP};
	struct rcp_ep_stats s0, s1;
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	int64_t t;
	(void)state;

	snprintf(an, sizeof an, "shm:tarm-%d-a", (int)getpid());
	snprintf(bn, sizeof bn, "shm:tarm-%d-b", (int)getpid());
	setenv("RCP_ACK_DELAY_US", "60000000", 1);
	setenv("RCP_SLEEP_SLACK_US", "7000", 1);
	assert_int_equal(rcp_ep_open(an, NULL, &a), 0);
	assert_int_equal(rcp_ep_open(bn, &sleeper, &b), 0);
	unsetenv("RCP_ACK_DELAY_US");
	unsetenv("RCP_SLEEP_SLACK_US");
	assert_int_equal(rcp_connect(a, bn, &ab), 0);
	assert_int_equal(rcp_connect(b, an, &ba), 0);

	assert_int_equal(rcp_send(ab, 5, "ping", 4), 0); /* inline: done, unacked */
	assert_int_equal(rcp_recv(b, ba, 5, buf, sizeof buf, NULL), 0);
	assert_memory_equal(buf, "ping", 4);
	rcp_ep_get_stats(b, &s0);
	assert_int_equal(rcp_ep_arm(b), 0);
	rcp_ep_get_stats(b, &s1);
	assert_int_equal(s1.acks_sent, s0.acks_sent + 1);
	/* Nothing owed any more: a second arm sends nothing. */
	assert_int_equal(rcp_ep_arm(b), 0);
	rcp_ep_get_stats(b, &s0);
	assert_int_equal(s0.acks_sent, s1.acks_sent);

	rcp_ep_close(b);
	rcp_ep_close(a);

	/* udp, where an unacked frame arms a tail-loss probe (2 x rto_min =
	 * 500 us before the first RTT sample): the default endpoint asks to
	 * wake before the slack, the sleeping one not before it. */
	setenv("RCP_SLEEP_SLACK_US", "7000", 1);
	assert_int_equal(rcp_ep_open("udp:", NULL, &a), 0);
	assert_int_equal(rcp_ep_open("udp:", &sleeper, &b), 0);
	unsetenv("RCP_SLEEP_SLACK_US");
	assert_int_equal(rcp_ep_addr(a, an, sizeof an), 0);
	assert_int_equal(rcp_ep_addr(b, bn, sizeof bn), 0);
	assert_int_equal(rcp_connect(a, bn, &ab), 0);
	assert_int_equal(rcp_connect(b, an, &ba), 0);
	assert_int_equal(rcp_send(ab, 7, "x", 1), 0);
	t = rcp_ep_timeout_ns(a);
	assert_true(t >= 0 && t < 7000000);
	assert_int_equal(rcp_send(ba, 8, "y", 1), 0);
	t = rcp_ep_timeout_ns(b);
	if (t != 0 && t < 7000000)
		fail_msg("sleeping endpoint asks to wake after %lld ns, slack is 7 ms",
		         (long long)t);
	assert_int_equal(rcp_recv(b, ba, 7, buf, sizeof buf, NULL), 0);
	assert_int_equal(rcp_recv(a, ab, 8, buf, sizeof buf, NULL), 0);
	assert_int_equal(buf[0], 'y');
	rcp_ep_close(b);
	rcp_ep_close(a);
}

/* ONE POLL PER LOOK (rcp/endpoint.c, ep_look).  A wait's DONE that
 * progresses the endpoint itself (rcp_test, rcp_probe: relinked PVM's
 * precv does) is that look's nic poll: the endpoint's own look does not
 * poll again.  A DONE that does not progress leaves the poll to the
 * endpoint's look, one a look.  Counted (nic_polls against DONE's calls
 * and the waiter's looks), on a receive nothing ever matches; a wait
 * source whose arm says RCP_EAGAIN keeps the wait from sleeping. */
struct look_done {
	rcp_ep *ep;
	rcp_req *req;
	int how; /* 0 no progress, 1 rcp_test, 2 rcp_probe */
	int calls, stop;
};

static int look_done(void *arg)
{
	struct look_done *d = arg;
	struct rcp_status st;
	d->calls++;
	if (d->how == 1 && rcp_test(d->req, &st) != RCP_EAGAIN)
		return -1;
	if (d->how == 2 && rcp_probe(d->ep, RCP_ANY_CHAN, 77, &st) != 0)
		return -1;
	return d->calls >= d->stop;
}

static int awake_arm(void *arg, int64_t *timeout_ns)
{
	(void)arg;
	(void)timeout_ns;
	return RCP_EAGAIN;
}

static void t_one_poll_per_look(void **state)
{
	char an[64], bn[64], buf[8];
	struct rcp_wait_src awake = {.fd = -1, .arm = awake_arm};
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	rcp_req *r;
	int id;
	(void)state;

	snprintf(an, sizeof an, "shm:tpl-%d-a", (int)getpid());
	snprintf(bn, sizeof bn, "shm:tpl-%d-b", (int)getpid());
	assert_int_equal(rcp_ep_open(an, NULL, &a), 0);
	assert_int_equal(rcp_ep_open(bn, NULL, &b), 0);
	assert_int_equal(rcp_connect(a, bn, &ab), 0);
	assert_int_equal(rcp_connect(b, an, &ba), 0);
	assert_int_equal(rcp_irecv(a, ab, 9, buf, sizeof buf, &r), 0);
	id = rcp_ep_wait_add(a, &awake);
	assert_true(id > 0);
	/* how 0 first: nothing progressed A before its first look. */
	for (int how = 0; how < 3; how++) {
		struct look_done d = {a, r, how, 0, 200};
		struct rcp_ep_stats s0, s1;
		struct rcp_wait_stats ws;
		unsigned long long polls;
		rcp_ep_get_stats(a, &s0);
		rcp_ep_wait_stats(a, NULL, 1);
		assert_int_equal(rcp_ep_wait(a, look_done, &d, WAIT_NS), 0);
		rcp_ep_get_stats(a, &s1);
		rcp_ep_wait_stats(a, &ws, 0);
		polls = (unsigned long long)(s1.nic_polls - s0.nic_polls);
		assert_int_equal(ws.looks, d.stop - 1);
		if (polls != (how ? (unsigned long long)d.calls : ws.looks))
			fail_msg("DONE %s: %llu nic polls in %llu looks (%d calls of DONE)",
			         how == 0   ? "without progress"
			         : how == 1 ? "rcp_test"
			                    : "rcp_probe",
			         polls, ws.looks, d.calls);
	}
	assert_int_equal(rcp_ep_wait_remove(a, id), 0);
	assert_int_equal(rcp_cancel(r), 0);
	assert_int_equal(rcp_wait(r, NULL, WAIT_NS), RCP_ECANCELED);
	rcp_ep_close(b);
	rcp_ep_close(a);
}

/* A completion callback that records its calls and the status. */
struct got {
	int calls;
	struct rcp_status st;
};

static void got_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct got *g = user;
	(void)req;
	g->calls++;
	g->st = *st;
}

/* A zeroed rcp_ep_config means "defaults" (issue 18): over a nic that
 * corrupts frames (RCP_FAULTS, so the nic no longer checks payloads) the
 * CRC is on, every corrupted frame is dropped and counted, and every byte
 * delivered is right.  Both endpoints are opened with `ec = {0}`, as the
 * examples do; RCP_CRC is unset (auto). */
static void t_zero_config_crc(void **state)
{
	static unsigned char out[20000], in[20000];
	char an[64], bn[64], faults[96];
	const char *crc_env = getenv("RCP_CRC");
	char *crc_saved = crc_env ? strdup(crc_env) : NULL;
	struct rcp_ep_config ec = {0};
	struct rcp_ep_stats sa, sb;
	struct rcp_nic_stats na, nb;
	uint64_t seed = test_seed(0x5eed18), r;
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	(void)state;

	r = seed;
	snprintf(an, sizeof an, "shm:tzc-%d-a", (int)getpid());
	snprintf(bn, sizeof bn, "shm:tzc-%d-b", (int)getpid());
	snprintf(faults, sizeof faults, "corrupt=0.05,seed=%llu",
	         (unsigned long long)(seed & 0xffff));
	setenv("RCP_FAULTS", faults, 1);
	unsetenv("RCP_CRC");
	assert_int_equal(rcp_ep_open(an, &ec, &a), 0);
	assert_int_equal(rcp_ep_open(bn, &ec, &b), 0);
	unsetenv("RCP_FAULTS");
	if (crc_saved)
		setenv("RCP_CRC", crc_saved, 1);
	free(crc_saved);
	assert_int_equal(rcp_connect(a, bn, &ab), 0);
	assert_int_equal(rcp_connect(b, an, &ba), 0);
	for (int i = 0; i < 300; i++) {
		size_t len = (size_t)(test_rand(&r) % sizeof out);
		struct got rg = {0}, sg = {0};
		int rc, sc;
		test_fill(out, len, (uint64_t)i);
		memset(in, 0, len);
		assert_int_equal(rcp_irecv_cb(b, ba, (uint64_t)i, in, sizeof in, got_cb, &rg, NULL),
		                 0);
		assert_int_equal(rcp_isend_cb(ab, (uint64_t)i, out, len, got_cb, &sg, NULL), 0);
		/* One thread drives both ends: a send may complete at once
		 * from a copy, and a must still resend what b dropped. */
		while (!rg.calls || !sg.calls) {
			rcp_progress(a);
			rcp_progress(b);
		}
		rc = rg.st.error;
		sc = sg.st.error;
		if (rc || sc || rg.calls != 1 || sg.calls != 1 || rg.st.len != len ||
		    test_check(in, len, (uint64_t)i) != -1) {
			dump(a, "a");
			dump(b, "b");
			fail_msg("message %d (%zu B): %s/%s, byte %ld wrong (seed %#llx)", i, len,
			         rcp_strerror(rc), rcp_strerror(sc),
			         test_check(in, len, (uint64_t)i), (unsigned long long)seed);
		}
	}
	rcp_ep_get_stats(a, &sa);
	rcp_ep_get_stats(b, &sb);
	rcp_nic_get_stats(rcp_ep_nic(a), &na);
	rcp_nic_get_stats(rcp_ep_nic(b), &nb);
	/* Frames were corrupted, and the receivers threw them away. */
	if (na.f_corrupted + nb.f_corrupted == 0 || sa.bad_frames + sb.bad_frames == 0)
		fail_msg("corrupted %llu+%llu frames, bad %llu+%llu (seed %#llx)",
		         (unsigned long long)na.f_corrupted, (unsigned long long)nb.f_corrupted,
		         (unsigned long long)sa.bad_frames, (unsigned long long)sb.bad_frames,
		         (unsigned long long)seed);
	/* One thread cannot progress one endpoint while the other lingers. */
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(b);
	rcp_ep_close(a);
	unsetenv("RCP_LINGER_MS");
}

/* rcp_mcastv: one message gathered from segments to two endpoints, for
 * several layouts (empty segments, a segment straddling frames, one past
 * the rendezvous threshold, none at all), each destination getting the
 * bytes in order and the right length; then the argument checks. */
static void t_mcastv(void **state)
{
	static const size_t layouts[][6] = {
	    {1, 0, 3 * 4096 + 5, 7, 0, 33},
	    {100000, 1, 0, 0, 50000, 2},
	    {0, 0, 0, 0, 0, 0},
	    {5, 0, 0, 0, 0, 0},
	};
	static char src[160000], g1[160000], g2[160000];
	char an[64], bn[64], cn[64], xn[64];
	rcp_ep *a, *b, *c, *x;
	rcp_chan *ab, *ba, *ac, *ca, *xa;
	struct rcp_status st, s1, s2;
	(void)state;

	three_eps("mcv", an, bn, cn, &a, &b, &c);
	three_chans(a, b, c, an, bn, cn, &ab, &ba, &ac, &ca);
	for (unsigned l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
		rcp_chan *to[2] = {ab, ac};
		struct rcp_iov v[6];
		size_t off = 0;
		rcp_req *m, *q1, *q2;
		test_fill(src, sizeof src, 40 + l);
		for (int i = 0; i < 6; i++) {
			v[i] = (struct rcp_iov){src + off, layouts[l][i]};
			off += layouts[l][i];
		}
		memset(g1, 0, sizeof g1);
		memset(g2, 0, sizeof g2);
		assert_int_equal(rcp_irecv(b, ba, 70 + l, g1, sizeof g1, &q1), 0);
		assert_int_equal(rcp_irecv(c, ca, 70 + l, g2, sizeof g2, &q2), 0);
		assert_int_equal(rcp_mcastv(to, 2, 70 + l, v, 6, &m), 0);
		for (int done = 0, i = 0; done != 7 && i < 10000000; i++) {
			rcp_progress(a);
			rcp_progress(b);
			rcp_progress(c);
			if (!(done & 1) && rcp_test(q1, &s1) != RCP_EAGAIN)
				done |= 1;
			if (!(done & 2) && rcp_test(q2, &s2) != RCP_EAGAIN)
				done |= 2;
			if (!(done & 4) && rcp_test(m, &st) != RCP_EAGAIN)
				done |= 4;
		}
		assert_int_equal(st.error, 0);
		assert_int_equal(s1.error, 0);
		assert_int_equal(s2.error, 0);
		assert_int_equal(s1.len, off);
		assert_int_equal(s2.len, off);
		assert_memory_equal(g1, src, off);
		assert_memory_equal(g2, src, off);
		assert_int_equal(g1[off], 0); /* nothing past the message */
	}
	/* argument checks */
	{
		rcp_chan *to[2] = {ab, ac};
		struct rcp_iov v[2] = {{src, 4}, {NULL, 3}};
		rcp_req *m;
		snprintf(xn, sizeof xn, "shm:mcv-%d-x", (int)getpid());
		assert_int_equal(rcp_ep_open(xn, NULL, &x), 0);
		assert_int_equal(rcp_connect(x, an, &xa), 0);
		assert_int_equal(rcp_mcastv(NULL, 2, 1, v, 1, &m), RCP_EINVAL);
		assert_int_equal(rcp_mcastv(to, 0, 1, v, 1, &m), RCP_EINVAL);
		assert_int_equal(rcp_mcastv(to, 2, 1, v, 1, NULL), RCP_EINVAL);
		assert_int_equal(rcp_mcastv(to, 2, 1, v, -1, &m), RCP_EINVAL);
		assert_int_equal(rcp_mcastv(to, 2, 1, NULL, 1, &m), RCP_EINVAL);
		assert_int_equal(rcp_mcastv(to, 2, 1, v, 2, &m), RCP_EINVAL);
		assert_int_equal(rcp_mcastv(to, 2, RCP_ANY_TAG, v, 1, &m), RCP_EINVAL);
		to[1] = xa; /* channels of two endpoints */
		assert_int_equal(rcp_mcastv(to, 2, 1, v, 1, &m), RCP_EINVAL);
		rcp_ep_close(x);
	}
	rcp_ep_close(c);
	rcp_ep_close(b);
	rcp_ep_close(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_api),
	    cmocka_unit_test(t_mcastv),
	    cmocka_unit_test(t_post_order),
	    cmocka_unit_test(t_arm_acks_and_slack),
	    cmocka_unit_test(t_address_reuse),
	    cmocka_unit_test(t_zero_config_crc),
	    cmocka_unit_test(t_one_poll_per_look),
	};
	return cmocka_run_group_tests_name("rcp channels: api", tests, NULL, NULL);
}
