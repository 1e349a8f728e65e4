/*
 * tests/test_rcp_loss.c — loss recovery of large messages on a fast lossy
 * link (issue 20: with 1% and 5% random loss RCP keeps >= 0.9x and
 * >= 0.75x of its loss-free bandwidth).  The simulator (tests/sim.c) stands
 * in for rcp-cluster's 10 Gbit/s MTU 9000 link: 1.25 GB/s serialised per
 * sender, 10 us one way, random loss from a seeded PRNG (RCP_TEST_SEED
 * overrides; printed on failure).  Deterministic: virtual time, no clock.
 *
 * - t_tail_lost: the last K frames of a 1 MiB message are lost (their
 *   first sends).  Nothing is sent after them, so no later frame names
 *   them: one tail-loss probe resends the last, the receiver's selective
 *   ack names the others, and they are resent at once.  Exactly K frames
 *   resent, one probe, no retransmission timeout.
 * - t_random_loss: 1 MiB ping-pong, 5% and 1% of frames lost each way (data
 *   and acks).  Bandwidth over the simulator's virtual time against the
 *   same run without loss: >= 0.85x at 5% (the issue asks 0.75x), >= 0.95x
 *   at 1%; the frames resent stay below the frames lost plus a few per
 *   message; and the ACK frames stay below the loss-free run's plus three
 *   per frame lost.  The loss floor of the congestion window (rcp/send.c,
 *   LOSS_CWND_MIN) bought the first (halving down to 2 frames on every
 *   window of random loss gave 0.65x at 5%); the last is the receiver's
 *   (rcp/recv.c): a frame held past a gap is acked every ACK_EVERY like an
 *   in-order one, only the first past a new gap at once.  One ACK per frame
 *   held (session 18) sent 86 per message at 5%, 31 without loss: on the
 *   real 10 Gbit/s link a send each on a CPU the frames already fill.
 *   Both also bound RACK's wait (the age of a frame when RACK resends it)
 *   to 1.18x the mean round-trip sample: a hole is resent once a frame
 *   sent after it was delivered, the newest delivered frame's round trip
 *   plus a quarter of the least after it went (RFC 8985), not srtt x 5/4,
 *   a mean that lags the queue each message builds (session 20: 1.02-1.13x
 *   against 1.23-1.32x, ~0.935x of loss-free at 5% against ~0.91x).
 * - t_timeouts: the same at 1 Gbit/s MTU 1500 and 5% loss, where the
 *   32-frame window keeps ~0.4 ms of frames queued and srtt grows to
 *   that: the retransmission timeout must not come before a resent
 *   hole's reordering window (srtt x 5/4) can act (rcp/send.c,
 *   rcpi_update_rto: at least 2 srtt).  At most 0.8 timeouts per
 *   message; without the bound 1.0-1.1.  And >= 0.965x of loss-free: the
 *   window counts the frames in flight the receiver has not selectively
 *   acked (chan.h window(), sacked_out: RFC 6675's pipe), so a hole does
 *   not hold the sender to cwnd frames past it until its resend is acked;
 *   counting every frame past tx_una, with the thinned acks above, gave
 *   0.941-0.953x over seeds 1-8 (this rule 0.978-0.987x).
 * - t_congestion: no random loss, but a tail-drop queue of 48 or 96 jumbo
 *   frames in front of the link (bneck_fate), where the loss-free run
 *   keeps a whole 1 MiB message queued.  The window must come down to
 *   what the queue holds and stay there: at most one frame dropped per
 *   message, >= 0.9x the bandwidth with an unbounded queue.  Without the
 *   halving on a loss RACK finds, 90 frames per message were dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcp/core.h"
#include "rcp/wire.h"
#include "sim.h"
#include "testutil.h"

#define SEC  1000000000ull
#define SIZE (1u << 20)

static int never(void *arg)
{
	(void)arg;
	return 0;
}

/* The two links of perf/cluster_bench.sh. */
struct link {
	uint64_t bandwidth; /* bytes per second */
	uint32_t mtu;
	const char *name;
};
static const struct link G10 = {1250000000, 9000, "10 Gbit/s MTU 9000"};
static const struct link G1 = {125000000, 1500, "1 Gbit/s MTU 1500"};

static struct sim *fast_pair(uint64_t seed, double drop, const struct link *l)
{
	struct sim_opts o = {0};
	struct sim *s;

	o.n = 2;
	o.seed = seed;
	o.link.drop = drop;
	o.link.latency = 10000; /* 10 us one way */
	o.bandwidth = l->bandwidth;
	rcpc_params_default(&o.params);
	o.params.mtu = l->mtu;
	o.params.rx_frames = 256;
	s = sim_new(&o);
	sim_chan(s, 0, 1);
	sim_chan(s, 1, 0);
	return s;
}

