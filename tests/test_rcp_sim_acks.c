/*
 * tests/test_rcp_sim_acks.c — the protocol core on a simulated network:
 * selective retransmission frame by frame (scripted loss and delay) and
 * acks, credits and epochs a correct peer never sends.
 * Shared helpers: tests/rcp_sim_test.h.
 */
#include "rcp_sim_test.h"

/* ---- selective retransmission, exactly --------------------------------- */

/* Little-endian field access on a frame (rcp/wire.h layout). */
static uint32_t get32(const unsigned char *f, size_t off)
{
	return (uint32_t)f[off] | (uint32_t)f[off + 1] << 8 | (uint32_t)f[off + 2] << 16 |
	       (uint32_t)f[off + 3] << 24;
}

static void set_le(unsigned char *f, size_t off, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		f[off + (size_t)i] = (unsigned char)(v >> (8 * i));
}

/* The fate of DATA frames from 0 to 1 (sim_set_fate): the first
 * transmission of sequence number drop[i] is lost, that of delay[i]
 * arrives late; every transmission is logged in order. */
struct script {
	uint32_t drop[4], delay[4];
	int ndrop, ndelay;
	uint64_t delay_ns;
	int dropped[4], delayed[4];
	uint32_t log[256];
	int nlog;
};

static int64_t script_fate(void *arg, int from, int to, const void *frame, size_t len)
{
	struct script *sc = arg;
	const unsigned char *f = frame;
	uint32_t seq;

	if (from != 0 || to != 1 || len < RCPW_CHLEN || f[3] != RCPW_DATA)
		return 0;
	seq = get32(f, 20);
	if (sc->nlog < 256)
		sc->log[sc->nlog++] = seq;
	for (int i = 0; i < sc->ndrop; i++)
		if (seq == sc->drop[i] && !sc->dropped[i]++)
			return -1;
	for (int i = 0; i < sc->ndelay; i++)
		if (seq == sc->delay[i] && !sc->delayed[i]++)
			return (int64_t)sc->delay_ns;
	return 0;
}

static int all_done(void *arg)
{
	struct sim_one *o = arg;
	int all = 1;
	for (; o->r; o++)
		if (!sim_one_done(o))
			all = 0;
	return all;
}

/* Warms a pair up (srtt learnt, compact headers on), then sends N
 * one-frame messages from 0 to 1 at the same instant, receives posted
 * first, with SC deciding the fate of their frames.  *FIRST is the
 * sequence number of the first of them; *RESENT and *RTO count what the
 * burst cost. */
static void burst(uint64_t seed, struct script *sc, int n, uint32_t *first, uint64_t *resent,
                  uint64_t *rto)
{
	struct sim *s = pair(seed, 0, 0, 4096);
	static unsigned char sb[32][1000], rb[32][1000];
	struct sim_one o[65];
	struct rcp_ep_stats a, b;
	char d[1024];
	unsigned una, next;

	assert_true(n <= 32);
	for (int i = 0; i < 20; i++) {
		struct sim_one x[2] = {{0}};
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG, rb[0],
		                            8, sim_now(s), &x[1].r),
		                 0);
		assert_int_equal(rcpc_issend(sim_chan(s, 0, 1), 1, sb[0], 8, sim_now(s), &x[0].r),
		                 0);
		assert_int_equal(sim_run(s, sim_two_done, x, SEC), 0);
	}
	sim_run(s, never, NULL, SEC / 100); /* every ack in */
	rcpc_chan_debug(sim_chan(s, 0, 1), d, sizeof d);
	assert_int_equal(sscanf(strstr(d, "tx una"), "tx una %u next %u", &una, &next), 2);
	assert_int_equal(una, next);
	*first = next;
	rcpc_core_stats(sim_core(s, 0), &a);
	memset(o, 0, sizeof o);
	sim_set_fate(s, script_fate, sc);
	for (int i = 0; i < n; i++) {
		test_fill(sb[i], sizeof sb[i], (uint64_t)i);
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), (uint64_t)i, rb[i],
		                            sizeof rb[i], sim_now(s), &o[i].r),
		                 0);
	}
	for (int i = 0; i < n; i++)
		assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), (uint64_t)i, sb[i], sizeof sb[i],
		                            sim_now(s), &o[n + i].r),
		                 0);
	if (sim_run(s, all_done, o, 10 * SEC))
		fail_msg("burst of %d did not finish (seed %#llx)", n, (unsigned long long)seed);
	for (int i = 0; i < n; i++) {
		assert_int_equal(o[i].st.error, 0);
		assert_int_equal(test_check(rb[i], sizeof rb[i], (uint64_t)i), -1);
	}
	sim_run(s, never, NULL, SEC / 100);
	rcpc_core_stats(sim_core(s, 0), &b);
	*resent = b.retransmits - a.retransmits;
	*rto = b.timeouts - a.timeouts;
	sim_free(s);
}

