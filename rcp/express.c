/*
 * rcp/express.c — the express input: the common frame of a small
 * exchange taken in one pass (issue 19, session 19).  rcpc_input
 * (core.c) offers it every frame first; what it declines goes the general
 * way (rcpw_parse, rcpi_admit, rcpi_process_ack_fields, core.c
 * input_small or recv.c), which then decides and counts exactly as
 * before.  Above send.c, msg.c and req.c, below core.c (rcp/core.c,
 * LAYERS).
 *
 * EXPRESS.  An 8 B round trip spent ~250 instructions per frame in the
 * general gate alone: rcpw_parse copied the header into a host-order
 * struct and checked every type's fields, rcpi_admit walked the handshake's
 * cases, and only then did input_small find the frame was the plain case.
 * The plain case is one shape: a whole message under the compact header
 * (DATA, FIRST|EAGER, maybe ACKREQ; no CRC), on an established channel
 * (both epochs named, as its own), the next frame in sequence with no hole
 * held, the channel's next message with a credit, acking at most what we
 * have out, for a posted receive of a matching tag (the channel's direct
 * one, chan.h DIRECT, or the first the posted lists give).  Its first 8 bytes are then one of two words, so the
 * gate's checks of magic, version, header length, type and flags are one
 * compare; the session, the epochs, the sequence, the message id and the
 * ack range are compared against the channel as they lie in the frame.
 * Every condition is checked before anything changes, so a frame that
 * fails any of them (hostile bytes included) reaches the general path
 * untouched: the checks here only narrow what the gate accepts, never
 * widen it (a frame taken here passes rcpw_parse and rcpi_admit, and
 * takes input_small's branch).  The effects are those of that path:
 * rcpi_admit's (named), rcpc_input's (last_heard, unreachable), the ack
 * fields (rcpi_process_ack_fields itself), input_small's delivery.  Only
 * on little-endian hosts (the wire's order: the fields are read in place);
 * elsewhere every frame goes the general way.  stats.express_in counts
 * the frames taken here (tests/test_rcp_small.c checks both ways).
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The first 8 bytes of an express frame (wire.h): magic, version, type
 * DATA, flags FIRST|EAGER, hlen 48; ACKREQ may be set besides. */
#define EXPRESS_W0                                                                                 \
	((uint64_t)RCPW_MAGIC | (uint64_t)RCPW_VERSION << 16 | (uint64_t)RCPW_DATA << 24 |         \
	 (uint64_t)(RCPW_F_FIRST | RCPW_F_EAGER) << 32 | (uint64_t)RCPW_CHLEN << 48)
#define EXPRESS_ACKREQ ((uint64_t)RCPW_F_ACKREQ << 32)

static inline uint32_t ld32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
#endif

/* EXPRESS ACKS.  The ack fields of an express frame (rcpi_process_ack_fields'
 * work, H's ack already known to be at most what is out): on a nic that
 * loses nothing (p.reliable), a ping-pong acks one frame at a time, and
 * that frame's slot is plain: a whole small message (no request, no pool
 * buffer), sent once, never selectively acked, no backoff.  Freeing it is
 * then what the general loop would do for it: the window grows, the slot
 * is free, tx_una moves, the progress resets the probe count and the RTO
 * base (a reliable nic keeps no RTT samples and, with no backoff, no RTO
 * update).  Anything else (several frames, a lossy nic, a slot with a
 * request or a buffer, sacks, unsent frames) is the general function's,
 * which repeats the credit check harmlessly (the same value). */
static RCPI_HOT_INLINE void express_ack(rcp_chan *ch, const struct rcpw_hdr *h, uint64_t now)
{
	struct slot *s;

	if (h->ack == ch->tx_una) {
		/* Nothing newly acked: the credits only. */
		if ((uint32_t)(h->credits - ch->credits_granted) - 1u <
		    (uint32_t)(ch->credits_used + 1000000 - ch->credits_granted))
			ch->credits_granted = h->credits;
		return;
	}
	s = slot_of(ch, ch->tx_una);
	/* PLAIN (chan.h): a clear word says no unsent, sack or backoff. */
	if (h->ack - ch->tx_una != 1 || !ch->core->p.reliable ||
	    (ch->unplain && (ch->unsent || ch->have_sack || ch->backoff)) || s->req || s->own ||
	    s->sacked || s->hlen != RCPW_CHLEN) {
		(void)rcpi_process_ack_fields(ch, h, now);
		return;
	}
	if ((uint32_t)(h->credits - ch->credits_granted) - 1u <
	    (uint32_t)(ch->credits_used + 1000000 - ch->credits_granted))
		ch->credits_granted = h->credits;
	cwnd_grow(ch);
	ch->core->st.express_acks++;
	s->in_use = 0; /* slot_free: no buffer */
	ch->tx_una++;
	ch->rto_base = now;
	ch->tlp_probes = 0;
	if (ch->tx_una == ch->tx_next)
		ch->tlp_at = 0;
	if (rcpw_seq_lt(ch->recover, ch->tx_una))
		ch->recover = ch->tx_una;
}

