/*
 * tests/test_verbs.c — the verbs backend (nic/verbs/) on a model of an HCA.
 *
 * What runs here.  This machine has no RDMA device, so every data-path
 * test runs the real backend, compiled against the real rdma-core headers
 * and linked with the real libibverbs, on tests/verbs_mock.c: two HCAs in
 * this process whose contexts carry the model's post/poll functions.  The
 * tests count what the model saw (doorbells, signalled WRs, inline sends,
 * drops, queue depths), never time.  t_no_device runs on the real
 * libibverbs.  t_device runs the same traffic on a real device when
 * ibv_devices lists one with an ACTIVE port, and SKIPs otherwise.
 * Randomness (the model's drops, the faults wrapper) comes from
 * RCP_TEST_SEED and failures print the seed.
 */
#include <poll.h>

#include <rcp/nic.h>
#include <rcp/rcp.h>

#include "nic/nic_int.h"
#include "nic/verbs/api.h"
#include "nic/verbs/verbs_int.h"
#include "tests/verbs_mock.h"
#include "testutil.h"
#include "tests/verbs_test.h"

#define SQ 512 /* the backend's VB_SQ */

/* Peers that only exchange datagrams: adding them makes no RC QP and
 * sends no control datagram (RC QPs are made at the first get/put,
 * nic/verbs/rc.c, session 21).  Receives that find nothing; then the
 * model's counters start from zero for the test. */
static void pair_settle(struct pair *p)
{
	pair_recv_turns(p);
	CHECK(mock_stats()->rc_qps == 0);
	CHECK(rma_stats(p->a).rc_made == 0 && rma_stats(p->b).rc_made == 0);
	CHECK(rma_stats(p->a).ctl_sent == 0 && rma_stats(p->b).ctl_sent == 0);
	memset(mock_stats(), 0, sizeof *mock_stats());
}

