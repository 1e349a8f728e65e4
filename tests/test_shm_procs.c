/*
 * tests/test_shm_procs.c — the shared-memory backend (nic/shm/): two processes:
 * streams, the doorbell handshake, peers that close, crash or come back.
 * What every shm test shares, and the rules they follow: tests/shm_test.h.
 */
#include "shm_test.h"

/* ---- two processes: streams ---------------------------------------------------------- */

/* Sends NFRAMES frames of sizes 0..MTU drawn from SEED, gathered from 1-3
 * iovecs, some with RCP_NIC_MORE. */
static void stream_sender(rcp_nic *inherited, const char *rxaddr, uint64_t seed, long nframes,
                          uint32_t mtu)
{
	unsigned char *buf = malloc(mtu + 1);
	uint64_t s = seed;
	rcp_nic *a;
	int peer, rc;

	/* The parent's endpoint, inherited: closing it here only unmaps it
	 * (the parent keeps using it). */
	rcp_nic_close(inherited);
	CHILD_CHECK(buf != NULL);
	{
		char addr[RCP_NIC_ADDRSTR_MAX];
		addr_of(addr, sizeof addr, getpid(), "tx");
		CHILD_CHECK(rcp_nic_open(addr, NULL, &a) == 0);
	}
	CHILD_CHECK(rcp_nic_peer_add_str(a, rxaddr, &peer) == 0);
	for (long i = 0; i < nframes; i++) {
		size_t len = (size_t)(test_rand(&s) % (mtu + 1u));
		uint64_t r = test_rand(&s);
		struct iovec iov[3];
		size_t cut1 = len ? (size_t)(r % (len + 1)) : 0;
		size_t cut2 = cut1 + (len - cut1 ? (size_t)((r >> 20) % (len - cut1 + 1)) : 0);
		int cnt = (int)((r >> 40) % 3) + 1;
		unsigned flags = (r >> 50) & 1 ? RCP_NIC_MORE : 0;

		test_fill(buf, len, (uint64_t)i);
		if (cnt == 1) {
			iov[0] = (struct iovec){buf, len};
		} else if (cnt == 2) {
			iov[0] = (struct iovec){buf, cut1};
			iov[1] = (struct iovec){buf + cut1, len - cut1};
		} else {
			iov[0] = (struct iovec){buf, cut1};
			iov[1] = (struct iovec){buf + cut1, cut2 - cut1};
			iov[2] = (struct iovec){buf + cut2, len - cut2};
		}
		while ((rc = rcp_nic_send(a, peer, iov, cnt, flags)) == RCP_EAGAIN)
			sched_yield();
		CHILD_CHECK(rc == 0);
	}
	CHILD_CHECK(rcp_nic_flush(a) == 0);
	/* Closing at once is fine: published frames are still delivered. */
	rcp_nic_close(a);
	free(buf);
	child_exit(0);
}

