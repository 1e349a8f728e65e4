/*
 * tests/test_xdp_rings.c — issue 21's items on the xdp backend's rings and
 * open that tests/test_xdp.c left unchecked (session 21 audit, docs/nic.md
 * "Session 21 (xdp5 lane): issue 21 audit"):
 *
 *   t_in_place     received frames are handed up in place: the payload a
 *                  frame carries lies in the receiving UMEM half, in its
 *                  own 4 KiB buffer just past the kernel's headroom and
 *                  our header; no copy;
 *   t_fill_batches released RX buffers go back to the fill ring
 *                  XDP_STASH (32) at a time: the ring's producer index,
 *                  watched after every release, moves only in steps of 32;
 *   t_tx_hot       completed TX buffers are reaped after each kick onto a
 *                  LIFO stack, so a ping-pong sends from a few hot
 *                  buffers, not round robin through the ring; every
 *                  buffer is back after a flush;
 *   t_queue        xdp:IFNAME/QUEUE: a queue the interface lacks is
 *                  RCP_EADDR (not the bind's bare EINVAL as RCP_ENOTSUP),
 *                  queue 1 of a two-queue pair opens, its socket in the
 *                  program's map, and so does queue 65 of 66 (the map
 *                  had 64 entries until session 21);
 *   t_reasons      an open that cannot attach fails with RCP_EPERM (no
 *                  privileges) or RCP_ENOTSUP (native mode where the link
 *                  refuses it) and says why on stderr; nothing is left
 *                  attached;
 *   t_busy_poll    RCP_XDP_BUSY_POLL=20 (session 21): the socket carries
 *                  SO_BUSY_POLL 20 and SO_PREFER_BUSY_POLL 1 (budget 64
 *                  cannot be read back),
 *                  rcp_nic_info says 20 us, a ping-pong works and every
 *                  receive on an empty ring drives a busy-poll (counted
 *                  in busy_polls); with 0 all of it is off and the count
 *                  stays 0.
 *
 * White box: it reads the endpoint's rings (nic/xdp/xdp_int.h).  Both
 * endpoints live in one namespace holding a veth pair
 * (tests/test_xdp_veth.h); SKIP with the reason where root, netns or XDP
 * are missing.
 */
#include <grp.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <bpf/libbpf.h>

#include <rcp/nic.h>

#include "testutil.h"
#include "tests/test_xdp_veth.h"
#include "nic/xdp/xdp_int.h"

static struct test_veth veth;
static rcp_nic *opened[2];
static uint64_t seed;

static int close_all(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++)
		if (opened[i])
			rcp_nic_close(opened[i]);
	opened[0] = opened[1] = NULL;
	return 0;
}

static int open_side(int side, rcp_nic **nic)
{
	char addr[64];
	int rc;

	snprintf(addr, sizeof addr, "xdp:%s", veth.ifname[side]);
	rc = rcp_nic_open(addr, NULL, nic);
	if (!rc)
		opened[side] = *nic;
	return rc;
}

static void open_pair(rcp_nic **a, rcp_nic **b)
{
	assert_int_equal(open_side(0, a), 0);
	assert_int_equal(open_side(1, b), 0);
}

/* Attached programs on IFNAME (0: none). */
static uint32_t prog_ids(const char *ifname)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int idx = (int)if_nametoindex(ifname);

	assert_true(idx > 0);
	assert_int_equal(bpf_xdp_query(idx, 0, &q), 0);
	return q.prog_id | q.drv_prog_id | q.skb_prog_id;
}

/* One frame of LEN bytes (pattern N) from A to peer P. */
static void send1(rcp_nic *a, int p, unsigned char *buf, size_t len, uint64_t n)
{
	struct iovec v = {buf, len};
	test_fill(buf, len, n);
	assert_int_equal(rcp_nic_send(a, p, &v, 1, 0), 0);
}

/* Waits for one frame at B (10 s guard, not a timed assertion). */
static void recv1(rcp_nic *b, struct rcp_nic_frame *fr)
{
	int k = rcp_nic_recv_wait(b, fr, 1, 10 * 1000000000ll);
	if (k != 1)
		fail_msg("no frame (%d; seed %llu)", k, (unsigned long long)seed);
}