static void pair_open(struct pair *p, const struct rcp_nic_config *ca,
                      const struct rcp_nic_config *cb)
{
	uint8_t blob[RCP_NIC_ADDR_MAX];
	char s[RCP_NIC_ADDRSTR_MAX];
	size_t len = sizeof blob;

	CHECK(rcp_nic_open("verbs:mock0:1", ca, &p->a) == 0);
	CHECK(rcp_nic_open("verbs:mock1:1", cb, &p->b) == 0);
	/* One side by blob, the other by string. */
	CHECK(rcp_nic_addr_blob(p->b, blob, &len) == 0);
	CHECK(rcp_nic_peer_add(p->a, blob, len, &p->pa) == 0);
	CHECK(rcp_nic_addr_str(p->a, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(p->b, s, &p->pb) == 0);
	pair_settle(p);
}

/* Frames sent with RCP_NIC_MORE may be read at the flush (inline sends
 * point into the caller's bytes): each in-flight frame has its own buffer. */
static uint8_t sendbuf[256][4096 + 8];

static int send_seq(rcp_nic *n, int peer, uint64_t seq, size_t len, unsigned flags)
{
	uint8_t *buf = sendbuf[seq % 256], *hdr = buf + 4096;
	struct iovec iov[3];

	test_fill(buf, len, seq);
	/* Gathered from three pieces: 8 bytes of sequence number, the rest
	 * split unevenly. */
	memcpy(hdr, &seq, 8);
	if (len < 8)
		return rcp_nic_send(n, peer, &(struct iovec){buf, len}, 1, flags);
	iov[0] = (struct iovec){hdr, 8};
	iov[1] = (struct iovec){buf + 8, (len - 8) / 3};
	iov[2] = (struct iovec){buf + 8 + (len - 8) / 3, len - 8 - (len - 8) / 3};
	return rcp_nic_send(n, peer, iov, 3, flags);
}

/* Sends N frames numbered FIRST on, LEN bytes each, from P's a to b
 * (send_seq, no MORE); returns how many were taken before one was not. */
static int send_seqs(struct pair *p, uint64_t first, int n, size_t len)
{
	int i = 0;
	while (i < n && send_seq(p->a, p->pa, first + (uint64_t)i, len, 0) == 0)
		i++;
	return i;
}

/* Receives everything waiting; checks each frame's bytes against its
 * sequence number (frames of 8 bytes or more) and that sequence numbers
 * rise.  Returns the count; *LAST is the last sequence number. */
static int drain(rcp_nic *n, int want_peer, size_t len, int64_t *last)
{
	struct rcp_nic_frame fr[32];
	int got, total = 0;

	while ((got = rcp_nic_recv(n, fr, 32)) > 0) {
		for (int i = 0; i < got; i++) {
			uint64_t seq;
			uint8_t want[4096];
			CHECK(fr[i].len == len);
			CHECK(fr[i].peer == want_peer);
			if (len >= 8) {
				memcpy(&seq, fr[i].data, 8);
				test_fill(want, len, seq);
				CHECK(!memcmp((const uint8_t *)fr[i].data + 8, want + 8, len - 8));
				CHECK((int64_t)seq > *last);
				*last = (int64_t)seq;
			}
		}
		rcp_nic_release(n, fr, got);
		total += got;
	}
	CHECK(got == 0);
	return total;
}

static int setup(void **state)
{
	(void)state;
	mock_install(NULL);
	return 0;
}

/* ---- tests on the real libibverbs ------------------------------------------ */

/* No such device: RCP_ENODEV, never a crash.  With no device at all
 * (this machine), also the first device name any HCA would have. */
static void t_no_device(void **state)
{
	struct ibv_device **l;
	rcp_nic *n = NULL;
	int ndev = 0;

	(void)state;
	mock_uninstall();
	CHECK(rcp_nic_open("verbs:rcp_no_such_hca0:1", NULL, &n) == RCP_ENODEV);
	CHECK(n == NULL);
	l = ibv_get_device_list(&ndev);
	if (l)
		ibv_free_device_list(l);
	if (ndev == 0) {
		CHECK(rcp_nic_open("verbs:mlx5_0:1", NULL, &n) == RCP_ENODEV);
		CHECK(rcp_nic_open("verbs:rxe0:1:1", NULL, &n) == RCP_ENODEV);
	}
	/* Malformed addresses are refused before any device is looked at. */
	CHECK(rcp_nic_open("verbs:", NULL, &n) == RCP_EADDR);
	CHECK(rcp_nic_open("verbs:mlx5_0", NULL, &n) == RCP_EADDR);
	CHECK(strcmp(rcp_strerror(RCP_ENODEV), "no such device") == 0);
}

/* ---- on the model --------------------------------------------------------- */

static void t_no_device_mock(void **state)
{
	struct mock_config c = {.ndev = -1};
	rcp_nic *n = NULL;

	(void)state;
	mock_install(&c);
	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &n) == RCP_ENODEV);
	c.ndev = 1;
	c.state = IBV_PORT_INIT; /* no subnet manager yet */
	mock_install(&c);
	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &n) == RCP_ENODEV);
	CHECK(mock_live() == 0);
	mock_install(NULL);
	CHECK(rcp_nic_open("verbs:mock0:2", NULL, &n) == RCP_ENODEV); /* one port */
	CHECK(rcp_nic_open("verbs:mock7:1", NULL, &n) == RCP_ENODEV);
	CHECK(rcp_nic_open("verbs:mock0:1:9", NULL, &n) == RCP_EADDR); /* no such GID */
	CHECK(mock_live() == 0);
}

