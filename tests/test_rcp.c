/*
 * tests/test_rcp.c — RCP channels between two processes over real nic
 * backends (shm, udp), with and without the fault injector at 10% loss.
 *
 * The parent sends messages of many sizes (0 B to 8 MiB, frame borders
 * included); the child checks every byte and echoes each back; the parent
 * checks the echo.  Then a burst of non-blocking sends of random sizes
 * whose order and contents the child verifies.  Pipes carry only the two
 * addresses and the final verdict; nothing waits on time.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include <rcp/rcp.h>

#include "rcp/wire.h"
#include "testutil.h"

#define WAIT_NS (120ll * 1000000000)

struct setup {
	const char *transport;
	const char *faults; /* NULL: none */
	unsigned flags;     /* rcp_ep_config.flags of both ends */
};

static const struct setup setups[] = {
    {"shm", NULL, 0},
    {"udp", NULL, 0},
    {"shm", "drop=0.1,dup=0.02,reorder=0.1,seed=11", 0},
    {"udp", "drop=0.1,dup=0.02,reorder=0.1,seed=12", 0},
    /* Sleeping at once: acks owed go out before each sleep, and loss
     * recovery timers run up to RCP_SLEEP_SLACK_US late. */
    {"udp", "drop=0.1,dup=0.02,reorder=0.1,seed=13", RCP_EP_SLEEP},
    {"shm", "drop=0.1,dup=0.02,reorder=0.1,seed=14", RCP_EP_SLEEP},
};

static const size_t sizes[] = {0,     1,     7,     256,   257,    1000,    4096,    16320,
                               16321, 16384, 65000, 65536, 100000, 1 << 20, 3 << 20, 8 << 20};

static int open_ep(const struct setup *su, int child, rcp_ep **ep)
{
	char addr[64];
	struct rcp_nic_config nc = {0};
	struct rcp_ep_config ec = {0};

	if (!strcmp(su->transport, "shm"))
		snprintf(addr, sizeof addr, "shm:tr-%d-%d", (int)getpid(), child);
	else
		snprintf(addr, sizeof addr, "udp:");
	nc.faults = su->faults ? su->faults : "";
	ec.nic = &nc;
	ec.crc = -1;
	ec.flags = su->flags;
	return rcp_ep_open(addr, &ec, ep);
}

/* On failure: what the endpoint saw, to tell loss from protocol bugs. */
static void dump(rcp_ep *ep, const char *who)
{
	struct rcp_ep_stats e;
	struct rcp_nic_stats n;
	rcp_ep_get_stats(ep, &e);
	rcp_nic_get_stats(rcp_ep_nic(ep), &n);
	print_error("%s: frames %llu/%llu retx %llu timeouts %llu dup %llu bad %llu stale %llu "
	            "ooo %llu | nic tx %llu rx %llu rxdrop %llu eagain %llu fdrop %llu\n",
	            who, (unsigned long long)e.frames_sent, (unsigned long long)e.frames_recv,
	            (unsigned long long)e.retransmits, (unsigned long long)e.timeouts,
	            (unsigned long long)e.dup_frames, (unsigned long long)e.bad_frames,
	            (unsigned long long)e.stale_frames, (unsigned long long)e.ooo_frames,
	            (unsigned long long)n.tx_frames, (unsigned long long)n.rx_frames,
	            (unsigned long long)n.rx_dropped, (unsigned long long)n.tx_eagain,
	            (unsigned long long)n.f_dropped);
}

static int swap_addr(rcp_ep *ep, int rfd, int wfd, rcp_chan **ch)
{
	char me[RCP_NIC_ADDRSTR_MAX] = {0}, peer[RCP_NIC_ADDRSTR_MAX];
	if (rcp_ep_addr(ep, me, sizeof me))
		return -1;
	if (write(wfd, me, sizeof me) != (ssize_t)sizeof me ||
	    read(rfd, peer, sizeof peer) != (ssize_t)sizeof peer)
		return -1;
	return rcp_connect(ep, peer, ch);
}

