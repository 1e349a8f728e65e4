/*
 * rpc/server.c — the server side: the ring of request receives, handles,
 * running handlers and responding.
 *
 * SERVER.  A server keeps `recvs` request receives posted on (any
 * channel, TAG_REQ), in a ring, started by the first handler set.  A
 * completed request receive becomes a handle (pool) whose input is decoded
 * on demand (rcp_rpc_get_input) straight from the receive buffer;
 * rcp_rpc_respond encodes the output into the handle's send buffer and
 * sends it (or queues it in a batch inside a progress round: batch.c); the
 * handle returns to the pool when the send completes.  Handlers may keep
 * handles and respond from later rounds.  A request message may hold a
 * batch of requests: the whole message is checked first (hdr.c), then
 * each request runs in order.  A request of an unknown call or of a
 * foreign byte order is answered with an error status, never dropped
 * silently (the client would wait for its timeout).
 *
 * TIMING.  A response carries the server's processing time (aux) only for
 * a request that asks for it (F_TIME): a client in remote-fetch mode
 * (rfp.c switches an id back from server-reply when it falls low).  Two
 * clock reads a call were the server's costliest piece of an empty call
 * in reply mode natively (~27 ns each here, rcp/endpoint.c's ep_now), for
 * a figure no plain client reads; without F_TIME aux is 0.  Requests that
 * arrive by remote fetch are timed as before (rpci_dispatch).
 *
 * Calls the files below it (batch.c, peer.c's hash, bufs.c, hdr.c,
 * calls.c, rfp.c); of rpc/, only rfp_poll.c calls it (rpci_dispatch).
 */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"

static void send_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void recv_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void ovf_cb(rcp_req *rq, const struct rcp_status *st, void *user);

/* Posts one request receive on the server ring. */
static int srv_post(rcp_rpc *rpc)
{
	struct rbuf *b = rpci_rbuf_get(rpc);
	int rc;
	if (!b)
		return RCP_ENOMEM;
	rc =
	    rcp_irecv_cb(rpc->ep, RCP_ANY_CHAN, TAG_REQ, b->data, rpc->msg_max, recv_cb, b, &b->rq);
	if (rc) {
		rpci_rbuf_put(rpc, b);
		return rc;
	}
	b->peer = NULL;
	rpci_blist_push(&rpc->srv, b);
	return 0;
}

/* Remote fetch's attach rpc: a client asks for an area of our segment
 * (rfp.c answers). */
static void h_rfp_attach(rcp_rpc_handle *h, void *arg)
{
	rcp_rpc *rpc = arg;
	struct attach_out o = {"", 0, 0, 0, 0};
	rfp_srv_attach(rpc, rcp_rpc_handle_chan(h), &o);
	rcp_rpc_respond(h, &o, 0);
}

int rcp_rpc_set_handler(rcp_rpc *rpc, uint64_t id, rcp_rpc_handler fn, void *arg)
{
	struct call *c;
	if (!rpc)
		return RCP_EINVAL;
	c = rpci_call_find(rpc, id);
	if (!c)
		return RCP_ENOENT;
	c->handler = fn;
	c->harg = arg;
	if (fn && !rpc->serving) {
		rpc->serving = 1;
		for (int i = 0; i < rpc->nrecvs; i++) {
			int rc = srv_post(rpc);
			if (rc)
				return rc;
		}
		rcp_rpc_set_handler(rpc, rpc->rfp_attach_id, h_rfp_attach, rpc);
		rfp_serve(rpc);
	}
	return 0;
}

static struct rcp_rpc_handle *handle_get(rcp_rpc *rpc)
{
	struct rcp_rpc_handle *h = rpc->freeh;
	if (h) {
		rpc->freeh = h->next;
		h->rb = NULL;
		h->ovf_in = NULL;
		h->sreq = NULL;
		h->responded = 0;
		h->rfp_slot = 0;
		return h;
	}
	h = calloc(1, sizeof *h);
	if (h)
		h->rpc = rpc;
	return h;
}

