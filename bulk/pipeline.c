/*
 * bulk/pipeline.c — pipelined transfers: one range moved as chunks of a
 * fixed size, at most DEPTH in flight, a callback per chunk (process chunk
 * i while i+1 moves), one completion for the whole.
 *
 * Each chunk is an ordinary internal transfer op whose completion comes
 * back here (from the delivery loop, never re-entered); the next chunk is
 * started from there.  A chunk costs what its transfer costs (shm: its own
 * process_vm_readv/writev calls, nothing else; emulation: its messages).
 */
#include <stdlib.h>

#include "bulk/bulk_int.h"

struct rcpb_pipeline {
	rcp_bulk_chunk_cb chunk_cb;
	uint64_t chunk, len, issued;
	uint64_t roff, loff; /* start of the range */
	size_t next_index;
	int depth, inflight, stop;
};

static void issue(rcp_bulk_op *parent)
{
	struct rcpb_pipeline *pl = parent->pl;
	while (!pl->stop && pl->inflight < pl->depth && pl->issued < pl->len) {
		uint64_t n = pl->len - pl->issued;
		rcp_bulk_op *c = rcpb_op_new(parent->ctx, NULL, NULL);
		if (!c) {
			if (!parent->status)
				parent->status = RCP_ENOMEM;
			pl->stop = 1;
			break;
		}
		if (n > pl->chunk)
			n = pl->chunk;
		c->parent = parent;
		c->chunk = pl->next_index++;
		c->chunk_off = pl->issued;
		c->chunk_len = n;
		c->dir = parent->dir;
		c->chan = parent->chan;
		c->remote = parent->remote;
		c->local = parent->local;
		c->remote->users++;
		c->local->users++;
		c->roff = pl->roff + pl->issued;
		c->loff = pl->loff + pl->issued;
		c->left = n;
		pl->issued += n;
		pl->inflight++;
		rcpb_op_start(c);
	}
	if (pl->inflight == 0 && (pl->stop || pl->issued == pl->len))
		rcpb_op_complete(parent, parent->status);
}

void rcpb_pipeline_chunk_done(rcp_bulk_op *c)
{
	rcp_bulk_op *parent = c->parent;
	struct rcpb_pipeline *pl = parent->pl;
	int r = 0;

	pl->inflight--;
	if (pl->chunk_cb)
		r = pl->chunk_cb(parent->arg, c->status, c->chunk, c->chunk_off,
		                 (size_t)c->chunk_len);
	if (c->status && !parent->status)
		parent->status = c->status;
	if (r && !parent->status)
		parent->status = r;
	if (parent->status)
		pl->stop = 1;
	issue(parent);
}

void rcpb_pipeline_cancel(rcp_bulk_op *op)
{
	op->pl->stop = 1;
	for (rcp_bulk_op *c = op->ctx->ops; c; c = c->next)
		if (c->parent == op && c->state == RCPB_PENDING)
			rcp_bulk_cancel(c);
	if (op->pl->inflight == 0)
		rcpb_op_complete(op, op->status);
}

int rcp_bulk_pipeline(rcp_bulk_ctx *ctx, rcp_chan *chan, int dir, rcp_bulk *remote,
                      uint64_t remote_off, rcp_bulk *local, uint64_t local_off, uint64_t len,
                      uint64_t chunk, int depth, rcp_bulk_chunk_cb chunk_cb, rcp_bulk_cb cb,
                      void *arg, rcp_bulk_op **opp)
{
	rcp_bulk_op *op;
	struct rcpb_pipeline *pl;
	int rc = rcpb_check_args(ctx, chan, dir, remote, remote_off, local, local_off, len);
	if (rc)
		return rc;
	if (!chunk || depth < 1)
		return RCP_EINVAL;
	pl = calloc(1, sizeof *pl);
	if (!pl)
		return RCP_ENOMEM;
	op = rcpb_op_new(ctx, cb, arg);
	if (!op) {
		free(pl);
		return RCP_ENOMEM;
	}
	pl->chunk_cb = chunk_cb;
	pl->chunk = chunk;
	pl->len = len;
	pl->roff = remote_off;
	pl->loff = local_off;
	pl->depth = depth;
	op->pl = pl;
	rcpb_op_bind(op, dir, chan, remote, local, opp);
	issue(op);
	return 0;
}
