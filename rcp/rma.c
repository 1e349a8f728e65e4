/*
 * rcp/rma.c — an RMA transfer the glue performed comes back
 * (rcpc_rma_done): the FIN it ends with, and the request it completes.
 * An entry point, above msg.c: it calls msg.c (the next READY promise),
 * fallback.c (a failed transfer), send.c (the FIN), rmaq.c (the token)
 * and req.c (rcp/core.c, LAYERS).
 * Where each transfer comes from is msg.c (MESSAGES); what an event is,
 * and why the core asks rather than moves bytes, rmaq.c (RMA EVENTS).
 *
 * TRANSFERS DONE.  By kind of transfer (the result STATUS: 0, or the
 * nic's code):
 *   READY_PUT   the sender's put of the whole message into a READY
 *               promise: start.c's pump sends its FIN FIRST (or, the put
 *               failed, streams the message instead: the receiver takes
 *               either), before any later message starts.
 *   SPLIT_PUT   the sender's lower half of a split transfer: FIN(SPLIT,
 *               bytes put: 0 if it failed).  The send completes when the
 *               receiver's FIN has come too, with STATUS if that failed.
 *   RTS_GET     the receiver's get of a whole message offered by RTS: FIN
 *               (bytes: 0 if it failed), and the receive completes (STATUS,
 *               or RCP_ETRUNC for a short buffer); the channel's next READY
 *               promise may go.
 *   SPLIT_GET   the receiver's upper half: FIN (its bytes, 0 if it failed;
 *               the sender's buffer is free).  The receive completes when
 *               the sender's FIN(SPLIT) has come too: STATUS if our half
 *               failed, RCP_EPEER if the sender's did.
 * Except that a failed transfer rarely ends there now: a failed get, or
 * a failed put of a split's half, moves the message by frames instead
 * (fallback.c, FALLBACK), and its request completes as a streamed one.
 * A transfer whose channel failed or closed meanwhile (detached, rmaq.c)
 * sends nothing: its request completes with the channel's error.  A
 * request that completes leaves the channel's lists before its FIN is
 * queued: a FIN that cannot be queued (no memory) fails the channel, and
 * with it what is still on it, never twice the same request.
 */
#include "common/rcp_common.h"
#include "rcp/chan.h"

/* FIN for MSG with FLAGS, TAG and ARG (bytes moved) goes out with the
 * next flush. */
static void fin(rcp_chan *ch, uint16_t flags, uint32_t msg, uint64_t tag, uint64_t arg)
{
	struct ctl k = {0};
	k.type = RCPW_FIN;
	k.flags = flags;
	k.msg = msg;
	k.tag = tag;
	k.arg = arg;
	if (rcpi_ctl_push(ch, &k))
		rcpi_chan_fail(ch, RCP_ENOMEM);
}

int rcpc_rma_done(rcpc_core *c, uint64_t token, int status, uint64_t now)
{
	struct rma_op *op = rcpi_rma_claim(c, token);
	rcp_chan *ch;
	rcp_req *r;
	uint64_t len;
	uint16_t fl;
	uint8_t kind;
	int err, done;

	if (!op)
		return RCP_ENOENT;
	c->now = now;
	r = op->r;
	ch = op->ch;
	len = op->ev.len;
	fl = op->fin;
	kind = op->kind;
	err = op->err;
	rcpi_rma_release(c, op);
	r->rma &= (uint8_t)~RMA_BUSY;
	if (status > 0)
		status = RCP_EINVAL; /* not a code: still a failure */
	if (!ch) {
		/* Detached: its channel failed or closed meanwhile. */
		rcpi_complete(r, err);
		return 0;
	}
	chan_dirty(ch);
	if (status && !r->error)
		r->error = status; /* the first error of R's transfer */
	if (kind == RMA_READY_PUT)
		return 0; /* start.c's pump: ready_put_out */
	if (kind != RMA_SPLIT_PUT && (status || (r->rma & RMA_FRAMES))) {
		/* Our get failed, or the sender's put did: the message by
		 * frames (fallback.c, FALLBACK), no FIN. */
		rcpi_frames_ask(ch, r, kind == RMA_RTS_GET || (r->rma & RMA_PEER));
		return 0;
	}
	if (kind == RMA_SPLIT_PUT && (status || (r->rma & RMA_RESEND))) {
		/* Our put failed: FIN(SPLIT|STREAM) says so, and the
		 * receiver's READY|STREAM will ask for frames.  Or it asked
		 * already: FIN(SPLIT) first, then the frames. */
		if (status) {
			r->error = 0;
			r->rma |= RMA_FRAMES;
		}
		fin(ch, (uint16_t)(fl | (status ? RCPW_F_STREAM : 0)), r->msg, r->tag,
		    status ? 0 : len);
		if (r->rma & RMA_RESEND)
			rcpi_frames_send(ch, r);
		return 0;
	}
	/* Done now: a get of a whole message, or a split whose other half
	 * the peer has reported.  Off CH's lists before the FIN is queued. */
	done = kind == RMA_RTS_GET || (r->rma & RMA_PEER);
	if (done)
		list_del(&r->link);
	fin(ch, fl, r->msg, kind == RMA_SPLIT_PUT ? r->tag : 0,
	    status                ? 0
	    : kind == RMA_RTS_GET ? r->total
	                          : len);
	if (!done)
		return 0;
	if (kind == RMA_SPLIT_PUT) {
		rcpi_complete(r, r->error);
		return 0;
	}
	rcpi_complete(r, r->error ? r->error : r->total > r->len ? RCP_ETRUNC : 0);
	rcpi_try_ready(ch);
	return 0;
}
