/*
 * rcp/rmaq.c — RMA transfers leave the core as events: the queue of
 * transfers asked for, the ones the glue holds, and their tokens.  Below
 * chan.c (a channel's reset drops or detaches its transfers) and msg.c
 * (which asks for them); it calls only req.c (rcp/core.c, LAYERS).  What
 * a finished transfer does next is rma.c, above msg.c.
 *
 * RMA EVENTS.  The core moves no bytes by RMA.  Where the protocol moves a
 * message that way (msg.c, MESSAGES: the get after an RTS with a key, the
 * put into a READY promise, the two halves of a split transfer) it queues
 * an event, "put LEN bytes from B into the peer's region KEY at OFF" or
 * "get them into B", and goes on; the glue takes the events
 * (rcpc_rma_take), performs them on its nic, at once (shm: one
 * process_vm_writev) or later (an HCA: a work request, then its
 * completion), and gives each result back (rcpc_rma_done, rma.c), which
 * sends the FIN the transfer ends with and completes the request.  The
 * shape of ngtcp2 and quiche: the protocol says what to do, the caller
 * does the I/O and reports; so the core stays a pure function of the
 * frames, calls and results it is given (tests/sim.c, tests/fuzz_core.c),
 * and a nic whose RMA completes later needs nothing new from it.
 *
 * An event is named by a token: its op's index in a table and the op's
 * generation, which moves on whenever the op is freed.  A token given back
 * for no op held (twice, after rcpc_core_shutdown, or made up) names
 * nothing: rcpc_rma_done refuses it, counts it (rma_stale) and touches
 * nothing, never a freed request or channel.  Ops are allocated one by one
 * and kept (the table of pointers grows, the ops never move), so the
 * queue and the held list are plain lists.
 *
 * A request has at most one transfer outstanding (RMA_BUSY in r->rma, set
 * here, cleared when its result is back), and does not complete while it
 * has: the nic may still read or write its buffer.  So a frame that would
 * complete it meanwhile (the peer's FIN of a split transfer, whose other
 * half the peer has moved) is noted (RMA_PEER) and acted on when the
 * transfer is back; cancel answers RCP_EBUSY as for every matched receive;
 * and a channel that fails or closes (rcpi_chan_reset) drops the events
 * not yet taken, whose transfer never started (their requests fail with
 * the channel's others), and detaches the taken ones: their requests leave
 * the channel's lists and complete with the channel's error when the
 * result comes back, which then sends nothing.  rcpc_core_shutdown
 * completes those too; the glue must have stopped their transfers (an
 * endpoint performs each at once, so it never holds one then).
 */
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

/* One more op, on the free list.  Returns 0 or RCP_ENOMEM. */
static int grow(rcpc_core *c)
{
	struct rmaq *q = &c->rmaq;
	struct rma_op *op, **tab;

	if (!q->tab) {
		list_init(&q->queue);
		list_init(&q->held);
		list_init(&q->free);
	}
	if (q->n == q->cap) {
		uint32_t cap = q->cap ? 2 * q->cap : 8;
		tab = realloc(q->tab, sizeof *tab * cap);
		if (!tab)
			return RCP_ENOMEM;
		q->tab = tab;
		q->cap = cap;
	}
	op = calloc(1, sizeof *op);
	if (!op)
		return RCP_ENOMEM;
	op->idx = q->n;
	op->gen = 1; /* token 0 is never valid */
	q->tab[q->n++] = op;
	list_add_tail(&q->free, &op->link);
	return 0;
}

/* Asks for a transfer for R on CH: KIND says what its result does (rma.c),
 * FIN the flags of the FIN it ends with; WRITE, LOCAL, LEN, RKEY, OFF as
 * in struct rcpc_rma.  Marks R busy.  Returns 0 or RCP_ENOMEM (nothing
 * asked: the caller goes on without RMA or reports a failed transfer). */
