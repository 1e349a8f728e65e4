/*
 * rcp/timers.c — when the core acts without a frame or a call: firing
 * due timers, the delayed ack, the next deadline.  Above every file of the
 * core but core.c, which calls it (rcp/core.c, LAYERS).
 *
 * TIMERS.  Per channel: RTO of the oldest frame out, the delayed ack, and
 * liveness: while a channel has work pending, a peer silent for
 * peer_timeout/4 is pinged; silent for peer_timeout, the channel fails
 * and every pending operation on it completes with RCP_EPEER.  Every timer
 * an API call (send, receive) or a received frame can arm lies at least
 * timer_floor ahead (the TLP and reordering floors, ack_delay, rto_min,
 * peer_timeout/8), or it is "retry at once" (the nic refused a frame:
 * c->retry), or it is a reordering timer for a hole whose frame went out
 * long ago (c->soon_at keeps the earliest such).  So after an API call or
 * a batch of frames rcpc_deadline_soon() gives a safe early bound without
 * walking the channels; firing rcpc_timers early is harmless (nothing is
 * due, it does nothing), and the endpoint takes the exact rcpc_deadline()
 * after timers and before it sleeps.
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

void rcpi_chan_flush(rcp_chan *ch, uint64_t now)
{
	rcpi_chan_pump(ch, now);
	if (ch->failed)
		return;
	if (ch->ack_now) {
		rcpi_send_ack(ch, now);
		ch->ack_due = 0;
	} else if (ch->ack_pending && !ch->ack_due) {
		ch->ack_due = now + ch->core->p.ack_delay;
	}
}

int rcpc_timers(rcpc_core *c, uint64_t now)
{
	struct list *p, *t;

	c->retry = 0;   /* what is still refused below sets it again */
	c->soon_at = 0; /* chan_flush below arms what is left */
	if (c->naccepted && now >= c->sweep_at)
		rcpi_chans_sweep(c, now);

	list_for_each_safe(p, t, &c->chans)
	{
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || chan_idle(ch))
			continue;
		rcpi_loss_timers(ch, now);
		/* Liveness. */
		if (!ch->failed && chan_has_work(ch)) {
			if (now > ch->last_heard + c->p.peer_timeout) {
				rcpi_chan_fail(ch, RCP_EPEER);
				continue;
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
	if (c->io.flush)
		c->io.flush(c->io.ctx);
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
		ch->ack_due = 0;
		cleared = 1;
		if (ack_owed(ch)) {
			rcpi_send_ack(ch, now);
			sent = 1;
		}
	}
	if (sent && c->io.flush)
		c->io.flush(c->io.ctx);
	return cleared;
}

uint64_t rcpc_deadline(const rcpc_core *c)
{
	uint64_t d = c->naccepted ? c->sweep_at : UINT64_MAX;
	const struct list *p;

	for (p = c->chans.next; p != &c->chans; p = p->next) {
		const rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || chan_idle(ch))
			continue;
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
		if (ch->ack_now)
			d = 0;
		if (chan_has_work(ch)) {
			uint64_t ping = ch->last_heard + c->p.peer_timeout / 4;
			if (ch->last_ping + c->p.peer_timeout / 8 > ping)
				ping = ch->last_ping + c->p.peer_timeout / 8;
			if (ping < d)
				d = ping;
			if (ch->last_heard + c->p.peer_timeout + 1 < d)
				d = ch->last_heard + c->p.peer_timeout + 1;
		}
	}
	return d;
}

uint64_t rcpc_deadline_soon(const rcpc_core *c, uint64_t now)
{
	uint64_t d = c->retry ? 0 : now + c->timer_floor;
	return c->soon_at && c->soon_at < d ? c->soon_at : d;
}