static void dump_log(const struct script *sc, uint32_t first, char *buf, size_t len)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < sc->nlog && k + 12 < len; i++)
		k += (size_t)snprintf(buf + k, len - k, " %d", (int)(sc->log[i] - first));
}

/* Sequence numbers are known only after the warm-up: a dry run of the
 * burst of N finds the first, then the real one runs with SC's drop[] and
 * delay[] given as offsets from it (made sequence numbers here); LOG (LEN
 * bytes) gets the frames it sent.  Returns what the dry run resent. */
static uint64_t burst_aimed(uint64_t seed, struct script *sc, int n, uint64_t *resent,
                            uint64_t *rto, char *log, size_t len)
{
	struct script none = {0};
	uint32_t first;
	uint64_t dry;

	burst(seed, &none, n, &first, &dry, rto);
	for (int i = 0; i < sc->ndrop; i++)
		sc->drop[i] += first;
	for (int i = 0; i < sc->ndelay; i++)
		sc->delay[i] += first;
	burst(seed, sc, n, &first, resent, rto);
	dump_log(sc, first, log, len);
	return dry;
}

/* One hole among selectively acked frames, and a lost tail: the hole is
 * resent once, when its reordering window ends (before the tail-loss
 * probe, which resends the tail), and nothing else is resent: no frame
 * the receiver holds, no timeout. */
static void t_sack_one_hole(void **state)
{
	uint64_t seed = test_seed(1000);
	struct script sc = {0};
	uint64_t resent, rto;
	int hole = -1, tail = -1;
	char log[2048];
	(void)state;

	/* The 3rd and the 12th are dropped. */
	sc.drop[0] = 2;
	sc.drop[1] = 11;
	sc.ndrop = 2;
	assert_int_equal(burst_aimed(seed, &sc, 12, &resent, &rto, log, sizeof log), 0);
	for (int i = 12; i < sc.nlog; i++) {
		if (sc.log[i] == sc.drop[0] && hole < 0)
			hole = i;
		if (sc.log[i] == sc.drop[1] && tail < 0)
			tail = i;
	}
	if (resent != 2 || rto != 0 || hole < 0 || tail < 0 || hole > tail)
		fail_msg("one hole and the tail lost: %llu resent (want 2), %llu timeouts (want "
		         "0); frames sent:%s (seed %#llx)",
		         (unsigned long long)resent, (unsigned long long)rto, log,
		         (unsigned long long)seed);
}

/* A frame overtaken by the next ones but not lost (it arrives 1 us late,
 * well inside the reordering window srtt x 5/4) is never resent. */
static void t_sack_reorder_no_resend(void **state)
{
	uint64_t seed = test_seed(1001);
	struct script sc = {0};
	uint64_t resent, rto;
	char log[2048];
	(void)state;

	sc.delay[0] = 2;
	sc.ndelay = 1;
	sc.delay_ns = 1000;
	burst_aimed(seed, &sc, 12, &resent, &rto, log, sizeof log);
	assert_int_equal(sc.delayed[0], 1);
	if (resent != 0 || rto != 0)
		fail_msg("one frame reordered: %llu resent, %llu timeouts (want 0, 0); frames "
		         "sent:%s (seed %#llx)",
		         (unsigned long long)resent, (unsigned long long)rto, log,
		         (unsigned long long)seed);
}

