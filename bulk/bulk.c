/*
 * bulk/bulk.c — bulk data contexts, operations and progress: the design.
 *
 * ---- What it is ----------------------------------------------------------
 *
 * Mercury-style bulk handles on RCP (include/rcp/bulk.h).  A context sits
 * on one rcp_ep and is both a requester (it moves bytes to and from
 * peers' handles) and an owner (it serves peers' accesses to its own
 * handles where the nic cannot do that one-sidedly).
 *
 * Files: handle.c (handles, the logical offset map, serialisation, the
 * owner's key table), regcache.c (registration cache), transfer.c (the
 * requester: one-sided and emulated paths), serve.c (the owner's side of
 * emulation), pipeline.c (chunked transfers), this file (contexts,
 * operations, completion, progress, waiting).
 *
 * ---- Handles and keys ----------------------------------------------------
 *
 * A local handle has segments (ptr, len, logical start), a permission and a
 * random 64-bit key (getrandom) entered in the context's key table; where
 * the nic offers RMA each non-empty segment is registered (through the
 * registration cache) and its packed nic rkey travels in the serialised
 * handle.  A deserialised ("remote") handle has the lengths, key and rkeys
 * but no pointers; nothing in it is trusted by the owner.
 *
 * ---- Transfers -----------------------------------------------------------
 *
 * A transfer of LEN bytes between remote [roff, +len) and local [loff,
 * +len) is cut into pieces at every segment border of either side: within
 * a piece both sides are contiguous.
 *
 * One-sided path (the remote handle has rkeys, the nic has RCP_NIC_CAP_RMA,
 * RCP_BULK_RMA is not 0): each piece is one rcp_nic_get/put on the rkey of
 * its remote segment (shm: one process_vm_readv/writev, no bounce copy),
 * run synchronously inside rcp_bulk_transfer; the completion is queued and
 * delivered from the next progress.  The owner is not involved; its nic
 * key table checks key, bounds and access on every call, and a freed
 * handle's registrations are gone, so stale handles get RCP_EACCES.  If the
 * nic refuses the path itself (RCP_EPERM: cross-memory attach forbidden by
 * ptrace policy; RCP_ENOTSUP; RCP_EINVAL: an rkey of another backend) the
 * transfer restarts on the emulated path, which the owner checks.
 *
 * Emulated path (everything else, e.g. udp): pieces become RCP messages on
 * reserved tags (common/rcp_tags.h, layer 0x01; low 48 bits: kind << 44 |
 * piece id), at most RCPB_WINDOW pieces of one transfer in flight:
 *
 *   PULL  requester: irecv DATA|id into the local piece, irecv STAT|id,
 *                    isend REQ {READ, id, key, off, len}
 *         owner:     checks; OK: isend DATA|id from a snapshot of the range
 *                    (serve.c, SNAPSHOTS);
 *                    refused: isend STAT|id {error}
 *         requester: DATA arrives -> done (cancel the STAT receive); STAT
 *                    arrives -> fails with its error (cancel the DATA
 *                    receive, which nothing will match)
 *   PUSH  requester: irecv STAT|id, isend REQ {WRITE, ...}
 *         owner:     checks; OK: irecv DATA|id straight into its segment,
 *                    isend STAT|id {0} ("go"); refused: STAT {error}
 *         requester: go -> isend DATA|id from the local piece, irecv
 *                    STAT|id again; error -> fails
 *         owner:     DATA received whole -> isend STAT|id {0} ("done");
 *                    an empty DATA means the requester gave up (cancel)
 *         requester: done -> piece complete
 *
 * Every message lands in its final buffer (RCP places data straight into
 * posted receives); the owner copies only a read's bytes, once (serve.c,
 * SNAPSHOTS: its memory may change under a resend).  The owner's REQ receive is
 * posted on RCP_ANY_CHAN with the fixed REQ tag, one at a time (RCP keeps
 * early requests as unexpected messages under its credits).
 *
 * Owner checks (serve.c): message length and magic; key in the table (a
 * freed handle's key was removed when it was freed); permission; [off,
 * off+len) inside the handle with overflow-safe arithmetic (off <= size
 * and len <= size - off); the piece within one segment (an honest
 * requester cuts pieces at the owner's borders, which it knows from the
 * handle).  Any failure answers STAT {RCP_EACCES} (RCP_EPROTO for a piece
 * crossing a border) and touches nothing.
 *
 * ---- Operations ----------------------------------------------------------
 *
 * States: PENDING (pieces in flight or not yet issued) -> QUEUED (status
 * final, on the completion queue) -> DELIVERED (callback ran; the op waits
 * for rcp_bulk_test/wait if the caller holds it, else it is freed).  The
 * first error wins; cancel sets RCP_ECANCELED as that error, stops issuing
 * pieces and lets the pieces in flight finish (so no posted receive is
 * left pointing into a buffer and no unmatched message is left at a peer);
 * a push piece whose "go" arrives after cancel sends an empty DATA.
 * Callbacks run only from the delivery loop (progress/test/wait/close),
 * never re-entered: a callback may start transfers (the pipeline does).
 *
 * ---- Progress ------------------------------------------------------------
 *
 * Every rcp request bulk/ posts carries an rcp completion callback (rcp.h)
 * naming its owner (the context's request receive, a piece, a serve) and
 * its kind (RCPB_W_*: one small callback per kind).  rcp_bulk_progress
 * calls rcp_progress once, which runs them: nothing is polled or scanned,
 * however many requests are pending.  Then the completion queue is
 * delivered (the user's callbacks).
 *
 * ---- Invariants ----------------------------------------------------------
 *
 * - A handle used by a transfer of this process cannot be freed (users >
 *   0 -> RCP_EBUSY); a handle being served is revoked at once by free and
 *   destroyed only when its serves are finished (serving == 0).
 * - No rcp request of bulk/ outlives the memory it points into: pieces and
 *   serves are freed only when all their requests have completed.
 * - Every op reaches QUEUED exactly once (rcpb_op_complete ignores a
 *   second call) and its callback runs exactly once.
 * - Dead peers: RCP fails their requests with RCP_EPEER after
 *   RCP_PEER_TIMEOUT; the shm nic reports a gone process at once.
 */
