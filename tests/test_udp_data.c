/*
 * tests/test_udp_data.c — the udp backend (nic/udp/): the
 * single-process data path: unknown sources, sizes and gather, batching
 * with RCP_NIC_MORE, GSO on the wire, GRO, oversize frames dropped.
 * What every udp test shares, and the rules they follow: tests/udp_test.h.
 */
#include "udp_test.h"

/* ---- single-process data path ------------------------------------------ */

static void t_unknown_source(void **state)
{
	rcp_nic *a = xopen("udp:", NULL), *b = xopen("udp:", NULL);
	unsigned char buf[256], ablob[RCP_NIC_ADDR_MAX];
	size_t alen = sizeof ablob;
	struct rcp_nic_frame f;
	int pb, pa, pa2;
	(void)state;

	pb = xpeer(a, b);
	assert_int_equal(rcp_nic_addr_blob(a, ablob, &alen), 0);

	/* B does not know A: PEER_NONE, and the blob names A. */
	assert_int_equal(send_seq(a, pb, buf, 100, 1, 0), 0);
	assert_int_equal(recv_wait(b, &f, 1), 1);
	assert_int_equal(f.peer, RCP_NIC_PEER_NONE);
	assert_int_equal(f.len, 100);
	assert_int_equal(test_check(f.data, f.len, 1), -1);
	assert_int_equal(f.srclen, alen);
	assert_memory_equal(f.src, ablob, alen);
	/* Adding the blob straight from the frame (still valid before release). */
	assert_int_equal(rcp_nic_peer_add(b, f.src, f.srclen, &pa), 0);
	rcp_nic_release(b, &f, 1);
	assert_int_equal(rcp_nic_peer_add(b, ablob, alen, &pa2), 0);
	assert_int_equal(pa, pa2);

	/* Later frames carry the index, both ways. */
	assert_int_equal(send_seq(a, pb, buf, 200, 2, 0), 0);
	expect_seq(b, 200, 2, pa);
	assert_int_equal(send_seq(b, pa, buf, 50, 3, 0), 0);
	expect_seq(a, 50, 3, pb);

	/* After peer_remove the sender is unknown again. */
	assert_int_equal(rcp_nic_peer_remove(b, pa), 0);
	assert_int_equal(send_seq(a, pb, buf, 10, 4, 0), 0);
	expect_seq(b, 10, 4, RCP_NIC_PEER_NONE);

	/* A plain socket is a peer like any other. */
	{
		int s = socket(AF_INET, SOCK_DGRAM, 0), pr;
		struct sockaddr_in me = {.sin_family = AF_INET}, to = me;
		socklen_t sl = sizeof me;
		unsigned char got[64];

		assert_true(s >= 0);
		me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(bind(s, (struct sockaddr *)&me, sizeof me), 0);
		assert_int_equal(getsockname(s, (struct sockaddr *)&me, &sl), 0);
		to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		to.sin_port = htons((uint16_t)port_of(b));
		test_fill(buf, 33, 5);
		assert_int_equal(sendto(s, buf, 33, 0, (struct sockaddr *)&to, sizeof to), 33);
		assert_int_equal(recv_wait(b, &f, 1), 1);
		assert_int_equal(f.peer, RCP_NIC_PEER_NONE);
		assert_int_equal(f.len, 33);
		assert_int_equal(test_check(f.data, 33, 5), -1);
		assert_int_equal(f.srclen, 8);
		assert_memory_equal((const unsigned char *)f.src + 2, &me.sin_port, 2);
		assert_int_equal(rcp_nic_peer_add(b, f.src, f.srclen, &pr), 0);
		rcp_nic_release(b, &f, 1);
		assert_int_equal(send_seq(b, pr, buf, 17, 6, 0), 0);
		{
			struct pollfd pfd = {.fd = s, .events = POLLIN};
			assert_int_equal(poll(&pfd, 1, 10000), 1);
		}
		assert_int_equal(recv(s, got, sizeof got, 0), 17);
		assert_int_equal(test_check(got, 17, 6), -1);
		close(s);
	}
	rcp_nic_close(a);
	rcp_nic_close(b);
}