/* Three holes among 24 frames: each resent exactly once, no timeout. */
static void t_sack_three_holes(void **state)
{
	uint64_t seed = test_seed(1002);
	struct script sc = {0};
	uint64_t resent, rto;
	char log[2048];
	(void)state;

	sc.drop[0] = 1;
	sc.drop[1] = 7;
	sc.drop[2] = 8;
	sc.ndrop = 3;
	burst_aimed(seed, &sc, 24, &resent, &rto, log, sizeof log);
	if (resent != 3 || rto != 0)
		fail_msg("three holes: %llu resent (want 3), %llu timeouts (want 0); frames "
		         "sent:%s (seed %#llx)",
		         (unsigned long long)resent, (unsigned long long)rto, log,
		         (unsigned long long)seed);
}

/* ---- frames a correct peer never sends ------------------------------------ */

/* The last full-header frame from one end to the other: a template for
 * forgeries that carry the real session and epochs. */
struct grab {
	int from, to;
	unsigned char f[RCPW_HLEN + 64];
	size_t len;
};

static void grab_rec(void *arg, int from, int to, const void *frame, size_t len)
{
	struct grab *g = arg;
	const unsigned char *p = frame;
	if (from != g->from || to != g->to || len < RCPW_HLEN || len > sizeof g->f ||
	    p[6] != RCPW_HLEN)
		return;
	memcpy(g->f, frame, len);
	g->len = len;
}

/* Builds in OUT a frame from template G: full header of TYPE, FLAGS,
 * SEQ, ACK, MSG, TAG, and PLEN payload bytes PL (DATA: a whole message);
 * CRC'd when the template was.  Returns its length. */
static size_t forge(const struct grab *g, unsigned char *out, uint8_t type, uint16_t flags,
                    uint32_t seq, uint32_t ack, uint32_t msg, uint64_t tag, const void *pl,
                    uint32_t plen)
{
	int crc = (g->f[4] | g->f[5] << 8) & RCPW_F_CRC;
	memcpy(out, g->f, RCPW_HLEN);
	out[3] = type;
	set_le(out, 4, flags | (crc ? RCPW_F_CRC : 0), 2);
	set_le(out, 20, seq, 4);
	set_le(out, 24, ack, 4);
	set_le(out, 36, plen, 4);
	set_le(out, 40, 0, 4);
	set_le(out, 44, msg, 4);
	set_le(out, 48, tag, 8);
	set_le(out, 56, type == RCPW_DATA ? plen : 0, 8);
	if (plen)
		memcpy(out + RCPW_HLEN, pl, plen);
	if (crc)
		set_le(out, 40, rcpw_crc32c(0, out, RCPW_HLEN + plen), 4);
	return RCPW_HLEN + plen;
}

static void chan_seqs(rcp_chan *ch, unsigned *una, unsigned *next, unsigned *rx, unsigned *rxmsg,
                      char *d, size_t dlen)
{
	unsigned gaps;
	rcpc_chan_debug(ch, d, dlen);
	assert_int_equal(sscanf(strstr(d, "tx una"), "tx una %u next %u", una, next), 2);
	assert_int_equal(
	    sscanf(strstr(d, "rx next"), "rx next %u gaps %u msg %u", rx, &gaps, rxmsg), 3);
}

/* Sets up a pair that has exchanged one message each way, recording a
 * full-header frame from FROM to TO in G. */
static struct sim *talked_pair(uint64_t seed, struct grab *g, int from, int to)
{
	struct sim *s = pair(seed, 0, 0, 4096);
	unsigned char b[8] = "abcdefg", r[8];
	memset(g, 0, sizeof *g);
	g->from = from;
	g->to = to;
	sim_set_tap(s, grab_rec, g);
	for (int side = 0; side < 2; side++) {
		struct sim_one x[2] = {{0}};
		assert_int_equal(rcpc_irecv(sim_core(s, !side), sim_chan(s, !side, side),
		                            RCP_ANY_TAG, r, 8, sim_now(s), &x[1].r),
		                 0);
		assert_int_equal(
		    rcpc_issend(sim_chan(s, side, !side), 1, b, 8, sim_now(s), &x[0].r), 0);
		assert_int_equal(sim_run(s, sim_two_done, x, SEC), 0);
	}
	sim_run(s, never, NULL, SEC / 100);
	sim_set_tap(s, NULL, NULL);
	assert_int_not_equal(g->len, 0);
	return s;
}

