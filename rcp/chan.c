/*
 * rcp/chan.c — a channel's life: open, reset (for a peer's restart or a
 * failure), fail, claim (an accepted channel the user now holds), close
 * and free.  Every file above it may fail a channel; it calls only the
 * request pools, the RMA events, the epochs and the timer heap below it
 * (rcp/core.c, LAYERS).
 *
 * CHANNELS.  One channel per peer endpoint, keyed by the nic peer index.
 * Static, as in the paper: both sides record the peer locally and start at
 * sequence 1, message 1; nothing is exchanged to set a channel up between
 * peers that both connect.  Each side has an epoch (random per endpoint
 * open); frames carry the sender's epoch and the epoch it believes the
 * receiver has (0: none yet).  The epoch a channel sends (my_epoch) is
 * its conversation's: since every conversation numbers from 1, one that
 * starts again must differ on the wire from the one before, or the old
 * one's frames in flight are taken as the new one's (a receive completed
 * with another message's bytes: fuzz_core).  So a channel the user opens
 * once any conversation of this endpoint ended (so also one closed and
 * opened again; before that the endpoint epoch is as new, and it is the
 * one our cookie challenges name: chan_open), a failed channel, and one
 * reset for a peer's restart after it sent frames with dst_epoch 0 (the
 * new incarnation may take those) take a new epoch, conv_epoch(); the peer
 * sees a restart claim and challenges it (HANDSHAKE): one round trip per
 * new conversation, none on an established channel, no header field.  An
 * accepted channel keeps the endpoint epoch its cookie named.  A frame
 * addressed to another epoch than the channel's is stale and dropped; a proven new epoch of the peer (HANDSHAKE) means
 * the peer restarted: everything pending on the channel fails with
 * RCP_EPEER and the channel starts afresh, and frames of the incarnation
 * it left (gone_epoch; rcpc_chan_ban_epoch sets it for a reconnected
 * channel) are stale from then on, never another restart.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

/* Drops all send/receive state of CH; pending operations complete with
 * ERROR.  Unexpected eager messages already received stay receivable. */
void rcpi_chan_reset(rcp_chan *ch, int error)
{
	rcpc_core *c = ch->core;
	struct list *p, *t;

	chan_retime(ch);
	if (ch->watch) { /* a restart, failure or close: rcp_chan_watch */
		rcp_req *w = ch->watch;
		ch->watch = NULL;
		rcpi_complete(w, error);
	}
	rcpi_rma_chan_reset(ch, error); /* before the lists fail (rmaq.c, RMA EVENTS) */
	for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++)
		slot_free(ch, slot_of(ch, seq));
	ch->wnd_told = 0; /* a restarted peer knows nothing of us */
	rcpi_fail_list(&ch->startq, error);
	rcpi_fail_list(&ch->streamq, error);
	rcpi_fail_list(&ch->busyq, error);
	rcpi_fail_list(&ch->rndv, error);
	ch->next_rx = NULL; /* failed below, as direct or posted */
	if (ch->direct) {
		rcp_req *r = ch->direct; /* the earliest posted (chan.h, DIRECT) */
		ch->direct = NULL;
		rcpi_complete(r, error);
	}
	list_for_each_safe(p, t, &ch->posted)
	{
		rcp_req *r = container_of(p, rcp_req, clink);
		list_del(&r->clink);
		rcpi_complete(r, error);
	}
	list_for_each_safe(p, t, &c->unexp)
	{
		struct unexp *u = container_of(p, struct unexp, link);
		if (u->ch == ch && u->is_rts) {
			rcpi_unexp_release(c, u);
			rcpi_unexp_put(c, u);
		}
	}
	for (uint32_t i = 0; i < RXW; i++) {
		if (ch->ooo[i]) {
			c->reorder_used -= ch->ooo[i]->size;
			free(ch->ooo[i]);
			ch->ooo[i] = NULL;
		}
	}
	memset(ch->rx_bits, 0, sizeof ch->rx_bits);
	ch->rx_gaps = 0;
	ch->reserved = NULL;
	ch->posted_specific = 0;
	ch->ctl_count = ch->ctl_head = 0;
	ch->ready_valid = 0;
	ch->tx_next = ch->tx_una = 1;
	ch->rx_next = 1;
	ch->tx_msg_next = ch->tx_msg_start = ch->rx_msg_next = 1;
	/* CREDITS: the peer assumes CREDITS_INIT until our first header; the
	 * eager messages of the incarnation before stay held (receivable)
	 * and count against the new grant, which the peer's assumption may
	 * exceed by CREDITS_INIT at most (once per restart). */
	ch->incarn++;
	ch->credits_granted = CREDITS_INIT;
	ch->credits_given = c->credits_eff >= ch->unexp_count + CREDITS_INIT
	                        ? c->credits_eff - ch->unexp_count
	                        : CREDITS_INIT;
	ch->credits_used = ch->credits_taken = 0;
	ch->credit_stalled = 0;
	ch->unsent = 0;
	ch->have_sack = 0;
	ch->highest_sacked = 0;
	ch->sacked_out = 0;
	ch->recover = 1;
	ch->ack_now = ch->ack_pending = 0;
	ch->acked_upto = 1;
	ch->sent_blind = 0;
	ch->rx_taken = 0;
}