static void t_sizes_and_gather(void **state)
{
	rcp_nic *a = xopen("udp:", NULL), *b = xopen("udp:", NULL);
	struct rcp_nic_info info;
	struct rcp_nic_stats st;
	unsigned char *big;
	struct iovec *iov;
	int pb, pa;
	(void)state;

	pb = xpeer(a, b);
	pa = xpeer(b, a);
	assert_int_equal(rcp_nic_query(a, &info), 0);
	big = malloc((size_t)info.mtu + 1);
	iov = calloc(1100, sizeof *iov);
	assert_non_null(big);
	assert_non_null(iov);

	/* Too big, alone or batched: refused, nothing queued. */
	assert_int_equal(send_buf(a, pb, big, (size_t)info.mtu + 1, 0), RCP_EMSGSIZE);
	assert_int_equal(send_buf(a, pb, big, (size_t)info.mtu + 1, RCP_NIC_MORE), RCP_EMSGSIZE);
	assert_int_equal(rcp_nic_flush(a), 0);
	/* Empty frame, then the largest, then one gathered from 300 pieces
	 * after two queued ones (too many to queue: the queue goes first). */
	assert_int_equal(rcp_nic_send(a, pb, NULL, 0, 0), 0);
	assert_int_equal(send_seq(a, pb, big, info.mtu, 7, 0), 0);
	{
		struct rcp_nic_frame f;
		assert_int_equal(recv_wait(b, &f, 1), 1);
		assert_int_equal(f.len, 0);
		assert_int_equal(f.peer, pa);
		rcp_nic_release(b, &f, 1);
	}
	expect_seq(b, info.mtu, 7, pa);

	{
		unsigned char q1[10], q2[20];
		assert_int_equal(send_seq(a, pb, q1, sizeof q1, 8, RCP_NIC_MORE), 0);
		assert_int_equal(send_seq(a, pb, q2, sizeof q2, 9, RCP_NIC_MORE), 0);
		test_fill(big, 3000, 10);
		for (int i = 0; i < 300; i++) {
			iov[i].iov_base = big + i * 10;
			iov[i].iov_len = 10;
		}
		assert_int_equal(rcp_nic_send(a, pb, iov, 300, RCP_NIC_MORE), 0);
		assert_int_equal(rcp_nic_flush(a), 0);
		expect_seq(b, sizeof q1, 8, pa);
		expect_seq(b, sizeof q2, 9, pa);
		expect_seq(b, 3000, 10, pa);
	}
	/* More pieces than any sendmsg takes. */
	for (int i = 0; i < 1025; i++) {
		iov[i].iov_base = big;
		iov[i].iov_len = 1;
	}
	assert_int_equal(rcp_nic_send(a, pb, iov, 1025, 0), RCP_EINVAL);
	assert_int_equal(rcp_nic_send(a, pb, iov, 1024, 0), 0);
	{
		struct rcp_nic_frame f;
		assert_int_equal(recv_wait(b, &f, 1), 1);
		assert_int_equal(f.len, 1024);
		rcp_nic_release(b, &f, 1);
	}
	st = stats_of(a);
	assert_int_equal(st.tx_frames, 6);
	assert_int_equal(st.tx_bytes, info.mtu + 10 + 20 + 3000 + 1024);
	st = stats_of(b);
	assert_int_equal(st.rx_frames, 6);
	assert_int_equal(st.rx_dropped, 0);
	free(iov);
	free(big);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* MORE queues without sending; a send without MORE or a flush pushes
 * everything; a full queue flushes itself. */
static void t_batching(void **state)
{
	enum { N = 150 };
	rcp_nic *a, *b;
	static unsigned char bufs[N][300];
	struct rcp_nic_frame f[64];
	struct pollfd pfd;
	long got = 0;
	int pb, pa, gso = *(int *)*state;

	set_gso(gso);
	a = xopen("udp:", NULL);
	b = xopen("udp:", NULL);
	pb = xpeer(a, b);
	pa = xpeer(b, a);

	/* Ten queued frames: nothing reaches the socket. */
	for (int i = 0; i < 10; i++)
		assert_int_equal(
		    send_seq(a, pb, bufs[i], 100 + (size_t)i, (uint64_t)i, RCP_NIC_MORE), 0);
	assert_int_equal(stats_of(a).tx_frames, 0);
	pfd.fd = rcp_nic_fd(b);
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(rcp_nic_recv(b, f, 64), 0);
	assert_int_equal(rcp_nic_flush(a), 0);
	assert_int_equal(stats_of(a).tx_frames, 10);
	assert_int_equal(rcp_nic_flush(a), 0); /* empty queue: no-op */
	for (int i = 0; i < 10; i++)
		expect_seq(b, 100 + (size_t)i, (uint64_t)i, pa);

	/* Five with MORE then one without: all six go, no flush needed. */
	for (int i = 0; i < 6; i++)
		assert_int_equal(
		    send_seq(a, pb, bufs[i], 64, (uint64_t)(20 + i), i < 5 ? RCP_NIC_MORE : 0), 0);
	assert_int_equal(stats_of(a).tx_frames, 16);
	for (int i = 0; i < 6; i++)
		expect_seq(b, 64, (uint64_t)(20 + i), pa);

	/* More frames than the queue holds: it flushes by itself; runs of
	 * equal sizes (GSO candidates) mixed with odd ones.  The receiver
	 * takes them with bursts of varying size. */
	for (int i = 0; i < N; i++) {
		size_t len = (i / 10) % 3 == 0 ? 300 : (i / 10) % 3 == 1 ? 77 : 1 + (size_t)i;
		assert_int_equal(send_seq(a, pb, bufs[i], len, (uint64_t)(100 + i), RCP_NIC_MORE),
		                 0);
	}
	assert_true(stats_of(a).tx_frames >= 16 + 64);
	assert_int_equal(rcp_nic_flush(a), 0);
	assert_int_equal(stats_of(a).tx_frames, 16 + N);
	for (int max = 1; got < N; max = max % 64 + 7) {
		int k = recv_wait(b, f, max);
		CHECK(k > 0 && k <= max);
		for (int j = 0; j < k; j++, got++) {
			size_t len = (got / 10) % 3 == 0   ? 300
			             : (got / 10) % 3 == 1 ? 77
			                                   : 1 + (size_t)got;
			CHECK(f[j].len == len);
			CHECK(f[j].peer == pa);
			CHECK(test_check(f[j].data, len, (uint64_t)(100 + got)) == -1);
		}
		rcp_nic_release(b, f, k);
	}

	/* peer_remove sends what is queued for the peer first. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(send_seq(a, pb, bufs[i], 40, (uint64_t)(500 + i), RCP_NIC_MORE),
		                 0);
	assert_int_equal(rcp_nic_peer_remove(a, pb), 0);
	for (int i = 0; i < 3; i++)
		expect_seq(b, 40, (uint64_t)(500 + i), pa);
	assert_int_equal(send_buf(a, pb, bufs[0], 1, 0), RCP_EINVAL);
	assert_int_equal(rcp_nic_flush(a), 0);

	assert_int_equal(stats_of(b).rx_dropped, 0);
	rcp_nic_close(a);
	rcp_nic_close(b);
	unsetenv("RCP_UDP_GSO");
}

/* What the wire carries: a raw socket with UDP_GRO sees GSO runs as one
 * buffer (with the segment size), and still the same datagrams. */
static void t_gso_on_the_wire(void **state)
{
	static const uint16_t lens[] = {100, 100, 100, 50,  100, 100, 30,  30,  200, 0,
	                                7,   7,   7,   7,   7,   7,   7,   7,   7,   7,
	                                1,   2,   3,   999, 999, 999, 999, 999, 999, 500};
	enum { NL = sizeof lens / sizeof lens[0] };
	static unsigned char bufs[NL][1000], rbuf[65536];
	int gso = *(int *)*state, s, one = 1, pr, nbuf = 0, nf = 0;
	struct sockaddr_in me = {.sin_family = AF_INET};
	socklen_t sl = sizeof me;
	char addr[64];
	rcp_nic *a;

	s = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(s >= 0);
	if (setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one)) {
		close(s);
		printf("SKIP: UDP_GRO not offered by this kernel\n");
		skip();
	}
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s, (struct sockaddr *)&me, sizeof me), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&me, &sl), 0);
	snprintf(addr, sizeof addr, "udp:127.0.0.1:%u", ntohs(me.sin_port));

	set_gso(gso);
	a = xopen("udp:", NULL);
	unsetenv("RCP_UDP_GSO");
	assert_int_equal(rcp_nic_peer_add_str(a, addr, &pr), 0);
	for (int i = 0; i < NL; i++)
		assert_int_equal(
		    send_seq(a, pr, bufs[i], lens[i], (uint64_t)i, i + 1 < NL ? RCP_NIC_MORE : 0),
		    0);
	while (nf < NL) {
		union {
			struct cmsghdr c;
			char b[64];
		} ctl;
		struct iovec iov = {rbuf, sizeof rbuf};
		struct msghdr m = {.msg_iov = &iov,
		                   .msg_iovlen = 1,
		                   .msg_control = ctl.b,
		                   .msg_controllen = sizeof ctl.b};
		struct cmsghdr *c;
		struct pollfd pfd = {.fd = s, .events = POLLIN};
		ssize_t n;
		int seg = 0;

		assert_int_equal(poll(&pfd, 1, 10000), 1);
		n = recvmsg(s, &m, 0);
		assert_true(n >= 0);
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO)
				memcpy(&seg, CMSG_DATA(c), sizeof seg);
		nbuf++;
		if (!seg)
			seg = (int)n;
		/* Split like a receiver would; each piece must be the next frame. */
		for (ssize_t off = 0; off < n || (n == 0 && off == 0); off += seg) {
			size_t len = (size_t)(n - off < seg ? n - off : seg);
			CHECK(nf < NL);
			CHECK(len == lens[nf]);
			CHECK(test_check(rbuf + off, len, (uint64_t)nf) == -1);
			nf++;
			if (!n)
				break;
		}
	}
	/* Runs of equal sizes: 100x3+50 | 100x2 | 30x2 | 7x10 | 999x6 (+500). */
	if (gso)
		CHECK(nbuf <= NL - 3 - 1 - 1 - 9 - 5);
	else
		CHECK(nbuf == NL);
	close(s);
	rcp_nic_close(a);
}

