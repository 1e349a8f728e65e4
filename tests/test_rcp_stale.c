/*
 * tests/test_rcp_stale.c — a conversation that starts again on a channel
 * must not take the old conversation's frames (issue 18; the fuzz inputs
 * tests/corpus/regress/core/{close-reopen,restart-dst-epoch-0,
 * timeout-revive}).  Through tests/sim.c on virtual time, no loss: a fate
 * hook (sim_set_fate) holds one frame of the old conversation back and
 * delivers it after the new one has begun, numbered like the new one's.
 * Every message carries a pattern of its tag and length, so a receive that
 * completes with another message's bytes is seen.  Deterministic (no link
 * faults; the seed is printed anyway).
 *
 * - t_close_reopen: A closes its channel to B with a frame out and opens
 *   it again; the held frame must not become the new conversation's.
 * - t_restart_blind: A sends before it knows B's epoch (dst_epoch 0), B
 *   restarts, A resets; the held blind frame reaches the new B after A's
 *   next message (numbered alike): if A's send of it completed, B must
 *   have it (not have dropped it as a duplicate), and the one after must
 *   arrive.
 * - t_timeout_revive: A's channel fails by the peer timeout while B's
 *   answers are held; they arrive later, and A's next message must not
 *   fill B's receive of the old one, which must end (an error is fine).
 * - t_restart_speaks_first: A once sent blind to B; B restarts and the new
 *   B speaks first (a PVM task on a reused udp port).  The new B had
 *   taken nothing from A when challenged (its echo says FRESH), so A's
 *   conversation goes on: no new epoch, B's first message is not failed.
 */
#include "rcp_sim_test.h"

#define MS   1000000ull
#define SEED 1u
#define NRB  4

static struct sim_opts opts(void)
{
	struct sim_opts o = pair_opts(SEED, 0, 0, 4096);
	o.params.rx_frames = 32;
	return o;
}

static unsigned char pat(uint64_t tag, size_t len, size_t i)
{
	return (unsigned char)(tag * 31u + len * 7u + i * 13u + 1u);
}

static unsigned char *msg_new(uint64_t tag, size_t len)
{
	unsigned char *b = malloc(len);
	assert_non_null(b);
	for (size_t i = 0; i < len; i++)
		b[i] = pat(tag, len, i);
	return b;
}

static uint32_t get32(const unsigned char *f, size_t off)
{
	return (uint32_t)f[off] | (uint32_t)f[off + 1] << 8 | (uint32_t)f[off + 2] << 16 |
	       (uint32_t)f[off + 3] << 24;
}

struct fx {
	struct sim *s;
	/* fate: frames FROM -> TO of TYPE with sequence SEQ; the first is held
	 * until HOLD_UNTIL, later ones sent before then arrive just after it. */
	int from, to, type;
	uint32_t seq;
	uint64_t hold, hold_until;
	int held;
	/* fate, t_timeout_revive: every frame FROM -> TO sent before
	 * ALL_UNTIL arrives at ALL_UNTIL. */
	uint64_t all_until;
	/* receives at B */
	rcp_req *rb[NRB];
	struct rcp_status sb[NRB];
	int done[NRB];
	unsigned char *bufb[NRB];
	unsigned char *keep[16]; /* send buffers: they outlive the sends */
	int nkeep;
};

static int64_t fate(void *arg, int from, int to, const void *frame, size_t len)
{
	struct fx *x = arg;
	const unsigned char *f = frame;
	uint64_t now = sim_now(x->s);
	if (len < 32 || from != x->from || to != x->to)
		return 0;
	if (x->all_until)
		return now < x->all_until ? (int64_t)(x->all_until - now) : 0;
	if (f[3] != x->type || get32(f, 20) != x->seq)
		return 0;
	if (!x->held) {
		x->held = 1;
		x->hold_until = now + x->hold;
		return (int64_t)x->hold;
	}
	return now < x->hold_until ? (int64_t)(x->hold_until - now + MS) : 0;
}

