/*
 * rpc/rpc.c — the context: create and destroy, progress, and waiting.
 * The call engine's other parts are files of their own, each calling only
 * the files below it:
 *
 *   rpc.c       context: create, progress rounds, waiting, destroy
 *     |
 *   rfp_poll.c  remote fetch's polling, in rpc.c's round: fetched results,
 *     |         requests taken from slots
 *   client.c    forward, cancel; response receives and the responses in
 *   server.c    request ring, handles, handlers, respond
 *     |         (entry points of the API: neither calls the other)
 *   batch.c     requests and responses queued in a round, sent as one message
 *     |
 *   complete.c  a client request's completion (the state machine), callbacks
 *     |
 *   deadline.c  deadline heap     peer.c   peers by channel
 *   bufs.c      buffers lent to rcp, aux requests, detached sends
 *   rfp.c       remote fetch's segment, attach, slots (the hooks above call)
 *   hdr.c       header checks     calls.c  the registry
 *
 * Each rcp request is posted, and its completion callback kept, by the
 * file that handles its result (client.c's and server.c's recv_cb and
 * ovf_cb, bufs.c's rpci_aux_free_cb), so no callback calls up.
 * Remote fetch is two files: rfp.c, whose hooks client.c, server.c,
 * complete.c and rpc.c call, calls none of them (it returns what they
 * must do: post a receive, forward the attach rpc, whose forward and
 * handler are client.c's and server.c's); rfp_poll.c, called by rpc.c's
 * round, hands fetched results and requests taken from slots to
 * complete.c, client.c and server.c.
 *
 * COMPLETIONS.  The context never looks for completions: every rcp
 * request it owns (posted receives, overflow messages, a send rcp could
 * not take at once) carries an rcp completion callback (rcp.h,
 * rcp_isend_cb ...) whose user pointer is its owner (rbuf, request,
 * handle, aux); rcp runs
 * it from the progress that finished it, with the status, and releases
 * the request.  The cost of a completed call is then a constant whatever
 * the number of calls in flight: scanning the outstanding receives or
 * sends for the few that completed (as this engine once did whenever rcp
 * reported a completion it could not place, on udp every round) cost
 * O(calls in flight) per completion, 11 s latency at 30,000 in flight.
 * Callbacks run outside rcp's core, so they post, cancel and run handlers
 * (which may respond, forward, even progress: rcp nests that safely).
 * stats.polls counts every callback and every request the timers touch:
 * tests/test_rpc.c holds it to a constant per call.
 *
 * PROGRESS.  One round progresses the endpoint (or the bulk context,
 * which progresses it), which runs the rcp callbacks above; then remote
 * fetch is polled, expired deadlines fire, queued user callbacks run, and
 * every batch queued in the round is sent (BATCHES, batch.c).  Rounds
 * nest (a callback may progress): depth counts them, and forwards and
 * responses are batched while it is above 0.
 *
 * INVARIANTS.  posted receives on a peer >= expect + watch (while the
 * channel has not failed), and none once both are 0 (surplus canceled);
 * every queued message is sent by the end of the progress round that
 * queued it; every pending request is on its peer's list;
 * every rcp request the context owns has its callback set, and rpc frees
 * nothing a callback may still name (destroy detaches them); a buffer
 * given to rcp is never freed or reused before rcp completes it (on
 * destroy, receives rcp refuses to cancel are leaked, never freed early);
 * input from the wire is decoded only after the header's order, kind,
 * version and lengths check out, by bounds-checked procs.
 *
 * REMOTE FETCH: see rpc/rfp.c.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/wait.h"
#include "rcp/core.h"
#include "rcp/ep_int.h"
#include "rpc/rpc_int.h"

static int wait_look(void *arg);
static int wait_arm(void *arg, int64_t *timeout_ns);

int rcp_rpc_create(rcp_ep *ep, const struct rcp_rpc_config *cfg, rcp_rpc **out)
{
	rcp_rpc *rpc;
	struct rcp_nic_info info;
	int64_t mm;

	if (!ep || !out)
		return RCP_EINVAL;
	*out = NULL;
	rcpi_env_init();
	rpc = calloc(1, sizeof *rpc);
	if (!rpc)
		return RCP_ENOMEM;
	rpc->ep = ep;
	rpc->bulk = cfg ? cfg->bulk : NULL;
	if (rpc->bulk && rcp_bulk_ctx_ep(rpc->bulk) != ep) {
		free(rpc);
		return RCP_EINVAL;
	}
	rpc->flags = cfg ? cfg->flags : 0;
	{
		int mode;
		int64_t spin;
		rcpi_wait_policy(&mode, &spin); /* RCP_WAIT forces it */
		if (mode == RCPI_WAIT_SPIN)
			rpc->flags = (rpc->flags & ~RCP_RPC_SLEEP) | RCP_RPC_SPIN;
		else if (mode == RCPI_WAIT_SLEEP)
			rpc->flags = (rpc->flags & ~RCP_RPC_SPIN) | RCP_RPC_SLEEP;
	}
	{
		const char *m = rcpi_env_str("RCP_RPC_MODE");
		if (m && !strcmp(m, "fetch"))
			rpc->flags |= RCP_RPC_FETCH;
		else if (m && !strcmp(m, "reply"))
			rpc->flags &= ~RCP_RPC_FETCH;
	}
	rpc->def_timeout = cfg && cfg->timeout_ns ? cfg->timeout_ns
	                                          : rcpi_env_int("RCP_RPC_TIMEOUT_MS", 0) * 1000000;
	if (rpc->def_timeout == 0)
		rpc->def_timeout = -1;
	rpc->nrecvs = cfg && cfg->recvs > 0 ? cfg->recvs : (int)rcpi_env_int("RCP_RPC_RECVS", 64);
	if (rpc->nrecvs < 1)
		rpc->nrecvs = 1;
	/* One message must stay one frame (else a posted receive on a channel
	 * larger than a frame would turn into a READY promise). */
	mm = rcpi_env_int("RCP_RPC_MSG_MAX", 16384);
	rcp_nic_query(rcp_ep_nic(ep), &info);
	if (mm > (int64_t)info.mtu - 128)
		mm = (int64_t)info.mtu - 128;
	if (mm < 512)
		mm = 512;
	rpc->msg_max = (size_t)mm;
	rpc->donetail = &rpc->doneq;
	rpc->batch = rcpi_env_int("RCP_RPC_BATCH", 1) != 0;
	{
		int64_t sp = rcpi_env_int("RCP_RPC_SPLIT", 2);
		rpc->split = sp < 1 ? 1 : sp > 64 ? 64 : (uint32_t)sp;
	}
	for (int i = 0; i < RSQ; i++)
		rpc->sq[i].tag = TAG_RESP;
	if (rfp_init(rpc)) {
		free(rpc);
		return RCP_ENOMEM;
	}
	{
		struct rcp_wait_src src = {
		    .fd = -1, .progress = wait_look, .arm = wait_arm, .arg = rpc};
		int id = rcp_ep_wait_add(ep, &src);
		if (id < 0) {
			rfp_fini(rpc);
			free(rpc);
			return id;
		}
		rpc->wait_id = id;
	}
	*out = rpc;
	return 0;
}

