/*
 * tests/udp_test.h — what the tests of the udp backend (nic/udp/) share:
 * opening and pairing endpoints on loopback, sending, waiting and checking
 * frames, the seed.  Included once per test program (static definitions):
 * test_udp.c (addresses, the peer table, IPv6), test_udp_data.c (the
 * single-process data path: batching with RCP_NIC_MORE, GSO/GRO,
 * truncation), test_udp_net.c (errors from the network, the wait fd, the
 * lane, two processes).
 *
 * All traffic stays on loopback and every endpoint binds port 0, so runs
 * in parallel never collide.  Nothing sleeps to synchronise: steps are
 * ordered by the frames themselves (acks) or by waiting on the fd with a
 * timeout that only matters when the test is failing.  Randomness comes
 * from RCP_TEST_SEED (or a fixed default) and failures print the seed.
 */
#ifndef RCP_TESTS_UDP_TEST_H
#define RCP_TESTS_UDP_TEST_H

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

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void set_gso(int on)
{
	setenv("RCP_UDP_GSO", on ? "1" : "0", 1);
}

static inline rcp_nic *xopen(const char *addr, const struct rcp_nic_config *cfg)
{
	rcp_nic *n = NULL;
	int rc = rcp_nic_open(addr, cfg, &n);
	if (rc)
		fail_msg("open %s: %s", addr, rcp_strerror(rc));
	assert_non_null(n);
	return n;
}

/* FROM adds TO's address (as a string); returns the index. */
static inline int xpeer(rcp_nic *from, rcp_nic *to)
{
	char s[RCP_NIC_ADDRSTR_MAX];
	int p = -1;
	assert_int_equal(rcp_nic_addr_str(to, s, sizeof s), 0);
	assert_int_equal(rcp_nic_peer_add_str(from, s, &p), 0);
	assert_true(p >= 0);
	return p;
}

static inline unsigned port_of(const rcp_nic *n)
{
	char s[RCP_NIC_ADDRSTR_MAX];
	assert_int_equal(rcp_nic_addr_str(n, s, sizeof s), 0);
	return (unsigned)atoi(strrchr(s, ':') + 1);
}

static inline struct rcp_nic_stats stats_of(const rcp_nic *n)
{
	struct rcp_nic_stats st;
	assert_int_equal(rcp_nic_get_stats(n, &st), 0);
	return st;
}

/* Receives up to MAX frames, waiting (spin, then sleep) up to 10 s for the
 * first.  Returns the count, RCP_ETIMEDOUT or another error. */
static inline int recv_wait(rcp_nic *n, struct rcp_nic_frame *f, int max)
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

static inline int send_buf(rcp_nic *n, int peer, const void *p, size_t len, unsigned flags)
{
	struct iovec iov = {(void *)p, len};
	return rcp_nic_send(n, peer, &iov, 1, flags);
}

/* Sends frame SEQ of LEN bytes (content from test_fill) from BUF. */
static inline int send_seq(rcp_nic *n, int peer, unsigned char *buf, size_t len, uint64_t seq,
                           unsigned flags)
{
	test_fill(buf, len, seq);
	return send_buf(n, peer, buf, len, flags);
}

/* Receives exactly one frame and checks it is SEQ of LEN bytes from PEER. */
static inline void expect_seq(rcp_nic *n, size_t len, uint64_t seq, int peer)
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

#endif /* RCP_TESTS_UDP_TEST_H */