static void handle_put(rcp_rpc *rpc, struct rcp_rpc_handle *h)
{
	if (h->rb) {
		rpci_rbuf_unref(rpc, h->rb);
		h->rb = NULL;
	}
	if (h->ovf_in) {
		free(h->ovf_in);
		h->ovf_in = NULL;
	}
	h->next = rpc->freeh;
	rpc->freeh = h;
}

/* Sends a header-only response with STATUS (unknown rpc, bad order...). */
static void respond_status(rcp_rpc *rpc, rcp_chan *ch, const struct rpc_hdr *req, int status)
{
	struct rcp_rpc_handle *h = handle_get(rpc);
	if (!h)
		return;
	h->ch = ch;
	h->cookie = req->cookie;
	h->call = NULL;
	h->t0 = 0;
	h->in = NULL;
	h->inlen = 0;
	rpc->st.handled++;
	rcp_rpc_respond(h, NULL, status);
}

/* Runs the handler of H (input complete). */
static void run_handler(rcp_rpc *rpc, struct rcp_rpc_handle *h)
{
	rpc->st.handled++;
	rpc->events++;
	h->call->handler(h, h->call->harg);
}

void rpci_dispatch(rcp_rpc *rpc, rcp_chan *ch, uint64_t id, uint64_t cookie, const void *in,
                   size_t inlen, uint32_t rfp_cli, uint32_t rfp_slot)
{
	struct call *c = rpci_call_find(rpc, id);
	int known = c && c->handler;
	struct rcp_rpc_handle *h = handle_get(rpc);
	if (!h)
		return; /* the client times out */
	h->call = known ? c : NULL;
	h->ch = ch;
	h->cookie = cookie;
	h->t0 = known ? rcpi_now_ns() : 0;
	h->in = known ? in : NULL;
	h->inlen = known ? inlen : 0;
	h->rfp_cli = rfp_cli;
	h->rfp_slot = rfp_slot;
	if (!known) {
		rpc->st.handled++;
		rcp_rpc_respond(h, NULL, RCP_ENOENT);
		return;
	}
	run_handler(rpc, h);
}

/* One request of a request message (header checked): a handle for it, the
 * handler run (or the error answered).  B stays referenced by the handle
 * whose input lies in it. */
static void on_request_one(rcp_rpc *rpc, struct rbuf *b, rcp_chan *ch, const struct rpc_hdr *hd,
                           size_t off, int chk)
{
	struct call *c;
	struct rcp_rpc_handle *h;

	if (chk == 1) {
		rpc->st.foreign_order++;
		respond_status(rpc, ch, hd, RCP_ENOTSUP);
		return;
	}
	c = rpci_call_find(rpc, hd->id);
	if (!c || !c->handler) {
		if (hd->flags & F_OVF) {
			/* Drain the overflow: the client's send must complete. */
			struct rcp_rpc_handle *d = handle_get(rpc);
			rcp_req *rq;
			unsigned char *buf =
			    hd->aux <= (1ull << 32) ? malloc(hd->aux ? hd->aux : 1) : NULL;
			int posted =
			    d && buf &&
			    !rcp_irecv(rpc->ep, ch, TAG_OVF(hd->cookie), buf, hd->aux, &rq);
			if (posted && rpci_aux_add(rpc, rq, AUX_ORPHAN, buf, NULL, NULL)) {
				handle_put(rpc, d);
				respond_status(rpc, ch, hd, RCP_ENOENT);
				return;
			}
			if (!posted)
				free(buf); /* else rcp may still write it: leaked (rpci_aux_add) */
			if (d)
				handle_put(rpc, d);
		}
		respond_status(rpc, ch, hd, RCP_ENOENT);
		return;
	}
	h = handle_get(rpc);
	if (!h)
		return; /* the client times out */
	h->call = c;
	h->ch = ch;
	h->cookie = hd->cookie;
	h->t0 = hd->flags & F_TIME ? rcpi_now_ns() : 0; /* TIMING above */
	if (hd->flags & F_OVF) {
		rcp_req *rq;
		if (hd->aux > ((uint64_t)1 << 32) || !(h->ovf_in = malloc(hd->aux ? hd->aux : 1)) ||
		    rcp_irecv(rpc->ep, ch, TAG_OVF(hd->cookie), h->ovf_in, hd->aux, &rq) ||
		    (!rpci_aux_add(rpc, rq, AUX_RECV_HANDLE, h->ovf_in, h, ovf_cb) &&
		     !(h->ovf_in = NULL))) {
			/* (an untracked receive keeps its buffer: ovf_in NULL) */
			rpc->st.bad_msgs++;
			rcp_rpc_respond(h, NULL, RCP_ENOMEM);
			return;
		}
		h->in = h->ovf_in;
		h->inlen = hd->aux;
		rpc->st.overflow_in++;
		return; /* dispatched when the overflow is in */
	}
	b->refs++;
	h->rb = b;
	h->in = b->data + off + HDR_LEN;
	h->inlen = hd->len;
	run_handler(rpc, h);
}