/* Failure 1 of issue 18: a cumulative ack of frames never sent (tx_una +
 * 2^31 with nothing in flight passed both serial comparisons, and the
 * sender walked 2^31 slots) is counted bad and changes nothing, with
 * nothing in flight and with frames in flight; an old ack is normal. */
static void t_forged_ack(void **state)
{
	uint64_t seed = test_seed(1100);
	struct grab g;
	struct sim *s = talked_pair(seed, &g, 1, 0);
	struct script sc = {0};
	unsigned char f[RCPW_HLEN + 64], big[20000];
	char d0[1024], d1[1024];
	unsigned una, next, rx, rxmsg;
	struct rcp_ep_stats a, b;
	struct sim_one x[2] = {{0}};
	(void)state;

	for (int phase = 0; phase < 2; phase++) {
		uint32_t bogus[6];
		int nb = 0;
		chan_seqs(sim_chan(s, 0, 1), &una, &next, &rx, &rxmsg, d0, sizeof d0);
		assert_int_equal(next != una, phase); /* phase 1: an RTS out */
		bogus[nb++] = una + 0x80000000u;
		bogus[nb++] = next + 1;
		bogus[nb++] = next + 0x7fffffffu;
		bogus[nb++] = next + 0x80000000u;
		if (phase) {
			bogus[nb++] = una + 0x80000001u;
			bogus[nb++] = next + 1000;
		}
		for (int i = 0; i < nb; i++) {
			rcpc_core_stats(sim_core(s, 0), &a);
			sim_inject(s, 1, 0, f,
			           forge(&g, f, RCPW_ACK, 0, 0, bogus[i], 0, 0, NULL, 0));
			rcpc_core_stats(sim_core(s, 0), &b);
			rcpc_chan_debug(sim_chan(s, 0, 1), d1, sizeof d1);
			if (b.bad_frames != a.bad_frames + 1 || strcmp(d0, d1))
				fail_msg("ack %u (tx una %u next %u): bad frames +%llu (want +1); "
				         "before: %s; after: %s (seed %#llx)",
				         bogus[i], una, next,
				         (unsigned long long)(b.bad_frames - a.bad_frames), d0, d1,
				         (unsigned long long)seed);
		}
		/* An old ack (behind tx_una) is no error. */
		rcpc_core_stats(sim_core(s, 0), &a);
		sim_inject(s, 1, 0, f, forge(&g, f, RCPW_ACK, 0, 0, una - 1, 0, 0, NULL, 0));
		rcpc_core_stats(sim_core(s, 0), &b);
		assert_int_equal(b.bad_frames, a.bad_frames);
		if (phase)
			break;
		/* Frames in flight (the RTS of a large message), lost for now. */
		sc.drop[0] = next;
		sc.drop[1] = next + 1;
		sc.drop[2] = next + 2;
		sc.drop[3] = next + 3;
		sc.ndrop = 4;
		sim_set_fate(s, script_fate, &sc);
		test_fill(big, sizeof big, 3);
		assert_int_equal(
		    rcpc_isend(sim_chan(s, 0, 1), 9, big, sizeof big, sim_now(s), &x[0].r), 0);
		sim_set_fate(s, NULL, NULL);
	}
	/* The channel still works: the message arrives whole. */
	{
		static unsigned char rb[20000];
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 9, rb, sizeof rb,
		                            sim_now(s), &x[1].r),
		                 0);
		assert_int_equal(sim_run(s, sim_two_done, x, 10 * SEC), 0);
		assert_int_equal(x[0].st.error, 0);
		assert_int_equal(x[1].st.error, 0);
		assert_int_equal(test_check(rb, sizeof rb, 3), -1);
	}
	sim_free(s);
}

