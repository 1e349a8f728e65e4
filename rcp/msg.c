/*
 * rcp/msg.c — messages on a channel: the protocols that move a message
 * (eager, rendezvous, READY first, RMA and split RMA; the sender's pump
 * and first frame are start.c), matching message starts against posted
 * receives, the unexpected messages and the credits that bound them.
 * Frames reach it in sequence order from recv.c; it sends through start.c
 * and send.c (rcp/core.c, LAYERS).
 *
 * MESSAGES.  Per channel, messages take consecutive ids; their first frame
 * (eager DATA, RTS, STREAM DATA, or FIN-after-put) is a reliable frame, so
 * message starts are processed in send order, and matching against posted
 * receives (channel or any, tag or any, first posted first) keeps order.
 *   eager:  the message fits one frame and the sender holds a credit: sync
 *           and data go together.  Up to inline_max bytes the frame keeps a
 *           copy and the send completes at once; larger, a pool buffer
 *           takes the copy while send_buf allows (also at once); else, and
 *           always for rcpc_issend, it completes on the ack (ACKREQ).
 *   RTS:    larger (with a credit too): request-to-send with the total length
 *           (and, where the nic has RMA and the message is >= rma_min, a
 *           key to the send buffer).  The receiver, once matched, either
 *           pulls the data with one RMA get and answers FIN, or answers
 *           READY; the sender then streams DATA frames.  Every RMA
 *           transfer here is an event the glue performs (rmaq.c, RMA
 *           EVENTS); what follows it (FIN, completion) is rma.c.
 *   READY first (receiver first): a receive posted for a specific channel
 *           with a buffer larger than one frame, which is the first posted
 *           receive that could take that channel's next message, sends
 *           READY(msg, tag filter, buffer length [, RMA key]) at once.  A
 *           sender whose next message fits it streams at once (STREAM) or
 *           puts the data by RMA and sends FIN: no RTS round trip.  From
 *           rma_split bytes both sides copy: FIN(FIRST|SPLIT) hands the
 *           receiver a key to the send buffer and it pulls the upper half
 *           while the sender puts the lower half (FIN(SPLIT) when done);
 *           the receiver's FIN frees the send buffer.  Sender first
 *           the same way round: on an RTS(SPLIT) with a key (the sender
 *           offers to put half: not below 512 KiB if it sleeps at once,
 *           as the READY would cost it a wake-up) the receiver sends
 *           READY(SPLIT, key) and pulls the upper half while the sender
 *           puts the lower half and answers FIN(SPLIT).  The
 *           receive is then reserved: it cannot be canceled.
 * CREDITS.  Every message start that does not claim a READY promise
 * (eager DATA, RTS) takes one of the receiver's credits, whatever its
 * size: the receiver may have to hold it (an eager payload in a pool
 * buffer, an RTS as a record) until a receive takes it.  Each channel
 * grants the peer credits_eff of them (the smaller of `credits` and what
 * fits `unexp_bytes` at one frame buffer and record each), returned
 * cumulatively in every header as messages are consumed.  A sender with
 * no credit left keeps its sends queued (S_QUEUED) until credits come
 * back: back-pressure, never a drop.  So count and bytes held for a
 * channel stay under both bounds whatever the peer sends; a start past
 * the grant is a broken or hostile peer and fails the channel.  Until it
 * hears the receiver's first header a sender assumes CREDITS_INIT, which
 * every receiver grants at least (the two ends may be configured
 * differently).  Before, small messages past the credits went by RTS,
 * whose records no bound limited (10^6 of them cost 126 MB).
 * DEMAND.  The bound must not turn into a hang: a receiver may leave
 * credits_eff messages of a channel unconsumed while it waits for a later
 * one of the same channel (another tag), which the peer cannot start
 * without a credit.  So while a receive that could take the channel's
 * messages (on that channel, or on any) is posted and the peer holds no
 * credit, the receiver grants one more per message it holds (the peer
 * starts its next message, which either is the one waited for or is held
 * too and draws the next grant), up to DEMAND_MAX x credits_eff held for
 * the channel.  Past that hard bound the waiting receives on that channel
 * fail with RCP_ENOMEM (counted in demand_fails, warned once): a clean
 * error naming the knob (RCP_CREDITS, RCP_UNEXP_BYTES) instead of an
 * endless wait or unbounded memory.  Memory past the plain bound is spent
 * only on what the application itself waits behind; a peer that floods
 * messages nobody waits for still stops at credits_eff.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

static RCPI_HOT_INLINE rcp_req *first_match(struct list *l, uint64_t tag)
{
	struct list *p;
	for (p = l->next; p != l; p = p->next) {
		rcp_req *r = container_of(p, rcp_req, clink);
		if (tag_match(r->tag, tag))
			return r;
	}
	return NULL;
}

/* The first posted receive for (CH, TAG): CH's direct one (chan.h,
 * DIRECT: posted before every other that could take it), else the earlier
 * of CH's own and the any-channel ones (each list in posting order). */