/* Child: receive each message, check it, echo it; then the burst. */
static int child_main(const struct setup *su, int rfd, int wfd, uint64_t seed, int nburst)
{
	rcp_ep *ep;
	rcp_chan *ch;
	unsigned char *buf = malloc(8 << 20);
	struct rcp_status st;
	uint64_t r = seed;

	if (!buf || open_ep(su, 1, &ep) || swap_addr(ep, rfd, wfd, &ch))
		return 10;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		rcp_req *rq;
		if (rcp_irecv(ep, ch, 100 + i, buf, sizes[i], &rq) || rcp_wait(rq, &st, WAIT_NS)) {
			dump(ep, "child");
			return 11;
		}
		if (st.len != sizes[i] || st.tag != 100 + i || st.chan != ch ||
		    test_check(buf, sizes[i], i) != -1)
			return 12;
		if (rcp_send(ch, 200 + i, buf, sizes[i])) {
			dump(ep, "child");
			return 13;
		}
	}
	/* Burst: posted with a wildcard tag, must arrive in order. */
	for (int i = 0; i < nburst; i++) {
		size_t len = (size_t)(test_rand(&r) % 70000);
		if (rcp_recv(ep, RCP_ANY_CHAN, RCP_ANY_TAG, buf, 8 << 20, &st))
			return 14;
		if (st.tag != (uint64_t)(1000 + i) || st.len != len ||
		    test_check(buf, len, (uint64_t)(1000 + i)) != -1)
			return 15;
	}
	/* Tell the parent all is well, over the channel itself. */
	if (rcp_send(ch, 9999, "ok", 2))
		return 16;
	/* Stay until the parent has our acks (it closes its pipe end). */
	{
		char c;
		rcp_req *rq;
		if (rcp_irecv(ep, ch, 7777, &c, 1, &rq))
			return 17;
		if (rcp_wait(rq, NULL, WAIT_NS))
			return 18;
	}
	rcp_ep_close(ep);
	free(buf);
	return 0;
}

static void run_setup(const struct setup *su)
{
	int p2c[2], c2p[2], st;
	pid_t child;
	uint64_t seed = test_seed(0xabc);
	enum { NBURST = 200 };

	assert_int_equal(pipe(p2c), 0);
	assert_int_equal(pipe(c2p), 0);
	child = test_fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(p2c[1]);
		close(c2p[0]);
		_exit(child_main(su, p2c[0], c2p[1], seed, NBURST));
	}
	close(p2c[0]);
	close(c2p[1]);
	{
		rcp_ep *ep;
		rcp_chan *ch;
		unsigned char *sbuf = malloc(8 << 20), *rbuf = malloc(8 << 20);
		struct rcp_status s;
		uint64_t r = seed;
		rcp_req **reqs = calloc(NBURST, sizeof *reqs);
		unsigned char **bb = calloc(NBURST, sizeof *bb);
		int rc;

		assert_int_equal(open_ep(su, 0, &ep), 0);
		assert_int_equal(swap_addr(ep, c2p[0], p2c[1], &ch), 0);
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			test_fill(sbuf, sizes[i], i);
			rc = rcp_send(ch, 100 + i, sbuf, sizes[i]);
			if (rc)
				dump(ep, "parent");
			if (rc)
				fail_msg("%s%s: send %zu B: %s", su->transport,
				         su->faults ? "+faults" : "", sizes[i], rcp_strerror(rc));
			memset(rbuf, 0xee, sizes[i]);
			rc = rcp_recv(ep, ch, 200 + i, rbuf, sizes[i], &s);
			if (rc)
				dump(ep, "parent");
			if (rc)
				fail_msg("%s%s: echo of %zu B: %s", su->transport,
				         su->faults ? "+faults" : "", sizes[i], rcp_strerror(rc));
			assert_int_equal(s.len, sizes[i]);
			assert_int_equal(test_check(rbuf, sizes[i], i), -1);
		}
		for (int i = 0; i < NBURST; i++) {
			size_t len = (size_t)(test_rand(&r) % 70000);
			bb[i] = malloc(len + 1);
			test_fill(bb[i], len, (uint64_t)(1000 + i));
			assert_int_equal(rcp_isend(ch, (uint64_t)(1000 + i), bb[i], len, &reqs[i]),
			                 0);
		}
		for (int i = 0; i < NBURST; i++) {
			rc = rcp_wait(reqs[i], NULL, WAIT_NS);
			if (rc)
				fail_msg("burst send %d: %s", i, rcp_strerror(rc));
			free(bb[i]);
		}
		rc = rcp_recv(ep, ch, 9999, rbuf, 2, &s);
		if (rc)
			fail_msg("%s%s: child verdict: %s", su->transport,
			         su->faults ? "+faults" : "", rcp_strerror(rc));
		assert_memory_equal(rbuf, "ok", 2);
		assert_int_equal(rcp_send(ch, 7777, "x", 1), 0);
		/* rcp_send of an inline message returns before it is acked:
		 * keep progressing until the child has it and exits. */
		while (waitpid(child, &st, WNOHANG) == 0)
			rcp_progress(ep);
		st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (st)
			fail_msg("%s%s: child exited %d (seed %#llx)", su->transport,
			         su->faults ? "+faults" : "", st, (unsigned long long)seed);
		{
			struct rcp_ep_stats es;
			rcp_ep_get_stats(ep, &es);
			print_message(
			    "  %s%s: %llu msgs, %llu frames, %llu retransmits, %llu dups, "
			    "%llu rma\n",
			    su->transport, su->faults ? "+faults" : "",
			    (unsigned long long)es.msgs_sent, (unsigned long long)es.frames_sent,
			    (unsigned long long)es.retransmits, (unsigned long long)es.dup_frames,
			    (unsigned long long)es.rma_msgs);
			if (su->faults)
				assert_true(es.retransmits > 0); /* the faults were real */
			/* shm declares it loses nothing (RCP_NIC_CAP_RELIABLE): no
			 * round-trip estimate is kept there; the faults wrapper
			 * that drops frames clears the capability, udp never had
			 * it: there every exchange samples. */
			if (!strcmp(su->transport, "shm") && !su->faults)
				assert_int_equal(es.rtt_samples, 0);
			else
				assert_true(es.rtt_samples > 0);
		}
		rcp_ep_close(ep);
		free(sbuf);
		free(rbuf);
		free(reqs);
		free(bb);
	}
	close(p2c[1]);
	close(c2p[0]);
}

