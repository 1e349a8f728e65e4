/*
 * rpc/rfp_poll.c — remote fetch's polling: results fetched from servers'
 * segments complete client requests (complete.c), requests taken from our
 * segment go to their handlers (server.c).  Above client.c, server.c and
 * complete.c, called by rpc.c's progress round only (rfp_poll): so rfp.c,
 * which they call, calls none of them.  Design notes: rpc/rfp.c.
 */
#include <stdatomic.h>
#include <string.h>

#include "rpc/rfp.h"

/* ---- client side ---- */

/* One client's pending slots: fetch results, count misses, switch. */
static int cli_poll(rcp_rpc *rpc, struct peer *p)
{
	struct rfp_cli *c = p->rfp;
	uint64_t now = 0;
	int ev = 0;
	const uint64_t fetch_ns = rpc->rfpc.fetch_ns;
	const uint32_t T = rpc->rfpc.retry;
	for (uint32_t s = 0; s < c->g.slots && (c->npending || c->nzombie); s++) {
		struct rcp_rpc_req *r = c->owner[s];
		unsigned char *sl;
		struct slot *h;
		uint32_t st;
		if (!r && !c->zombie[s])
			continue;
		sl = slot_at(c->base, &c->g, c->cli, s);
		h = (struct slot *)(void *)sl;
		st = atomic_load_explicit(&h->state, memory_order_acquire);
		if (!r) {
			if (st == S_DONE || st == S_REPLIED) {
				c->zombie[s] = 0;
				c->nzombie--;
				slot_free(c, s);
			}
			continue;
		}
		if (st == S_DONE) {
			/* Fetch: header + FS bytes, the rest only if larger. */
			uint32_t len = h->resp_len;
			struct rbuf *b;
			struct rpc_hdr hd;
			struct idmode *m = idmode(c, r->call->id);
			rpc->st.rfp_fetch_hits++;
			if (c->fetches[s] < T && m)
				m->slow_run = 0;
			b = rpci_rbuf_get(rpc);
			c->owner[s] = NULL;
			c->npending--;
			if (!b || len < HDR_LEN || len > c->g.resp_max) {
				if (b)
					rpci_rbuf_put(rpc, b);
				slot_free(c, s);
				rpc->st.bad_msgs++;
				r->rfp_slot = 0;
				rpci_done(r, RCP_EPROTO);
				ev++;
				continue;
			}
			memcpy(b->data, sl + SLOT_HDR + REQ_MAX,
			       len < HDR_LEN + c->fs ? len : HDR_LEN + c->fs);
			if (len > HDR_LEN + c->fs)
				memcpy(b->data + HDR_LEN + c->fs,
				       sl + SLOT_HDR + REQ_MAX + HDR_LEN + c->fs,
				       len - HDR_LEN - c->fs);
			slot_free(c, s);
			r->rfp_slot = 0;
			/* FS follows the largest recent result. */
			if (len - HDR_LEN > c->fs_seen)
				c->fs_seen = len - HDR_LEN;
			if ((rpc->st.rfp_fetch_hits & 63) == 0) {
				uint32_t lo = rpc->rfpc.fs_min;
				uint32_t fs = c->fs_seen < lo ? lo : c->fs_seen;
				c->fs = fs > c->g.resp_max - HDR_LEN ? c->g.resp_max - HDR_LEN : fs;
				c->fs_seen = 0;
			}
			memcpy(&hd, b->data, HDR_LEN);
			if (hd.order != RPC_ORDER || hd.kind != K_RESP || hd.len != len - HDR_LEN ||
			    hd.cookie != (((uint64_t)(r->gen & COOKIE_GEN) << 24) | r->idx)) {
				rpci_rbuf_put(rpc, b);
				rpc->st.bad_msgs++;
				rpci_done(r, RCP_EPROTO);
			} else {
				r->resp = b;
				rpci_finish_resp(r, hd.status, b->data + HDR_LEN, hd.len);
			}
			ev++;
			continue;
		}
		if (st != S_REQ && st != S_BUSY) {
			/* Reply mode: the message completes it.  A result too
			 * large for the slot also comes by message. */
			if (st == S_REPLIED && !c->msgwait[s]) {
				c->msgwait[s] = 1;
				p->expect++;
				rpci_peer_repost(rpc, p);
			}
			continue;
		}
		/* A fetch that found nothing (paced). */
		if (!now)
			now = rcpi_now_ns();
		if (now < c->next_fetch[s])
			continue;
		c->next_fetch[s] = now + fetch_ns;
		rpc->st.rfp_fetch_misses++;
		if (++c->fetches[s] == T) {
			struct idmode *m = idmode(c, r->call->id);
			if (m && ++m->slow_run >= NSLOW && !m->reply) {
				/* Switch (server, id) to reply, this call too. */
				uint32_t want = st == S_REQ ? S_REQ_R : S_BUSY_R;
				m->reply = 1;
				rpc->st.rfp_to_reply++;
				if (atomic_compare_exchange_strong(&h->state, &st, want)) {
					c->msgwait[s] = 1;
					p->expect++;
					rpci_peer_repost(rpc, p);
				}
				/* else: the result landed first (DONE): fetched on
				 * the next pass */
			}
		}
	}
	return ev;
}

