/*
 * rpc/complete.c — how a client request completes: the one place it moves to
 * DONE, its callback queue, and what it holds released.
 *
 * CLIENT STATE MACHINE (struct rcp_rpc_req):
 *   FREE -> PENDING (forward: request sent, expect++ on its peer)
 *   PENDING -> OVF_WAIT (response header said F_OVF: its receive posted)
 *   PENDING/OVF_WAIT -> DONE (response decoded; timeout; cancel; peer
 *                      failure; context destroyed) — exactly once: only
 *                      rpci_done() moves a request to DONE, and only from
 *                      PENDING/OVF_WAIT; a callback request is queued and
 *                      its callback runs from the next progress round,
 *                      then it returns to FREE; a request object stays
 *                      DONE until rcp_rpc_req_free.
 *
 * Why callbacks are queued and not run from rpci_done: a request completes
 * inside rcp callbacks, timers and failures, where the user's callback
 * could forward, wait or destroy; from the progress round's end
 * (rpci_run_callbacks) it may do any of that.
 *
 * Below the batches (batch.c), the client (client.c) and progress
 * (rpc.c), which complete requests here; calls only deadline.c and bufs.c
 * (and rfp.c to abandon a remote fetch).
 */
#include <stdlib.h>

#include "rpc/rpc_int.h"

/* What a request may hold (a fetch slot, a deadline, an overflow
 * receive), and the counters of a call that held one or failed: apart
 * from rpci_done, so that a call completing with none of them and status 0
 * runs a path that saves no registers (LEAN below). */
static __attribute__((noinline, cold)) void done_rare(rcp_rpc *rpc, struct rcp_rpc_req *r,
                                                      int status)
{
	if (r->rfp_slot) {
		rfp_cli_abandon(rpc, r->peer, r->rfp_slot);
		r->rfp_slot = 0;
	}
	if (r->hidx)
		rpci_timer_del(rpc, r);
	if (r->ovf_aux) {
		/* Overflowed response not yet in: rcp keeps its buffer until
		 * the receive completes; it is freed then (orphan). */
		if (rcp_cancel(r->ovf_aux->rq) == 0)
			(void)0;
		r->ovf_aux->kind = AUX_ORPHAN;
		r->ovf_aux = NULL;
	}
	if (!status) {
		rpc->st.completed_ok++;
	} else {
		rpc->st.failed++;
		if (status == RCP_ETIMEDOUT)
			rpc->st.timeouts++;
		else if (status == RCP_ECANCELED)
			rpc->st.canceled++;
		else if (status == RCP_EPEER)
			rpc->st.peer_errors++;
	}
}

/* The one place a request completes.
 *
 * NO LIVE LIST (session 20).  A peer's pending requests were a doubly
 * linked list, added to on every forward and unlinked here, only ever
 * walked when a peer fails or a batch of requests cannot be sent (rare):
 * those now scan the request table (rpc->reqs, as many slots as calls
 * were ever pending at once) for the peer's pending ones, and a call no
 * longer pays ~20 instructions on the client for the list
 * (perf/rpc_instr.sh SIDE=client).
 *
 * LEAN (session 20).  With the slot, deadline, overflow and failure work
 * inline here, the compiler saved and restored six registers on every
 * call for the calls it might make: with done_rare apart, a call that
 * completes plainly costs ~17 instructions less (perf/rpc_instr.sh,
 * SIDE=client). */
void rpci_done(struct rcp_rpc_req *r, int status)
{
	rcp_rpc *rpc = r->rpc;
	if (r->state != Q_PENDING && r->state != Q_OVF_WAIT)
		return;
	if (RCPI_UNLIKELY(r->rfp_slot || r->hidx || r->ovf_aux || status))
		done_rare(rpc, r, status);
	else
		rpc->st.completed_ok++;
	r->state = Q_DONE;
	r->status = status;
	r->gen++; /* later responses with the old cookie are stale */
	if (r->cb) {
		r->dnext = NULL;
		*rpc->donetail = r;
		rpc->donetail = &r->dnext;
	} else {
		rpc->events++; /* callbacks count when they run */
	}
}

void rpci_req_release(struct rcp_rpc_req *r)
{
	rcp_rpc *rpc = r->rpc;
	if (r->resp) {
		rpci_rbuf_unref(rpc, r->resp);
		r->resp = NULL;
	}
	if (r->ovf_resp) {
		free(r->ovf_resp);
		r->ovf_resp = NULL;
	}
	r->state = Q_FREE;
	r->dnext = rpc->freereqs;
	rpc->freereqs = r;
}

/* Runs queued callbacks.  Returns how many. */
int rpci_run_callbacks(rcp_rpc *rpc)
{
	int n = 0;
	while (rpc->doneq) {
		struct rcp_rpc_req *r = rpc->doneq;
		rpc->doneq = r->dnext;
		if (!rpc->doneq)
			rpc->donetail = &rpc->doneq;
		r->cb(r, r->status, r->out, r->arg);
		rpci_req_release(r);
		rpc->events++;
		n++;
	}
	return n;
}

void rpci_fail_peer(rcp_rpc *rpc, struct peer *p, int err)
{
	p->failed = err ? err : RCP_EPEER;
	p->rq.len = p->rq.n = 0; /* the queued calls fail below, unsent */
	for (uint32_t i = 0; i < rpc->nreqs; i++)
		if (rpc->reqs[i]->peer == p) /* rpci_done skips all but pending */
			rpci_done(rpc->reqs[i], err == RCP_ECLOSED ? RCP_ECLOSED : RCP_EPEER);
	p->expect = 0;
}

/* Decodes a response payload into the request's output. */
void rpci_finish_resp(struct rcp_rpc_req *r, int status, const unsigned char *pl, size_t len)
{
	if (!status && r->call->out_proc && r->out)
		status = rpci_proc_decode(r->call->out_proc, r->out, pl, len, r->rpc->bulk);
	else if (!status && len)
		status = RCP_EPROTO;
	if (status == RCP_EPROTO)
		r->rpc->st.bad_msgs++;
	rpci_done(r, status);
}