/* One table row per test (TEST_ROW in main). */
static void t_setup(void **state)
{
	run_setup(*state);
}

/* A peer killed mid-transfer: pending operations fail with RCP_EPEER
 * after RCP_PEER_TIMEOUT, nothing hangs. */
static void t_peer_killed(void **state)
{
	const char *transports[] = {"shm", "udp"};
	(void)state;
	setenv("RCP_PEER_TIMEOUT", "1000", 1);
	for (int t = 0; t < 2; t++) {
		struct setup su = {transports[t], NULL, 0};
		int p2c[2], c2p[2];
		pid_t child;
		rcp_ep *ep;
		rcp_chan *ch;
		rcp_req *rq, *sq;
		static unsigned char big[4 << 20], rb[16];
		struct rcp_status s;
		int rc;

		assert_int_equal(pipe(p2c), 0);
		assert_int_equal(pipe(c2p), 0);
		child = test_fork();
		if (child == 0) {
			rcp_ep *cep;
			rcp_chan *cch;
			close(p2c[1]);
			close(c2p[0]);
			if (open_ep(&su, 1, &cep) || swap_addr(cep, p2c[0], c2p[1], &cch))
				_exit(10);
			/* Receive one message, then wait to be killed. */
			if (rcp_recv(cep, cch, 1, rb, sizeof rb, NULL))
				_exit(11);
			if (write(c2p[1], "r", 1) != 1)
				_exit(12);
			for (;;)
				pause();
		}
		close(p2c[0]);
		close(c2p[1]);
		assert_int_equal(open_ep(&su, 0, &ep), 0);
		assert_int_equal(swap_addr(ep, c2p[0], p2c[1], &ch), 0);
		assert_int_equal(rcp_send(ch, 1, "hi", 2), 0);
		{
			char c;
			assert_int_equal(read(c2p[0], &c, 1), 1);
		}
		kill(child, SIGKILL);
		test_wait_child(child);
		if (!strcmp(su.transport, "shm")) {
			/* A killed process cannot unlink its segment: clean up. */
			char seg[64];
			snprintf(seg, sizeof seg, "/rcp-tr-%d-1", (int)child);
			shm_unlink(seg);
		}
		/* A large send (nobody will take it) and a receive. */
		assert_int_equal(rcp_isend(ch, 2, big, sizeof big, &sq), 0);
		assert_int_equal(rcp_irecv(ep, ch, 3, rb, sizeof rb, &rq), 0);
		rc = rcp_wait(sq, &s, WAIT_NS);
		assert_int_equal(rc, RCP_EPEER);
		rc = rcp_wait(rq, &s, WAIT_NS);
		assert_int_equal(rc, RCP_EPEER);
		assert_int_equal(rcp_send(ch, 4, "x", 1), RCP_EPEER);
		rcp_ep_close(ep);
		close(p2c[1]);
		close(c2p[0]);
	}
	unsetenv("RCP_PEER_TIMEOUT");
}

/* Three shm endpoints named TAG-<pid>-a/b/c (names in AN, BN, CN, 64
 * bytes each) and static channels between A and each of B and C. */
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

