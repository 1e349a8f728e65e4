/*
 * tests/test_rcp.c — RCP channels between two processes over real nic
 * backends (shm, udp), with and without the fault injector at 10% loss.
 *
 * The parent sends messages of many sizes (0 B to 8 MiB, frame borders
 * included); the child checks every byte and echoes each back; the parent
 * checks the echo.  Then a burst of non-blocking sends of random sizes
 * whose order and contents the child verifies.  Pipes carry only the two
 * addresses and the final verdict; nothing waits on time.
 * Shared: tests/rcp_test.h.
 */
#include "rcp_test.h"

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
	};
	return cmocka_run_group_tests_name("rcp channels between processes", tests, NULL, NULL);
}
