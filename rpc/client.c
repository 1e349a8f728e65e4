/*
 * rpc/client.c — the client side: forwarding a call, its response
 * receives, and the responses that come back.
 *
 * RECEIVES.  A client keeps, per server channel, one response receive
 * posted on (that channel, TAG_RESP) for every call whose response may
 * still come ("expect"), so the response is pre-posted, and the channel
 * counts as busy for rcp's liveness checks: a server that dies or falls
 * silent fails the channel after RCP_PEER_TIMEOUT and every call on it
 * completes with RCP_EPEER.  Responses carry the cookie (index |
 * generation << 24 of the client's request slot); a response whose cookie
 * no longer names a pending call (timed out, canceled) is counted as stale
 * and dropped, and its receive is reposted only if responses are still
 * expected.  A response receive may carry a batch of responses (BATCHES,
 * batch.c).
 *
 * Requests (one frame each) go detached (rpci_send_msg): rcp sends them or
 * keeps a copy, so no completion comes back for them.
 *
 * Calls the files below it (batch.c, complete.c, deadline.c, peer.c,
 * bufs.c, hdr.c, calls.c, rfp.c); of rpc/, only rfp_poll.c calls it
 * (rpci_peer_repost).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"

static void sreq_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void recv_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void ovf_cb(rcp_req *rq, const struct rcp_status *st, void *user);

/* Remote fetch's attach answer came (rfp.c maps the segment); once
 * attached, one response receive stays posted so rcp watches the server's
 * liveness while calls wait in its segment. */
static void rfp_attach_done(rcp_rpc_req *req, int status, void *out, void *arg)
{
	struct peer *p = arg;
	if (rfp_cli_attached(req->rpc, p, status, out))
		rpci_peer_repost(req->rpc, p);
}

/* The first call to a server asks it for an area of its remote-fetch
 * segment ("rcp.rfp.attach"); calls go by message meanwhile. */
static void rfp_attach(rcp_rpc *rpc, struct peer *p)
{
	struct attach_out *o = calloc(1, sizeof *o);
	p->rfp_state = 1;
	if (!o || rcp_rpc_forward(rpc, p->ch, rpc->rfp_attach_id, NULL, o, 5000000000ll,
	                          rfp_attach_done, p, NULL)) {
		free(o);
		p->rfp_state = -1;
	}
}

static struct rcp_rpc_req *req_by_cookie(rcp_rpc *rpc, uint64_t cookie)
{
	uint32_t idx = (uint32_t)(cookie & COOKIE_IDX);
	struct rcp_rpc_req *r;
	if (idx >= rpc->nreqs)
		return NULL;
	r = rpc->reqs[idx];
	if ((r->state != Q_PENDING && r->state != Q_OVF_WAIT) ||
	    (r->gen & COOKIE_GEN) != (uint32_t)(cookie >> 24))
		return NULL;
	return r;
}

/* Cancels P's surplus response receives if no call on P is pending. */
static void trim(struct peer *p)
{
	if (p->expect + p->watch)
		return;
	p->flight = 0; /* idle: HALVES counts from the next call */
	if (p->posted.n <= p->trimming)
		return;
	for (struct rbuf *b = p->posted.tail; b; b = b->lprev)
		if (!b->canceling && rcp_cancel(b->rq) == 0) {
			b->canceling = 1;
			p->trimming++;
		}
}

/* Reposts response receives on P up to its expectations.  A batch of
 * responses uses one receive for several calls, so receives can outnumber
 * the expectations for a while: the surplus stays posted while calls are
 * pending (the next calls use it) and is canceled once none is, so an idle
 * channel has no receive posted (rcp would ping its peer for it).
 *
 * TRIMMING.  Inside a progress round the surplus is left posted until the
 * round ends (rpci_trim_all, called by rpc.c's progress): a client keeping
 * calls in flight forwards the next ones from the completion callbacks of
 * the same round, and they reuse it.  Canceling at once, when the batch of
 * responses brought expectations to 0, then posting again for each new
 * call cost an rcp cancel and an rcp receive per call: 1,644 instructions
 * an empty call at 16 in flight (perf/rpc_instr.sh, reply) against 1,242
 * with the cancel deferred; a batch of 16 now needs one new receive. */