/* ---- handshake: a peer played by hand over a plain udp socket ----------
 * docs/protocol.md, "Channels and epochs": epochs are verification tags, a
 * restart needs proof, an accepting endpoint keeps nothing for an unknown
 * sender until it echoes a cookie, half-open accepted channels are
 * reclaimed, ICMP errors are hints.  The raw peer builds frames with
 * rcp/wire.h (no CRC: udp needs none, RCP_CRC is unset here) and the
 * default session. */

#define RAW_SESSION 0x52435031u

struct raw {
	int fd;
	struct sockaddr_in to; /* the endpoint under test */
};

static int64_t hs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void hs_env(void)
{
	unsetenv("RCP_SESSION");
	unsetenv("RCP_CRC");
}

/* A socket at SRC (host order, any port) speaking to EP. */
static void raw_open_from(struct raw *w, rcp_ep *ep, uint32_t src)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	struct sockaddr_in me = {.sin_family = AF_INET};
	unsigned port;

	assert_int_equal(rcp_ep_addr(ep, addr, sizeof addr), 0);
	assert_int_equal(sscanf(addr, "udp:127.0.0.1:%u", &port), 1);
	memset(&w->to, 0, sizeof w->to);
	w->to.sin_family = AF_INET;
	w->to.sin_port = htons((uint16_t)port);
	w->to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	w->fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(w->fd >= 0);
	me.sin_addr.s_addr = htonl(src);
	assert_int_equal(bind(w->fd, (struct sockaddr *)&me, sizeof me), 0);
}

static void raw_open(struct raw *w, rcp_ep *ep)
{
	raw_open_from(w, ep, INADDR_LOOPBACK);
}

/* One frame from W (or from socket FD if >= 0) to the endpoint. */
static void raw_send_fd(int fd, const struct sockaddr_in *to, uint8_t type, uint16_t flags,
                        uint32_t src, uint32_t dst, uint32_t seq, uint32_t msg, uint64_t tag,
                        uint64_t arg, const char *pl)
{
	unsigned char f[RCPW_HLEN + 64];
	struct rcpw_hdr h;
	uint32_t len = pl ? (uint32_t)strlen(pl) : 0;

	memset(&h, 0, sizeof h);
	h.magic = RCPW_MAGIC;
	h.version = RCPW_VERSION;
	h.type = type;
	h.flags = flags;
	h.hlen = RCPW_HLEN;
	h.session = RAW_SESSION;
	h.src_epoch = src;
	h.dst_epoch = dst;
	h.seq = seq;
	h.ack = 1;
	h.credits = 64;
	h.wnd = 64;
	h.len = len;
	h.msg = msg;
	h.tag = tag;
	h.arg = type == RCPW_DATA ? len : arg;
	rcpw_hdr_swap(&h);
	memcpy(f, &h, sizeof h);
	if (len)
		memcpy(f + RCPW_HLEN, pl, len);
	assert_int_equal(sendto(fd, f, RCPW_HLEN + len, 0, (const struct sockaddr *)to, sizeof *to),
	                 (ssize_t)(RCPW_HLEN + len));
}

static void raw_send(struct raw *w, uint8_t type, uint32_t src, uint32_t dst, uint32_t seq,
                     uint64_t tag, uint64_t arg, const char *pl)
{
	uint16_t fl = type == RCPW_DATA ? RCPW_F_FIRST | RCPW_F_EAGER : 0;
	raw_send_fd(w->fd, &w->to, type, fl, src, dst, seq, seq, tag, arg, pl);
}

/* Progresses EP until W receives a challenge (PING with a cookie) for
 * incarnation DST; returns the cookie, *FROM the challenger's epoch. */
static uint64_t raw_challenge(struct raw *w, rcp_ep *ep, uint32_t dst, uint32_t *from)
{
	int64_t end = hs_now() + 10 * 1000000000ll;
	while (hs_now() < end) {
		struct rcpw_hdr h;
		ssize_t n;
		rcp_progress(ep);
		n = recv(w->fd, &h, sizeof h, MSG_DONTWAIT);
		if (n < (ssize_t)RCPW_HLEN)
			continue;
		rcpw_hdr_swap(&h);
		if (h.type == RCPW_PING && h.arg && h.dst_epoch == dst) {
			*from = h.src_epoch;
			return h.arg;
		}
	}
	fail_msg("no challenge for epoch %#x", (unsigned)dst);
	return 0;
}

/* Progresses EP (and OTHER, if not NULL) until a message arrives at EP
 * (any channel, any tag). */