#include <stdlib.h>
#include <string.h>

#include "bulk/bulk_int.h"
#include "common/rcp_common.h"
#include "rcp/ep_int.h"

/* Wait source (rcp_ep_wait_add): queued deliveries are work. */
static int wait_arm(void *arg, int64_t *timeout_ns)
{
	rcp_bulk_ctx *ctx = arg;
	(void)timeout_ns;
	return ctx->qhead ? RCP_EAGAIN : 0;
}

static void rx_cb(rcp_req *rq, const struct rcp_status *st, void *user);

static int post_rx(rcp_bulk_ctx *ctx)
{
	int rc = rcp_irecv_cb(ctx->ep, RCP_ANY_CHAN, RCPB_TAG(RCPB_KIND_REQ, 0), &ctx->req_buf,
	                      sizeof ctx->req_buf, rx_cb, ctx, &ctx->req_rx);
	if (rc)
		ctx->req_rx = NULL;
	return rc;
}

int rcp_bulk_ctx_open(rcp_ep *ep, rcp_bulk_ctx **out)
{
	rcp_bulk_ctx *ctx;
	struct rcp_nic_info info;
	int rc;

	if (!ep || !out)
		return RCP_EINVAL;
	rcpi_env_init();
	ctx = calloc(1, sizeof *ctx);
	if (!ctx)
		return RCP_ENOMEM;
	ctx->ep = ep;
	ctx->nic = rcp_ep_nic(ep);
	if (rcp_nic_query(ctx->nic, &info) == 0 && (info.caps & RCP_NIC_CAP_RMA))
		ctx->rma = rcpi_env_int("RCP_BULK_RMA", 1) != 0;
	ctx->regcache = rcpi_env_int("RCP_BULK_REGCACHE", 1) != 0;
	ctx->next_id = rcpb_random64() & RCPB_ID_MASK;
	rc = post_rx(ctx);
	if (rc) {
		free(ctx);
		return rc;
	}
	{
		/* Waits on the endpoint must not sleep over our queue. */
		struct rcp_wait_src src = {.fd = -1, .arm = wait_arm, .arg = ctx};
		rc = rcp_ep_wait_add(ep, &src);
		if (rc < 0) {
			rcp_bulk_ctx_close(ctx);
			return rc;
		}
		ctx->wait_id = rc;
	}
	*out = ctx;
	return 0;
}

