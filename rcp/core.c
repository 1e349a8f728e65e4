/*
 * rcp/core.c — the reduced communication protocol, without I/O: its entry
 * points.  The protocol itself lives in the files below this one; their
 * head comments are its design (CHANNELS chan.c, HANDSHAKE handshake.c,
 * SMALL SENDS isend.c, RELIABILITY and WINDOW send.c, RECEIVING recv.c,
 * MESSAGES, CREDITS and DEMAND msg.c, TIMERS timers.c, COMPLETION req.c);
 * docs/protocol.md is the wire format.
 *
 * LAYERS.  The core is split into files of one concept each; each file
 * calls only the files below it (arrows: "calls"), and rcp/chan.h holds
 * the structures they share.  A lower file that must reach up gets no
 * callback: what it needs was moved down (slot_free, chan_dirty,
 * chan_retime are helpers in chan.h; failing a channel is chan.c, below
 * every file that fails one).
 *
 *   core.c       public rcpc_* entry points: core and channel API, irecv,
 *     |          cancel, probe; rcpc_input dispatch; flush
 *   isend.c      posting a send: isend, issend, isendv, detached, mcast;
 *     |          a small one in one pass (SMALL SENDS)
 *   timers.c     timer heap of channel deadlines, rcpc_timers, delayed acks
 *     |
 *   express.c    the plain frame of a small exchange in one pass, in and
 *     |          out (EXPRESS)
 *   rma.c        rcpc_rma_done: a transfer is back, its FIN, its completion
 *     |
 *   handshake.c  admission of each frame: epochs, restart challenges,
 *     |          accept cookies, reclaim of half-open channels
 *   recv.c       receive window, bitmap, reorder store, SACK, in-order
 *     |          delivery
 *   msg.c        eager/RTS/READY/split/RMA on the receiver's side,
 *     |          matching, unexpected messages, credits
 *   start.c      pump (what goes out next), a message's first frame
 *     |
 *   fallback.c   a message whose RMA failed moves by frames
 *     |
 *   send.c       frames out, send ring and slots, RACK/TLP/RTO, cwnd,
 *     |          acks of our frames
 *   chan.c       channel open, reset, fail, claim, close, free
 *     |
 *   rmaq.c       RMA transfers as events: queue, tokens, rcpc_rma_take
 *     |
 *   req.c, epoch.c, heap.c   requests and completion, pools; keyed
 *                epochs, nonces, cookies; the binary heap
 *
 * (docs/core.md has the same map with a walk of one message through it.)
 *
 * FLUSH.  rcpc_flush() visits only the channels on the core's dirty list,
 * not every channel: an endpoint with many peers pays per frame for the
 * channel the frame came on.  A channel goes on the list (chan_dirty)
 * when a frame of it is taken in, when a control frame is queued on it,
 * when it returns a credit, when a message joins its start or stream
 * queue, and when the nic refuses its ack; rcpc_timers flushes those
 * that are not idle or failed with the channels it serves, and takes them
 * off (TIMERS).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

void rcpc_params_default(struct rcpc_params *p)
{
	memset(p, 0, sizeof *p);
	p->mtu = 16384;
	p->rx_frames = 64;
	p->session = 0x52435031u; /* "RCP1" */
	p->epoch = 1;
	p->peer_timeout = 5000000000ull;
	p->rto_min = 250000;     /* 250 us: LAN round trips are tens of us */
	p->rto_max = 1000000000; /* 1 s */
	p->rto_init = 10000000;  /* 10 ms before the first sample */
	p->ack_delay = 50000;    /* 50 us */
	p->credits = 64;
	p->unexp_bytes = 4u << 20;
	p->inline_max = 2048;
	p->send_buf = 1u << 20;
	p->rma_min = 65536; /* docs/protocol.md: where RMA starts to pay */
	p->rma_split = 65536;
	p->reorder_bytes = 8u << 20;
	p->time_wait = 50000000; /* 50 ms: core.c, CLOSE */
}

