/*
 * rcp/send.c — the send side of a channel: frames out (header, seal,
 * nic), the ring of slots holding reliable frames until acked, loss
 * recovery (RACK, tail-loss probe, RTO) and the congestion window, and
 * the header fields of the peer's frames that acknowledge ours.  What to
 * send next (control frames, message starts, stream data) is start.c's
 * rcpi_chan_pump; the layering is in rcp/core.c (LAYERS).
 *
 * RELIABILITY.  Reliable frames (DATA, RTS, READY, FIN) take consecutive
 * 32-bit sequence numbers per direction.  The sender keeps each in a slot
 * of a power-of-two ring until it is cumulatively acknowledged; the slot
 * holds the header as sent and, for DATA, points into the user's buffer,
 * so retransmission copies nothing.  Every frame carries the cumulative ack
 * (next sequence expected); ACK frames add a selective-ack bitmap of up to
 * 1024 frames past it.  A frame is taken as lost when a later frame has
 * been selectively acked and it has been out for the reordering window:
 * the newest delivered frame's round trip plus a quarter of the least
 * one if that frame was sent after it, else srtt x 5/4 (RACK, time-based;
 * no count of later frames; rack_fast, rack_slow): it is resent at once (the paper's "resend the named frames
 * in the next window", but continuous).  If nothing is acked for an RTO
 * (RFC 6298: srtt + 4 rttvar, clamped, doubled per expiry, Karn's rule for
 * samples) every frame out longer than the RTO is resent.
 *
 * WINDOW.  Frames past tx_una <= min(cwnd + those selectively acked,
 * peer's advertised window, ring): cwnd bounds the frames in the network
 * (sent, neither cumulatively nor selectively acked: RFC 6675's pipe), the
 * other two every frame the receiver may hold from tx_una on (chan.h,
 * window()).  The advertised window is what the peer's nic holds per sender
 * (rcp_nic_info.rx_frames), sent in every header.  cwnd does AIMD: +1 per
 * acked frame below ssthresh, +1/cwnd above; halved once per window of
 * loss (fast retransmit; not below the initial window, LOSS_CWND_MIN) or
 * on an RTO.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

inline void rcpi_hdr_fill(rcp_chan *ch, struct rcpw_hdr *h, uint8_t type, uint16_t flags,
                          uint32_t seq, uint32_t msg, uint64_t tag, uint64_t arg, uint32_t len)
{
	rcpc_core *c = ch->core;
	h->magic = RCPW_MAGIC;
	h->version = RCPW_VERSION;
	h->type = type;
	h->flags = flags | (c->p.crc ? RCPW_F_CRC : 0);
	h->hlen = RCPW_HLEN;
	h->session = c->p.session;
	h->src_epoch = ch->my_epoch;
	h->dst_epoch = ch->peer_epoch;
	ch->sent_blind |= !ch->peer_epoch;
	h->seq = seq;
	h->ack = ch->rx_next;
	h->credits = ch->credits_given;
	h->wnd = c->p.rx_frames;
	h->len = len;
	h->crc = 0;
	h->msg = msg;
	h->tag = tag;
	h->arg = arg;
	ch->acked_upto = ch->rx_next;
	/* A piggybacked cumulative ack says nothing of frames held past a
	 * gap: then an ACK frame with the bitmap must still go. */
	if (!ch->rx_gaps || type == RCPW_ACK) {
		ch->ack_now = 0;
		ch->ack_pending = 0;
		/* No longer due either: a stale ack_due would otherwise fire
		 * right after the next frame arrives (chan_flush arms it only
		 * when unset) and send a pure ACK ahead of the reply. */
		ch->ack_due = 0;
	}
	ch->since_ack = 0;
}

/* Converts to wire order (the compact layout if h->hlen says so) and fills
 * the CRC over header and payload. */