static void hs_recv2(rcp_ep *ep, rcp_ep *other, struct rcp_status *st, char *buf, size_t len)
{
	rcp_req *r;
	int64_t end = hs_now() + 10 * 1000000000ll;
	memset(buf, 0, len);
	assert_int_equal(rcp_irecv(ep, RCP_ANY_CHAN, RCP_ANY_TAG, buf, len - 1, &r), 0);
	while (hs_now() < end) {
		if (other)
			rcp_progress(other);
		if (rcp_test(r, st) != RCP_EAGAIN)
			return;
	}
	fail_msg("no message");
}

static void hs_recv(rcp_ep *ep, struct rcp_status *st, char *buf, size_t len)
{
	hs_recv2(ep, NULL, st, buf, len);
}

/* rcp_chan_watch's callback: counts, keeps the last error and the
 * channel's restart count as the callback sees it, watches again. */
struct watch_seen {
	int n, err;
	unsigned restarts;
};
static void on_watch(rcp_req *r, const struct rcp_status *st, void *user)
{
	struct watch_seen *w = user;
	(void)r;
	w->n++;
	w->err = st->error;
	if (st->error == RCP_EPEER) { /* CH lives on (closed: it may be gone) */
		w->restarts = rcp_chan_restarts(st->chan);
		assert_int_equal(rcp_chan_watch(st->chan, on_watch, w, NULL), 0);
	}
}

/* Forged frames on a live udp channel: a dst_epoch 0 frame with a new
 * src_epoch is no restart (the channel and its sequence go on); a restart
 * is taken once the new incarnation answers the challenge with our epoch;
 * after it the old incarnation's stragglers are dropped.  A restart watch
 * (rcp_chan_watch) on the channel fires for the restart only, once, and
 * the one posted again from its callback with the endpoint's close. */
static void t_udp_forged_epochs(void **state)
{
	struct watch_seen ws = {0};
	rcp_req *wr, *wr2;
	const uint32_t e1 = 0x11111111, e2 = 0x22222222, forged = 0xbad0bad0;
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	struct raw w;
	rcp_ep *ep;
	rcp_chan *ch;
	uint32_t es_epoch, from;
	uint64_t cookie;
	char buf[64];
	(void)state;

	hs_env();
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	raw_open(&w, ep);
	/* First contact: no channel before the cookie comes back. */
	raw_send(&w, RCPW_DATA, e1, 0, 1, 1, 0, "one");
	cookie = raw_challenge(&w, ep, e1, &es_epoch);
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 0);
	raw_send(&w, RCPW_ACK, e1, es_epoch, 0, 0, cookie, NULL);
	/* The echo named us: from now on a blind frame of E1 is a
	 * straggler (the real client's resend names us). */
	raw_send(&w, RCPW_DATA, e1, 0, 1, 97, 0, "blind");
	raw_send(&w, RCPW_DATA, e1, es_epoch, 1, 1, 0, "one");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 1);
	assert_string_equal(buf, "one");
	ch = st.chan;
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 1);
	/* A plain watch: one per channel, pending until a reset, canceled. */
	assert_int_equal(rcp_chan_watch(ch, NULL, NULL, NULL), RCP_EINVAL);
	assert_int_equal(rcp_chan_watch(ch, NULL, NULL, &wr), 0);
	assert_int_equal(rcp_chan_watch(ch, on_watch, &ws, &wr2), RCP_EBUSY);
	assert_int_equal(rcp_test(wr, &st), RCP_EAGAIN);
	assert_int_equal(rcp_cancel(wr), 0);
	assert_int_equal(rcp_test(wr, &st), RCP_ECANCELED);
	assert_ptr_equal(st.chan, ch);
	assert_int_equal(rcp_chan_watch(ch, on_watch, &ws, NULL), 0);

	/* Forged: dst_epoch 0, an epoch nobody has.  Challenged, not taken. */
	raw_send(&w, RCPW_DATA, forged, 0, 2, 99, 0, "forged");
	raw_send(&w, RCPW_PING, forged, 0, 0, 0, 0, NULL);
	raw_send(&w, RCPW_DATA, e1, es_epoch, 2, 2, 0, "two");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 2);
	assert_string_equal(buf, "two");
	assert_int_equal(rcp_chan_restarts(ch), 0);
	rcp_ep_get_stats(ep, &es);
	assert_true(es.restart_claims >= 2);
	assert_int_equal(ws.n, 0); /* claims are no restart */

	/* A real restart: E2 speaks without our epoch, is challenged and
	 * answers with it. */
	raw_send(&w, RCPW_DATA, e2, 0, 1, 3, 0, "three");
	cookie = raw_challenge(&w, ep, e2, &from);
	assert_int_equal(from, es_epoch);
	assert_int_equal(rcp_chan_restarts(ch), 0);
	/* Only the echo of that challenge proves it (CHANNELS: a frame
	 * naming our epoch may be a straggler of a conversation before). */
	raw_send(&w, RCPW_ACK, e2, es_epoch, 0, 0, cookie, NULL);
	raw_send(&w, RCPW_DATA, e2, es_epoch, 1, 3, 0, "three");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 3);
	assert_int_equal(rcp_chan_restarts(ch), 1);
	assert_int_equal(ws.n, 1);
	assert_int_equal(ws.err, RCP_EPEER);
	assert_int_equal(ws.restarts, 1);
	/* A straggler of E1, naming our epoch: stale, not another restart. */
	raw_send(&w, RCPW_DATA, e1, es_epoch, 3, 98, 0, "stale");
	raw_send(&w, RCPW_DATA, e2, es_epoch, 2, 4, 0, "four");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 4);
	assert_string_equal(buf, "four");
	assert_int_equal(rcp_chan_restarts(ch), 1);
	assert_int_equal(ws.n, 1);
	close(w.fd);
	rcp_ep_close(ep);
	assert_int_equal(ws.n, 2); /* the watch posted again: closed */
	assert_int_equal(ws.err, RCP_ECLOSED);
}