/* The end of a frame taken in on CH (FLUSH, TIMERS).  In the common case
 * of a small exchange — nothing of ours out, nothing queued, no ack owed
 * at once — what rcpi_chan_flush would do is done here: the reordering
 * timer cleared, the delayed ack armed; and the channel's key is lowered
 * to its earliest deadline now possible (the delayed ack, liveness while
 * it has work) rather than recomputed: the frame moved every other
 * deadline later (its acks end RTO and probe, last_heard is now) or set
 * none.  Else it goes on the dirty list (flushed and keyed anew).
 * (Setting the exact key here and in send_small instead, as their state
 * allows, cost more: +90 instructions per round trip, a heap move on
 * every frame.) */
static RCPI_HOT_INLINE void input_done(rcp_chan *ch, uint64_t now)
{
	const rcpc_core *c = ch->core;
	uint64_t at = UINT64_MAX;

	/* (chan_nothing_queued with PLAIN, chan.h: a clear word says no
	 * failure, control frame or READY put.) */
	if ((ch->unplain && (ch->failed || ch->ctl_count || ch->rma_start)) ||
	    ch->tx_una != ch->tx_next || ch->ack_now || !list_empty(&ch->startq) ||
	    !list_empty(&ch->streamq) || !list_empty(&ch->dlink)) {
		chan_dirty(ch);
		return;
	}
	ch->rack_at = 0;
	if (ch->ack_pending && !ch->ack_due)
		ch->ack_due = now + c->p.ack_delay;
	if (ch->ack_due)
		at = ch->ack_due;
	/* (The comparison first: the delayed ack is sooner than the ping
	 * almost always, and chan_has_work reads seven fields.) */
	if (ch->last_heard + c->p.peer_timeout / 4 < at && chan_has_work(ch))
		at = ch->last_heard + c->p.peer_timeout / 4;
	chan_arm(ch, at);
}

/* SMALL RECEIVES.  A whole message in one frame (eager DATA), the next in
 * sequence with nothing held past a gap, the channel's next message, with
 * a credit it took, for a posted receive: what recv.c process_reliable and
 * msg.c process_inorder would do, here without their general cases
 * (holes, held frames, other frame types, unexpected messages, READY
 * promises).  The receive is the channel's direct one (chan.h, DIRECT)
 * or, when it has none, the one the posted lists give (a receive for
 * any channel that could take its message leaves it none: any_could_take).
 * Returns 1 if H was taken so, else 0 (nothing changed). */
static RCPI_HOT_INLINE int input_small(rcp_chan *ch, const struct rcpw_hdr *h,
                                       const unsigned char *pl)
{
	rcp_req *r = ch->direct;
	size_t n;

	if ((h->flags & (RCPW_F_FIRST | RCPW_F_EAGER | RCPW_F_STREAM)) !=
	        (RCPW_F_FIRST | RCPW_F_EAGER) ||
	    h->type != RCPW_DATA || h->seq != ch->rx_next || ch->rx_gaps ||
	    h->msg != ch->rx_msg_next || ch->credits_taken == ch->credits_given || ch->reserved)
		return 0;
	if (r) {
		if (!tag_match(r->tag, h->tag))
			return 0;
	} else if (!ch->posted_specific && list_empty(&ch->core->posted_any)) {
		return 0; /* unexpected */
	} else if (!(r = rcpi_match_posted(ch->core, ch, h->tag))) {
		return 0;
	}
	ch->rx_taken = 1;
	if (h->flags & RCPW_F_ACKREQ)
		ch->ack_now = 1;
	ch->rx_msg_next++;
	ch->credits_taken++;
	/* The receive is matched (msg.c recv_matched, unpost). */
	recv_take(ch, r);
	r->src = ch;
	r->msg = h->msg;
	r->tag = h->tag;
	r->total = h->len;
	n = h->len < r->len ? h->len : r->len;
	copy_bytes(r->buf, pl, n);
	r->got = h->len;
	rcpi_complete_recv(r, h->len);
	/* Its credit goes back on the ack input_done arms (CREDITS). */
	ch->credits_given++;
	ch->rx_next++;
	if (++ch->since_ack >= ACK_EVERY)
		ch->ack_now = 1;
	ch->ack_pending = 1;
	return 1;
}

