/*
 * tests/test_verbs_mcast.c — the verbs backend's InfiniBand multicast
 * (nic/verbs/addr.c group peers, verbs.c group endpoints, mcjoin.c) and
 * rcp/mcastnet.c's reliable multicast over it, on the model of an HCA and
 * its subnet (tests/verbs_mock.c, verbs_mock_mc.c: an SA, attachments,
 * delivery to every member port): one send reaching N endpoints, nothing
 * for an endpoint without its own attachment, detach stopping delivery,
 * losses (the model's, or the faults wrapper's) repaired by unicast.
 *
 * Counts, never time; the seed (RCP_TEST_SEED) is printed on failure.
 */
#include <rcp/mcastnet.h>
#include <rcp/nic.h>

#include "nic/nic_int.h"
#include "nic/verbs/verbs_int.h"
#include "pvm-glue/mcgroup.h"
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

static int setup8(void **state) /* mock0..mock7: the model's most */
{
	struct mock_config c = {.ndev = 8};
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

/* Session 19.  N group endpoints in one process, one per port, and a
 * sender's unicast endpoint: each send is one datagram to the group and
 * one copy per attached QP, every endpoint gets each exactly once.  A
 * receiver without a join of its own gets nothing: a unicast endpoint on a
 * member port (its QP not attached) and a group endpoint of another group
 * on a member port.  Detach stops delivery: a second group endpoint on a
 * member port, closed (detached; the port stays a member through the
 * other), gets no more copies; a group endpoint alone on its port, closed,
 * also takes the port out (the SA's count). */
static void t_members(void **state)
{
	enum { N = 7, SENDS = 12, LEN = 300 };
	struct mock_stats *ms = mock_stats();
	rcp_nic *u, *g[N], *extra, *plain, *other;
	uint8_t bu[RCP_NIC_ADDR_MAX];
	size_t lu = sizeof bu;
	uint64_t sends, copies;
	char a[128];
	int grp;

	(void)state;
	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &u) == 0);
	CHECK(rcp_nic_addr_blob(u, bu, &lu) == 0);
	for (int i = 0; i < N; i++) {
		snprintf(a, sizeof a, "verbs:mcast:%s@mock%d:1", MGID_A, i + 1);
		CHECK(rcp_nic_open(a, NULL, &g[i]) == 0);
	}
	CHECK(rcp_nic_open("verbs:mcast:" MGID_A "@mock1:1", NULL, &extra) == 0);
	CHECK(rcp_nic_open("verbs:mock2:1", NULL, &plain) == 0);
	CHECK(rcp_nic_open("verbs:mcast:" MGID_B "@mock3:1", NULL, &other) == 0);
	CHECK(rcp_nic_peer_add_str(u, "verbs:mcast:" MGID_A, &grp) == 0);
	CHECK(ms->mc_members == N + 2); /* A: mock0 (U's join) to mock7; B: mock3 */

	sends = ms->mc_sends, copies = ms->mc_copies;
	CHECK(send_n(u, grp, SENDS, LEN) == 0);
	CHECK(ms->mc_sends - sends == SENDS);
	CHECK(ms->mc_copies - copies == SENDS * (N + 1)); /* G1..G7 and EXTRA */
	for (int i = 0; i < N; i++)
		CHECK(drain(g[i], bu, lu, LEN) == SENDS);
	CHECK(drain(extra, bu, lu, LEN) == SENDS);
	CHECK(drain(plain, bu, lu, LEN) == 0); /* a member port, no attachment */
	CHECK(drain(other, bu, lu, LEN) == 0); /* attached, to another group */

	/* Detach: EXTRA's QP leaves the group, mock1 stays a member (G1). */
	rcp_nic_close(extra);
	CHECK(ms->mc_members == N + 2);
	copies = ms->mc_copies;
	CHECK(send_n(u, grp, SENDS, LEN) == 0);
	CHECK(ms->mc_copies - copies == SENDS * N);
	for (int i = 0; i < N; i++)
		CHECK(drain(g[i], bu, lu, LEN) == SENDS);
	/* G7 alone on mock7: detached and the port out of the group. */
	rcp_nic_close(g[N - 1]);
	CHECK(ms->mc_members == N + 1);
	copies = ms->mc_copies;
	CHECK(send_n(u, grp, SENDS, LEN) == 0);
	CHECK(ms->mc_copies - copies == SENDS * (N - 1));
	for (int i = 0; i < N - 1; i++)
		CHECK(drain(g[i], bu, lu, LEN) == SENDS);
	CHECK(drain(plain, bu, lu, LEN) == 0 && drain(other, bu, lu, LEN) == 0);

	for (int i = 0; i < N - 1; i++)
		rcp_nic_close(g[i]);
	rcp_nic_close(plain);
	rcp_nic_close(other);
	rcp_nic_close(u);
	CHECK(ms->mc_members == 0 && mock_live() == 0);
}