rcp_ep *rcp_rpc_ep(const rcp_rpc *rpc)
{
	return rpc ? rpc->ep : NULL;
}

int rcp_rpc_get_stats(const rcp_rpc *rpc, struct rcp_rpc_stats *st)
{
	if (!rpc || !st)
		return RCP_EINVAL;
	*st = rpc->st;
	return 0;
}

/* Fails the requests whose deadline has passed: only those are visited. */
static void fire_timeouts(rcp_rpc *rpc, uint64_t now)
{
	while (rpc->ntimed && rpc->heap[0]->deadline <= now) {
		struct rcp_rpc_req *r = rpc->heap[0];
		rpc->st.polls++;
		rfp_cli_abandon(rpc, r->peer, r->rfp_slot);
		r->rfp_slot = 0;
		rpci_done(r, RCP_ETIMEDOUT); /* takes it off the heap */
	}
}

static int progress(rcp_rpc *rpc)
{
	int n;
	uint64_t ev0 = rpc->events;

	rpc->depth++; /* forwards from here on are batched (BATCHES above) */
	if (rpc->bulk) {
		/* bulk progresses the endpoint (and runs its callbacks) */
		n = rcp_bulk_progress(rpc->bulk);
		if (n >= 0)
			rpc->events += (uint64_t)n; /* bulk callbacks ran: callers look */
	} else {
		n = rcp_progress(rpc->ep); /* runs the rcp callbacks */
	}
	if (n >= 0) {
		rfp_poll(rpc);
		if (rpc->ntimed) {
			uint64_t now = rcpi_now_ns();
			if (now >= rpc->heap[0]->deadline)
				fire_timeouts(rpc, now);
		}
		if (rpc->doneq)
			rpci_run_callbacks(rpc);
	}
	rpc->depth--;
	/* every round sends what it queued, nested rounds too: a callback
	 * that forwards and then waits is not left waiting on its own batch */
	if (rpc->dirty)
		rpci_flush_all(rpc);
	if (rpc->trim && !rpc->depth)
		rpci_trim_all(rpc); /* TRIMMING, client.c */
	return n < 0 ? n : (int)(rpc->events - ev0);
}

int rcp_rpc_progress(rcp_rpc *rpc)
{
	if (!rpc)
		return RCP_EINVAL;
	return progress(rpc);
}