inline void rcpi_hdr_seal(const rcpc_core *c, struct rcpw_hdr *h, const void *payload, uint32_t len)
{
	uint32_t hl = h->hlen;
	rcpw_hdr_swap(h);
	if (hl == RCPW_CHLEN)
		rcpw_compact(h);
	if (c->p.crc) {
		uint32_t crc = rcpw_crc32c(0, h, hl);
		crc = rcpw_crc32c(crc, payload, len);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		crc = __builtin_bswap32(crc);
#endif
		h->crc = crc;
	}
}

inline int rcpi_xmit(rcp_chan *ch, const void *hdr, uint32_t hlen, const void *payload,
                     uint32_t plen, unsigned more)
{
	rcpc_core *c = ch->core;
	struct iovec iov[2] = {{(void *)hdr, hlen}, {(void *)payload, plen}};
	int rc = c->io.send(c->io.ctx, ch->peer, iov, plen ? 2 : 1, more ? RCP_NIC_MORE : 0);
	if (!rc)
		c->st.frames_sent++;
	c->batched |= more != 0;
	ch->nic_err = rc;
	return rc;
}

/* Tail-loss probe: if nothing is acked within ~2 round trips of the last
 * frame S, the newest one is resent so the receiver's SACK names whatever
 * else is missing (cheaper than waiting for the RTO).  Every send arms it;
 * each probe since the last new frame (or ack progress) waits twice as
 * long as the one before.
 * Without that backoff a silent peer drew a probe every ~70 us (each probe
 * also restarts the frame's RTO, so no RTO ever came): an 80 ms host stall
 * cost 1,100 frames (measured, udp 8 B ping-pong).  Doubling keeps heavy
 * random loss (a lost probe is soon followed by another) and makes 5 s of
 * silence cost ~16 probes. */
static void tlp_arm(rcp_chan *ch, const struct slot *s, uint64_t now)
{
	const struct rcpc_params *pa = &ch->core->p;
	uint64_t p = ch->srtt ? 2 * ch->srtt : 2 * pa->rto_min;
	/* A frame without ACKREQ (a small eager message, say) may have its
	 * ack held up to ack_delay for a piggyback (a reply being computed):
	 * probe only after that, or every request whose answer takes longer
	 * than 2 RTT is resent and dup-acked, and Karn's rule then keeps srtt
	 * from learning. */
	if (!s->ackreq && p < ch->srtt + pa->ack_delay + pa->ack_delay / 4)
		p = ch->srtt + pa->ack_delay + pa->ack_delay / 4;
	if (p < TIMER_MIN_NS)
		p = TIMER_MIN_NS;
	ch->tlp_at = now + (p << (ch->tlp_probes < 16 ? ch->tlp_probes : 16));
}

/* A frame sealed blind (dst_epoch 0) and resent after the peer was heard
 * goes out naming the peer: once the peer has named us it takes blind
 * frames of its epoch for stragglers (HANDSHAKE), and a resend must not
 * be one.  The crc is sealed again; the rest of the header is as sent. */
static void slot_unblind(rcp_chan *ch, struct slot *s)
{
	const rcpc_core *c = ch->core;
	uint32_t e = ch->peer_epoch;

	if (s->hdr.dst_epoch || !e)
		return;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	e = __builtin_bswap32(e);
#endif
	s->hdr.dst_epoch = e;
	if (c->p.crc) {
		uint32_t crc;
		s->hdr.crc = 0;
		crc = rcpw_crc32c(0, &s->hdr, s->hlen);
		crc = rcpw_crc32c(crc, s->payload, s->plen);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		crc = __builtin_bswap32(crc);
#endif
		s->hdr.crc = crc;
	}
}

