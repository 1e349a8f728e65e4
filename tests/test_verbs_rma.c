/*
 * tests/test_verbs_rma.c — the verbs backend's RMA (nic/verbs/rc.c, mr.c)
 * on the model of an HCA (tests/verbs_mock.c, verbs_mock_rc.c).
 *
 * What runs here: RC queue pairs connected by the backend's handshake on
 * the UD QP, RDMA READ/WRITE through rcp_nic_get/put checked byte for
 * byte, the checks on keys from the wire (each refused before any work
 * request: the model counts none), the HCA's own refusal of a forged or
 * revoked key and the reconnection after it, the registration cache's
 * bounds and invalidation, and RCP channels whose rendezvous (RTS, get)
 * and READY (put) paths move their bytes by RDMA on the model, RPC calls
 * whose large arguments and results do the same, and bulk handles moved
 * one-sided.  Counts,
 * never time; the seed (RCP_TEST_SEED) is printed on failure.
 */
#include <rcp/nic.h>
#include <rcp/bulk.h>
#include <rcp/rcp.h>
#include <rcp/rpc.h>

#include <malloc.h>
#include <sys/mman.h>

#include "nic/nic_int.h"
#include "nic/verbs/verbs_int.h"
#include "tests/verbs_mock.h"
#include "testutil.h"
#include "tests/verbs_test.h"

#define rs rma_stats

/* Both receive until nothing moves: the handshake's datagrams. */
static void settle(struct pair *p)
{
	pair_recv_turns(p);
}

/* Makes both RC connections of P the way a program does: a first get each
 * way finds no QP, starts one (REQ) and is refused at once (RCP_ENOTSUP,
 * not_yet); the receives that follow carry the handshakes through. */
static void rc_up(struct pair *p)
{
	static uint8_t ra[64], rb[64], buf[64];
	uint8_t ka[RCP_NIC_RKEY_MAX], kb[RCP_NIC_RKEY_MAX];
	size_t la = sizeof ka, lb = sizeof kb;
	rcp_nic_mr *ma, *mb;

	CHECK(rcp_nic_mr_reg(p->a, ra, sizeof ra, RCP_NIC_ACCESS_READ, &ma) == 0);
	CHECK(rcp_nic_mr_reg(p->b, rb, sizeof rb, RCP_NIC_ACCESS_READ, &mb) == 0);
	CHECK(rcp_nic_mr_pack(ma, ka, &la) == 0 && rcp_nic_mr_pack(mb, kb, &lb) == 0);
	CHECK(rcp_nic_get(p->a, p->pa, buf, sizeof buf, kb, lb, 0) == RCP_ENOTSUP);
	CHECK(rcp_nic_get(p->b, p->pb, buf, sizeof buf, ka, la, 0) == RCP_ENOTSUP);
	settle(p);
	CHECK(rs(p->a).connects == 1 && rs(p->b).connects == 1);
	CHECK(rs(p->a).accepts == 1 && rs(p->b).accepts == 1);
	CHECK(rcp_nic_mr_dereg(ma) == 0 && rcp_nic_mr_dereg(mb) == 0);
}

