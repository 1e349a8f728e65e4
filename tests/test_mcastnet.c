/*
 * tests/test_mcastnet.c — reliable multicast (rcp/mcastnet.c) on loopback:
 * one multicast send per frame, gap repair under loss, reordering and
 * duplication (the faults wrapper), the slowest member bounding the
 * window, a dead member failing cleanly, forged and stale frames counted.
 *
 * Every endpoint is in this process on 127.0.0.1; the group is
 * 239.254.X.Y (from the pid) so parallel runs do not share one.  Loops
 * progress every endpoint until the state asked for, with an iteration
 * bound that only matters when the test fails; nothing is timed.  Fault
 * seeds come from RCP_TEST_SEED and are printed on failure.
 */
#include <arpa/inet.h>
#include <errno.h>

#include <rcp/mcastnet.h>
#include <rcp/nic.h>

#include "testutil.h"

#define NMEM   3
#define ROUNDS 2000000L /* progress rounds: a bound for failing runs only */

static uint64_t g_seed;
static char g_group[64];

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			fail_msg("%s:%d: %s (seed %#llx)", __FILE__, __LINE__, #c,                 \
			         (unsigned long long)g_seed);                                      \
	} while (0)

struct grp {
	rcp_mcn *snd;
	rcp_mcn *mem[NMEM];
	char name[NMEM][32];
	const char *names[NMEM];
};

static void grp_open(struct grp *g, const char *faults, uint64_t dead_ns, uint32_t window)
{
	struct rcp_nic_config nc = {.faults = faults ? faults : "", .mtu = 9000};
	struct rcp_mcn_config c = {
	    .group = g_group, .nic = &nc, .dead_ns = dead_ns, .window = window};
	int rc;
	c.self_id = "sender";
	rc = rcp_mcn_open("udp:127.0.0.1:", &c, &g->snd);
	if (rc == RCP_EADDR || rc == RCP_ENOTSUP)
		skip(); /* no multicast on this host's loopback */
	CHECK(rc == 0);
	for (int i = 0; i < NMEM; i++) {
		snprintf(g->name[i], sizeof g->name[i], "member%d", i);
		g->names[i] = g->name[i];
		c.self_id = g->name[i];
		CHECK(rcp_mcn_open("udp:127.0.0.1:", &c, &g->mem[i]) == 0);
	}
}

static void grp_close(struct grp *g)
{
	rcp_mcn_close(g->snd);
	for (int i = 0; i < NMEM; i++)
		rcp_mcn_close(g->mem[i]);
}

/* Opens the group (grp_open's arguments) and sends LEN bytes of the
 * seeded pattern to all NMEM members; returns the bytes, *ID the message. */
static unsigned char *grp_send(struct grp *g, const char *faults, uint64_t dead_ns, uint32_t window,
                               size_t len, uint64_t *id)
{
	unsigned char *buf;
	grp_open(g, faults, dead_ns, window);
	buf = malloc(len ? len : 1);
	CHECK(buf != NULL);
	test_fill(buf, len, g_seed);
	CHECK(rcp_mcn_send(g->snd, g->names, NMEM, buf, len, id) == 0);
	return buf;
}

/* Progresses the sender and the members in LIVE (bitmask) until the
 * message (to the first N members) is done; STATUS gets their outcomes. */
static void run_until_done(struct grp *g, unsigned live, int *status, int n)
{
	long r;
	for (r = 0; r < ROUNDS; r++) {
		rcp_mcn_progress(g->snd);
		for (int i = 0; i < NMEM; i++)
			if (live >> i & 1)
				rcp_mcn_progress(g->mem[i]);
		if (rcp_mcn_send_status(g->snd, status, n) == 0)
			break;
	}
	CHECK(r < ROUNDS);
}

static void check_claim(rcp_mcn *m, uint64_t id, const void *want, size_t len)
{
	void *got = NULL;
	size_t glen = 0;
	CHECK(rcp_mcn_claim(m, id, &got, &glen) == 0);
	CHECK(glen == len);
	CHECK(memcmp(got, want, len) == 0);
	free(got);
	CHECK(rcp_mcn_claim(m, id, &got, &glen) == RCP_ENOENT); /* once */
}

