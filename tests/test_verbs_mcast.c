/*
 * tests/test_verbs_mcast.c — the verbs backend's InfiniBand multicast
 * (nic/verbs/addr.c group peers, verbs.c group endpoints, mcjoin.c) and
 * rcp/mcastnet.c's reliable multicast over it, on the model of an HCA and
 * its subnet (tests/verbs_mock.c, verbs_mock_mc.c: an SA, attachments,
 * delivery to every member port).
 *
 * Counts, never time; the seed (RCP_TEST_SEED) is printed on failure.
 */
#include <rcp/mcastnet.h>
#include <rcp/nic.h>

#include "nic/nic_int.h"
#include "nic/verbs/verbs_int.h"
#include "tests/verbs_mock.h"
#include "testutil.h"
#include "tests/verbs_test.h"

#define MGID_A "ff12:401b:ffff::5243"
#define MGID_B "ff12:401b:ffff::1"

static int setup(void **state)
{
	struct mock_config c = {.ndev = 3};
	(void)state;
	mock_install(&c);
	return 0;
}

/* Frames waiting on N, each LEN bytes from the address blob SRC. */
static int drain(rcp_nic *n, const uint8_t *src, size_t srclen, uint32_t len)
{
	struct rcp_nic_frame fr[16];
	int got, total = 0;

	while ((got = rcp_nic_recv(n, fr, 16)) > 0) {
		for (int i = 0; i < got; i++) {
			CHECK(fr[i].len == len && fr[i].peer == RCP_NIC_PEER_NONE);
			CHECK(fr[i].srclen == srclen && !memcmp(fr[i].src, src, srclen));
		}
		rcp_nic_release(n, fr, got);
		total += got;
	}
	return total;
}

static int send_n(rcp_nic *n, int peer, int count, uint32_t len)
{
	static uint8_t buf[2048];
	struct iovec iov = {buf, len};

	for (int i = 0; i < count; i++)
		if (rcp_nic_send(n, peer, &iov, 1, 0))
			return -1;
	return 0;
}

/* One send reaches every endpoint attached to the group, on every member
 * port, the sender's own included, and no endpoint of another group.  The
 * SA counts a port once, so the unicast endpoint's leave (its group peer
 * removed) must not take the port out from under the group endpoint on
 * the same port: mcjoin.c counts. */
static void t_group(void **state)
{
	rcp_nic *u0, *u1, *g0, *g1, *g2, *bad;
	uint8_t b0[RCP_NIC_ADDR_MAX], b1[RCP_NIC_ADDR_MAX];
	size_t l0 = sizeof b0, l1 = sizeof b1;
	struct mock_stats *ms = mock_stats();
	struct rcp_nic_info info;
	int grp, again, grp1;

	(void)state;
	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &u0) == 0);
	CHECK(rcp_nic_open("verbs:mock1:1", NULL, &u1) == 0);
	CHECK(rcp_nic_open("verbs:mcast:" MGID_A "@mock0:1", NULL, &g0) == 0);
	CHECK(rcp_nic_open("verbs:mcast:" MGID_A "@mock1:1", NULL, &g1) == 0);
	CHECK(rcp_nic_open("verbs:mcast:" MGID_B "@mock2:1", NULL, &g2) == 0);
	CHECK(rcp_nic_query(u0, &info) == 0 && (info.caps & RCP_NIC_CAP_MCAST));
	CHECK(rcp_nic_addr_blob(u0, b0, &l0) == 0 && rcp_nic_addr_blob(u1, b1, &l1) == 0);
	CHECK(rcp_nic_peer_add_str(u0, "verbs:mcast:" MGID_A, &grp) == 0);
	CHECK(rcp_nic_peer_add_str(u0, "verbs:mcast:" MGID_A, &again) == 0 && again == grp);
	CHECK(ms->mc_members == 3); /* mock0 and mock1 in A, mock2 in B */
	/* Malformed groups. */
	CHECK(rcp_nic_peer_add_str(u0, "verbs:mcast:fe80::1", &again) == RCP_EADDR);
	CHECK(rcp_nic_peer_add_str(u0, "verbs:mcast:" MGID_A "@mock0:1", &again) == RCP_EADDR);
	CHECK(rcp_nic_open("verbs:mcast:ff12::1", NULL, &bad) == RCP_EADDR); /* no device */

	CHECK(send_n(u0, grp, 10, 1000) == 0);
	CHECK(ms->mc_sends == 10 && ms->mc_copies == 20);
	CHECK(drain(g0, b0, l0, 1000) == 10); /* the sender's own port: loopback */
	CHECK(drain(g1, b0, l0, 1000) == 10);
	CHECK(drain(g2, b0, l0, 1000) == 0);
	/* U0 leaves (its group peer removed): G0 is still a member. */
	CHECK(rcp_nic_peer_remove(u0, grp) == 0);
	CHECK(ms->mc_members == 3);
	CHECK(rcp_nic_peer_add_str(u1, "verbs:mcast:" MGID_A, &grp1) == 0);
	CHECK(send_n(u1, grp1, 5, 64) == 0);
	CHECK(drain(g0, b1, l1, 64) == 5);
	CHECK(drain(g1, b1, l1, 64) == 5);
	rcp_nic_close(g0);
	rcp_nic_close(g1);
	rcp_nic_close(g2);
	rcp_nic_close(u0);
	rcp_nic_close(u1);
	CHECK(ms->mc_members == 0); /* every join left */
	CHECK(mock_live() == 0);    /* every attachment detached */
}