static void pair_open(struct pair *p)
{
	char s[RCP_NIC_ADDRSTR_MAX];

	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &p->a) == 0);
	CHECK(rcp_nic_open("verbs:mock1:1", NULL, &p->b) == 0);
	CHECK(rcp_nic_addr_str(p->b, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(p->a, s, &p->pa) == 0);
	CHECK(rcp_nic_addr_str(p->a, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(p->b, s, &p->pb) == 0);
	settle(p);
	rc_up(p);
}

static int setup(void **state)
{
	(void)state;
	mock_install(NULL);
	return 0;
}

static int setup3(void **state)
{
	struct mock_config c = {.ndev = 3};
	(void)state;
	mock_install(&c);
	return 0;
}

/* The handshake, both orders (session 21: started by the first transfer,
 * not by adding the peer).  Both sides added first, then a's get: a's
 * REQ, b's REP, one connection (a's out, b's in: two RC QPs); then b's
 * get makes the other.  B receiving a's REQ before it adds A (as a server
 * does: the REQ comes with RCP's own handshake): the REQ is dropped,
 * counted, and kept; adding A answers it, and a connects without any
 * timer. */
static void t_connect(void **state)
{
	static uint8_t region[64], buf[64];
	uint8_t ka[RCP_NIC_RKEY_MAX], kb[RCP_NIC_RKEY_MAX];
	size_t la = sizeof ka, lb = sizeof kb;
	struct rcp_nic_frame fr[4];
	char s[RCP_NIC_ADDRSTR_MAX];
	rcp_nic_mr *ma, *mb;
	struct pair p;

	(void)state;
	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &p.a) == 0);
	CHECK(rcp_nic_open("verbs:mock1:1", NULL, &p.b) == 0);
	CHECK(rcp_nic_addr_str(p.b, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(p.a, s, &p.pa) == 0);
	CHECK(rcp_nic_addr_str(p.a, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(p.b, s, &p.pb) == 0);
	settle(&p);
	CHECK(mock_stats()->rc_qps == 0 && rs(p.a).ctl_sent == 0 && rs(p.b).ctl_sent == 0);
	CHECK(rcp_nic_mr_reg(p.a, region, sizeof region, RCP_NIC_ACCESS_READ, &ma) == 0);
	CHECK(rcp_nic_mr_reg(p.b, region, sizeof region, RCP_NIC_ACCESS_READ, &mb) == 0);
	CHECK(rcp_nic_mr_pack(ma, ka, &la) == 0 && rcp_nic_mr_pack(mb, kb, &lb) == 0);
	CHECK(rcp_nic_get(p.a, p.pa, buf, sizeof buf, kb, lb, 0) == RCP_ENOTSUP);
	CHECK(mock_stats()->rc_qps == 1 && rs(p.a).not_yet == 1);
	settle(&p);
	CHECK(mock_stats()->rc_qps == 2 && rs(p.a).rc_made == 1 && rs(p.b).rc_made == 1);
	CHECK(rs(p.a).connects == 1 && rs(p.b).connects == 0);
	CHECK(rs(p.a).accepts == 0 && rs(p.b).accepts == 1);
	CHECK(rs(p.a).ctl_sent == 1 && rs(p.b).ctl_sent == 1);
	CHECK(rcp_nic_get(p.a, p.pa, buf, sizeof buf, kb, lb, 0) == 0);
	CHECK(rcp_nic_get(p.b, p.pb, buf, sizeof buf, ka, la, 0) == RCP_ENOTSUP);
	settle(&p);
	CHECK(mock_stats()->rc_qps == 4);
	CHECK(rs(p.a).connects == 1 && rs(p.b).connects == 1);
	CHECK(rs(p.a).accepts == 1 && rs(p.b).accepts == 1);
	CHECK(rs(p.a).ctl_sent == 2 && rs(p.b).ctl_sent == 2);
	CHECK(rs(p.a).ctl_dropped == 0 && rs(p.b).ctl_dropped == 0);
	CHECK(rcp_nic_get(p.b, p.pb, buf, sizeof buf, ka, la, 0) == 0);
	/* No frame came up: control datagrams are not frames. */
	CHECK(mock_stats()->delivered == 4);
	CHECK(rcp_nic_mr_dereg(ma) == 0 && rcp_nic_mr_dereg(mb) == 0);
	pair_close(&p);

	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &p.a) == 0);
	CHECK(rcp_nic_open("verbs:mock1:1", NULL, &p.b) == 0);
	CHECK(rcp_nic_mr_reg(p.b, region, sizeof region, RCP_NIC_ACCESS_READ, &mb) == 0);
	lb = sizeof kb;
	CHECK(rcp_nic_mr_pack(mb, kb, &lb) == 0);
	CHECK(rcp_nic_addr_str(p.b, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(p.a, s, &p.pa) == 0);
	CHECK(rcp_nic_get(p.a, p.pa, buf, sizeof buf, kb, lb, 0) == RCP_ENOTSUP);
	CHECK(rcp_nic_recv(p.b, fr, 4) == 0);
	CHECK(rs(p.b).ctl_dropped == 1 && rs(p.b).accepts == 0);
	CHECK(rcp_nic_addr_str(p.a, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(p.b, s, &p.pb) == 0);
	CHECK(rs(p.b).parked == 1 && rs(p.b).accepts == 1);
	CHECK(rcp_nic_recv(p.a, fr, 4) == 0);
	CHECK(rs(p.a).connects == 1 && rs(p.a).ctl_sent == 1); /* no timer: one REQ */
	CHECK(rcp_nic_get(p.a, p.pa, buf, sizeof buf, kb, lb, 0) == 0);
	CHECK(rcp_nic_mr_dereg(mb) == 0);
	pair_close(&p);
}

/* Session 21: RC QPs on demand, counted by the model.  A has two peers, B
 * and C; frames go both ways with each: no RC QP anywhere, no control
 * datagram.  Then a get from A to B: refused at once (RCP_ENOTSUP), the
 * connection made meanwhile, the next get done by RDMA; two RC QPs (A's
 * out to B, B's in from A), none towards C, whose frames still go. */
static void t_on_demand(void **state)
{
	static uint8_t region[256], buf[256];
	uint8_t key[RCP_NIC_RKEY_MAX];
	size_t klen = sizeof key;
	struct rcp_nic_frame fr[4];
	char s[RCP_NIC_ADDRSTR_MAX];
	rcp_nic *n[3];
	int to[3][3]; /* to[i][j]: i's index for j */
	rcp_nic_mr *mr;

	(void)state;
	for (int i = 0; i < 3; i++) {
		snprintf(s, sizeof s, "verbs:mock%d:1", i);
		CHECK(rcp_nic_open(s, NULL, &n[i]) == 0);
	}
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			if (i != j) {
				CHECK(rcp_nic_addr_str(n[j], s, sizeof s) == 0);
				CHECK(rcp_nic_peer_add_str(n[i], s, &to[i][j]) == 0);
			}
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 3; j++) {
				struct iovec v = {s, 8};
				if (i == j)
					continue;
				CHECK(rcp_nic_send(n[i], to[i][j], &v, 1, 0) == 0);
				CHECK(rcp_nic_recv(n[j], fr, 4) == 1);
				rcp_nic_release(n[j], fr, 1);
			}
	CHECK(mock_stats()->rc_qps == 0 && mock_stats()->delivered == 12);
	for (int i = 0; i < 3; i++)
		CHECK(rs(n[i]).ctl_sent == 0 && rs(n[i]).rc_made == 0);
	CHECK(rcp_nic_mr_reg(n[1], region, sizeof region, RCP_NIC_ACCESS_READ, &mr) == 0);
	CHECK(rcp_nic_mr_pack(mr, key, &klen) == 0);
	test_fill(region, sizeof region, g_seed);
	CHECK(rcp_nic_get(n[0], to[0][1], buf, sizeof buf, key, klen, 0) == RCP_ENOTSUP);
	for (int t = 0; t < 3; t++)
		for (int i = 0; i < 3; i++)
			CHECK(rcp_nic_recv(n[i], fr, 4) == 0);
	CHECK(rcp_nic_get(n[0], to[0][1], buf, sizeof buf, key, klen, 0) == 0);
	CHECK(test_check(buf, sizeof buf, g_seed) < 0);
	CHECK(mock_stats()->rc_qps == 2 && mock_stats()->rdma_reads == 1);
	CHECK(rs(n[0]).rc_made == 1 && rs(n[1]).rc_made == 1 && rs(n[2]).rc_made == 0);
	CHECK(rs(n[2]).ctl_sent == 0);
	{
		struct iovec v = {s, 8};
		CHECK(rcp_nic_send(n[0], to[0][2], &v, 1, 0) == 0);
		CHECK(rcp_nic_recv(n[2], fr, 4) == 1);
		rcp_nic_release(n[2], fr, 1);
	}
	CHECK(rcp_nic_mr_dereg(mr) == 0);
	for (int i = 0; i < 3; i++)
		rcp_nic_close(n[i]);
	CHECK(mock_live() == 0);
}