static void t_addresses(void **state)
{
	static const char *bad_local[] = {
	    "verbs:",         "verbs:mock0",       "verbs:mock0:", "verbs:mock0:0", "verbs:mock0:x",
	    "verbs:mock0:1:", "verbs:mock0:1:1:1", "verbs::1",     "verbs:mock0:1x"};
	static const char *bad_peer[] = {"verbs:mock1:1",
	                                 "verbs:mock1:1@",
	                                 "verbs:mock1:1@0x100",
	                                 "verbs:mock1:1@0x100/0",
	                                 "verbs:mock1:1@0x1/2",
	                                 "verbs:mock1:1@zz/2",
	                                 "verbs:mock1:1@0x100/49152",
	                                 "udp:127.0.0.1:5",
	                                 "verbs:mock1:1@0x1000000/2",
	                                 "verbs:m:1@0x100/fe80::1"};
	struct pair p;
	char s[RCP_NIC_ADDRSTR_MAX];
	uint8_t blob[RCP_NIC_ADDR_MAX];
	size_t len = sizeof blob;
	struct rcp_nic_info info;
	rcp_nic *n;
	int idx;

	(void)state;
	for (size_t i = 0; i < sizeof bad_local / sizeof *bad_local; i++) {
		if (rcp_nic_open(bad_local[i], NULL, &n) != RCP_EADDR)
			fail_msg("%s accepted", bad_local[i]);
	}
	pair_open(&p, NULL, NULL);
	for (size_t i = 0; i < sizeof bad_peer / sizeof *bad_peer; i++) {
		if (rcp_nic_peer_add_str(p.a, bad_peer[i], &idx) != RCP_EADDR)
			fail_msg("%s accepted", bad_peer[i]);
	}
	/* The string names QPN and LID; blob and string give one index. */
	CHECK(rcp_nic_addr_str(p.b, s, sizeof s) == 0);
	CHECK(!strncmp(s, "verbs:mock1:1@0x", 16));
	CHECK(!strcmp(s + strlen(s) - 2, "/2"));
	CHECK(rcp_nic_peer_add_str(p.a, s, &idx) == 0 && idx == p.pa);
	CHECK(rcp_nic_addr_blob(p.b, blob, &len) == 0 && len == 24);
	blob[1] = 0x80; /* an unknown flag */
	CHECK(rcp_nic_peer_add(p.a, blob, len, &idx) == RCP_EADDR);
	CHECK(rcp_nic_addr_str(p.b, s, 10) == RCP_ERANGE);
	CHECK(rcp_nic_query(p.a, &info) == 0);
	CHECK(!strcmp(info.backend, "verbs"));
	CHECK(info.mtu == 2048); /* the port's active MTU */
	CHECK(info.caps == (RCP_NIC_CAP_CHECKED | RCP_NIC_CAP_RMA | RCP_NIC_CAP_MCAST));
	CHECK(info.rx_frames > 0 && info.rx_frames < 1024);
	CHECK(rcp_nic_peer_remove(p.a, p.pa) == 0);
	CHECK(rcp_nic_peer_remove(p.a, p.pa) == RCP_EINVAL);
	pair_close(&p);
}

/* Every size up to the MTU, gathered from an iov, inline below the
 * device's limit and copied above, bytes and sender checked. */
static void t_sizes(void **state)
{
	struct rcp_nic_config cfg = {.mtu = 4000}; /* more than the port: ignored */
	struct pair p;
	struct mock_stats *st = mock_stats();
	uint64_t inl = 0, seq = 0;

	(void)state;
	pair_open(&p, &cfg, NULL);
	for (size_t len = 0; len <= 2048; len += len < 300 ? 1 : 97) {
		int64_t last = -1;
		CHECK(send_seq(p.a, p.pa, seq++, len, 0) == 0);
		CHECK(drain(p.b, p.pb, len, &last) == 1);
		inl += len <= 188;
	}
	CHECK(st->inline_sends == inl); /* exactly the frames within max_inline */
	CHECK(send_seq(p.a, p.pa, 0, 2049, 0) == RCP_EMSGSIZE);
	pair_close(&p);

	cfg.mtu = 1000; /* less than the port: taken */
	pair_open(&p, &cfg, NULL);
	CHECK(send_seq(p.a, p.pa, 0, 1001, 0) == RCP_EMSGSIZE);
	CHECK(send_seq(p.a, p.pa, 0, 1000, 0) == 0);
	pair_close(&p);
}

/* A burst with RCP_NIC_MORE is chained: one ibv_post_send per 64 WRs,
 * one signalled WR per 32. */
