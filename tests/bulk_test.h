/*
 * tests/bulk_test.h — what the tests of bulk/ share: the transports each
 * runs over (shm one-sided, shm emulated, udp, udp with loss), endpoints
 * with a bulk context, scattered buffers, and a pair of endpoints in one
 * process progressed in turn.  Included once per test program (static
 * definitions): test_bulk.c (the offset map, serialisation, the owner's
 * checks), test_bulk_ops.c (completion, cancel, busy handles, the
 * registration cache), test_bulk_xfer.c (two processes).
 *
 * Unit: the logical offset map over scattered segments (zero-length ones
 * and every border included) against a brute-force map; serialisation round
 * trips and malformed input; the owner's checks (forged key, forged bounds,
 * forged permission, wrong permission, freed handle) on the shm one-sided
 * path, on shm with emulation forced (RCP_BULK_RMA=0) and on udp, with two
 * endpoints in one process progressed in turn; cancel, EBUSY and exactly
 * one completion per operation.
 *
 * Integration (fork): a child exposes scattered buffers, the parent pulls
 * and pushes them (whole, at random offsets, pipelined) and both sides
 * verify every byte; over shm, shm emulated, udp, and udp with 10% loss.
 * A child killed mid-transfer gives RCP_EPEER, not a hang.
 *
 * Seeds: RCP_TEST_SEED (printed on failure).  Pipes carry only addresses;
 * nothing waits on time.
 */
#ifndef RCP_TESTS_BULK_TEST_H
#define RCP_TESTS_BULK_TEST_H

#include <signal.h>
#include <sys/mman.h>
#include <time.h>

#include <rcp/bulk.h>
#include <rcp/rcp.h>

#include "testutil.h"

#define WAIT_NS (120ll * 1000000000)

static uint64_t seed;

struct setup {
	const char *name;
	const char *transport;
	int rma;            /* RCP_BULK_RMA */
	const char *faults; /* NULL: none */
};

static const struct setup s_shm = {"shm", "shm", 1, NULL};
static const struct setup s_shm_emu = {"shm-emulated", "shm", 0, NULL};
static const struct setup s_udp = {"udp", "udp", 1, NULL};
static const struct setup s_udp_faults = {"udp-10%-loss", "udp", 1, "drop=0.1,seed=23"};

static int ep_seq;

static inline int open_ep(const struct setup *su, int accept, rcp_ep **ep, rcp_bulk_ctx **ctx)
{
	char addr[64];
	struct rcp_nic_config nc = {0};
	struct rcp_ep_config ec = {0};
	int rc;

	if (!strcmp(su->transport, "shm"))
		snprintf(addr, sizeof addr, "shm:bt-%d-%d", (int)getpid(), ep_seq++);
	else
		snprintf(addr, sizeof addr, "udp:");
	nc.faults = su->faults ? su->faults : "";
	ec.nic = &nc;
	ec.crc = -1;
	ec.flags = accept ? RCP_EP_ACCEPT : 0;
	setenv("RCP_BULK_RMA", su->rma ? "1" : "0", 1);
	rc = rcp_ep_open(addr, &ec, ep);
	if (rc)
		return rc;
	rc = rcp_bulk_ctx_open(*ep, ctx);
	unsetenv("RCP_BULK_RMA");
	if (rc)
		rcp_ep_close(*ep);
	return rc;
}

static inline void note_seed(void)
{
	print_error("seed %#llx (RCP_TEST_SEED to repeat)\n", (unsigned long long)seed);
}

/* Random segmentation of LEN bytes of BASE into at most MAX segments,
 * zero-length ones included. */
static inline int scatter(uint64_t *r, char *base, size_t len, int max, void **ptrs, size_t *lens)
{
	int n = 0;
	size_t off = 0;
	while (off < len && n < max - 1) {
		size_t l = (size_t)(test_rand(r) % (len / 4 + 2));
		if (test_rand(r) % 5 == 0)
			l = 0;
		if (l > len - off)
			l = len - off;
		ptrs[n] = base + off;
		lens[n++] = l;
		off += l;
	}
	ptrs[n] = base + off;
	lens[n++] = len - off;
	return n;
}