/* A peer that never answers (it has not added us, and never will): the
 * REQs the first transfer started stop after REQ_TRIES (about a second
 * of receives, counted not timed), and the clock stops being read in
 * every receive; a transfer then gets RCP_ENOTSUP at once (the peer never
 * showed it knows us: waiting could not help), never a hang. */
static void t_no_answer(void **state)
{
	struct rcp_nic_frame fr[4];
	char s[RCP_NIC_ADDRSTR_MAX];
	uint8_t key[VB_RKEY] = {RCPI_NIC_VERBS, RCP_NIC_ACCESS_READ, 0, 0, 0, 0, 0, 1};
	static uint8_t buf[64];
	rcp_nic *a, *b;
	int pa;
	uint64_t t0;

	(void)state;
	key[23] = sizeof buf; /* a region of 64 bytes at address 0: parses */
	CHECK(rcp_nic_open("verbs:mock0:1", NULL, &a) == 0);
	CHECK(rcp_nic_open("verbs:mock1:1", NULL, &b) == 0);
	CHECK(rcp_nic_addr_str(b, s, sizeof s) == 0);
	CHECK(rcp_nic_peer_add_str(a, s, &pa) == 0);
	CHECK(rcp_nic_get(a, pa, buf, sizeof buf, key, sizeof key, 0) == RCP_ENOTSUP);
	/* The give-up is timed (REQ_TRIES, ~1 s of the clock): a watchdog
	 * of 60 s, not a count of looks (20 M looks took under 1 s once the
	 * model's receive got cheaper). */
	t0 = rcpi_now_ns();
	while (rs(a).gave_up == 0) {
		CHECK(rcpi_now_ns() - t0 < 60000000000ull);
		CHECK(rcp_nic_recv(a, fr, 4) == 0);
		CHECK(rcp_nic_recv(b, fr, 4) == 0); /* b drops every REQ: a is no peer */
	}
	CHECK(rs(a).ctl_sent == 20 && rs(b).ctl_dropped == 20 && rs(a).connects == 0);
	/* A transfer starts a new connection (one more REQ), refused at once. */
	CHECK(rcp_nic_get(a, pa, buf, sizeof buf, key, sizeof key, 0) == RCP_ENOTSUP);
	CHECK(rs(a).not_yet == 2 && rs(a).ctl_sent == 21 && rs(a).rc_made == 2);
	CHECK(mock_stats()->rdma_reads == 0);
	rcp_nic_close(a);
	rcp_nic_close(b);
	CHECK(mock_live() == 0);
}

/* Puts and gets of many sizes at many offsets, bytes checked on both
 * sides; each is one RDMA op on the model; the local buffer's
 * registration is cached. */
static void t_get_put(void **state)
{
	enum { REG = 1 << 20 };
	uint8_t *region = malloc(REG), *buf = malloc(REG), key[RCP_NIC_RKEY_MAX];
	size_t klen = sizeof key;
	struct mock_stats *ms = mock_stats();
	rcp_nic_mr *mr;
	struct pair p;
	uint64_t seq = g_seed, ops = 0;

	(void)state;
	CHECK(region && buf);
	pair_open(&p);
	CHECK(rcp_nic_mr_reg(p.b, region, REG, RCP_NIC_ACCESS_READ | RCP_NIC_ACCESS_WRITE, &mr) ==
	      0);
	CHECK(rcp_nic_mr_pack(mr, key, &klen) == 0 && klen == 24);
	CHECK(rcp_nic_get(p.a, p.pa, buf, REG, key, klen, 0) == 0); /* registers all of buf */
	ops++;
	for (size_t len = 1; len <= REG; len = len * 3 + 7) {
		uint64_t off = (seq * 2654435761u) % (REG - len + 1);
		seq++;
		test_fill(buf, len, seq);
		memset(region, 0, REG);
		CHECK(rcp_nic_put(p.a, p.pa, buf, len, key, klen, off) == 0);
		CHECK(test_check(region + off, len, seq) < 0);
		CHECK(off == 0 || region[off - 1] == 0);
		CHECK(off + len == REG || region[off + len] == 0);
		test_fill(region + off, len, seq + 1000);
		memset(buf, 0, len);
		CHECK(rcp_nic_get(p.a, p.pa, buf, len, key, klen, off) == 0);
		CHECK(test_check(buf, len, seq + 1000) < 0);
		ops += 2;
	}
	CHECK(ms->rdma_writes + ms->rdma_reads == ops);
	CHECK(rs(p.a).puts + rs(p.a).gets == ops);
	CHECK(rs(p.a).reg_misses == 1 && rs(p.a).reg_hits == ops - 1);
	CHECK(rcp_nic_get(p.a, p.pa, buf, 0, key, klen, REG) == 0); /* nothing, at the end */
	CHECK(rcp_nic_mr_dereg(mr) == 0);
	pair_close(&p);
	free(region);
	free(buf);
}

/* Keys, offsets and lengths from the wire that do not fit: RCP_EACCES,
 * counted, and not one work request reaches the model. */