/* Transmits slot S (first time or again).  Returns 0 or RCP_EAGAIN. */
RCPI_HOT_INLINE int rcpi_slot_send(rcp_chan *ch, struct slot *s, uint64_t now)
{
	int rc;

	if (RCPI_UNLIKELY(!s->hdr.dst_epoch))
		slot_unblind(ch, s);
	rc = rcpi_xmit(ch, &s->hdr, s->hlen, s->payload, s->plen, !ch->core->xmit_now);
	if (rc == RCP_EAGAIN) {
		/* sent_at == 0 marks "the nic refused it": first in line
		 * for the next pump. */
		if (s->sent_at) {
			s->sent_at = 0;
			ch->unsent++;
			ch->unplain = 1; /* (chan.h, PLAIN) */
		}
		return rc;
	}
	if (rc == RCP_EPEER && !ch->core->p.reliable) {
		/* On a nic that may lose frames, RCP_EPEER relays an ICMP
		 * error: anyone can forge one, and a peer not started yet
		 * draws one too.  A hint, not a verdict: the frame counts as
		 * sent and lost, and only the peer timeout fails the channel
		 * (HANDSHAKE).  Its one use: closing does not linger here. */
		ch->unreachable = 1;
		rc = 0;
	}
	if (rc) {
		rcpi_chan_fail(ch, rc);
		return rc;
	}
	if (!s->sent_at)
		ch->unsent--;
	if (s->nsent)
		ch->core->st.retransmits++;
	else
		ch->last_tx = now;
	s->sent_at = now ? now : 1;
	/* Every send (re)arms the tail-loss probe; a new frame also ends
	 * the probes' backoff (tlp_arm). */
	if (!ch->core->p.reliable) {
		if (!s->nsent)
			ch->tlp_probes = 0;
		tlp_arm(ch, s, now);
	}
	if (s->nsent < 255)
		s->nsent++;
	return 0;
}

/* Takes the next sequence number and a slot for a reliable frame. */
RCPI_HOT_INLINE struct slot *rcpi_slot_new(rcp_chan *ch, rcp_req *req, uint8_t type, uint16_t flags,
                                           uint32_t msg, uint64_t tag, uint64_t arg,
                                           const void *payload, uint32_t plen, int copy)
{
	struct slot *s;

	assert(ch->slots); /* an accepted channel is claimed before it sends */
	s = slot_claim(ch, req, plen, flags & RCPW_F_ACKREQ);
	if (copy) {
		assert(plen <= INLINE_CAP);
		s->payload = slot_inl(ch, s, plen);
		copy_bytes((unsigned char *)s->payload, payload, plen);
	} else {
		s->payload = payload;
	}
	if (req)
		req->frames_out++;
	rcpi_hdr_fill(ch, &s->hdr, type, flags, s->seq, msg, tag, arg, plen);
	/* A whole message goes under the compact header once the peer has our
	 * window (only full headers carry it). */
	if (type == RCPW_DATA && (flags & RCPW_F_EAGER) && ch->wnd_told)
		s->hdr.hlen = RCPW_CHLEN;
	s->hlen = (uint8_t)s->hdr.hlen;
	rcpi_hdr_seal(ch->core, &s->hdr, s->payload, plen);
	return s;
}

int rcpi_ctl_push(rcp_chan *ch, const struct ctl *k)
{
	chan_dirty(ch);
	if (ch->ctl_count == ch->ctl_cap) {
		uint32_t ncap = ch->ctl_cap ? 2 * ch->ctl_cap : 8;
		struct ctl *n = malloc(sizeof *n * ncap);
		if (!n)
			return RCP_ENOMEM;
		for (uint32_t i = 0; i < ch->ctl_count; i++)
			n[i] = ch->ctlq[(ch->ctl_head + i) % ch->ctl_cap];
		free(ch->ctlq);
		ch->ctlq = n;
		ch->ctl_head = 0;
		ch->ctl_cap = ncap;
	}
	ch->ctlq[(ch->ctl_head + ch->ctl_count++) % ch->ctl_cap] = *k;
	ch->unplain = 1; /* (chan.h, PLAIN) */
	return 0;
}