static void t_burst_chained(void **state)
{
	struct pair p;
	struct mock_stats *st = mock_stats();
	int64_t last = -1;
	uint64_t calls;

	(void)state;
	pair_open(&p, NULL, NULL);
	calls = st->post_send_calls;
	for (int i = 0; i < 200; i++)
		CHECK(send_seq(p.a, p.pa, (uint64_t)i, 64, i < 199 ? RCP_NIC_MORE : 0) == 0);
	CHECK(rcp_nic_flush(p.a) == 0);
	CHECK(st->post_send_calls - calls == 4); /* 64 + 64 + 64 + 8 */
	CHECK(st->signaled == 200 / 32);
	CHECK(drain(p.b, p.pb, 64, &last) == 200);
	/* Frames of a burst not yet flushed have not left. */
	CHECK(send_seq(p.a, p.pa, 500, 64, RCP_NIC_MORE) == 0);
	CHECK(drain(p.b, p.pb, 64, &last) == 0);
	CHECK(rcp_nic_flush(p.a) == 0);
	CHECK(drain(p.b, p.pb, 64, &last) == 1);
	pair_close(&p);
}

/* Many times the send queue's depth, receiver keeping up: the send queue
 * never overflows (selective signalling frees it) and no send is refused. */
static void t_send_queue(void **state)
{
	struct pair p;
	struct mock_stats *st = mock_stats();
	int64_t last = -1;
	long got = 0;

	(void)state;
	pair_open(&p, NULL, NULL);
	for (int i = 0; i < 20 * SQ; i++) {
		CHECK(send_seq(p.a, p.pa, (uint64_t)i, 512, 0) == 0); /* copied, not inline */
		if (i % 100 == 99)
			got += drain(p.b, p.pb, 512, &last);
	}
	got += drain(p.b, p.pb, 512, &last);
	CHECK(got == 20 * SQ);
	CHECK(st->sq_full == 0);
	CHECK(st->max_sq_used <= SQ);
	CHECK(st->cq_overflow == 0);
	pair_close(&p);
}

/* A receiver that does not keep up: the HCA drops what finds no receive
 * posted (UD has no RNR), nothing overflows; then receives are reposted
 * in batches and traffic runs through many times the queue's depth. */
static void t_overrun_repost(void **state)
{
	struct rcp_nic_config small = {.rx_bytes = 64 * 2048}; /* RQ of 64 */
	struct pair p;
	struct mock_stats *st = mock_stats();
	int64_t last = -1;
	long got = 0;
	uint64_t recv_calls;

	(void)state;
	pair_open(&p, NULL, &small);
	CHECK(send_seqs(&p, 0, 300, 100) == 300);
	CHECK(drain(p.b, p.pb, 100, &last) == 64);
	CHECK(st->dropped_norecv == 300 - 64);
	CHECK(st->cq_overflow == 0 && st->rq_full == 0);
	recv_calls = st->post_recv_calls;
	for (int r = 0; r < 40; r++) {
		CHECK(send_seqs(&p, (uint64_t)(1000 + r * 30), 30, 100) == 30);
		got += drain(p.b, p.pb, 100, &last);
	}
	CHECK(got == 40 * 30);
	CHECK(st->dropped_norecv == 300 - 64);
	/* Batched: 1200 receives reposted in far fewer calls. */
	CHECK(st->post_recv_calls - recv_calls <= 1200 / 16 + 2);
	/* Even when the frames come back one at a time. */
	CHECK(send_seqs(&p, 5000, 30, 100) == 30);
	recv_calls = st->post_recv_calls;
	{
		struct rcp_nic_frame fr[64];
		int n = rcp_nic_recv(p.b, fr, 64);
		CHECK(n == 30); /* the QP keeps more than half its receives */
		for (int i = 1; i <= n; i++)
			rcp_nic_release(p.b, fr, i);
	}
	CHECK(st->post_recv_calls - recv_calls <= 30 / 16);
	pair_close(&p);
}

/* An error completion on the send side, then on the receive side: the QP
 * is restarted and traffic resumes; the QPN stays. */
