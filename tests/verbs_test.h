/*
 * tests/verbs_test.h — what the verbs tests (test_verbs, test_verbs_rma,
 * test_verbs_mcast) share: the seed printed by every failed check, a pair
 * of nics on the model's two HCAs, the backend's RMA counters, the
 * model's teardown.  Included once per test program (static definitions);
 * each includes tests/verbs_mock.h and testutil.h first.
 */
#ifndef RCP_TESTS_VERBS_TEST_H
#define RCP_TESTS_VERBS_TEST_H

#include <rcp/rcp.h>

static uint64_t g_seed;

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			fail_msg("%s:%d: %s (seed %#llx)", __FILE__, __LINE__, #c,                 \
			         (unsigned long long)g_seed);                                      \
	} while (0)

struct pair {
	rcp_nic *a, *b;
	int pa, pb; /* a's index for b, b's index for a */
};

static inline struct rcpi_vb_rma_stats rma_stats(rcp_nic *n)
{
	struct rcpi_vb_rma_stats s;
	CHECK(rcpi_vb_rma_counters(n, &s) == 0);
	return s;
}

/* Both receive, three turns each: the RC handshake's datagrams (REQ,
 * REP, the REQ sent again) are carried through. */
static inline void pair_recv_turns(struct pair *p)
{
	struct rcp_nic_frame fr[4];

	for (int i = 0; i < 3; i++) {
		CHECK(rcp_nic_recv(p->a, fr, 4) == 0);
		CHECK(rcp_nic_recv(p->b, fr, 4) == 0);
	}
}

static inline void pair_close(struct pair *p)
{
	rcp_nic_close(p->a);
	rcp_nic_close(p->b);
	CHECK(mock_live() == 0); /* every verbs object the backend made is gone */
}

/* Progresses endpoints A and B until send SR and receive RR are both done
 * (at most MAX_SPINS turns: a guard against hanging); each must succeed,
 * the receive with LEN bytes. */
static inline void drive_pair(rcp_ep *a, rcp_ep *b, rcp_req *sr, rcp_req *rr, size_t len,
                              long max_spins)
{
	struct rcp_status st;
	int sdone = 0, rdone = 0;
	long spins = 0;

	while (!(sdone && rdone)) {
		int rc;
		CHECK(++spins < max_spins);
		rcp_progress(a);
		rcp_progress(b);
		if (!sdone && (rc = rcp_test(sr, &st)) != RCP_EAGAIN) {
			CHECK(rc == 0);
			sdone = 1;
		}
		if (!rdone && (rc = rcp_test(rr, &st)) != RCP_EAGAIN) {
			CHECK(rc == 0 && st.len == len);
			rdone = 1;
		}
	}
}

static inline int teardown(void **state)
{
	(void)state;
	mock_uninstall();
	return 0;
}

#endif