RCPI_HOT_INLINE rcp_chan *rcpi_input_express(rcpc_core *c, int peer, const void *frame, size_t len,
                                             uint64_t now)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const unsigned char *p = frame;
	struct rcpw_hdr h; /* the ack fields, for rcpi_process_ack_fields */
	uint64_t w0, tag;
	uint32_t src, dst, n;
	rcp_chan *ch;
	rcp_req *r;

	/* The gate (rcpw_parse): one shape, no CRC (one required or present
	 * goes the general way, which checks it). */
	if (len < RCPW_CHLEN || len - RCPW_CHLEN > c->payload_max || c->p.crc)
		return NULL;
	memcpy(&w0, p, 8);
	if ((w0 & ~EXPRESS_ACKREQ) != EXPRESS_W0 || ld32(p + 8) != c->p.session)
		return NULL;
	/* Admission (rcpi_admit): a channel of ours whose peer named us and
	 * which we know by this epoch. */
	if ((unsigned)peer >= (unsigned)c->npeers || !(ch = c->by_peer[peer]))
		return NULL;
	src = ld32(p + 12);
	dst = ld32(p + 16);
	/* (PLAIN, chan.h: failed, accepted, a gap, a promise are parts of
	 * the word; set, they are looked at one by one as before.) */
	if (!src || !dst || dst != ch->my_epoch || src != ch->peer_epoch || src == ch->gone_epoch ||
	    (!chan_plain(ch) && (ch->failed || ch->accepted || ch->rx_gaps || ch->reserved)))
		return NULL;
	/* The ack: at most what is out (an older one, reordered, is the
	 * general path's). */
	h.ack = ld32(p + 24);
	if (h.ack - ch->tx_una > ch->tx_next - ch->tx_una)
		return NULL;
	/* Delivery (core.c input_small): in order, the next message, a
	 * credit taken, a posted receive: the direct one if its tag matches,
	 * else the one the posted lists give (a receive for any channel that
	 * could take the message leaves the channel none). */
	r = ch->direct;
	memcpy(&tag, p + 32, 8);
	if (ld32(p + 20) != ch->rx_next || ld32(p + 44) != ch->rx_msg_next ||
	    ch->credits_taken == ch->credits_given)
		return NULL;
	if (!r || !tag_match(r->tag, tag)) {
		if (r || (!ch->posted_specific && list_empty(&c->posted_any)))
			return NULL; /* unexpected, or the general path's */
		if (!(r = rcpi_match_posted(c, ch, tag)))
			return NULL;
	}

	/* Taken: the effects of the general path, in its order. */
	c->st.express_in++;
	ch->named = 1;
	ch->last_heard = now;
	ch->unreachable = 0;
	h.credits = ld32(p + 28);
	h.wnd = 0; /* the compact header carries none */
	express_ack(ch, &h, now);
	ch->rx_taken = 1;
	if (w0 & EXPRESS_ACKREQ)
		ch->ack_now = 1;
	ch->rx_msg_next++;
	ch->credits_taken++;
	recv_take(ch, r);
	n = (uint32_t)(len - RCPW_CHLEN);
	r->src = ch;
	r->msg = ld32(p + 44);
	r->tag = tag;
	r->total = n;
	copy_bytes(r->buf, p + RCPW_CHLEN, n < r->len ? n : r->len);
	r->got = n;
	rcpi_complete_recv(r, n);
	/* Its credit goes back on the ack input_done arms (CREDITS). */
	ch->credits_given++;
	ch->rx_next++;
	if (++ch->since_ack >= ACK_EVERY)
		ch->ack_now = 1;
	ch->ack_pending = 1;
	return ch;
#else
	(void)c;
	(void)peer;
	(void)frame;
	(void)len;
	(void)now;
	return NULL;
#endif
}

/* The slot of a whole small message sent express (isend.c send_small,
 * when rcpi_slot_express_ok): rcpi_slot_new's work for this one shape,
 * with the compact header written as it goes on the wire (little-endian,
 * no CRC, the peer's epoch named) rather than filled in host order,
 * swapped and moved into the compact layout.  The same bytes and the
 * same state as rcpi_slot_new(ch, NULL, RCPW_DATA, FIRST|EAGER, msg, tag,
 * len, buf, len, 1) followed by send_small's s->own = NULL. */
RCPI_HOT_INLINE struct slot *rcpi_slot_express(rcp_chan *ch, uint32_t msg, uint64_t tag,
                                               const void *buf, uint32_t len)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const rcpc_core *c = ch->core;
	struct slot *s = slot_claim(ch, NULL, len, 0);
	unsigned char *h = (unsigned char *)&s->hdr;
	uint64_t w0 = EXPRESS_W0;
	uint32_t f[6] = {c->p.session, ch->my_epoch, ch->peer_epoch,
	                 s->seq,       ch->rx_next,  ch->credits_given};
	uint32_t tail[2] = {0, msg}; /* crc (none), msg */

	s->payload = slot_inl(ch, s, len);
	copy_bytes((unsigned char *)s->payload, buf, len);
	s->own = NULL;
	s->hlen = RCPW_CHLEN;
	memcpy(h, &w0, 8);
	memcpy(h + 8, f, sizeof f);
	memcpy(h + 32, &tag, 8);
	memcpy(h + 40, tail, sizeof tail);
	/* The ack it carries (rcpi_hdr_fill). */
	ch->acked_upto = ch->rx_next;
	if (!ch->rx_gaps) {
		ch->ack_now = 0;
		ch->ack_pending = 0;
		ch->ack_due = 0;
	}
	ch->since_ack = 0;
	return s;
#else
	(void)ch;
	(void)msg;
	(void)tag;
	(void)buf;
	(void)len;
	abort(); /* rcpi_slot_express_ok says no */
#endif
}