/* One message of SIZE bytes FROM -> TO, the receive posted first (READY
 * first: the sender streams at once).  Returns 0, or -1 if it did not
 * finish in 10 s of virtual time. */
static int one_way(struct sim *s, int from, int to, unsigned char *sb, unsigned char *rb)
{
	struct sim_one x[2] = {{0}};

	assert_int_equal(
	    rcpc_irecv(sim_core(s, to), sim_chan(s, to, from), 1, rb, SIZE, sim_now(s), &x[1].r),
	    0);
	assert_int_equal(rcpc_isend(sim_chan(s, from, to), 1, sb, SIZE, sim_now(s), &x[0].r), 0);
	if (sim_run(s, sim_two_done, x, 10 * SEC))
		return -1;
	assert_int_equal(x[0].st.error, 0);
	assert_int_equal(x[1].st.error, 0);
	assert_int_equal(x[1].st.len, SIZE);
	return 0;
}

static uint32_t tx_next(struct sim *s, int from, int to)
{
	char d[1024];
	unsigned una, next;
	rcpc_chan_debug(sim_chan(s, from, to), d, sizeof d);
	assert_int_equal(sscanf(strstr(d, "tx una"), "tx una %u next %u", &una, &next), 2);
	return next;
}

static uint32_t get32(const unsigned char *f, size_t off)
{
	return (uint32_t)f[off] | (uint32_t)f[off + 1] << 8 | (uint32_t)f[off + 2] << 16 |
	       (uint32_t)f[off + 3] << 24;
}

/* The first sends of DATA frames 0 -> 1 with sequence numbers in
 * [lo, hi) are lost. */
struct tail {
	uint32_t lo, hi;
	int dropped;
	unsigned char seen[64];
};

static int64_t tail_fate(void *arg, int from, int to, const void *frame, size_t len)
{
	struct tail *t = arg;
	const unsigned char *f = frame;
	uint32_t seq, i;

	if (from != 0 || to != 1 || len < RCPW_CHLEN || f[3] != RCPW_DATA)
		return 0;
	seq = get32(f, 20);
	i = seq - t->lo;
	if (i >= t->hi - t->lo || i >= sizeof t->seen || t->seen[i]++)
		return 0;
	t->dropped++;
	return -1;
}

static void t_tail_lost(void **state)
{
	uint64_t seed = test_seed(20);
	static unsigned char sb[SIZE], rb[SIZE], back[SIZE];
	(void)state;

	test_fill(sb, SIZE, 3);
	for (uint32_t k = 1; k <= 6; k++) {
		struct sim *s = fast_pair(seed, 0, &G10);
		struct rcp_ep_stats a, b;
		struct tail t = {0};
		uint32_t first, frames;

		/* Warm up (srtt learnt) and count the frames of a message
		 * (the last one way: 0 sends only its DATA frames then). */
		for (int i = 0; i < 3; i++) {
			assert_int_equal(one_way(s, 1, 0, rb, back), 0);
			first = tx_next(s, 0, 1);
			assert_int_equal(one_way(s, 0, 1, sb, rb), 0);
		}
		frames = tx_next(s, 0, 1) - first;
		assert_true(frames > 100 && frames < 130); /* ~117 of 9000 bytes */
		sim_run(s, never, NULL, SEC / 100);
		rcpc_core_stats(sim_core(s, 0), &a);
		t.hi = tx_next(s, 0, 1) + frames;
		t.lo = t.hi - k;
		sim_set_fate(s, tail_fate, &t);
		memset(rb, 0, SIZE);
		if (one_way(s, 0, 1, sb, rb))
			fail_msg("k %u: the message did not arrive (seed %#llx)", k,
			         (unsigned long long)seed);
		assert_int_equal(test_check(rb, SIZE, 3), -1);
		sim_run(s, never, NULL, SEC / 100);
		rcpc_core_stats(sim_core(s, 0), &b);
		if (t.dropped != (int)k || b.retransmits - a.retransmits != k ||
		    b.tlp_probes - a.tlp_probes != 1 || b.timeouts != a.timeouts)
			fail_msg("last %u frames lost (%d dropped): resent %llu, probes %llu, "
			         "timeouts %llu (want %u, 1, 0; seed %#llx)",
			         k, t.dropped, (unsigned long long)(b.retransmits - a.retransmits),
			         (unsigned long long)(b.tlp_probes - a.tlp_probes),
			         (unsigned long long)(b.timeouts - a.timeouts), k,
			         (unsigned long long)seed);
		sim_free(s);
	}
}