static void stream(const char *tag, uint32_t mtu, size_t ring, long nframes, int burst,
                   int64_t spin_ns)
{
	struct rcp_nic_config cfg = {0};
	struct rcp_nic_frame *fr;
	uint64_t seed = test_seed(0xfeed0001), s = seed;
	char addr[RCP_NIC_ADDRSTR_MAX], txaddr[RCP_NIC_ADDRSTR_MAX];
	unsigned char blob[RCP_NIC_ADDR_MAX];
	struct rcp_nic_stats st;
	rcp_nic *b;
	pid_t child;
	long i = 0;

	cfg.mtu = mtu;
	cfg.rx_bytes = ring;
	b = open_cfg(getpid(), tag, &cfg);
	assert_int_equal(rcp_nic_addr_str(b, addr, sizeof addr), 0);
	child = fork_child();
	if (child == 0)
		stream_sender(b, addr, seed, nframes, mtu);
	/* Allocated after fork: the child exits through LeakSanitizer. */
	fr = calloc((size_t)burst, sizeof *fr);
	assert_non_null(fr);

	addr_of(txaddr, sizeof txaddr, child, "tx");
	blob[0] = 1;
	memcpy(blob + 1, txaddr + 4, strlen(txaddr + 4));
	while (i < nframes) {
		int n = recv_wait(b, fr, burst, spin_ns);
		if (n <= 0)
			fail_msg("frame %ld of %ld: %s (seed %llu)", i, nframes,
			         n ? rcp_strerror(n) : "none", (unsigned long long)seed);
		for (int k = 0; k < n; k++, i++) {
			size_t len = (size_t)(test_rand(&s) % (mtu + 1u));
			long bad;
			(void)test_rand(&s);
			if (fr[k].len != len)
				fail_msg("frame %ld: len %u, want %zu (seed %llu)", i, fr[k].len,
				         len, (unsigned long long)seed);
			bad = test_check(fr[k].data, len, (uint64_t)i);
			if (bad >= 0)
				fail_msg("frame %ld: byte %ld of %zu wrong (seed %llu)", i, bad,
				         len, (unsigned long long)seed);
			if (fr[k].peer != RCP_NIC_PEER_NONE || fr[k].srclen != strlen(txaddr) - 3 ||
			    memcmp(fr[k].src, blob, fr[k].srclen))
				fail_msg("frame %ld: wrong source", i);
		}
		rcp_nic_release(b, fr, n);
	}
	assert_int_equal(test_wait_child(child), 0);
	assert_int_equal(rcp_nic_recv(b, fr, burst), 0);
	assert_int_equal(rcp_nic_get_stats(b, &st), 0);
	assert_int_equal(st.rx_frames, (uint64_t)nframes);
	assert_int_equal(st.rx_dropped, 0);
	rcp_nic_close(b);
	free(fr);
}

static void t_stream_single(void **state)
{
	(void)state;
	stream("single", 16384, 0, 5000, 1, -1);
}

static void t_stream_burst(void **state)
{
	(void)state;
	/* 100k frames, a small ring: many WRAPs and full rings. */
	stream("burst", 4096, 256 * 1024, 100000, 64, -1);
}

static void t_stream_sleeping(void **state)
{
	(void)state;
	/* The receiver never spins: every frame it waits for goes through
	 * arm() and the doorbell, racing the sender. */
	stream("sleepy", 2048, 64 * 1024, 20000, 16, 0);
}

/* ---- the doorbell ------------------------------------------------------------------- */

static int readable(int fd)
{
	struct pollfd pfd = {fd, POLLIN, 0};
	int rc = poll(&pfd, 1, 0);
	assert_true(rc >= 0);
	return rc > 0 && (pfd.revents & POLLIN);
}

static void t_wait_fd(void **state)
{
	struct rcp_nic_frame fr[4];
	struct rcp_nic_stats st;
	rcp_nic *a, *b;
	int peer, fd;
	(void)state;

	a = open_ep("fd-a");
	b = open_ep("fd-b");
	peer = add_ep(a, b);
	fd = rcp_nic_fd(b);
	assert_true(fd >= 0);

	/* Armed and quiet: not readable. */
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_false(readable(fd));
	assert_int_equal(rcp_nic_wait(b, 1000000, 0), RCP_ETIMEDOUT);

	/* A frame rings it, once. */
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_int_equal(send_seq(a, peer, 1, 8), 0);
	assert_true(readable(fd));
	assert_int_equal(rcp_nic_get_stats(a, &st), 0);
	assert_int_equal(st.wakeups, 1);
	assert_int_equal(send_seq(a, peer, 2, 8), 0); /* flag already taken */
	assert_int_equal(rcp_nic_get_stats(a, &st), 0);
	assert_int_equal(st.wakeups, 1);

	/* Frames waiting: arm refuses; recv disarms and drains. */
	assert_int_equal(rcp_nic_arm(b), RCP_EAGAIN);
	assert_int_equal(rcp_nic_recv(b, fr, 4), 2);
	rcp_nic_release(b, fr, 2);
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_false(readable(fd));

	/* Not armed: no doorbell, no system call. */
	assert_int_equal(rcp_nic_recv(b, fr, 4), 0);
	assert_int_equal(send_seq(a, peer, 3, 8), 0);
	assert_int_equal(rcp_nic_get_stats(a, &st), 0);
	assert_int_equal(st.wakeups, 1);
	assert_int_equal(rcp_nic_wait(b, 0, 0), 0); /* ready at once */
	assert_int_equal(rcp_nic_recv(b, fr, 4), 1);
	rcp_nic_release(b, fr, 1);

	/* RCP_NIC_MORE defers the doorbell to the flush. */
	assert_int_equal(rcp_nic_arm(b), 0);
	{
		unsigned char x[8] = {0};
		struct iovec iov = {x, sizeof x};
		assert_int_equal(rcp_nic_send(a, peer, &iov, 1, RCP_NIC_MORE), 0);
		assert_int_equal(rcp_nic_send(a, peer, &iov, 1, RCP_NIC_MORE), 0);
	}
	assert_false(readable(fd));
	assert_int_equal(rcp_nic_flush(a), 0);
	assert_true(readable(fd));
	assert_int_equal(rcp_nic_get_stats(a, &st), 0);
	assert_int_equal(st.wakeups, 2);
	assert_int_equal(rcp_nic_wait(b, WAIT_NS, 0), 0);
	assert_int_equal(rcp_nic_recv(b, fr, 4), 2);
	rcp_nic_release(b, fr, 2);

	/* A sender leaving wakes a sleeping receiver too. */
	assert_int_equal(rcp_nic_arm(b), 0);
	rcp_nic_close(a);
	assert_true(readable(fd));
	assert_int_equal(rcp_nic_recv(b, fr, 4), 0);
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_false(readable(fd));
	rcp_nic_close(b);
}

