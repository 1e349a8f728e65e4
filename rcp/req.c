/*
 * rcp/req.c — requests and what they hold: allocation, completion, the
 * pools of unexpected-message records and frame buffers.  The bottom of
 * the core (rcp/core.c, LAYERS): it calls no other file of it.
 *
 * COMPLETION.  A request completes exactly once (rcpi_complete asserts
 * it): its registration goes, its error is set, the core counts it for
 * rcpc_flush/rcpc_timers to return (rcpi_take_completed), and a multicast
 * child folds into its parent, which completes with the last child.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

/* Copies of a few bytes without `rep movs`, which gcc emits for variable
 * sizes and whose start-up (~30 cycles) dominates a small message.  Large
 * copies go to libc's memcpy through a function it cannot inline. */
__attribute__((noinline)) void rcpi_copy_large(void *d, const void *s, size_t n)
{
	memcpy(d, s, n);
}

/* A multicast child folds into its parent, which completes with the last
 * child.  Out of line: the recursion kept rcpi_complete from being
 * inlined into the small-message path (chan.h, RCPI_HOT_INLINE). */
static void req_free_own(rcp_req *r);
static __attribute__((noinline)) void complete_child(rcp_req *r, int error)
{
	rcpc_core *c = r->core;
	rcp_req *pa = r->parent;
	if (error && !pa->error)
		pa->error = error;
	if (r->own_buf) /* an rcp_mcastv child's segments */
		req_free_own(r);
	r->state = Q_DONE;
	r->pool_next = c->free_reqs;
	c->free_reqs = r;
	if (--pa->children == 0) {
		int e = pa->error;
		pa->error = 0;
		rcpi_complete(pa, e);
	}
}

inline void rcpi_complete(rcp_req *r, int error)
{
	rcpc_core *c = r->core;

	assert(r->state != Q_DONE);
	if (r->mr && c->io.mr_dereg) {
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
	}
	r->state = Q_DONE;
	r->error = error;
	c->completed++;
	if (r->cb) {
		r->cb_next = NULL;
		*c->cbtail = r;
		c->cbtail = &r->cb_next;
	}
	if (r->kind == REQ_SEND && !error) {
		c->st.msgs_sent++;
		c->st.bytes_sent += r->total;
	} else if (r->kind == REQ_RECV && (!error || error == RCP_ETRUNC)) {
		c->st.msgs_recv++;
		c->st.bytes_recv += r->total < r->len ? r->total : r->len;
	}
	if (RCPI_UNLIKELY(r->parent))
		complete_child(r, error);
}

/* rcpi_complete of a receive that a whole message of N bytes filled
 * (status 0, or RCP_ETRUNC past its LEN): the small-message inputs'
 * (express.c, core.c input_small).  What rcpi_complete does for that
 * case without its tests of the kind and of a multicast parent (only a
 * send has one): -7 instructions a frame (session 21). */
inline void rcpi_complete_recv(rcp_req *r, size_t n)
{
	rcpc_core *c = r->core;

	assert(r->state != Q_DONE && r->kind == REQ_RECV && !r->parent);
	if (r->mr && c->io.mr_dereg) {
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
	}
	r->state = Q_DONE;
	r->error = n > r->len ? RCP_ETRUNC : 0;
	c->completed++;
	if (r->cb) {
		r->cb_next = NULL;
		*c->cbtail = r;
		c->cbtail = &r->cb_next;
	}
	c->st.msgs_recv++;
	c->st.bytes_recv += n < r->len ? n : r->len;
}