/* 6,000 one-frame senders, each from its own source port, leave an
 * accepting endpoint without a single peer or channel (each got a
 * stateless challenge); a real client still gets through. */
static void t_udp_many_senders(void **state)
{
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	char addr[RCP_NIC_ADDRSTR_MAX], buf[64];
	uint64_t r = test_seed(18);
	struct raw w;
	rcp_ep *ep, *cl;
	rcp_chan *ch;
	(void)state;

	hs_env();
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	raw_open(&w, ep);
	close(w.fd);
	for (int i = 0; i < 6000; i++) {
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		uint32_t e = (uint32_t)test_rand(&r) | 1;
		assert_true(fd >= 0);
		raw_send_fd(fd, &w.to, RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, e, 0, 1, 1, 1, 0,
		            "hi");
		close(fd);
		if (i % 16 == 15)
			for (int k = 0; k < 4; k++)
				rcp_progress(ep);
	}
	for (int k = 0; k < 64; k++)
		rcp_progress(ep);
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 0);
	assert_true(es.challenges_sent > 0);

	assert_int_equal(rcp_ep_open("udp:", NULL, &cl), 0);
	assert_int_equal(rcp_ep_addr(ep, addr, sizeof addr), 0);
	assert_int_equal(rcp_connect(cl, addr, &ch), 0);
	assert_int_equal(rcp_send(ch, 7, "real", 4), 0);
	hs_recv2(ep, cl, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 7);
	assert_string_equal(buf, "real");
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 1);
	rcp_ep_close(cl);
	rcp_ep_close(ep);
}

/* An accepted channel that stays half-open (cookie echoed, no message) is
 * reclaimed after the peer timeout; one that carried a message is not,
 * though idle as long. */
static void t_udp_reclaim(void **state)
{
	const uint32_t ea = 0x0a0a0a0a, eb = 0x0b0b0b0b;
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	struct raw a, b;
	rcp_ep *ep;
	uint32_t es_epoch;
	uint64_t cookie;
	int64_t end;
	char buf[64];
	(void)state;

	hs_env();
	setenv("RCP_PEER_TIMEOUT", "100", 1);
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	unsetenv("RCP_PEER_TIMEOUT");
	raw_open(&b, ep);
	raw_open(&a, ep);
	/* B: a message, then silence. */
	raw_send(&b, RCPW_DATA, eb, 0, 1, 1, 0, "b");
	cookie = raw_challenge(&b, ep, eb, &es_epoch);
	raw_send(&b, RCPW_ACK, eb, es_epoch, 0, 0, cookie, NULL);
	raw_send(&b, RCPW_DATA, eb, es_epoch, 1, 1, 0, "b");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_string_equal(buf, "b");
	/* A: the handshake only. */
	raw_send(&a, RCPW_PING, ea, 0, 0, 0, 0, NULL);
	cookie = raw_challenge(&a, ep, ea, &es_epoch);
	raw_send(&a, RCPW_ACK, ea, es_epoch, 0, 0, cookie, NULL);
	end = hs_now() + 20 * 1000000000ll;
	do {
		rcp_progress(ep);
		rcp_ep_get_stats(ep, &es);
	} while (es.chans_reclaimed == 0 && hs_now() < end);
	assert_int_equal(es.chans_accepted, 2);
	assert_int_equal(es.chans_reclaimed, 1); /* A only: B was idle longer */
	/* B's channel is there: its next message needs no new cookie. */
	raw_send(&b, RCPW_DATA, eb, es_epoch, 2, 2, 0, "b2");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_string_equal(buf, "b2");
	/* A's is gone: it is challenged afresh and accepted again. */
	raw_send(&a, RCPW_DATA, ea, es_epoch, 1, 1, 0, "a");
	cookie = raw_challenge(&a, ep, ea, &es_epoch);
	raw_send(&a, RCPW_ACK, ea, es_epoch, 0, 0, cookie, NULL);
	raw_send(&a, RCPW_DATA, ea, es_epoch, 1, 1, 0, "a");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_string_equal(buf, "a");
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 3);
	close(a.fd);
	close(b.fd);
	rcp_ep_close(ep);
}

