/*
 * rcp/handshake.c — who a frame may come from: epochs checked, restart
 * claims challenged, unknown senders accepted on a cookie echo, half-open
 * accepted channels reclaimed.  rcpc_input (core.c) asks rcpi_admit for
 * the channel of each frame; the keyed numbers are epoch.c's (rcp/core.c,
 * LAYERS).
 *
 * HANDSHAKE.  The pair (src_epoch, dst_epoch) is the channel's
 * verification tag, as SCTP's: both are random, and a sender that names
 * our epoch has received from us at its address, which a blind spoofer
 * cannot.  So a frame with dst_epoch 0 and an epoch other than the peer's
 * is only a claim of a restart: it is dropped (stats.restart_claims) and
 * answered with a challenge, a PING to the claimed incarnation with a
 * nonzero arg; the new incarnation takes our epoch from it and answers at
 * once with an ACK that names it (echoing the arg), and only that frame
 * resets the channel.  A new epoch on a frame that names ours is no
 * proof either (a straggler of a conversation before): challenged too.
 * The challenge is a nonce, one per claimed epoch, and only an ACK that
 * echoes it proves the claim; the echo is flagged FRESH when the echoing
 * channel has taken no reliable frame (rx_taken), and then our blind
 * frames cannot be in its conversation: ours goes on, no announce.  A
 * frame with dst_epoch 0 and the peer's own epoch is taken until the peer
 * has named us (named: its first frames were sealed before it heard us);
 * after that a blind frame of its epoch is a straggler, dropped, and our
 * own blind frames are resealed naming the peer when resent
 * (slot_unblind).  Before the first contact a connected channel takes the first
 * epoch it hears, as before (residual: a spoofer racing the real peer's
 * first frame).  Accepting endpoints (RCP_EP_ACCEPT) keep no state for an
 * unknown sender, whose frames may come from forged addresses: when the
 * glue offers io.send_to (udp), the frame is dropped and answered with a
 * challenge whose arg is a cookie, SipHash-2-4 under a per-endpoint random
 * key of the address, both epochs and a 8.6 s time slot; a peer index and
 * a channel are made only for an ACK naming our epoch that echoes a cookie
 * of this slot or the one before (stats.chans_accepted).  A channel that
 * gets a challenge echoes it and resends at once what it has out (the
 * challenger dropped it), so a client's first message costs one round trip
 * more on a server, an established channel none.  A challenge is never
 * answered with a challenge.  Accepted channels that carry no reliable
 * frame either way (half-open: the user cannot hold them, and a fresh
 * channel continues their numbering exactly) are closed once idle for
 * the peer timeout (looked for every peer_timeout/4 while any exist;
 * stats.chans_reclaimed), and the oldest of them makes room when the
 * nic's peer table is full.  RCP_EPEER from a send on a
 * nic that may lose frames relays an ICMP error (forgeable; a peer not up
 * yet draws one too): the frame counts as lost and only the peer timeout
 * fails the channel.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

/* Sends a challenge: a PING to incarnation DST_EPOCH carrying COOKIE
 * (nonzero), as a fresh channel of ours would send it.  To nic peer PEER,
 * or, if PEER < 0, to the address SRC without making a peer of it.  The
 * receiver echoes COOKIE in an ACK, which names our epoch: proof that it
 * receives at that address (a blind sender never sees our epoch). */