void rcpi_chan_fail(rcp_chan *ch, int error)
{
	ch->failed = error;
	ch->unplain = 1; /* (chan.h, PLAIN) */
	ch->core->st.timeouts++;
	rcpi_chan_reset(ch, error);
	/* The peer may still hold this conversation (or frames of it be on
	 * their way): whatever this channel sends later is a new one. */
	ch->my_epoch = rcpi_conv_epoch(ch->core);
	rcpi_conv_end(ch->core, ch->peer);
}

/* PER PEER.  Which epoch a channel the user opens sends is decided per
 * peer, not per endpoint: a peer with which no conversation of ours ended
 * cannot have frames of an earlier one of ours in flight, so the endpoint
 * epoch (the one our cookie challenges name) is as new as a
 * conversation's; with a peer whose conversation ended (closed, failed,
 * restarted) only a new conversation epoch tells the next one apart.  A
 * PVM master whose earlier workers exited then still meets a new worker
 * under one epoch, and their first sends may cross (test_rcp_cross).
 *
 * The record is keyed by the nic peer index, and an index names one
 * address only while the nic keeps the peer: so a peer whose conversation
 * ended is kept (rcpc_chan_close does not peer_remove it), and the same
 * address added again gets the same index.  It is never cleared, so
 * nothing a sender does makes us reuse an epoch with a peer we talked to
 * before; a forged sender cannot set it either (it takes a channel that
 * held a conversation: the user's, or an accepted one claimed after a
 * cookie echo, which proves the sender receives at its address).  Memory
 * and nic table entries are bounded: at most ENDED_MAX peers are kept
 * (udp's table holds 4096); past that, or if the array cannot grow, or on
 * a nic without cookie challenges (shm: an unknown sender gets a channel
 * at once, so crossing first sends see one epoch anyway), the endpoint
 * falls back to the rule before: every channel the user opens from then
 * on takes a conversation epoch (conv_ended).  Never the other way.
 * RCP_TEST_EPOCH_PER_ENDPOINT=1 keeps that rule from the start (tests
 * that need a crossing to restart a channel: pvmt restart-reported). */
#define ENDED_MAX 256

/* PEER is kept for its ended conversation (ended[] set). */
static int peer_kept(const rcpc_core *c, int peer)
{
	return peer >= 0 && peer < c->nended && c->ended[peer];
}

int rcpi_peer_ended(const rcpc_core *c, int peer)
{
	return c->conv_ended || peer_kept(c, peer);
}

void rcpi_conv_end(rcpc_core *c, int peer)
{
	if (rcpi_peer_ended(c, peer))
		return;
	if (c->p.epoch_per_endpoint || !c->io.send_to || peer < 0 || c->nretained >= ENDED_MAX ||
	    rcpi_grow_zeroed((void **)&c->ended, &c->nended, 1, peer)) {
		c->conv_ended = 1;
		return;
	}
	c->ended[peer] = 1;
	c->nretained++;
}

/* CH's send ring: nslots slots and their INLINE_CAP bytes each (chan.h,
 * SLOT STORAGE; the latter not written here: its pages are touched only
 * by payloads over SLOT_SMALL bytes).  0 or RCP_ENOMEM, nothing kept
 * then. */
static int slots_alloc(rcp_chan *ch)
{
	ch->slots = calloc(ch->nslots, sizeof *ch->slots);
	ch->inl = malloc((size_t)ch->nslots * INLINE_CAP);
	if (ch->slots && ch->inl)
		return 0;
	free(ch->slots);
	free(ch->inl);
	ch->slots = NULL;
	ch->inl = NULL;
	return RCP_ENOMEM;
}

/* The user has CH now, or a reliable frame came on it: never reclaimed,
 * and it gets its send ring (an accepted channel has none before: a
 * half-open one sends nothing reliable, and thousands of rings cost
 * ~280 KB each on udp). */
void rcpi_chan_claim(rcp_chan *ch)
{
	if (!ch->accepted)
		return;
	ch->accepted = 0;
	ch->core->naccepted--;
	if (!ch->slots && slots_alloc(ch))
		rcpi_chan_fail(ch, RCP_ENOMEM);
}

void rcpi_chan_free(rcp_chan *ch)
{
	rcpc_core *c = ch->core;
	if (ch->accepted) {
		ch->accepted = 0;
		c->naccepted--;
	} else {
		rcpi_conv_end(c, ch->peer); /* its frames may still be on their way */
	}
	list_del(&ch->link);
	list_del(&ch->dlink);
	list_del(&ch->tlink);
	rcpi_heap_del(&c->theap, &ch->tnode);
	c->nchans--;
	if (ch->peer >= 0 && ch->peer < c->npeers)
		c->by_peer[ch->peer] = NULL;
	free(ch->slots);
	free(ch->inl);
	free(ch->ctlq);
	free(ch);
}