static void t_hostile_keys(void **state)
{
	enum { REG = 8192 };
	static uint8_t region[REG], buf[REG];
	uint8_t key[RCP_NIC_RKEY_MAX], bad[RCP_NIC_RKEY_MAX];
	size_t klen = sizeof key;
	rcp_nic_mr *ro;
	struct pair p;
	int n = 0;

	(void)state;
	pair_open(&p);
	CHECK(rcp_nic_mr_reg(p.b, region, REG, RCP_NIC_ACCESS_READ, &ro) == 0);
	CHECK(rcp_nic_mr_pack(ro, key, &klen) == 0);
	/* Beyond the region, by offset, length or both wrapping. */
	CHECK(rcp_nic_get(p.a, p.pa, buf, 1, key, klen, REG) == RCP_EACCES);
	n++;
	CHECK(rcp_nic_get(p.a, p.pa, buf, REG, key, klen, 1) == RCP_EACCES);
	n++;
	CHECK(rcp_nic_get(p.a, p.pa, buf, 16, key, klen, UINT64_MAX - 7) == RCP_EACCES);
	n++;
	CHECK(rcp_nic_get(p.a, p.pa, buf, REG + 1, key, klen, 0) == RCP_EACCES);
	n++;
	/* A write on a read-only key. */
	CHECK(rcp_nic_put(p.a, p.pa, buf, 8, key, klen, 0) == RCP_EACCES);
	n++;
	/* The wrong length, a shorter and a longer key. */
	CHECK(rcp_nic_get(p.a, p.pa, buf, 8, key, klen - 1, 0) == RCP_EACCES);
	n++;
	CHECK(rcp_nic_get(p.a, p.pa, buf, 8, key, klen + 1, 0) == RCP_EACCES);
	n++;
	/* Another backend's key, an unknown access bit, a reserved byte set,
	 * a zero rkey. */
	for (int i = 0; i < 4; i++) {
		memcpy(bad, key, klen);
		if (i == 0)
			bad[0] = RCPI_NIC_SHM;
		else if (i == 1)
			bad[1] |= 0x04;
		else if (i == 2)
			bad[3] = 1;
		else
			memset(bad + 4, 0, 4);
		CHECK(rcp_nic_get(p.a, p.pa, buf, 8, bad, klen, 0) == RCP_EACCES);
		n++;
	}
	/* A region whose end wraps the address space. */
	memcpy(bad, key, klen);
	memset(bad + 8, 0xff, 8);
	CHECK(rcp_nic_get(p.a, p.pa, buf, 8, bad, klen, 0) == RCP_EACCES);
	n++;
	CHECK(rs(p.a).rejected == (uint64_t)n);
	CHECK(mock_stats()->rdma_reads + mock_stats()->rdma_writes == 0);
	CHECK(rs(p.a).remote_err == 0);
	/* The same key, right: the read goes. */
	CHECK(rcp_nic_get(p.a, p.pa, buf, REG, key, klen, 0) == 0);
	CHECK(rcp_nic_mr_dereg(ro) == 0);
	pair_close(&p);
}

/* What only the HCA can check: a key that parses but names no region of
 * the peer's (forged), and one revoked by deregistration.  The model
 * refuses both (REM_ACCESS_ERR), the QP fails, the backend connects a new
 * one in the background and the next transfer works. */
static void t_remote_refusal(void **state)
{
	static uint8_t region[4096], buf[4096];
	uint8_t key[RCP_NIC_RKEY_MAX], forged[RCP_NIC_RKEY_MAX];
	size_t klen = sizeof key;
	rcp_nic_mr *mr;
	struct pair p;

	(void)state;
	pair_open(&p);
	CHECK(rcp_nic_mr_reg(p.b, region, sizeof region, RCP_NIC_ACCESS_WRITE, &mr) == 0);
	CHECK(rcp_nic_mr_pack(mr, key, &klen) == 0);
	memcpy(forged, key, klen);
	forged[7] ^= 1; /* another rkey */
	CHECK(rcp_nic_put(p.a, p.pa, buf, 64, forged, klen, 0) == RCP_EACCES);
	CHECK(rs(p.a).remote_err == 1 && rs(p.a).rejected == 0);
	settle(&p); /* the new QP's handshake */
	CHECK(rs(p.a).connects == 2 && rs(p.b).accepts == 2);
	test_fill(buf, sizeof buf, 5);
	CHECK(rcp_nic_put(p.a, p.pa, buf, sizeof buf, key, klen, 0) == 0);
	CHECK(test_check(region, sizeof region, 5) < 0);
	/* Revoked: the peer still holds the key, the HCA no longer knows it. */
	CHECK(rcp_nic_mr_dereg(mr) == 0);
	memset(region, 0, sizeof region);
	CHECK(rcp_nic_put(p.a, p.pa, buf, 64, key, klen, 0) == RCP_EACCES);
	CHECK(rs(p.a).remote_err == 2);
	CHECK(region[0] == 0);
	pair_close(&p);
}

/* The cache of local registrations: at most VB_REGS entries, the least
 * recently used evicted; deregistering a region drops the cached entries
 * it overlaps, so its pages are no longer pinned by us. */
static void t_regcache(void **state)
{
	enum { N = VB_REGS + 8, PG = 4096 };
	uint8_t *bufs = aligned_alloc(PG, (size_t)N * 2 * PG), key[RCP_NIC_RKEY_MAX];
	static uint8_t region[PG];
	size_t klen = sizeof key;
	rcp_nic_mr *mr, *local;
	struct pair p;

	(void)state;
	CHECK(bufs);
	pair_open(&p);
	CHECK(rcp_nic_mr_reg(p.b, region, PG, RCP_NIC_ACCESS_READ, &mr) == 0);
	CHECK(rcp_nic_mr_pack(mr, key, &klen) == 0);
	/* N buffers two pages apart: N misses, the first 8 evicted. */
	for (int i = 0; i < N; i++)
		CHECK(rcp_nic_get(p.a, p.pa, bufs + (size_t)i * 2 * PG, 100, key, klen, 0) == 0);
	CHECK(rs(p.a).reg_misses == N && rs(p.a).reg_evicted == 8);
	/* The most recent are still there; the first is not. */
	CHECK(rcp_nic_get(p.a, p.pa, bufs + (size_t)(N - 1) * 2 * PG + 50, 100, key, klen, 0) == 0);
	CHECK(rs(p.a).reg_hits == 1);
	CHECK(rcp_nic_get(p.a, p.pa, bufs, 100, key, klen, 0) == 0);
	CHECK(rs(p.a).reg_misses == N + 1 && rs(p.a).reg_evicted == 9);
	/* A's own region over buffers 10..11, deregistered: their cached
	 * entries go, and the next transfer there registers again. */
	CHECK(rcp_nic_mr_reg(p.a, bufs + 10 * 2 * PG, 3 * 2 * PG, RCP_NIC_ACCESS_READ, &local) ==
	      0);
	CHECK(rcp_nic_mr_dereg(local) == 0);
	CHECK(rs(p.a).reg_invalidated == 3); /* 10, 11, 12 */
	CHECK(rcp_nic_get(p.a, p.pa, bufs + 11 * 2 * PG, 100, key, klen, 0) == 0);
	CHECK(rs(p.a).reg_misses == N + 2);
	CHECK(rcp_nic_mr_dereg(mr) == 0);
	pair_close(&p);
	free(bufs);
}

