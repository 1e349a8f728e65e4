/*
 * rcp/timers.c — when the core acts without a frame or a call: the timer
 * heap of the channels' deadlines, firing timers, the delayed ack.
 * Above every file of the core but core.c, which calls it (rcp/core.c,
 * LAYERS).
 *
 * TIMERS.  Per channel: RTO of the oldest frame out, the tail-loss probe,
 * the reordering (RACK) timer of a hole, the delayed ack, and liveness:
 * while a channel has work pending, a peer silent for peer_timeout/4 is
 * pinged; silent for peer_timeout, the channel fails and every pending
 * operation on it completes with RCP_EPEER.  "At once" is a deadline too
 * (0): a frame or an ack the nic refused, an ack owed now, and a flush
 * owed to arm the delayed ack: a receive that consumed a held message
 * returns a credit (rcpi_credit_return) and no frame may come in to make
 * the endpoint flush.  (The walk's early bound, below, ran the timers
 * within 20 us of any call, and their flush did it.)
 *
 * The HEAP.  A channel's earliest deadline (chan_deadline) is its key in a
 * binary heap (rcp/heap.c), so the core's next deadline is the heap's top,
 * O(1) to read (rcpc_deadline; see LAZY KEYS), O(log n) to change.  Idle and failed
 * channels have no deadline and are not in it: a master with many peers,
 * most of them idle, pays nothing for those.  Keys are not updated at
 * each of the dozens of places that move a timer: an entry point marks
 * every channel it touches (chan_retime: from chan_dirty, chan_touch,
 * rcpi_chan_reset, rcpi_chan_flush, a cancel, rcpc_ack_owed), and the
 * marked ones get their keys anew (settle) before the deadline is read or
 * timers run; between reads a channel costs one list insertion however
 * often it changes.
 *
 * LAZY KEYS.  A key is a lower bound of its channel's deadline, not
 * always the deadline itself: the small-message paths (isend.c send_small,
 * input_done, a receive posted for a channel) do not mark the channel —
 * the recomputation cost ~100 instructions per frame — but lower its key
 * to the earliest time their change can make due (chan_arm); what they
 * change otherwise only moves deadlines later (an ack piggybacked, a
 * receive matched), which leaves the key early.  An early key is made
 * exact when it comes to the top and is read: rcpc_deadline, and
 * rcpc_due (only keys not after now: what a poll asks after each frame),
 * recompute the top until it is exact (top_exact), and the top's exact key
 * is then the earliest deadline of all.  So timers never fire late, and
 * a key that came due early costs one recomputation, not a run of the
 * timers.  tests/sim.c checks at every step that no key is later than its
 * channel's deadline and that a channel with one is in the heap
 * (rcpc_timers_check).
 *
 * rcpc_timers serves every channel in the heap (every one neither idle
 * nor failed, due or not) and the dirty ones with work (FLUSH, core.c),
 * in the order they were opened: the channels, and the order, of the walk
 * over every channel it replaces, so the simulator's runs are frame for
 * frame the same (but one, whose test posts receives between the
 * simulator's flush and its look at the deadline: the credits they return
 * now go at once, not at the next event).  Serving only the due ones
 * would not be: a flush also arms the reordering timer of a hole resent
 * in the flush before (chan_retransmit arms RACK only for the holes it
 * leaves), which the walk's flushes did at every rcpc_timers call (tried:
 * the simulator's lossy runs then sent a few frames more or fewer).  Idle
 * channels still cost nothing.  Before the heap the deadline was that
 * walk too, and a cheap early bound stood in for it between walks
 * (rcpc_deadline_soon, timer_floor, soon_at, and the endpoint's
 * TIMERS_LATE_NS, which put timers off while requests had just
 * completed): all gone.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

/* Frames taken in order since the last ack went, or an ack asked for. */
static int ack_owed(const rcp_chan *ch)
{
	return ch->acked_upto != ch->rx_next || ch->ack_pending;
}