static void t_error_completions(void **state)
{
	struct pair p;
	struct mock_stats *st = mock_stats();
	struct rcp_nic_frame fr[8];
	struct rcp_nic_stats ns = {0};
	char before[RCP_NIC_ADDRSTR_MAX], after[RCP_NIC_ADDRSTR_MAX];
	int64_t last = -1;
	long got = 0;

	(void)state;
	pair_open(&p, NULL, NULL);
	CHECK(rcp_nic_addr_str(p.a, before, sizeof before) == 0);
	mock_faults()->send_err = 1;
	CHECK(send_seqs(&p, 0, 40, 64) == 40);
	CHECK(st->err_cqes == 1);
	CHECK(rcp_nic_recv(p.a, fr, 8) == 0); /* progress: sees the error, restarts */
	CHECK(st->resets == 1);
	got = drain(p.b, p.pb, 64, &last);
	CHECK(got < 40);
	CHECK(send_seqs(&p, 100, 100, 64) == 100);
	CHECK(drain(p.b, p.pb, 64, &last) == 100);
	CHECK(rcp_nic_addr_str(p.a, after, sizeof after) == 0);
	CHECK(!strcmp(before, after));

	mock_faults()->recv_len_err = 1;
	CHECK(send_seqs(&p, 300, 10, 64) == 10);
	drain(p.b, p.pb, 64, &last);
	CHECK(st->resets == 2);
	CHECK(rcp_nic_get_stats(p.b, &ns) == 0 && ns.rx_dropped == 1);
	CHECK(send_seqs(&p, 400, 100, 64) == 100);
	CHECK(drain(p.b, p.pb, 64, &last) == 100);
	pair_close(&p);
}

/* Lost datagrams: what the wire loses is missing, nothing else. */
static void t_lost(void **state)
{
	struct pair p;
	struct mock_stats *st = mock_stats();
	int64_t last = -1;
	long got = 0;

	(void)state;
	pair_open(&p, NULL, NULL);
	mock_seed(g_seed);
	mock_faults()->drop = 0.2;
	for (int r = 0; r < 50; r++) {
		CHECK(send_seqs(&p, (uint64_t)(r * 40), 40, 300) == 40);
		got += drain(p.b, p.pb, 300, &last);
	}
	CHECK(st->dropped_wire > 200 && st->dropped_wire < 600);
	CHECK(got == 2000 - (long)st->dropped_wire);
	pair_close(&p);
}

/* The wait fd: armed with nothing there it stays quiet; a frame makes it
 * readable; arm refuses (RCP_EAGAIN) while a frame waits. */
static void t_wait_fd(void **state)
{
	struct pair p;
	struct rcp_nic_frame fr[4];
	struct pollfd pf;
	int64_t last = -1;

	(void)state;
	pair_open(&p, NULL, NULL);
	pf.fd = rcp_nic_fd(p.b);
	pf.events = POLLIN;
	CHECK(pf.fd >= 0);
	CHECK(rcp_nic_arm(p.b) == 0);
	CHECK(poll(&pf, 1, 0) == 0);
	CHECK(send_seq(p.a, p.pa, 1, 16, 0) == 0);
	CHECK(poll(&pf, 1, 0) == 1);
	CHECK(rcp_nic_arm(p.b) == RCP_EAGAIN);
	CHECK(drain(p.b, p.pb, 16, &last) == 1);
	CHECK(rcp_nic_arm(p.b) == 0); /* the event was read */
	CHECK(poll(&pf, 1, 0) == 0);
	CHECK(rcp_nic_recv_wait(p.b, fr, 4, 1000000) == 0);
	CHECK(send_seq(p.a, p.pa, 2, 16, 0) == 0);
	CHECK(rcp_nic_recv_wait(p.b, fr, 4, -1) == 1);
	rcp_nic_release(p.b, fr, 1);
	/* Ten arm/wake cycles. */
	for (int i = 0; i < 10; i++) {
		CHECK(rcp_nic_arm(p.b) == 0);
		CHECK(send_seq(p.a, p.pa, (uint64_t)(10 + i), 16, 0) == 0);
		CHECK(poll(&pf, 1, 0) == 1);
		CHECK(drain(p.b, p.pb, 16, &last) == 1);
	}
	pair_close(&p);
}