/* Session 20: memory freed behind the cache's back.  A cached buffer
 * unmapped and mapped again at the same address, madvise(DONTNEED)'d,
 * moved by mremap, and a large malloc block freed: each time the next
 * transfer there registers afresh (a miss, reg_unmapped counted) instead
 * of using the entry naming the old pages, and the bytes land.  The
 * model cannot show the wrong-page corruption itself (its HCA writes by
 * virtual address), so the counts are the check. */
static void t_regcache_unmapped(void **state)
{
	enum { PG = 4096, LEN = 2 * PG };
	static uint8_t region[LEN];
	uint8_t key[RCP_NIC_RKEY_MAX], *buf, *again, *moved, *big;
	size_t klen = sizeof key;
	rcp_nic_mr *mr;
	struct pair p;

	(void)state;
	pair_open(&p);
	test_fill(region, LEN, 7);
	CHECK(rcp_nic_mr_reg(p.b, region, LEN, RCP_NIC_ACCESS_READ, &mr) == 0);
	CHECK(rcp_nic_mr_pack(mr, key, &klen) == 0);
	buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED);
	CHECK(rcp_nic_get(p.a, p.pa, buf, LEN, key, klen, 0) == 0);
	CHECK(rcp_nic_get(p.a, p.pa, buf, LEN, key, klen, 0) == 0);
	CHECK(rs(p.a).reg_misses == 1 && rs(p.a).reg_hits == 1 && rs(p.a).reg_unwatched == 0);
	/* Unmapped, and new pages at the same address. */
	CHECK(munmap(buf, LEN) == 0);
	again = mmap(buf, LEN, PROT_READ | PROT_WRITE,
	             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(again == buf);
	CHECK(rcp_nic_get(p.a, p.pa, buf, LEN, key, klen, 0) == 0);
	CHECK(test_check(buf, LEN, 7) < 0);
	CHECK(rs(p.a).reg_misses == 2 && rs(p.a).reg_unmapped == 1);
	/* madvise(DONTNEED): the pages are gone, fresh zero pages on touch. */
	CHECK(madvise(buf + PG, PG, MADV_DONTNEED) == 0);
	CHECK(rcp_nic_get(p.a, p.pa, buf, LEN, key, klen, 0) == 0);
	CHECK(rs(p.a).reg_misses == 3 && rs(p.a).reg_unmapped == 2);
	/* mremap moves the pages away: the old addresses are no longer them. */
	moved = mremap(buf, LEN, LEN, MREMAP_MAYMOVE);
	CHECK(moved != MAP_FAILED);
	if (moved == buf) { /* grown in place is not a move: force one */
		moved = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(mremap(buf, LEN, LEN, MREMAP_MAYMOVE | MREMAP_FIXED, moved) == moved);
	}
	CHECK(rcp_nic_get(p.a, p.pa, moved, LEN, key, klen, 0) == 0); /* a miss: new range */
	CHECK(rs(p.a).reg_unmapped == 3 && rs(p.a).reg_misses == 4);
	CHECK(munmap(moved, LEN) == 0);
#ifdef __SANITIZE_ADDRESS__
	/* ASan's allocator keeps freed blocks in quarantine: no munmap. */
	(void)big;
	(void)again;
	CHECK(rcp_nic_mr_dereg(mr) == 0);
	pair_close(&p);
	return;
#endif
	/* free() of a block malloc mapped by itself (glibc's internal
	 * munmap, which no interposed munmap would see). */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	big = malloc(32 << 20); /* more than the heap holds free, so mapped */
	CHECK(big && (*(volatile size_t *)((uintptr_t)big - sizeof(size_t)) & 2)); /* IS_MMAPPED */
	CHECK(rcp_nic_get(p.a, p.pa, big + 4096, LEN, key, klen, 0) == 0);
	CHECK(rcp_nic_get(p.a, p.pa, big + 4096, LEN, key, klen, 0) == 0);
	CHECK(rs(p.a).reg_misses == 5 && rs(p.a).reg_hits == 2);
	free(big);
	again = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(again != MAP_FAILED);
	CHECK(rcp_nic_get(p.a, p.pa, again, 64, key, klen, 0) == 0); /* any lookup applies it */
	CHECK(rs(p.a).reg_unmapped == 5);                            /* `moved` and `big` */
	CHECK(rs(p.a).reg_unwatched == 0 && rcpi_vb_watch_events() >= 5);
	CHECK(munmap(again, LEN) == 0);
	CHECK(rcp_nic_mr_dereg(mr) == 0);
	pair_close(&p);
}

/* RCP channels over the backend: a rendezvous (RTS offered with a key,
 * the receiver's RDMA READ) and a READY promise (the receiver first, the
 * sender's RDMA WRITE), both directions, bytes checked, and the model
 * counting the RDMA work that moved them. */