static void fx_init(struct fx *x)
{
	struct sim_opts o = opts();
	memset(x, 0, sizeof *x);
	x->s = sim_new(&o);
	sim_set_fate(x->s, fate, x);
}

/* B's channel to A (a connected endpoint drops strangers' frames) and
 * B's receives, for any channel and tag.  Called again only after B
 * restarted (its old core and receives are gone): the old buffers go. */
static void post_b(struct fx *x)
{
	(void)sim_chan(x->s, 1, 0);
	for (int i = 0; i < NRB; i++) {
		free(x->bufb[i]);
		x->done[i] = 0;
		x->bufb[i] = calloc(1, 32768);
		assert_int_equal(rcpc_irecv(sim_core(x->s, 1), RCP_ANY_CHAN, RCP_ANY_TAG,
		                            x->bufb[i], 32768, sim_now(x->s), &x->rb[i]),
		                 0);
	}
}

/* Reaps B's receives; fails if one completed with bytes not its own. */
static void check_b(struct fx *x)
{
	for (int i = 0; i < NRB; i++) {
		if (x->done[i] || !x->rb[i] || !rcpc_req_done(x->rb[i], &x->sb[i]))
			continue;
		x->done[i] = 1;
		if (x->sb[i].error)
			continue;
		for (size_t k = 0; k < x->sb[i].len; k++)
			if (x->bufb[i][k] != pat(x->sb[i].tag, x->sb[i].len, k))
				fail_msg("receive %d: tag %llu len %zu, byte %zu is another "
				         "message's (seed %u)",
				         i, (unsigned long long)x->sb[i].tag, x->sb[i].len, k,
				         SEED);
	}
}

/* Receive I of B completed without error with tag TAG. */
static int b_got(struct fx *x, uint64_t tag)
{
	check_b(x);
	for (int i = 0; i < NRB; i++)
		if (x->done[i] && !x->sb[i].error && x->sb[i].tag == tag)
			return 1;
	return 0;
}

static void fx_free(struct fx *x)
{
	sim_free(x->s);
	for (int i = 0; i < NRB; i++)
		free(x->bufb[i]);
	for (int i = 0; i < x->nkeep; i++)
		free(x->keep[i]);
}

static int req_done(void *arg)
{
	rcp_req **r = arg;
	struct rcp_status st;
	return rcpc_req_done(*r, &st) ? (*r = NULL, 1) : 0;
}

struct want {
	struct fx *x;
	uint64_t tag;
};

static int got(void *arg)
{
	struct want *w = arg;
	return b_got(w->x, w->tag);
}

static void send_msg(struct fx *x, rcp_chan *ch, uint64_t tag, size_t len, int *rc, rcp_req **r)
{
	unsigned char *b = msg_new(tag, len);
	assert_true(x->nkeep < 16);
	x->keep[x->nkeep++] = b;
	/* Synchronous: a send completes without error only on the ack, so
	 * "completed, never received" is a lost message. */
	*rc = rcpc_issend(ch, tag, b, len, sim_now(x->s), r);
}

/* A sends tag 1 on CH (its first frame goes out blind: it has not heard
 * B), and hears B's first incarnation (tag 9 into BUFA); *S1 is A's send. */
static void first_exchange(struct fx *x, rcp_chan *ch, rcp_req **s1, unsigned char *bufa,
                           size_t len)
{
	rcp_req *ra, *sb;
	int rc;
	send_msg(x, ch, 1, 100, &rc, s1);
	assert_int_equal(rc, 0);
	assert_int_equal(
	    rcpc_irecv(sim_core(x->s, 0), RCP_ANY_CHAN, RCP_ANY_TAG, bufa, len, sim_now(x->s), &ra),
	    0);
	send_msg(x, sim_chan(x->s, 1, 0), 9, 50, &rc, &sb);
	assert_int_equal(rc, 0);
	assert_int_equal(sim_run(x->s, req_done, &ra, SEC), 0);
}