void rpci_peer_repost(rcp_rpc *rpc, struct peer *p)
{
	uint32_t want = p->expect + p->watch;
	while (!p->failed && p->posted.n - p->trimming < want) {
		struct rbuf *b = rpci_rbuf_get(rpc);
		if (!b)
			return;
		if (rcp_irecv_cb(rpc->ep, p->ch, TAG_RESP, b->data, rpc->msg_max, recv_cb, b,
		                 &b->rq)) {
			rpci_rbuf_put(rpc, b);
			return;
		}
		b->peer = p;
		rpci_blist_push(&p->posted, b);
	}
	if (want || p->posted.n <= p->trimming)
		return;
	/* Outside a round with callbacks queued (a batch of responses taken
	 * by the endpoint's own look in a wait) the callbacks, which run in
	 * the next round, are likely to forward again: that round's end
	 * trims.  Trimmed at once, a client at 16 in flight canceled 15
	 * receives and posted them again per batch natively. */
	if (!rpc->depth && !rpc->doneq) {
		trim(p);
	} else if (!p->trimq) {
		p->trimq = 1;
		p->tnext = rpc->trim;
		rpc->trim = p;
	}
}

/* The round ends: trims the peers whose receives waited for it. */
void rpci_trim_all(rcp_rpc *rpc)
{
	while (rpc->trim) {
		struct peer *p = rpc->trim;
		rpc->trim = p->tnext;
		p->trimq = 0;
		trim(p);
	}
}

/* One response of a response message (header checked, CHK from rpci_hdr_read).
 * B stays referenced by the call whose output may point into it. */
static void on_response_one(rcp_rpc *rpc, struct peer *p, struct rbuf *b, const struct rpc_hdr *h,
                            size_t off, int chk)
{
	struct rcp_rpc_req *r = req_by_cookie(rpc, h->cookie);

	if (p->expect)
		p->expect--;
	if (!r || r->peer != p) {
		rpc->st.stale_responses++;
		return;
	}
	if (p->rfp)
		rfp_cli_note_reply(rpc, p->rfp, r->call->id, h->aux);
	if (chk == 1) {
		rpc->st.foreign_order++;
		rpci_done(r, RCP_ENOTSUP);
	} else if (h->flags & F_OVF) {
		/* The payload follows on TAG_OVF(cookie). */
		if (h->status || h->aux > (uint64_t)SIZE_MAX / 2) {
			rpci_done(r, h->status ? h->status : RCP_EPROTO);
		} else {
			rcp_req *rq;
			unsigned char *buf = malloc(h->aux ? h->aux : 1);
			if (!buf ||
			    rcp_irecv(rpc->ep, p->ch, TAG_OVF(h->cookie), buf, h->aux, &rq)) {
				free(buf);
				rpci_done(r, RCP_ENOMEM);
			} else {
				r->ovf_aux = rpci_aux_add(rpc, rq, AUX_RECV_REQ, buf, r, ovf_cb);
				if (!r->ovf_aux) {
					/* cannot track it: let rcp fail it */
					rpci_done(r, RCP_ENOMEM);
				} else {
					r->ovf_aux->gen = r->gen;
					r->state = Q_OVF_WAIT;
					p->expect++; /* keep the channel watched meanwhile */
				}
			}
		}
	} else if (!h->status && !h->len && !r->call->out_proc) {
		rpci_done(r, 0); /* nothing to decode, nothing held (an empty call) */
	} else {
		b->refs++;
		r->resp = b;
		rpci_finish_resp(r, h->status, b->data + off + HDR_LEN, h->len);
	}
}