struct run {
	uint64_t ns;          /* virtual time of the measured round trips */
	uint64_t resent;      /* frames resent, both ends */
	uint64_t lost;        /* frames the link dropped */
	uint64_t probes, rto; /* tail-loss probes, timeouts, both ends */
	uint64_t acks;        /* ACK frames sent, both ends */
	uint64_t dups;        /* frames received twice (resent needlessly), both ends */
	uint64_t rack;        /* frames RACK resent, both ends */
	uint64_t rack_wait;   /* their ages when resent, summed (virtual ns) */
	uint64_t samples;     /* RTT samples, both ends */
	uint64_t rtt_sum;     /* summed (virtual ns) */
};

static struct sim *cur_sim; /* pingpong_fate's, for a fate that needs the time */

/* ROUNDS 1 MiB round trips 0 -> 1 -> 0 after two to warm up.  FATE (may
 * be NULL) decides each frame's fate before the random loss. */
static void pingpong_fate(uint64_t seed, double drop, const struct link *l, int rounds,
                          int64_t (*fate)(void *, int, int, const void *, size_t), void *arg,
                          struct run *out)
{
	struct sim *s = fast_pair(seed, drop, l);
	static unsigned char b0[SIZE], b1[SIZE];
	struct rcp_ep_stats a[2] = {{0}}, b[2];
	struct sim_stats x = {0}, y;
	uint64_t t0 = 0;

	cur_sim = s;
	if (fate)
		sim_set_fate(s, fate, arg);
	test_fill(b0, SIZE, 5);
	for (int r = -2; r < rounds; r++) {
		if (r == 0) {
			t0 = sim_now(s);
			rcpc_core_stats(sim_core(s, 0), &a[0]);
			rcpc_core_stats(sim_core(s, 1), &a[1]);
			sim_stats(s, &x);
		}
		if (one_way(s, 0, 1, b0, b1) || one_way(s, 1, 0, b1, b0))
			fail_msg("%.0f%% loss, round %d did not finish (seed %#llx)", drop * 100, r,
			         (unsigned long long)seed);
	}
	assert_int_equal(test_check(b0, SIZE, 5), -1);
	out->ns = sim_now(s) - t0;
	rcpc_core_stats(sim_core(s, 0), &b[0]);
	rcpc_core_stats(sim_core(s, 1), &b[1]);
	sim_stats(s, &y);
	out->resent = b[0].retransmits + b[1].retransmits - a[0].retransmits - a[1].retransmits;
	out->probes = b[0].tlp_probes + b[1].tlp_probes - a[0].tlp_probes - a[1].tlp_probes;
	out->rto = b[0].timeouts + b[1].timeouts - a[0].timeouts - a[1].timeouts;
	out->acks = b[0].acks_sent + b[1].acks_sent - a[0].acks_sent - a[1].acks_sent;
	out->lost = y.dropped - x.dropped;
#define D(f) (b[0].f + b[1].f - a[0].f - a[1].f)
	out->dups = D(dup_frames);
	out->rack = D(rack_resends);
	out->rack_wait = D(rack_wait_ns);
	out->samples = D(rtt_samples);
	out->rtt_sum = D(rtt_sum_ns);
#undef D
	sim_free(s);
}

static void pingpong(uint64_t seed, double drop, const struct link *l, int rounds, struct run *out)
{
	pingpong_fate(seed, drop, l, rounds, NULL, NULL, out);
}

/* Bandwidth at DROP against the loss-free run, over virtual time: at least
 * MIN; frames resent at most those lost plus two per round trip;
 * retransmission timeouts per message at most MAX_RTO; and ACK frames at
 * most the loss-free run's plus three per frame lost (a frame held past a
 * gap is acked every ACK_EVERY like an in-order one, only the first past a
 * new gap at once: rcp/recv.c). */