void rcpc_input(rcpc_core *c, int peer, const void *src, size_t srclen, const void *frame,
                size_t len, uint64_t now)
{
	struct rcpw_hdr h;
	const unsigned char *pl;
	enum rcpw_verdict v;
	rcp_chan *ch;

	c->st.frames_recv++;
	c->now = now;
	/* The plain frame of a small exchange, in one pass (express.c). */
	if ((ch = rcpi_input_express(c, peer, frame, len, now))) {
		input_done(ch, now);
		return;
	}
	v = rcpw_parse(frame, len, c->p.session, c->p.crc, &h, &pl);
	if (v != RCPW_OK) {
		if (v == RCPW_BAD_SESSION)
			c->st.stale_frames++;
		else
			bad(c);
		return;
	}
	if (RCPI_UNLIKELY(!h.src_epoch)) {
		c->st.stale_frames++; /* every sender has an epoch */
		return;
	}
	ch = rcpi_admit(c, peer, src, srclen, &h, now);
	if (!ch)
		return;
	ch->last_heard = now;
	ch->unreachable = 0;
	if (rcpi_process_ack_fields(ch, &h, now)) {
		chan_dirty(ch);
		bad(c); /* acks frames never sent: forged or broken */
		return;
	}
	switch (h.type) {
	case RCPW_ACK: rcpi_process_sack(ch, &h, pl, now); break;
	case RCPW_PING:
		if (h.arg) {
			/* A challenge: echo it at once, then resend what the
			 * peer dropped while it did not know us. */
			ch->echo = h.arg;
			rcpi_send_ack(ch, now);
			rcpi_chan_resend_all(ch, now);
		} else {
			ch->ack_now = 1;
		}
		break;
	default:
		if (RCPI_UNLIKELY(ch->accepted))
			rcpi_chan_claim(ch); /* a message may move: the user may get CH */
		if (!ch->failed && !input_small(ch, &h, pl))
			rcpi_process_reliable(ch, &h, pl);
	}
	input_done(ch, now);
}

static __attribute__((noinline)) void flush_dirty(rcpc_core *c, uint64_t now)
{
	struct list todo;
	/* Take the list first: what chan_flush touches again (an ack the
	 * nic refused) waits for the next flush instead of looping here. */
	list_take(&todo, &c->dirty);
	while (!list_empty(&todo)) {
		rcp_chan *ch = container_of(todo.next, rcp_chan, dlink);
		list_del(&ch->dlink);
		rcpi_chan_flush(ch, now);
	}
}

/* (After a small exchange's frame nothing is dirty: input_done did the
 * flush's work.  The look inline, LTO taking it into the endpoint's
 * progress, the walk out of line: -20 instructions a frame, session 20.) */
RCPI_HOT_INLINE int rcpc_flush(rcpc_core *c, uint64_t now)
{
	if (!list_empty(&c->dirty))
		flush_dirty(c, now);
	core_push(c);
	return rcpi_take_completed(c);
}

int rcpc_core_new(const struct rcpc_params *p, const struct rcpc_io *io, void *owner,
                  rcpc_core **out)
{
	rcpc_core *c;

	if (!p || !io || !io->send || !out || p->mtu <= RCPW_HLEN || !p->rx_frames || !p->epoch)
		return RCP_EINVAL;
	c = calloc(1, sizeof *c);
	if (!c)
		return RCP_ENOMEM;
	c->p = *p;
	if (c->p.inline_max > INLINE_CAP)
		c->p.inline_max = INLINE_CAP;
	c->io = *io;
	c->owner = owner;
	c->payload_max = p->mtu - RCPW_HLEN;
	c->small_max = c->p.inline_max < c->payload_max ? c->p.inline_max : c->payload_max;
	list_init(&c->chans);
	list_init(&c->dirty);
	c->cbtail = &c->cbq;
	list_init(&c->retime);
	list_init(&c->posted_any);
	list_init(&c->unexp);
	list_init(&c->free_unexp);
	{
		/* CREDITS: the grant fits both bounds, one frame buffer and
		 * one record per message; never below what senders assume. */
		size_t per = c->payload_max + sizeof(struct unexp);
		size_t n;
		if (!c->p.credits)
			c->p.credits = 64;
		if (!c->p.unexp_bytes)
			c->p.unexp_bytes = 4u << 20;
		n = c->p.unexp_bytes / per;
		if (n > c->p.credits)
			n = c->p.credits;
		if (n > CREDITS_CAP)
			n = CREDITS_CAP;
		c->credits_eff = n < CREDITS_INIT ? CREDITS_INIT : (uint32_t)n;
	}
	*out = c;
	return 0;
}