/* The datagram of failure 1 as a stranger sends it: an accepting server
 * gets an ACK from an unknown address, ack = 1 + 2^31 (its new channel
 * would have nothing in flight).  It is refused (counted bad, or stale
 * where strangers are not taken at their word), a channel it opened is
 * left intact, and the server keeps serving its real client. */
static void t_forged_ack_stranger(void **state)
{
	uint64_t seed = test_seed(1102);
	struct sim_opts o = pair_opts(seed, 0, 0, 4096);
	unsigned char f[RCPW_HLEN + 64], b[8] = "1234567", r[8];
	struct rcp_ep_stats a, z;
	struct grab g = {.from = 0, .to = 1};
	struct sim_one x[2] = {{0}};
	struct sim *s;
	rcp_chan *ch;
	(void)state;

	o.n = 3;
	o.accept = 1;
	s = sim_new(&o);
	sim_set_tap(s, grab_rec, &g);
	assert_int_equal(rcpc_irecv(sim_core(s, 1), NULL, RCP_ANY_TAG, r, 8, sim_now(s), &x[1].r),
	                 0);
	assert_int_equal(rcpc_issend(sim_chan(s, 0, 1), 1, b, 8, sim_now(s), &x[0].r), 0);
	assert_int_equal(sim_run(s, sim_two_done, x, SEC), 0);
	sim_set_tap(s, NULL, NULL);
	assert_int_not_equal(g.len, 0);
	forge(&g, f, RCPW_ACK, 0, 0, 1u + 0x80000000u, 0, 0, NULL, 0);
	set_le(f, 12, 0x7777, 4); /* src_epoch: the stranger's */
	set_le(f, 16, 0, 4);
	set_le(f, 40, 0, 4);
	if ((f[4] | f[5] << 8) & RCPW_F_CRC)
		set_le(f, 40, rcpw_crc32c(0, f, RCPW_HLEN), 4);
	rcpc_core_stats(sim_core(s, 1), &a);
	sim_inject(s, 2, 1, f, RCPW_HLEN);
	rcpc_core_stats(sim_core(s, 1), &z);
	if (z.bad_frames + z.stale_frames != a.bad_frames + a.stale_frames + 1)
		fail_msg("stranger's ack of 2^31 frames: bad +%llu stale +%llu (seed %#llx)",
		         (unsigned long long)(z.bad_frames - a.bad_frames),
		         (unsigned long long)(z.stale_frames - a.stale_frames),
		         (unsigned long long)seed);
	ch = rcpc_chan_by_peer(sim_core(s, 1), 2);
	if (ch) {
		char d[1024];
		unsigned una, next, rx, rxmsg;
		chan_seqs(ch, &una, &next, &rx, &rxmsg, d, sizeof d);
		if (una != next || next - 1 > 0x7fffffffu)
			fail_msg("the stranger's channel: %s (seed %#llx)", d,
			         (unsigned long long)seed);
	}
	memset(x, 0, sizeof x);
	assert_int_equal(rcpc_irecv(sim_core(s, 1), NULL, RCP_ANY_TAG, r, 8, sim_now(s), &x[1].r),
	                 0);
	assert_int_equal(rcpc_issend(sim_chan(s, 0, 1), 2, b, 8, sim_now(s), &x[0].r), 0);
	assert_int_equal(sim_run(s, sim_two_done, x, SEC), 0);
	assert_int_equal(x[1].st.tag, 2);
	sim_free(s);
}

/* Credits in a header are taken only forward of what the sender holds and
 * by at most a bound past what it used: two serial comparisons let a
 * value exactly 2^31 past the bound through, for credit without end. */
