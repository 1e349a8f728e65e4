/*
 * tests/test_auth.c — the job key (nic/auth.c): frames carry a MAC and
 * frames without the right one never reach the caller.
 *
 * Two udp endpoints in one process on loopback.  A receive waits with
 * rcp_nic_recv_wait() for a frame that was sent before, so the waits are
 * bounded by the kernel's loopback delivery, never by a sleep.  What is
 * counted: frames delivered, bytes compared, a_rejected, f_corrupted.
 */
#include <rcp/nic.h>
#include <rcp/rcp.h>

#include "testutil.h"

#define KEY  "test-key-0123456789abcdef0123456789"
#define KEY2 "test-key-fedcba9876543210fedcba9876"

static rcp_nic *open_udp(const char *key, const char *faults)
{
	struct rcp_nic_config cfg = {.key = key, .faults = faults ? faults : ""};
	rcp_nic *nic = NULL;
	int rc = rcp_nic_open("udp:", &cfg, &nic);
	if (rc == RCP_ENOTSUP)
		test_skip_all("built without libsodium: no job key");
	if (rc)
		fail_msg("open udp: %s", rcp_strerror(rc));
	return nic;
}

static int peer_of(rcp_nic *from, rcp_nic *to)
{
	char addr[128];
	int peer = -1;
	assert_int_equal(rcp_nic_addr_str(to, addr, sizeof addr), 0);
	assert_int_equal(rcp_nic_peer_add_str(from, addr, &peer), 0);
	return peer;
}

static void send_one(rcp_nic *nic, int peer, const void *p, size_t len, unsigned flags)
{
	struct iovec iov = {(void *)p, len};
	int rc;
	while ((rc = rcp_nic_send(nic, peer, &iov, 1, flags)) == RCP_EAGAIN)
		(void)rcp_nic_flush(nic);
	assert_int_equal(rc, 0);
}

/* Receives until WANT frames came or the line stays silent for 200 ms;
 * checks each against test_fill(seq = first byte index) and returns how
 * many arrived intact.  *BAD counts delivered frames with wrong bytes. */
static int drain(rcp_nic *nic, int want, size_t len, int *bad)
{
	struct rcp_nic_frame fr[32];
	int got = 0;
	*bad = 0;
	while (got < want) {
		int n = rcp_nic_recv_wait(nic, fr, 32, 200000000);
		assert_true(n >= 0);
		if (!n)
			break;
		for (int i = 0; i < n; i++) {
			uint64_t seq;
			if (fr[i].len != len) {
				(*bad)++;
				continue;
			}
			memcpy(&seq, fr[i].data, sizeof seq);
			if (test_check((const unsigned char *)fr[i].data + 8, len - 8, seq) >= 0)
				(*bad)++;
			else
				got++;
		}
		rcp_nic_release(nic, fr, n);
	}
	return got;
}

static void frame(unsigned char *buf, size_t len, uint64_t seq)
{
	memcpy(buf, &seq, 8);
	test_fill(buf + 8, len - 8, seq);
}

static uint64_t rejected(rcp_nic *nic)
{
	struct rcp_nic_stats st;
	assert_int_equal(rcp_nic_get_stats(nic, &st), 0);
	return st.a_rejected;
}

/* Same key: frames arrive whole, trailer cut off, nothing rejected; the
 * MTU shrinks by the trailer and the path counts as checked. */
static void t_same_key(void **state)
{
	(void)state;
	rcp_nic *a = open_udp(KEY, NULL), *b = open_udp(KEY, NULL), *plain = open_udp("", NULL);
	struct rcp_nic_info ia, ip;
	unsigned char buf[1200];
	int pb = peer_of(a, b), bad;

	assert_int_equal(rcp_nic_query(a, &ia), 0);
	assert_int_equal(rcp_nic_query(plain, &ip), 0);
	assert_int_equal(ia.mtu + 32, ip.mtu);
	assert_true(ia.caps & RCP_NIC_CAP_CHECKED);
	assert_non_null(strstr(ia.backend, "auth+"));
	for (uint64_t i = 0; i < 100; i++) {
		frame(buf, sizeof buf, i);
		send_one(a, pb, buf, sizeof buf, 0);
	}
	assert_int_equal(drain(b, 100, sizeof buf, &bad), 100);
	assert_int_equal(bad, 0);
	assert_int_equal(rejected(b), 0);
	/* One byte over the reduced mtu is refused. */
	{
		static unsigned char big[70000];
		struct iovec iov = {big, (size_t)ia.mtu + 1};
		assert_int_equal(rcp_nic_send(a, pb, &iov, 1, 0), RCP_EMSGSIZE);
	}
	rcp_nic_close(a);
	rcp_nic_close(b);
	rcp_nic_close(plain);
}