/* Whether this kernel offers UDP_GRO at all. */
static int kernel_has_gro(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1, ok;
	ok = s >= 0 && !setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
	if (s >= 0)
		close(s);
	return ok;
}

/* B turns UDP_GRO on when a burst of equal frames arrives.  Sends such
 * bursts from A until B hands one out as a single coalesced buffer (all
 * frames in one receive slot: one token; white box).  Returns 1 then. */
static int warm_gro(rcp_nic *a, int pb, rcp_nic *b, size_t len)
{
	static unsigned char w[8][64];
	struct rcp_nic_frame f[64];

	for (int round = 0; round < 20; round++) {
		int got = 0, one_slot = 0;
		for (int i = 0; i < 8; i++)
			assert_int_equal(send_buf(a, pb, w[i], len, i < 7 ? RCP_NIC_MORE : 0), 0);
		while (got < 8) {
			int k = recv_wait(b, f, 64);
			assert_true(k > 0 && got + k <= 8);
			if (k == 8 && f[0].token == f[7].token)
				one_slot = 1;
			got += k;
			rcp_nic_release(b, f, k);
		}
		if (one_slot)
			return 1;
	}
	return 0;
}

/* A GRO buffer is split into frames across recv calls; a peer added
 * between calls applies to the rest of it. */