int64_t rcp_rpc_timeout_ns(const rcp_rpc *rpc)
{
	int64_t t;
	if (!rpc)
		return RCP_EINVAL;
	if (rpc->doneq || rfp_busy(rpc))
		return 0;
	t = rcp_ep_timeout_ns(rpc->ep);
	if (rpc->ntimed) {
		uint64_t now = rcpi_now_ns(), dl = rpc->heap[0]->deadline;
		int64_t d = dl > now ? (int64_t)(dl - now) : 0;
		if (t < 0 || d < t)
			t = d;
	}
	return t;
}

/* Waiting: the endpoint's waiter (common/wait.c).  A context is a wait
 * source of its endpoint (added at init): every wait on the endpoint sees
 * its events as news and does not sleep over its queued notes and
 * callbacks or past its call timeouts. */

/* News since the last look: events (handlers run, calls completed), or
 * a remote fetch in flight, which polls the server's memory: the wait
 * spins on without a yield, since its slow/fast decisions count fetches
 * of RCP_RFP_FETCH_NS, which a yield stretches (test_rfp then never sees
 * a call turn slow). */
static int wait_look(void *arg)
{
	rcp_rpc *rpc = arg;
	int news = rpc->events != rpc->events_seen || rfp_busy(rpc);
	rpc->events_seen = rpc->events;
	return news;
}

static int wait_arm(void *arg, int64_t *timeout_ns)
{
	rcp_rpc *rpc = arg;
	if (rpc->doneq || rfp_busy(rpc))
		return RCP_EAGAIN; /* completed calls wait for their callbacks */
	if (rpc->ntimed) {
		uint64_t now = rcpi_now_ns(), dl = rpc->heap[0]->deadline;
		int64_t d = dl > now ? (int64_t)(dl - now) : 0;
		if (*timeout_ns < 0 || d < *timeout_ns)
			*timeout_ns = d;
	}
	return 0;
}

struct run_ctx {
	rcp_rpc *rpc;
	int (*fin)(void *);
	void *arg;
	uint64_t ev0; /* events when the run began */
	int total;
};

/* Events count wherever they ran: in our progress, or in the endpoint's
 * look (an rcp callback that handled a call) before it. */
static int run_done(void *arg)
{
	struct run_ctx *x = arg;
	int n;
	if (x->fin && x->fin(x->arg))
		return 1;
	n = progress(x->rpc);
	if (n < 0)
		return n;
	x->total = (int)(x->rpc->events - x->ev0);
	return x->fin ? x->fin(x->arg) : x->total > 0;
}

/* Progresses until FIN(arg) or an event (FIN NULL), or TIMEOUT_NS.
 * Returns the events seen, RCP_ETIMEDOUT if none, or an error. */
static int run(rcp_rpc *rpc, int (*fin)(void *), void *arg, int64_t timeout_ns)
{
	struct run_ctx x = {rpc, fin, arg, rpc->events, 0};
	int mode = (rpc->flags & RCP_RPC_SPIN)    ? RCPI_WAIT_SPIN
	           : (rpc->flags & RCP_RPC_SLEEP) ? RCPI_WAIT_SLEEP
	                                          : -1;
	int rc = rcpi_ep_wait_mode(rpc->ep, mode, run_done, &x, timeout_ns);
	if (rc == RCP_ETIMEDOUT && x.total)
		return x.total;
	return rc < 0 ? rc : x.total;
}

int rcp_rpc_loop(rcp_rpc *rpc, int64_t timeout_ns)
{
	if (!rpc)
		return RCP_EINVAL;
	return run(rpc, NULL, NULL, timeout_ns);
}

static int req_finished(void *arg)
{
	return ((struct rcp_rpc_req *)arg)->state == Q_DONE;
}

int rcp_rpc_test(rcp_rpc_req *req)
{
	int rc;
	if (!req || req->cb || req->state == Q_FREE)
		return RCP_EINVAL;
	if (req->state != Q_DONE) {
		rc = progress(req->rpc);
		if (rc < 0)
			return rc;
	}
	return req->state == Q_DONE ? req->status : RCP_EAGAIN;
}

int rcp_rpc_wait(rcp_rpc_req *req, int64_t timeout_ns)
{
	int rc;
	if (!req || req->cb || req->state == Q_FREE)
		return RCP_EINVAL;
	rc = run(req->rpc, req_finished, req, timeout_ns);
	if (req->state == Q_DONE)
		return req->status;
	return rc < 0 && rc != RCP_ETIMEDOUT ? rc : RCP_EAGAIN;
}

/* Receives still posted (server ring and every peer's responses). */
static uint32_t posted_count(const rcp_rpc *rpc)
{
	uint32_t n = rpc->srv.n;
	for (uint32_t i = 0; i < rpc->peercap; i++)
		if (rpc->peers[i])
			n += rpc->peers[i]->posted.n;
	return n;
}

