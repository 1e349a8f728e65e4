/*
 * tests/verbs_test.h — what the verbs tests (test_verbs, test_verbs_rma,
 * test_verbs_mcast) share: the seed printed by every failed check, a pair
 * of nics on the model's two HCAs, a pair of RCP endpoints on them, the
 * backend's RMA counters, the model's teardown.  Included once per test program (static definitions);
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

/* Both receive, three turns each: an RC handshake's datagrams (REQ,
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

/* RCP endpoints A on the model's HCA 0 and B on HCA 1, opened with EC
 * (may be NULL), channels AB and BA connected both ways. */
static inline void ep_pair_open(const struct rcp_ep_config *ec, rcp_ep **a, rcp_ep **b,
                                rcp_chan **ab, rcp_chan **ba)
{
	char an[RCP_NIC_ADDRSTR_MAX], bn[RCP_NIC_ADDRSTR_MAX];

	CHECK(rcp_ep_open("verbs:mock0:1", ec, a) == 0);
	CHECK(rcp_ep_open("verbs:mock1:1", ec, b) == 0);
	CHECK(rcp_ep_addr(*a, an, sizeof an) == 0);
	CHECK(rcp_ep_addr(*b, bn, sizeof bn) == 0);
	CHECK(rcp_connect(*a, bn, ab) == 0);
	CHECK(rcp_connect(*b, an, ba) == 0);
}

/* Closes what ep_pair_open opened; every verbs object must be gone. */
static inline void ep_pair_close(rcp_ep *a, rcp_ep *b, rcp_chan *ab, rcp_chan *ba)
{
	rcp_chan_close(ab);
	rcp_chan_close(ba);
	rcp_ep_close(b);
	rcp_ep_close(a);
	CHECK(mock_live() == 0);
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

/* The first real device's port 1 as "verbs:DEV:1" in A (the model
 * uninstalled first), or NULL with the SKIP line printed for test NAME:
 * no device, or its port 1 does not open (not ACTIVE). */
static inline const char *device_port(char *a, size_t n, const char *name)
{
	struct ibv_device **l;
	rcp_nic *x;
	int ndev = 0;

	mock_uninstall();
	l = ibv_get_device_list(&ndev);
	if (!l || !ndev) {
		if (l)
			ibv_free_device_list(l);
		printf("SKIP: no RDMA device (%s)\n", name);
		return NULL;
	}
	snprintf(a, n, "verbs:%.40s:1", ibv_get_device_name(l[0]));
	ibv_free_device_list(l);
	if (rcp_nic_open(a, NULL, &x) == RCP_ENODEV) {
		printf("SKIP: %s: port 1 not ACTIVE (%s)\n", a, name);
		return NULL;
	}
	rcp_nic_close(x);
	return a;
}

static inline int teardown(void **state)
{
	(void)state;
	mock_uninstall();
	return 0;
}

#endif