static void lossy(const struct link *l, double drop, double min, double max_rto)
{
	uint64_t seed = test_seed(42);
	const int rounds = 40;
	struct run base, r;
	double ratio, rto;

	pingpong(seed, 0, l, rounds, &base);
	pingpong(seed, drop, l, rounds, &r);
	ratio = (double)base.ns / (double)r.ns;
	rto = r.rto / (2.0 * rounds);
	printf("# %s, %.0f%% loss: %.3fx of loss-free; per message %.2f lost, %.2f resent, "
	       "%.2f probes, %.2f timeouts, %.2f acks (loss-free %.2f), %.2f taken twice; "
	       "%.2f by RACK, wait %.1f us per resend, RTT sample %.1f us\n",
	       l->name, drop * 100, ratio, r.lost / (2.0 * rounds), r.resent / (2.0 * rounds),
	       r.probes / (2.0 * rounds), rto, r.acks / (2.0 * rounds), base.acks / (2.0 * rounds),
	       r.dups / (2.0 * rounds), r.rack / (2.0 * rounds),
	       r.rack ? r.rack_wait / 1e3 / (double)r.rack : 0.0,
	       r.samples ? r.rtt_sum / 1e3 / (double)r.samples : 0.0);
	/* RACK's wait per resend against the mean round trip, both in
	 * virtual time (never the clock): srtt x 5/4 alone waited 1.23-1.32x,
	 * with the rule of the newest delivered frame 1.02-1.13x (seeds 1-8;
	 * rcp/send.c, rack_fast). */
	if (r.rack && r.samples &&
	    (double)r.rack_wait / (double)r.rack > 1.18 * (double)r.rtt_sum / (double)r.samples)
		fail_msg("%s, %.0f%% loss: RACK waited %.1f us per resend, the mean round trip "
		         "%.1f us (want <= 1.18x; seed %#llx)",
		         l->name, drop * 100, r.rack_wait / 1e3 / (double)r.rack,
		         r.rtt_sum / 1e3 / (double)r.samples, (unsigned long long)seed);
	if (ratio < min || r.resent > r.lost + 2 * (uint64_t)rounds || rto > max_rto ||
	    r.acks > base.acks + 3 * r.lost)
		fail_msg(
		    "%s, %.0f%% loss: %.3fx of the loss-free bandwidth (want >= %.3f), "
		    "%llu frames resent for %llu lost, %.2f timeouts per message (want <= %.2f), "
		    "%llu acks (loss-free %llu; want <= that + 3 per frame lost; seed %#llx)",
		    l->name, drop * 100, ratio, min, (unsigned long long)r.resent,
		    (unsigned long long)r.lost, rto, max_rto, (unsigned long long)r.acks,
		    (unsigned long long)base.acks, (unsigned long long)seed);
}

static void t_random_loss(void **state)
{
	(void)state;
	lossy(&G10, 0.05, 0.85, 0.5);
	lossy(&G10, 0.01, 0.95, 0.5);
}

static void t_timeouts(void **state)
{
	(void)state;
	lossy(&G1, 0.05, 0.965, 0.8);
}

/* A tail-drop queue of QUEUE bytes in front of each sender's link: the
 * simulator serialises a node's frames at the link rate (tests/sim.c,
 * enqueue), mirrored here (a frame dropped takes no time on the link); a
 * frame that finds QUEUE bytes waiting ahead of it is dropped. */
struct bneck {
	uint64_t bw, queue;
	uint64_t free_at[2];
	uint64_t overflowed;
};

static int64_t bneck_fate(void *arg, int from, int to, const void *frame, size_t len)
{
	struct bneck *b = arg;
	uint64_t now = sim_now(cur_sim), waiting;
	(void)to;
	(void)frame;
	if (b->free_at[from] < now)
		b->free_at[from] = now;
	waiting = (b->free_at[from] - now) * b->bw / SEC;
	if (waiting + len > b->queue) {
		b->overflowed++;
		return -1;
	}
	b->free_at[from] += (uint64_t)len * SEC / b->bw;
	return 0;
}

/* Real congestion, no random loss: a queue of QFRAMES jumbo frames in
 * front of the 10 Gbit/s link, where the loss-free run keeps a whole 1 MiB
 * message (117 frames) queued.  The window must come down to what the
 * queue holds and stay there: frames the queue drops at most MAX_DROPS per
 * message, bandwidth at least 0.9x the run with an unbounded queue. */
static void congested(uint32_t qframes, double max_drops)
{
	uint64_t seed = test_seed(7);
	const int rounds = 40;
	struct bneck b = {0};
	struct run base, r;
	double ratio, drops;

	b.bw = G10.bandwidth;
	b.queue = (uint64_t)qframes * G10.mtu;
	pingpong(seed, 0, &G10, rounds, &base);
	pingpong_fate(seed, 0, &G10, rounds, bneck_fate, &b, &r);
	ratio = (double)base.ns / (double)r.ns;
	drops = r.lost / (2.0 * rounds);
	printf("# %s, %u-frame queue: %.3fx of unbounded; per message %.2f dropped by the queue "
	       "(%llu in all with warm-up), %.2f resent, %.2f timeouts\n",
	       G10.name, qframes, ratio, drops, (unsigned long long)b.overflowed,
	       r.resent / (2.0 * rounds), r.rto / (2.0 * rounds));
	if (ratio < 0.9 || drops > max_drops)
		fail_msg("%u-frame queue: %.3fx of the unbounded queue's bandwidth (want >= 0.9), "
		         "%.2f frames dropped per message (want <= %.2f; seed %#llx)",
		         qframes, ratio, drops, max_drops, (unsigned long long)seed);
}

static void t_congestion(void **state)
{
	(void)state;
	congested(48, 1.0);
	congested(96, 1.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_tail_lost),
	    cmocka_unit_test(t_random_loss),
	    cmocka_unit_test(t_timeouts),
	    cmocka_unit_test(t_congestion),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