/* One message of LEN to three members: each has it whole. */
static void one_message(const char *faults, size_t len, struct rcp_mcn_stats *sst,
                        struct rcp_mcn_stats *mst)
{
	struct grp g = {0};
	int status[NMEM];
	uint64_t id;
	unsigned char *buf = grp_send(&g, faults, 0, 0, len, &id);
	CHECK(rcp_mcn_send(g.snd, g.names, NMEM, buf, len, &id) == RCP_EBUSY);
	run_until_done(&g, (1u << NMEM) - 1, status, NMEM);
	for (int i = 0; i < NMEM; i++) {
		CHECK(status[i] == 0);
		check_claim(g.mem[i], id, buf, len);
	}
	rcp_mcn_get_stats(g.snd, sst);
	memset(mst, 0, sizeof *mst);
	for (int i = 0; i < NMEM; i++) {
		struct rcp_mcn_stats s;
		rcp_mcn_get_stats(g.mem[i], &s);
		mst->data_recv += s.data_recv;
		mst->dup_recv += s.dup_recv;
		mst->bytes_recv += s.bytes_recv;
		mst->bad_recv += s.bad_recv;
	}
	grp_close(&g);
	free(buf);
}

/* No faults: one group send per frame reaches every member, no repair. */
static void t_once_per_frame(void **state)
{
	struct rcp_mcn_stats s, m;
	size_t len = 1 << 20;
	(void)state;
	one_message("", len, &s, &m);
	printf("# data_sent %llu data_recv %llu\n", (unsigned long long)s.data_sent,
	       (unsigned long long)m.data_recv);
	CHECK(s.msgs_sent == 1);
	CHECK(s.repairs_sent == 0);
	CHECK(s.members_failed == 0);
	CHECK(m.bytes_recv == NMEM * (uint64_t)len);
	/* every frame sent once, taken once by each member, never twice */
	CHECK(m.data_recv == NMEM * s.data_sent);
	CHECK(m.dup_recv == 0);
	CHECK(s.data_sent == (len + 8951) / 8952); /* MTU 9000: 8952 B per frame */
	one_message("", 0, &s, &m);                /* an empty message is one frame */
	CHECK(s.data_sent == 1 && m.bytes_recv == 0);
}

/* Loss, reordering, duplication on every endpoint: gaps repaired. */
static void t_repair(void **state)
{
	struct rcp_mcn_stats s, m;
	char spec[128];
	uint64_t dups = 0;
	(void)state;
	for (int k = 0; k < 3; k++) {
		snprintf(spec, sizeof spec, "drop=0.05,dup=0.03,reorder=0.05,seed=%llu",
		         (unsigned long long)(g_seed + (uint64_t)k));
		one_message(spec, (size_t)(1 << 20) + 777 * (size_t)k, &s, &m);
		printf("# %s: data_sent %llu repairs %llu polls %llu dup %llu\n", spec,
		       (unsigned long long)s.data_sent, (unsigned long long)s.repairs_sent,
		       (unsigned long long)s.polls_sent, (unsigned long long)m.dup_recv);
		CHECK(s.repairs_sent > 0);
		CHECK(s.members_failed == 0);
		dups += m.dup_recv;
	}
	CHECK(dups > 0);
}

/* A member never progressed: the sender sends one window and stops; the
 * member then catches up and everyone completes. */
static void t_slowest_window(void **state)
{
	struct grp g = {0};
	struct rcp_mcn_stats s;
	int status[NMEM];
	uint64_t id;
	size_t len = 4 << 20;
	unsigned char *buf;
	(void)state;
	buf = grp_send(&g, "", 0, 16, len, &id);
	for (int r = 0; r < 2000; r++) { /* member 2 asleep */
		rcp_mcn_progress(g.snd);
		rcp_mcn_progress(g.mem[0]);
		rcp_mcn_progress(g.mem[1]);
	}
	rcp_mcn_get_stats(g.snd, &s);
	CHECK(s.data_sent == 16); /* the window, no more */
	CHECK(rcp_mcn_send_status(g.snd, status, NMEM) == RCP_EAGAIN);
	run_until_done(&g, 7, status, NMEM);
	for (int i = 0; i < NMEM; i++) {
		CHECK(status[i] == 0);
		check_claim(g.mem[i], id, buf, len);
	}
	grp_close(&g);
	free(buf);
}

/* A member that never answers fails alone (RCP_EPEER), cleanly. */
static void t_dead_member(void **state)
{
	struct grp g = {0};
	struct rcp_mcn_stats s;
	int status[NMEM];
	int st2[2];
	uint64_t id;
	size_t len = 256 << 10;
	unsigned char *buf;
	(void)state;
	buf = grp_send(&g, "", 20 * 1000000ull, 0, len, &id);
	run_until_done(&g, 3, status, NMEM); /* member 2 dead */
	CHECK(status[0] == 0 && status[1] == 0);
	CHECK(status[2] == RCP_EPEER);
	rcp_mcn_get_stats(g.snd, &s);
	CHECK(s.members_failed == 1);
	check_claim(g.mem[0], id, buf, len);
	check_claim(g.mem[1], id, buf, len);
	/* the next message goes on without it */
	CHECK(rcp_mcn_send(g.snd, g.names, 2, buf, 1000, &id) == 0);
	run_until_done(&g, 3, st2, 2);
	CHECK(st2[0] == 0 && st2[1] == 0);
	grp_close(&g);
	free(buf);
}