static void cancel_list(struct blist *l)
{
	for (struct rbuf *b = l->head; b; b = b->lnext)
		(void)rcp_cancel(b->rq); /* RCP_EBUSY: being filled, completes */
}

/* Frees the receive buffers still posted after destroy's wait: rcp keeps
 * them (a READY promise), so they are detached and leaked, never freed
 * while rcp may write into them. */
static void leak_list(struct blist *l)
{
	while (l->head) {
		struct rbuf *b = l->head;
		rpci_blist_del(l, b);
		rcp_req_set_cb(b->rq, NULL, NULL);
		free(b); /* b->data stays */
		rcpi_warn("rpc: a receive rcp would not release is leaked at destroy");
	}
}

void rcp_rpc_destroy(rcp_rpc *rpc)
{
	if (!rpc)
		return;
	rcp_ep_wait_remove(rpc->ep, rpc->wait_id);
	rfp_fini(rpc);
	for (uint32_t i = 0; i < rpc->peercap; i++)
		if (rpc->peers[i])
			rpci_fail_peer(rpc, rpc->peers[i], RCP_ECLOSED);
	for (uint32_t i = 0; i < rpc->nreqs; i++)
		if (rpc->reqs[i]->state == Q_PENDING || rpc->reqs[i]->state == Q_OVF_WAIT)
			rpci_done(rpc->reqs[i], RCP_ECLOSED);
	rpci_run_callbacks(rpc);
	/* Let responses already handed to rcp go out (rcp_ep_close lingers
	 * for their acks); wait for the sends we still own and take the
	 * receives back: their callbacks return them (requests that arrive
	 * meanwhile are not handled). */
	rpc->closing = 1;
	rpc->serving = 0;
	rpc->dirty = NULL; /* (every peer failed above: nothing queued) */
	cancel_list(&rpc->srv);
	for (uint32_t i = 0; i < rpc->peercap; i++)
		if (rpc->peers[i]) {
			rpc->peers[i]->failed = RCP_ECLOSED; /* no reposting */
			cancel_list(&rpc->peers[i]->posted);
		}
	{
		uint64_t until = rcpi_now_ns() + 100000000ull;
		while ((rpc->sending || rpc->aux || posted_count(rpc)) && rcpi_now_ns() < until) {
			for (struct aux *a = rpc->aux; a; a = a->next)
				if (a->kind != AUX_SEND_FREE)
					(void)rcp_cancel(a->rq);
			rcp_progress(rpc->ep);
		}
	}
	/* From here owners are freed: every request rcp still has is
	 * detached first (its callback would name a freed owner). */
	for (struct rcp_rpc_handle *h = rpc->sending; h; h = h->next)
		rcp_req_set_cb(h->sreq, NULL, NULL); /* leaked with the handle: rcp reads sbuf */
	leak_list(&rpc->srv);
	for (uint32_t i = 0; i < rpc->peercap; i++) {
		struct peer *p = rpc->peers[i];
		if (!p)
			continue;
		leak_list(&p->posted);
		rfp_peer_free(p);
		free(p->rq.buf);
		free(p);
	}
	free(rpc->peers);
	for (uint32_t i = 0; i < rpc->nreqs; i++) {
		struct rcp_rpc_req *r = rpc->reqs[i];
		if (r->sreq) {
			/* rcp still reads sbuf: leak it rather than free early */
			rcp_req_set_cb(r->sreq, NULL, NULL);
			continue;
		}
		if (r->resp)
			rpci_rbuf_unref(rpc, r->resp); /* freed with the free list below */
		free(r->ovf_resp);
		free(r->sbuf);
		free(r);
	}
	free(rpc->reqs);
	free(rpc->heap);
	for (int i = 0; i < RSQ; i++)
		free(rpc->sq[i].buf);
	while (rpc->freeh) {
		struct rcp_rpc_handle *h = rpc->freeh;
		rpc->freeh = h->next;
		free(h->sbuf);
		free(h);
	}
	while (rpc->freerb) {
		struct rbuf *b = rpc->freerb;
		rpc->freerb = b->next;
		free(b->data);
		free(b);
	}
	for (struct aux *a = rpc->aux, *n; a; a = n) {
		n = a->next;
		rcp_req_set_cb(a->rq, NULL, NULL); /* pending: its buffer is leaked */
		free(a);
	}
	while (rpc->freeaux) {
		struct aux *a = rpc->freeaux;
		rpc->freeaux = a->next;
		free(a);
	}
	for (uint32_t i = 0; i < rpc->callcap; i++)
		if (rpc->calls[i]) {
			free(rpc->calls[i]->name);
			free(rpc->calls[i]);
		}
	free(rpc->calls);
	free(rpc);
}
