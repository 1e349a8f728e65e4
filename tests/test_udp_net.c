/*
 * tests/test_udp_net.c — the udp backend (nic/udp/): error
 * attribution from ICMP, the wait fd, the lane, two processes (streams,
 * sleeping ping-pong).
 * What every udp test shares, and the rules they follow: tests/udp_test.h.
 */
#include "udp_test.h"

/* ---- errors from the network ------------------------------------------- */

/* Waits with nothing coming (no receive in between, which would read
 * the socket error): times out, unless a late ICMP wakes it a few times. */
static int wait_quiet(rcp_nic *n)
{
	int rc = 0;
	for (int i = 0; i < 5 && rc != RCP_ETIMEDOUT; i++) {
		rc = rcp_nic_wait(n, 20000000, 0);
		if (rc && rc != RCP_ETIMEDOUT)
			return rc;
	}
	return rc;
}

/* Sending to a closed port earns an ICMP port unreachable; the error is
 * pinned on that peer (RCP_EPEER on its next send) and never on another. */
static void t_closed_port(void **state)
{
	rcp_nic *a = xopen("udp:", NULL), *b = xopen("udp:", NULL), *c = xopen("udp:", NULL);
	unsigned char buf[64];
	int pb, pc, pa, rc = 0, sent_c = 0, i;
	(void)state;

	pb = xpeer(a, b);
	pc = xpeer(a, c);
	pa = xpeer(c, a);
	rcp_nic_close(b); /* B's port is closed now */

	for (i = 0; i < 200; i++) {
		struct pollfd pfd = {.fd = rcp_nic_fd(a), .events = POLLIN};
		rc = send_seq(a, pb, buf, 10, 0, 0);
		if (rc == RCP_EPEER)
			break;
		assert_int_equal(rc, 0);
		/* The healthy peer never sees the other's error. */
		assert_int_equal(send_seq(a, pc, buf, 20, (uint64_t)sent_c, 0), 0);
		expect_seq(c, 20, (uint64_t)sent_c, pa);
		sent_c++;
		/* Give an asynchronous ICMP time to come back. */
		poll(&pfd, 1, 10);
	}
	assert_int_equal(rc, RCP_EPEER);
	assert_true(sent_c >= 1);
	/* Edge-triggered: reported once, then the peer may be tried again. */
	assert_int_equal(send_seq(a, pb, buf, 10, 0, 0), 0);

	/* A new ICMP error does not make the fd wake a sleeper forever
	 * (POLLERR stays up until the error queue is read: arm must). */
	assert_int_equal(wait_quiet(a), RCP_ETIMEDOUT);
	/* ...and was attributed while arming. */
	assert_int_equal(send_seq(a, pb, buf, 10, 0, 0), RCP_EPEER);

	/* Receiving notices it too, without failing. */
	assert_int_equal(send_seq(a, pb, buf, 10, 0, 0), 0);
	{
		struct pollfd pfd = {.fd = rcp_nic_fd(a), .events = POLLIN};
		struct rcp_nic_frame f;
		assert_int_equal(poll(&pfd, 1, 10000), 1); /* POLLERR */
		assert_int_equal(rcp_nic_recv(a, &f, 1), 0);
	}
	assert_int_equal(send_seq(a, pb, buf, 10, 0, 0), RCP_EPEER);

	/* Batched frames: the queued ones to the dead peer are sent (UDP may
	 * lose them anyway), the live peer's arrive. */
	for (int k = 0; k < 4; k++) {
		/* Queued frames are referenced, not copied: one buffer each. */
		static unsigned char qb[8][32];
		assert_int_equal(send_seq(a, pb, qb[2 * k], 10, 0, RCP_NIC_MORE), 0);
		assert_int_equal(
		    send_seq(a, pc, qb[2 * k + 1], 30, (uint64_t)(1000 + k), RCP_NIC_MORE), 0);
	}
	rc = rcp_nic_flush(a);
	assert_int_equal(rc, 0);
	for (int k = 0; k < 4; k++)
		expect_seq(c, 30, (uint64_t)(1000 + k), pa);
	/* sendmmsg swallowed the socket errors; the error queue still holds
	 * them (POLLERR): sleeping must work all the same. */
	assert_int_equal(wait_quiet(a), RCP_ETIMEDOUT);
	assert_int_equal(send_seq(a, pb, buf, 10, 0, 0), RCP_EPEER);
	rcp_nic_close(a);
	rcp_nic_close(c);
}

/* ---- the wait fd ------------------------------------------------------- */