RCPI_HOT_INLINE rcp_req *rcpi_match_posted(rcpc_core *c, rcp_chan *ch, uint64_t tag)
{
	rcp_req *r, *w;
	if (ch->direct && tag_match(ch->direct->tag, tag))
		return ch->direct;
	r = first_match(&ch->posted, tag);
	w = first_match(&c->posted_any, tag);
	return !r || (w && w->pseq < r->pseq) ? w : r;
}

inline void rcpi_recv_unpost(rcp_req *r)
{
	list_del(&r->clink); /* (self-linked if direct) */
	if (r->chan) {
		if (r->chan->direct == r)
			r->chan->direct = NULL;
		if (r->chan->next_rx == r)
			r->chan->next_rx = NULL;
		/* No chan_retime: one receive less moves no deadline earlier
		 * (TIMERS: keys are lower bounds); cancel marks it, so an idle
		 * channel leaves the heap at once. */
		r->chan->posted_specific--;
		if (r->chan->reserved == r)
			r->chan->reserved = NULL;
	}
}

/* A message start of CH was held unexpected while CH's NEXT receive was
 * posted (chan.h): another message came first, so that receive ends with
 * RCP_ENOENT and the message stays for rcpc_probe and rcpc_irecv. */
void rcpi_next_miss(rcp_chan *ch)
{
	rcp_req *r = ch->next_rx;
	rcpi_recv_unpost(r);
	rcpi_complete(r, RCP_ENOENT);
}

/* Message data went into R; complete it once all bytes are accounted. */
static void recv_check_done(rcp_chan *ch, rcp_req *r)
{
	if (r->state == R_FILL && r->got >= r->total) {
		list_del(&r->link);
		rcpi_complete(r, r->total > r->len ? RCP_ETRUNC : 0);
		rcpi_try_ready(ch);
	}
}

static RCPI_HOT_INLINE void place(rcp_req *r, uint64_t off, const unsigned char *p, uint32_t n)
{
	if (off < r->len) {
		size_t m = r->len - off < n ? r->len - off : n;
		copy_bytes(r->buf + off, p, m);
	}
	r->got += n;
}

/* The message starting now on CH matched receive R (R_POSTED or R_READY). */
static RCPI_HOT_INLINE void recv_matched(rcp_chan *ch, rcp_req *r, uint32_t msg, uint64_t tag,
                                         size_t total)
{
	/* A receive promised to this very message may already hold bytes:
	 * data placed before the message's start frame was processed (the
	 * start was lost and resent while the sender streamed on our READY). */
	if (!(r->state == R_READY && r->msg == msg))
		r->got = 0;
	rcpi_recv_unpost(r);
	r->src = ch;
	r->msg = msg;
	r->tag = tag;
	r->total = total;
}

/* Grants the peer one more unexpected message (one was consumed). */
inline void rcpi_credit_return(rcp_chan *ch)
{
	chan_dirty(ch);
	ch->credits_given++;
	ch->ack_pending = 1;
}

/* Is a receive posted that could take a message of CH (on CH or on any
 * channel)? */
static int chan_awaited(const rcp_chan *ch)
{
	return ch->direct || !list_empty(&ch->posted) || !list_empty(&ch->core->posted_any);
}

/* A receive waits on CH and the peer holds no credit (DEMAND): grant one
 * more, or past the hard bound fail CH's waiting receives. */