/* The earliest time a timer of CH is due (0: at once), or UINT64_MAX. */
static inline uint64_t chan_deadline(const rcp_chan *ch)
{
	uint64_t d = UINT64_MAX;
	int work = chan_has_work(ch); /* chan_idle, with the walk of its lists once */

	if (ch->failed || (!work && !ch->ack_now && !ch->ack_pending && !ch->ack_due))
		return UINT64_MAX;
	if (ch->tx_una != ch->tx_next) {
		const struct slot *s = &ch->slots[ch->tx_una & (ch->nslots - 1)];
		uint64_t base = s->sent_at > ch->rto_base ? s->sent_at : ch->rto_base;
		if (s->sent_at && base + ch->rto < d)
			d = base + ch->rto;
		if (!s->sent_at || ch->unsent)
			d = 0; /* frames the nic refused: retry soon */
	}
	if (ch->ack_due && ch->ack_due < d)
		d = ch->ack_due;
	if (ch->rack_at && ch->rack_at < d)
		d = ch->rack_at;
	if (ch->tlp_at && ch->tx_una != ch->tx_next && ch->tlp_at < d)
		d = ch->tlp_at;
	/* An ack to send now, or one to arm: a flush is owed at once.  The
	 * second is a credit returned by a receive (rcpi_credit_return, no
	 * frame in), which only rcpc_flush or rcpc_timers would send. */
	if (ch->ack_now || (ch->ack_pending && !ch->ack_due))
		d = 0;
	if (work && chan_live_at(ch) < d)
		d = chan_live_at(ch);
	return d;
}

/* Sends what CH's window allows and its ack if one is due now, or arms
 * the delayed ack.  The callers took CH off the dirty list. */
inline void rcpi_chan_flush(rcp_chan *ch, uint64_t now)
{
	chan_retime(ch);
	/* The pump's own first look, without the call (most flushes follow
	 * a frame in and have nothing to send). */
	if (!chan_nothing_queued(ch) || rcpi_chan_resend_due(ch))
		rcpi_chan_pump(ch, now);
	else
		ch->rack_at = 0;
	if (ch->failed)
		return;
	if (ch->ack_now) {
		rcpi_send_ack(ch, now);
		ch->ack_due = 0;
	} else if (ch->ack_pending && !ch->ack_due) {
		ch->ack_due = now + ch->core->p.ack_delay;
	}
}

/* Serves CH at NOW: its due timers, then a flush.  The body of the walk
 * over every channel that rcpc_timers once made. */
static void chan_serve(rcp_chan *ch, uint64_t now)
{
	rcpc_core *c = ch->core;

	rcpi_loss_timers(ch, now);
	/* Liveness. */
	if (!ch->failed && chan_has_work(ch)) {
		if (now > ch->last_heard + c->p.peer_timeout) {
			rcpi_chan_fail(ch, RCP_EPEER);
			return;
		}
		if (now > ch->last_heard + c->p.peer_timeout / 4 &&
		    now >= ch->last_ping + c->p.peer_timeout / 8)
			rcpi_send_ping(ch, now);
	}
	if (ch->ack_due && now >= ch->ack_due) {
		ch->ack_due = 0;
		if (ack_owed(ch))
			ch->ack_now = 1;
	}
	list_del(&ch->dlink);
	rcpi_chan_flush(ch, now);
}

/* Marked channels get their keys anew (TIMERS). */
static inline void settle(rcpc_core *c)
{
	while (!list_empty(&c->retime)) {
		rcp_chan *ch = container_of(c->retime.next, rcp_chan, tlink);
		list_del(&ch->tlink);
		rcpi_heap_set(&c->theap, &ch->tnode, chan_deadline(ch));
	}
}

static int ord_cmp(const void *a, const void *b)
{
	const rcp_chan *x = *(rcp_chan *const *)a, *y = *(rcp_chan *const *)b;
	return x->ord < y->ord ? -1 : x->ord > y->ord;
}

/* Channels in the order they were opened (c->chans' order): insertion
 * sort for the handful a small endpoint serves, qsort past that. */
