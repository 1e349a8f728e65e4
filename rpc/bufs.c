/*
 * rpc/bufs.c — what the context lends to rcp and gets back: receive
 * buffers (struct rbuf) and their posted lists, the secondary requests
 * (struct aux: overflow sends and receives), growable send buffers, and
 * sending one message detached.
 *
 * POOLS.  After warm-up a call allocates nothing: receive buffers,
 * aux records and (client.c, server.c) requests and handles come from free
 * lists kept by the context and freed only at destroy.  A receive buffer
 * is reference-counted because one message may carry a batch of calls
 * (BATCHES, batch.c) whose handles or outputs all point into it; it goes
 * back to the free list when the last of them lets go.
 *
 * OWNERSHIP.  A buffer given to rcp is never freed or reused before rcp
 * completes it: an aux record keeps the buffer of a send or receive rcp
 * still holds, and an aux that cannot be allocated leaves its buffer
 * leaked rather than freed early.
 *
 * An aux carries the completion callback of its owner's file (an overflow
 * response: client.c; an overflow request: server.c) or, for a buffer
 * that is only to be freed, this file's rpci_aux_free_cb.
 *
 * A leaf: it calls no other file of rpc/.
 */
#include <stdlib.h>

#include "rpc/rpc_int.h"

#define RESP_MIN 256 /* initial send-buffer capacity */

void rpci_blist_push(struct blist *l, struct rbuf *b)
{
	b->lnext = NULL;
	b->lprev = l->tail;
	if (l->tail)
		l->tail->lnext = b;
	else
		l->head = b;
	l->tail = b;
	l->n++;
	b->posted = 1;
}

void rpci_blist_del(struct blist *l, struct rbuf *b)
{
	if (b->lprev)
		b->lprev->lnext = b->lnext;
	else
		l->head = b->lnext;
	if (b->lnext)
		b->lnext->lprev = b->lprev;
	else
		l->tail = b->lprev;
	l->n--;
	b->posted = 0;
	b->lprev = b->lnext = NULL;
}

/* rpci_rbuf_get's slow path (rpc_int.h): the free list is empty. */
struct rbuf *rpci_rbuf_new(rcp_rpc *rpc)
{
	struct rbuf *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->rpc = rpc;
	b->refs = 1;
	b->data = malloc(rpc->msg_max);
	if (!b->data) {
		free(b);
		return NULL;
	}
	return b;
}

void rpci_rbuf_put(rcp_rpc *rpc, struct rbuf *b)
{
	b->rq = NULL;
	b->next = rpc->freerb;
	rpc->freerb = b;
}

/* The start of a receive's completion callback: B is rcp's no more, and
 * off the posted list L. */
void rpci_rbuf_done(struct blist *l, struct rbuf *b)
{
	b->rpc->st.polls++;
	b->rq = NULL;
	rpci_blist_del(l, b);
}

/* Drops one reference of a request buffer shared by the handles of a
 * batch (BATCHES above). */
void rpci_rbuf_unref(rcp_rpc *rpc, struct rbuf *b)
{
	if (--b->refs == 0)
		rpci_rbuf_put(rpc, b);
}

int rpci_grow_buf(unsigned char **buf, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : RESP_MIN;
	unsigned char *n;
	if (*buf && *cap >= need)
		return 0; /* every response of an empty call came here: no realloc */
	while (c < need)
		c *= 2;
	n = realloc(*buf, c);
	if (!n)
		return RCP_ENOMEM;
	*buf = n;
	*cap = c;
	return 0;
}

/* Sends one message of ours (a request or a response; at most msg_max
 * bytes, one frame) detached: rcp either has it out or keeps a copy, so
 * BUF is ours again at once and no completion comes back (the fate of a
 * send is never needed: a call's end is its response, a channel's failure
 * shows on the receives).  That is two rcp requests less per call than a
 * send with a callback: nothing to complete, queue or call back.  If rcp
 * cannot copy (no memory) it hands back a plain request still reading BUF:
 * it gets callback CB (USER) as a send always had, and *HELD tells the
 * caller BUF is in use.  A message above the frame (not sent by this
 * context) goes as an ordinary send with CB. */
int rpci_send_msg(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req_cb cb,
                  void *user, rcp_req **held)
{
	rcp_req *rq = NULL;
	int rc = rcp_isend_detached(ch, tag, buf, len, &rq);
	*held = NULL;
	if (rc == RCP_EMSGSIZE)
		return rcp_isend_cb(ch, tag, buf, len, cb, user, held);
	if (!rc && rq) {
		rcp_req_set_cb(rq, cb, user);
		*held = rq;
	}
	return rc;
}

/* An aux send (or an orphaned receive) completed: its buffer is free. */
void rpci_aux_free_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct aux *a = user;
	(void)rq;
	(void)st;
	rpci_aux_begin(a);
	free(a->buf);
	rpci_aux_end(a);
}

/* Tracks RQ (an rcp request still using BUF) as an aux of KIND for OWNER:
 * CB runs when it completes (NULL: rpci_aux_free_cb, which frees BUF). */
struct aux *rpci_aux_add(rcp_rpc *rpc, rcp_req *rq, int kind, void *buf, void *owner, rcp_req_cb cb)
{
	struct aux *a = rpc->freeaux;
	if (a)
		rpc->freeaux = a->next;
	else if (!(a = malloc(sizeof *a))) {
		/* Untracked: rcp releases it; its buffer must then never be
		 * freed (the callers leak it). */
		rcp_req_set_cb(rq, NULL, NULL);
		return NULL;
	}
	a->rpc = rpc;
	a->rq = rq;
	a->kind = kind;
	a->buf = buf;
	a->owner = owner;
	a->prev = NULL;
	a->next = rpc->aux;
	if (rpc->aux)
		rpc->aux->prev = a;
	rpc->aux = a;
	rcp_req_set_cb(rq, cb ? cb : rpci_aux_free_cb, a);
	return a;
}

/* The start of every aux callback: the request is rcp's no more. */
void rpci_aux_begin(struct aux *a)
{
	rcp_rpc *rpc = a->rpc;
	rpc->st.polls++;
	if (a->prev)
		a->prev->next = a->next;
	else
		rpc->aux = a->next;
	if (a->next)
		a->next->prev = a->prev;
	a->rq = NULL;
}

/* The end of every aux callback: the record back to the pool. */
void rpci_aux_end(struct aux *a)
{
	rcp_rpc *rpc = a->rpc;
	a->next = rpc->freeaux;
	rpc->freeaux = a;
}