void rcpi_credit_demand(rcp_chan *ch)
{
	rcpc_core *c = ch->core;
	struct list *p, *t;
	int failed = 0;

	if (ch->failed || ch->credits_given != ch->credits_taken || !chan_awaited(ch))
		return;
	if (ch->unexp_count < (uint64_t)DEMAND_MAX * c->credits_eff) {
		c->st.demand_credits++;
		rcpi_credit_return(ch);
		return;
	}
	if (ch->direct) {
		rcp_req *r = ch->direct;
		rcpi_recv_unpost(r);
		rcpi_complete(r, RCP_ENOMEM);
		c->st.demand_fails++;
		failed = 1;
	}
	list_for_each_safe(p, t, &ch->posted)
	{
		rcp_req *r = container_of(p, rcp_req, clink);
		if (r == ch->reserved)
			continue; /* promised by READY: needs no credit, and the
			             peer may be filling it */
		rcpi_recv_unpost(r);
		rcpi_complete(r, RCP_ENOMEM);
		c->st.demand_fails++;
		failed = 1;
	}
	if (failed && !c->demand_warned) {
		c->demand_warned = 1;
		rcpi_warn("a receive waited behind %u unconsumed messages of one channel "
		          "(RCP_CREDITS/RCP_UNEXP_BYTES x %u): failed with RCP_ENOMEM",
		          (unsigned)ch->unexp_count, DEMAND_MAX);
	}
}

/* A message start that needs a credit (eager DATA, RTS) came.  Past our
 * grant the peer ignores credits: a broken or hostile peer, which must
 * not make us hold more (CREDITS).  Returns 0, or -1 (channel failed). */
static int credit_take(rcp_chan *ch)
{
	if (ch->credits_taken == ch->credits_given) {
		ch->core->st.bad_frames++;
		rcpi_chan_fail(ch, RCP_EPROTO);
		return -1;
	}
	ch->credits_taken++;
	return 0;
}

/* The receiver's half of a split transfer of matched receive R: pull
 * bytes [split, N) from the sender's buffer (RKEY), tell it by FIN that
 * its buffer is free (rma.c, when the pull is back), and wait in ch->rndv
 * for its FIN(SPLIT).  A failed pull is remembered in r->error and fails
 * R then. */
static void split_pull(rcp_chan *ch, rcp_req *r, uint64_t n, const void *rkey, uint32_t rkeylen)
{
	uint64_t split = split_at(r->total), len = n > split ? n - split : 0;
	struct ctl k = {0};

	r->state = R_RMA;
	r->error = 0;
	list_add_tail(&ch->rndv, &r->link);
	if (len && !rcpi_rma_post(ch, r, RMA_SPLIT_GET, 0, 0, r->buf + split, (size_t)len, rkey,
	                          rkeylen, split))
		return;
	/* Nothing to pull (the buffer ends below the split), or no memory
	 * to ask: FIN(0) now, a failure if there was something. */
	r->rma = 0;
	r->error = len ? RCP_ENOMEM : 0;
	k.type = RCPW_FIN;
	k.msg = r->msg;
	rcpi_ctl_push(ch, &k);
}

/* Sender first, large, RMA both ways (see send_split for the other
 * order): READY(SPLIT, key to our buffer) goes out first so the sender puts
 * the lower half while we pull the upper half; our FIN frees its buffer,
 * its FIN(SPLIT) completes R.  Returns 0, or 1 if it did not apply. */
static int rts_split(rcp_chan *ch, rcp_req *r, const unsigned char *rkey, uint32_t rkeylen)
{
	rcpc_core *c = ch->core;
	struct ctl k = {0};
	size_t rklen = sizeof k.rkey;

	if (!c->p.rma_split || r->total < c->p.rma_split || r->total > r->len || !rma_ok_ch(ch))
		return 1;
	if (r->mr) {
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
	}
	if (c->io.mr_reg(c->io.ctx, r->buf, r->total, RCP_NIC_ACCESS_WRITE, &r->mr, k.rkey, &rklen))
		return 1;
	k.type = RCPW_READY;
	k.flags = RCPW_F_RMA | RCPW_F_SPLIT;
	k.msg = r->msg;
	k.tag = r->tag;
	k.arg = r->total;
	k.rkeylen = (uint8_t)rklen;
	if (rcpi_ctl_push(ch, &k))
		return 1;
	rcpi_chan_pump(ch, c->now);
	if (c->io.flush)
		c->io.flush(c->io.ctx); /* the sender must start now */
	c->st.rma_msgs++;
	split_pull(ch, r, r->total, rkey, rkeylen);
	return 0;
}