/* Both processes sleep between frames: the arm/doorbell handshake is raced
 * a few thousand times; a lost wake-up shows as a timeout. */
static void t_sleep_pingpong(void **state)
{
	enum { ROUNDS = 2000 };
	char paddr[RCP_NIC_ADDRSTR_MAX];
	struct rcp_nic_frame fr;
	rcp_nic *p;
	pid_t child;
	int peer;
	(void)state;

	p = open_ep("pp-p");
	assert_int_equal(rcp_nic_addr_str(p, paddr, sizeof paddr), 0);
	child = fork_child();
	if (child == 0) {
		char addr[RCP_NIC_ADDRSTR_MAX];
		rcp_nic *c;
		int cp;
		rcp_nic_close(p); /* inherited */
		addr_of(addr, sizeof addr, getpid(), "pp-c");
		CHILD_CHECK(rcp_nic_open(addr, NULL, &c) == 0);
		CHILD_CHECK(rcp_nic_peer_add_str(c, paddr, &cp) == 0);
		CHILD_CHECK(send_seq(c, cp, 0, 8) == 0);
		for (int i = 1; i <= ROUNDS; i++) {
			struct rcp_nic_frame f;
			CHILD_CHECK(recv_wait(c, &f, 1, 0) == 1);
			CHILD_CHECK(f.len == 8 && test_check(f.data, 8, (uint64_t)i) == -1);
			rcp_nic_release(c, &f, 1);
			CHILD_CHECK(send_seq(c, cp, (uint64_t)i, 8) == 0);
		}
		rcp_nic_close(c);
		child_exit(0);
	}
	assert_int_equal(recv_wait(p, &fr, 1, 0), 1);
	assert_int_equal(rcp_nic_peer_add(p, fr.src, fr.srclen, &peer), 0);
	rcp_nic_release(p, &fr, 1);
	for (int i = 1; i <= ROUNDS; i++) {
		assert_int_equal(send_seq(p, peer, (uint64_t)i, 8), 0);
		if (recv_wait(p, &fr, 1, 0) != 1)
			fail_msg("round %d: no answer", i);
		assert_int_equal(fr.peer, peer);
		assert_int_equal(test_check(fr.data, 8, (uint64_t)i), -1);
		rcp_nic_release(p, &fr, 1);
	}
	assert_int_equal(test_wait_child(child), 0);
	rcp_nic_close(p);
}

/* ---- peers leaving ------------------------------------------------------------------- */