/* Trigger 1: a channel closed and opened again to the same peer. */
static void t_close_reopen(void **state)
{
	struct fx x;
	struct want w = {&x, 1};
	rcp_req *s1, *s2, *s3, *s4;
	int rc;
	(void)state;

	fx_init(&x);
	x.from = 0, x.to = 1, x.type = RCPW_DATA, x.seq = 2, x.hold = 30 * MS;
	post_b(&x);
	send_msg(&x, sim_chan(x.s, 0, 1), 1, 100, &rc, &s1);
	assert_int_equal(rc, 0);
	send_msg(&x, sim_chan(x.s, 0, 1), 2, 101, &rc, &s2); /* seq 2: held */
	assert_int_equal(rc, 0);
	assert_int_equal(sim_run(x.s, got, &w, SEC), 0);
	assert_int_equal(x.held, 1);

	sim_chan_close(x.s, 0, 1);
	send_msg(&x, sim_chan(x.s, 0, 1), 3, 102, &rc, &s3);
	assert_int_equal(rc, 0);
	send_msg(&x, sim_chan(x.s, 0, 1), 4, 103, &rc, &s4); /* seq 2 again */
	assert_int_equal(rc, 0);
	(void)sim_run(x.s, never, NULL, 2 * SEC);
	check_b(&x);
	/* The old conversation's message 2 is gone with it; the new one's
	 * two messages arrive, each with its own bytes. */
	assert_false(b_got(&x, 2));
	assert_true(b_got(&x, 3));
	assert_true(b_got(&x, 4));
	fx_free(&x);
}

/* Trigger 2: a peer restarting while frames sent to it with dst_epoch 0
 * are on their way. */
static void t_restart_blind(void **state)
{
	struct fx x;
	struct want w = {&x, 3};
	rcp_req *s1, *s2 = NULL, *s3, *sb, *ra2;
	rcp_chan *ch;
	struct rcp_status st;
	unsigned char bufa[256], bufa2[256];
	int rc, rc2;
	(void)state;

	fx_init(&x);
	x.from = 0, x.to = 1, x.type = RCPW_DATA, x.seq = 1, x.hold = 30 * MS;
	ch = sim_chan(x.s, 0, 1);
	/* A's first frame goes out blind and is held; A hears B. */
	first_exchange(&x, ch, &s1, bufa, sizeof bufa);
	assert_int_not_equal(rcpc_chan_peer_epoch(ch), 0);

	/* B restarts and speaks: A challenges it and resets the channel. */
	sim_restart(x.s, 1, 0x2001);
	post_b(&x);
	assert_int_equal(rcpc_irecv(sim_core(x.s, 0), RCP_ANY_CHAN, RCP_ANY_TAG, bufa2,
	                            sizeof bufa2, sim_now(x.s), &ra2),
	                 0);
	send_msg(&x, sim_chan(x.s, 1, 0), 8, 60, &rc, &sb);
	assert_int_equal(rc, 0);
	for (int i = 0; i < 1000 && !rcpc_chan_restarts(ch); i++)
		(void)sim_run(x.s, never, NULL, 10000);
	assert_int_equal(rcpc_chan_restarts(ch), 1);

	/* A's next message, seq 1 again, meets the held blind frame. */
	send_msg(&x, ch, 2, 110, &rc2, &s2);
	(void)sim_run(x.s, never, NULL, SEC);
	assert_int_equal(x.held, 1);
	/* Once settled, a message goes through. */
	send_msg(&x, ch, 3, 120, &rc, &s3);
	assert_int_equal(rc, 0);
	assert_int_equal(sim_run(x.s, got, &w, SEC), 0);
	check_b(&x);
	/* The message A was told went through did. */
	if (!rc2 && rcpc_req_done(s2, &st) && !st.error && !b_got(&x, 2))
		fail_msg("A's send of tag 2 completed, B never received it (seed %u)", SEED);
	assert_true(rcpc_chan_restarts(ch) >= 1);
	fx_free(&x);
}