/* A request receive completed: one request or a batch of them (BATCHES
 * above).  The whole message is checked before any request in it runs: a
 * bad header anywhere drops it all (counted once in bad_msgs). */
static void on_request(rcp_rpc *rpc, struct rbuf *b, const struct rcp_status *st)
{
	struct rpc_hdr hd;
	uint32_t n;

	if (st->error == RCP_ECANCELED || st->error == RCP_ECLOSED) {
		rpci_rbuf_put(rpc, b);
		return;
	}
	if ((st->error && st->error != RCP_ETRUNC) || rpci_msg_check(rpc, b->data, st, K_REQ, &n)) {
		if (st->error && st->error != RCP_ETRUNC)
			rpc->st.bad_msgs++;
		rpci_rbuf_put(rpc, b);
		return;
	}
	if (n > 1)
		rpc->st.batched_in += n;
	/* b->refs is ours (rbuf_get's): handlers may respond, and drop
	 * theirs, at once */
	for (size_t off = 0; off < st->len; off += HDR_LEN + hd.len)
		on_request_one(rpc, b, st->chan, &hd, off, rpci_hdr_read(b->data, off, &hd));
	if (rpc->split > 1) {
		/* HALVES (batch.c): the answers to this message leave now */
		struct outq *q = &rpc->sq[rpci_ptr_hash(st->chan) & (RSQ - 1)];
		if (q->n && q->ch == st->chan)
			rpci_flush_q(rpc, q);
	}
	rpci_rbuf_unref(rpc, b);
}

int rcp_rpc_get_input(rcp_rpc_handle *h, void *in)
{
	int rc;
	if (!h || !h->call || h->responded)
		return RCP_EINVAL;
	if (!h->call->in_proc)
		return h->inlen ? RCP_EPROTO : 0;
	if (!in)
		return RCP_EINVAL;
	rc = rpci_proc_decode(h->call->in_proc, in, h->in, h->inlen, h->rpc->bulk);
	if (rc)
		h->rpc->st.bad_msgs++;
	return rc;
}

uint64_t rcp_rpc_handle_id(const rcp_rpc_handle *h)
{
	return h && h->call ? h->call->id : 0;
}

rcp_chan *rcp_rpc_handle_chan(const rcp_rpc_handle *h)
{
	return h ? h->ch : NULL;
}

/* Writes H's response (header HD, status set; output OUT) straight into
 * the batch of its channel (IN PLACE, batch.c): 0, or nonzero if it does
 * not fit in a message or memory ran out (rcp_rpc_respond's general path
 * then takes it, overflow included). */