inline rcp_req *rcpi_req_alloc(rcpc_core *c)
{
	rcp_req *r = c->free_reqs;
	if (!r) {
		enum { N = 64 };
		rcp_req *slab = calloc(N, sizeof *slab);
		void **ns = realloc(c->req_slabs, sizeof *ns * (size_t)(c->nslabs + 1));
		if (!slab || !ns) {
			free(slab);
			if (ns)
				c->req_slabs = ns;
			return NULL;
		}
		c->req_slabs = ns;
		c->req_slabs[c->nslabs++] = slab;
		for (int i = N - 1; i >= 0; i--) {
			slab[i].pool_next = c->free_reqs;
			c->free_reqs = &slab[i];
		}
		r = c->free_reqs;
	}
	c->free_reqs = r->pool_next;
	/* Field by field: a memset of the whole request compiles to `rep
	 * stos`, a measurable part of a small message's cost. */
	list_init(&r->link);
	list_init(&r->clink);
	r->core = c;
	r->chan = r->src = NULL;
	r->kind = r->state = r->internal = r->reserved_rma = r->sync = r->own_buf = 0;
	r->error = 0;
	r->tag = 0;
	r->buf = NULL;
	r->len = r->total = r->next_off = r->got = 0;
	r->msg = r->frames_out = 0;
	r->mr = NULL;
	r->parent = NULL;
	r->children = 0;
	r->cb = NULL;
	return r;
}

/* What a request owns (a copy of its data, a gather send's segments),
 * freed.  Out of line: without a call on its common path, rcpi_req_free
 * inlined into rcp_test saves no registers for a finished request
 * (session 21). */
static __attribute__((noinline, cold)) void req_free_own(rcp_req *r)
{
	if (r->gv) { /* a gather send's segments (start.c) */
		free(r->gv);
		r->gv = NULL;
	}
	free(r->buf);
	r->own_buf = 0;
}

inline void rcpi_req_free(rcp_req *r)
{
	rcpc_core *c = r->core;
	if (r->sent) {
		/* Back to the finished sends' list, its fields as req_sent
		 * keeps them (isend.c, SENT REQUESTS); a callback given
		 * after it finished is the one field that may have moved. */
		r->cb = NULL;
		r->pool_next = c->free_sent;
		c->free_sent = r;
		return;
	}
	if (RCPI_UNLIKELY(r->own_buf))
		req_free_own(r);
	r->kind = 0;
	r->pool_next = c->free_reqs;
	c->free_reqs = r;
}

/* Unexpected-message records come and go once per unexpected message
 * (every message of a probe-then-receive user such as pvm_precv): reuse
 * them rather than calloc and free each. */
struct unexp *rcpi_unexp_get(rcpc_core *c)
{
	struct unexp *u;
	if (list_empty(&c->free_unexp))
		return calloc(1, sizeof *u);
	u = container_of(c->free_unexp.next, struct unexp, link);
	list_del(&u->link);
	memset(u, 0, sizeof *u);
	return u;
}

void rcpi_unexp_put(rcpc_core *c, struct unexp *u)
{
	list_add_tail(&c->free_unexp, &u->link);
}

unsigned char *rcpi_buf_get(rcpc_core *c)
{
	if (c->nfree_bufs)
		return c->free_bufs[--c->nfree_bufs];
	return malloc(c->payload_max ? c->payload_max : 1);
}

void rcpi_buf_put(rcpc_core *c, unsigned char *b)
{
	if (c->nfree_bufs == c->cap_free_bufs) {
		int ncap = c->cap_free_bufs ? 2 * c->cap_free_bufs : 16;
		unsigned char **n = realloc(c->free_bufs, sizeof *n * (size_t)ncap);
		if (!n) {
			free(b);
			return;
		}
		c->free_bufs = n;
		c->cap_free_bufs = ncap;
	}
	c->free_bufs[c->nfree_bufs++] = b;
}

/* Bytes unexpected record U holds: the record and its pool buffer. */
static size_t unexp_size(const rcpc_core *c, const struct unexp *u)
{
	return sizeof *u + (u->data ? c->payload_max : 0);
}

/* U (filled in, u->ch set) joins the unexpected queue: counted against
 * its channel's bounds (CREDITS) and in the stats. */