/* The least window a loss that RACK found leaves: the window a channel
 * starts with (chan.c), which it sends blind, knowing nothing of the
 * path.  Random loss is not congestion: halving down to 2 frames, at 5%
 * loss (a 1 MiB message of 117 jumbo frames loses ~6) the window halved
 * about once per message and settled at 4-8 frames, where the round trip
 * and the receiver's delayed acks (every ACK_EVERY frames, else after
 * ack_delay) left the link idle: 0.65x of the loss-free bandwidth on the
 * simulated 10 Gbit/s link of tests/test_rcp_loss.c, 0.89x with this
 * floor (the issue asks 0.75x).  An overflowing queue still halves the
 * window down to it, a timeout (rcpi_loss_timers: loss RACK could not
 * see) down to 2 frames, and the receiver's window (peer_wnd) bounds the
 * frames in flight whatever cwnd says. */
#define LOSS_CWND_MIN (32 * CWND_ONE)

/* How long a hole below the highest selectively acked frame may stay
 * open before it is taken as lost.  Two rules, the first to fire:
 *
 * - rack_fast (RFC 8985's RACK): once a frame sent after the hole was
 *   (re)sent was delivered, the round trip of the newest delivered frame
 *   (rack_rtt: what the path, queue included, takes now) plus a reordering
 *   window of a quarter of the least round trip (reordering on these
 *   links is shorter than that).
 * - rack_slow (the rule until session 19): any frame of a higher
 *   sequence selectively acked, and srtt x 5/4 since the hole was sent.
 *   It alone resends a resent hole lost again when nothing went after
 *   it (a message's tail): waiting there for a probe (tlp_arm) or the
 *   RTO, as RFC 8985 does, drew 8x the timeouts on the 10 Gbit/s 5%
 *   cluster link (session 20).
 *
 * srtt, a smoothed mean, lags the queue a message builds (its first
 * frames see an empty queue, its last ones ~26 frames, ~190 us at 10
 * Gbit/s): with the second rule alone a hole waited ~1.3 mean round
 * trips, with both ~1.15 (tests/test_rcp_loss.c; docs/results.md,
 * session 20).  The fast rule needs a frame sent after the hole: on
 * rack_rtt alone, a round trip at an empty queue, resent holes still
 * queued behind a full one were resent again (3x the frames resent at 5%
 * loss, measured). */
static uint64_t rack_fast(const rcp_chan *ch)
{
	uint64_t w = ch->rack_rtt + ch->min_rtt / 4;
	return w < TIMER_MIN_NS ? TIMER_MIN_NS : w;
}

static uint64_t rack_slow(const rcp_chan *ch)
{
	uint64_t w = ch->srtt ? ch->srtt + ch->srtt / 4 : ch->rto;
	return w < TIMER_MIN_NS ? TIMER_MIN_NS : w;
}

/* Frames to resend may be waiting: refused by the nic, or below the
 * highest selectively acked one (a hole). */
inline int rcpi_chan_resend_due(const rcp_chan *ch)
{
	return ch->unsent || (ch->have_sack && rcpw_seq_lt(ch->tx_una, ch->highest_sacked));
}