/* rcp/mcastnet.c over verbs: a message of 300 KB to two members through
 * the group with 5% of the copies lost, repaired by unicast; every frame
 * went to the group once. */
static void t_mcastnet(void **state)
{
	enum { LEN = 300000 };
	struct rcp_mcn_config c = {.group = "verbs:mcast:" MGID_A};
	const char *names[2] = {"m1", "m2"};
	rcp_mcn *snd, *mem[2];
	struct rcp_mcn_stats ss = {0}, st = {0};
	uint8_t *buf = malloc(LEN);
	uint64_t id = 0;
	int status[2] = {1, 1}, rc = RCP_EAGAIN;
	long rounds = 0;

	(void)state;
	CHECK(buf);
	test_fill(buf, LEN, g_seed);
	c.self_id = "s";
	CHECK(rcp_mcn_open("verbs:mock0:1", &c, &snd) == 0);
	c.self_id = names[0];
	CHECK(rcp_mcn_open("verbs:mock1:1", &c, &mem[0]) == 0);
	c.self_id = names[1];
	CHECK(rcp_mcn_open("verbs:mock2:1", &c, &mem[1]) == 0);
	mock_seed(g_seed);
	mock_faults()->drop = 0.05;
	CHECK(rcp_mcn_send(snd, names, 2, buf, LEN, &id) == 0);
	while (rc == RCP_EAGAIN) {
		CHECK(++rounds < 20000000);
		rcp_mcn_progress(snd);
		rcp_mcn_progress(mem[0]);
		rcp_mcn_progress(mem[1]);
		rc = rcp_mcn_send_status(snd, status, 2);
	}
	mock_faults()->drop = 0;
	CHECK(rc == 0 && status[0] == 0 && status[1] == 0);
	for (int i = 0; i < 2; i++) {
		void *got = NULL;
		size_t len = 0;
		CHECK(rcp_mcn_claim(mem[i], id, &got, &len) == 0);
		CHECK(len == LEN && test_check(got, LEN, g_seed) < 0);
		free(got);
		CHECK(rcp_mcn_get_stats(mem[i], &st) == 0);
		CHECK(st.data_recv > 0); /* by the group, not only by repair */
	}
	CHECK(rcp_mcn_get_stats(snd, &ss) == 0);
	CHECK(mock_stats()->mc_sends == ss.data_sent + ss.polls_sent);
	CHECK(ss.repairs_sent > 0 && ss.repairs_sent < ss.data_sent);
	for (int i = 0; i < 2; i++)
		rcp_mcn_close(mem[i]);
	rcp_mcn_close(snd);
	CHECK(mock_stats()->mc_members == 0 && mock_live() == 0);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_group, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_mcastnet, setup, teardown),
	};
	g_seed = test_seed(0x5eed25);
	setenv("RCP_FAULTS", "", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
