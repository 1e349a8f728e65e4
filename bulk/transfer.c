/*
 * bulk/transfer.c — the requester's side of a transfer: argument checks,
 * the one-sided path (rcp_nic_get/put per contiguous run) and the emulated
 * path (pieces as RCP messages; protocol at the top of bulk/bulk.c).
 */
#include <stdlib.h>
#include <string.h>

#include "bulk/bulk_int.h"
#include "common/rcp_common.h"

struct rcpb_piece {
	struct rcpb_piece *prev, *next;
	rcp_bulk_op *op;
	uint64_t id, len;
	char *lptr;
	int status;
	int phase;     /* push: 0 waiting for go, 1 waiting for done */
	rcp_req *req;  /* REQ send */
	rcp_req *data; /* DATA receive (pull) or send (push) */
	rcp_req *stat; /* STAT receive */
	struct rcpb_req_msg rq;
	struct rcpb_stat_msg st;
};

int rcpb_check_args(rcp_bulk_ctx *ctx, rcp_chan *chan, int dir, rcp_bulk *remote,
                    uint64_t remote_off, rcp_bulk *local, uint64_t local_off, uint64_t len)
{
	if (!ctx || !chan || !remote || !local || !remote->remote || local->remote ||
	    remote->ctx != ctx || local->ctx != ctx ||
	    (dir != RCP_BULK_PULL && dir != RCP_BULK_PUSH) || rcp_chan_ep(chan) != ctx->ep)
		return RCP_EINVAL;
	if (remote_off > remote->size || len > remote->size - remote_off ||
	    local_off > local->size || len > local->size - local_off)
		return RCP_ERANGE;
	if (!(remote->perm & (dir == RCP_BULK_PULL ? RCP_BULK_READ_ONLY : RCP_BULK_WRITE_ONLY)))
		return RCP_EACCES;
	return 0;
}

/* ---- one-sided path ---- */

/* Moves the whole range with one nic call per run contiguous on both
 * sides.  Returns 0 or the nic's code. */
static int rma_run(rcp_bulk_op *op)
{
	rcp_bulk_ctx *ctx = op->ctx;
	rcp_bulk *r = op->remote, *l = op->local;
	int peer = rcp_chan_nic_peer(op->chan), rs, ls;
	uint64_t rso, lso, left = op->left;

	if (peer < 0)
		return RCP_EINVAL;
	if (rcp_bulk_locate(r, op->roff, &rs, &rso) || rcp_bulk_locate(l, op->loff, &ls, &lso))
		return RCP_ERANGE;
	while (left) {
		uint64_t n = left;
		const uint8_t *rkey;
		char *lp;
		int rc;
		/* Skip empty segments (locate never lands on one, stepping may). */
		while (rs < r->nseg && rso == r->segs[rs].len) {
			rs++;
			rso = 0;
		}
		while (ls < l->nseg && lso == l->segs[ls].len) {
			ls++;
			lso = 0;
		}
		if (rs >= r->nseg || ls >= l->nseg)
			return RCP_EPROTO; /* cannot happen: ranges were checked */
		if (r->segs[rs].len - rso < n)
			n = r->segs[rs].len - rso;
		if (l->segs[ls].len - lso < n)
			n = l->segs[ls].len - lso;
		rkey = r->rkeys + (size_t)rs * r->rkeylen;
		lp = l->segs[ls].ptr + lso;
		if (op->dir == RCP_BULK_PULL)
			rc = rcp_nic_get(ctx->nic, peer, lp, (size_t)n, rkey, r->rkeylen, rso);
		else
			rc = rcp_nic_put(ctx->nic, peer, lp, (size_t)n, rkey, r->rkeylen, rso);
		if (rc)
			return rc;
		ctx->stats.rma_ops++;
		ctx->stats.rma_bytes += n;
		rso += n;
		lso += n;
		left -= n;
	}
	return 0;
}

/* ---- emulated path ---- */

static void piece_cancel_rx(rcp_req *r)
{
	/* An unmatched receive cancels at once and completes with
	 * RCP_ECANCELED at the next poll; one being filled finishes. */
	if (r)
		(void)rcp_cancel(r);
}

static void piece_fail(struct rcpb_piece *p, int rc)
{
	if (!p->status)
		p->status = rc;
	if (p->op->dir == RCP_BULK_PULL)
		piece_cancel_rx(p->data);
	piece_cancel_rx(p->stat);
}

static void emu_issue(rcp_bulk_op *op);
static void piece_event(struct rcpb_piece *p, int kind, const struct rcp_status *st);

/* rcp completion callbacks of a piece's requests, one per kind. */
static void preq_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	(void)rq;
	piece_event(user, RCPB_W_PREQ, st);
}