/* Session 19.  rcp/mcastnet.c over verbs with the losses made by the
 * faults wrapper (nic/faults.c, on both of each member's endpoints: group
 * datagrams, acknowledgements and repairs), not by the model: a 200 KB
 * message to five members, each gets it whole, the gaps repaired by
 * unicast. */
static void t_repair_faults(void **state)
{
	enum { LEN = 200000, M = 5 };
	char spec[64], names[M][16], a[64];
	const char *np[M];
	struct rcp_nic_config nc = {.faults = spec};
	struct rcp_mcn_config c = {.group = "verbs:mcast:" MGID_A, .nic = &nc};
	struct rcp_mcn_stats ss = {0}, st = {0};
	rcp_mcn *snd, *mem[M];
	uint8_t *buf = malloc(LEN);
	uint64_t id = 0, data_recv = 0;
	int status[M], rc = RCP_EAGAIN;
	long rounds = 0;

	(void)state;
	CHECK(buf);
	test_fill(buf, LEN, g_seed);
	snprintf(spec, sizeof spec, "drop=0.08,seed=%llu", (unsigned long long)g_seed);
	c.self_id = "s";
	CHECK(rcp_mcn_open("verbs:mock0:1", &c, &snd) == 0);
	for (int i = 0; i < M; i++) {
		snprintf(names[i], sizeof names[i], "m%d", i);
		np[i] = names[i];
		c.self_id = names[i];
		snprintf(a, sizeof a, "verbs:mock%d:1", i + 1);
		CHECK(rcp_mcn_open(a, &c, &mem[i]) == 0);
	}
	CHECK(rcp_mcn_send(snd, np, M, buf, LEN, &id) == 0);
	while (rc == RCP_EAGAIN) {
		CHECK(++rounds < 20000000);
		rcp_mcn_progress(snd);
		for (int i = 0; i < M; i++)
			rcp_mcn_progress(mem[i]);
		rc = rcp_mcn_send_status(snd, status, M);
	}
	CHECK(rc == 0);
	for (int i = 0; i < M; i++) {
		void *got = NULL;
		size_t len = 0;
		CHECK(status[i] == 0);
		CHECK(rcp_mcn_claim(mem[i], id, &got, &len) == 0);
		CHECK(len == LEN && test_check(got, LEN, g_seed) < 0);
		free(got);
		CHECK(rcp_mcn_get_stats(mem[i], &st) == 0);
		data_recv += st.data_recv;
	}
	CHECK(rcp_mcn_get_stats(snd, &ss) == 0);
	CHECK(mock_stats()->dropped_wire == 0); /* every loss was the wrapper's */
	CHECK(ss.repairs_sent > 0 && ss.members_failed == 0);
	CHECK(data_recv == (uint64_t)M * ss.data_sent); /* each frame once per member */
	for (int i = 0; i < M; i++)
		rcp_mcn_close(mem[i]);
	rcp_mcn_close(snd);
	CHECK(mock_stats()->mc_members == 0 && mock_live() == 0);
	free(buf);
}

/* Session 19.  pvm_pmcast's path over verbs, re-enacted on the model as
 * pvm-glue/mcast.c runs it (the glue itself cannot run here: its state is
 * one task per process, and the model lives in one process).  Four
 * "tasks", each an RCP endpoint on its own HCA; each joins by the
 * capability (RCP_NIC_CAP_MCAST) the group mcgroup.h picks for its
 * endpoint's scheme (PVMRCP_MCAST_GROUP naming only a udp group here, so
 * the default InfiniBand one), beside the endpoint (pr_mcn_beside: the
 * same HCA port, another QP), under the faults wrapper's drops; task 0
 * multicasts 150 KB to the three others named by task id, then puts the
 * 16-byte stub {id, length} on each one's RCP channel (tag bit 61), and
 * each member swaps the stub for the data its layer holds. */
