/*
 * rcp/start.c — the sender's side of a message on a channel: what goes on
 * the ring next (rcpi_chan_pump: retransmissions, control frames, message
 * starts, stream data) and how a message starts (rcpi_send_start: eager,
 * RTS with or without an RMA key and a split offer, or into the peer's
 * READY promise by stream, one put, or a split put).  The protocols are
 * described once, both sides together, in msg.c (MESSAGES); what a
 * start may take is CREDITS there.  Called from msg.c, core.c, timers.c;
 * it sends through send.c and asks for transfers through rmaq.c (rcp/core.c,
 * LAYERS).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

/* The smallest RTS an endpoint that sleeps at once offers to split. */
#define SLEEPER_SPLIT_MIN (512u << 10)

/* GATHER SENDS (rcp_isendv).  A message given as segments is read from
 * them frame by frame, as a contiguous one is read from its buffer; no
 * copy of the whole message is made.
 * - A frame whose bytes lie in one segment points into it, as any
 *   non-inline frame points into a user buffer (resends read it again).
 * - A frame that would cross a segment's end: if the segment still holds
 *   INLINE_CAP bytes or more, the frame ends with the segment (one short
 *   frame); else its bytes, up to INLINE_CAP, are gathered across the
 *   segments into the inline buffer of the slot that will carry it.  So a
 *   boundary costs at most one short frame and one copy of under 2 KiB,
 *   and many tiny segments go as 2 KiB frames, never one each; nothing
 *   is allocated on the way (a frame that could not be built would stall
 *   the stream).  Stream frames may have any length on the wire: the
 *   receiver places each at its offset (msg.c, place).
 * - An eager message (one frame) is gathered into its slot's inline
 *   buffer, or above INLINE_CAP into a pool buffer (s->own, counted in
 *   sendbuf_used); so it completes at once unless synchronous.  No memory
 *   for the pool buffer: it goes by rendezvous, whose frames need none.
 * - No RMA: a message of several segments always goes by frames.  RMA
 *   moves one registered region: an RTS, a FIN(SPLIT) and the peer's get
 *   carry one key (a key per segment is a wire change), and a put per
 *   segment into a READY promise would need several transfers in flight
 *   per request where rma.c tracks one.  On shm frames are two copies
 *   (ours into the ring, the receiver's out) against RMA's one, but both
 *   processes copy at once, in frame-sized pieces that stay in cache.
 *   A single segment of data (empty ones left out) is a plain send,
 *   RMA included (rcp_isendv: the core's rcpc_isendv gathers whatever it
 *   is given, so that rcpc_isend keeps one caller of its body; a second
 *   cost every rcp_isend ~10 instructions, callgrind chan row).
 * The cursor (gv_i, gv_base) follows the stream forward; a stream begun
 * again from byte 0 (READY after RTS) starts it again. */
int rcpi_gv_make(const struct rcp_iov *iov, int iovcnt, struct rcp_iov **v, uint32_t *n,
                 size_t *total)
{
	size_t sum = 0;
	uint32_t k = 0;

	if (iovcnt < 0 || (!iov && iovcnt))
		return RCP_EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].len)
			continue;
		if (!iov[i].base || iov[i].len > SIZE_MAX - sum)
			return RCP_EINVAL;
		sum += iov[i].len;
		k++;
	}
	if (!(*v = malloc(sizeof **v * (k ? k : 1))))
		return RCP_ENOMEM;
	*total = sum;
	*n = k;
	k = 0;
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].len)
			(*v)[k++] = iov[i];
	return 0;
}

/* Copies N bytes of gather send R from byte OFF, which segment I (from
 * message byte BASE) holds, to DST. */
static void gv_copy(const rcp_req *r, uint32_t i, size_t base, size_t off, unsigned char *dst,
                    size_t n)
{
	size_t at = off - base;

	while (n) {
		size_t m = r->gv[i].len - at;
		if (m > n)
			m = n;
		memcpy(dst, (const unsigned char *)r->gv[i].base + at, m);
		dst += m;
		n -= m;
		i++;
		at = 0;
	}
}