static void pdata_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	(void)rq;
	piece_event(user, RCPB_W_PDATA, st);
}

static void pstat_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	(void)rq;
	piece_event(user, RCPB_W_PSTAT, st);
}

/* Frees P if none of its requests is pending; then lets its op go on. */
static void piece_maybe_done(rcp_bulk_ctx *ctx, struct rcpb_piece *p)
{
	rcp_bulk_op *op = p->op;
	if (p->req || p->data || p->stat)
		return;
	if (p->status && !op->status)
		op->status = p->status;
	if (!p->status) {
		ctx->stats.emu_ops++;
		ctx->stats.emu_bytes += p->len;
	}
	if (p->prev)
		p->prev->next = p->next;
	else
		ctx->pieces = p->next;
	if (p->next)
		p->next->prev = p->prev;
	free(p);
	op->inflight--;
	emu_issue(op);
}

/* Starts one piece of LEN bytes at local LPTR / remote logical ROFF.
 * Returns 0 (the piece is in flight) or an error (nothing posted). */
static int piece_start(rcp_bulk_op *op, char *lptr, uint64_t roff, uint64_t len)
{
	rcp_bulk_ctx *ctx = op->ctx;
	struct rcpb_piece *p = calloc(1, sizeof *p);
	uint64_t id;
	int rc;

	if (!p)
		return RCP_ENOMEM;
	id = ctx->next_id++ & RCPB_ID_MASK;
	p->op = op;
	p->id = id;
	p->len = len;
	p->lptr = lptr;
	p->rq.magic = RCPB_MSG_MAGIC;
	p->rq.op = op->dir == RCP_BULK_PULL ? RCPB_OP_READ : RCPB_OP_WRITE;
	p->rq.id = id;
	p->rq.key = op->remote->key;
	p->rq.off = roff;
	p->rq.len = len;
	if (op->dir == RCP_BULK_PULL) {
		rc = rcp_irecv_cb(ctx->ep, op->chan, RCPB_TAG(RCPB_KIND_DATA, id), lptr,
		                  (size_t)len, pdata_cb, p, &p->data);
		if (rc) {
			free(p);
			return rc;
		}
	}
	rc = rcp_irecv_cb(ctx->ep, op->chan, RCPB_TAG(RCPB_KIND_STAT, id), &p->st, sizeof p->st,
	                  pstat_cb, p, &p->stat);
	if (!rc)
		rc = rcp_isend_cb(op->chan, RCPB_TAG(RCPB_KIND_REQ, 0), &p->rq, sizeof p->rq,
		                  preq_cb, p, &p->req);
	if (rc) {
		piece_fail(p, rc);
		if (!p->data && !p->stat && !p->req) {
			free(p);
			return rc;
		}
	}
	/* In flight (if it failed, until its canceled receives complete). */
	p->next = ctx->pieces;
	if (p->next)
		p->next->prev = p;
	ctx->pieces = p;
	op->inflight++;
	return 0;
}

static void emu_issue(rcp_bulk_op *op)
{
	rcp_bulk *r = op->remote, *l = op->local;
	while (!op->canceled && !op->status && op->left && op->inflight < RCPB_WINDOW) {
		int rs, ls, rc;
		uint64_t rso, lso, n = op->left;
		if (rcp_bulk_locate(r, op->roff, &rs, &rso) ||
		    rcp_bulk_locate(l, op->loff, &ls, &lso)) {
			op->status = RCP_ERANGE;
			break;
		}
		if (r->segs[rs].len - rso < n)
			n = r->segs[rs].len - rso;
		if (l->segs[ls].len - lso < n)
			n = l->segs[ls].len - lso;
		rc = piece_start(op, l->segs[ls].ptr + lso, op->roff, n);
		if (rc) {
			op->status = rc;
			break;
		}
		op->roff += n;
		op->loff += n;
		op->left -= n;
	}
	if (op->inflight == 0 && (!op->left || op->canceled || op->status))
		rcpb_op_complete(op, op->status);
}

void rcpb_op_start(rcp_bulk_op *op)
{
	rcp_bulk_ctx *ctx = op->ctx;
	if (!op->left) {
		rcpb_op_complete(op, 0);
		return;
	}
	if (ctx->rma && !ctx->rma_refused && op->remote->rkeylen) {
		int rc = rma_run(op);
		if (rc == RCP_EPERM) {
			rcpi_info("bulk: one-sided access refused (RCP_EPERM): emulating");
			ctx->rma_refused = 1;
		}
		if (rc != RCP_EPERM && rc != RCP_ENOTSUP && rc != RCP_EINVAL) {
			rcpb_op_complete(op, rc);
			return;
		}
		/* The nic cannot do this transfer: the owner serves it. */
	}
	emu_issue(op);
}