static void t_rcp_rma(void **state)
{
	static const size_t sizes[] = {65536, 300000, 1 << 20};
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	uint8_t *sb = malloc(1 << 20), *rb = malloc(1 << 20);
	struct mock_stats *ms = mock_stats();
	struct rcp_ep_stats sa = {0}, sb_ = {0};

	(void)state;
	CHECK(sb && rb);
	ep_pair_open(NULL, &a, &b, &ab, &ba);
	/* The first message finds no RC QP (made on demand, session 21): its
	 * split transfer is refused at once on both sides, which starts both
	 * connections, and it goes by frames (one fallback, counted by each
	 * side); the handshakes complete meanwhile, and the second message,
	 * the other way, goes by RDMA. */
	for (int back = 0; back < 2; back++) {
		rcp_req *sr = NULL, *rr = NULL;
		CHECK(rcp_irecv(back ? a : b, back ? ab : ba, 99, rb, 65536, &rr) == 0);
		CHECK(rcp_isend(back ? ba : ab, 99, sb, 65536, &sr) == 0);
		drive_pair(a, b, sr, rr, 65536, 5000000);
	}
	for (int i = 0; i < 50; i++) {
		rcp_progress(a);
		rcp_progress(b);
	}
	CHECK(rcp_ep_get_stats(a, &sa) == 0 && rcp_ep_get_stats(b, &sb_) == 0);
	CHECK(sa.rma_fallbacks == 1 && sb_.rma_fallbacks == 1 && ms->rdma_bytes == 65536);
	CHECK(rs(rcp_ep_nic(a)).connects == 1 && rs(rcp_ep_nic(b)).connects == 1);
	for (size_t k = 0; k < 4 * sizeof sizes / sizeof *sizes; k++) {
		size_t len = sizes[k / 4];
		int back = k & 1, ready = (k >> 1) & 1;
		rcp_ep *se = back ? b : a, *re = back ? a : b;
		rcp_req *sr = NULL, *rr = NULL;
		uint64_t reads = ms->rdma_reads, writes = ms->rdma_writes, bytes = ms->rdma_bytes;

		test_fill(sb, len, k + g_seed);
		memset(rb, 0, len);
		uint64_t rmsgs;

		CHECK(rcp_ep_get_stats(a, &sa) == 0 && rcp_ep_get_stats(b, &sb_) == 0);
		rmsgs = sa.rma_msgs + sb_.rma_msgs;
		CHECK(rcp_irecv(re, back ? ab : ba, k, rb, len, &rr) == 0);
		if (ready) /* the promise reaches the sender before its send */
			for (int i = 0; i < 50; i++) {
				rcp_progress(re);
				rcp_progress(se);
			}
		CHECK(rcp_isend(back ? ba : ab, k, sb, len, &sr) == 0);
		drive_pair(a, b, sr, rr, len, 5000000);
		CHECK(test_check(rb, len, k + g_seed) < 0);
		/* One message moved by RMA (counted by whichever side moved it). */
		CHECK(rcp_ep_get_stats(a, &sa) == 0 && rcp_ep_get_stats(b, &sb_) == 0);
		CHECK(sa.rma_msgs + sb_.rma_msgs == rmsgs + 1);
		CHECK(ms->rdma_bytes - bytes == len); /* every byte by RDMA, once */
		if (ready)
			CHECK(ms->rdma_writes > writes); /* the sender put into the promise */
		else
			CHECK(ms->rdma_reads > reads); /* the receiver pulled */
	}
	ep_pair_close(a, b, ab, ba);
	free(sb);
	free(rb);
}

/* N messages of LEN bytes from A to B on AB/BA, receiver first for every
 * other one (a READY promise, then a put) and sender first for the rest
 * (an RTS with a key, then a get); every byte checked. */
static void msgs_run(rcp_ep *a, rcp_ep *b, rcp_chan *ab, rcp_chan *ba, int n, size_t len,
                     uint8_t *sb, uint8_t *rb)
{
	for (int k = 0; k < n; k++) {
		rcp_req *sr = NULL, *rr = NULL;

		test_fill(sb, len, g_seed + (uint64_t)k);
		memset(rb, 0, len);
		CHECK(rcp_irecv(b, ba, (uint64_t)k, rb, len, &rr) == 0);
		if (k & 1)
			for (int i = 0; i < 50; i++) {
				rcp_progress(b);
				rcp_progress(a);
			}
		CHECK(rcp_isend(ab, (uint64_t)k, sb, len, &sr) == 0);
		drive_pair(a, b, sr, rr, len, 5000000);
		CHECK(test_check(rb, len, g_seed + (uint64_t)k) < 0);
	}
}

/* RMA that cannot be done (rcp/fallback.c, FALLBACK), on the model: RC
 * queue pairs that never come up (every move to RTR refused), so each
 * transfer is refused at once (RCP_ENOTSUP, counted in not_yet), with
 * split transfers (both sides fail) and without (RCP_RMA_SPLIT=0: the
 * receiver's get or the sender's put alone); then RDMA that completes in
 * error.  Every message still arrives whole, by
 * frames; the fallbacks are counted; a channel stops asking after 8, so
 * the backend's refusals stop growing with the messages; and a channel
 * whose first transfers failed goes on by RDMA once they work. */
static void t_fallback(void **state)
{
	enum { N = 24, LEN = 200000 };
	uint8_t *sb = malloc(LEN), *rb = malloc(LEN);
	struct mock_stats *ms = mock_stats();
	struct rcp_ep_stats sa = {0}, sb_ = {0};
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	uint64_t refused;

	(void)state;
	CHECK(sb && rb);
	for (int phase = 0; phase < 3; phase++) {
		mock_faults()->rc_down = phase < 2;
		if (phase == 1)
			setenv("RCP_RMA_SPLIT", "0", 1);
		else
			unsetenv("RCP_RMA_SPLIT");
		ep_pair_open(NULL, &a, &b, &ab, &ba);
		if (phase == 2) {
			/* Up, then the first two RDMA ops fail. */
			msgs_run(a, b, ab, ba, 1, 1000, sb, rb);
			mock_faults()->rdma_err = 2;
		}
		ms->rdma_bytes = 0;
		msgs_run(a, b, ab, ba, N, LEN, sb, rb);
		CHECK(rcp_ep_get_stats(a, &sa) == 0 && rcp_ep_get_stats(b, &sb_) == 0);
		refused = rma_stats(rcp_ep_nic(a)).not_yet + rma_stats(rcp_ep_nic(b)).not_yet;
		if (phase < 2) {
			/* Nothing by RDMA; a side fell back until its bound (8),
			 * then stopped offering and asking: fewer refusals than
			 * the messages would have made (one or two each). */
			CHECK(ms->rdma_bytes == 0 && ms->rdma_reads + ms->rdma_writes == 0);
			CHECK(sa.rma_fallbacks >= 8 || sb_.rma_fallbacks >= 8);
			CHECK(refused >= 8 && refused < N);
		} else {
			/* Two messages fell back (each counted by both sides),
			 * the rest went by RDMA. */
			CHECK(mock_faults()->rdma_err == 0);
			CHECK(sa.rma_fallbacks + sb_.rma_fallbacks >= 2);
			CHECK(sa.rma_fallbacks < 8 && sb_.rma_fallbacks < 8);
			CHECK(ms->rdma_bytes >= (uint64_t)(N - 4) * LEN);
		}
		ep_pair_close(a, b, ab, ba);
	}
	mock_faults()->rc_down = 0;
	free(sb);
	free(rb);
}