static void send_challenge(rcpc_core *c, int peer, const void *src, size_t srclen,
                           uint32_t src_epoch, uint32_t dst_epoch, uint64_t cookie)
{
	struct rcpw_hdr h;
	int rc;

	memset(&h, 0, sizeof h);
	h.magic = RCPW_MAGIC;
	h.version = RCPW_VERSION;
	h.type = RCPW_PING;
	h.flags = c->p.crc ? RCPW_F_CRC : 0;
	h.hlen = RCPW_HLEN;
	h.session = c->p.session;
	h.src_epoch = src_epoch;
	h.dst_epoch = dst_epoch;
	h.ack = 1;
	h.credits = c->p.credits;
	h.wnd = c->p.rx_frames;
	h.arg = cookie;
	rcpi_hdr_seal(c, &h, NULL, 0);
	if (peer >= 0) {
		struct iovec iov = {&h, RCPW_HLEN};
		rc = c->io.send(c->io.ctx, peer, &iov, 1, 0);
	} else {
		rc = c->io.send_to(c->io.ctx, src, srclen, &h, RCPW_HLEN);
	}
	if (!rc) {
		c->st.frames_sent++;
		c->st.challenges_sent++;
	}
}

/* Closes accepted channels that are still half-open (no reliable frame
 * either way, so neither side's sequence or message numbers moved and a
 * fresh channel continues them exactly) and idle for the peer timeout: an
 * address that once echoed a cookie holds no memory for good. */
void rcpi_chans_sweep(rcpc_core *c, uint64_t now)
{
	struct list *p, *t;
	c->sweep_at = now + (c->p.peer_timeout / 4 ? c->p.peer_timeout / 4 : 1);
	list_for_each_safe(p, t, &c->chans)
	{
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->accepted && !ch->user && chan_idle(ch) &&
		    now - ch->last_heard > c->p.peer_timeout) {
			c->st.chans_reclaimed++;
			rcpc_chan_close(ch, now);
		}
	}
}

/* The nic's peer table (or memory) is full: makes room by closing the
 * half-open accepted channel heard from longest ago, idle or not.  Senders
 * that echo cookies from many addresses they own then displace each other,
 * never a channel that carried a message.  Returns 1 if one was closed. */
static int chans_evict(rcpc_core *c, uint64_t now)
{
	struct list *p;
	rcp_chan *old = NULL;
	for (p = c->chans.next; p != &c->chans; p = p->next) {
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->accepted && !ch->user && (!old || ch->last_heard < old->last_heard))
			old = ch;
	}
	if (!old)
		return 0;
	c->st.chans_reclaimed++;
	rcpc_chan_close(old, now);
	return 1;
}

/* The channel frame H (parsed, with a nonzero src_epoch) is taken on, or
 * NULL if it is dropped (counted): from an unknown sender (accepted on a
 * cookie echo), a stale epoch, a restart claim (challenged), a blind
 * straggler, a failed channel.  A proven restart resets the channel here
 * (HANDSHAKE).  PEER, SRC, SRCLEN as rcpc_input's. */