void *rcpc_core_owner(const rcpc_core *c)
{
	return c->owner;
}

void rcpc_core_stats(const rcpc_core *c, struct rcp_ep_stats *st)
{
	*st = c->st;
}

void rcpc_core_shutdown(rcpc_core *c)
{
	struct list *p, *t;

	list_for_each_safe(p, t, &c->chans)
	{
		rcp_chan *ch = container_of(p, rcp_chan, link);
		rcpi_chan_reset(ch, RCP_ECLOSED);
	}
	/* The receives for any channel (each channel's failed with it). */
	list_for_each_safe(p, t, &c->posted_any)
	{
		rcp_req *r = container_of(p, rcp_req, clink);
		list_del(&r->clink);
		rcpi_complete(r, RCP_ECLOSED);
	}
	rcpi_rma_shutdown(c); /* transfers the glue still held (rmaq.c) */
}

void rcpc_core_free(rcpc_core *c)
{
	struct list *p, *t;

	if (!c)
		return;
	rcpc_core_shutdown(c);
	list_for_each_safe(p, t, &c->unexp)
	{
		struct unexp *u = container_of(p, struct unexp, link);
		free(u->data);
		free(u);
	}
	list_for_each_safe(p, t, &c->free_unexp)
	{
		free(container_of(p, struct unexp, link));
	}
	list_for_each_safe(p, t, &c->chans)
	{
		rcpi_chan_free(container_of(p, rcp_chan, link));
	}
	for (int i = 0; i < c->nfree_bufs; i++)
		free(c->free_bufs[i]);
	free(c->free_bufs);
	for (int i = 0; i < c->nslabs; i++)
		free(c->req_slabs[i]);
	free(c->req_slabs);
	free(c->by_peer);
	free(c->ended);
	rcpi_heap_free(&c->theap);
	free(c->tdue);
	rcpi_rma_free(c);
	free(c);
}

int rcpc_chan_open(rcpc_core *c, int peer, uint64_t now, rcp_chan **out)
{
	return rcpi_chan_open(c, peer, now, 0, out);
}

void rcp_chan_set_user(rcp_chan *ch, void *user)
{
	if (ch)
		ch->user = user;
}

void *rcp_chan_get_user(const rcp_chan *ch)
{
	return ch ? ch->user : NULL;
}

rcp_chan *rcpc_chan_by_peer(rcpc_core *c, int peer)
{
	rcp_chan *ch = peer >= 0 && peer < c->npeers ? c->by_peer[peer] : NULL;
	if (ch)
		rcpi_chan_claim(ch); /* the caller holds it now: never reclaimed */
	return ch;
}

rcpc_core *rcpc_chan_core(const rcp_chan *ch)
{
	return ch->core;
}

int rcpc_chan_peer(const rcp_chan *ch)
{
	return ch->peer;
}

unsigned rcpc_chan_restarts(const rcp_chan *ch)
{
	return ch->restarts;
}

int rcpc_chan_watch(rcp_chan *ch, rcp_req **req)
{
	rcp_req *r;
	if (ch->watch)
		return RCP_EBUSY;
	if (!(r = rcpi_req_alloc(ch->core)))
		return RCP_ENOMEM;
	r->kind = REQ_WATCH;
	r->chan = ch;
	ch->watch = *req = r;
	return 0;
}

uint32_t rcpc_chan_peer_epoch(const rcp_chan *ch)
{
	return ch->peer_epoch;
}

void rcpc_chan_ban_epoch(rcp_chan *ch, uint32_t epoch)
{
	ch->gone_epoch = epoch;
}

void rcpc_set_crowded(rcpc_core *c, int crowded)
{
	c->crowded = crowded;
}

/* Could a receive posted for any channel take a message of TAG (then a
 * channel's receive of TAG is not direct: chan.h, DIRECT)?  Relinked PVM's
 * HELLO and FENCE receives cannot take its data (session 21). */