/* What an RTS with FLAGS offers, as rts_matched takes it. */
static int rts_rma(uint16_t flags)
{
	return !(flags & RCPW_F_RMA) ? 0 : (flags & RCPW_F_SPLIT) ? 2 : 1;
}

/* RTS for MSG matched receive R: pull by RMA, or say READY.  RMA: 0 no
 * key, 1 a key, 2 a key and the sender's offer to split (RCPW_F_SPLIT). */
void rcpi_rts_matched(rcp_chan *ch, rcp_req *r, uint32_t msg, uint64_t tag, size_t total, int rma,
                      const unsigned char *rkey, uint32_t rkeylen)
{
	rcpc_core *c = ch->core;
	struct ctl k = {0};

	recv_matched(ch, r, msg, tag, total);
	if (rma > 1 && rma_ok_ch(ch) && rts_split(ch, r, rkey, rkeylen) == 0)
		return;
	if (rma && rma_ok_ch(ch)) {
		/* Pull it all; FIN and completion when the get is back (rma.c).
		 * Nothing to pull, or no memory to ask: now (the sender, which
		 * offered a key, ignores a READY). */
		size_t n = total < r->len ? total : r->len;
		int rc = 0;
		c->st.rma_msgs++;
		if (n) {
			rc = rcpi_rma_post(ch, r, RMA_RTS_GET, 0, 0, r->buf, n, rkey, rkeylen, 0);
			if (!rc) {
				r->state = R_RMA;
				list_add_tail(&ch->rndv, &r->link);
				return;
			}
		}
		k.type = RCPW_FIN;
		k.msg = msg;
		k.arg = rc ? 0 : total;
		rcpi_ctl_push(ch, &k);
		rcpi_complete(r, rc ? rc : (total > r->len ? RCP_ETRUNC : 0));
		rcpi_try_ready(ch);
		return;
	}
	r->state = R_FILL;
	list_add_tail(&ch->rndv, &r->link);
	/* Always answer an RTS, even if a READY promise for this message
	 * is already out: the sender chose RTS, so it declined the promise
	 * (or had not seen it).  It ignores a READY it no longer waits for,
	 * and a plain one if it offered a key: a key we will not use gets
	 * READY|STREAM (fallback.c, FALLBACK). */
	k.type = RCPW_READY;
	k.flags = rma ? RCPW_F_STREAM : 0;
	k.msg = msg;
	k.tag = tag;
	k.arg = total;
	rcpi_ctl_push(ch, &k);
	recv_check_done(ch, r);
}

/* Receiver first: promise the next message of CH to the first receive
 * that could take it, if its buffer is larger than one frame. */
void rcpi_try_ready(rcp_chan *ch)
{
	rcpc_core *c = ch->core;
	rcp_req *r;
	struct ctl k = {0};

	/* A direct receive is the first and fits a frame: no promise. */
	if (ch->reserved || ch->failed || ch->direct || !ch->posted_specific ||
	    list_empty(&ch->posted))
		return;
	r = container_of(ch->posted.next, rcp_req, clink);
	if (!list_empty(&c->posted_any) &&
	    container_of(c->posted_any.next, rcp_req, clink)->pseq < r->pseq)
		return; /* a wildcard receive comes first: promise nothing */
	if (r->len <= c->payload_max || r == ch->next_rx)
		return; /* a NEXT receive is never promised (core.c, NEXT RECEIVES) */
	k.type = RCPW_READY;
	k.msg = ch->rx_msg_next;
	k.tag = r->tag;
	k.arg = r->len;
	k.flags = r->tag == RCP_ANY_TAG ? RCPW_F_ANYTAG : 0;
	if (r->mr) {
		/* Registered for an earlier, stale promise: the key was not
		 * kept, so register afresh. */
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
	}
	if (rma_ok_ch(ch) && r->len >= rcpi_rma_min(c)) {
		size_t rklen = sizeof k.rkey;
		if (!c->io.mr_reg(c->io.ctx, r->buf, r->len, RCP_NIC_ACCESS_WRITE, &r->mr, k.rkey,
		                  &rklen))
			k.rkeylen = (uint8_t)rklen;
	}
	if (k.rkeylen)
		k.flags |= RCPW_F_RMA;
	if (rcpi_ctl_push(ch, &k))
		return;
	r->state = R_READY;
	r->msg = ch->rx_msg_next;
	/* A new promise holds no bytes yet: whatever an earlier, stale
	 * promise of R counted belonged to another message, and would make R
	 * complete before all of this one's bytes are in. */
	r->got = 0;
	ch->reserved = r;
	ch->unplain = 1; /* (chan.h, PLAIN) */
}