/* A response receive completed on P: one response or a batch. */
static void on_response(rcp_rpc *rpc, struct peer *p, struct rbuf *b, const struct rcp_status *st)
{
	struct rpc_hdr h;
	uint32_t n;

	if (b->canceling)
		p->trimming--;
	if (st->error == RCP_EPEER || st->error == RCP_ECLOSED || st->error == RCP_ECANCELED) {
		rpci_rbuf_put(rpc, b);
		if (st->error != RCP_ECANCELED)
			rpci_fail_peer(rpc, p, st->error);
		return;
	}
	if (st->error || rpci_msg_check(rpc, b->data, st, K_RESP, &n)) {
		/* dropped whole; no call's response is in it as far as we
		 * know, so every call keeps its receive (reposted) */
		if (st->error)
			rpc->st.bad_msgs++;
		rpci_rbuf_put(rpc, b);
		rpci_peer_repost(rpc, p);
		return;
	}
	if (n > 1)
		rpc->st.batched_in += n;
	if (p->expect > p->flight)
		p->flight = p->expect; /* HALVES, batch.c */
	for (size_t off = 0; off < st->len; off += HDR_LEN + h.len)
		on_response_one(rpc, p, b, &h, off, rpci_hdr_read(b->data, off, &h));
	rpci_rbuf_unref(rpc, b); /* ours (rbuf_get's) */
	rpci_peer_repost(rpc, p);
}

static struct rcp_rpc_req *req_get(rcp_rpc *rpc)
{
	struct rcp_rpc_req *r = rpc->freereqs;
	if (r) {
		rpc->freereqs = r->dnext;
		return r;
	}
	if (rpc->nreqs > COOKIE_IDX)
		return NULL;
	if (rpc->nreqs == rpc->reqcap) {
		uint32_t cap = rpc->reqcap ? rpc->reqcap * 2 : 64;
		struct rcp_rpc_req **n = realloc(rpc->reqs, cap * sizeof *n);
		if (!n)
			return NULL;
		rpc->reqs = n;
		rpc->reqcap = cap;
	}
	r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->rpc = rpc;
	r->idx = rpc->nreqs;
	rpc->reqs[rpc->nreqs++] = r;
	return r;
}

/* Writes R's request (header HD, input IN) straight into its peer's batch
 * (IN PLACE, batch.c): 0, or 1 if it does not fit in a message (the
 * general path of rcp_rpc_forward then takes it, overflow included), or
 * a negative code.  Nothing is changed when it returns nonzero but maybe
 * an earlier batch sent. */
static int forward_in_place(rcp_rpc *rpc, struct peer *p, struct rcp_rpc_req *r,
                            const struct call *c, const void *in, struct rpc_hdr *hd)
{
	struct outq *q = &p->rq;
	size_t room, used = 0;
	unsigned char *at = rpci_queue_room(rpc, q, &room);
	int rc;
	if (!at)
		return RCP_ENOMEM;
	if (c->in_proc) {
		rc = rcp_proc_encode(c->in_proc, in, at + HDR_LEN, room - HDR_LEN, &used);
		if (rc == RCP_ERANGE && q->n) {
			rpci_flush_q(rpc, q); /* a batch of its own? */
			if (!(at = rpci_queue_room(rpc, q, &room)))
				return RCP_ENOMEM;
			rc = rcp_proc_encode(c->in_proc, in, at + HDR_LEN, room - HDR_LEN, &used);
		}
		if (rc == RCP_ERANGE)
			return 1;
		if (rc)
			return rc == RCP_ENOMEM ? rc : RCP_EPROTO;
	}
	hd->len = (uint32_t)used;
	memcpy(at, hd, HDR_LEN);
	rpci_queue_commit(rpc, q, HDR_LEN + used, &r->qgen);
	return 0;
}