static void t_pvm_path(void **state)
{
	enum { T = 4, LEN = 150000 };
	const uint64_t tag = 7 | 1ull << 61; /* PR_MCNET */
	char spec[64], self[RCP_NIC_ADDRSTR_MAX], uaddr[RCP_NIC_ADDRSTR_MAX], group[128];
	char addr[T][RCP_NIC_ADDRSTR_MAX], names[T][16];
	const char *np[T - 1];
	struct rcp_nic_config nc = {.faults = spec};
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_mcn_config c = {.nic = &nc, .scope = "vm/0"};
	struct rcp_nic_info ni;
	rcp_ep *ep[T];
	rcp_mcn *m[T];
	rcp_chan *ch[T] = {0};
	uint8_t *buf = malloc(LEN), stub[16], rstub[T][16];
	rcp_req *sr[T], *rr[T];
	uint64_t id = 0;
	int status[T - 1], rc = RCP_EAGAIN;
	long rounds = 0;

	(void)state;
	CHECK(buf);
	test_fill(buf, LEN, g_seed);
	snprintf(spec, sizeof spec, "drop=0.05,seed=%llu", (unsigned long long)g_seed);
	/* The group of the endpoint's scheme: from the list, else the defaults. */
	CHECK(pr_mcn_group("udp:239.1.2.3:4000", "verbs:mock0:1@0x000001/1", group, sizeof group) ==
	      -1);
	CHECK(pr_mcn_group("udp:239.1.2.3:4000,verbs:mcast:ff12::7", "verbs:mock0:1@0x000001/1",
	                   group, sizeof group) == 0 &&
	      !strcmp(group, "verbs:mcast:ff12::7"));
	CHECK(pr_mcn_group(PR_MCN_GROUPS, "udp:10.0.0.1:5000", group, sizeof group) == 0 &&
	      !strcmp(group, "udp:239.255.82.67:47067"));
	CHECK(pr_mcn_beside("udp:10.0.0.1:5000", uaddr, sizeof uaddr) == 0 &&
	      !strcmp(uaddr, "udp:10.0.0.1:"));
	for (int i = 0; i < T; i++) {
		char a[32];
		snprintf(a, sizeof a, "verbs:mock%d:1", i);
		CHECK(rcp_ep_open(a, &ec, &ep[i]) == 0);
		CHECK(rcp_ep_addr(ep[i], addr[i], sizeof addr[i]) == 0);
		CHECK(rcp_nic_query(rcp_ep_nic(ep[i]), &ni) == 0 && (ni.caps & RCP_NIC_CAP_MCAST));
		CHECK(rcp_ep_addr(ep[i], self, sizeof self) == 0);
		CHECK(pr_mcn_beside(self, uaddr, sizeof uaddr) == 0 && !strcmp(uaddr, a));
		if (pr_mcn_group("udp:239.1.2.3:4000", self, group, sizeof group))
			CHECK(pr_mcn_group(PR_MCN_GROUPS, self, group, sizeof group) == 0);
		CHECK(!strcmp(group, "verbs:mcast:ff12:5243::7076:6d63"));
		snprintf(names[i], sizeof names[i], "t%x", 0x40001 + i);
		c.group = group;
		c.self_id = names[i];
		CHECK(rcp_mcn_open(uaddr, &c, &m[i]) == 0);
	}
	for (int i = 1; i < T; i++) {
		np[i - 1] = names[i];
		CHECK(rcp_connect(ep[0], addr[i], &ch[i]) == 0);
	}
	CHECK(rcp_mcn_send(m[0], np, T - 1, buf, LEN, &id) == 0);
	while (rc == RCP_EAGAIN) {
		CHECK(++rounds < 20000000);
		for (int i = 0; i < T; i++) {
			rcp_mcn_progress(m[i]);
			rcp_progress(ep[i]);
		}
		rc = rcp_mcn_send_status(m[0], status, T - 1);
	}
	CHECK(rc == 0);
	for (int k = 0; k < 8; k++)
		stub[k] = (uint8_t)(id >> (8 * k)),
		stub[8 + k] = (uint8_t)((uint64_t)LEN >> (8 * k));
	for (int i = 1; i < T; i++) {
		CHECK(status[i - 1] == 0);
		CHECK(rcp_irecv(ep[i], NULL, tag, rstub[i], 16, &rr[i]) == 0);
		CHECK(rcp_isend(ch[i], tag, stub, 16, &sr[i]) == 0);
		drive_pair(ep[0], ep[i], sr[i], rr[i], 16, 50000000);
	}
	for (int i = 1; i < T; i++) {
		uint64_t sid = 0, bytes = 0;
		void *got = NULL;
		size_t len = 0;
		for (int k = 7; k >= 0; k--)
			sid = sid << 8 | rstub[i][k], bytes = bytes << 8 | rstub[i][8 + k];
		CHECK(rcp_mcn_claim(m[i], sid, &got, &len) == 0);
		CHECK(len == bytes && len == LEN && test_check(got, LEN, g_seed) < 0);
		free(got);
	}
	for (int i = 1; i < T; i++)
		rcp_chan_close(ch[i]);
	for (int i = 0; i < T; i++) {
		rcp_mcn_close(m[i]);
		rcp_ep_close(ep[i]);
	}
	CHECK(mock_stats()->mc_members == 0 && mock_live() == 0);
	free(buf);
}