/* Reads a STAT message: its status, or RCP_EPROTO if it is not one. */
static int stat_of(const struct rcpb_piece *p, const struct rcp_status *st)
{
	if (st->len != sizeof p->st || p->st.magic != RCPB_MSG_MAGIC || p->st.id != p->id)
		return RCP_EPROTO;
	if (p->st.status > 0 || p->st.status < -1000)
		return RCP_EPROTO;
	return p->st.status;
}

/* A request of piece P (KIND) completed with ST; P may be freed. */
static void piece_event(struct rcpb_piece *p, int kind, const struct rcp_status *st)
{
	rcp_bulk_op *op = p->op;
	rcp_bulk_ctx *ctx = op->ctx;
	int rc;

	switch (kind) {
	case RCPB_W_PREQ:
		p->req = NULL;
		if (st->error)
			piece_fail(p, st->error);
		break;
	case RCPB_W_PDATA:
		p->data = NULL;
		if (op->dir == RCP_BULK_PULL) {
			if (st->error && st->error != RCP_ECANCELED)
				piece_fail(p, st->error == RCP_ETRUNC ? RCP_EPROTO : st->error);
			else if (!st->error && st->len != p->len)
				piece_fail(p, RCP_EPROTO);
			else if (!st->error)
				piece_cancel_rx(p->stat); /* no refusal will come */
		} else if (st->error) {
			piece_fail(p, st->error);
		}
		break;
	case RCPB_W_PSTAT:
		p->stat = NULL;
		if (st->error) {
			if (st->error != RCP_ECANCELED)
				piece_fail(p, st->error);
			break;
		}
		rc = stat_of(p, st);
		if (op->dir == RCP_BULK_PULL) {
			/* The owner refused (it answers a good read with data). */
			piece_fail(p, rc ? rc : RCP_EPROTO);
		} else if (rc) {
			piece_fail(p, rc);
		} else if (p->phase == 0) {
			/* Go: send the data (or nothing, to release the owner's
			 * receive, if the transfer was given up). */
			int give_up = op->canceled || op->status || p->status;
			p->phase = 1;
			rc = rcp_isend_cb(op->chan, RCPB_TAG(RCPB_KIND_DATA, p->id),
			                  give_up ? (void *)&p->rq : p->lptr,
			                  give_up ? 0 : (size_t)p->len, pdata_cb, p, &p->data);
			if (rc) {
				p->data = NULL;
				piece_fail(p, rc);
			} else if (give_up) {
				piece_fail(p, op->status ? op->status : RCP_ECANCELED);
			} else {
				rc =
				    rcp_irecv_cb(ctx->ep, op->chan, RCPB_TAG(RCPB_KIND_STAT, p->id),
				                 &p->st, sizeof p->st, pstat_cb, p, &p->stat);
				if (rc) {
					p->stat = NULL;
					piece_fail(p, rc);
				}
			}
		}
		/* phase 1 with rc 0: done. */
		break;
	}
	piece_maybe_done(ctx, p);
}

void rcpb_pieces_forget(rcp_bulk_ctx *ctx)
{
	for (struct rcpb_piece *p = ctx->pieces; p; p = p->next) {
		rcp_req *rs[3] = {p->req, p->data, p->stat};
		for (int i = 0; i < 3; i++)
			if (rs[i])
				rcp_req_set_cb(rs[i], NULL, NULL);
	}
}

void rcpb_pieces_close(rcp_bulk_ctx *ctx)
{
	for (struct rcpb_piece *p = ctx->pieces; p; p = p->next) {
		if (!p->status)
			p->status = RCP_ECLOSED;
		piece_cancel_rx(p->data && p->op->dir == RCP_BULK_PULL ? p->data : NULL);
		piece_cancel_rx(p->stat);
	}
}

int rcp_bulk_transfer(rcp_bulk_ctx *ctx, rcp_chan *chan, int dir, rcp_bulk *remote,
                      uint64_t remote_off, rcp_bulk *local, uint64_t local_off, uint64_t len,
                      rcp_bulk_cb cb, void *arg, rcp_bulk_op **opp)
{
	rcp_bulk_op *op;
	int rc = rcpb_check_args(ctx, chan, dir, remote, remote_off, local, local_off, len);
	if (rc)
		return rc;
	op = rcpb_op_new(ctx, cb, arg);
	if (!op)
		return RCP_ENOMEM;
	op->roff = remote_off;
	op->loff = local_off;
	op->left = len;
	rcpb_op_bind(op, dir, chan, remote, local, opp);
	rcpb_op_start(op);
	return 0;
}