/* Room in the timer heap and in rcpc_timers' list of channels to serve
 * for N channels: neither allocates later (TIMERS).  Returns 0 or
 * RCP_ENOMEM. */
static int chans_room(rcpc_core *c, int n)
{
	if (rcpi_heap_reserve(&c->theap, (uint32_t)n))
		return RCP_ENOMEM;
	if (n > c->tdue_cap) {
		int cap = c->tdue_cap ? 2 * c->tdue_cap : 8;
		rcp_chan **v;
		while (cap < n)
			cap *= 2;
		v = realloc(c->tdue, sizeof *v * (size_t)cap);
		if (!v)
			return RCP_ENOMEM;
		c->tdue = v;
		c->tdue_cap = cap;
	}
	return 0;
}

/* LAZY: no send ring yet (an accepted channel: chan_claim makes it). */
int rcpi_chan_open(rcpc_core *c, int peer, uint64_t now, int lazy, rcp_chan **out)
{
	rcp_chan *ch;
	uint32_t n = 1;

	if (peer < 0)
		return RCP_EINVAL;
	if (peer < c->npeers && c->by_peer[peer]) {
		*out = c->by_peer[peer];
		rcpi_chan_claim(*out); /* connected to by the user */
		return 0;
	}
	if (rcpi_grow_zeroed((void **)&c->by_peer, &c->npeers, sizeof *c->by_peer, peer))
		return RCP_ENOMEM;
	/* Room in the timer heap and rcpc_timers' list for one more channel:
	 * neither allocates later (TIMERS). */
	if (chans_room(c, c->nchans + 1))
		return RCP_ENOMEM;
	ch = calloc(1, sizeof *ch);
	if (!ch)
		return RCP_ENOMEM;
	ch->unplain = 1; /* looked at once, then cleared (chan.h, PLAIN) */
	while (n < c->p.rx_frames && n < TXW_MAX)
		n *= 2;
	if (n < 8)
		n = 8;
	ch->nslots = n;
	if (!lazy && slots_alloc(ch)) {
		free(ch);
		return RCP_ENOMEM;
	}
	ch->core = c;
	ch->peer = peer;
	list_init(&ch->dlink);
	list_init(&ch->tlink);
	rcpi_tnode_init(&ch->tnode);
	ch->ord = ++c->chan_ord;
	list_init(&ch->posted);
	list_init(&ch->startq);
	list_init(&ch->streamq);
	list_init(&ch->busyq);
	list_init(&ch->rndv);
	ch->peer_wnd = c->p.rx_frames; /* until the peer says otherwise */
	ch->cwnd = 32 * CWND_ONE;
	ch->ssthresh = UINT32_MAX;
	ch->rto = c->p.rto_init;
	if (c->p.reliable) {
		/* Nothing is lost (send.c, slot_acked): the window is the
		 * ring's from the start, the RTO its floor from the start. */
		ch->cwnd = ch->nslots * CWND_ONE;
		if (ch->rto < c->p.rto_min)
			ch->rto = c->p.rto_min; /* as send.c rcpi_update_rto, no sample */
	}
	ch->last_heard = now;
	rcpi_chan_reset(ch, RCP_EPEER); /* sets sequence numbers, credits */
	/* An accepted channel answers with the epoch its cookie named.  One
	 * the user opens may follow an earlier conversation with this peer
	 * (closed, reopened): a new epoch (CHANNELS), once a conversation
	 * with this peer ended (PER PEER).  Until then the endpoint epoch is as new
	 * as a conversation's, and it is the one an accepting endpoint's
	 * cookie challenges name: a peer whose first frame we challenged
	 * while we opened our own channel to it (first sends crossing) then
	 * sees one epoch of ours, not two, and nothing it sent is failed as
	 * if we had restarted (tests/test_rcp_cross.c). */
	ch->my_epoch = lazy || !rcpi_peer_ended(c, peer) ? c->p.epoch : rcpi_conv_epoch(c);
	list_add_tail(&c->chans, &ch->link);
	c->nchans++;
	c->by_peer[peer] = ch;
	*out = ch;
	return 0;
}

void rcpc_chan_close(rcp_chan *ch, uint64_t now)
{
	rcpc_core *c = ch->core;
	struct list *p, *t;
	int peer = ch->peer;

	(void)now;
	rcpi_chan_reset(ch, RCP_ECLOSED);
	list_for_each_safe(p, t, &c->unexp)
	{
		struct unexp *u = container_of(p, struct unexp, link);
		if (u->ch == ch) {
			rcpi_unexp_release(c, u);
			if (u->data)
				rcpi_buf_put(c, u->data);
			rcpi_unexp_put(c, u);
		}
	}
	rcpi_chan_free(ch);
	/* A peer whose conversation ended keeps its index (PER PEER). */
	if (c->io.peer_remove && !peer_kept(c, peer))
		c->io.peer_remove(c->io.ctx, peer);
}