rcp_ep *rcp_bulk_ctx_ep(const rcp_bulk_ctx *ctx)
{
	return ctx ? ctx->ep : NULL;
}

int rcp_bulk_get_stats(const rcp_bulk_ctx *ctx, struct rcp_bulk_stats *st)
{
	if (!ctx || !st)
		return RCP_EINVAL;
	*st = ctx->stats;
	return 0;
}

/* ---- operations ---- */

rcp_bulk_op *rcpb_op_new(rcp_bulk_ctx *ctx, rcp_bulk_cb cb, void *arg)
{
	rcp_bulk_op *op = calloc(1, sizeof *op);
	if (!op)
		return NULL;
	op->ctx = ctx;
	op->cb = cb;
	op->arg = arg;
	op->state = RCPB_PENDING;
	op->next = ctx->ops;
	if (op->next)
		op->next->prev = op;
	ctx->ops = op;
	return op;
}

void rcpb_op_bind(rcp_bulk_op *op, int dir, rcp_chan *chan, rcp_bulk *remote, rcp_bulk *local,
                  rcp_bulk_op **opp)
{
	op->dir = dir;
	op->chan = chan;
	op->remote = remote;
	op->local = local;
	remote->users++;
	local->users++;
	if (opp) {
		op->user = 1;
		*opp = op;
	}
}

static void op_free(rcp_bulk_op *op)
{
	rcp_bulk_ctx *ctx = op->ctx;
	if (op->prev)
		op->prev->next = op->next;
	else
		ctx->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	free(op->pl);
	free(op);
}

void rcpb_op_complete(rcp_bulk_op *op, int status)
{
	rcp_bulk_ctx *ctx = op->ctx;
	if (op->state != RCPB_PENDING)
		return;
	if (!op->status)
		op->status = status;
	if (op->remote)
		op->remote->users--;
	if (op->local)
		op->local->users--;
	op->remote = op->local = NULL;
	op->state = RCPB_QUEUED;
	op->qnext = NULL;
	if (ctx->qtail)
		ctx->qtail->qnext = op;
	else
		ctx->qhead = op;
	ctx->qtail = op;
}

/* Runs the callbacks of queued operations.  Returns how many. */
static int deliver(rcp_bulk_ctx *ctx)
{
	int n = 0;
	if (ctx->delivering)
		return 0;
	ctx->delivering = 1;
	while (ctx->qhead) {
		rcp_bulk_op *op = ctx->qhead;
		ctx->qhead = op->qnext;
		if (!ctx->qhead)
			ctx->qtail = NULL;
		op->state = RCPB_DELIVERED;
		n++;
		if (op->parent)
			rcpb_pipeline_chunk_done(op);
		else if (op->cb)
			op->cb(op->arg, op->status);
		if (!op->user)
			op_free(op);
	}
	ctx->delivering = 0;
	return n;
}

/* The request receive completed (rcp callback). */
static void rx_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	rcp_bulk_ctx *ctx = user;
	(void)rq;
	ctx->req_rx = NULL;
	if (!st->error)
		rcpb_serve_request(ctx, &ctx->req_buf, st->len, st->chan);
	else if (st->error == RCP_ETRUNC)
		ctx->stats.refused++; /* not a request of ours: too long */
	if (!ctx->closing)
		post_rx(ctx);
}

/* Progresses the endpoint once: rcp runs the callbacks of bulk/'s
 * requests that completed.  Returns 0 or a negative progress code. */
static int poll_reqs(rcp_bulk_ctx *ctx)
{
	int rc = rcp_progress(ctx->ep);
	return rc < 0 ? rc : 0;
}

int rcp_bulk_progress(rcp_bulk_ctx *ctx)
{
	int rc;
	if (!ctx)
		return RCP_EINVAL;
	rc = poll_reqs(ctx);
	if (rc < 0)
		return rc;
	return deliver(ctx);
}

int rcp_bulk_arm(rcp_bulk_ctx *ctx)
{
	if (!ctx)
		return RCP_EINVAL;
	if (ctx->qhead)
		return RCP_EAGAIN;
	return rcp_ep_arm(ctx->ep);
}