/* Resends frames taken as lost.  Returns 0 or RCP_EAGAIN. */
int rcpi_chan_retransmit(rcp_chan *ch, uint64_t now)
{
	uint64_t fast = rack_fast(ch), slow = rack_slow(ch);
	ch->rack_at = 0;
	if (!rcpi_chan_resend_due(ch))
		return 0;
	for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++) {
		struct slot *s = slot_of(ch, seq);
		int below;
		uint64_t at;
		if (s->sacked)
			continue;
		/* Lost: never went out, or below the highest selectively
		 * acked frame and out past its wait (rack_fast if a frame
		 * sent after this one's last send was delivered, else
		 * rack_slow). */
		below = ch->have_sack && rcpw_seq_lt(seq, ch->highest_sacked) && s->sent_at;
		if (s->sent_at && !below)
			continue;
		at = !s->sent_at                                 ? 0
		     : s->sent_at < ch->rack_xmit && fast < slow ? s->sent_at + fast
		                                                 : s->sent_at + slow;
		if (now < at) {
			if (!ch->rack_at || at < ch->rack_at)
				ch->rack_at = at;
			continue;
		}
		if (s->sent_at && rcpw_seq_le(ch->recover, seq)) {
			/* One multiplicative decrease per window of loss, not
			 * below LOSS_CWND_MIN (nor above the window it had). */
			uint32_t w = ch->cwnd < LOSS_CWND_MIN ? ch->cwnd : LOSS_CWND_MIN;
			ch->ssthresh = ch->cwnd / 2 > w ? ch->cwnd / 2 : w;
			if (ch->ssthresh < 2 * CWND_ONE)
				ch->ssthresh = 2 * CWND_ONE;
			ch->cwnd = ch->ssthresh;
			ch->recover = ch->tx_next;
		}
		if (s->sent_at) {
			ch->core->st.rack_resends++;
			ch->core->st.rack_wait_ns += now - s->sent_at;
		}
		if (rcpi_slot_send(ch, s, now))
			return RCP_EAGAIN;
	}
	return 0;
}

void rcpi_send_ping(rcp_chan *ch, uint64_t now)
{
	struct rcpw_hdr h;
	rcpi_hdr_fill(ch, &h, RCPW_PING, 0, 0, 0, 0, 0, 0);
	rcpi_hdr_seal(ch->core, &h, NULL, 0);
	rcpi_xmit(ch, &h, RCPW_HLEN, NULL, 0, 0);
	ch->last_ping = now;
}

/* One of our frames is acknowledged (cumulatively or selectively). */
static RCPI_HOT_INLINE void slot_acked(rcp_chan *ch, struct slot *s, uint64_t now)
{
	rcp_req *r = s->req;

	/* A nic that never loses frames (RCP_NIC_CAP_RELIABLE: p.reliable)
	 * needs no round-trip estimate: nothing is resent early there (no
	 * tail-loss probe, no RACK: nothing is ever selectively acked) and
	 * its RTO is a safety net at rto_min (rcp/endpoint.c), so the sample
	 * and the estimate's update are skipped (issue 19). */
	if (!ch->core->p.reliable && s->nsent == 1 && s->sent_at > 1 && now >= s->sent_at) {
		uint64_t sample = now - s->sent_at;
		ch->core->st.rtt_samples++;
		struct rcp_ep_stats *st = &ch->core->st;
		if (!ch->srtt) {
			ch->srtt = sample;
			ch->rttvar = sample / 2;
		} else {
			uint64_t d = sample > ch->srtt ? sample - ch->srtt : ch->srtt - sample;
			ch->rttvar = (3 * ch->rttvar + d) / 4;
			ch->srtt = (7 * ch->srtt + sample) / 8;
		}
		/* A sample of 0 is the endpoint's cached clock (one progress
		 * sent and took the ack), not a path: it would read as "none
		 * yet" and RACK's window would flip between 0 and a path's. */
		if (sample && (!ch->min_rtt || sample < ch->min_rtt))
			ch->min_rtt = sample;
		st->rtt_sum_ns += sample;
		st->pipe_sum += ch->tx_next - ch->tx_una - ch->sacked_out;
		st->srtt_ns = ch->srtt;
		st->rttvar_ns = ch->rttvar;
		st->min_rtt_ns = ch->min_rtt;
		st->cwnd_frames = ch->cwnd / CWND_ONE;
	}
	/* RACK's newest delivered frame.  A resent frame counts unless its
	 * ack came sooner than a round trip could (RFC 8985: then it acked
	 * the first send, and the resend says nothing of the path). */
	if (!ch->core->p.reliable && s->sent_at > ch->rack_xmit && now >= s->sent_at &&
	    (s->nsent == 1 || now - s->sent_at >= ch->min_rtt)) {
		ch->rack_xmit = s->sent_at;
		ch->rack_rtt = now - s->sent_at;
	}
	cwnd_grow(ch);
	if (s->hlen == RCPW_HLEN)
		ch->wnd_told = 1;
	s->req = NULL;
	if (r && --r->frames_out == 0 && r->state == S_WAITACK) {
		list_del(&r->link);
		rcpi_complete(r, 0);
	}
}