/* The payload of gather send R's frame from byte OFF, *NP bytes at most
 * (at least 1): where it lies, or gathered into the inline buffer of the
 * slot the next frame takes; *NP becomes the frame's length. */
static __attribute__((noinline)) const unsigned char *gv_frame(rcp_chan *ch, rcp_req *r, size_t off,
                                                               size_t *np)
{
	const struct rcp_iov *v = r->gv;
	uint32_t i = r->gv_i;
	size_t base = r->gv_base, rem;
	unsigned char *inl;

	if (off < base) {
		i = 0;
		base = 0;
	}
	while (off - base >= v[i].len) {
		base += v[i].len;
		i++;
	}
	r->gv_i = i;
	r->gv_base = base;
	rem = base + v[i].len - off;
	if (rem >= *np || rem >= INLINE_CAP) {
		if (rem < *np)
			*np = rem; /* ends with the segment */
		return (const unsigned char *)v[i].base + (off - base);
	}
	if (*np > INLINE_CAP)
		*np = INLINE_CAP;
	inl = slot_inl(ch, slot_of(ch, ch->tx_next), *np);
	gv_copy(r, i, base, off, inl, *np);
	return inl;
}

/* R whole in one eager frame from DATA (OWN: the pool buffer DATA is, or
 * NULL; INL: payload copied into the slot); AT_ONCE: R completes now (its
 * bytes are ours), else on the peer's ack (ACKREQ).  Both eager starts
 * below end here. */
static RCPI_HOT_INLINE int eager_one(rcp_chan *ch, rcp_req *r, const void *data, unsigned char *own,
                                     int inl, int at_once, uint64_t now)
{
	struct slot *s = rcpi_slot_new(ch, at_once ? NULL : r, RCPW_DATA,
	                               RCPW_F_FIRST | RCPW_F_EAGER | (at_once ? 0 : RCPW_F_ACKREQ),
	                               r->msg, r->tag, r->total, data, (uint32_t)r->total, inl);
	s->own = own;
	if (at_once) {
		rcpi_complete(r, 0);
	} else {
		r->state = S_WAITACK;
		list_add_tail(&ch->busyq, &r->link);
	}
	return rcpi_slot_send(ch, s, now);
}

/* Gather send R of one frame: gathered into the frame (GATHER SENDS).
 * Returns 0, RCP_EAGAIN, or 1 (no memory: nothing changed). */
static __attribute__((noinline)) int gv_eager(rcp_chan *ch, rcp_req *r, uint64_t now)
{
	rcpc_core *c = ch->core;
	unsigned char *own = NULL, *dst = slot_inl(ch, slot_of(ch, ch->tx_next), r->total);
	int at_once = !r->sync;

	if (r->total > INLINE_CAP) {
		if (!(own = rcpi_buf_get(c)))
			return 1;
		c->sendbuf_used += c->payload_max;
		dst = own;
	}
	gv_copy(r, 0, 0, 0, dst, r->total);
	return eager_one(ch, r, dst, own, 0, at_once, now);
}

/* Receiver first, large message, RMA both ways: rather than one process
 * copying the whole message while the other waits, both copy half at once.
 * FIN(FIRST|SPLIT, key to our buffer) goes out first, so the receiver
 * starts pulling its half; we ask for the put of ours, and when it is back
 * FIN(SPLIT) says so (rma.c); the receiver's plain FIN says it has pulled
 * (our buffer is free again).  Returns 0, RCP_EAGAIN, or 1 if it did not
 * apply (then nothing changed). */