int rcp_rpc_forward(rcp_rpc *rpc, rcp_chan *ch, uint64_t id, const void *in, void *out,
                    int64_t timeout_ns, rcp_rpc_cb cb, void *arg, rcp_rpc_req **req)
{
	struct call *c;
	struct peer *p;
	struct rcp_rpc_req *r;
	struct rpc_hdr hd;
	size_t used = 0;
	unsigned char *ovf = NULL;
	int rc, k;

	if (!rpc || !ch || (!cb && !req))
		return RCP_EINVAL;
	if (req)
		*req = NULL;
	c = rpci_call_find(rpc, id);
	if (!c)
		return RCP_ENOENT;
	p = rpci_peer_get(rpc, ch);
	if (!p)
		return RCP_ENOMEM;
	if (p->failed)
		return p->failed;
	r = req_get(rpc);
	if (!r)
		return RCP_ENOMEM;
	r->call = c;
	r->out = out;
	r->cb = cb;
	r->arg = arg;
	r->peer = p;
	r->status = 0;
	if (r->sreq) {
		/* This slot's last request send is still with rcp (its call
		 * ended first: timeout, cancel): rcp may still read the
		 * buffer, so it goes with the send and is freed after it. */
		if (!rpci_aux_add(rpc, r->sreq, AUX_SEND_FREE, r->sbuf, NULL, NULL)) {
			rc = RCP_ENOMEM;
			goto fail;
		}
		r->sbuf = NULL;
		r->scap = 0;
	}
	r->sreq = NULL;
	r->rfp_slot = 0;
	r->qgen = 0;
	hd.order = RPC_ORDER;
	hd.kind = K_REQ;
	hd.version = RPC_VERSION;
	hd.flags = 0;
	hd.status = 0;
	hd.id = id;
	hd.cookie = ((uint64_t)(r->gen & COOKIE_GEN) << 24) | r->idx;
	hd.aux = 0;
	if (timeout_ns == 0)
		timeout_ns = rpc->def_timeout;
	r->deadline = 0;
	/* Inside a round, with no remote fetch to try: into the batch. */
	if (rpc->depth && rpc->batch && !(rpc->flags & RCP_RPC_FETCH)) {
		rc = forward_in_place(rpc, p, r, c, in, &hd);
		if (rc < 0)
			goto fail;
		if (rc == 0) {
			p->expect++;
			/* pre-posted before the batch leaves (the test inline: the
			 * surplus of a batch of answers mostly covers it) */
			if (p->posted.n - p->trimming < p->expect + p->watch)
				rpci_peer_repost(rpc, p);
			if (p->rq.n * rpc->split >= p->flight &&
			    p->flight >= HALF_MIN * rpc->split && rpc->split > 1)
				rpci_flush_q(rpc, &p->rq); /* HALVES, batch.c */
			goto sent;
		}
	}
	if (c->in_proc) {
		if (r->scap < HDR_LEN + 64 && rpci_grow_buf(&r->sbuf, &r->scap, HDR_LEN + 64)) {
			rc = RCP_ENOMEM;
			goto fail;
		}
		rc = rcp_proc_encode(c->in_proc, in, r->sbuf + HDR_LEN,
		                     (r->scap < rpc->msg_max ? r->scap : rpc->msg_max) - HDR_LEN,
		                     &used);
		if (rc == RCP_ERANGE) {
			size_t need = rcp_proc_size(c->in_proc, in, &rc);
			if (rc)
				;
			else if (HDR_LEN + need <= rpc->msg_max) {
				rc = rpci_grow_buf(&r->sbuf, &r->scap, HDR_LEN + need);
				if (!rc)
					rc = rcp_proc_encode(c->in_proc, in, r->sbuf + HDR_LEN,
					                     r->scap - HDR_LEN, &used);
			} else if (!(ovf = malloc(need ? need : 1))) {
				rc = RCP_ENOMEM;
			} else {
				rc = rcp_proc_encode(c->in_proc, in, ovf, need, &used);
			}
		}
		if (rc) {
			rc = rc == RCP_ENOMEM ? rc : RCP_EPROTO;
			goto fail;
		}
	} else if (r->scap < HDR_LEN && rpci_grow_buf(&r->sbuf, &r->scap, HDR_LEN)) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	if (ovf) {
		hd.flags = F_OVF;
		hd.aux = used;
		hd.len = 0;
	} else {
		hd.len = (uint32_t)used;
	}
	memcpy(r->sbuf, &hd, HDR_LEN);
	/* Remote fetch: the request goes into the server's segment. */
	k = ovf ? RFP_MSG
	        : rfp_cli_submit(rpc, p, r, c->id, r->sbuf, HDR_LEN + hd.len, &r->rfp_slot);
	if (k == RFP_ATTACH) {
		rfp_attach(rpc, p);
		k = RFP_MSG;
	}
	if (k != RFP_MSG) {
		if (k == RFP_SLOT_REPLY)
			rpci_peer_repost(rpc, p);
		rc = 0;
	} else {
		/* Only remote fetch reads the server's processing time
		 * (TIMING, server.c); a slot's request has no flags. */
		if (p->rfp) {
			hd.flags |= F_TIME;
			memcpy(r->sbuf, &hd, HDR_LEN);
		}
		/* The response receive first (pre-posted), then the request. */
		p->expect++;
		rpci_peer_repost(rpc, p);
		if (rpc->depth && rpc->batch && !ovf) {
			rc = rpci_queue_msg(rpc, &p->rq, r->sbuf, HDR_LEN + hd.len, &r->qgen);
		} else {
			if (p->rq.n)
				rpci_flush_q(rpc, &p->rq); /* in order */
			rc = rpci_send_msg(ch, TAG_REQ, r->sbuf, HDR_LEN + hd.len, sreq_cb, r,
			                   &r->sreq);
		}
		if (rc) {
			p->expect--;
			goto fail;
		}
		if (ovf) {
			rcp_req *rq;
			rc = rcp_isend(ch, TAG_OVF(hd.cookie), ovf, used, &rq);
			if (rc || !rpci_aux_add(rpc, rq, AUX_SEND_FREE, ovf, NULL, NULL)) {
				/* the header is out; the server times the overflow
				 * out with the channel; fail the call here */
				if (rc)
					free(ovf);
				ovf = NULL;
				r->state = Q_PENDING;
				rpci_done(r, rc ? rc : RCP_ENOMEM);
				rpc->st.forwarded++;
				if (req)
					*req = r;
				return 0;
			}
			rpc->st.overflow_in++;
		}
	}
sent:
	if (!rpc->depth && p->expect > p->flight)
		p->flight = p->expect; /* HALVES, batch.c */
	r->state = Q_PENDING;          /* on no list (complete.c, NO LIVE LIST) */
	if (timeout_ns > 0) {
		r->deadline = rcpi_now_ns() + (uint64_t)timeout_ns;
		if (rpci_timer_add(rpc, r)) {
			rpci_done(r, RCP_ENOMEM); /* sent, but it could never time out */
			rpc->st.forwarded++;
			if (req)
				*req = r;
			return 0;
		}
	}
	rpc->st.forwarded++;
	if (req)
		*req = r;
	return 0;
fail:
	free(ovf);
	r->state = Q_DONE;
	rpci_req_release(r);
	return rc;
}

