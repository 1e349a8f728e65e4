/*
 * bulk/serve.c — the owner's side of emulated RMA: checks every request
 * against its own record of the handle and moves the data from a snapshot of
 * (SNAPSHOTS) or straight into the registered segment (protocol at the top
 * of bulk/bulk.c).
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
	rcp_bulk_ctx *ctx;
	rcp_bulk *h; /* NULL for a refusal */
	rcp_chan *chan;
	uint64_t id, len;
	uint32_t op;
	int revoked;
	rcp_req *data; /* DATA send (read) or receive (write) */
	rcp_req *stat; /* refusal or go */
	rcp_req *done; /* done (write) */
	struct rcpb_stat_msg st, dn;
	void *snap; /* a read's bytes, sent from here (SNAPSHOTS) */
};

static void serve_event(struct rcpb_serve *s, int kind, const struct rcp_status *st);

#define SNAP_MAX (16u << 20) /* largest read sent from a snapshot (SNAPSHOTS) */

/* rcp completion callbacks of a serve's requests, one per kind. */
static void sdata_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	(void)rq;
	serve_event(user, RCPB_W_SDATA, st);
}

static void sstat_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	(void)rq;
	serve_event(user, RCPB_W_SSTAT, st);
}

static void sdone_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	(void)rq;
	serve_event(user, RCPB_W_SDONE, st);
}

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
	free(s->snap);
	free(s);
}

/* Sends STAT STATUS for S using MSG; the request goes to *REQ (s->stat or
 * s->done, which tells its callback). */
static int send_stat(struct rcpb_serve *s, struct rcpb_stat_msg *msg, int status, rcp_req **req)
{
	msg->magic = RCPB_MSG_MAGIC;
	msg->status = status;
	msg->id = s->id;
	if (rcp_isend_cb(s->chan, RCPB_TAG(RCPB_KIND_STAT, s->id), msg, sizeof *msg,
	                 req == &s->stat ? sstat_cb : sdone_cb, s, req)) {
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
	s->ctx = ctx;
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
		/* SNAPSHOTS.  A send's buffer must stay untouched until the
		 * send completes (rcp_isend), but an owner is free to change
		 * its memory while a peer reads it, as it is on the one-sided
		 * path.  Sent straight from the segment, a frame lost and
		 * resent after a change goes out with the crc sealed over the
		 * old bytes: the requester drops it as bad every time, and the
		 * channel stays up (the owner's other frames are heard), so
		 * the read waited for ever (rcpio under the faults wrapper,
		 * docs/rcpio.md, session 19).  A copy taken now is what a
		 * one-sided read would have seen; a read racing a writer gets
		 * some of each, as there.  Pieces past SNAP_MAX (a whole
		 * segment: the requester cuts pieces at segment borders only)
		 * still go straight from the segment, unprotected. */
		if (m->len <= SNAP_MAX) {
			if (!(s->snap = malloc(m->len ? (size_t)m->len : 1))) {
				send_stat(s, &s->st, RCP_ENOMEM, &s->stat);
				serve_maybe_done(ctx, s);
				return;
			}
			memcpy(s->snap, ptr, (size_t)m->len);
			ptr = s->snap;
		}
		if (rcp_isend_cb(chan, RCPB_TAG(RCPB_KIND_DATA, s->id), ptr, (size_t)m->len,
		                 sdata_cb, s, &s->data))
			s->data = NULL; /* channel failed: nobody to answer */
	} else {
		if (rcp_irecv_cb(ctx->ep, chan, RCPB_TAG(RCPB_KIND_DATA, s->id), ptr,
		                 (size_t)m->len, sdata_cb, s, &s->data)) {
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

/* A request of serve S (KIND) completed with ST; S may be freed. */
static void serve_event(struct rcpb_serve *s, int kind, const struct rcp_status *st)
{
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
	serve_maybe_done(s->ctx, s);
}

void rcpb_serves_forget(rcp_bulk_ctx *ctx)
{
	for (struct rcpb_serve *s = ctx->serves; s; s = s->next) {
		rcp_req *rs[3] = {s->data, s->stat, s->done};
		for (int i = 0; i < 3; i++)
			if (rs[i])
				rcp_req_set_cb(rs[i], NULL, NULL);
	}
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