static void t_gro_split(void **state)
{
	enum { N = 40 };
	static unsigned char bufs[N][100];
	rcp_nic *a, *b;
	struct rcp_nic_frame f[8];
	int pb, pa = -1, got = 0;
	uint64_t rx0;
	(void)state;

	if (!kernel_has_gro()) {
		printf("SKIP: UDP_GRO not offered by this kernel\n");
		skip();
	}
	set_gso(1);
	a = xopen("udp:", NULL);
	b = xopen("udp:", NULL);
	unsetenv("RCP_UDP_GSO");
	pb = xpeer(a, b);
	/* GRO is off until bursts of equal frames come: this is one. */
	assert_true(warm_gro(a, pb, b, 16));
	rx0 = stats_of(b).rx_frames;
	for (int i = 0; i < N; i++)
		assert_int_equal(send_seq(a, pb, bufs[i], 100, (uint64_t)i, RCP_NIC_MORE), 0);
	assert_int_equal(rcp_nic_flush(a), 0);
	while (got < N) {
		int k = recv_wait(b, f, 7);
		CHECK(k > 0 && k <= 7);
		if (!got) /* the burst came as one buffer */
			CHECK(k == 7 && f[0].token == f[6].token);
		for (int j = 0; j < k; j++, got++) {
			CHECK(f[j].len == 100);
			CHECK(test_check(f[j].data, 100, (uint64_t)got) == -1);
			CHECK(f[j].peer == pa); /* PEER_NONE until added */
		}
		if (pa < 0)
			assert_int_equal(rcp_nic_peer_add(b, f[0].src, f[0].srclen, &pa), 0);
		rcp_nic_release(b, f, k);
	}
	assert_int_equal(stats_of(b).rx_frames - rx0, N);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* Datagrams longer than the receiver's MTU are counted and dropped, never
 * delivered cut: with exact-size slots (MSG_TRUNC) and with GRO slots. */
static void t_oversize_dropped(void **state)
{
	rcp_nic *a, *b;
	struct rcp_nic_config cfg = {.mtu = 100};
	static unsigned char buf[8][200];
	struct rcp_nic_frame f[4];
	int pb, gso = *(int *)*state;

	set_gso(gso);
	a = xopen("udp:", NULL);
	b = xopen("udp:", &cfg);
	unsetenv("RCP_UDP_GSO");
	pb = xpeer(a, b);
	/* With GRO on, the over-long run below arrives as one buffer whose
	 * short tail still fits. */
	if (gso && kernel_has_gro())
		assert_true(warm_gro(a, pb, b, 50));
	assert_int_equal(send_seq(a, pb, buf[0], 101, 1, 0), 0);
	assert_int_equal(send_seq(a, pb, buf[1], 100, 2, 0), 0);
	expect_seq(b, 100, 2, RCP_NIC_PEER_NONE);
	assert_int_equal(stats_of(b).rx_dropped, 1);
	/* A GSO run of five over-long frames, then a good one. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(send_seq(a, pb, buf[i], 150, (uint64_t)(10 + i), RCP_NIC_MORE), 0);
	assert_int_equal(send_seq(a, pb, buf[5], 3, 20, 0), 0);
	assert_int_equal(recv_wait(b, f, 4), 1);
	assert_int_equal(f[0].len, 3);
	assert_int_equal(test_check(f[0].data, 3, 20), -1);
	rcp_nic_release(b, f, 1);
	assert_int_equal(stats_of(b).rx_dropped, 6);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

static int gso_on = 1, gso_off = 0;

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_unknown_source),
	    cmocka_unit_test(t_sizes_and_gather),
	    cmocka_unit_test_prestate(t_batching, &gso_on),
	    cmocka_unit_test_prestate(t_batching, &gso_off),
	    cmocka_unit_test_prestate(t_gso_on_the_wire, &gso_on),
	    cmocka_unit_test_prestate(t_gso_on_the_wire, &gso_off),
	    cmocka_unit_test(t_gro_split),
	    cmocka_unit_test_prestate(t_oversize_dropped, &gso_on),
	    cmocka_unit_test_prestate(t_oversize_dropped, &gso_off),
	};
	g_seed = test_seed(0x5eedf00d);
	/* The tests set RCP_UDP_GSO themselves; start from the default. */
	unsetenv("RCP_UDP_GSO");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