int rcp_rpc_cancel(rcp_rpc_req *req)
{
	if (!req || req->state == Q_FREE)
		return RCP_EINVAL;
	rfp_cli_abandon(req->rpc, req->peer, req->rfp_slot);
	req->rfp_slot = 0;
	rpci_done(req, RCP_ECANCELED);
	return 0;
}

int rcp_rpc_req_free(rcp_rpc_req *req)
{
	if (!req || req->cb || req->state == Q_FREE)
		return RCP_EINVAL;
	if (req->state != Q_DONE)
		return RCP_EBUSY;
	rpci_req_release(req);
	return 0;
}

/* A client request's send completed. */
static void sreq_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct rcp_rpc_req *r = user;
	(void)rq;
	(void)st;
	r->rpc->st.polls++;
	r->sreq = NULL;
}

/* A response receive completed (rcp callback). */
static void recv_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct rbuf *b = user;
	rcp_rpc *rpc = b->rpc;
	(void)rq;
	rpci_rbuf_done(&b->peer->posted, b);
	on_response(rpc, b->peer, b, st);
}

/* An overflowed response's receive completed (or, orphaned by rpci_done,
 * only its buffer is left to free). */
static void ovf_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct aux *a = user;
	(void)rq;
	rpci_aux_begin(a);
	if (a->kind == AUX_RECV_REQ) {
		struct rcp_rpc_req *r = a->owner;
		r->ovf_aux = NULL;
		if (r->peer->expect)
			r->peer->expect--;
		if (st->error)
			rpci_done(r, st->error == RCP_ETRUNC ? RCP_EPROTO : st->error);
		else {
			r->ovf_resp = a->buf;
			a->buf = NULL;
			rpci_finish_resp(r, 0, r->ovf_resp, st->len);
		}
	}
	free(a->buf);
	rpci_aux_end(a);
}