/* ---- server side ---- */

static int srv_poll(rcp_rpc *rpc, struct rfp_srv *s)
{
	int ev = 0;
	for (int ci = 0; ci < s->ncli; ci++) {
		uint32_t cli = (uint32_t)ci;
		uint32_t head =
		    atomic_load_explicit(ring_head(s->base, &s->g, cli), memory_order_acquire);
		while (s->tail[ci] != head) {
			uint32_t sn = atomic_load_explicit(
			    ring_ent(s->base, &s->g, cli, s->tail[ci] % s->g.slots),
			    memory_order_relaxed);
			unsigned char *sl;
			struct slot *h;
			struct rpc_hdr hd;
			uint32_t st, len;
			s->tail[ci]++;
			if (sn >= s->g.slots) {
				rpc->st.bad_msgs++;
				continue;
			}
			sl = slot_at(s->base, &s->g, cli, sn);
			h = (struct slot *)(void *)sl;
			st = atomic_load_explicit(&h->state, memory_order_acquire);
			if ((st != S_REQ && st != S_REQ_R) ||
			    !atomic_compare_exchange_strong(&h->state, &st,
			                                    st == S_REQ ? S_BUSY : S_BUSY_R)) {
				/* the client switched it between our loads: take it
				 * in its new state */
				if (st == S_REQ_R &&
				    atomic_compare_exchange_strong(&h->state, &st, S_BUSY_R))
					;
				else {
					rpc->st.bad_msgs++;
					continue;
				}
			}
			len = h->req_len;
			if (len < HDR_LEN || len > REQ_MAX) {
				rpc->st.bad_msgs++;
				continue; /* the client times out */
			}
			memcpy(&hd, sl + SLOT_HDR, HDR_LEN);
			if (hd.order != RPC_ORDER || hd.kind != K_REQ ||
			    hd.version != RPC_VERSION || hd.flags || hd.len != len - HDR_LEN) {
				rpc->st.bad_msgs++;
				continue;
			}
			/* The input is decoded from the slot (the client does
			 * not touch a BUSY slot). */
			rpci_dispatch(rpc, s->chans[ci], hd.id, hd.cookie, sl + SLOT_HDR + HDR_LEN,
			              hd.len, cli, sn + 1);
			ev++;
		}
	}
	return ev;
}

int rfp_poll(rcp_rpc *rpc)
{
	int ev = 0;
	if (rpc->rfps && rpc->rfps->ncli)
		ev += srv_poll(rpc, rpc->rfps);
	if (rpc->flags & RCP_RPC_FETCH)
		for (uint32_t i = 0; i < rpc->peercap; i++) {
			struct peer *p = rpc->peers[i];
			if (p && p->rfp && (p->rfp->npending || p->rfp->nzombie))
				ev += cli_poll(rpc, p);
		}
	return ev;
}