static void t_peer_killed(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	int c2p[2], p2c[2], peer, rc = 0;
	pid_t me = getpid(), child;
	long i;
	rcp_nic *a;
	(void)state;

	addr_of(addr, sizeof addr, me, "dead-rx");
	child = spawn_holder(addr, c2p, p2c);
	a = open_ep("dead-tx");
	assert_int_equal(rcp_nic_peer_add_str(a, addr, &peer), 0);
	assert_int_equal(send_seq(a, peer, 0, 64), 0);
	kill(child, SIGKILL);
	assert_int_equal(test_wait_child(child), 128 + SIGKILL);
	/* Nobody drains the ring: it fills, and the full ring notices. */
	for (i = 0; i < 10000000; i++) {
		rc = send_seq(a, peer, (uint64_t)i, 64);
		if (rc != 0 && rc != RCP_EAGAIN)
			break;
	}
	assert_int_equal(rc, RCP_EPEER);
	assert_int_equal(send_seq(a, peer, 0, 64), RCP_EPEER); /* and stays so */
	close(c2p[0]), close(c2p[1]), close(p2c[0]), close(p2c[1]);
	rcp_nic_close(a);
	/* The dead endpoint's segment: reclaimed by reopening, gone on close. */
	assert_true(shm_exists(me, "dead-rx"));
	a = open_ep("dead-rx");
	rcp_nic_close(a);
	assert_false(shm_exists(me, "dead-rx"));
}