/* A sender not in the peer table: PEER_NONE with a usable source blob;
 * send_to answers it without a peer (the handshake's cookie). */
static void t_unknown_source(void **state)
{
	struct pair p;
	struct rcp_nic_frame fr[4];
	uint8_t src[RCP_NIC_ADDR_MAX];
	size_t srclen;
	int idx, n;
	int64_t last = -1;

	(void)state;
	pair_open(&p, NULL, NULL);
	CHECK(rcp_nic_peer_remove(p.b, p.pb) == 0);
	CHECK(send_seq(p.a, p.pa, 7, 32, 0) == 0);
	n = rcp_nic_recv(p.b, fr, 4);
	CHECK(n == 1 && fr[0].peer == RCP_NIC_PEER_NONE);
	srclen = fr[0].srclen;
	memcpy(src, fr[0].src, srclen);
	rcp_nic_release(p.b, fr, 1);
	CHECK(rcpi_nic_has_send_to(p.b));
	CHECK(rcpi_nic_send_to(p.b, src, srclen, "cookie!!", 8) == 0);
	n = rcp_nic_recv(p.a, fr, 4);
	CHECK(n == 1 && fr[0].peer == p.pa && fr[0].len == 8 && !memcmp(fr[0].data, "cookie!!", 8));
	rcp_nic_release(p.a, fr, 1);
	CHECK(rcp_nic_peer_add(p.b, src, srclen, &idx) == 0);
	CHECK(send_seq(p.a, p.pa, 8, 32, 0) == 0);
	CHECK(drain(p.b, idx, 32, &last) == 1);
	/* Many sends to a peer removed and added again: its old AH retires
	 * once the queue is past it, and nothing leaks (pair_close). */
	for (int r = 0; r < 5; r++) {
		for (int i = 0; i < 100; i++)
			CHECK(send_seq(p.b, idx, (uint64_t)i, 32, RCP_NIC_MORE) == 0);
		CHECK(rcp_nic_peer_remove(p.b, idx) == 0);
		CHECK(rcp_nic_flush(p.b) == 0);
		CHECK(rcp_nic_peer_add(p.b, src, srclen, &idx) == 0);
	}
	pair_close(&p);
}

/* QPNs are per HCA: two senders with the same QPN are told apart by
 * their LIDs. */