/* ---- forged frames, sent raw to the group ---- */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h ^ (h >> 29);
}

/* A DATA frame as docs/protocol.md describes it. */
static size_t frame(uint8_t *b, int type, uint32_t group, uint32_t epoch, uint32_t msg,
                    uint32_t nfr, uint32_t fsz, uint64_t total, uint64_t bloom, uint32_t idx,
                    size_t plen)
{
	b[0] = 0x43;
	b[1] = 0x4d;
	b[2] = 1;
	b[3] = (uint8_t)type;
	put32(b + 4, group);
	put32(b + 8, epoch);
	put32(b + 12, msg);
	put32(b + 16, nfr);
	put32(b + 20, fsz);
	put64(b + 24, total);
	put64(b + 32, bloom);
	put32(b + 40, idx);
	put32(b + 44, 0);
	memset(b + 48, 0xab, plen);
	return 48 + plen;
}

/* The raw endpoint that forges frames to the group, and its frame. */
struct forge {
	rcp_nic *raw;
	int gp;
	uint32_t grp; /* the group's hash, as the members compute it */
	uint8_t b[2048];
};

static void forge_send(struct forge *f, size_t len)
{
	struct iovec iov = {f->b, len};
	CHECK(rcp_nic_send(f->raw, f->gp, &iov, 1, 0) == 0);
}

/* Sends a DATA frame of epoch 7 to the group (frame()'s arguments). */
static void forge_data(struct forge *f, uint32_t msg, uint32_t nfr, uint32_t fsz, uint64_t total,
                       uint64_t bloom, uint32_t idx, size_t plen)
{
	forge_send(f, frame(f->b, 1, f->grp, 7, msg, nfr, fsz, total, bloom, idx, plen));
}

/* Lets member 0 take what was sent (a bound of rounds), then its stats. */
static void settle(struct grp *g, struct rcp_mcn_stats *s)
{
	for (int r = 0; r < 200; r++)
		rcp_mcn_progress(g->mem[0]);
	rcp_mcn_get_stats(g->mem[0], s);
}

static void t_forged(void **state)
{
	struct grp g = {0};
	struct rcp_mcn_stats s0, s;
	struct rcp_nic_config nc = {.faults = ""};
	struct forge f = {.grp = (uint32_t)fnv(g_group)};
	uint64_t all = ~0ull, none;
	uint64_t me = 1ull << (fnv("member0") % 64);
	size_t n;
	(void)state;
	grp_open(&g, "", 0, 0);
	none = ~me & ~(1ull << (fnv("member1") % 64)) & ~(1ull << (fnv("member2") % 64));
	CHECK(rcp_nic_open("udp:127.0.0.1:", &nc, &f.raw) == 0);
	CHECK(rcp_nic_peer_add_str(f.raw, g_group, &f.gp) == 0);
	rcp_mcn_get_stats(g.mem[0], &s0);
	/* bad: magic, group, idx >= nfr, short payload, nfr inconsistent
	 * with total, oversized total, truncated header */
	n = frame(f.b, 1, f.grp, 7, 1, 2, 1000, 1500, all, 0, 1000);
	f.b[0] ^= 1; /* the magic */
	forge_send(&f, n);
	forge_send(&f, frame(f.b, 1, f.grp + 1, 7, 1, 2, 1000, 1500, all, 0, 1000));
	forge_data(&f, 1, 2, 1000, 1500, all, 2, 500);
	forge_data(&f, 1, 2, 1000, 1500, all, 0, 999);
	forge_data(&f, 1, 3, 1000, 1500, all, 0, 1000);
	forge_data(&f, 1, 2, 1u << 31, 1ull << 31, all, 0, 1000);
	forge_send(&f, 20);
	settle(&g, &s);
	CHECK(s.bad_recv - s0.bad_recv == 7);
	CHECK(s.data_recv == s0.data_recv);
	/* not for this member: foreign */
	forge_data(&f, 1, 2, 1000, 1500, none, 0, 1000);
	settle(&g, &s);
	CHECK(s.foreign_recv - s0.foreign_recv == 1);
	/* a real message 5 of epoch 7, whole; then frames of message 4 and
	 * again of 5 are stale; a changed shape of a partial message is bad */
	forge_data(&f, 5, 2, 1000, 1500, me, 0, 1000);
	forge_data(&f, 5, 2, 1000, 1500, me, 1, 500);
	settle(&g, &s);
	CHECK(s.msgs_recv - s0.msgs_recv == 1);
	forge_data(&f, 4, 2, 1000, 1500, me, 0, 1000);
	forge_data(&f, 5, 2, 1000, 1500, me, 0, 1000);
	settle(&g, &s);
	CHECK(s.stale_recv - s0.stale_recv == 2);
	forge_data(&f, 6, 2, 1000, 1500, me, 0, 1000);
	forge_data(&f, 6, 3, 1000, 2500, me, 1, 1000);
	settle(&g, &s);
	CHECK(s.bad_recv - s0.bad_recv == 8);
	{
		void *p;
		size_t l;
		CHECK(rcp_mcn_claim(g.mem[0], (uint64_t)7 << 32 | 5, &p, &l) == 0);
		CHECK(l == 1500);
		free(p);
	}
	/* acks to the sender from nobody it sends to: stale, nothing repaired */
	rcp_nic_close(f.raw);
	grp_close(&g);
}