static int respond_in_place(rcp_rpc *rpc, struct rcp_rpc_handle *h, const void *out,
                            struct rpc_hdr *hd)
{
	struct outq *q = &rpc->sq[rpci_ptr_hash(h->ch) & (RSQ - 1)];
	size_t room, used = 0;
	unsigned char *at;
	if (q->n && q->ch != h->ch)
		rpci_flush_q(rpc, q);
	q->ch = h->ch;
	if (!(at = rpci_queue_room(rpc, q, &room)))
		return 1;
	if (!hd->status && h->call && h->call->out_proc) {
		int rc =
		    rcp_proc_encode(h->call->out_proc, out, at + HDR_LEN, room - HDR_LEN, &used);
		if (rc == RCP_ERANGE && q->n) {
			rpci_flush_q(rpc, q); /* a batch of its own? */
			if (!(at = rpci_queue_room(rpc, q, &room)))
				return 1;
			rc = rcp_proc_encode(h->call->out_proc, out, at + HDR_LEN, room - HDR_LEN,
			                     &used);
		}
		if (rc == RCP_ERANGE)
			return 1;
		if (rc) {
			hd->status = RCP_EPROTO;
			used = 0;
		}
	}
	hd->len = (uint32_t)used;
	memcpy(at, hd, HDR_LEN);
	rpci_queue_commit(rpc, q, HDR_LEN + used, NULL);
	return 0;
}

int rcp_rpc_respond(rcp_rpc_handle *h, const void *out, int status)
{
	rcp_rpc *rpc;
	struct rpc_hdr hd;
	size_t used = 0, len;
	int rc = 0;
	unsigned char *ovf = NULL;

	if (!h || h->responded || status > 0)
		return RCP_EINVAL;
	rpc = h->rpc;
	h->responded = 1;
	hd.order = RPC_ORDER;
	hd.kind = K_RESP;
	hd.version = RPC_VERSION;
	hd.flags = 0;
	hd.id = h->call ? h->call->id : 0;
	hd.cookie = h->cookie;
	hd.aux = h->t0 ? rcpi_now_ns() - h->t0 : 0;
	if (rpc->depth && rpc->batch && !h->rfp_slot) {
		hd.status = status;
		if (!respond_in_place(rpc, h, out, &hd)) {
			rpc->st.responded++;
			handle_put(rpc, h);
			return 0;
		}
	}
	if (!status && h->call && h->call->out_proc) {
		if (rpci_grow_buf(&h->sbuf, &h->scap, HDR_LEN + 64))
			goto nomem;
		rc = rcp_proc_encode(h->call->out_proc, out, h->sbuf + HDR_LEN,
		                     (h->scap < rpc->msg_max ? h->scap : rpc->msg_max) - HDR_LEN,
		                     &used);
		if (rc == RCP_ERANGE) {
			size_t need = rcp_proc_size(h->call->out_proc, out, &rc);
			if (!rc && HDR_LEN + need <= rpc->msg_max) {
				if (rpci_grow_buf(&h->sbuf, &h->scap, HDR_LEN + need))
					goto nomem;
				rc = rcp_proc_encode(h->call->out_proc, out, h->sbuf + HDR_LEN,
				                     h->scap - HDR_LEN, &used);
			} else if (!rc) {
				ovf = malloc(need ? need : 1);
				if (!ovf)
					goto nomem;
				rc = rcp_proc_encode(h->call->out_proc, out, ovf, need, &used);
			}
		}
		if (rc) {
			status = RCP_EPROTO;
			used = 0;
			free(ovf);
			ovf = NULL;
		}
	} else if (rpci_grow_buf(&h->sbuf, &h->scap, HDR_LEN)) {
		goto nomem;
	}
	hd.status = status;
	hd.len = ovf ? 0 : (uint32_t)used;
	if (ovf) {
		hd.flags = F_OVF;
		hd.aux = used;
	}
	len = HDR_LEN + hd.len;
	memcpy(h->sbuf, &hd, HDR_LEN);
	if (h->rfp_slot && !ovf) {
		hd.aux = h->t0 ? rcpi_now_ns() - h->t0 : 0;
		if (rfp_srv_respond(rpc->rfps, h->rfp_cli, h->rfp_slot - 1, &hd, h->sbuf + HDR_LEN,
		                    hd.len)) {
			rpc->st.responded++;
			handle_put(rpc, h);
			return 0;
		}
		memcpy(h->sbuf, &hd, HDR_LEN);
	}
	if (rpc->depth && rpc->batch && !ovf && !h->rfp_slot) {
		/* answered inside a progress round: batched (BATCHES above) */
		struct outq *q = &rpc->sq[rpci_ptr_hash(h->ch) & (RSQ - 1)];
		if (q->n && q->ch != h->ch)
			rpci_flush_q(rpc, q);
		q->ch = h->ch;
		if (!rpci_queue_msg(rpc, q, h->sbuf, len, NULL)) {
			rpc->st.responded++;
			handle_put(rpc, h);
			return 0;
		}
	}
	if (h->rb) {
		/* The input is no longer needed: give the buffer back now. */
		rpci_rbuf_unref(rpc, h->rb);
		h->rb = NULL;
	}
	rc = rpci_send_msg(h->ch, TAG_RESP, h->sbuf, len, send_cb, h, &h->sreq);
	if (!rc)
		rpc->st.responded++;
	if (h->rfp_slot)
		rfp_srv_replied(rpc->rfps, h->rfp_cli, h->rfp_slot - 1);
	if (!rc && ovf) {
		rcp_req *rq;
		int src = rcp_isend(h->ch, TAG_OVF(h->cookie), ovf, used, &rq);
		if (src || !rpci_aux_add(rpc, rq, AUX_SEND_FREE, ovf, NULL, NULL)) {
			if (src)
				free(ovf); /* the channel failed; else leaked (rpci_aux_add) */
			rc = src ? RCP_EPEER : RCP_ENOMEM;
		}
		rpc->st.overflow_out++;
	} else {
		free(ovf);
	}
	if (!h->sreq) {
		handle_put(rpc, h); /* sent (or failed): sbuf is free again */
		return rc;
	}
	/* rcp still reads sbuf: the handle comes back by send_cb. */
	h->sprev = NULL;
	h->next = rpc->sending;
	if (rpc->sending)
		rpc->sending->sprev = h;
	rpc->sending = h;
	return rc;
nomem:
	handle_put(rpc, h);
	return RCP_ENOMEM;
}