inline rcp_chan *rcpi_admit(rcpc_core *c, int peer, const void *src, size_t srclen,
                            const struct rcpw_hdr *h, uint64_t now)
{
	rcp_chan *ch;
	int announce = 0;

	ch = peer >= 0 && peer < c->npeers ? c->by_peer[peer] : NULL;
	if (!ch) {
		/* Unknown sender: servers take it as a new channel, once it
		 * echoes a cookie (HANDSHAKE). */
		int np = peer;
		if (!(c->p.flags & RCP_EP_ACCEPT) || (h->dst_epoch && h->dst_epoch != c->p.epoch)) {
			c->st.stale_frames++;
			return NULL;
		}
		if ((np < 0 || (np < c->nended && c->ended[np])) && c->io.send_to &&
		    !(src && srclen <= COOKIE_SRC_MAX &&
		      rcpi_cookie_echoed(c, src, srclen, h, now))) {
			/* No state until the sender proves it receives at its
			 * address; a challenge is never answered with one. */
			if (src && srclen <= COOKIE_SRC_MAX && !(h->type == RCPW_PING && h->arg))
				send_challenge(c, -1, src, srclen, c->p.epoch, h->src_epoch,
				               rcpi_cookie_of(c, src, srclen, h->src_epoch,
				                              now >> COOKIE_SLOT_SHIFT));
			c->st.stale_frames++;
			return NULL;
		}
		if (c->naccepted && now >= c->sweep_at)
			rcpi_chans_sweep(c, now);
		if (np < 0) {
			int rc = c->io.peer_add ? c->io.peer_add(c->io.ctx, src, srclen, &np)
			                        : RCP_EINVAL;
			/* A full peer table: a half-open channel makes room. */
			if (rc && c->io.peer_add && c->naccepted && chans_evict(c, now))
				rc = c->io.peer_add(c->io.ctx, src, srclen, &np);
			if (rc) {
				c->st.stale_frames++;
				return NULL;
			}
		}
		if (rcpi_chan_open(c, np, now, 1, &ch)) {
			c->st.stale_frames++;
			return NULL;
		}
		ch->accepted = 1;
		ch->unplain = 1; /* (chan.h, PLAIN) */
		if (!c->naccepted++)
			c->sweep_at = now + (c->p.peer_timeout / 4 ? c->p.peer_timeout / 4 : 1);
		c->st.chans_accepted++;
	}
	if (ch->failed == RCP_ECLOSED)
		return NULL;
	if (h->dst_epoch && h->dst_epoch != ch->my_epoch) {
		/* Meant for an earlier incarnation of us or an earlier
		 * conversation of this channel (CHANNELS). */
		c->st.stale_frames++;
		return NULL;
	}
	if (RCPI_UNLIKELY(h->src_epoch == ch->gone_epoch)) {
		/* A straggler of the incarnation this channel left: taking it
		 * for a restart would reset the channel under the new one. */
		c->st.stale_frames++;
		return NULL;
	}
	if (h->src_epoch != ch->peer_epoch) {
		if (ch->peer_epoch) {
			if (!h->dst_epoch || h->type != RCPW_ACK || !ch->chal ||
			    h->arg != ch->chal || h->src_epoch != ch->chal_epoch) {
				/* A new incarnation or conversation of the peer:
				 * a claim, never a reset by itself (a blind one
				 * anyone can forge; one naming our epoch may be a
				 * straggler of a conversation before).  Challenge
				 * it; only the echo of this challenge, which names
				 * our epoch, proves it. */
				c->st.restart_claims++;
				if (!(h->type == RCPW_PING && h->arg)) {
					/* One nonce per claimed epoch: the echo of
					 * any challenge sent to it proves it. */
					if (!ch->chal || ch->chal_epoch != h->src_epoch)
						ch->chal = rcpi_chal_nonce(c, ch, h->src_epoch);
					ch->chal_epoch = h->src_epoch;
					send_challenge(c, ch->peer, NULL, 0, ch->my_epoch,
					               h->src_epoch, ch->chal);
				}
				return NULL;
			}
			/* The peer restarted (proven): what was pending with
			 * the old incarnation is lost.  If frames of ours went
			 * out blind (dst_epoch 0), the new incarnation could
			 * take (or have taken) them for this conversation's:
			 * start a new one, and say so at once (a PING with
			 * the new epoch: the peer challenges it and starts
			 * afresh too, or it would keep addressing the old). */
			announce = ch->sent_blind && !(h->flags & RCPW_F_FRESH);
			rcpi_chan_reset(ch, RCP_EPEER);
			if (announce)
				ch->my_epoch = rcpi_conv_epoch(c);
			rcpi_conv_end(c, ch->peer);
			ch->chal = 0;
			ch->restarts++;
			ch->gone_epoch = ch->peer_epoch;
		}
		ch->peer_epoch = h->src_epoch;
		ch->named = 0;
		ch->failed = 0;
		if (announce)
			rcpi_send_ping(ch, now);
	}
	if (h->dst_epoch) {
		ch->named = 1;
	} else if (ch->named) {
		/* The peer has named us before: a blind frame of its epoch is
		 * a straggler sealed before it heard us (or, after a restart
		 * proven by a challenge, sealed for an earlier conversation
		 * of ours), never a frame of this one. */
		c->st.stale_frames++;
		return NULL;
	}
	if (ch->failed)
		return NULL;
	return ch;
}