static int send_split(rcp_chan *ch, rcp_req *r, uint64_t now)
{
	rcpc_core *c = ch->core;
	unsigned char rkey[RKEY_MAX];
	size_t rklen = sizeof rkey;
	struct slot *s;
	int rc;

	/* One frame now (the caller made sure of room), FIN(SPLIT) later. */
	if (!c->p.rma_split || r->total < c->p.rma_split || !rma_ok_ch(ch) ||
	    c->io.mr_reg(c->io.ctx, r->buf, r->total, RCP_NIC_ACCESS_READ, &r->mr, rkey, &rklen))
		return 1;
	if (rcpi_rma_post(ch, r, RMA_SPLIT_PUT, RCPW_F_SPLIT | RCPW_F_ACKREQ, 1, r->buf,
	                  (size_t)split_at(r->total), ch->ready.rkey, ch->ready.rkeylen, 0)) {
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
		return 1;
	}
	c->st.rma_msgs++;
	s = rcpi_slot_new(ch, NULL, RCPW_FIN, RCPW_F_FIRST | RCPW_F_SPLIT | RCPW_F_ACKREQ, r->msg,
	                  r->tag, r->total, rkey, (uint32_t)rklen, 1);
	r->state = S_RTS; /* waits for the receiver's FIN, as after an RTS */
	list_add_tail(&ch->busyq, &r->link);
	rc = rcpi_slot_send(ch, s, now);
	if (c->io.flush)
		c->io.flush(c->io.ctx); /* the receiver must start now */
	return rc;
}

/* Streams R into the READY promise it fits: its first frame now. */
static int stream_start(rcp_chan *ch, rcp_req *r, uint64_t now)
{
	rcpc_core *c = ch->core;
	struct slot *s;

	size_t n = c->payload_max;
	const unsigned char *p = RCPI_UNLIKELY(r->gv != NULL) ? gv_frame(ch, r, 0, &n) : r->buf;

	c->st.rndv_msgs++;
	r->next_off = n;
	s = rcpi_slot_new(ch, r, RCPW_DATA, RCPW_F_FIRST | RCPW_F_STREAM, r->msg, r->tag, r->total,
	                  p, (uint32_t)n, 0);
	r->state = S_STREAM;
	list_add_tail(&ch->streamq, &r->link);
	chan_dirty(ch);
	return rcpi_slot_send(ch, s, now);
}

/* The put of ch->rma_start into the READY promise is back (rma.c): FIN
 * FIRST starts the message, and the send completes on its ack; after a
 * failed put it streams instead (the receiver takes either).  Message
 * starts wait for it (send_can_start): they go out in message order. */
static int ready_put_out(rcp_chan *ch, uint64_t now)
{
	rcp_req *r = ch->rma_start;
	struct slot *s;

	ch->rma_start = NULL;
	list_del(&r->link);
	if (r->error) {
		r->error = 0;
		rcpi_fell_back(ch); /* fallback.c, FALLBACK */
		return stream_start(ch, r, now);
	}
	ch->core->st.rma_msgs++;
	s = rcpi_slot_new(ch, r, RCPW_FIN, RCPW_F_FIRST | RCPW_F_ACKREQ, r->msg, r->tag, r->total,
	                  NULL, 0, 0);
	r->state = S_WAITACK;
	list_add_tail(&ch->busyq, &r->link);
	return rcpi_slot_send(ch, s, now);
}

/* The smallest message a send on a READY moves by RMA.  With split
 * transfers on, a lone put below rma_split loses to streaming frames (the
 * same hops: put + FIN or DATA + ack; one copy by one process is slower
 * than the ring's two), so RMA starts with the split.  A sender-first RTS
 * takes RMA from rma_min: the get saves the READY hop. */
/* Where RMA starts: rma_min, or RMA_MIN_CROWDED on a crowded CPU
 * (rcpc_set_crowded).  Measured, relinked PVM's bwtest beside two CPU
 * hogs, 9 interleaved runs: 80 KB by RMA 233 us a round trip against
 * stock's 135; streamed (RCP_RMA_MIN=1M) 69 against 260, 800 KB 97
 * against 1150.  Idle, RMA stays: a sleeper's 64 KiB took 93 us by RMA,
 * 202 streamed. */
#define RMA_MIN_CROWDED (1u << 20)
uint64_t rcpi_rma_min(const rcpc_core *c)
{
	return c->crowded && !c->p.rma_fixed && c->p.rma_min < RMA_MIN_CROWDED ? RMA_MIN_CROWDED
	                                                                       : c->p.rma_min;
}

static uint64_t ready_rma_min(const rcpc_core *c)
{
	return c->p.rma_split > rcpi_rma_min(c) ? c->p.rma_split : rcpi_rma_min(c);
}

