/*
 * tests/test_udp.c — the udp backend (nic/udp/): addressing, the peer
 * table, batching with RCP_NIC_MORE, GSO/GRO, truncation, error
 * attribution from ICMP, the wait fd, IPv6.
 *
 * All traffic stays on loopback and every endpoint binds port 0, so runs
 * in parallel never collide.  Nothing sleeps to synchronise: steps are
 * ordered by the frames themselves (acks) or by waiting on the fd with a
 * timeout that only matters when the test is failing.  Randomness comes
 * from RCP_TEST_SEED (or a fixed default) and failures print the seed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <rcp/nic.h>

#include "testutil.h"

#define TMO_NS (10ll * 1000000000)
#define WIN    32 /* frames per acknowledged window in stream tests */

static uint64_t g_seed;

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			fail_msg("%s:%d: %s (seed %#llx)", __FILE__, __LINE__, #c,                 \
			         (unsigned long long)g_seed);                                      \
	} while (0)

/* In a forked child: report and exit with CODE. */
#define CHILD_CHECK(c, code)                                                                       \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "child %s:%d: %s (seed %#llx)\n", __FILE__, __LINE__, #c,  \
			        (unsigned long long)g_seed);                                       \
			_exit(code);                                                               \
		}                                                                                  \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_gso(int on)
{
	setenv("RCP_UDP_GSO", on ? "1" : "0", 1);
}

static rcp_nic *xopen(const char *addr, const struct rcp_nic_config *cfg)
{
	rcp_nic *n = NULL;
	int rc = rcp_nic_open(addr, cfg, &n);
	if (rc)
		fail_msg("open %s: %s", addr, rcp_strerror(rc));
	assert_non_null(n);
	return n;
}

/* FROM adds TO's address (as a string); returns the index. */
static int xpeer(rcp_nic *from, rcp_nic *to)
{
	char s[RCP_NIC_ADDRSTR_MAX];
	int p = -1;
	assert_int_equal(rcp_nic_addr_str(to, s, sizeof s), 0);
	assert_int_equal(rcp_nic_peer_add_str(from, s, &p), 0);
	assert_true(p >= 0);
	return p;
}

static unsigned port_of(const rcp_nic *n)
{
	char s[RCP_NIC_ADDRSTR_MAX];
	assert_int_equal(rcp_nic_addr_str(n, s, sizeof s), 0);
	return (unsigned)atoi(strrchr(s, ':') + 1);
}

static struct rcp_nic_stats stats_of(const rcp_nic *n)
{
	struct rcp_nic_stats st;
	assert_int_equal(rcp_nic_get_stats(n, &st), 0);
	return st;
}

/* Receives up to MAX frames, waiting (spin, then sleep) up to 10 s for the
 * first.  Returns the count, RCP_ETIMEDOUT or another error. */
static int recv_wait(rcp_nic *n, struct rcp_nic_frame *f, int max)
{
	uint64_t end = now_ns() + TMO_NS;
	for (;;) {
		int k = rcp_nic_recv(n, f, max), rc;
		if (k)
			return k;
		if (now_ns() > end)
			return RCP_ETIMEDOUT;
		rc = rcp_nic_wait(n, TMO_NS, -1);
		if (rc && rc != RCP_ETIMEDOUT)
			return rc;
	}
}

static int send_buf(rcp_nic *n, int peer, const void *p, size_t len, unsigned flags)
{
	struct iovec iov = {(void *)p, len};
	return rcp_nic_send(n, peer, &iov, 1, flags);
}

/* Sends frame SEQ of LEN bytes (content from test_fill) from BUF. */
static int send_seq(rcp_nic *n, int peer, unsigned char *buf, size_t len, uint64_t seq,
                    unsigned flags)
{
	test_fill(buf, len, seq);
	return send_buf(n, peer, buf, len, flags);
}

/* Receives exactly one frame and checks it is SEQ of LEN bytes from PEER. */
static void expect_seq(rcp_nic *n, size_t len, uint64_t seq, int peer)
{
	struct rcp_nic_frame f;
	int k = recv_wait(n, &f, 1);
	if (k != 1)
		fail_msg("frame %llu: recv %d (%s)", (unsigned long long)seq, k,
		         k < 0 ? rcp_strerror(k) : "");
	CHECK(f.len == len);
	CHECK(test_check(f.data, f.len, seq) == -1);
	CHECK(f.peer == peer);
	rcp_nic_release(n, &f, 1);
}