/* Trigger 3: a channel failed by the peer timeout and then revived on
 * first contact. */
static void t_timeout_revive(void **state)
{
	struct fx x;
	rcp_req *s1, *s2 = NULL;
	struct rcp_status st;
	rcp_chan *ch;
	int rc;
	(void)state;

	fx_init(&x);
	x.from = 1, x.to = 0;
	/* B's frames reach A after its peer timeout (5 s) has failed the
	 * channel. */
	x.all_until = sim_now(x.s) + 6 * SEC + 500 * MS;
	post_b(&x);
	ch = sim_chan(x.s, 0, 1);
	send_msg(&x, ch, 3, 17000, &rc, &s1); /* RTS: B answers READY, held */
	assert_int_equal(rc, 0);
	assert_int_equal(sim_run(x.s, req_done, &s1, 10 * SEC), 0);
	assert_true(sim_now(x.s) < x.all_until);
	assert_int_equal(sim_run(x.s, never, NULL, x.all_until - sim_now(x.s) + 100 * MS), -1);
	/* B's answers have arrived; A sends again if its channel lets it. */
	send_msg(&x, ch, 1, 17000, &rc, &s2);
	(void)sim_run(x.s, never, NULL, 12 * SEC);
	check_b(&x);
	assert_true(x.done[0]); /* B's receive of tag 3 ended (no hang) */
	if (!x.sb[0].error)
		assert_int_equal(x.sb[0].tag, 3);
	if (!rc)
		(void)rcpc_req_done(s2, &st);
	fx_free(&x);
}

/* Trigger 2 without the hazard: the new incarnation speaks first. */
static void t_restart_speaks_first(void **state)
{
	struct fx x;
	rcp_req *s1, *sb, *ra2;
	rcp_chan *ch, *chb;
	struct rcp_status st = {0};
	unsigned char bufa[256], bufa2[256];
	uint32_t my;
	int rc;
	(void)state;

	fx_init(&x);
	x.from = -1; /* no frame held */
	post_b(&x);
	ch = sim_chan(x.s, 0, 1);
	/* A speaks first (blind), B answers: one exchange each way. */
	first_exchange(&x, ch, &s1, bufa, sizeof bufa);
	assert_int_equal(sim_run(x.s, req_done, &s1, SEC), 0);

	/* B restarts and speaks first. */
	sim_restart(x.s, 1, 0x3001);
	post_b(&x);
	assert_int_equal(rcpc_irecv(sim_core(x.s, 0), RCP_ANY_CHAN, RCP_ANY_TAG, bufa2,
	                            sizeof bufa2, sim_now(x.s), &ra2),
	                 0);
	chb = sim_chan(x.s, 1, 0);
	send_msg(&x, chb, 8, 60, &rc, &sb);
	assert_int_equal(rc, 0);
	assert_int_equal(sim_run(x.s, req_done, &ra2, SEC), 0);
	(void)sim_run(x.s, never, NULL, 100 * MS);
	assert_int_equal(rcpc_chan_restarts(ch), 1);
	/* B's message came through and its send was told so. */
	assert_true(rcpc_req_done(sb, &st));
	assert_int_equal(st.error, 0);
	assert_int_equal(rcpc_chan_restarts(chb), 0);
	/* A went on in its conversation: the next message needs no new one. */
	my = rcpc_chan_peer_epoch(chb);
	send_msg(&x, ch, 2, 110, &rc, &s1);
	assert_int_equal(rc, 0);
	assert_int_equal(sim_run(x.s, req_done, &s1, SEC), 0);
	assert_int_equal(rcpc_chan_peer_epoch(chb), my);
	assert_int_equal(rcpc_chan_restarts(chb), 0);
	fx_free(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_close_reopen),
	    cmocka_unit_test(t_restart_blind),
	    cmocka_unit_test(t_timeout_revive),
	    cmocka_unit_test(t_restart_speaks_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