/* Receiver first: the peer promised a buffer for exactly this message. */
static int ready_fits(const rcp_chan *ch, const rcp_req *r)
{
	return ch->ready_valid && ch->ready.msg == r->msg && r->total > ch->core->payload_max &&
	       ((ch->ready.flags & RCPW_F_ANYTAG) || ch->ready.tag == r->tag) &&
	       r->total <= ch->ready.arg;
}

/* Send R may start now: a promise takes it, or a credit is left (CREDITS).
 * Else it stays queued until the peer returns credits. */
inline int rcpi_send_can_start(rcp_chan *ch, const rcp_req *r)
{
	if (RCPI_UNLIKELY(ch->rma_start != NULL))
		return 0; /* its FIN FIRST goes first (ready_put_out) */
	if (ch->credits_used != ch->credits_granted || ready_fits(ch, r)) {
		ch->credit_stalled = 0;
		return 1;
	}
	if (!ch->credit_stalled) {
		ch->credit_stalled = 1;
		ch->core->st.credit_stalls++;
	}
	return 0;
}

/* Starts send request R: its first frame.  The caller checked
 * send_can_start.  Returns 0 or RCP_EAGAIN. */
int rcpi_send_start(rcp_chan *ch, rcp_req *r, uint64_t now)
{
	rcpc_core *c = ch->core;
	struct slot *s;
	int rc;

	list_del(&r->link);
	ch->tx_msg_start++;
	if (ready_fits(ch, r)) {
		ch->ready_valid = 0;
		if ((ch->ready.flags & RCPW_F_RMA) && rma_ok_ch(ch) && !r->gv &&
		    r->total >= ready_rma_min(c)) {
			rc = send_split(ch, r, now);
			if (rc <= 0)
				return rc;
			/* The whole message by one put; FIN FIRST when it is
			 * back (ready_put_out).  No memory to ask: stream. */
			if (!rcpi_rma_post(ch, r, RMA_READY_PUT, 0, 1, r->buf, r->total,
			                   ch->ready.rkey, ch->ready.rkeylen, 0)) {
				r->state = S_RMA;
				list_add_tail(&ch->busyq, &r->link);
				ch->rma_start = r;
				ch->unplain = 1; /* (chan.h, PLAIN) */
				return 0;
			}
		}
		return stream_start(ch, r, now);
	}
	/* A promise for this message that its terms did not fit, or for an
	 * earlier one, is used up. */
	if (ch->ready_valid && rcpw_seq_le(ch->ready.msg, r->msg))
		ch->ready_valid = 0;

	/* Every other start takes a credit (CREDITS). */
	assert(ch->credits_used != ch->credits_granted);
	ch->credits_used++;
	if (RCPI_UNLIKELY(r->gv != NULL) && r->total <= c->payload_max &&
	    (rc = gv_eager(ch, r, now)) <= 0)
		return rc;
	/* Eager: sync and data in one frame. */
	if (r->total <= c->payload_max && !r->gv) {
		int inl = !r->sync && r->total <= c->p.inline_max && r->total <= INLINE_CAP;
		unsigned char *own = NULL;
		int at_once;
		/* Larger: copied into a pool buffer while send_buf allows, so
		 * the send completes at once and its ack may wait for a
		 * piggyback like an inline one's; else it completes on an
		 * ack the peer sends at once (ACKREQ), which costs a frame
		 * each way and, in a request/reply pattern, a round trip. */
		if (!inl && !r->sync && c->sendbuf_used + c->payload_max <= c->p.send_buf &&
		    (own = rcpi_buf_get(c)) != NULL) {
			rcpi_copy_large(own, r->buf, r->total);
			c->sendbuf_used += c->payload_max;
		}
		at_once = inl || own;
		return eager_one(ch, r, own ? own : r->buf, own, inl, at_once, now);
	}
	/* Rendezvous: request to send, with an RMA key when worth it. */
	c->st.rndv_msgs++;
	r->state = S_RTS;
	list_add_tail(&ch->busyq, &r->link);
	if (rma_ok_ch(ch) && r->total >= rcpi_rma_min(c) && !r->gv) {
		unsigned char rkey[RKEY_MAX];
		size_t rklen = sizeof rkey;
		/* SPLIT offers to put half when the receiver answers
		 * READY(SPLIT).  That READY costs an endpoint that sleeps
		 * at once a wake-up (~20-30 us here), more than half the
		 * copy saves below ~512 KiB (measured, relinked PVM
		 * sleeping: 64 KiB 53 -> 89 us with the offer; 1 MiB 225 ->
		 * 368-434 us without); so it offers only from there, and
		 * below the receiver pulls it all while the sender sleeps
		 * until the FIN. */
		uint16_t fl = RCPW_F_RMA;
		uint64_t min = c->p.rma_split;
		if ((c->p.flags & RCP_EP_SLEEP) && min < SLEEPER_SPLIT_MIN)
			min = SLEEPER_SPLIT_MIN;
		if (c->p.rma_split && r->total >= min && rma_ok_ch(ch))
			fl |= RCPW_F_SPLIT;
		if (!c->io.mr_reg(c->io.ctx, r->buf, r->total, RCP_NIC_ACCESS_READ, &r->mr, rkey,
		                  &rklen)) {
			s = rcpi_slot_new(ch, NULL, RCPW_RTS, fl, r->msg, r->tag, r->total, rkey,
			                  (uint32_t)rklen, 1);
			r->reserved_rma = 1;
			return rcpi_slot_send(ch, s, now);
		}
	}
	s = rcpi_slot_new(ch, NULL, RCPW_RTS, 0, r->msg, r->tag, r->total, NULL, 0, 1);
	return rcpi_slot_send(ch, s, now);
}