/* ---- addresses --------------------------------------------------------- */

static void t_parse_errors(void **state)
{
	static const char *const bad_open[] = {
	    "udp:127.0.0.1",       /* no port separator */
	    "udp:127.0.0.1:65536", /* port out of range */
	    "udp:127.0.0.1:99999",
	    "udp:127.0.0.1:123456",
	    "udp:127.0.0.1:-1",
	    "udp:127.0.0.1:+1",
	    "udp:127.0.0.1:1x",
	    "udp:127.0.0.1:0x10",
	    "udp:127.0.0.1: 1",
	    "udp:127.0.0.1:1 ",
	    "udp:127.0.0.1:5:",
	    "udp::5", /* empty host */
	    "udp::",
	    "udp:::1:5", /* IPv6 without brackets */
	    "udp:[::1]",
	    "udp:[::1]5",
	    "udp:[::1:5",
	    "udp:[]:5",
	    "udp:[1.2.3.4]:5",
	    "udp:[::1%]:5",
	    "udp:[::g]:5",
	    "udp:[::1]:5:6",
	    "udp:[::1]:x",
	    "udp:256.0.0.1:5",
	    "udp:1.2.3.4.5:5",
	    "udp:1..2:5",
	    "udp:a..b:5",
	    "udp:-ab:5",
	    "udp:ab-:5",
	    "udp:a b:5",
	    "udp:a/b:5",
	    "udp: 127.0.0.1:5",
	    "udp:host.:5",
	    "udp:.host:5",
	    "udp:203.0.113.7:", /* well formed, but not an address of this host */
	};
	static const char *const bad_peer[] = {
	    "udp:",                              /* peers need host and port */
	    "udp:127.0.0.1:", "udp:127.0.0.1:0", /* port 0 is no destination */
	    "udp:0.0.0.0:5",                     /* wildcard is no destination */
	    "udp:[::1]:5",                       /* other family than the endpoint */
	    "shm:foo",        "udpx:127.0.0.1:5", "UDP:127.0.0.1:5", "udp:127.0.0.1:65536",
	    "udp:::1:5",      "udp:[::1]:5:6",    "udp:1.2.3.4.5:5",
	};
	char longhost[400];
	rcp_nic *n = (rcp_nic *)0x1, *e;
	unsigned char blob[RCP_NIC_ADDR_MAX], b2[RCP_NIC_ADDR_MAX];
	size_t blen = sizeof blob;
	int p;
	(void)state;

	for (size_t i = 0; i < sizeof bad_open / sizeof bad_open[0]; i++) {
		int rc = rcp_nic_open(bad_open[i], NULL, &n);
		if (rc != RCP_EADDR)
			fail_msg("open \"%s\": %s, want RCP_EADDR", bad_open[i], rcp_strerror(rc));
		assert_null(n);
	}
	memset(longhost, 'a', sizeof longhost);
	memcpy(longhost, "udp:", 4);
	strcpy(longhost + sizeof longhost - 3, ":5");
	assert_int_equal(rcp_nic_open(longhost, NULL, &n), RCP_EADDR);

	e = xopen("udp:", NULL);
	for (size_t i = 0; i < sizeof bad_peer / sizeof bad_peer[0]; i++) {
		int rc = rcp_nic_peer_add_str(e, bad_peer[i], &p);
		if (rc != RCP_EADDR)
			fail_msg("peer \"%s\": %s, want RCP_EADDR", bad_peer[i], rcp_strerror(rc));
	}
	assert_int_equal(rcp_nic_peer_add_str(e, longhost, &p), RCP_EADDR);

	/* Blobs: wrong lengths, family, tag, port 0, wildcard address. */
	assert_int_equal(rcp_nic_addr_blob(e, blob, &blen), 0);
	assert_int_equal(blen, 8);
	for (size_t l = 2; l < 30; l++)
		if (l != 8)
			assert_int_equal(rcp_nic_peer_add(e, blob, l, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	b2[1] = 5;
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	b2[0] = 1; /* shm's tag */
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	b2[2] = b2[3] = 0;
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	memset(b2 + 4, 0, 4);
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	/* An IPv6 blob on an IPv4 endpoint. */
	memset(b2, 0, sizeof b2);
	b2[0] = blob[0];
	b2[1] = 6;
	b2[2] = 0x30;
	b2[19] = 1;
	assert_int_equal(rcp_nic_peer_add(e, b2, 20, &p), RCP_EADDR);
	/* The blob itself is fine. */
	assert_int_equal(rcp_nic_peer_add(e, blob, blen, &p), 0);
	rcp_nic_close(e);
}

static void t_addresses(void **state)
{
	rcp_nic *a, *b, *c;
	struct rcp_nic_info info;
	struct rcp_nic_config cfg;
	char s[RCP_NIC_ADDRSTR_MAX], s2[RCP_NIC_ADDRSTR_MAX], want[64];
	unsigned char blob[RCP_NIC_ADDR_MAX];
	size_t blen = sizeof blob, small;
	unsigned port;
	uint16_t nport;
	int p1, p2;
	(void)state;

	/* "udp:" binds 127.0.0.1 on a free port and says which. */
	a = xopen("udp:", NULL);
	port = port_of(a);
	assert_true(port > 0 && port < 65536);
	assert_int_equal(rcp_nic_addr_str(a, s, sizeof s), 0);
	snprintf(want, sizeof want, "udp:127.0.0.1:%u", port);
	assert_string_equal(s, want);
	/* Exactly enough room, and one byte short. */
	assert_int_equal(rcp_nic_addr_str(a, s2, strlen(s) + 1), 0);
	assert_int_equal(rcp_nic_addr_str(a, s2, strlen(s)), RCP_ERANGE);
	/* Blob: tag, family, port (network order), address. */
	assert_int_equal(rcp_nic_addr_blob(a, blob, &blen), 0);
	assert_int_equal(blen, 8);
	assert_int_equal(blob[0], 2);
	assert_int_equal(blob[1], 4);
	memcpy(&nport, blob + 2, 2);
	assert_int_equal(ntohs(nport), port);
	assert_int_equal(blob[4], 127);
	assert_int_equal(blob[7], 1);
	small = 7;
	assert_int_equal(rcp_nic_addr_blob(a, blob, &small), RCP_ERANGE);

	/* The port is taken now. */
	snprintf(s2, sizeof s2, "udp:127.0.0.1:%u", port);
	assert_int_equal(rcp_nic_open(s2, NULL, &b), RCP_EADDRINUSE);
	assert_null(b);

	/* Other spellings of a local address; names resolve. */
	b = xopen("udp:127.0.0.1:", NULL);
	assert_true(port_of(b) != port);
	c = xopen("udp:localhost:0", NULL);
	assert_int_equal(rcp_nic_addr_str(c, s2, sizeof s2), 0);
	assert_int_equal(strncmp(s2, "udp:127.0.0.1:", 14), 0);
	/* String, blob and name forms of one address are one peer. */
	assert_int_equal(rcp_nic_peer_add_str(b, s, &p1), 0);
	assert_int_equal(rcp_nic_peer_add(b, blob, blen, &p2), 0);
	assert_int_equal(p1, p2);
	snprintf(s2, sizeof s2, "udp:localhost:%u", port);
	assert_int_equal(rcp_nic_peer_add_str(b, s2, &p2), 0);
	assert_int_equal(p1, p2);
	rcp_nic_close(c);

	/* Info: loopback defaults; caps say what UDP does and does not do. */
	assert_int_equal(rcp_nic_query(a, &info), 0);
	assert_string_equal(info.backend, "udp");
	if (!getenv("RCP_UDP_MTU"))
		assert_int_equal(info.mtu, 65000);
	assert_true(info.rx_frames >= 1 && info.rx_frames <= 4096);
	assert_true(info.caps & RCP_NIC_CAP_CHECKED);
	assert_true(info.caps & RCP_NIC_CAP_SAME_HOST);
	/* No SHARED_SEG even on loopback: a udp peer may be another user. */
	assert_false(info.caps & (RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_RMA |
	                          RCP_NIC_CAP_SHARED_SEG));
	rcp_nic_close(a);

	/* cfg->mtu lowers the MTU, never raises it; rx_frames follows. */
	memset(&cfg, 0, sizeof cfg);
	cfg.mtu = 1000;
	c = xopen("udp:", &cfg);
	{
		struct rcp_nic_info i2;
		assert_int_equal(rcp_nic_query(c, &i2), 0);
		assert_int_equal(i2.mtu, 1000);
		assert_true(i2.rx_frames > info.rx_frames);
	}
	rcp_nic_close(c);
	cfg.mtu = 1u << 30;
	c = xopen("udp:", &cfg);
	assert_int_equal(rcp_nic_query(c, &info), 0);
	assert_true(info.mtu <= 65507);
	rcp_nic_close(c);

	/* No RMA. */
	{
		rcp_nic_mr *mr;
		char area[64], key[8] = {0};
		assert_int_equal(rcp_nic_mr_reg(b, area, sizeof area, RCP_NIC_ACCESS_READ, &mr),
		                 RCP_ENOTSUP);
		assert_int_equal(rcp_nic_get(b, p1, area, 8, key, sizeof key, 0), RCP_ENOTSUP);
		assert_int_equal(rcp_nic_put(b, p1, area, 8, key, sizeof key, 0), RCP_ENOTSUP);
	}
	rcp_nic_close(b);
}

/* ---- peer table -------------------------------------------------------- */

static void t_peer_table(void **state)
{
	enum { MAXP = 4096 };
	static int idx[MAXP];
	rcp_nic *a = xopen("udp:", NULL);
	char s[64];
	int p, q;
	uint8_t seen[MAXP] = {0};
	(void)state;

	/* Fill the table: distinct addresses get distinct indexes. */
	for (int i = 0; i < MAXP; i++) {
		/* Spread over addresses and ports so the hash sees both. */
		snprintf(s, sizeof s, "udp:127.0.%d.%d:%d", i % 7, 1 + i % 13, 1 + i);
		assert_int_equal(rcp_nic_peer_add_str(a, s, &idx[i]), 0);
		assert_true(idx[i] >= 0 && idx[i] < MAXP);
		assert_false(seen[idx[i]]);
		seen[idx[i]] = 1;
	}
	/* Full: a new address waits, a known one still resolves. */
	assert_int_equal(rcp_nic_peer_add_str(a, "udp:127.0.0.1:9", &p), RCP_EAGAIN);
	snprintf(s, sizeof s, "udp:127.0.%d.%d:%d", 100 % 7, 1 + 100 % 13, 101);
	assert_int_equal(rcp_nic_peer_add_str(a, s, &p), 0);
	assert_int_equal(p, idx[100]);

	/* Remove every other peer; the rest must still be found (deletion
	 * keeps probe chains intact), removed indexes are invalid. */
	for (int i = 0; i < MAXP; i += 2)
		assert_int_equal(rcp_nic_peer_remove(a, idx[i]), 0);
	assert_int_equal(rcp_nic_peer_remove(a, idx[0]), RCP_EINVAL);
	assert_int_equal(send_buf(a, idx[0], "x", 1, 0), RCP_EINVAL);
	for (int i = 1; i < MAXP; i += 2) {
		snprintf(s, sizeof s, "udp:127.0.%d.%d:%d", i % 7, 1 + i % 13, 1 + i);
		assert_int_equal(rcp_nic_peer_add_str(a, s, &p), 0);
		assert_int_equal(p, idx[i]);
	}
	/* Freed indexes are reused. */
	memset(seen, 0, sizeof seen);
	for (int i = 0; i < MAXP; i += 2)
		seen[idx[i]] = 1;
	for (int i = 0; i < MAXP / 2; i++) {
		snprintf(s, sizeof s, "udp:127.1.%d.%d:%d", i % 5, 1 + i % 11, 1 + i);
		assert_int_equal(rcp_nic_peer_add_str(a, s, &p), 0);
		assert_true(seen[p]);
		seen[p] = 0;
	}
	assert_int_equal(rcp_nic_peer_add_str(a, "udp:127.0.0.1:9", &q), RCP_EAGAIN);
	assert_int_equal(rcp_nic_peer_remove(a, 99999), RCP_EINVAL);
	rcp_nic_close(a);
}

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

/* ---- IPv6 -------------------------------------------------------------- */

static void t_ipv6(void **state)
{
	rcp_nic *a = NULL, *b;
	unsigned char blob[RCP_NIC_ADDR_MAX], buf[300];
	size_t blen = sizeof blob;
	char s[RCP_NIC_ADDRSTR_MAX], want[64];
	struct rcp_nic_frame f;
	int rc, pb, pa;
	(void)state;

	rc = rcp_nic_open("udp:[::1]:", NULL, &a);
	if (rc == RCP_EADDR) {
		printf("SKIP: no IPv6 loopback (::1) on this host\n");
		skip();
	}
	assert_int_equal(rc, 0);
	b = xopen("udp:[::1]:0", NULL);
	assert_int_equal(rcp_nic_addr_str(a, s, sizeof s), 0);
	snprintf(want, sizeof want, "udp:[::1]:%u", port_of(a));
	assert_string_equal(s, want);
	assert_int_equal(rcp_nic_addr_blob(a, blob, &blen), 0);
	assert_int_equal(blen, 20);
	assert_int_equal(blob[1], 6);

	pb = xpeer(a, b);
	assert_int_equal(send_seq(a, pb, buf, 300, 1, 0), 0);
	assert_int_equal(recv_wait(b, &f, 1), 1);
	assert_int_equal(f.peer, RCP_NIC_PEER_NONE);
	assert_int_equal(f.srclen, 20);
	assert_memory_equal(f.src, blob, 20);
	assert_int_equal(test_check(f.data, 300, 1), -1);
	assert_int_equal(rcp_nic_peer_add(b, f.src, f.srclen, &pa), 0);
	rcp_nic_release(b, &f, 1);
	assert_int_equal(send_seq(b, pa, buf, 100, 2, 0), 0);
	expect_seq(a, 100, 2, pb);
	/* Batched, GSO where offered. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(
		    send_seq(a, pb, buf + i * 50, 50, (uint64_t)(10 + i), i < 4 ? RCP_NIC_MORE : 0),
		    0);
	for (int i = 0; i < 5; i++)
		expect_seq(b, 50, (uint64_t)(10 + i), pa);
	/* Families do not mix. */
	assert_int_equal(rcp_nic_peer_add_str(a, "udp:127.0.0.1:5", &rc), RCP_EADDR);
	{
		rcp_nic *v4 = xopen("udp:", NULL);
		unsigned char b4[RCP_NIC_ADDR_MAX];
		size_t l4 = sizeof b4;
		assert_int_equal(rcp_nic_addr_blob(v4, b4, &l4), 0);
		assert_int_equal(rcp_nic_peer_add(a, b4, l4, &rc), RCP_EADDR);
		rcp_nic_close(v4);
	}
	rcp_nic_close(a);
	rcp_nic_close(b);
}

static int gso_on = 1, gso_off = 0;

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_parse_errors),
	    cmocka_unit_test(t_addresses),
	    cmocka_unit_test(t_peer_table),
	    cmocka_unit_test(t_unknown_source),
	    cmocka_unit_test(t_sizes_and_gather),
	    cmocka_unit_test_prestate(t_batching, &gso_on),
	    cmocka_unit_test_prestate(t_batching, &gso_off),
	    cmocka_unit_test_prestate(t_gso_on_the_wire, &gso_on),
	    cmocka_unit_test_prestate(t_gso_on_the_wire, &gso_off),
	    cmocka_unit_test(t_gro_split),
	    cmocka_unit_test_prestate(t_oversize_dropped, &gso_on),
	    cmocka_unit_test_prestate(t_oversize_dropped, &gso_off),
	    cmocka_unit_test(t_closed_port),
	    cmocka_unit_test(t_wait_fd),
	    cmocka_unit_test(t_lane),
	    cmocka_unit_test_prestate(t_stream_two_processes, &gso_on),
	    cmocka_unit_test_prestate(t_stream_two_processes, &gso_off),
	    cmocka_unit_test(t_pingpong_sleeping),
	    cmocka_unit_test(t_ipv6),
	};
	g_seed = test_seed(0x5eedf00d);
	/* The tests set RCP_UDP_GSO themselves; start from the default. */
	unsetenv("RCP_UDP_GSO");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