static void t_in_place(void **state)
{
	const struct xdp_nic *xb;
	unsigned char buf[64];
	rcp_nic *a, *b;
	int pb;
	(void)state;

	open_pair(&a, &b);
	xb = (const struct xdp_nic *)b;
	pb = test_xdp_add_peer_of(a, b);
	for (int i = 0; i < 40; i++) {
		struct rcp_nic_frame fr;
		const uint8_t *lo = xb->area, *hi = lo + (size_t)xb->ring * XDP_FRAME, *d;
		uintptr_t at;
		send1(a, pb, buf, sizeof buf, (uint64_t)i);
		recv1(b, &fr);
		assert_int_equal(fr.len, sizeof buf);
		assert_int_equal(test_check(fr.data, fr.len, (uint64_t)i), -1);
		/* In the RX half of B's UMEM, at the start of its payload. */
		d = fr.data;
		if (d < lo || d >= hi)
			fail_msg("frame %d: payload at %p, not in the RX UMEM [%p, %p)", i,
			         (const void *)d, (const void *)lo, (const void *)hi);
		at = (uintptr_t)(d - lo);
		assert_int_equal(at % XDP_FRAME, XDP_PACKET_HEADROOM + XDP_HDR);
		assert_int_equal(fr.token, at - XDP_HDR);
		rcp_nic_release(b, &fr, 1);
	}
}

static void t_fill_batches(void **state)
{
	enum { N = 5 * XDP_STASH + 7 };
	const struct xdp_nic *xb;
	unsigned char buf[32];
	rcp_nic *a, *b;
	uint32_t prod, moves = 0;
	int pb;
	(void)state;

	open_pair(&a, &b);
	xb = (const struct xdp_nic *)b;
	pb = test_xdp_add_peer_of(a, b);
	prod = __atomic_load_n(xb->fill.producer, __ATOMIC_ACQUIRE);
	for (int i = 0; i < N; i++) {
		struct rcp_nic_frame fr;
		uint32_t now;
		send1(a, pb, buf, sizeof buf, (uint64_t)i);
		recv1(b, &fr);
		assert_int_equal(test_check(fr.data, fr.len, (uint64_t)i), -1);
		rcp_nic_release(b, &fr, 1);
		now = __atomic_load_n(xb->fill.producer, __ATOMIC_ACQUIRE);
		if (now != prod) {
			if (now - prod != XDP_STASH)
				fail_msg("frame %d: the fill ring moved by %u, not %u", i,
				         now - prod, XDP_STASH);
			moves++;
			prod = now;
		}
	}
	assert_int_equal(moves, N / XDP_STASH);
	assert_int_equal(xb->nstash, N % XDP_STASH);
}

static void t_tx_hot(void **state)
{
	enum { N = 64 };
	const struct xdp_nic *xa;
	unsigned char buf[32];
	uint64_t seen[N];
	rcp_nic *a, *b;
	int pb, nseen = 0;
	(void)state;

	open_pair(&a, &b);
	xa = (const struct xdp_nic *)a;
	pb = test_xdp_add_peer_of(a, b);
	for (int i = 0; i < N; i++) {
		struct rcp_nic_frame fr;
		uint64_t top;
		int j;
		assert_true(xa->ntxfree > 0);
		top = xa->txfree[xa->ntxfree - 1]; /* the buffer this send takes */
		for (j = 0; j < nseen && seen[j] != top; j++)
			;
		if (j == nseen)
			seen[nseen++] = top;
		send1(a, pb, buf, sizeof buf, (uint64_t)i);
		recv1(b, &fr);
		rcp_nic_release(b, &fr, 1);
	}
	print_message("# %d sends took %d distinct TX buffers\n", N, nseen);
	/* The kernel completes a copy-mode send inside its kick or soon after:
	 * the next kick's reap has it back.  Round robin would take N. */
	if (nseen > 4)
		fail_msg("%d sends took %d distinct TX buffers (LIFO reaping: a few)", N, nseen);
	assert_int_equal(rcp_nic_flush(a), 0);
	/* Every buffer back once the kernel is done (the next reap at most). */
	for (int k = 0; k < 1000 && xa->ntxfree < xa->ring; k++) {
		send1(a, pb, buf, sizeof buf, 0);
		{
			struct rcp_nic_frame fr;
			recv1(b, &fr);
			rcp_nic_release(b, &fr, 1);
		}
		if (xa->ntxfree >= xa->ring - 1)
			break;
	}
	assert_true(xa->ntxfree >= xa->ring - 1);
}