int rcp_bulk_test(rcp_bulk_op *op, int *status)
{
	rcp_bulk_ctx *ctx;
	if (!op)
		return RCP_EINVAL;
	ctx = op->ctx;
	if (op->state == RCPB_PENDING) {
		int rc = poll_reqs(ctx);
		if (rc < 0 && op->state == RCPB_PENDING)
			return rc;
	}
	/* Deliver everything queued (pipeline chunks finish their pipeline
	 * from there). */
	deliver(ctx);
	if (op->state != RCPB_DELIVERED)
		return RCP_EAGAIN;
	if (status)
		*status = op->status;
	op_free(op);
	return 0;
}

struct op_wait {
	rcp_bulk_op *op;
	int *status;
	int rc;
};

static int op_done(void *arg)
{
	struct op_wait *w = arg;
	w->rc = rcp_bulk_test(w->op, w->status);
	return w->rc != RCP_EAGAIN;
}

int rcp_bulk_wait(rcp_bulk_op *op, int64_t timeout_ns, int *status)
{
	struct op_wait w = {op, status, RCP_EAGAIN};
	int rc;

	if (!op)
		return RCP_EINVAL;
	rc = rcpi_ep_wait_mode(op->ctx->ep, -1, op_done, &w, timeout_ns);
	return rc ? rc : w.rc;
}

int rcp_bulk_cancel(rcp_bulk_op *op)
{
	if (!op)
		return RCP_EINVAL;
	if (op->state != RCPB_PENDING)
		return 0;
	op->canceled = 1;
	if (!op->status)
		op->status = RCP_ECANCELED;
	if (op->pl) {
		rcpb_pipeline_cancel(op);
		return 0;
	}
	if (op->inflight == 0)
		rcpb_op_complete(op, RCP_ECANCELED);
	return 0;
}

void rcp_bulk_ctx_close(rcp_bulk_ctx *ctx)
{
	uint64_t until;
	if (!ctx)
		return;
	ctx->closing = 1;
	if (ctx->wait_id > 0)
		rcp_ep_wait_remove(ctx->ep, ctx->wait_id);
	/* Pending operations end with RCP_ECLOSED; pieces in flight finish
	 * (bounded by the peer timeout), serves are revoked. */
	for (rcp_bulk_op *op = ctx->ops; op; op = op->next) {
		if (op->state == RCPB_PENDING && !op->status)
			op->status = RCP_ECLOSED;
	}
	for (rcp_bulk_op *op = ctx->ops; op; op = op->next)
		if (op->state == RCPB_PENDING && !op->parent)
			rcp_bulk_cancel(op);
	for (rcp_bulk *h = ctx->handles; h; h = h->next)
		if (!h->remote) {
			rcpb_key_remove(ctx, h);
			if (h->serving)
				rcpb_serves_revoke(ctx, h);
		}
	/* Receives not yet being filled are taken back (one being filled, or
	 * a send, completes or fails by the peer timeout); a late answer then
	 * waits unmatched at our endpoint, which is acceptable only here. */
	if (ctx->req_rx)
		(void)rcp_cancel(ctx->req_rx);
	rcpb_pieces_close(ctx);
	until = rcpi_now_ns() + 60000000000ull;
	while ((ctx->pieces || ctx->serves || ctx->req_rx) && rcpi_now_ns() < until)
		if (rcp_bulk_progress(ctx) < 0)
			break;
	if (ctx->pieces || ctx->serves || ctx->req_rx) {
		/* Their memory stays allocated: RCP may still write into it;
		 * their callbacks are detached (they would name freed ops). */
		rcpi_warn("bulk: closing with requests still pending at the endpoint");
		rcpb_pieces_forget(ctx);
		rcpb_serves_forget(ctx);
		if (ctx->req_rx)
			rcp_req_set_cb(ctx->req_rx, NULL, NULL);
	}
	for (rcp_bulk_op *op = ctx->ops; op; op = op->next)
		if (op->state == RCPB_PENDING)
			rcpb_op_complete(op, RCP_ECLOSED);
	deliver(ctx);
	while (ctx->ops)
		op_free(ctx->ops);
	while (ctx->handles) {
		ctx->handles->users = 0;
		rcpb_serves_detach(ctx, ctx->handles);
		rcpb_handle_destroy(ctx->handles);
	}
	rcpb_reg_clear(ctx);
	free(ctx->buckets);
	free(ctx);
}