/* After a message start that did not use the promised receive. */
static void ready_stale(rcp_chan *ch)
{
	rcp_req *r = ch->reserved;
	if (r && rcpw_seq_lt(r->msg, ch->rx_msg_next)) {
		/* Frames of that message that came before its first one were
		 * placed here (data_place): not ours, count them out. */
		r->got = 0;
		r->state = R_POSTED;
		ch->reserved = NULL;
		rcpi_try_ready(ch);
	}
}

static rcp_req *rndv_find(rcp_chan *ch, uint32_t msg)
{
	struct list *p;
	for (p = ch->rndv.next; p != &ch->rndv; p = p->next) {
		rcp_req *r = container_of(p, rcp_req, link);
		if (r->msg == msg)
			return r;
	}
	return NULL;
}

static rcp_req *busy_find(rcp_chan *ch, uint32_t msg, uint8_t state)
{
	struct list *p;
	for (p = ch->busyq.next; p != &ch->busyq; p = p->next) {
		rcp_req *r = container_of(p, rcp_req, link);
		if (r->msg == msg && r->state == state)
			return r;
	}
	return NULL;
}

/* R fell back to frames (fallback.c, FALLBACK): complete it once every
 * byte has come, no transfer of ours is out, and the sender's half of a
 * split is back. */
static void frames_check(rcp_chan *ch, rcp_req *r)
{
	if ((r->rma & (RMA_FRAMES | RMA_PEER | RMA_BUSY)) == (RMA_FRAMES | RMA_PEER) &&
	    r->got >= r->total) {
		list_del(&r->link);
		r->rma = 0;
		rcpi_complete(r, r->total > r->len ? RCP_ETRUNC : 0);
		rcpi_try_ready(ch);
	}
}

/* Non-first DATA: place into the receive its message belongs to.  Safe out
 * of order.  Returns 0, or -1 if no receive owns that message. */
int rcpi_data_place(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcp_req *r = rndv_find(ch, h->msg);
	if (!r && ch->reserved && ch->reserved->msg == h->msg)
		r = ch->reserved;
	if (!r || (r->state == R_RMA && !(r->rma & RMA_FRAMES)))
		return -1; /* none, or its bytes come by RMA: not from DATA */
	place(r, h->arg, pl, h->len);
	if (RCPI_UNLIKELY(r->state == R_RMA))
		frames_check(ch, r);
	else
		recv_check_done(ch, r);
	return 0;
}

/* H starts a message (eager or streamed DATA, RTS, FIN after a put or
 * starting a split): it must be the channel's next one.  Returns 0 and
 * counts it, or -1 (counted as bad: the caller drops H). */
static int msg_start(rcp_chan *ch, const struct rcpw_hdr *h)
{
	if (h->msg != ch->rx_msg_next) {
		bad(ch->core);
		return -1;
	}
	ch->rx_msg_next++;
	return 0;
}

/* A message start that claims our READY promise (STREAM data, or FIN
 * after an RMA put): returns the promised receive, now matched, or NULL
 * after failing the channel if the sender broke the promise's terms —
 * refusing is safer than guessing where its bytes belong. */
static rcp_req *take_promised(rcp_chan *ch, const struct rcpw_hdr *h)
{
	rcp_req *r = ch->reserved;
	if (!r || r->msg != h->msg || !tag_match(r->tag, h->tag)) {
		bad(ch->core);
		rcpi_chan_fail(ch, RCP_EPROTO);
		return NULL;
	}
	recv_matched(ch, r, h->msg, h->tag, h->arg);
	return r;
}