static void t_queue(void **state)
{
	char addr[64], qa[IF_NAMESIZE], qb[IF_NAMESIZE];
	rcp_nic *n = NULL;
	(void)state;

	snprintf(addr, sizeof addr, "xdp:%s/1", veth.ifname[0]);
	assert_int_equal(rcp_nic_open(addr, NULL, &n), RCP_EADDR);
	assert_int_equal(prog_ids(veth.ifname[0]), 0);
	snprintf(addr, sizeof addr, "xdp:%s/0", veth.ifname[0]);
	assert_int_equal(open_side(0, &n), 0); /* the form without /0 */
	rcp_nic_close(n);
	opened[0] = NULL;
	assert_int_equal(rcp_nic_open(addr, NULL, &n), 0);
	rcp_nic_close(n);

	/* A pair with two queues each: queue 1 opens, 2 does not. */
	snprintf(qa, sizeof qa, "rqa%d", (int)getpid() % 100000);
	snprintf(qb, sizeof qb, "rqb%d", (int)getpid() % 100000);
	assert_int_equal(rcpi_sh("ip link add %s numtxqueues 2 numrxqueues 2 type veth peer name "
	                         "%s numtxqueues 2 numrxqueues 2 && ip link set %s up && "
	                         "ip link set %s up",
	                         qa, qb, qa, qb),
	                 0);
	snprintf(addr, sizeof addr, "xdp:%s/1", qa);
	assert_int_equal(rcp_nic_open(addr, NULL, &n), 0);
	{
		const struct xdp_nic *x = (const struct xdp_nic *)n;
		assert_int_equal(x->queue, 1);
		assert_int_not_equal(prog_ids(qa), 0);
	}
	rcp_nic_close(n);
	assert_int_equal(prog_ids(qa), 0);
	snprintf(addr, sizeof addr, "xdp:%s/2", qa);
	assert_int_equal(rcp_nic_open(addr, NULL, &n), RCP_EADDR);
	rcpi_sh("ip link del %s 2>/dev/null", qa);

	/* Queue 65 of 66: past the 64 entries the map once had. */
	assert_int_equal(rcpi_sh("ip link add %s numtxqueues 66 numrxqueues 66 type veth peer "
	                         "name %s && ip link set %s up && ip link set %s up",
	                         qa, qb, qa, qb),
	                 0);
	snprintf(addr, sizeof addr, "xdp:%s/65", qa);
	assert_int_equal(rcp_nic_open(addr, NULL, &n), 0);
	rcp_nic_close(n);
	rcpi_sh("ip link del %s 2>/dev/null", qa);
}

/* Opens ADDR in a child with MODE in RCP_XDP_MODE (NULL: unset), as
 * nobody if UNPRIV: its return code, and its stderr in ERR. */
static int open_in_child(const char *addr, const char *mode, int unpriv, char *err, size_t elen)
{
	int pp[2], st;
	ssize_t got, n;
	pid_t child;

	assert_int_equal(pipe(pp), 0);
	child = test_fork();
	assert_true(child >= 0);
	if (child == 0) {
		rcp_nic *nic = NULL;
		int rc;
		close(pp[0]);
		if (dup2(pp[1], 2) < 0)
			_exit(100);
		if (mode)
			setenv("RCP_XDP_MODE", mode, 1);
		setenv("RCP_LOG", "warn", 1);
		if (unpriv && (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		               setresuid(65534, 65534, 65534)))
			_exit(101);
		rc = rcp_nic_open(addr, NULL, &nic);
		if (!rc)
			rcp_nic_close(nic);
		_exit(-rc);
	}
	close(pp[1]);
	for (got = 0; got < (ssize_t)elen - 1 && (n = read(pp[0], err + got, elen - 1 - got)) > 0;)
		got += n;
	err[got] = 0;
	close(pp[0]);
	st = test_wait_child(child);
	return -st;
}

static void t_reasons(void **state)
{
	char addr[64], err[2048];
	int rc;
	(void)state;

	snprintf(addr, sizeof addr, "xdp:%s", veth.ifname[0]);
	rc = open_in_child(addr, NULL, 1, err, sizeof err);
	if (rc != RCP_EPERM || !strstr(err, "needs CAP_NET_ADMIN"))
		fail_msg("unprivileged open: %d (%s), stderr: %s", rc, rcp_strerror(rc), err);
	assert_int_equal(prog_ids(veth.ifname[0]), 0);

	/* veth at MTU 9000 refuses a native program not built for
	 * multi-buffer frames (nic/xdp/link.c). */
	assert_int_equal(rcpi_sh("ip link set %s mtu 9000 && ip link set %s mtu 9000",
	                         veth.ifname[0], veth.ifname[1]),
	                 0);
	rc = open_in_child(addr, "native", 0, err, sizeof err);
	rcpi_sh("ip link set %s mtu 1500 && ip link set %s mtu 1500", veth.ifname[0],
	        veth.ifname[1]);
	if (rc != RCP_ENOTSUP || !strstr(err, "attaching the XDP program"))
		fail_msg("native at MTU 9000: %d (%s), stderr: %s", rc, rcp_strerror(rc), err);
	assert_int_equal(prog_ids(veth.ifname[0]), 0);
}