/* Session 21: one multicast group per PVM group.  Each task derives the
 * group of a PVM group from its name and the VM (pvm-glue/mcgroup.h,
 * pr_mcn_pvm_group): the same name gives the same MGID everywhere,
 * another name or another VM another one.  Tasks 1 and 2 join "workers",
 * task 3 "io", task 0 "workers" to send; 150 KB to tasks 1 and 2 reaches
 * both whole and not one datagram reaches task 3's port (the model's
 * memberships: 4; task 3's layer took nothing, not even to drop it).
 * Joined on first use, left on last: a second layer of "workers" in
 * task 1 (same port) adds no SA membership, closing it keeps the port in
 * the group, closing task 1's last one takes the port out. */
static void t_pvm_groups(void **state)
{
	enum { T = 4, LEN = 150000 };
	char ga[128], gb[128], gc[128], gd[128], names[T][16];
	const char *np[2];
	struct rcp_mcn_config c = {.scope = "vm/0"};
	struct rcp_mcn_stats st = {0};
	struct mock_stats *ms = mock_stats();
	rcp_mcn *m[T], *again;
	uint8_t *buf = malloc(LEN);
	int status[2], rc = RCP_EAGAIN;
	uint64_t id = 0;
	long rounds = 0;

	(void)state;
	CHECK(buf);
	test_fill(buf, LEN, g_seed);
	CHECK(pr_mcn_pvm_group("workers", "vm/0", ga, sizeof ga) == 0);
	CHECK(pr_mcn_pvm_group("io", "vm/0", gb, sizeof gb) == 0);
	CHECK(pr_mcn_pvm_group("workers", "vm/1", gc, sizeof gc) == 0);
	CHECK(pr_mcn_pvm_group("workers", "vm/0", gd, sizeof gd) == 0);
	CHECK(!strcmp(ga, gd) && strcmp(ga, gb) && strcmp(ga, gc));
	CHECK(!strncmp(ga, "verbs:mcast:ff12:5243:7067:", 27));
	CHECK(pr_mcn_pvm_group("workers", "vm/0", gd, 20) == -1);
	for (int i = 0; i < T; i++) {
		char a[32];
		snprintf(a, sizeof a, "verbs:mock%d:1", i);
		snprintf(names[i], sizeof names[i], "t%x", 0x40001 + i);
		c.group = i == 3 ? gb : ga;
		c.self_id = names[i];
		CHECK(rcp_mcn_open(a, &c, &m[i]) == 0);
	}
	CHECK(ms->mc_members == T); /* ports 0-2 in "workers", port 3 in "io" */
	np[0] = names[1];
	np[1] = names[2];
	CHECK(rcp_mcn_send(m[0], np, 2, buf, LEN, &id) == 0);
	while (rc == RCP_EAGAIN) {
		CHECK(++rounds < 20000000);
		for (int i = 0; i < T; i++)
			rcp_mcn_progress(m[i]);
		rc = rcp_mcn_send_status(m[0], status, 2);
	}
	CHECK(rc == 0 && status[0] == 0 && status[1] == 0);
	for (int i = 1; i < 3; i++) {
		void *got = NULL;
		size_t len = 0;
		CHECK(rcp_mcn_claim(m[i], id, &got, &len) == 0);
		CHECK(len == LEN && test_check(got, LEN, g_seed) < 0);
		free(got);
	}
	CHECK(rcp_mcn_get_stats(m[3], &st) == 0);
	CHECK(st.data_recv == 0 && st.foreign_recv == 0 && st.dup_recv == 0 && st.bad_recv == 0);
	CHECK(ms->mc_unrouted == 0);
	/* Join on first use, leave on last (nic/verbs/mcjoin.c). */
	c.group = ga;
	c.self_id = names[1];
	CHECK(rcp_mcn_open("verbs:mock1:1", &c, &again) == 0);
	CHECK(ms->mc_members == T);
	rcp_mcn_close(again);
	CHECK(ms->mc_members == T);
	rcp_mcn_close(m[1]);
	CHECK(ms->mc_members == T - 1);
	for (int i = 0; i < T; i++)
		if (i != 1)
			rcp_mcn_close(m[i]);
	CHECK(ms->mc_members == 0 && mock_live() == 0);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_group, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_mcastnet, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_members, setup8, teardown),
	    cmocka_unit_test_setup_teardown(t_repair_faults, setup8, teardown),
	    cmocka_unit_test_setup_teardown(t_pvm_path, setup8, teardown),
	    cmocka_unit_test_setup_teardown(t_pvm_groups, setup8, teardown),
	};
	g_seed = test_seed(0x5eed25);
	setenv("RCP_FAULTS", "", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