static int bytes_proc(rcp_proc *p, void *data)
{
	return rcp_proc_bytes(p, data);
}

static void on_echo(rcp_rpc_handle *h, void *arg)
{
	struct rcp_bytes in;

	(void)arg;
	if (rcp_rpc_get_input(h, &in))
		rcp_rpc_respond(h, NULL, RCP_EPROTO);
	else
		rcp_rpc_respond(h, &in, 0);
}

/* RPC over verbs: nothing in rpc/ names a transport; what the endpoint's
 * nic can do decides (RMA: large arguments and results go by rendezvous,
 * here RDMA).  Echo calls of 8 B to 1 MiB, both endpoints progressed in
 * turn, every byte checked; from 128 KiB the call and its answer go by
 * rendezvous, the first of them by frames while the RC QPs connect (on
 * demand, session 21), the rest by RDMA. */
/* RPC echo calls of 8 B to 1 MiB from an endpoint at CADDR to a server
 * at SADDR, bytes checked; MS, the model's counters (NULL on a device):
 * the calls and answers above 128 KiB moved by RDMA. */
static void rpc_echo(const char *saddr, const char *caddr, struct mock_stats *ms)
{
	rcp_ep *se, *ce;
	rcp_rpc *srv, *cli;
	rcp_chan *ch;
	char sa[RCP_NIC_ADDRSTR_MAX];
	uint64_t sid, cid;
	uint8_t *buf = malloc(1 << 20);
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};

	CHECK(buf);
	/* The server takes channels it did not open (RCP_EP_ACCEPT): it adds
	 * the client as a peer only after RCP's handshake (the RC QPs, made
	 * at the first RMA since session 21, come after that). */
	CHECK(rcp_ep_open(saddr, &ec, &se) == 0);
	CHECK(rcp_ep_open(caddr, NULL, &ce) == 0);
	CHECK(rcp_rpc_create(se, NULL, &srv) == 0 && rcp_rpc_create(ce, NULL, &cli) == 0);
	CHECK(rcp_rpc_register(srv, "echo", bytes_proc, bytes_proc, &sid) == 0);
	CHECK(rcp_rpc_register(cli, "echo", bytes_proc, bytes_proc, &cid) == 0 && cid == sid);
	CHECK(rcp_rpc_set_handler(srv, sid, on_echo, NULL) == 0);
	CHECK(rcp_ep_addr(se, sa, sizeof sa) == 0);
	CHECK(rcp_connect(ce, sa, &ch) == 0);
	for (size_t len = 8; len <= 1 << 20; len *= 4) {
		struct rcp_bytes in = {buf, len}, out = {0};
		uint64_t bytes = ms ? ms->rdma_bytes : 0;
		rcp_rpc_req *rq;
		long spins = 0;
		int rc;

		test_fill(buf, len, len + g_seed);
		CHECK(rcp_rpc_forward(cli, ch, cid, &in, &out, -1, NULL, NULL, &rq) == 0);
		while ((rc = rcp_rpc_test(rq)) == RCP_EAGAIN) {
			if (++spins >= 5000000)
				fail_msg("len %zu pending (seed %#llx)", len,
				         (unsigned long long)g_seed);
			rcp_rpc_progress(srv);
		}
		CHECK(rc == 0 && out.len == len && test_check(out.data, len, len + g_seed) < 0);
		CHECK(rcp_rpc_req_free(rq) == 0);
		/* From 128 KiB the call and its answer go by rendezvous; the
		 * first (128 KiB) each way finds no RC QP yet (made on demand,
		 * session 21) and goes by frames; from 512 KiB by RDMA. */
		if (ms && len > 128 * 1024)
			CHECK(ms->rdma_bytes - bytes >= 2 * len);
	}
	rcp_chan_close(ch);
	rcp_rpc_destroy(cli);
	rcp_rpc_destroy(srv);
	rcp_ep_close(ce);
	rcp_ep_close(se);
	free(buf);
}

static void t_rpc(void **state)
{
	(void)state;
	rpc_echo("verbs:mock0:1", "verbs:mock1:1", mock_stats());
	CHECK(mock_live() == 0);
}

/* Drives OP to its end, progressing OTHER too; its status. */
static int bulk_drive(rcp_bulk_op *op, rcp_bulk_ctx *other)
{
	int st = 1;
	long spins = 0;

	while (rcp_bulk_test(op, &st) == RCP_EAGAIN) {
		CHECK(++spins < 5000000);
		rcp_bulk_progress(other);
	}
	return st;
}

/* Bulk handles over verbs: bulk/ takes the one-sided path because the nic
 * says RMA, with keys from its registration cache.  The first transfer,
 * on a channel RCP has not opened yet, finds the server not knowing the
 * client: RCP_ENOTSUP at once (rc.c), and bulk/ moves it by messages,
 * which open the channel; the RC QP connects meanwhile, and from then on
 * every piece is an RDMA op.  Pulls and a push across three segments at
 * an offset, bytes checked. */