static void t_forged_credits(void **state)
{
	uint64_t seed = test_seed(1103);
	struct grab g;
	struct sim *s = talked_pair(seed, &g, 1, 0);
	unsigned char f[RCPW_HLEN + 64];
	unsigned una, next, rx, rxmsg, used, granted, want;
	const uint32_t bound = 1000000; /* process_ack_fields */
	char d[1024];
	(void)state;

	chan_seqs(sim_chan(s, 0, 1), &una, &next, &rx, &rxmsg, d, sizeof d);
	assert_int_equal(sscanf(strstr(d, "credits"), "credits %u/%u", &used, &granted), 2);
	for (int k = 0; k < 4; k++) {
		static const uint32_t add[] = {0, 0x80000000u, 1, 0xffffffffu};
		/* The bound itself, then 2^31 past it, one past it, one behind. */
		uint32_t cr = used + bound + add[k];
		unsigned u, gr;
		forge(&g, f, RCPW_ACK, 0, 0, una, 0, 0, NULL, 0);
		set_le(f, 28, cr, 4);
		set_le(f, 40, 0, 4);
		if ((f[4] | f[5] << 8) & RCPW_F_CRC)
			set_le(f, 40, rcpw_crc32c(0, f, RCPW_HLEN), 4);
		sim_inject(s, 1, 0, f, RCPW_HLEN);
		rcpc_chan_debug(sim_chan(s, 0, 1), d, sizeof d);
		assert_int_equal(sscanf(strstr(d, "credits"), "credits %u/%u", &u, &gr), 2);
		want = used + bound;
		if (gr != want)
			fail_msg("credits %u sent, %u used: granted %u, want %u (seed %#llx)", cr,
			         used, gr, want, (unsigned long long)seed);
	}
	sim_free(s);
}

/* A frame addressed to an earlier incarnation of the receiver (dst_epoch
 * nonzero and not its own) is stale: sequence numbers restart at 1, so it
 * would otherwise land in the new conversation.  The same frame with the
 * right dst_epoch is delivered (so the forgery is otherwise valid). */
static void t_stale_dst_epoch(void **state)
{
	uint64_t seed = test_seed(1101);
	struct grab g;
	struct sim *s = talked_pair(seed, &g, 0, 1);
	unsigned char f[RCPW_HLEN + 64], rb[16];
	const char msg[8] = "straggl";
	unsigned una, next, rx, rxmsg;
	uint32_t epoch = get32(g.f, 16);
	struct rcp_ep_stats a, b;
	struct sim_one w = {0};
	char d[1024];
	size_t n;
	(void)state;

	assert_int_not_equal(epoch, 0);
	chan_seqs(sim_chan(s, 1, 0), &una, &next, &rx, &rxmsg, d, sizeof d);
	assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG, rb, sizeof rb,
	                            sim_now(s), &w.r),
	                 0);
	n = forge(&g, f, RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, rx, 0, rxmsg, 77, msg, 8);
	for (int k = 0; k < 2; k++) {
		uint32_t wrong = k ? 0xdead0000u : epoch - 1;
		set_le(f, 16, wrong, 4);
		set_le(f, 40, 0, 4);
		set_le(f, 40, rcpw_crc32c(0, f, n), 4);
		rcpc_core_stats(sim_core(s, 1), &a);
		sim_inject(s, 0, 1, f, n);
		rcpc_flush(sim_core(s, 1), sim_now(s));
		rcpc_core_stats(sim_core(s, 1), &b);
		if (sim_one_done(&w) || b.stale_frames != a.stale_frames + 1)
			fail_msg("frame for epoch %#x (ours %#x): delivered %d, stale +%llu (seed "
			         "%#llx)",
			         wrong, epoch, w.done,
			         (unsigned long long)(b.stale_frames - a.stale_frames),
			         (unsigned long long)seed);
	}
	set_le(f, 16, epoch, 4);
	set_le(f, 40, 0, 4);
	set_le(f, 40, rcpw_crc32c(0, f, n), 4);
	sim_inject(s, 0, 1, f, n);
	rcpc_flush(sim_core(s, 1), sim_now(s));
	assert_int_equal(sim_one_done(&w), 1);
	assert_int_equal(w.st.tag, 77);
	assert_memory_equal(rb, msg, 8);
	sim_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_sack_one_hole),       cmocka_unit_test(t_sack_reorder_no_resend),
	    cmocka_unit_test(t_sack_three_holes),    cmocka_unit_test(t_forged_ack),
	    cmocka_unit_test(t_forged_ack_stranger), cmocka_unit_test(t_forged_credits),
	    cmocka_unit_test(t_stale_dst_epoch),
	};
	return cmocka_run_group_tests_name("rcp core on a simulated network: acks", tests, NULL,
	                                   NULL);
}
