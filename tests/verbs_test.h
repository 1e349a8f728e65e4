/*
 * tests/verbs_test.h — what the verbs tests (test_verbs, test_verbs_rma,
 * test_verbs_mcast) share: the seed printed by every failed check, a pair
 * of nics on the model's two HCAs, the backend's RMA counters, the
 * model's teardown.  Included once per test program (static definitions);
 * each includes tests/verbs_mock.h and testutil.h first.
 */
#ifndef RCP_TESTS_VERBS_TEST_H
#define RCP_TESTS_VERBS_TEST_H

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

static inline int teardown(void **state)
{
	(void)state;
	mock_uninstall();
	return 0;
}

#endif