/* Sends whatever the window allows: retransmissions, control frames,
 * message starts, stream data. */
void rcpi_chan_pump(rcp_chan *ch, uint64_t now)
{
	rcpc_core *c = ch->core;

	if (ch->failed)
		return;
	/* Nothing queued and nothing to resend (every flush of a frame
	 * taken in asks; in a ping-pong nothing is): what chan_retransmit
	 * would do then is clear the reordering timer. */
	if (chan_nothing_queued(ch) && !rcpi_chan_resend_due(ch)) {
		ch->rack_at = 0;
		return;
	}
	if (rcpi_chan_retransmit(ch, now))
		return;
	while (ch->tx_next - ch->tx_una < window(ch)) {
		struct slot *s;
		int rc;
		if (ch->ctl_count) {
			struct ctl *k = &ch->ctlq[ch->ctl_head];
			s = rcpi_slot_new(ch, NULL, k->type, k->flags, k->msg, k->tag, k->arg,
			                  k->rkey, k->rkeylen, 1);
			ch->ctl_head = (ch->ctl_head + 1) % ch->ctl_cap;
			ch->ctl_count--;
			rc = rcpi_slot_send(ch, s, now);
		} else if (RCPI_UNLIKELY(ch->rma_start != NULL) &&
		           !(ch->rma_start->rma & RMA_BUSY)) {
			rc = ready_put_out(ch, now);
		} else if (!list_empty(&ch->startq) &&
		           rcpi_send_can_start(ch, container_of(ch->startq.next, rcp_req, link))) {
			rcp_req *r = container_of(ch->startq.next, rcp_req, link);
			rc = rcpi_send_start(ch, r, now);
		} else if (!list_empty(&ch->streamq)) {
			rcp_req *r = container_of(ch->streamq.next, rcp_req, link);
			size_t n = r->total - r->next_off;
			const unsigned char *p;
			uint16_t fl = 0;
			if (n > c->payload_max)
				n = c->payload_max;
			p = RCPI_UNLIKELY(r->gv != NULL) ? gv_frame(ch, r, r->next_off, &n)
			                                 : r->buf + r->next_off;
			if (r->next_off + n == r->total) {
				fl = RCPW_F_ACKREQ;
				list_del(&r->link);
				r->state = S_WAITACK;
				list_add_tail(&ch->busyq, &r->link);
			}
			s = rcpi_slot_new(ch, r, RCPW_DATA, fl, r->msg, r->tag, r->next_off, p,
			                  (uint32_t)n, 0);
			r->next_off += n;
			rc = rcpi_slot_send(ch, s, now);
		} else {
			break;
		}
		if (rc)
			break;
	}
}