static void t_bulk(void **state)
{
	enum { SEG = 100000 };
	static uint8_t own[3][SEG], mine[3 * SEG];
	void *ptrs[3] = {own[0], own[1], own[2]}, *lp[1] = {mine};
	size_t lens[3] = {SEG, SEG, SEG}, ll[1] = {sizeof mine}, blen;
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_bulk_stats bs = {0};
	unsigned char ser[4096];
	rcp_ep *a, *b;
	rcp_chan *ch;
	rcp_bulk_ctx *ca, *cb;
	rcp_bulk *h = NULL, *rh = NULL, *lh = NULL;
	rcp_bulk_op *op = NULL;
	char an[RCP_NIC_ADDRSTR_MAX];
	uint64_t off = 12345, len = 2 * SEG + 777, reads;
	struct mock_stats *ms = mock_stats();

	(void)state;
	/* Until session 18 this failed in 5 of 8 runs: the first transfer
	 * (by messages; its 200 KB message a split RMA transfer) met the RC
	 * QP not yet up, waited 2 s for a REP only this thread could send,
	 * and ended with RCP_EPEER.  Now the backend refuses at once and RCP
	 * moves that message by frames (rcp/fallback.c). */
	CHECK(rcp_ep_open("verbs:mock0:1", &ec, &a) == 0);
	CHECK(rcp_ep_open("verbs:mock1:1", NULL, &b) == 0);
	CHECK(rcp_bulk_ctx_open(a, &ca) == 0 && rcp_bulk_ctx_open(b, &cb) == 0);
	CHECK(rcp_ep_addr(a, an, sizeof an) == 0);
	CHECK(rcp_connect(b, an, &ch) == 0);
	for (int i = 0; i < 3; i++)
		test_fill(own[i], SEG, g_seed + (uint64_t)i);
	CHECK(rcp_bulk_create(ca, 3, ptrs, lens, RCP_BULK_READWRITE, &h) == 0);
	CHECK(rcp_bulk_create(cb, 1, lp, ll, RCP_BULK_READWRITE, &lh) == 0);
	blen = sizeof ser;
	CHECK(rcp_bulk_serialize(h, ser, &blen) == 0);
	CHECK(rcp_bulk_deserialize(cb, ser, blen, &rh) == 0);
	for (int k = 0; k < 3; k++) {
		int push = k == 1;
		if (push)
			test_fill(mine, len, g_seed + 9);
		else
			memset(mine, 0, sizeof mine);
		reads = ms->rdma_reads + ms->rdma_writes;
		CHECK(rcp_bulk_transfer(cb, ch, push ? RCP_BULK_PUSH : RCP_BULK_PULL, rh, off, lh,
		                        0, len, NULL, NULL, &op) == 0);
		{
			int bst = bulk_drive(op, ca);
			if (bst)
				fprintf(stderr, "k %d: bulk status %d (%s)\n", k, bst,
				        rcp_strerror(bst));
			CHECK(bst == 0);
		}
		CHECK(!memcmp(mine, own[0] + off, SEG - off));
		CHECK(!memcmp(mine + SEG - off, own[1], SEG));
		CHECK(!memcmp(mine + 2 * SEG - off, own[2], len - (2 * SEG - off)));
		CHECK(rcp_bulk_get_stats(cb, &bs) == 0);
		if (k == 0) /* by messages: the channel was not open */
			CHECK(bs.emu_ops > 0 && bs.rma_ops == 0);
		else /* three pieces, three RDMA ops */
			CHECK(ms->rdma_reads + ms->rdma_writes == reads + 3);
	}
	CHECK(bs.rma_ops == 6 && bs.rma_bytes == 2 * len);
	CHECK(rcp_bulk_free(rh) == 0 && rcp_bulk_free(lh) == 0 && rcp_bulk_free(h) == 0);
	rcp_chan_close(ch);
	rcp_bulk_ctx_close(cb);
	rcp_bulk_ctx_close(ca);
	rcp_ep_close(b);
	rcp_ep_close(a);
	CHECK(mock_live() == 0);
}

/* Session 20: on a real device (the first one, port 1, both endpoints on
 * it: loopback through the HCA), RPC echo calls of 8 B to 1 MiB and RCP
 * channels moving 8 B to 1 MiB both ways (from 64 KiB by RDMA READ and
 * WRITE), bytes checked; "SKIP: no RDMA device (t_device_rma)" without
 * one, as on this machine: never run yet. */
static void t_device_rma(void **state)
{
	static const size_t sizes[] = {8, 4096, 65536, 1 << 20};
	char dev[96], an[RCP_NIC_ADDRSTR_MAX], bn[RCP_NIC_ADDRSTR_MAX];
	uint8_t *sb = malloc(1 << 20), *rb = malloc(1 << 20);
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;

	(void)state;
	CHECK(sb && rb);
	if (device_port(dev, sizeof dev, "t_device_rma")) {
		rpc_echo(dev, dev, NULL);
		CHECK(rcp_ep_open(dev, NULL, &a) == 0 && rcp_ep_open(dev, NULL, &b) == 0);
		CHECK(rcp_ep_addr(a, an, sizeof an) == 0 && rcp_ep_addr(b, bn, sizeof bn) == 0);
		CHECK(rcp_connect(a, bn, &ab) == 0 && rcp_connect(b, an, &ba) == 0);
		for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
			msgs_run(a, b, ab, ba, 8, sizes[i], sb, rb);
			msgs_run(b, a, ba, ab, 8, sizes[i], sb, rb);
		}
		rcp_chan_close(ab);
		rcp_chan_close(ba);
		rcp_ep_close(b);
		rcp_ep_close(a);
	}
	free(sb);
	free(rb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_connect, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_on_demand, setup3, teardown),
	    cmocka_unit_test_setup_teardown(t_no_answer, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_get_put, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_hostile_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_remote_refusal, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_regcache, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_regcache_unmapped, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_rcp_rma, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_rpc, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_bulk, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_fallback, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_device_rma, setup, teardown),
	};
	g_seed = test_seed(0x5eed24);
	setenv("RCP_FAULTS", "", 1);
	/* The counts below say which messages went by RDMA: where RMA starts
	 * is set, so a machine crowded by a parallel build does not raise
	 * it (rcp/start.c, rcpi_rma_min; under CI's load t_rcp_rma and t_rpc
	 * failed). */
	setenv("RCP_RMA_MIN", "65536", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