void rcpi_unexp_hold(rcpc_core *c, struct unexp *u)
{
	size_t n = unexp_size(c, u);
	u->incarn = u->ch->incarn;
	list_add_tail(&c->unexp, &u->link);
	u->ch->unexp_count++;
	u->ch->unexp_bytes += n;
	if (++c->st.unexp_count > c->st.unexp_count_peak)
		c->st.unexp_count_peak = c->st.unexp_count;
	if ((c->st.unexp_bytes += n) > c->st.unexp_bytes_peak)
		c->st.unexp_bytes_peak = c->st.unexp_bytes;
	if (!u->is_rts && ++c->unexp_held > c->st.unexpected_held_peak)
		c->st.unexpected_held_peak = c->unexp_held;
}

/* U leaves the unexpected queue (consumed or dropped); its buffer, if
 * any, is still u->data.  Returns 1 if it took a credit of the channel's
 * current incarnation (consumed, the credit goes back). */
int rcpi_unexp_release(rcpc_core *c, struct unexp *u)
{
	size_t n = unexp_size(c, u);
	list_del(&u->link);
	u->ch->unexp_count--;
	u->ch->unexp_bytes -= n;
	c->st.unexp_count--;
	c->st.unexp_bytes -= n;
	if (!u->is_rts)
		c->unexp_held--;
	return u->incarn == u->ch->incarn;
}

void rcpi_fail_list(struct list *l, int error)
{
	struct list *p, *t;
	list_for_each_safe(p, t, l)
	{
		rcp_req *r = container_of(p, rcp_req, link);
		list_del(&r->link);
		rcpi_complete(r, error);
	}
}

int rcpi_take_completed(rcpc_core *c)
{
	int n = c->completed;
	c->completed = 0;
	return n;
}

static void req_status(const rcp_req *r, struct rcp_status *st)
{
	st->error = r->error;
	st->chan = r->kind == REQ_RECV ? r->src : r->chan;
	st->tag = r->tag;
	st->len = r->total;
}

inline int rcpc_req_done(rcp_req *r, struct rcp_status *st)
{
	if (r->state != Q_DONE || r->cb)
		return 0; /* with a callback: the library's, released after it */
	if (st)
		req_status(r, st);
	rcpi_req_free(r);
	return 1;
}

inline int rcpc_req_finish(rcp_req *r, struct rcp_status *st)
{
	int e;
	if (r->state != Q_DONE || r->cb)
		return RCP_EAGAIN;
	e = r->error;
	if (st)
		req_status(r, st);
	rcpi_req_free(r);
	return e;
}

/* CALLBACKS.  A request with a callback goes, when rcpi_complete()
 * finishes it, on the core's completion list: intrusive (cb_next), in
 * completion order, no allocation.  The core never runs a callback (it
 * stays pure); the endpoint takes the whole list after the core's work and
 * runs it outside (rcp/endpoint.c, run_callbacks), then releases each
 * request. */
void rcpc_req_set_cb(rcp_req *r, rcp_req_cb cb, void *user)
{
	rcpc_core *c = r->core;
	if (r->state == Q_DONE && !r->cb) {
		/* Finished before it had a callback: queue it now. */
		r->cb_next = NULL;
		*c->cbtail = r;
		c->cbtail = &r->cb_next;
	}
	r->cb = cb;
	r->cb_user = user;
}

rcp_req *rcpc_cb_take(rcpc_core *c)
{
	rcp_req *l = c->cbq;
	c->cbq = NULL;
	c->cbtail = &c->cbq;
	return l;
}

rcp_req *const *rcpc_cb_head(const rcpc_core *c)
{
	return &c->cbq;
}

rcp_req *rcpc_req_cb_get(const rcp_req *r, rcp_req_cb *cb, void **user, struct rcp_status *st)
{
	*cb = r->cb;
	*user = r->cb_user;
	req_status(r, st);
	return r->cb_next;
}

void rcpc_req_release(rcp_req *r)
{
	rcpi_req_free(r);
}

int rcpc_req_has_cb(const rcp_req *r)
{
	return r->cb != NULL;
}

rcpc_core *rcpc_req_core(const rcp_req *r)
{
	return r->core;
}