static RCPI_HOT_INLINE int any_could_take(const rcpc_core *c, uint64_t tag)
{
	for (const struct list *p = c->posted_any.next; p != &c->posted_any; p = p->next)
		if (tag == RCP_ANY_TAG || tag_match(container_of(p, rcp_req, clink)->tag, tag))
			return 1;
	return 0;
}

/* rcpc_irecv's body, inlined into both its callers (rcpc_irecv_next
 * calls it too: out of line, the common receive paid a call).  NEXT: a
 * NEXT receive, marked before rcpi_try_ready looks at it. */
static RCPI_HOT_INLINE int irecv(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len,
                                 uint64_t now, rcp_req **req, int next)
{
	struct list *p;
	rcp_req *r;

	if (!c || !req || (!buf && len) || (ch && ch->core != c))
		return RCP_EINVAL;
	if (ch && ch->failed)
		return ch->failed;
	c->now = now;
	r = rcpi_req_alloc(c);
	if (!r)
		return RCP_ENOMEM;
	r->kind = REQ_RECV;
	r->chan = ch;
	r->tag = tag;
	r->buf = buf;
	r->len = len;
	*req = r;
	/* Unexpected messages first, in arrival order. */
	for (p = c->unexp.next; p != &c->unexp; p = p->next) {
		struct unexp *u = container_of(p, struct unexp, link);
		if ((ch && u->ch != ch) || !tag_match(tag, u->tag))
			continue;
		if (rcpi_unexp_release(c, u))
			rcpi_credit_return(u->ch);
		r->src = u->ch;
		r->msg = u->msg;
		r->tag = u->tag;
		r->total = u->total;
		if (!u->is_rts) {
			if (u->total)
				memcpy(r->buf, u->data, u->total < len ? u->total : len);
			if (u->data)
				rcpi_buf_put(c, u->data);
			rcpi_complete(r, u->total > len ? RCP_ETRUNC : 0);
			rcpi_unexp_put(c, u);
			return 0;
		}
		chan_touch(u->ch, now);
		/* A matched RTS: r is not posted; rts_matched expects it
		 * "unposted" — keep the bookkeeping consistent. */
		r->chan = NULL;
		list_init(&r->link);
		{
			rcp_chan *src = u->ch;
			int rma = u->rma;
			uint32_t msg = u->msg;
			uint64_t t = u->tag;
			size_t total = u->total;
			unsigned char rkey[RKEY_MAX];
			uint32_t rkl = u->rkeylen;
			memcpy(rkey, u->rkey, rkl);
			rcpi_unexp_put(c, u);
			r->state = R_POSTED;
			rcpi_rts_matched(src, r, msg, t, total, rma, rkey, rkl);
			r->chan = ch;
			rcpi_chan_pump(src, now);
			core_push(c);
		}
		return 0;
	}
	r->state = R_POSTED;
	r->pseq = ++c->post_seq;
	if (ch && !ch->direct && len <= c->payload_max && list_empty(&ch->posted) &&
	    !any_could_take(c, tag))
		ch->direct = r; /* (chan.h, DIRECT) */
	else
		list_add_tail(ch ? &ch->posted : &c->posted_any, &r->clink);
	if (ch) {
		if (next)
			ch->next_rx = r;
		/* Posted for CH: work, so its liveness timer runs (TIMERS). */
		chan_arm(ch, chan_work_from(ch, now));
		ch->posted_specific++;
		/* Only a receive larger than a frame can be promised by READY;
		 * skip the scan for the common small one. */
		if (len > c->payload_max || ch->posted_specific > 1)
			rcpi_try_ready(ch);
		/* Waiting behind messages it holds (DEMAND). */
		if (ch->unexp_count && r->state == R_POSTED)
			rcpi_credit_demand(ch);
		if (ch->ctl_count) {
			chan_retime(ch); /* frames go: their timers */
			rcpi_chan_pump(ch, now);
			core_push(c);
		}
	} else if (c->st.unexp_count) {
		/* Any channel may hold what keeps the awaited message back. */
		for (p = c->unexp.next; p != &c->unexp; p = p->next)
			rcpi_credit_demand(container_of(p, struct unexp, link)->ch);
	}
	return 0;
}