/* ---- two endpoints in one process (the owner checks, the ops tests) ---- */

struct pair {
	rcp_ep *ea, *eb; /* a owns, b requests */
	rcp_bulk_ctx *a, *b;
	rcp_chan *ch; /* b -> a */
};

static inline void pair_open(const struct setup *su, struct pair *p)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	assert_int_equal(open_ep(su, 1, &p->ea, &p->a), 0);
	assert_int_equal(open_ep(su, 0, &p->eb, &p->b), 0);
	assert_int_equal(rcp_ep_addr(p->ea, addr, sizeof addr), 0);
	assert_int_equal(rcp_connect(p->eb, addr, &p->ch), 0);
}

static inline void pair_close(struct pair *p)
{
	rcp_bulk_ctx_close(p->b);
	rcp_bulk_ctx_close(p->a);
	setenv("RCP_LINGER_MS", "200", 1);
	rcp_ep_close(p->eb);
	rcp_ep_close(p->ea);
	unsetenv("RCP_LINGER_MS");
}

/* Completes OP, progressing OTHER too.  Returns its status. */
static inline int drive(rcp_bulk_op *op, rcp_bulk_ctx *other)
{
	uint64_t end = 0;
	for (unsigned i = 0;; i++) {
		int st = 1, rc = rcp_bulk_test(op, &st);
		if (rc == 0)
			return st;
		if (rc != RCP_EAGAIN)
			return rc;
		if (other)
			rcp_bulk_progress(other);
		if ((i & 1023) == 0) {
			struct timespec ts;
			uint64_t now;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
			if (!end)
				end = now + (uint64_t)WAIT_NS;
			else if (now > end)
				return RCP_ETIMEDOUT;
		}
	}
}

static inline int xfer(struct pair *p, int dir, rcp_bulk *rh, uint64_t roff, rcp_bulk *lh,
                       uint64_t loff, uint64_t len)
{
	rcp_bulk_op *op;
	int rc = rcp_bulk_transfer(p->b, p->ch, dir, rh, roff, lh, loff, len, NULL, NULL, &op);
	return rc ? rc : drive(op, p->a);
}

/* Serialises H of A into a remote handle of B, applying FORGE to the bytes. */
static inline rcp_bulk *to_remote(struct pair *p, rcp_bulk *h,
                                  void (*forge)(unsigned char *, size_t))
{
	unsigned char buf[4096];
	size_t len = sizeof buf;
	rcp_bulk *rh;
	assert_int_equal(rcp_bulk_serialize(h, buf, &len), 0);
	if (forge)
		forge(buf, len);
	assert_int_equal(rcp_bulk_deserialize(p->b, buf, len, &rh), 0);
	return rh;
}

/* Forgeries (layout in bulk/handle.c; shm rkeys end with their 64-bit key). */

/* Runs TESTS (N of them) as one group after what every bulk test program
 * checks first: both nic backends built (else SKIP), the seed,
 * BULK_TEST_FILTER (a cmocka filter), SIGPIPE ignored. */
static inline int bulk_test_main(const struct CMUnitTest *tests, size_t n)
{
	const char *const *b = rcp_nic_backends();
	int shm = 0, udp = 0;
	for (; *b; b++) {
		shm |= !strcmp(*b, "shm");
		udp |= !strcmp(*b, "udp");
	}
	if (!shm || !udp)
		test_skip_all("needs the shm and udp nic backends");
	seed = test_seed(0xb01c);
	if (getenv("BULK_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BULK_TEST_FILTER"));
	signal(SIGPIPE, SIG_IGN);
	return _cmocka_run_group_tests("bulk handles and transfers", tests, n, NULL, NULL);
}

#endif /* RCP_TESTS_BULK_TEST_H */