static void sort_by_ord(rcp_chan **v, int n)
{
	if (n > 16) {
		qsort(v, (size_t)n, sizeof *v, ord_cmp);
		return;
	}
	for (int i = 1; i < n; i++) {
		rcp_chan *x = v[i];
		int j = i;
		for (; j > 0 && v[j - 1]->ord > x->ord; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

int rcpc_timers(rcpc_core *c, uint64_t now)
{
	struct list *p;
	int n = 0;

	if (c->naccepted && now >= c->sweep_at)
		rcpi_chans_sweep(c, now);
	settle(c);
	/* Every channel with a timer armed, due or not: the walk served
	 * them all (TIMERS). */
	for (uint32_t i = 0; i < c->theap.n; i++) {
		rcp_chan *ch = container_of(c->theap.v[i], rcp_chan, tnode);
		ch->tdue = 1;
		c->tdue[n++] = ch;
	}
	/* And the dirty ones with work: the walk flushed them too. */
	for (p = c->dirty.next; p != &c->dirty; p = p->next) {
		rcp_chan *ch = container_of(p, rcp_chan, dlink);
		if (!ch->tdue && !ch->failed && !chan_idle(ch)) {
			ch->tdue = 1;
			c->tdue[n++] = ch;
		}
	}
	sort_by_ord(c->tdue, n);
	for (int i = 0; i < n; i++) {
		c->tdue[i]->tdue = 0;
		chan_serve(c->tdue[i], now);
	}
	core_push(c);
	return rcpi_take_completed(c);
}

int rcpc_ack_owed(rcpc_core *c, uint64_t now)
{
	struct list *p;
	int sent = 0, cleared = 0;

	for (p = c->chans.next; p != &c->chans; p = p->next) {
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || !ch->ack_due)
			continue;
		chan_retime(ch);
		ch->ack_due = 0;
		cleared = 1;
		if (ack_owed(ch)) {
			rcpi_send_ack(ch, now);
			sent = 1;
		}
	}
	if (sent)
		core_push(c);
	return cleared;
}

int rcpc_timers_check(const rcpc_core *c)
{
	int bad = 0;
	for (const struct list *p = c->chans.next; p != &c->chans; p = p->next) {
		const rcp_chan *ch = container_of(p, rcp_chan, link);
		uint64_t d = chan_deadline(ch);
		if (!list_empty(&ch->tlink))
			continue; /* marked: keyed anew before the next read */
		/* A key is a lower bound (chan_arm): never later than the
		 * deadline; a channel with one is in the heap. */
		if (d < ch->tnode.at || (d != UINT64_MAX && ch->tnode.idx == RCPI_HEAP_NONE))
			bad++;
	}
	return bad;
}

/* Keys are lower bounds (chan_arm): the top's is made exact, and the
 * next top's, while they are not after LIMIT.  The top's exact key is then
 * the earliest deadline of all (every other key is later, and no deadline
 * is earlier than its key).  Returns the top's key, or UINT64_MAX. */
static uint64_t top_exact(rcpc_core *c, uint64_t limit)
{
	for (;;) {
		struct rcpi_tnode *t = rcpi_heap_top(&c->theap);
		uint64_t d;
		if (!t || t->at > limit)
			return t ? t->at : UINT64_MAX;
		d = chan_deadline(container_of(t, rcp_chan, tnode));
		if (d == t->at)
			return d;
		rcpi_heap_set(&c->theap, t, d);
	}
}

uint64_t rcpc_deadline(rcpc_core *c)
{
	uint64_t d = c->naccepted ? c->sweep_at : UINT64_MAX, t;

	settle(c);
	t = top_exact(c, UINT64_MAX);
	return t < d ? t : d;
}

static __attribute__((noinline)) int due_slow(rcpc_core *c, uint64_t now)
{
	settle(c);
	if (c->naccepted && now >= c->sweep_at)
		return 1;
	return top_exact(c, now) <= now;
}

/* Asked after every frame: with no channel marked and no accepted one
 * (no sweep), a top key after NOW answers it without a call (a key is a
 * lower bound: no deadline is earlier). */
inline int rcpc_due(rcpc_core *c, uint64_t now)
{
	if (RCPI_LIKELY(list_empty(&c->retime) && !c->naccepted)) {
		const struct rcpi_tnode *t = rcpi_heap_top(&c->theap);
		if (!t || t->at > now)
			return 0;
	}
	return due_slow(c, now);
}