/* NEXT RECEIVES.  A layer that must take a channel's messages in order
 * whatever their tags (relinked PVM: pvm_precv(tid, tag) delivers the
 * first message from TID with TAG, and other kinds of message sent
 * before it must be handled first) could post a receive only after a
 * probe found the message at the channel's head, so every such message
 * went the unexpected way: buffered, then copied out.  A NEXT receive is
 * posted ahead instead and takes the channel's next message only if its
 * tag is TAG; when another message starts first it is held unexpected as
 * before and the receive ends with RCP_ENOENT, so the caller looks at the
 * head as it would have.  Posted only when the channel holds no
 * unexpected message (else the first one decides at once: taken when its
 * tag matches, RCP_ENOENT returned when not), at most one per channel.
 * Never promised by READY (rcpi_try_ready), whose promise would bind a
 * later message to it: a larger message for it comes by RTS or frames.
 * (Until session 20 its buffer had to fit one frame, and relinked PVM's
 * precv into a buffer of more, as perf/pvm_pingpong.c's 4 MiB, took every
 * message the unexpected way.) */
int rcpc_irecv_next(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len, uint64_t now,
                    rcp_req **req)
{
	struct list *p;

	if (!c || !ch || !req || ch->core != c || (!buf && len))
		return RCP_EINVAL;
	if (ch->next_rx)
		return RCP_EBUSY;
	if (ch->unexp_count) {
		for (p = c->unexp.next; p != &c->unexp; p = p->next) {
			struct unexp *u = container_of(p, struct unexp, link);
			if (u->ch != ch)
				continue;
			if (!tag_match(tag, u->tag))
				return RCP_ENOENT;
			break; /* rcpc_irecv takes this one: the first of CH with TAG */
		}
	}
	return irecv(c, ch, tag, buf, len, now, req, 1);
}

int rcpc_irecv(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len, uint64_t now,
               rcp_req **req)
{
	return irecv(c, ch, tag, buf, len, now, req, 0);
}

/* The API's (request.c), inlined whole into rcp_irecv as rcpc_isend_api
 * (session 20). */
RCPI_HOT_INLINE int rcpc_irecv_api(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len,
                                   uint64_t now, rcp_req **req)
{
	return irecv(c, ch, tag, buf, len, now, req, 0);
}

int rcpc_cancel(rcp_req *r, uint64_t now)
{
	(void)now;
	if (r->state == Q_DONE)
		return 0;
	if (r->kind == REQ_SEND && r->state == S_QUEUED && !r->parent) {
		list_del(&r->link);
		/* Ids are assigned at isend and the peer expects them without
		 * gaps: renumber the unsent messages queued behind it. */
		{
			rcp_chan *ch = r->chan;
			struct list *p;
			chan_retime(ch); /* startq: its liveness timer */
			for (p = ch->startq.next; p != &ch->startq; p = p->next) {
				rcp_req *q = container_of(p, rcp_req, link);
				if (rcpw_seq_lt(r->msg, q->msg))
					q->msg--;
			}
			ch->tx_msg_next--;
		}
		rcpi_complete(r, RCP_ECANCELED);
		return 0;
	}
	if (r->kind == REQ_WATCH) {
		r->chan->watch = NULL;
		rcpi_complete(r, RCP_ECANCELED);
		return 0;
	}
	if (r->kind == REQ_RECV && r->state == R_POSTED) {
		if (r->chan)
			chan_retime(r->chan); /* posted_specific: its liveness timer */
		rcpi_recv_unpost(r);
		rcpi_complete(r, RCP_ECANCELED);
		return 0;
	}
	return RCP_EBUSY;
}

int rcpc_probe(rcpc_core *c, rcp_chan *ch, uint64_t tag, struct rcp_status *st)
{
	struct list *p;
	for (p = c->unexp.next; p != &c->unexp; p = p->next) {
		struct unexp *u = container_of(p, struct unexp, link);
		if ((ch && u->ch != ch) || !tag_match(tag, u->tag))
			continue;
		if (st) {
			st->error = 0;
			st->chan = u->ch;
			st->tag = u->tag;
			st->len = u->total;
		}
		return 1;
	}
	return 0;
}