/* A client started before its server: its frames draw ICMP port
 * unreachable, which must not fail the channel before the peer timeout;
 * the server then appears at the address and the message goes through. */
static void t_udp_client_first(void **state)
{
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof sa;
	struct rcp_ep_stats es;
	struct rcp_status st;
	char addr[64], buf[64];
	rcp_ep *cl, *srv;
	rcp_chan *ch;
	rcp_req *sr;
	int fd, rc = RCP_EAGAIN;
	int64_t end;
	(void)state;

	hs_env();
	/* A free port, closed again: nobody listens there. */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	snprintf(addr, sizeof addr, "udp:127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));

	setenv("RCP_PEER_TIMEOUT", "60000", 1);
	assert_int_equal(rcp_ep_open("udp:", NULL, &cl), 0);
	unsetenv("RCP_PEER_TIMEOUT");
	assert_int_equal(rcp_connect(cl, addr, &ch), 0);
	assert_int_equal(rcp_issend(ch, 5, "early", 5, &sr), 0);
	/* Sent and resent into the closed port (each draws an ICMP error). */
	end = hs_now() + 20 * 1000000000ll;
	do {
		rc = rcp_test(sr, &st);
		rcp_ep_get_stats(cl, &es);
	} while (rc == RCP_EAGAIN && es.retransmits < 4 && hs_now() < end);
	assert_int_equal(rc, RCP_EAGAIN); /* still pending, not RCP_EPEER */
	assert_true(es.retransmits >= 4);

	assert_int_equal(rcp_ep_open(addr, &ec, &srv), 0);
	{
		rcp_req *r;
		memset(buf, 0, sizeof buf);
		assert_int_equal(rcp_irecv(srv, RCP_ANY_CHAN, 5, buf, sizeof buf - 1, &r), 0);
		end = hs_now() + 30 * 1000000000ll;
		rc = RCP_EAGAIN;
		while (rc == RCP_EAGAIN && hs_now() < end) {
			rcp_progress(cl);
			rc = rcp_test(r, &st);
		}
		assert_int_equal(rc, 0);
		assert_string_equal(buf, "early");
	}
	assert_int_equal(rcp_wait(sr, &st, WAIT_NS), 0);
	rcp_ep_close(cl);
	rcp_ep_close(srv);
}

/* A udp peer restarts at the same address and speaks first: the channel
 * challenges the new incarnation, which answers with our epoch (proof),
 * and only then is it taken as a restart; its first message, dropped
 * meanwhile, is resent and arrives. */
static void t_udp_restart_proven(void **state)
{
	char aa[RCP_NIC_ADDRSTR_MAX], ba[RCP_NIC_ADDRSTR_MAX], buf[16];
	struct rcp_ep_stats es;
	struct rcp_status st;
	rcp_ep *a, *b1, *b2;
	rcp_chan *ab, *ba1, *ba2;
	int64_t end;
	(void)state;

	hs_env();
	assert_int_equal(rcp_ep_open("udp:", NULL, &a), 0);
	assert_int_equal(rcp_ep_open("udp:", NULL, &b1), 0);
	assert_int_equal(rcp_ep_addr(a, aa, sizeof aa), 0);
	assert_int_equal(rcp_ep_addr(b1, ba, sizeof ba), 0);
	assert_int_equal(rcp_connect(a, ba, &ab), 0);
	assert_int_equal(rcp_connect(b1, aa, &ba1), 0);
	assert_int_equal(rcp_send(ab, 1, "a1", 2), 0);
	assert_int_equal(rcp_recv(b1, ba1, 1, buf, sizeof buf, &st), 0);
	assert_int_equal(rcp_send(ba1, 2, "b1", 2), 0);
	assert_int_equal(rcp_recv(a, ab, 2, buf, sizeof buf, &st), 0);
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(b1);
	unsetenv("RCP_LINGER_MS");
	assert_int_equal(rcp_ep_open(ba, NULL, &b2), 0);
	assert_int_equal(rcp_connect(b2, aa, &ba2), 0);
	assert_int_equal(rcp_send(ba2, 9, "b2", 2), 0);
	end = hs_now() + 10 * 1000000000ll;
	while (rcp_chan_restarts(ab) == 0 && hs_now() < end) {
		rcp_progress(a);
		rcp_progress(b2);
	}
	assert_int_equal(rcp_chan_restarts(ab), 1);
	rcp_ep_get_stats(a, &es);
	assert_true(es.challenges_sent >= 1);
	assert_int_equal(rcp_recv(a, ab, 9, buf, sizeof buf, &st), 0);
	assert_memory_equal(buf, "b2", 2);
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(b2);
	rcp_ep_close(a);
	unsetenv("RCP_LINGER_MS");
}

/* Senders that own their addresses and echo the cookie fill the peer
 * table (4,096 udp peers) with half-open channels; a real client then
 * displaces the oldest of them instead of being refused. */
static void t_udp_table_full(void **state)
{
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	char addr[RCP_NIC_ADDRSTR_MAX], buf[64];
	struct raw w;
	rcp_ep *ep, *cl;
	rcp_chan *ch;
	const int n = 4100;
	(void)state;

	hs_env();
	setenv("RCP_PEER_TIMEOUT", "600000", 1); /* no idle reclaim here */
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	unsetenv("RCP_PEER_TIMEOUT");
	for (int i = 0; i < n; i++) {
		uint32_t e = 0x30000000u + (uint32_t)i, es_epoch;
		uint64_t cookie;
		/* Distinct addresses: a port closed may come back at once. */
		raw_open_from(&w, ep, 0x7f010000u + (uint32_t)i);
		raw_send(&w, RCPW_PING, e, 0, 0, 0, 0, NULL);
		cookie = raw_challenge(&w, ep, e, &es_epoch);
		raw_send(&w, RCPW_ACK, e, es_epoch, 0, 0, cookie, NULL);
		close(w.fd);
	}
	for (int k = 0; k < 64; k++)
		rcp_progress(ep);
	/* The udp table holds 4,096 peers: the last few displaced the oldest. */
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, n);
	assert_int_equal(es.chans_reclaimed, n - 4096);

	assert_int_equal(rcp_ep_open("udp:", NULL, &cl), 0);
	assert_int_equal(rcp_ep_addr(ep, addr, sizeof addr), 0);
	assert_int_equal(rcp_connect(cl, addr, &ch), 0);
	assert_int_equal(rcp_send(ch, 7, "real", 4), 0);
	hs_recv2(ep, cl, &st, buf, sizeof buf);
	assert_string_equal(buf, "real");
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_reclaimed, n - 4096 + 1);
	rcp_ep_close(cl);
	rcp_ep_close(ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TEST_ROW("t_shm", t_setup, &setups[0]),
	    TEST_ROW("t_udp", t_setup, &setups[1]),
	    TEST_ROW("t_shm_faults", t_setup, &setups[2]),
	    TEST_ROW("t_udp_faults", t_setup, &setups[3]),
	    TEST_ROW("t_udp_faults_sleep", t_setup, &setups[4]),
	    TEST_ROW("t_shm_faults_sleep", t_setup, &setups[5]),
	    cmocka_unit_test(t_peer_killed),
	    cmocka_unit_test(t_api),
	    cmocka_unit_test(t_post_order),
	    cmocka_unit_test(t_arm_acks_and_slack),
	    cmocka_unit_test(t_address_reuse),
	    cmocka_unit_test(t_zero_config_crc),
	    cmocka_unit_test(t_udp_forged_epochs),
	    cmocka_unit_test(t_udp_many_senders),
	    cmocka_unit_test(t_udp_reclaim),
	    cmocka_unit_test(t_udp_client_first),
	    cmocka_unit_test(t_udp_restart_proven),
	    cmocka_unit_test(t_udp_table_full),
	};
	return cmocka_run_group_tests_name("rcp channels between processes", tests, NULL, NULL);
}