/* Processes reliable frame H in sequence order. */
void rcpi_process_inorder(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcpc_core *c = ch->core;
	rcp_req *r;

	switch (h->type) {
	case RCPW_DATA:
		if (!(h->flags & RCPW_F_FIRST)) {
			if (rcpi_data_place(ch, h, pl))
				bad(c);
			return;
		}
		if (msg_start(ch, h))
			return;
		if (h->flags & RCPW_F_STREAM) {
			r = take_promised(ch, h);
			if (!r)
				return;
			r->state = R_FILL;
			list_add_tail(&ch->rndv, &r->link);
			place(r, 0, pl, h->len);
			recv_check_done(ch, r);
			return;
		}
		/* Eager: the whole message is here. */
		if (credit_take(ch))
			return;
		r = rcpi_match_posted(c, ch, h->tag);
		if (r) {
			recv_matched(ch, r, h->msg, h->tag, h->len);
			place(r, 0, pl, h->len);
			rcpi_complete(r, h->len > r->len ? RCP_ETRUNC : 0);
			/* The credit goes back (rcpi_credit_return), on the ack
			 * that rcpc_input's end arms or flushes. */
			ch->credits_given++;
			ch->ack_pending = 1;
		} else {
			struct unexp *u = rcpi_unexp_get(c);
			unsigned char *b = h->len ? rcpi_buf_get(c) : NULL;
			if (!u || (h->len && !b)) {
				/* Out of memory: drop the message start, which
				 * cannot be retried once acked.  Fail loudly. */
				if (u)
					rcpi_unexp_put(c, u);
				free(b);
				rcpi_chan_fail(ch, RCP_ENOMEM);
				return;
			}
			if (h->len)
				memcpy(b, pl, h->len);
			u->ch = ch;
			u->msg = h->msg;
			u->tag = h->tag;
			u->total = h->len;
			u->data = b;
			rcpi_unexp_hold(c, u);
			rcpi_credit_demand(ch);
			c->st.unexpected_msgs++;
			if (RCPI_UNLIKELY(ch->next_rx))
				rcpi_next_miss(ch);
		}
		ready_stale(ch);
		return;
	case RCPW_RTS:
		if (msg_start(ch, h) || credit_take(ch))
			return;
		r = rcpi_match_posted(c, ch, h->tag);
		if (r) {
			rcpi_credit_return(ch);
			rcpi_rts_matched(ch, r, h->msg, h->tag, h->arg, rts_rma(h->flags), pl,
			                 h->len);
		} else {
			struct unexp *u = rcpi_unexp_get(c);
			if (!u) {
				rcpi_chan_fail(ch, RCP_ENOMEM);
				return;
			}
			u->ch = ch;
			u->msg = h->msg;
			u->tag = h->tag;
			u->total = h->arg;
			u->is_rts = 1;
			u->rma = (uint8_t)rts_rma(h->flags);
			u->rkeylen = (uint8_t)h->len;
			memcpy(u->rkey, pl, h->len);
			rcpi_unexp_hold(c, u);
			rcpi_credit_demand(ch);
			c->st.unexpected_msgs++;
			if (RCPI_UNLIKELY(ch->next_rx))
				rcpi_next_miss(ch);
		}
		ready_stale(ch);
		return;
	case RCPW_READY:
		/* The peer is ready for our message h->msg.  Only on terms
		 * that fit it: a promise READY sent before our RTS arrived,
		 * for a receive whose tag filter does not take this message,
		 * is not an answer to the RTS.  The RTS will match another
		 * receive there, and data streamed on the stale promise could
		 * be placed (out of order, ahead of the RTS) into the promised
		 * receive: found by tests/soak.c under drop+dup on shm. */
		r = busy_find(ch, h->msg, S_RTS);
		if (r && !(h->flags & RCPW_F_ANYTAG) && h->tag != r->tag)
			r = NULL;
		if (r) {
			if (RCPI_UNLIKELY(h->flags & RCPW_F_STREAM)) {
				/* Our key went unused or the transfer failed: the
				 * whole message by frames, once our put is back
				 * (fallback.c, FALLBACK). */
				if (r->rma & RMA_BUSY)
					r->rma |= RMA_RESEND;
				else
					rcpi_frames_send(ch, r);
				return;
			}
			if (r->reserved_rma && (h->flags & RCPW_F_SPLIT) &&
			    (h->flags & RCPW_F_RMA)) {
				/* Split: it pulls the upper half, we put the lower
				 * and say so by FIN(SPLIT) when the put is back
				 * (rma.c).  Terms that do not fit, or no memory to
				 * ask: FIN(SPLIT, 0) now, and R fails when the
				 * receiver's FIN comes. */
				struct ctl k = {0};
				if (r->rma & RMA_BUSY) {
					bad(c); /* a second READY(SPLIT) */
					return;
				}
				if (h->arg == r->total &&
				    !rcpi_rma_post(ch, r, RMA_SPLIT_PUT, RCPW_F_SPLIT, 1, r->buf,
				                   (size_t)split_at(r->total), pl, h->len, 0))
					return;
				r->error = h->arg == r->total ? RCP_ENOMEM : RCP_EPEER;
				k.type = RCPW_FIN;
				k.flags = RCPW_F_SPLIT;
				k.msg = h->msg;
				rcpi_ctl_push(ch, &k);
				return;
			}
			if (r->reserved_rma)
				return; /* it pulls by RMA and answers FIN */
			list_del(&r->link);
			r->state = S_STREAM;
			r->next_off = 0;
			list_add_tail(&ch->streamq, &r->link);
			chan_dirty(ch);
			return;
		}
		if (rcpw_seq_le(ch->tx_msg_start, h->msg)) {
			/* A promise for a message not started yet: keep it. */
			ch->ready_valid = 1;
			ch->ready.msg = h->msg;
			ch->ready.tag = h->tag;
			ch->ready.arg = h->arg;
			ch->ready.flags = h->flags;
			ch->ready.rkeylen = (uint8_t)h->len;
			memcpy(ch->ready.rkey, pl, h->len);
		}
		return;
	case RCPW_FIN:
		if ((h->flags & (RCPW_F_FIRST | RCPW_F_SPLIT)) == (RCPW_F_FIRST | RCPW_F_SPLIT)) {
			/* Split transfer starts: pull our half now. */
			if (msg_start(ch, h))
				return;
			r = take_promised(ch, h);
			if (!r)
				return;
			split_pull(ch, r, h->arg < r->len ? h->arg : r->len, pl, h->len);
			return;
		}
		if (h->flags & RCPW_F_SPLIT) {
			/* The sender's half is in place too. */
			r = rndv_find(ch, h->msg);
			if (!r || r->state != R_RMA || (r->rma & RMA_PEER)) {
				bad(c);
				return;
			}
			if (r->rma & RMA_FRAMES) {
				r->rma |= RMA_PEER; /* we asked for frames: its half is back */
				frames_check(ch, r);
				return;
			}
			if (h->flags & RCPW_F_STREAM) {
				/* Its put failed: ask for frames once our half is
				 * back (fallback.c, FALLBACK). */
				if (r->rma & RMA_BUSY)
					r->rma |= RMA_FRAMES | RMA_PEER;
				else
					rcpi_frames_ask(ch, r, 1);
				return;
			}
			if (h->arg != split_at(r->total) && !r->error)
				r->error = RCP_EPEER;
			if (r->rma & RMA_BUSY) {
				r->rma |= RMA_PEER; /* our half is still moving: rma.c */
				return;
			}
			list_del(&r->link);
			rcpi_complete(r, r->error ? r->error : r->total > r->len ? RCP_ETRUNC : 0);
			rcpi_try_ready(ch);
			return;
		}
		if (h->flags & RCPW_F_FIRST) {
			/* Sender put the message into our promised buffer. */
			if (msg_start(ch, h))
				return;
			r = take_promised(ch, h);
			if (!r)
				return;
			rcpi_complete(r, h->arg > r->len ? RCP_ETRUNC : 0);
			rcpi_try_ready(ch);
			return;
		}
		/* Receiver pulled our RTS message, or its half of a split. */
		r = busy_find(ch, h->msg, S_RTS);
		if (!r) {
			bad(c);
			return;
		}
		if (r->rma & RMA_FRAMES)
			return; /* our half failed: READY|STREAM will come (fallback.c) */
		if (r->rma & RMA_BUSY) {
			r->rma |= RMA_PEER; /* our half is still moving: rma.c */
			return;
		}
		list_del(&r->link);
		rcpi_complete(r, r->error); /* a failed half of ours: its code */
		return;
	default: bad(c);
	}
}
