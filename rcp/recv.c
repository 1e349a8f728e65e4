/*
 * rcp/recv.c — the receive side of a channel: the sequence window and
 * its bitmap, the reorder store, duplicate detection, in-order delivery
 * to msg.c, and the acks we send (cumulative and the SACK bitmap)
 * (rcp/core.c, LAYERS).
 *
 * RECEIVING.  In-order frames are processed at once.  Out-of-order frames
 * inside the window are marked in a bitmap; DATA frames of a message whose
 * buffer is known (matched or promised by READY) are placed straight into
 * that buffer; other frames (message starts, control) are copied into a
 * bounded reorder store and processed when the gap fills.  Duplicates are
 * recognised by sequence and dropped (and re-acked).  Acks: at once for
 * out-of-order or duplicate frames, for frames flagged ACKREQ (a sender is
 * waiting) and every quarter window; otherwise after ack_delay unless a
 * reverse frame carried the ack first (piggybacking).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

void rcpi_send_ack(rcp_chan *ch, uint64_t now)
{
	rcpc_core *c = ch->core;
	uint32_t words = 0;

	(void)now;
	_Static_assert(RCPW_SACK_WORDS * 64 == RXW, "the SACK bitmap covers the window");
	/* Bit i of the SACK is frame rx_next + 1 + i: the receive bitmap read
	 * a word at a time from that position, round the ring.  Nothing held
	 * past a gap (the common case): an empty SACK. */
	if (ch->rx_gaps) {
		uint32_t base = (ch->rx_next + 1) & (RXW - 1);
		for (uint32_t w = 0; w < RCPW_SACK_WORDS; w++) {
			uint32_t b = (base + 64 * w) & (RXW - 1), q = b / 64, r = b % 64;
			uint64_t v = ch->rx_bits[q] >> r;
			if (r)
				v |= ch->rx_bits[(q + 1) % (RXW / 64)] << (64 - r);
			ch->ackbuf.sack[w] = v;
			if (v)
				words = w + 1;
		}
	}
	rcpi_hdr_fill(ch, &ch->ackbuf.hdr, RCPW_ACK, ch->echo && !ch->rx_taken ? RCPW_F_FRESH : 0,
	              0, 0, 0, ch->echo, words * 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (uint32_t w = 0; w < words; w++)
		ch->ackbuf.sack[w] = __builtin_bswap64(ch->ackbuf.sack[w]);
#endif
	rcpi_hdr_seal(c, &ch->ackbuf.hdr, ch->ackbuf.sack, words * 8);
	if (!rcpi_xmit(ch, &ch->ackbuf.hdr, RCPW_HLEN, ch->ackbuf.sack, words * 8, 0))
		c->st.acks_sent++;
	else {
		ch->ack_now = 1; /* try again later */
		chan_dirty(ch);
	}
}

/* Stores an out-of-order frame for later; returns 0 or -1 (no memory). */
static int ooo_store(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcpc_core *c = ch->core;
	size_t size = sizeof(struct ooo) + h->len;
	struct ooo *o;

	if (c->reorder_used + size > c->p.reorder_bytes)
		return -1;
	o = malloc(size);
	if (!o)
		return -1;
	o->hdr = *h;
	o->size = size;
	memcpy(o->payload, pl, h->len);
	ch->ooo[h->seq & (RXW - 1)] = o;
	c->reorder_used += size;
	return 0;
}

inline void rcpi_process_reliable(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcpc_core *c = ch->core;
	uint32_t d = h->seq - ch->rx_next;

	ch->rx_taken = 1;
	if (rcpw_seq_lt(h->seq, ch->rx_next) || (d && rx_bit(ch, h->seq))) {
		c->st.dup_frames++;
		ch->ack_now = 1; /* our ack may have been lost */
		return;
	}
	if (d >= RXW) {
		bad(c); /* beyond any window we could have allowed */
		return;
	}
	if (d) {
		/* Out of order. */
		c->st.ooo_frames++;
		/* The first frame past a new gap is acked at once: its SACK
		 * is what tells the sender's RACK of the hole.  Later ones
		 * held past the same gap extend what the next ACK names and
		 * are acked every ACK_EVERY, as in-order frames are (the
		 * last of a message, ACKREQ, at once).  One ACK per frame
		 * held, as before, cost the receiver a send per frame while
		 * a hole was open: at 10 Gbit/s with 5% loss ~60 of a 1 MiB
		 * message's 117 frames, on a CPU the frames already fill
		 * (docs/results.md, session 19). */
		if (!rx_bit(ch, h->seq - 1) || (h->flags & RCPW_F_ACKREQ) ||
		    ++ch->since_ack >= ACK_EVERY)
			ch->ack_now = 1;
		ch->ack_pending = 1;
		if (h->type == RCPW_DATA && !(h->flags & RCPW_F_FIRST)) {
			if (rcpi_data_place(ch, h, pl) == 0) {
				rx_set(ch, h->seq, 1);
				return;
			}
		}
		if (ooo_store(ch, h, pl) == 0)
			rx_set(ch, h->seq, 1);
		return;
	}
	if (h->flags & RCPW_F_ACKREQ)
		ch->ack_now = 1;
	rcpi_process_inorder(ch, h, pl);
	ch->rx_next++;
	ch->since_ack++;
	/* Drain frames that were waiting for this one. */
	while (!ch->failed && rx_bit(ch, ch->rx_next)) {
		uint32_t i = ch->rx_next & (RXW - 1);
		struct ooo *o = ch->ooo[i];
		rx_set(ch, ch->rx_next, 0);
		if (o) {
			ch->ooo[i] = NULL;
			c->reorder_used -= o->size;
			if (o->hdr.flags & RCPW_F_ACKREQ)
				ch->ack_now = 1;
			rcpi_process_inorder(ch, &o->hdr, o->payload);
			free(o);
		}
		ch->rx_next++;
		ch->since_ack++;
	}
	/* Ack every few frames so the sender's window and RTO timer keep
	 * moving on long streams; small exchanges piggyback instead. */
	if (ch->since_ack >= ACK_EVERY)
		ch->ack_now = 1;
	ch->ack_pending = 1;
}