inline void rcpi_update_rto(rcp_chan *ch)
{
	const struct rcpc_params *p = &ch->core->p;
	uint64_t rto = ch->srtt ? ch->srtt + 4 * ch->rttvar : p->rto_init;
	if (rto < p->rto_min)
		rto = p->rto_min;
	/* Not before a resent hole's reordering window (srtt x 5/4 after the
	 * resend, rack_slow) and the tail-loss probe (2 srtt) could act: with
	 * a steady queue rttvar is small, srtt + 4 rttvar came first, and the
	 * timeout resent every frame out longer than it (measured at 1 Gbit/s
	 * with 5% loss and a 32-frame window: ~3 timeouts per 1 MiB round
	 * trip, half of them gone with this bound; docs/results.md). */
	if (rto < 2 * ch->srtt)
		rto = 2 * ch->srtt;
	rto <<= ch->backoff;
	ch->rto = rto > p->rto_max ? p->rto_max : rto;
}

/* Header fields every frame carries: cumulative ack, credits, window.
 * Returns -1, having changed nothing, for an ack of frames never sent.
 *
 * Ranges are checked as unsigned distances from the lower end, never by
 * two serial-number comparisons: those are both true for a value exactly
 * 2^31 away (RFC 1982 leaves that case undefined), so with nothing in
 * flight an ack of tx_una + 2^31 passed both, and the loop below walked
 * 2^31 slots (~8.6 s of CPU from one datagram) and left tx_una past
 * tx_next.  An ack at or behind tx_una (an old frame, reordered) is
 * normal; one past tx_next cannot come from a correct peer. */
inline int rcpi_process_ack_fields(rcp_chan *ch, const struct rcpw_hdr *h, uint64_t now)
{
	uint32_t inflight = ch->tx_next - ch->tx_una;
	uint32_t ahead = h->ack - ch->tx_una;
	int progress = 0;

	if (ahead > inflight && h->ack - ch->tx_next <= 0x80000000u)
		return -1; /* beyond tx_next (by up to 2^31): never sent */
	/* Credits: forward of what we hold, by at most what we used plus a
	 * bound, so a forged value cannot give unlimited credit. */
	if ((uint32_t)(h->credits - ch->credits_granted) - 1u <
	    (uint32_t)(ch->credits_used + 1000000 - ch->credits_granted))
		ch->credits_granted = h->credits;
	if (h->wnd)
		ch->peer_wnd = h->wnd > TXW_MAX ? TXW_MAX : h->wnd;
	if (ahead && ahead <= inflight) {
		while (ch->tx_una != h->ack) {
			struct slot *s = slot_of(ch, ch->tx_una);
			if (!s->sacked)
				slot_acked(ch, s, now);
			else
				ch->sacked_out--;
			if (!s->sent_at)
				ch->unsent--;
			slot_free(ch, s);
			ch->tx_una++;
		}
		progress = 1;
	}
	if (progress) {
		/* RFC 6298 (5.3): restart the timer when new data is acked, so
		 * a deep queue behind a full window is not taken for loss. */
		ch->rto_base = now;
		ch->tlp_probes = 0;
		/* Without samples (a reliable nic) the RTO moves only with
		 * the backoff. */
		if (!ch->core->p.reliable || ch->backoff) {
			ch->backoff = 0;
			rcpi_update_rto(ch);
		}
		if (ch->tx_una == ch->tx_next)
			ch->tlp_at = 0;
		/* Marks behind tx_una mean nothing more; left there, 2^31
		 * frames later the serial comparisons against them would flip:
		 * every frame in flight taken for a hole (highest_sacked), or no
		 * window decrease on loss (recover). */
		if (ch->have_sack && !rcpw_seq_lt(ch->tx_una, ch->highest_sacked))
			ch->have_sack = 0;
		if (rcpw_seq_lt(ch->recover, ch->tx_una))
			ch->recover = ch->tx_una;
	}
	return 0;
}