static void t_same_qpn(void **state)
{
	struct mock_config c = {.ndev = 3};
	struct pair p;
	rcp_nic *x;
	uint8_t blob[RCP_NIC_ADDR_MAX];
	size_t len = sizeof blob;
	char s[RCP_NIC_ADDRSTR_MAX];
	int px, pxa;
	int64_t last = -1;

	(void)state;
	mock_install(&c);
	pair_open(&p, NULL, NULL);
	CHECK(rcp_nic_open("verbs:mock2:1", NULL, &x) == 0);
	CHECK(rcp_nic_addr_blob(x, blob, &len) == 0);
	CHECK(rcp_nic_peer_add(p.b, blob, len, &px) == 0);
	CHECK(px != p.pb);
	CHECK(rcp_nic_addr_str(p.b, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(x, s, &pxa) == 0);
	for (int i = 0; i < 10; i++) {
		CHECK(send_seq(p.a, p.pa, (uint64_t)(2 * i), 40, 0) == 0);
		CHECK(drain(p.b, p.pb, 40, &last) == 1);
		CHECK(send_seq(x, pxa, (uint64_t)(2 * i + 1), 40, 0) == 0);
		CHECK(drain(p.b, px, 40, &last) == 1);
	}
	rcp_nic_close(x);
	pair_close(&p);
}

/* RoCE: no LIDs, GIDs in the addresses, AHs with a GRH, the sender known
 * by the source address in the RoCE v2 (IPv4) header. */
static void t_roce(void **state)
{
	struct mock_config c = {.roce = 1, .active_mtu = IBV_MTU_1024};
	struct pair p;
	char s[RCP_NIC_ADDRSTR_MAX];
	int64_t last = -1;
	struct rcp_nic_info info;

	(void)state;
	mock_install(&c);
	pair_open(&p, NULL, NULL);
	CHECK(rcp_nic_addr_str(p.a, s, sizeof s) == 0);
	if (!strstr(s, "verbs:mock0:1:1@0x") || !strstr(s, "/::ffff:10.0.0.1"))
		fail_msg("address %s", s);
	CHECK(rcp_nic_query(p.a, &info) == 0 && info.mtu == 1024);
	/* No multicast on RoCE (no SA; an IGMP join is not built). */
	CHECK(!(info.caps & RCP_NIC_CAP_MCAST));
	CHECK(rcp_nic_peer_add_str(p.a, "verbs:mcast:ff12:401b::1", &p.pa) == RCP_EADDR);
	CHECK(send_seqs(&p, 0, 50, 1000) == 50);
	CHECK(drain(p.b, p.pb, 1000, &last) == 50);
	last = -1;
	for (int i = 0; i < 50; i++)
		CHECK(send_seq(p.b, p.pb, (uint64_t)i, 8, 0) == 0);
	CHECK(drain(p.a, p.pa, 8, &last) == 50);
	/* An InfiniBand address is not a RoCE peer. */
	CHECK(rcp_nic_peer_add_str(p.a, "verbs:x:1@0x100/5", &p.pa) == RCP_EADDR);
	pair_close(&p);
}

/* The faults wrapper over the backend: what arrives is what was sent,
 * less the wrapper's drops, plus its duplicates, bytes intact. */
static void t_faults_wrapper(void **state)
{
	char spec[128];
	struct rcp_nic_config fc = {.faults = spec};
	struct pair p;
	struct rcp_nic_stats ns = {0};
	struct rcp_nic_frame fr[32];
	long got = 0;
	int n;

	(void)state;
	snprintf(spec, sizeof spec, "drop=0.1,dup=0.1,reorder=0.1,seed=%llu",
	         (unsigned long long)g_seed);
	pair_open(&p, &fc, NULL);
	for (int r = 0; r < 40; r++) {
		CHECK(send_seqs(&p, (uint64_t)(r * 25), 25, 200) == 25);
		CHECK(rcp_nic_flush(p.a) == 0);
		while ((n = rcp_nic_recv(p.b, fr, 32)) > 0) {
			for (int i = 0; i < n; i++) {
				uint64_t seq;
				uint8_t want[200];
				CHECK(fr[i].len == 200 && fr[i].peer == p.pb);
				memcpy(&seq, fr[i].data, 8);
				test_fill(want, 200, seq);
				CHECK(!memcmp((const uint8_t *)fr[i].data + 8, want + 8, 192));
			}
			rcp_nic_release(p.b, fr, n);
			got += n;
		}
	}
	CHECK(rcp_nic_get_stats(p.a, &ns) == 0);
	CHECK(ns.f_dropped > 0 && ns.f_duplicated > 0);
	CHECK(got == 1000 - (long)ns.f_dropped + (long)ns.f_duplicated);
	pair_close(&p);
}

/* RCP channels over the backend: messages of every protocol path (eager,
 * multi-frame, rendezvous) both ways, with and without the faults
 * wrapper under them, bytes checked; the two endpoints are progressed in
 * turn in this process. */
static void rcp_exchange(const struct rcp_nic_config *nc)
{
	static const size_t sizes[] = {0, 8, 1000, 2048, 5000, 65536, 1 << 20};
	struct rcp_ep_config ec = {.nic = nc};
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	uint8_t *sb = malloc(1 << 20), *rb = malloc(1 << 20);

	CHECK(sb && rb);
	ep_pair_open(&ec, &a, &b, &ab, &ba);
	for (size_t k = 0; k < 2 * sizeof sizes / sizeof *sizes; k++) {
		size_t len = sizes[k / 2];
		int back = k & 1; /* b to a */
		rcp_req *sr = NULL, *rr = NULL;

		test_fill(sb, len, k);
		memset(rb, 0, len);
		CHECK(rcp_irecv(back ? a : b, back ? ab : ba, k, rb, len, &rr) == 0);
		CHECK(rcp_isend(back ? ba : ab, k, sb, len, &sr) == 0);
		drive_pair(a, b, sr, rr, len, 50000000);
		CHECK(test_check(rb, len, k) < 0);
	}
	ep_pair_close(a, b, ab, ba);
	free(sb);
	free(rb);
}

static void t_rcp_channels(void **state)
{
	char spec[128];
	struct rcp_nic_config fc = {.faults = spec};

	(void)state;
	rcp_exchange(NULL);
	CHECK(mock_stats()->cq_overflow == 0 && mock_stats()->sq_full == 0);
	snprintf(spec, sizeof spec, "drop=0.05,dup=0.02,reorder=0.05,corrupt=0.01,seed=%llu",
	         (unsigned long long)g_seed);
	rcp_exchange(&fc);
	CHECK(mock_stats()->cq_overflow == 0 && mock_stats()->sq_full == 0);
}

/* ---- a real device, when there is one -------------------------------------- */

static void t_device(void **state)
{
	char a[96];
	rcp_nic *x = NULL, *y = NULL;

	(void)state;
	if (!device_port(a, sizeof a, "t_device"))
		return;
	CHECK(rcp_nic_open(a, NULL, &x) == 0);
	CHECK(rcp_nic_open(a, NULL, &y) == 0);
	{
		struct pair p = {.a = x, .b = y};
		uint8_t blob[RCP_NIC_ADDR_MAX];
		size_t len = sizeof blob;
		char s[RCP_NIC_ADDRSTR_MAX];
		int64_t last = -1;
		long got = 0;
		CHECK(rcp_nic_addr_blob(y, blob, &len) == 0);
		CHECK(rcp_nic_peer_add(x, blob, len, &p.pa) == 0);
		CHECK(rcp_nic_addr_str(x, s, sizeof s) == 0);
		CHECK(rcp_nic_peer_add_str(y, s, &p.pb) == 0);
		for (int r = 0; r < 100; r++) {
			for (int i = 0; i < 20; i++)
				CHECK(send_seq(x, p.pa, (uint64_t)(r * 20 + i), 256, 0) == 0);
			for (int k = 0; k < 1000000 && got < (r + 1) * 20; k++)
				got += drain(y, p.pb, 256, &last);
		}
		CHECK(got == 2000);
	}
	rcp_nic_close(x);
	rcp_nic_close(y);
}

/* --pingpong N: N rounds of one 8-byte frame a -> b, received and
 * released, then one back, on the model; for perf/callgrind runs (the
 * instructions of a send + receive through the backend). */
static int pingpong(long n)
{
	struct pair p;
	struct rcp_nic_frame fr[4];
	uint64_t x = 0;
	struct iovec iov = {&x, 8};

	mock_install(NULL);
	pair_open(&p, NULL, NULL);
	for (long i = 0; i < n; i++) {
		if (rcp_nic_send(p.a, p.pa, &iov, 1, 0) || rcp_nic_recv(p.b, fr, 4) != 1)
			return 1;
		rcp_nic_release(p.b, fr, 1);
		if (rcp_nic_send(p.b, p.pb, &iov, 1, 0) || rcp_nic_recv(p.a, fr, 4) != 1)
			return 1;
		rcp_nic_release(p.a, fr, 1);
	}
	rcp_nic_close(p.a);
	rcp_nic_close(p.b);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_no_device, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_no_device_mock, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_addresses, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_sizes, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_burst_chained, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_send_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_overrun_repost, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_error_completions, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_lost, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_wait_fd, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_unknown_source, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_same_qpn, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_roce, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_faults_wrapper, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_rcp_channels, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_device, setup, teardown),
	};
	g_seed = test_seed(0x5eed23);
	setenv("RCP_FAULTS", "", 1); /* the faults wrapper only where a test asks */
	if (argc == 3 && !strcmp(argv[1], "--pingpong"))
		return pingpong(atol(argv[2]));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