/* One socket option of X's socket (SOL_SOCKET). */
static int sockopt(const struct xdp_nic *x, int opt)
{
	int v = -1;
	socklen_t l = sizeof v;
	if (getsockopt(x->fd, SOL_SOCKET, opt, &v, &l))
		fail_msg("getsockopt %d: %s", opt, strerror(errno));
	return v;
}

/* A ping-pong of N frames with RCP_XDP_BUSY_POLL=US: before each frame
 * is sent, its receiver looks at its empty RX ring once, so with
 * busy-poll on each side counts at least N busy-polls (more if a frame
 * is still on its way when the receive looks again). */
static void busy_run(const char *us)
{
	enum { N = 50 };
	struct rcp_nic_info ia, ib;
	struct rcp_nic_stats sa, sb;
	const int on = strcmp(us, "0") != 0;
	unsigned char buf[64];
	rcp_nic *a, *b, *side[2];
	int peer[2];

	setenv("RCP_XDP_BUSY_POLL", us, 1);
	open_pair(&a, &b);
	unsetenv("RCP_XDP_BUSY_POLL");
	side[0] = a;
	side[1] = b;
	peer[1] = test_xdp_add_peer_of(a, b); /* a's index of b */
	peer[0] = test_xdp_add_peer_of(b, a);
	for (int i = 0; i < 2; i++) {
		const struct xdp_nic *x = (const struct xdp_nic *)side[i];
		assert_int_equal(sockopt(x, SO_BUSY_POLL), on ? 20 : 0);
		/* (SO_BUSY_POLL_BUDGET has no getsockopt: ENOPROTOOPT) */
		assert_int_equal(sockopt(x, 69 /* SO_PREFER_BUSY_POLL */), on);
	}
	for (int i = 0; i < 2 * N; i++) {
		rcp_nic *from = side[i & 1], *to = side[!(i & 1)];
		struct rcp_nic_frame fr;
		assert_int_equal(rcp_nic_recv(to, &fr, 1), 0); /* empty: one look */
		send1(from, peer[!(i & 1)], buf, sizeof buf, (uint64_t)i);
		recv1(to, &fr);
		assert_int_equal(fr.len, sizeof buf);
		assert_int_equal(test_check(fr.data, fr.len, (uint64_t)i), -1);
		rcp_nic_release(to, &fr, 1);
	}
	assert_int_equal(rcp_nic_query(a, &ia), 0);
	assert_int_equal(rcp_nic_query(b, &ib), 0);
	assert_int_equal(rcp_nic_get_stats(a, &sa), 0);
	assert_int_equal(rcp_nic_get_stats(b, &sb), 0);
	assert_int_equal(sa.rx_frames, N);
	assert_int_equal(sb.rx_frames, N);
	assert_int_equal(ia.busy_poll_us, on ? 20 : 0);
	assert_int_equal(ib.busy_poll_us, on ? 20 : 0);
	if (on) {
		if (sa.busy_polls < N || sb.busy_polls < N)
			fail_msg("busy_polls %llu and %llu, want >= %d each",
			         (unsigned long long)sa.busy_polls,
			         (unsigned long long)sb.busy_polls, N);
	} else {
		assert_int_equal(sa.busy_polls, 0);
		assert_int_equal(sb.busy_polls, 0);
	}
	close_all(NULL);
}

static void t_busy_poll(void **state)
{
	(void)state;
	busy_run("20");
	busy_run("0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(t_in_place, close_all),
	    cmocka_unit_test_teardown(t_fill_batches, close_all),
	    cmocka_unit_test_teardown(t_tx_hot, close_all),
	    cmocka_unit_test_teardown(t_queue, close_all),
	    cmocka_unit_test_teardown(t_reasons, close_all),
	    cmocka_unit_test_teardown(t_busy_poll, close_all),
	};
	const char *const *names = rcp_nic_backends();
	const char *why;
	rcp_nic *probe;
	int have = 0, rc;

	for (int i = 0; names[i]; i++)
		have |= !strcmp(names[i], "xdp");
	if (!have)
		test_skip_all("librcp built without the xdp backend (libxdp/libbpf missing)");
	seed = test_seed(0x21a);
	if ((why = test_veth_make(&veth, "rcpxr", 1500)))
		test_skip_all(why);
	rc = open_side(0, &probe);
	if (rc == RCP_EPERM || rc == RCP_ENOTSUP) {
		test_veth_remove(&veth);
		test_skip_all("XDP attach not permitted or not supported here");
	}
	assert_int_equal(rc, 0);
	close_all(NULL);
	printf("# seed %llu (RCP_TEST_SEED)\n", (unsigned long long)seed);
	rc = cmocka_run_group_tests_name("nic xdp rings (issue 21 audit)", tests, NULL, NULL);
	test_veth_remove(&veth);
	return rc;
}