int rcpi_rma_post(rcp_chan *ch, rcp_req *r, uint8_t kind, uint16_t fin, int write, void *local,
                  size_t len, const void *rkey, uint32_t rkeylen, uint64_t off)
{
	rcpc_core *c = ch->core;
	struct rmaq *q = &c->rmaq;
	struct rma_op *op;

	if (rkeylen > sizeof op->ev.rkey)
		return RCP_EINVAL; /* a nic key is never longer (wire.c checks) */
	if ((!q->tab || list_empty(&q->free)) && grow(c))
		return RCP_ENOMEM;
	op = container_of(q->free.next, struct rma_op, link);
	list_del(&op->link);
	list_add_tail(&q->queue, &op->link);
	q->queued++;
	op->state = OP_QUEUED;
	op->kind = kind;
	op->fin = fin;
	op->err = 0;
	op->r = r;
	op->ch = ch;
	op->ev.token = op->idx | (uint64_t)op->gen << 32;
	op->ev.peer = ch->peer;
	op->ev.write = write;
	op->ev.local = local;
	op->ev.len = len;
	op->ev.off = off;
	op->ev.rkeylen = rkeylen;
	memcpy(op->ev.rkey, rkey, rkeylen);
	r->rma = RMA_BUSY; /* and no RMA_PEER left from a life before */
	return 0;
}

int rcpc_rma_take(rcpc_core *c, struct rcpc_rma *ev)
{
	struct rmaq *q = &c->rmaq;
	struct rma_op *op;

	if (!q->queued)
		return 0;
	op = container_of(q->queue.next, struct rma_op, link);
	list_del(&op->link);
	list_add_tail(&q->held, &op->link);
	q->queued--;
	op->state = OP_HELD;
	*ev = op->ev;
	return 1;
}

const unsigned *rcpc_rma_queued(const rcpc_core *c)
{
	return &c->rmaq.queued;
}

/* The op TOKEN names, held by the glue; NULL (counted) if none. */
struct rma_op *rcpi_rma_claim(rcpc_core *c, uint64_t token)
{
	struct rmaq *q = &c->rmaq;
	uint32_t idx = (uint32_t)token, gen = (uint32_t)(token >> 32);
	struct rma_op *op = idx < q->n ? q->tab[idx] : NULL;

	if (!op || op->gen != gen || op->state != OP_HELD) {
		c->st.rma_stale++;
		return NULL;
	}
	return op;
}

/* OP is done with: its token goes stale. */
void rcpi_rma_release(rcpc_core *c, struct rma_op *op)
{
	if (op->state == OP_QUEUED)
		c->rmaq.queued--;
	list_del(&op->link);
	list_add_tail(&c->rmaq.free, &op->link);
	op->state = OP_FREE;
	op->gen++;
	op->r = NULL;
	op->ch = NULL;
}

/* CH resets with ERROR (RMA EVENTS): its queued transfers go, its held
 * ones are detached.  Called by rcpi_chan_reset before it fails the
 * channel's lists. */
void rcpi_rma_chan_reset(rcp_chan *ch, int error)
{
	struct rmaq *q = &ch->core->rmaq;
	struct list *p, *t;

	ch->rma_start = NULL;
	if (!q->tab)
		return;
	list_for_each_safe(p, t, &q->queue)
	{
		struct rma_op *op = container_of(p, struct rma_op, link);
		if (op->ch == ch) {
			op->r->rma = 0; /* on CH's lists: the reset fails it */
			rcpi_rma_release(ch->core, op);
		}
	}
	for (p = q->held.next; p != &q->held; p = p->next) {
		struct rma_op *op = container_of(p, struct rma_op, link);
		if (op->ch == ch) {
			op->ch = NULL;
			op->err = error;
			list_del(&op->r->link); /* completes when the result is back */
		}
	}
}

/* rcpc_core_shutdown: the requests of the transfers still held complete
 * (the channels were reset first: every held op is detached). */
void rcpi_rma_shutdown(rcpc_core *c)
{
	struct rmaq *q = &c->rmaq;

	if (!q->tab)
		return;
	while (!list_empty(&q->held)) {
		struct rma_op *op = container_of(q->held.next, struct rma_op, link);
		rcp_req *r = op->r;
		int err = op->ch ? RCP_ECLOSED : op->err;
		if (op->ch)
			list_del(&r->link);
		rcpi_rma_release(c, op);
		r->rma = 0;
		rcpi_complete(r, err ? err : RCP_ECLOSED);
	}
}

void rcpi_rma_free(rcpc_core *c)
{
	for (uint32_t i = 0; i < c->rmaq.n; i++)
		free(c->rmaq.tab[i]);
	free(c->rmaq.tab);
	memset(&c->rmaq, 0, sizeof c->rmaq);
}
