/*
 * pvm-glue/ctrl.c — the glue's control messages on RCP channels: HELLO
 * (first on a channel direction: the sender's tid and stock totals),
 * BARRIER (stock messages an RCP one follows) and FENCE (numbered: stock
 * messages may follow), see glue.c, "ORDER BETWEEN THE TWO PATHS".
 *
 * HELLO and FENCE BY POSTED RECEIVES.  A HELLO must be taken before the
 * messages behind it on its channel are looked at (it names their
 * sender), and a FENCE whenever it is there (numbered: order does not
 * matter).  Until session 17 every look of the matcher took them with two
 * rcp_probe calls per endpoint, each progressing the endpoint (about
 * 1,800 instructions per packed round trip).  Now each endpoint has one
 * receive posted for each, on any channel, with a completion callback
 * (rcp_irecv_cb) that applies it and posts the next: RCP matches it as it
 * arrives, in its channel's order, and runs the callback at the end of
 * the progress that took it, before the caller of that progress looks at
 * what came behind it.  BARRIERs are taken in order, at their channel's
 * head, by the matcher (recv.c).  pvmrcpi_process_hellos is left for an
 * endpoint whose receives could not be posted (out of memory).
 */
#include <stdint.h>
#include <string.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/glue.h"

#define S pvmrcpi_st

/* Applies control message T (payload B, four ints) from CH of EP. */
static void ctrl_apply(rcp_ep *ep, rcp_chan *ch, uint64_t t, const int32_t *b)
{
	struct pr_peer *p, *o;

	pr_changed(); /* pr_quiet's inputs, route, ch (glue.h, FAST PATHS) */
	if (t == PR_HELLO) {
		p = pvmrcpi_peer(b[0], 1);
		if (!p)
			return;
		if (p->ch && p->ch != ch) {
			pvmrcpi_chan_set(p->ch, NULL);
			p->fence_seen = 0; /* a new task under an old tid */
			p->drained_tot = 0;
		}
		o = pvmrcpi_chan_get(ch);
		if (o && o != p)
			pvmrcpi_peer_gone(o); /* a new task at a gone task's address */
		p->ch = ch;
		p->restarts = rcp_chan_restarts(ch);
		p->ep = ep;
		p->route = PR_RCP;
		p->dead = 0;
		p->hello_recv = 1;
		p->ann_total = (uint32_t)b[1];
		p->fence_cov = (uint32_t)b[2];
		pvmrcpi_chan_set(ch, p);
	} else if (t == PR_BARRIER) {
		struct pr_ctxstate *cs;
		p = pvmrcpi_chan_get(ch);
		if (p && (cs = pvmrcpi_cs(p, b[0])))
			cs->cur_req = (uint32_t)b[1];
		if (p) {
			p->ann_total = (uint32_t)b[2];
			p->fence_cov = (uint32_t)b[3];
		}
	} else if (t == PR_FENCE) {
		p = pvmrcpi_chan_get(ch);
		if (p && (uint32_t)b[0] > p->fence_seen)
			p->fence_seen = (uint32_t)b[0];
	}
}

/* Takes control message T (the first with that tag on CH of EP). */
void pvmrcpi_take_ctrl(rcp_ep *ep, rcp_chan *ch, uint64_t t)
{
	int32_t b[4] = {0};
	struct rcp_status st;

	/* A FENCE found by tag may have come with its channel's HELLO (which
	 * precedes it) not yet taken: take that first, or the FENCE is lost. */
	if (t == PR_FENCE && !pvmrcpi_chan_get(ch) && rcp_probe(ep, ch, PR_HELLO, &st) == 1)
		pvmrcpi_take_ctrl(ep, ch, PR_HELLO);
	if (rcp_recv(ep, ch, t, b, sizeof b, &st) && st.error != RCP_ETRUNC)
		return;
	ctrl_apply(ep, ch, t, b);
}

/* The posted receives: one for HELLO, one for FENCE, per endpoint. */
struct ctrl_rx {
	rcp_ep *ep;
	uint64_t tag;
	int32_t buf[4];
	int posted;
};
static struct ctrl_rx crx[PR_MAXEP][2];

static void ctrl_post(struct ctrl_rx *c);

static void ctrl_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct ctrl_rx *c = user;
	(void)req;
	c->posted = 0;
	if (st->error == RCP_ECLOSED || st->error == RCP_ECANCELED)
		return; /* the endpoint closes */
	if (!st->error || st->error == RCP_ETRUNC)
		ctrl_apply(c->ep, st->chan, c->tag, c->buf);
	ctrl_post(c);
}

static void ctrl_post(struct ctrl_rx *c)
{
	memset(c->buf, 0, sizeof c->buf);
	c->posted =
	    rcp_irecv_cb(c->ep, RCP_ANY_CHAN, c->tag, c->buf, sizeof c->buf, ctrl_cb, c, NULL) == 0;
}

void pvmrcpi_ctrl_open(void)
{
	for (int k = 0; k < PR_MAXEP; k++)
		for (int j = 0; j < 2; j++) {
			struct ctrl_rx *c = &crx[k][j];
			c->ep = S.eps[k];
			c->tag = j ? PR_FENCE : PR_HELLO;
			c->posted = 0;
			if (c->ep)
				ctrl_post(c);
		}
}

/* HELLOs and FENCEs on an endpoint whose receives are not posted (their
 * post failed) are taken whenever they are there, by probing. */
void pvmrcpi_process_hellos(void)
{
	struct rcp_status st;
	for (int k = 0; k < PR_MAXEP; k++) {
		rcp_ep *ep = S.eps[k];
		if (!ep)
			continue;
		if (!crx[k][0].posted && crx[k][0].ep == ep)
			ctrl_post(&crx[k][0]);
		if (!crx[k][1].posted && crx[k][1].ep == ep)
			ctrl_post(&crx[k][1]);
		if (crx[k][0].posted && crx[k][1].posted)
			continue;
		while (rcp_probe(ep, RCP_ANY_CHAN, PR_HELLO, &st) == 1)
			pvmrcpi_take_ctrl(ep, st.chan, PR_HELLO);
		while (rcp_probe(ep, RCP_ANY_CHAN, PR_FENCE, &st) == 1)
			pvmrcpi_take_ctrl(ep, st.chan, PR_FENCE);
	}
}