static void t_peer_closed(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	struct rcp_nic_frame fr;
	rcp_nic *a, *b;
	int peer, again;
	(void)state;

	a = open_ep("cl-a");
	b = open_ep("cl-b");
	peer = add_ep(a, b);
	assert_int_equal(rcp_nic_addr_str(b, addr, sizeof addr), 0);
	rcp_nic_close(b);
	/* An orderly close is seen on the next send, without a full ring. */
	assert_int_equal(send_seq(a, peer, 0, 8), RCP_EPEER);
	assert_int_equal(send_seq(a, peer, 0, 8), RCP_EPEER);

	/* Someone opens that address again: adding it reattaches, same index. */
	assert_int_equal(rcp_nic_open(addr, NULL, &b), 0);
	assert_int_equal(rcp_nic_peer_add_str(a, addr, &again), 0);
	assert_int_equal(again, peer);
	assert_int_equal(send_seq(a, peer, 1, 8), 0);
	assert_int_equal(recv_wait(b, &fr, 1, -1), 1);
	assert_int_equal(test_check(fr.data, fr.len, 1), -1);
	rcp_nic_release(b, &fr, 1);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* With few slots: senders that close give theirs back (after their frames
 * are delivered), over and over through the generations. */
static void t_slot_reuse(void **state)
{
	struct rcp_nic_frame fr[8];
	rcp_nic *b, *s[3];
	char tag[32];
	int p[3], n;
	(void)state;

	setenv("RCP_SHM_PEERS", "2", 1);
	b = open_ep("slots-b");
	unsetenv("RCP_SHM_PEERS");
	s[0] = open_ep("slots-s0");
	s[1] = open_ep("slots-s1");
	s[2] = open_ep("slots-s2");
	p[0] = add_ep(s[0], b);
	p[1] = add_ep(s[1], b);
	{
		char addr[RCP_NIC_ADDRSTR_MAX];
		int x;
		assert_int_equal(rcp_nic_addr_str(b, addr, sizeof addr), 0);
		assert_int_equal(rcp_nic_peer_add_str(s[2], addr, &x), RCP_EAGAIN);
		/* s0 leaves with three frames in flight. */
		for (int i = 0; i < 3; i++)
			assert_int_equal(send_seq(s[0], p[0], (uint64_t)i, 100), 0);
		rcp_nic_close(s[0]);
		/* Its slot is free only once the receiver has drained it. */
		assert_int_equal(rcp_nic_peer_add_str(s[2], addr, &x), RCP_EAGAIN);
		n = recv_wait(b, fr, 8, -1);
		assert_int_equal(n, 3);
		for (int i = 0; i < 3; i++)
			assert_int_equal(test_check(fr[i].data, fr[i].len, (uint64_t)i), -1);
		/* Releasing the last frame of a closed ring frees its slot. */
		rcp_nic_release(b, fr, n);
		assert_int_equal(rcp_nic_peer_add_str(s[2], addr, &p[2]), 0);
	}
	assert_int_equal(send_seq(s[2], p[2], 42, 42), 0);
	expect_seq(b, 42, 42, RCP_NIC_PEER_NONE);
	rcp_nic_close(s[2]);
	/* The receiver learns of the close on its next call. */
	assert_int_equal(rcp_nic_recv(b, fr, 8), 0);

	/* Churn: 30 short-lived senders through the remaining slot. */
	for (int i = 0; i < 30; i++) {
		rcp_nic *x;
		int px;
		snprintf(tag, sizeof tag, "slots-x%d", i);
		x = open_ep(tag);
		px = add_ep(x, b);
		assert_int_equal(send_seq(x, px, (uint64_t)i, (size_t)i * 10), 0);
		rcp_nic_close(x);
		expect_seq(b, (uint64_t)i, (size_t)i * 10, RCP_NIC_PEER_NONE);
	}
	rcp_nic_close(s[1]);
	rcp_nic_close(b);
}

/* A sender killed while holding the only slot: its frames are still
 * delivered, and the slot is reclaimed for the next sender. */
static void t_sender_killed(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	struct rcp_nic_frame fr[4];
	int c2p[2], p2c[2], peer, rc;
	rcp_nic *b, *s;
	pid_t child;
	(void)state;

	setenv("RCP_SHM_PEERS", "1", 1);
	b = open_ep("crash-b");
	unsetenv("RCP_SHM_PEERS");
	assert_int_equal(rcp_nic_addr_str(b, addr, sizeof addr), 0);
	assert_int_equal(pipe(c2p), 0);
	assert_int_equal(pipe(p2c), 0);
	child = fork_child();
	if (child == 0) {
		char me[RCP_NIC_ADDRSTR_MAX];
		rcp_nic *x;
		int px;
		addr_of(me, sizeof me, getpid(), "crash-s");
		CHILD_CHECK(rcp_nic_open(me, NULL, &x) == 0);
		CHILD_CHECK(rcp_nic_peer_add_str(x, addr, &px) == 0);
		CHILD_CHECK(send_seq(x, px, 1, 11) == 0);
		CHILD_CHECK(send_seq(x, px, 2, 22) == 0);
		pipe_put(c2p[1]);
		pipe_get(p2c[0]); /* until killed */
		_exit(0);
	}
	assert_true(pipe_get(c2p[0]));
	kill(child, SIGKILL);
	assert_int_equal(test_wait_child(child), 128 + SIGKILL);
	close(c2p[0]), close(c2p[1]), close(p2c[0]), close(p2c[1]);

	s = open_ep("crash-s2");
	/* The slot is held by a dead process: this attempt marks it. */
	assert_int_equal(rcp_nic_peer_add_str(s, addr, &peer), RCP_EAGAIN);
	assert_int_equal(recv_wait(b, fr, 4, -1), 2);
	assert_int_equal(test_check(fr[0].data, fr[0].len, 1), -1);
	assert_int_equal(test_check(fr[1].data, fr[1].len, 2), -1);
	rcp_nic_release(b, fr, 2);
	rc = rcp_nic_peer_add_str(s, addr, &peer);
	assert_int_equal(rc, 0);
	assert_int_equal(send_seq(s, peer, 3, 33), 0);
	assert_int_equal(recv_wait(b, fr, 4, -1), 1);
	assert_int_equal(test_check(fr[0].data, fr[0].len, 3), -1);
	{
		char saddr[RCP_NIC_ADDRSTR_MAX];
		assert_int_equal(rcp_nic_addr_str(s, saddr, sizeof saddr), 0);
		assert_int_equal(fr[0].srclen, strlen(saddr) - 3);
		assert_memory_equal((const char *)fr[0].src + 1, saddr + 4, fr[0].srclen - 1);
	}
	rcp_nic_release(b, fr, 1);
	rcp_nic_close(s);
	rcp_nic_close(b);
	/* The killed sender's own (receive) segment: reclaim and remove. */
	assert_true(shm_exists(child, "crash-s"));
	s = open_cfg(child, "crash-s", NULL);
	rcp_nic_close(s);
	assert_false(shm_exists(child, "crash-s"));
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_stream_single),
		cmocka_unit_test(t_stream_burst),
		cmocka_unit_test(t_stream_sleeping),
		cmocka_unit_test(t_wait_fd),
		cmocka_unit_test(t_sleep_pingpong),
		cmocka_unit_test(t_peer_killed),
		cmocka_unit_test(t_peer_closed),
		cmocka_unit_test(t_slot_reuse),
		cmocka_unit_test(t_sender_killed),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