/* A response's send completed: the handle goes back to the pool. */
static void send_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct rcp_rpc_handle *h = user;
	rcp_rpc *rpc = h->rpc;
	(void)rq;
	(void)st;
	rpc->st.polls++;
	if (h->sprev)
		h->sprev->next = h->next;
	else
		rpc->sending = h->next;
	if (h->next)
		h->next->sprev = h->sprev;
	h->sreq = NULL;
	handle_put(rpc, h);
}

/* A request receive of the ring completed (rcp callback). */
static void recv_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct rbuf *b = user;
	rcp_rpc *rpc = b->rpc;
	(void)rq;
	rpci_rbuf_done(&rpc->srv, b);
	if (rpc->closing) {
		rpci_rbuf_put(rpc, b); /* destroy: requests are no longer handled */
		return;
	}
	if (rpc->depth || !rpc->batch) {
		on_request(rpc, b, st);
	} else {
		/* ONE ANSWER A MESSAGE.  Outside a progress round of ours (the
		 * endpoint's own look in a wait, every other look of
		 * rcp_rpc_loop, or a user's rcp_progress) the message's calls
		 * are still answered as one batch: a round of this callback's
		 * length, sent before it returns.  Answered one by one, a
		 * batch of 16 requests went back as 16 messages, and natively
		 * batches never formed (7.6 calls a client message at 16 in
		 * flight, 16 under callgrind, where every look was ours). */
		rpc->depth++;
		on_request(rpc, b, st);
		rpc->depth--;
		rpci_flush_all(rpc);
	}
	if (rpc->serving)
		srv_post(rpc);
}

/* An overflowed request's input is in: the handler runs. */
static void ovf_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct aux *a = user;
	struct rcp_rpc_handle *h = a->owner;
	(void)rq;
	rpci_aux_begin(a);
	if (st->error || st->len != h->inlen)
		rcp_rpc_respond(h, NULL, RCP_EPROTO);
	else
		run_handler(a->rpc, h);
	rpci_aux_end(a);
}