/* A member that answers every poll but never moves its acknowledgement
 * (alive, stuck: a raw endpoint that acks "nothing yet") fails after
 * dead_ns like a dead one, and the others complete. */
static void t_stuck_member(void **state)
{
	struct grp g = {0};
	struct rcp_nic_config nc = {.faults = "", .mtu = 9000};
	struct rcp_mcn_stats s;
	rcp_nic *ru, *rg;
	char gaddr[96];
	const char *names[2] = {"member0", "stuck"};
	int status[2], acks = 0, peer = -1;
	uint64_t id;
	long r;
	size_t len = 512 << 10;
	unsigned char *buf = malloc(len);
	(void)state;
	grp_open(&g, "", 20 * 1000000ull, 0);
	snprintf(gaddr, sizeof gaddr, "%s@127.0.0.1", g_group);
	CHECK(rcp_nic_open("udp:127.0.0.1:", &nc, &ru) == 0);
	CHECK(rcp_nic_open(gaddr, &nc, &rg) == 0);
	test_fill(buf, len, g_seed);
	CHECK(rcp_mcn_send(g.snd, names, 2, buf, len, &id) == 0);
	for (r = 0; r < ROUNDS; r++) {
		struct rcp_nic_frame f[16];
		int n;
		rcp_mcn_progress(g.snd);
		rcp_mcn_progress(g.mem[0]);
		n = rcp_nic_recv(rg, f, 16);
		for (int i = 0; i < n; i++) {
			const uint8_t *d = f[i].data;
			uint8_t a[56];
			struct iovec iov = {a, sizeof a};
			if (f[i].len != 48 || d[3] != 2) /* POLLs only */
				continue;
			memcpy(a, d, 40);
			a[3] = 3; /* ACK, cum 0, no ranges, as "stuck" */
			put64(a + 32, fnv("stuck"));
			memset(a + 40, 0, 16);
			iov.iov_len = 48;
			if (peer < 0)
				CHECK(rcp_nic_peer_add(ru, f[i].src, f[i].srclen, &peer) == 0);
			if (rcp_nic_send(ru, peer, &iov, 1, 0) == 0)
				acks++;
		}
		if (n > 0)
			rcp_nic_release(rg, f, n);
		if (rcp_mcn_send_status(g.snd, status, 2) == 0)
			break;
	}
	CHECK(r < ROUNDS);
	CHECK(acks > 0); /* it did answer */
	CHECK(status[0] == 0 && status[1] == RCP_EPEER);
	rcp_mcn_get_stats(g.snd, &s);
	CHECK(s.members_failed == 1);
	check_claim(g.mem[0], id, buf, len);
	rcp_nic_close(rg);
	rcp_nic_close(ru);
	grp_close(&g);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_once_per_frame), cmocka_unit_test(t_repair),
	    cmocka_unit_test(t_slowest_window), cmocka_unit_test(t_dead_member),
	    cmocka_unit_test(t_forged),         cmocka_unit_test(t_stuck_member),
	};
	pid_t pid = getpid();
	g_seed = test_seed(0x6d63617374ull);
	snprintf(g_group, sizeof g_group, "udp:239.254.%u.%u:%u", (unsigned)(pid >> 8) & 255,
	         (unsigned)pid & 255, 40000u + (unsigned)(pid % 20000));
	printf("# group %s seed %#llx\n", g_group, (unsigned long long)g_seed);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
