/*
 * bulk/serve.c — the owner's side of emulated RMA: checks every request
 * against its own record of the handle and moves the data straight from or
 * into the registered segment (protocol at the top of bulk/bulk.c).
 *
 * Nothing in a request is trusted: its length and magic, the key (looked
 * up in the key table: a forged or freed key is not there), the
 * permission, the bounds (overflow-safe), and that the piece lies in one
 * segment are all checked before any byte moves.  A refused request costs
 * one small STAT message and touches nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "bulk/bulk_int.h"
#include "common/rcp_common.h"

struct rcpb_serve {
	struct rcpb_serve *prev, *next;
	rcp_bulk *h; /* NULL for a refusal */
	rcp_chan *chan;
	uint64_t id, len;
	uint32_t op;
	int revoked;
	rcp_req *data; /* DATA send (read) or receive (write) */
	rcp_req *stat; /* refusal or go */
	rcp_req *done; /* done (write) */
	struct rcpb_stat_msg st, dn;
};

static void serve_link(rcp_bulk_ctx *ctx, struct rcpb_serve *s)
{
	s->next = ctx->serves;
	if (s->next)
		s->next->prev = s;
	ctx->serves = s;
}

static void serve_maybe_done(rcp_bulk_ctx *ctx, struct rcpb_serve *s)
{
	if (s->data || s->stat || s->done)
		return;
	if (s->h)
		s->h->serving--;
	if (s->prev)
		s->prev->next = s->next;
	else
		ctx->serves = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

/* Sends STAT STATUS for S using MSG; the request goes to *REQ. */
static int send_stat(struct rcpb_serve *s, struct rcpb_stat_msg *msg, int status, rcp_req **req)
{
	msg->magic = RCPB_MSG_MAGIC;
	msg->status = status;
	msg->id = s->id;
	if (rcp_isend(s->chan, RCPB_TAG(RCPB_KIND_STAT, s->id), msg, sizeof *msg, req)) {
		*req = NULL;
		return -1;
	}
	return 0;
}

void rcpb_serve_request(rcp_bulk_ctx *ctx, const struct rcpb_req_msg *m, size_t len, rcp_chan *chan)
{
	struct rcpb_serve *s;
	rcp_bulk *h;
	unsigned need;
	int rc, seg = 0;
	char *ptr;

	if (len != sizeof *m || m->magic != RCPB_MSG_MAGIC ||
	    (m->op != RCPB_OP_READ && m->op != RCPB_OP_WRITE) || !chan) {
		ctx->stats.refused++; /* not ours: cannot even answer */
		return;
	}
	s = calloc(1, sizeof *s);
	if (!s)
		return; /* the requester times out on its peer, or retries */
	s->chan = chan;
	s->id = m->id & RCPB_ID_MASK;
	s->len = m->len;
	s->op = m->op;
	need = m->op == RCPB_OP_READ ? RCP_BULK_READ_ONLY : RCP_BULK_WRITE_ONLY;
	h = ctx->closing ? NULL : rcpb_key_find(ctx, m->key);
	rc = h ? rcpb_check_access(h, m->off, m->len, need, &seg) : RCP_EACCES;
	if (rc) {
		ctx->stats.refused++;
		rcpi_debug("bulk: refused %s of %llu bytes at %llu: %s",
		           m->op == RCPB_OP_READ ? "read" : "write", (unsigned long long)m->len,
		           (unsigned long long)m->off, rcp_strerror(rc));
		send_stat(s, &s->st, rc, &s->stat);
		serve_link(ctx, s);
		serve_maybe_done(ctx, s);
		return;
	}
	s->h = h;
	h->serving++;
	serve_link(ctx, s);
	ptr = h->segs[seg].ptr + (m->off - h->segs[seg].start);
	ctx->stats.served_ops++;
	ctx->stats.served_bytes += m->len;
	if (m->op == RCPB_OP_READ) {
		if (rcp_isend(chan, RCPB_TAG(RCPB_KIND_DATA, s->id), ptr, (size_t)m->len, &s->data))
			s->data = NULL; /* channel failed: nobody to answer */
	} else {
		if (rcp_irecv(ctx->ep, chan, RCPB_TAG(RCPB_KIND_DATA, s->id), ptr, (size_t)m->len,
		              &s->data)) {
			s->data = NULL;
			send_stat(s, &s->st, RCP_ENOMEM, &s->stat);
		} else if (send_stat(s, &s->st, 0, &s->stat)) {
			/* Cannot say go: nothing will come; take the receive back. */
			if (rcp_cancel(s->data) == 0)
				s->revoked = 1;
		}
	}
	serve_maybe_done(ctx, s);
}

int rcpb_serves_poll(rcp_bulk_ctx *ctx)
{
	int done = 0;
	struct rcpb_serve *s, *next;
	for (s = ctx->serves; s; s = next) {
		rcp_req **rs[3] = {&s->data, &s->stat, &s->done};
		static const int kinds[3] = {RCPB_W_SDATA, RCPB_W_SSTAT, RCPB_W_SDONE};
		struct rcp_status st;
		int i = rcpb_first_done(rs, 3, &st);
		next = s->next;
		if (i >= 0) {
			done++;
			rcpb_serve_event(ctx, s, kinds[i], &st); /* S may be gone */
		}
	}
	return done;
}

void rcpb_serve_event(rcp_bulk_ctx *ctx, void *owner, int kind, const struct rcp_status *st)
{
	struct rcpb_serve *s = owner;
	switch (kind) {
	case RCPB_W_SDATA:
		s->data = NULL;
		if (s->op == RCPB_OP_WRITE) {
			if (!st->error && st->len == s->len)
				send_stat(s, &s->dn, 0, &s->done);
			else if (!st->error && st->len == 0)
				; /* the requester gave up */
			else if (st->error == RCP_ETRUNC || (!st->error && st->len != s->len))
				send_stat(s, &s->dn, RCP_EPROTO, &s->done);
			else if (st->error == RCP_ECANCELED && s->revoked)
				send_stat(s, &s->dn, RCP_EACCES, &s->done);
			/* else the channel failed: nobody to tell */
		}
		break;
	case RCPB_W_SSTAT: s->stat = NULL; break;
	case RCPB_W_SDONE: s->done = NULL; break;
	}
	serve_maybe_done(ctx, s);
}

void rcpb_serves_revoke(rcp_bulk_ctx *ctx, rcp_bulk *h)
{
	/* Reads from H finish (their sends complete or their peer fails);
	 * writes not yet begun are taken back and answered RCP_EACCES. */
	for (struct rcpb_serve *s = ctx->serves; s; s = s->next)
		if (s->h == h && s->op == RCPB_OP_WRITE && s->data && !s->revoked &&
		    rcp_cancel(s->data) == 0)
			s->revoked = 1;
}

void rcpb_serves_detach(rcp_bulk_ctx *ctx, rcp_bulk *h)
{
	for (struct rcpb_serve *s = ctx->serves; s; s = s->next)
		if (s->h == h) {
			s->h = NULL;
			h->serving--;
		}
}