/* Another job's key, and no key at all: every frame refused and counted,
 * none delivered. */
static void t_wrong_or_no_key(void **state)
{
	(void)state;
	rcp_nic *b = open_udp(KEY, NULL), *other = open_udp(KEY2, NULL),
	        *plain = open_udp("", NULL);
	unsigned char buf[300];
	int bad;
	int p1 = peer_of(other, b), p2 = peer_of(plain, b);

	for (uint64_t i = 0; i < 50; i++) {
		frame(buf, sizeof buf, i);
		send_one(other, p1, buf, sizeof buf, 0);
		send_one(plain, p2, buf, sizeof buf, 0);
	}
	/* Short frames too: shorter than the trailer itself. */
	send_one(plain, p2, buf, 7, 0);
	assert_int_equal(drain(b, 1, sizeof buf, &bad), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(rejected(b), 101);
	rcp_nic_close(b);
	rcp_nic_close(other);
	rcp_nic_close(plain);
}

/* The fault injector sits under the MAC (it is the link): every frame it
 * corrupts must be refused, none delivered with damage. */
static void t_corrupt_refused(void **state)
{
	(void)state;
	uint64_t seed = test_seed(11);
	char spec[64];
	snprintf(spec, sizeof spec, "corrupt=0.3,seed=%llu", (unsigned long long)seed);
	rcp_nic *a = open_udp(KEY, spec), *b = open_udp(KEY, NULL);
	struct rcp_nic_stats sa;
	unsigned char buf[512];
	int pb = peer_of(a, b), bad, got;

	for (uint64_t i = 0; i < 400; i++) {
		frame(buf, sizeof buf, i);
		send_one(a, pb, buf, sizeof buf, 0);
	}
	assert_int_equal(rcp_nic_get_stats(a, &sa), 0);
	got = drain(b, 400, sizeof buf, &bad);
	if (bad || rejected(b) != sa.f_corrupted || (uint64_t)got != 400 - sa.f_corrupted)
		fail_msg(
		    "seed %llu: %d intact, %d damaged delivered, %llu rejected, %llu corrupted",
		    (unsigned long long)seed, got, bad, (unsigned long long)rejected(b),
		    (unsigned long long)sa.f_corrupted);
	assert_true(sa.f_corrupted > 50);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* A keyless receiver sees the raw frames: each carries a 32-byte trailer
 * and no two frames share a nonce (Poly1305 keys are one-time), across a
 * batch that wraps the trailer ring. */
static void t_nonces_unique(void **state)
{
	(void)state;
	rcp_nic *a = open_udp(KEY, NULL), *raw = open_udp("", NULL);
	enum { N = 600 };
	static unsigned char nonces[N][16], buf[N][64];
	struct rcp_nic_frame fr[32];
	int pr = peer_of(a, raw), got = 0;

	for (uint64_t i = 0; i < N; i++) {
		frame(buf[i], sizeof buf[i], i);
		send_one(a, pr, buf[i], sizeof buf[i], (i % 100) != 99 ? RCP_NIC_MORE : 0);
	}
	assert_int_equal(rcp_nic_flush(a), 0);
	while (got < N) {
		int n = rcp_nic_recv_wait(raw, fr, 32, 200000000);
		assert_true(n > 0);
		for (int i = 0; i < n; i++) {
			assert_int_equal(fr[i].len, sizeof buf[0] + 32);
			memcpy(nonces[got++], (const unsigned char *)fr[i].data + sizeof buf[0],
			       16);
		}
		rcp_nic_release(raw, fr, n);
	}
	for (int i = 0; i < N; i++)
		for (int j = 0; j < i; j++)
			if (!memcmp(nonces[i], nonces[j], 16))
				fail_msg("frames %d and %d share a nonce", j, i);
	rcp_nic_close(a);
	rcp_nic_close(raw);
}

/* Batched sends (RCP_NIC_MORE) past the trailer ring's size still carry
 * their own trailers: every frame verifies at the receiver. */
static void t_batch_wraps_ring(void **state)
{
	(void)state;
	rcp_nic *a = open_udp(KEY, NULL), *b = open_udp(KEY, NULL);
	/* One buffer per frame: the backend may read them only at flush. */
	static unsigned char buf[300][200];
	int pb = peer_of(a, b), bad, got = 0;

	/* 3 batches of 300 (ring: 256), each drained before the next, so
	 * the socket buffer never overflows. */
	for (int round = 0; round < 3; round++) {
		for (uint64_t i = 0; i < 300; i++) {
			frame(buf[i], sizeof buf[i], round * 1000 + i);
			send_one(a, pb, buf[i], sizeof buf[i], RCP_NIC_MORE);
		}
		assert_int_equal(rcp_nic_flush(a), 0);
		got += drain(b, 300, sizeof buf[0], &bad);
		assert_int_equal(bad, 0);
	}
	assert_int_equal(got, 900);
	assert_int_equal(rejected(b), 0);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* Whole channels: two endpoints with the key exchange verified messages;
 * an endpoint of another job (other key) cannot reach them. */
static void t_channels(void **state)
{
	(void)state;
	struct rcp_nic_config nk = {.key = KEY, .faults = ""}, nx = {.key = KEY2, .faults = ""};
	struct rcp_ep_config ck = {.flags = RCP_EP_ACCEPT, .nic = &nk}, cx = {.nic = &nx};
	rcp_ep *srv, *cli, *intruder;
	rcp_chan *ch, *chx;
	char addr[128];
	unsigned char out[3000], in[3000];
	rcp_req *rs, *rr, *rx;
	struct rcp_status st;

	assert_int_equal(rcp_ep_open("udp:", &ck, &srv), 0);
	ck.flags = 0;
	assert_int_equal(rcp_ep_open("udp:", &ck, &cli), 0);
	assert_int_equal(rcp_ep_open("udp:", &cx, &intruder), 0);
	assert_int_equal(rcp_ep_addr(srv, addr, sizeof addr), 0);
	assert_int_equal(rcp_connect(cli, addr, &ch), 0);
	assert_int_equal(rcp_connect(intruder, addr, &chx), 0);
	test_fill(out, sizeof out, 5);
	assert_int_equal(rcp_isend(ch, 7, out, sizeof out, &rs), 0);
	assert_int_equal(rcp_isend(chx, 7, out, 100, &rx), 0);
	assert_int_equal(rcp_irecv(srv, NULL, 7, in, sizeof in, &rr), 0);
	assert_int_equal(rcp_wait(rr, &st, 5000000000ll), 0);
	assert_int_equal(st.error, 0);
	assert_int_equal(st.len, sizeof in);
	assert_int_equal(test_check(in, sizeof in, 5), -1);
	assert_int_equal(rcp_wait(rs, &st, 5000000000ll), 0);
	/* Nothing of the intruder's got in: a second receive finds nothing
	 * while the intruder keeps resending. */
	{
		rcp_req *r2;
		int done = 0;
		assert_int_equal(rcp_irecv(srv, NULL, 7, in, sizeof in, &r2), 0);
		for (int i = 0; i < 20000 && !done; i++) {
			(void)rcp_progress(intruder);
			done = rcp_test(r2, &st) == 0;
			(void)rcp_progress(srv);
		}
		assert_int_equal(done, 0);
		rcp_ep_close(intruder);
		assert_int_equal(rcp_cancel(r2), 0);
		assert_int_equal(rcp_wait(r2, &st, 1000000000ll), RCP_ECANCELED);
	}
	rcp_ep_close(cli);
	rcp_ep_close(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_same_key),         cmocka_unit_test(t_wrong_or_no_key),
	    cmocka_unit_test(t_corrupt_refused),  cmocka_unit_test(t_nonces_unique),
	    cmocka_unit_test(t_batch_wraps_ring), cmocka_unit_test(t_channels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