void rcpi_process_sack(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl,
                       uint64_t now)
{
	uint32_t words = h->len / 8;
	for (uint32_t w = 0; w < words; w++) {
		uint64_t bits;
		memcpy(&bits, pl + 8 * w, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		bits = __builtin_bswap64(bits);
#endif
		while (bits) {
			uint32_t i = (uint32_t)__builtin_ctzll(bits);
			uint32_t seq = h->ack + 1 + 64 * w + i;
			bits &= bits - 1;
			/* Distance from tx_una, not serial comparisons (see
			 * process_ack_fields). */
			if (seq - ch->tx_una >= ch->tx_next - ch->tx_una)
				continue;
			struct slot *s = slot_of(ch, seq);
			if (s->sacked)
				continue;
			s->sacked = 1;
			ch->sacked_out++;
			slot_acked(ch, s, now);
			if (!ch->have_sack || rcpw_seq_lt(ch->highest_sacked, seq))
				ch->highest_sacked = seq;
			ch->have_sack = 1;
			ch->unplain = 1; /* (chan.h, PLAIN) */
		}
	}
}

/* Resends at once every frame out on CH: the peer's challenge says it
 * dropped them (it had no channel, or took us for a stranger). */
void rcpi_chan_resend_all(rcp_chan *ch, uint64_t now)
{
	for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++) {
		struct slot *s = slot_of(ch, seq);
		if (!s->sacked && s->sent_at && rcpi_slot_send(ch, s, now))
			break;
	}
}

/* The loss timers of CH at NOW (rcpc_timers calls it for a channel that is
 * due): the retransmission timeout on the oldest frame out, and the
 * tail-loss probe (tlp_arm).  A hole's reordering window (RACK) that ran
 * out needs nothing here: the flush that follows resends it. */
void rcpi_loss_timers(rcp_chan *ch, uint64_t now)
{
	/* Retransmission timeout on the oldest frame out. */
	if (ch->tx_una != ch->tx_next) {
		struct slot *s = slot_of(ch, ch->tx_una);
		uint64_t base = s->sent_at > ch->rto_base ? s->sent_at : ch->rto_base;
		if (s->sent_at && now >= base + ch->rto) {
			ch->core->st.timeouts++;
			ch->ssthresh = ch->cwnd / 2 > 2 * CWND_ONE ? ch->cwnd / 2 : 2 * CWND_ONE;
			ch->cwnd = ch->ssthresh;
			ch->recover = ch->tx_next;
			for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++) {
				struct slot *q = slot_of(ch, seq);
				if (!q->sacked && q->sent_at && now >= q->sent_at + ch->rto)
					if (rcpi_slot_send(ch, q, now))
						break;
			}
			if (ch->backoff < 12)
				ch->backoff++;
			ch->unplain = 1; /* (chan.h, PLAIN) */
			rcpi_update_rto(ch);
		}
	}
	/* Tail-loss probe. */
	if (!ch->failed && ch->tlp_at && now >= ch->tlp_at && ch->tx_una != ch->tx_next) {
		uint32_t seq = ch->tx_next - 1;
		struct slot *q = slot_of(ch, seq);
		ch->tlp_at = 0;
		while (q->sacked && seq != ch->tx_una) {
			seq--;
			q = slot_of(ch, seq);
		}
		if (!q->sacked && q->sent_at) {
			ch->tlp_probes++; /* the re-arm in slot_send waits longer */
			ch->core->st.tlp_probes++;
			rcpi_slot_send(ch, q, now);
		}
	}
}