static int list_len(const struct list *l)
{
	int n = 0;
	for (const struct list *p = l->next; p != l; p = p->next)
		n++;
	return n;
}

int rcpc_chan_debug(const rcp_chan *ch, char *buf, size_t len)
{
	const rcpc_core *c = ch->core;
	return snprintf(buf, len,
	                "peer %d failed %d tx una %u next %u cwnd %u/%u peer_wnd %u rto %llu "
	                "backoff %d unsent %u sack %d/%u | msgs next %u start %u | startq %d "
	                "streamq %d busyq %d ctl %u ready %d(%u) | rx next %u gaps %u msg %u "
	                "rndv %d reserved %d posted %d unexp %d credits %u/%u given %u",
	                ch->peer, ch->failed, ch->tx_una, ch->tx_next, ch->cwnd / CWND_ONE,
	                window(ch), ch->peer_wnd, (unsigned long long)ch->rto, ch->backoff,
	                ch->unsent, ch->have_sack, ch->highest_sacked, ch->tx_msg_next,
	                ch->tx_msg_start, list_len(&ch->startq), list_len(&ch->streamq),
	                list_len(&ch->busyq), ch->ctl_count, ch->ready_valid, ch->ready.msg,
	                ch->rx_next, ch->rx_gaps, ch->rx_msg_next, list_len(&ch->rndv),
	                ch->reserved ? (int)ch->reserved->msg : -1,
	                (int)ch->posted_specific + list_len(&c->posted_any), list_len(&c->unexp),
	                ch->credits_used, ch->credits_granted, ch->credits_given);
}

int rcpc_core_busy(const rcpc_core *c)
{
	const struct list *p;
	for (p = c->chans.next; p != &c->chans; p = p->next) {
		const rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || ch->unreachable)
			continue;
		if (ch->tx_una != ch->tx_next || !list_empty(&ch->startq) ||
		    !list_empty(&ch->streamq) || !list_empty(&ch->busyq) || ch->ctl_count ||
		    ch->ack_pending || ch->ack_now)
			return 1;
	}
	return 0;
}

/* CLOSE.  A receiver that closes as soon as it has what it waited for
 * leaves the sender without its last ack if that ack was lost: the
 * sender resends into silence and its send fails with RCP_EPEER although
 * the message arrived (issue 18).  As TCP's TIME_WAIT, closing keeps
 * answering (duplicates are re-acked at once) until the peer has been
 * quiet for time_wait: a sender still missing our ack resends within its
 * RTO, which doubles per expiry from rto_min, so 50 ms covers about seven
 * losses in a row at LAN round trips.  Not on a nic that loses nothing
 * (time_wait 0), nor to a peer the nic refuses (gone: an ack owed to it
 * can never go, and waiting for it held every close for the whole
 * linger).  The endpoint bounds the linger (RCP_LINGER_MS, never past
 * the peer timeout). */
int rcpc_core_linger(const rcpc_core *c, uint64_t now)
{
	const struct list *p;
	for (p = c->chans.next; p != &c->chans; p = p->next) {
		const rcp_chan *ch = container_of(p, rcp_chan, link);
		/* The nic refuses frames to a peer that is gone (shm: its
		 * segment): acks owed to it and TIME_WAIT are moot. */
		int gone = ch->nic_err && ch->nic_err != RCP_EAGAIN;
		if (ch->failed)
			continue;
		if (ch->tx_una != ch->tx_next || !list_empty(&ch->startq) ||
		    !list_empty(&ch->streamq) || !list_empty(&ch->busyq) || ch->ctl_count)
			return 1;
		if (!gone && (ch->ack_pending || ch->ack_now ||
		              (ch->rx_next != 1 && now < ch->last_heard + c->p.time_wait)))
			return 1;
	}
	return 0;
}

void rcpc_chan_window_stats(const rcp_chan *ch, uint32_t *max_inflight, uint32_t *peer_wnd)
{
	*max_inflight = ch->max_inflight;
	*peer_wnd = ch->peer_wnd;
}