static void t_wait_fd(void **state)
{
	rcp_nic *a = xopen("udp:", NULL), *b = xopen("udp:", NULL);
	struct pollfd pfd;
	struct rcp_nic_frame f[2];
	unsigned char buf[2][64];
	int pb, pa;
	(void)state;

	pb = xpeer(a, b);
	pa = xpeer(b, a);
	pfd.fd = rcp_nic_fd(b);
	pfd.events = POLLIN;
	assert_true(pfd.fd >= 0);

	/* Quiet: arm lets us sleep, the fd stays unreadable, wait times out. */
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(rcp_nic_wait(b, 1000000, 0), RCP_ETIMEDOUT);
	assert_int_equal(rcp_nic_wait(b, 1000000, 500000), RCP_ETIMEDOUT);

	/* A frame makes the fd readable; arm then refuses to let us sleep.
	 * Armed first: the fd watches the sockets from arm() to the next
	 * receive, and a wait that timed out may have ended on a receive
	 * (seen under ASan beside a build: the poll below then waited 10 s
	 * on an empty set). */
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_int_equal(send_seq(a, pb, buf[0], 8, 1, 0), 0);
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_true(pfd.revents & POLLIN);
	assert_int_equal(rcp_nic_arm(b), RCP_EAGAIN);
	assert_int_equal(rcp_nic_wait(b, TMO_NS, 0), 0);
	expect_seq(b, 8, 1, pa);
	assert_int_equal(rcp_nic_arm(b), 0);

	/* Spinning takes the frame off the socket and keeps it for recv:
	 * the fd is quiet, but arm knows a frame is held. */
	assert_int_equal(send_seq(a, pb, buf[0], 9, 2, 0), 0);
	assert_int_equal(rcp_nic_wait(b, TMO_NS, TMO_NS), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(rcp_nic_arm(b), RCP_EAGAIN);
	assert_int_equal(rcp_nic_wait(b, 0, 0), 0);
	expect_seq(b, 9, 2, pa);

	/* A frame still held by the caller is not overwritten by the spin. */
	assert_int_equal(send_seq(a, pb, buf[0], 10, 3, 0), 0);
	assert_int_equal(recv_wait(b, f, 1), 1);
	assert_int_equal(send_seq(a, pb, buf[1], 11, 4, 0), 0);
	assert_int_equal(rcp_nic_wait(b, TMO_NS, TMO_NS), 0);
	assert_int_equal(f[0].len, 10);
	assert_int_equal(test_check(f[0].data, 10, 3), -1);
	rcp_nic_release(b, f, 1);
	expect_seq(b, 11, 4, pa);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* ---- the lane ------------------------------------------------------------ */

/* Sockets of this host bound to local port PORT (IPv4), from /proc/net/udp. */
static int sockets_on(unsigned port)
{
	FILE *f = fopen("/proc/net/udp", "r");
	char line[512];
	int n = 0;

	assert_non_null(f);
	if (!fgets(line, sizeof line, f)) /* the header */
		fail_msg("/proc/net/udp is empty");
	while (fgets(line, sizeof line, f)) {
		unsigned sl, addr, p;
		if (sscanf(line, " %u: %x:%x", &sl, &addr, &p) == 3 && p == port)
			n++;
	}
	fclose(f);
	return n;
}

/* A spinning endpoint talks to its first peer through a second socket on
 * its port, connected to that peer (the lane): both sockets deliver, the
 * wait fd wakes for either, our port stays exclusive, and removing the
 * peer closes the lane for the next one.  A sleeper (RCP_NIC_SLEEPER) and
 * RCP_UDP_LANE=0 keep one socket. */
static void t_lane(void **state)
{
	rcp_nic *a = xopen("udp:", NULL), *b = xopen("udp:", NULL), *c = xopen("udp:", NULL), *d;
	struct rcp_nic_config sleeper = {.flags = RCP_NIC_SLEEPER};
	unsigned char buf[256];
	char bname[RCP_NIC_ADDRSTR_MAX];
	struct pollfd pfd;
	int pab, pba, pcb, pbc, pbd, pdb;
	(void)state;

	assert_int_equal(sockets_on(port_of(b)), 1);
	pba = xpeer(b, a); /* B's first peer: the lane goes to A */
	assert_int_equal(sockets_on(port_of(b)), 2);
	pbc = xpeer(b, c); /* only one lane */
	assert_int_equal(sockets_on(port_of(b)), 2);
	pab = xpeer(a, b);
	pcb = xpeer(c, b);

	/* Our port is still ours alone. */
	assert_int_equal(rcp_nic_addr_str(b, bname, sizeof bname), 0);
	assert_int_equal(rcp_nic_open(bname, NULL, &d), RCP_EADDRINUSE);

	/* Frames both ways with the lane's peer and with the other one. */
	for (uint64_t i = 0; i < 20; i++) {
		assert_int_equal(send_seq(a, pab, buf, 8 + i, 100 + i, 0), 0);
		expect_seq(b, 8 + i, 100 + i, pba);
		assert_int_equal(send_seq(b, pba, buf, 200, 200 + i, 0), 0);
		expect_seq(a, 200, 200 + i, pab);
		assert_int_equal(send_seq(c, pcb, buf, 9 + i, 300 + i, 0), 0);
		expect_seq(b, 9 + i, 300 + i, pbc);
		assert_int_equal(send_seq(b, pbc, buf, 100, 400 + i, RCP_NIC_MORE), 0);
		assert_int_equal(rcp_nic_flush(b), 0);
		expect_seq(c, 100, 400 + i, pcb);
	}

	/* The wait fd wakes for a frame on either socket. */
	pfd.fd = rcp_nic_fd(b);
	pfd.events = POLLIN;
	assert_true(pfd.fd >= 0);
	assert_int_equal(rcp_nic_fd(b), pfd.fd); /* the same fd every time */
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(send_seq(a, pab, buf, 30, 500, 0), 0);
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	expect_seq(b, 30, 500, pba);
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(send_seq(c, pcb, buf, 31, 501, 0), 0);
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	expect_seq(b, 31, 501, pbc);

	/* Removing the lane's peer closes it; the next new peer gets one. */
	assert_int_equal(rcp_nic_peer_remove(b, pba), 0);
	assert_int_equal(sockets_on(port_of(b)), 1);
	d = xopen("udp:", NULL);
	pbd = xpeer(b, d);
	pdb = xpeer(d, b);
	assert_int_equal(sockets_on(port_of(b)), 2);
	assert_int_equal(send_seq(d, pdb, buf, 64, 600, 0), 0);
	expect_seq(b, 64, 600, pbd);
	assert_int_equal(send_seq(b, pbd, buf, 65, 601, 0), 0);
	expect_seq(d, 65, 601, pdb);
	/* The fd taken before this lane came wakes for it too. */
	assert_int_equal(rcp_nic_arm(b), 0);
	assert_int_equal(send_seq(d, pdb, buf, 66, 602, 0), 0);
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	expect_seq(b, 66, 602, pbd);
	/* A is unknown again, from whichever socket its frame comes. */
	assert_int_equal(send_seq(a, pab, buf, 12, 603, 0), 0);
	expect_seq(b, 12, 603, RCP_NIC_PEER_NONE);
	rcp_nic_close(d);
	rcp_nic_close(c);
	rcp_nic_close(b);

	/* A sleeper and RCP_UDP_LANE=0: one socket. */
	b = xopen("udp:", &sleeper);
	xpeer(b, a);
	assert_int_equal(sockets_on(port_of(b)), 1);
	rcp_nic_close(b);
	setenv("RCP_UDP_LANE", "0", 1);
	b = xopen("udp:", NULL);
	unsetenv("RCP_UDP_LANE");
	xpeer(b, a);
	assert_int_equal(sockets_on(port_of(b)), 1);
	rcp_nic_close(b);
	rcp_nic_close(a);
}

/* ---- two processes ----------------------------------------------------- */

struct plan {
	uint32_t len;
	uint8_t more, pieces;
};

static uint32_t rand_len(uint64_t *s, uint32_t mtu)
{
	uint64_t r = test_rand(s) % 10;
	if (r < 5)
		return (uint32_t)(test_rand(s) % 257);
	if (r < 8)
		return (uint32_t)(test_rand(s) % 9001);
	return (uint32_t)(test_rand(s) % ((uint64_t)mtu + 1));
}

/* Frame sizes, batching and iovec splits for a stream, from the seed: the
 * receiver recomputes nothing, it inherits the plan through fork. */
static void make_plan(uint64_t seed, uint32_t mtu, long n, struct plan *pl)
{
	uint64_t s = seed;
	for (long i = 0; i < n;) {
		int burst = test_rand(&s) % 3 == 0 ? 1 : 1 + (int)(test_rand(&s) % 40);
		int same = (int)(test_rand(&s) & 1);
		uint32_t blen = rand_len(&s, mtu);
		for (int j = 0; j < burst && i < n; j++, i++) {
			pl[i].len = same ? blen : rand_len(&s, mtu);
			if (same && j + 1 == burst && (test_rand(&s) & 1))
				pl[i].len = blen / 2; /* a short tail ends a GSO run */
			pl[i].more = j + 1 < burst;
			pl[i].pieces = (uint8_t)(1 + test_rand(&s) % 4);
		}
	}
}

static void stream_child(const char *parent_addr, const struct plan *pl, long n)
{
	rcp_nic *c;
	struct rcp_nic_frame f[64];
	uint64_t s = g_seed ^ 0xabcdef;
	long got = 0;
	int pp, rc;

	alarm(120);
	rc = rcp_nic_open("udp:", NULL, &c);
	CHILD_CHECK(rc == 0, 10);
	CHILD_CHECK(rcp_nic_peer_add_str(c, parent_addr, &pp) == 0, 11);
	/* Hello: the parent learns our address from the frame itself. */
	CHILD_CHECK(send_buf(c, pp, "hello", 5, 0) == 0, 12);
	while (got < n) {
		int max = 1 + (int)(test_rand(&s) % 64), k = recv_wait(c, f, max);
		CHILD_CHECK(k > 0 && k <= max, 13);
		for (int j = 0; j < k; j++, got++) {
			CHILD_CHECK(got < n, 14);
			if (f[j].len != pl[got].len || f[j].peer != pp ||
			    test_check(f[j].data, f[j].len, (uint64_t)got) != -1) {
				fprintf(stderr,
				        "child: frame %ld: len %u want %u peer %d want %d\n", got,
				        f[j].len, pl[got].len, f[j].peer, pp);
				CHILD_CHECK(0, 15);
			}
			/* Ack every window (through the nic, both directions). */
			if ((got + 1) % WIN == 0 || got + 1 == n) {
				uint64_t v = (uint64_t)got + 1;
				CHILD_CHECK(send_buf(c, pp, &v, sizeof v, 0) == 0, 16);
			}
		}
		rcp_nic_release(c, f, k);
	}
	CHILD_CHECK(stats_of(c).rx_dropped == 0, 17);
	rcp_nic_close(c);
	_exit(0);
}

/* Frames byte-identical, in order, singly and batched, random sizes up to
 * the MTU, gathered from 1-4 pieces, between two processes. */
static void t_stream_two_processes(void **state)
{
	enum { N = 3000 };
	int gso = *(int *)*state, pc, st;
	struct plan *pl = calloc(N, sizeof *pl);
	struct rcp_nic_info info;
	struct rcp_nic_frame f;
	char addr[RCP_NIC_ADDRSTR_MAX];
	unsigned char *pool;
	rcp_nic *p;
	pid_t child;

	g_seed = test_seed(0x5eedf00d) + (uint64_t)gso;
	set_gso(gso);
	p = xopen("udp:", NULL);
	assert_int_equal(rcp_nic_query(p, &info), 0);
	assert_int_equal(rcp_nic_addr_str(p, addr, sizeof addr), 0);
	make_plan(g_seed, info.mtu, N, pl);
	/* One buffer per frame of a window: batched frames are referenced
	 * until flushed, and each window ends with a flush. */
	pool = malloc((size_t)WIN * info.mtu);
	assert_non_null(pool);

	child = test_fork();
	assert_true(child >= 0);
	if (child == 0)
		stream_child(addr, pl, N);
	unsetenv("RCP_UDP_GSO");

	/* The hello frame comes from an unknown source. */
	CHECK(recv_wait(p, &f, 1) == 1);
	CHECK(f.peer == RCP_NIC_PEER_NONE && f.len == 5 && !memcmp(f.data, "hello", 5));
	assert_int_equal(rcp_nic_peer_add(p, f.src, f.srclen, &pc), 0);
	rcp_nic_release(p, &f, 1);

	for (long i = 0; i < N;) {
		long end = i + WIN < N ? i + WIN : N;
		uint64_t acked = 0;
		for (; i < end; i++) {
			unsigned char *b = pool + (size_t)(i % WIN) * info.mtu;
			struct iovec iov[4];
			int np = pl[i].pieces, rc;
			unsigned flags = pl[i].more && i + 1 < end ? RCP_NIC_MORE : 0;
			uint64_t t_end = now_ns() + TMO_NS;

			test_fill(b, pl[i].len, (uint64_t)i);
			for (int k = 0; k < np; k++) {
				size_t from = (size_t)pl[i].len * (size_t)k / (size_t)np;
				size_t to = (size_t)pl[i].len * (size_t)(k + 1) / (size_t)np;
				iov[k].iov_base = b + from;
				iov[k].iov_len = to - from;
			}
			while ((rc = rcp_nic_send(p, pc, iov, np, flags)) == RCP_EAGAIN) {
				CHECK(now_ns() < t_end);
				rcp_nic_flush(p);
			}
			CHECK(rc == 0);
		}
		while (rcp_nic_flush(p) == RCP_EAGAIN)
			;
		/* Wait for the window's ack. */
		while (acked < (uint64_t)end) {
			int k = recv_wait(p, &f, 1);
			if (k != 1)
				fail_msg("no ack for frame %ld: %s (seed %#llx)", end - 1,
				         rcp_strerror(k), (unsigned long long)g_seed);
			CHECK(f.peer == pc && f.len == 8);
			memcpy(&acked, f.data, 8);
			rcp_nic_release(p, &f, 1);
		}
		CHECK(acked == (uint64_t)end);
	}
	st = test_wait_child(child);
	if (st)
		fail_msg("receiver exited with %d (seed %#llx)", st, (unsigned long long)g_seed);
	assert_int_equal(stats_of(p).tx_frames, N);
	free(pool);
	free(pl);
	rcp_nic_close(p);
}

/* Ping-pong across processes with sleeping waits only (fd + arm). */
static void t_pingpong_sleeping(void **state)
{
	enum { ROUNDS = 300 };
	char addr[RCP_NIC_ADDRSTR_MAX];
	struct rcp_nic_frame f;
	rcp_nic *p = xopen("udp:", NULL);
	pid_t child;
	int pc, st;
	(void)state;

	assert_int_equal(rcp_nic_addr_str(p, addr, sizeof addr), 0);
	child = test_fork();
	assert_true(child >= 0);
	if (child == 0) {
		rcp_nic *c;
		int pp;
		alarm(60);
		CHILD_CHECK(rcp_nic_open("udp:", NULL, &c) == 0, 10);
		CHILD_CHECK(rcp_nic_peer_add_str(c, addr, &pp) == 0, 11);
		CHILD_CHECK(send_buf(c, pp, "hi", 2, 0) == 0, 12);
		for (uint64_t r = 0; r < ROUNDS; r++) {
			uint64_t v;
			int k;
			while ((k = rcp_nic_recv(c, &f, 1)) == 0)
				CHILD_CHECK(rcp_nic_wait(c, TMO_NS, 0) == 0, 13);
			CHILD_CHECK(k == 1 && f.len == 8 && f.peer == pp, 14);
			memcpy(&v, f.data, 8);
			rcp_nic_release(c, &f, 1);
			CHILD_CHECK(v == r, 15);
			v = ~r;
			CHILD_CHECK(send_buf(c, pp, &v, 8, 0) == 0, 16);
		}
		rcp_nic_close(c);
		_exit(0);
	}
	assert_int_equal(recv_wait(p, &f, 1), 1);
	assert_int_equal(rcp_nic_peer_add(p, f.src, f.srclen, &pc), 0);
	rcp_nic_release(p, &f, 1);
	for (uint64_t r = 0; r < ROUNDS; r++) {
		uint64_t v = r;
		int k;
		assert_int_equal(send_buf(p, pc, &v, 8, 0), 0);
		while ((k = rcp_nic_recv(p, &f, 1)) == 0)
			assert_int_equal(rcp_nic_wait(p, TMO_NS, 0), 0);
		assert_int_equal(k, 1);
		assert_int_equal(f.peer, pc);
		memcpy(&v, f.data, 8);
		rcp_nic_release(p, &f, 1);
		assert_true(v == ~r);
	}
	st = test_wait_child(child);
	assert_int_equal(st, 0);
	rcp_nic_close(p);
}

static int gso_on = 1, gso_off = 0;

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_closed_port),
	    cmocka_unit_test(t_wait_fd),
	    cmocka_unit_test(t_lane),
	    cmocka_unit_test_prestate(t_stream_two_processes, &gso_on),
	    cmocka_unit_test_prestate(t_stream_two_processes, &gso_off),
	    cmocka_unit_test(t_pingpong_sleeping),
	};
	g_seed = test_seed(0x5eedf00d);
	/* The tests set RCP_UDP_GSO themselves; start from the default. */
	unsetenv("RCP_UDP_GSO");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
