/*
 * pvm-glue/recv.c — one matcher for every receive call (pvm_precv,
 * pvm_recv, pvm_nrecv, pvm_trecv, pvm_probe) over the held queue and RCP's
 * unexpected queue, with PVM's per-sender order across the stock and RCP
 * paths (see glue.c, "ORDER BETWEEN THE TWO PATHS" and "RECEIVING").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/glue.h"
#include "pvm-glue/inplace.h"
#include "pvm-glue/msgbuf.h"
#include "pvm-glue/packed.h"
#include "pvm-glue/upk.h"

#define S             pvmrcpi_st
#define DRAIN_GAP_NS  10000ull   /* spinning receivers look at libpvm3 this often */
#define DRAIN_FAIR_NS 1000000ull /* and at least this often even when RCP has work */

/* ---- held queue ---- */

static void held_add(struct pr_msg *m)
{
	m->next = &S.held;
	m->prev = S.held.prev;
	S.held.prev->next = m;
	S.held.prev = m;
	S.nheld++;
	pr_changed(); /* (glue.h, FAST PATHS) */
}

static void held_del(struct pr_msg *m)
{
	m->prev->next = m->next;
	m->next->prev = m->prev;
	S.nheld--;
	pr_changed();
}

static void msg_free(struct pr_msg *m)
{
	if (m->bufid) {
		pvmrcpi_syn_del(m->bufid);
		pvmrcpi_upk_drop(m->bufid);
		pvmrcpi_real.freebuf(m->bufid);
	}
	free(m->data);
	free(m);
}

void pvmrcpi_free_held(void)
{
	while (S.held.next && S.held.next != &S.held) {
		struct pr_msg *m = S.held.next;
		held_del(m);
		msg_free(m);
	}
}

/* ---- moving stock messages out of libpvm3 ---- */

void pvmrcpi_drain(void)
{
	int save, b, ctx = pvm_getcontext();

	S.last_drain_ns = pvmrcpi_now();
	S.pvm_readable = 0;
	save = pvm_setrbuf(0);
	while ((b = pvmrcpi_real.nrecv(-1, -1)) > 0) {
		int nb = 0, tag = 0, src = 0;
		struct pr_msg *m = calloc(1, sizeof *m);
		struct pr_peer *p;
		struct pr_ctxstate *cs;
		pvm_setrbuf(0); /* detach it: the next nrecv must not free it */
		pvmrcpi_real.bufinfo(b, &nb, &tag, &src);
		p = pvmrcpi_peer(src, 1);
		cs = p ? pvmrcpi_cs(p, ctx) : NULL;
		if (!m || !cs) {
			/* out of memory: hand it back as the receive buffer */
			free(m);
			pvm_setrbuf(b);
			return;
		}
		m->src = src;
		m->tag = tag;
		m->ctx = ctx;
		m->stock = 1;
		m->bufid = b;
		m->len = (size_t)nb;
		m->key = ++cs->drained;
		p->drained_tot++;
		held_add(m);
	}
	pvm_setrbuf(save);
}

/* ---- early takes (control messages: ctrl.c) ---- */

/* Receives the message ST describes (the first with its tag on its
 * channel) into a new held entry.  0 or a PVM code. */
static int take_msg(rcp_ep *ep, const struct rcp_status *st, struct pr_msg **out)
{
	struct pr_peer *p = pvmrcpi_chan_get(st->chan);
	struct pr_ctxstate *cs;
	struct pr_msg *m;
	struct rcp_status st2;
	rcp_req *r;
	int rc;

	if (!p)
		return PvmSysErr;
	m = calloc(1, sizeof *m);
	if (!m || !(m->data = malloc(st->len ? st->len : 1))) {
		free(m);
		return PvmNoMem;
	}
	rc = rcp_irecv(ep, st->chan, st->tag, m->data, st->len, &r);
	rc = rc ? pvmrcpi_err(rc) : pvmrcpi_wait_req(r, &st2, &p->tid, 1, 0);
	if (rc) {
		free(m->data);
		free(m);
		return rc;
	}
	if (st->tag & PR_MCNET) { /* a stub: the data came by multicast */
		void *d = NULL;
		size_t dl = 0;
		rc = pvmrcpi_mcn_take(m->data, st->len, &d, &dl);
		free(m->data);
		if (rc) {
			free(m);
			return rc;
		}
		m->data = d;
		m->len = dl;
	} else {
		m->len = st->len;
	}
	m->src = p->tid;
	m->tag = pr_rtag_tag(st->tag);
	m->ctx = pr_rtag_ctx(st->tag);
	m->packed = !!(st->tag & PR_PACKED);
	if (m->packed && pvmrcpi_pk_from_wire(m->data, m->len)) {
		/* hostile or broken: counted and dropped (packed.c) */
		pvmrcpi_bad_packed++;
		free(m->data);
		free(m);
		return PvmBadMsg;
	}
	cs = pvmrcpi_cs(p, m->ctx);
	m->key = cs ? cs->cur_req : 0;
	held_add(m);
	if (out)
		*out = m;
	return 0;
}

/* Takes the head message of ST->chan out of the way, in order. */
static int take_head(rcp_ep *ep, const struct rcp_status *st)
{
	if (st->tag & PR_CTRL) {
		pvmrcpi_take_ctrl(ep, st->chan, st->tag);
		return 0;
	}
	if (!pvmrcpi_chan_get(st->chan))
		pvmrcpi_process_hellos();
	return take_msg(ep, st, NULL);
}

int pvmrcpi_stash_some(void)
{
	struct rcp_status st;
	int n = 0;
	rcp_ep *ep;
	for (int i = 0; (ep = pvmrcpi_ep_next(&i)) != NULL;) {
		while (n < 16 && rcp_probe(ep, RCP_ANY_CHAN, RCP_ANY_TAG, &st) == 1) {
			if (take_head(ep, &st))
				return n;
			n++;
		}
	}
	return n;
}

/* rcp_probe on CH of EP, or (CH = RCP_ANY_CHAN) on every endpoint, the
 * first one tried alternating so neither starves the other; *FOUND gets
 * the endpoint of the message. */
static int probe(rcp_ep *ep, rcp_chan *ch, uint64_t tag, struct rcp_status *st, rcp_ep **found)
{
	static unsigned rr;
	int rc;
	*found = ep;
	if (ch)
		return rcp_probe(ep, ch, tag, st);
	rr++;
	for (int k = 0; k < PR_MAXEP; k++) {
		rcp_ep *e = S.eps[(k + rr) % PR_MAXEP];
		if (e && (rc = rcp_probe(e, RCP_ANY_CHAN, tag, st)) != 0) {
			*found = e;
			return rc;
		}
	}
	return 0;
}

/* ---- the matcher ---- */

struct want {
	int src, tag, ctx;
};

struct cand {
	struct pr_msg *held;  /* a held message, or: */
	struct rcp_status st; /* an RCP message still in RCP, */
	rcp_ep *ep;           /* on this endpoint */
	struct pr_peer *p;
	uint32_t req;
};

static int matches(const struct want *w, int src, int tag, int ctx)
{
	return (w->src == -1 || w->src == src) && (w->tag == -1 || w->tag == tag) && ctx == w->ctx;
}

/* Order key within one sender and context: stock k -> 2k, RCP r -> 2r+1. */
static uint64_t key_of(uint32_t key, int stock)
{
	return ((uint64_t)key << 1) | (stock ? 0u : 1u);
}

/* May RCP messages that follow REQ stock messages be delivered?  1 yes,
 * 0 not yet, -1 stock messages were just moved: match again (they may
 * come first).  Gives up waiting after order_ns. */
static int order_ok(struct pr_peer *p, int ctx, uint32_t req, uint64_t *since)
{
	struct pr_ctxstate *cs = pvmrcpi_cs(p, ctx);
	uint32_t before;
	uint64_t now;
	if (!cs || cs->drained >= req)
		return 1;
	before = cs->drained;
	pvmrcpi_drain();
	if (cs->drained != before)
		return -1;
	now = pvmrcpi_now();
	if (!*since)
		*since = now;
	if (now - *since > S.order_ns) {
		fprintf(stderr,
		        "libpvmrcp: t%x: %u stock message(s) from t%x never reached the queue "
		        "(message handler?); delivering later RCP messages anyway\n",
		        (unsigned)S.mytid, req - cs->drained, (unsigned)p->tid);
		pr_changed();
		p->drained_tot += req - cs->drained; /* never coming: not pending either */
		cs->drained = req;
		return -1;
	}
	return 0;
}

/* 1: *C is the next message for W; 0: none deliverable now; <0 PVM code. */
static int find(const struct want *w, struct cand *c, uint64_t *since)
{
	for (int round = 0; round < 10000; round++) {
		struct pr_msg *best = NULL;
		struct pr_peer *sp = NULL, *p;
		struct pr_ctxstate *cs;
		rcp_chan *ch = RCP_ANY_CHAN;
		rcp_ep *ep = NULL, *fep;
		struct rcp_status st, b;
		int have_rcp = 0;

		pvmrcpi_process_hellos();
		for (struct pr_msg *m = S.held.next; m != &S.held; m = m->next) {
			if (!matches(w, m->src, m->tag, m->ctx))
				continue;
			if (!best || (m->src == best->src &&
			              key_of(m->key, m->stock) < key_of(best->key, best->stock)))
				best = m;
		}
		if (best) {
			sp = pvmrcpi_peer(best->src, 0);
			/* Held RCP messages precede RCP ones still in RCP. */
			if (best->stock && sp && sp->ch) {
				ch = sp->ch;
				ep = sp->ep;
			} else {
				goto held;
			}
		} else if (w->src != -1) {
			sp = pvmrcpi_peer(w->src, 0);
			if (!sp || !sp->ch) {
				/* Its HELLO may be on its way: progress every
				 * endpoint once (ctrl.c's receives take it), as
				 * nrecv/probe in a loop need. */
				rcp_ep *e;
				for (int i = 0; (e = pvmrcpi_ep_next(&i)) != NULL;)
					rcp_progress(e);
				sp = pvmrcpi_peer(w->src, 0);
				if (!sp || !sp->ch)
					return 0;
			}
			ch = sp->ch;
			ep = sp->ep;
		}
		if (w->tag != -1) {
			uint64_t t = pr_rtag(w->ctx, w->tag);
			int kind;
			/* A multicast stub with that tag: take its channel's
			 * messages in order until it is held (with its data). */
			if (probe(ep, ch, t | PR_MCNET, &st, &fep) == 1 ||
			    probe(ep, ch, t | PR_PACKED | PR_MCNET, &st, &fep) == 1) {
				if (rcp_probe(fep, st.chan, RCP_ANY_TAG, &b) == 1) {
					int rc = take_head(fep, &b);
					if (rc)
						return rc;
				}
				continue;
			}
			kind = probe(ep, ch, t, &st, &fep) == 1;
			if (!kind && probe(ep, ch, t | PR_PACKED, &st, &fep) == 1)
				kind = 2;
			if (kind) {
				/* A BARRIER on that channel may precede it, or a
				 * message of the other kind (psend or packed) with
				 * that tag: take the channel's messages in order
				 * until none is left. */
				if (rcp_probe(fep, st.chan, PR_BARRIER, &b) == 1 ||
				    rcp_probe(fep, st.chan, kind == 1 ? t | PR_PACKED : t, &b) ==
				        1) {
					if (rcp_probe(fep, st.chan, RCP_ANY_TAG, &b) == 1) {
						int rc = take_head(fep, &b);
						if (rc)
							return rc;
					}
					continue;
				}
				have_rcp = 1;
			}
		} else if (probe(ep, ch, RCP_ANY_TAG, &st, &fep) == 1) {
			if ((st.tag & (PR_CTRL | PR_MCNET)) || pr_rtag_ctx(st.tag) != w->ctx) {
				int rc = take_head(fep, &st);
				if (rc)
					return rc;
				continue;
			}
			have_rcp = 1;
		}
		if (have_rcp) {
			p = pvmrcpi_chan_get(st.chan);
			if (!p) {
				/* HELLO not here yet?  Cannot be: it comes first. */
				have_rcp = 0;
			} else if ((cs = pvmrcpi_cs(p, w->ctx)) == NULL) {
				return PvmNoMem;
			} else if (!best || cs->cur_req < best->key) {
				int ok = order_ok(p, w->ctx, cs->cur_req, since);
				if (ok < 0)
					continue;
				if (!ok)
					return 0;
				c->held = NULL;
				c->st = st;
				c->ep = fep;
				c->p = p;
				c->req = cs->cur_req;
				return 1;
			}
		}
		if (!best)
			return 0;
	held:
		if (!best->stock && (p = pvmrcpi_peer(best->src, 0)) != NULL) {
			int ok = order_ok(p, best->ctx, best->key, since);
			if (ok < 0)
				continue;
			if (!ok)
				return 0;
		}
		c->held = best;
		return 1;
	}
	return 0;
}

/* One attempt: matcher, libpvm3's queue when due (or FORCE). */
static int try_once(const struct want *w, struct cand *c, uint64_t *since, int force)
{
	uint64_t now = pvmrcpi_now();
	int rc;
	if (now - S.last_drain_ns >= DRAIN_FAIR_NS)
		pvmrcpi_drain();
	rc = find(w, c, since);
	if (rc)
		return rc;
	if (force || pvmrcpi_now() - S.last_drain_ns >= DRAIN_GAP_NS) {
		int before = S.nheld;
		pvmrcpi_drain();
		if (S.nheld != before)
			rc = find(w, c, since);
	}
	return rc;
}

struct rx {
	struct want w;
	struct cand c;
	uint64_t since;
};

/* A blocked receive ends with PvmSysErr when messages we sent to the
 * task it names (any task: every 64th look) may have been lost (send.c,
 * LOST SENDS): that task may be waiting for them, and we for its answer. */
static int rx_done(void *arg)
{
	static unsigned looks;
	struct rx *x = arg;
	struct pr_peer *p;
	int rc = try_once(&x->w, &x->c, &x->since, 0);
	if (rc)
		return rc;
	if (x->w.src != -1)
		p = pvmrcpi_peer(x->w.src, 0);
	else
		p = (++looks & 63) ? NULL : pvmrcpi_lost_any();
	if (!p || !pr_lost(p))
		return 0;
	rc = pvmrcpi_lost(p);
	return x->w.src == -1 && rc == PvmNoTask ? 0 : rc;
}

/* Blocks for a message; 1 (x->c), 0 (deadline), or a PVM code.  After
 * PVMRCP_STASH_US it takes the messages it does not want out of RCP into
 * the held queue, as a waiting send does: the one it waits for may be
 * behind them on a channel whose credits they use up, and its sender
 * may be waiting for them to be taken (stock PVM queues them all in the
 * receiver; packed-bounded). */
static int rx_wait(struct rx *x, int live, uint64_t deadline)
{
	int rc = try_once(&x->w, &x->c, &x->since, 1);
	if (rc)
		return rc;
	return pvmrcpi_block(rx_done, x, &live, live > 0 ? 1 : 0, deadline, 1);
}

/* ---- delivery ---- */

/* Copies the candidate into BUF (CAP bytes); *LEN gets the whole length. */
static int deliver_copy(struct cand *c, void *buf, size_t cap, int *src, int *tag, size_t *len)
{
	struct pr_msg *m = c->held;
	int rc;
	if (!m && (c->st.tag & PR_PACKED)) {
		/* a packed message: its bytes as a stock precv gets them */
		if ((rc = take_msg(c->ep, &c->st, &m)) != 0)
			return rc;
	}
	if (m && m->packed && (rc = pvmrcpi_pack_msg(m)) != 0) {
		held_del(m);
		msg_free(m);
		return rc;
	}
	if (m) {
		size_t n = m->len < cap ? m->len : cap;
		held_del(m);
		if (m->bufid) {
			int save = pvm_setrbuf(m->bufid);
			if (n)
				pvm_upkbyte(buf, (int)n, 1);
			pvm_setrbuf(save);
		} else if (n) {
			memcpy(buf, m->data, n);
		}
		*src = m->src;
		*tag = m->tag;
		*len = m->len;
		msg_free(m);
		return 0;
	} else {
		rcp_req *r;
		struct rcp_status st;
		rc = rcp_irecv(c->ep, c->st.chan, c->st.tag, buf, cap, &r);
		rc = rc ? pvmrcpi_err(rc) : pvmrcpi_wait_req(r, &st, &c->p->tid, 1, 0);
		if (rc)
			return rc;
		*src = c->p->tid;
		*tag = pr_rtag_tag(c->st.tag);
		*len = st.len;
		return 0;
	}
}

/* Makes the candidate a libpvm3 buffer; ACTIVATE: as pvm_recv (it becomes
 * the receive buffer, the old one is freed, it leaves the held queue). */
static int deliver_buf(struct cand *c, int activate)
{
	struct pr_msg *m = c->held;
	int rc, b;
	if (!m) {
		rc = take_msg(c->ep, &c->st, &m);
		if (rc)
			return rc;
	}
	if (!m->stock && (rc = pvmrcpi_pack_msg(m)) != 0)
		return rc;
	b = m->bufid;
	if (!activate)
		return b;
	held_del(m);
	m->bufid = 0; /* now owned by the caller */
	msg_free(m);
	pvmrcpi_free_rbuf();
	pvm_setrbuf(b);
	return b;
}

/* ---- the fast path of pvm_precv ----
 * precv(tid, tag) from one relinked task P that is quiet (pr_quiet: no
 * stock message from P can be pending or come before P's next RCP one),
 * with nothing held that matches: the message to deliver can then only be
 * the first message on P's channel.  So: look at the channel's head
 * (rcp_probe on the channel, any tag); control messages there are taken in
 * order; a data message that matches, whose BARRIER requirement is met, is
 * received straight into the user's buffer.  Anything else (no match at
 * the head, P no longer quiet, a held message that matches) goes to the
 * general matcher below, which sees the same state.  The receive is posted
 * ahead (rcp_irecv_next: P's next message, taken only if it is that data
 * message), so the message lands in the user's buffer as it arrives
 * instead of being buffered as unexpected, probed and copied out: for the
 * tag asked, or, asked for any tag (-1), for the tag of the last message
 * this path took from P in the context (a guess: an echo, a stream of one
 * tag); when anything else comes first the receive ends with RCP_ENOENT
 * and the head is looked at as above.  (Until session 20 a precv of any
 * tag never posted ahead, nor one into more than a frame's payload (RCP
 * refused it), so rcp-pvm-pingpong, whose buffers are 4 MiB, took every
 * 8 B message the unexpected way at both ends.)  No libpvm3 call and
 * no clock read per poll: stock messages from other tasks are moved out of
 * libpvm3 only every DRAIN_FAIR_NS (or when a sleep woke on its sockets),
 * so a stock sender writing to us directly cannot stall on a full socket. */

enum { FX_WAIT, FX_DONE, FX_SLOW };

struct fx {
	struct want w;
	struct pr_peer *p;
	void *buf;
	size_t cap;
	int src, tag;
	size_t len;
	unsigned polls;
	int state, rc;
	rcp_req *r; /* the receive posted ahead (rcp_irecv_next), or NULL */
};

/* The RCP tag X's receive is posted ahead for: the one asked, else (any
 * tag) the last one the fast path took from P in X's context; 0 and
 * *TAG unset when there is none (the fast path). */
static int next_tag(const struct fx *x, uint64_t *tag)
{
	if (x->w.tag != -1) {
		*tag = pr_rtag(x->w.ctx, x->w.tag);
		return 1;
	}
	if (!x->p->last_rtag1 || pr_rtag_ctx(x->p->last_rtag1 - 1) != x->w.ctx)
		return 0;
	*tag = x->p->last_rtag1 - 1;
	return 1;
}

static int held_match(const struct want *w)
{
	for (struct pr_msg *m = S.held.next; m != &S.held; m = m->next)
		if (matches(w, m->src, m->tag, m->ctx))
			return 1;
	return 0;
}

/* (W NULL: nothing held, asked by precv_note) */
static int fast_ok(const struct want *w, const struct pr_peer *p)
{
	return p && p->route == PR_RCP && p->ch && !p->dead && pr_quiet(p) &&
	       (S.nheld == 0 || (w && !held_match(w)));
}

/* X's receive R ended (or its message is on the way: WAIT) with RC, ST:
 * the message is delivered (FX_DONE, returns 1), or none was taken
 * (RCP_ENOENT: another message is first; RCP_ECANCELED), returns 0. */
static int fast_end(struct fx *x, rcp_req *r, int rc, struct rcp_status *st, int wait)
{
	if (wait)
		rc = pvmrcpi_wait_req(r, st, &x->p->tid, 1, 0); /* PVM codes */
	else if (rc == RCP_ENOENT || rc == RCP_ECANCELED)
		return 0;
	else
		rc = rc == RCP_ETRUNC ? 0 : pvmrcpi_err(rc);
	x->rc = rc;
	x->len = st->len;
	x->src = x->p->tid;
	x->tag = pr_rtag_tag(st->tag);
	x->state = FX_DONE;
	if (!rc)
		x->p->last_rtag1 = st->tag + 1;
	return 1;
}

/* Takes back the receive X posted ahead, if any, before the matcher runs:
 * returns 1 if it had taken its message after all (delivered, FX_DONE). */
static int fast_unpost(struct fx *x)
{
	struct rcp_status st = {0};
	rcp_req *r = x->r;
	int rc;
	if (!r)
		return 0;
	x->r = NULL;
	rc = rcp_cancel(r);
	if (rc == RCP_EBUSY) /* matched a rendezvous: its data are coming */
		return fast_end(x, r, 0, &st, 1);
	return fast_end(x, r, rcp_test(r, &st), &st, 0);
}

/* X leaves the fast path: its receive taken back (1: that had taken its
 * message after all, FX_DONE), else FX_SLOW; returns 1. */
static int fast_give_up(struct fx *x)
{
	if (fast_unpost(x))
		return 1;
	x->state = FX_SLOW;
	return 1;
}

/* A look at X's peer found nothing (its receive posted ahead still
 * waits, or its channel is empty): 0 (look again), a PVM code (sends to
 * it were lost), or 1 (fast_give_up: a stock message came in). */
static int fast_nothing(struct fx *x)
{
	struct pr_peer *p = x->p;
	if (!pr_quiet(p))
		return fast_give_up(x);
	if (S.pvm_readable ||
	    ((++x->polls & 255) == 0 && pvmrcpi_now() - S.last_drain_ns >= DRAIN_FAIR_NS)) {
		int before = S.nheld;
		pvmrcpi_drain();
		if (S.nheld != before && !fast_ok(&x->w, p))
			return fast_give_up(x);
	}
	return pr_lost(p) ? pvmrcpi_lost(p) : 0; /* send.c, LOST SENDS */
}

static int fast_step(void *arg)
{
	struct fx *x = arg;
	struct pr_peer *p = x->p;
	struct rcp_status st;
	struct pr_ctxstate *cs;
	rcp_req *r;
	int rc;

	for (;;) {
		uint64_t nt;
		if (!x->r && next_tag(x, &nt)) {
			cs = pvmrcpi_cs(p, x->w.ctx);
			if (cs && cs->cur_req <= cs->drained &&
			    rcp_irecv_next(p->ep, p->ch, nt, x->buf, x->cap, &x->r))
				x->r = NULL; /* another message first: look */
		}
		if (x->r) {
			rc = rcp_test(x->r, &st); /* progresses */
			if (rc != RCP_EAGAIN) {
				r = x->r;
				x->r = NULL;
				if (fast_end(x, r, rc, &st, 0))
					return 1;
				continue; /* RCP_ENOENT: the head is another message */
			}
			rc = 0; /* nothing yet (or a rendezvous under way) */
		} else {
			rc = rcp_probe(p->ep, p->ch, RCP_ANY_TAG, &st);
		}
		if (rc < 0)
			break;
		if (rc == 0)
			return fast_nothing(x);
		if (st.tag & PR_CTRL) {
			pvmrcpi_take_ctrl(p->ep, p->ch, st.tag);
			continue;
		}
		if ((st.tag & (PR_PACKED | PR_MCNET)) || pr_rtag_ctx(st.tag) != x->w.ctx ||
		    (x->w.tag != -1 && pr_rtag_tag(st.tag) != x->w.tag))
			break;
		cs = pvmrcpi_cs(p, x->w.ctx);
		if (!cs || cs->cur_req > cs->drained)
			break; /* stock messages come first: the matcher waits for them */
		rc = rcp_irecv(p->ep, p->ch, st.tag, x->buf, x->cap, &r);
		if (!rc) {
			struct rcp_status st2;
			rc = rcp_test(r, &st2);
			if (rc == RCP_EAGAIN) /* rendezvous: the data are on their way */
				rc = pvmrcpi_wait_req(r, &st2, &p->tid, 1, 0);
			else
				rc = rc == RCP_ETRUNC ? 0 : pvmrcpi_err(rc);
			x->len = st2.len;
		} else {
			rc = pvmrcpi_err(rc);
		}
		x->rc = rc;
		x->src = p->tid;
		x->tag = pr_rtag_tag(st.tag);
		x->state = FX_DONE;
		if (!rc)
			p->last_rtag1 = st.tag + 1;
		return 1;
	}
	return fast_give_up(x);
}

/* ---- the wrapped calls ---- */

/* precv on TID ended with RC: PvmNoTask means pvmd said TID is gone, so
 * later psends to it say so too (its channel stays open: messages it sent
 * before it died can still be received). */
static int note_gone(int tid, int rc)
{
	struct pr_peer *p = rc == PvmNoTask && tid != -1 ? pvmrcpi_peer(tid, 0) : NULL;
	if (p) {
		pr_changed();
		p->dead = 1;
	}
	return rc;
}

/* The fast path's receive F to its end, from RC (what its first
 * fast_step returned: 0 blocks): 1 and the call's result in *OUT (the
 * outputs set), or 0: the general matcher decides (FX_SLOW). */
static int fx_finish(struct fx *f, int rc, int *out, int *rtid, int *rtag, int *rlen)
{
	int tid = f->w.src;
	if (!rc)
		rc = pvmrcpi_block(fast_step, f, &tid, 1, 0, 0);
	if (rc < 0) {
		fast_unpost(f); /* the buffer is the caller's again */
		*out = note_gone(tid, rc);
		return 1;
	}
	if (f->state != FX_DONE)
		return 0;
	if (f->rc) {
		if (f->rc == PvmNoTask)
			pvmrcpi_peer_dead(f->p);
		*out = f->rc;
		return 1;
	}
	if (rtid)
		*rtid = f->src;
	if (rtag)
		*rtag = f->tag;
	if (rlen)
		*rlen = (int)f->len;
	*out = 0;
	return 1;
}

/* The general matcher's precv (rx_wait, deliver_copy). */
static int precv_match(int tid, int tag, int ctx, void *buf, size_t cap, int *rtid, int *rtag,
                       int *rlen)
{
	struct rx x = {.w = {tid, tag, ctx}};
	int rc, src, mtag;
	size_t mlen;

	rc = rx_wait(&x, tid, 0);
	if (rc < 0)
		return note_gone(tid, rc);
	rc = deliver_copy(&x.c, buf, cap, &src, &mtag, &mlen);
	if (rc) {
		if (rc == PvmNoTask && x.c.p)
			pvmrcpi_peer_dead(x.c.p);
		return rc;
	}
	if (rtid)
		*rtid = src;
	if (rtag)
		*rtag = mtag;
	if (rlen)
		*rlen = (int)mlen;
	return 0;
}

/* The fast path's checks (fast_ok, the context's BARRIER requirement)
 * hold for P in CTX with nothing held: pvm_precv may skip them until
 * S.gen moves (glue.h, FAST PATHS). */
static void precv_note(struct pr_peer *p, int ctx)
{
	struct pr_ctxstate *cs;
	if (S.state == PR_READY && S.nheld == 0 && pr_encodable(ctx, 0) && fast_ok(NULL, p) &&
	    (cs = pvmrcpi_cs(p, ctx)) && cs->cur_req <= cs->drained) {
		p->recv_gen = S.gen;
		p->recv_ctx = ctx;
	}
}

static __attribute__((noinline)) int precv_slow(int tid, int tag, void *buf, int len, int dt,
                                                int *rtid, int *rtag, int *rlen)
{
	struct pr_peer *p;
	int sz, ctx, rc;
	size_t cap;

	if (!pvmrcpi_ready())
		return pvmrcpi_resolve()
		           ? PvmSysErr
		           : pvmrcpi_real.precv(tid, tag, buf, len, dt, rtid, rtag, rlen);
	sz = pvmrcpi_dtsize(dt);
	if (sz < 0 || len < 0)
		return pvmrcpi_real.precv(tid, tag, buf, len, dt, rtid, rtag, rlen);
	ctx = pvmrcpi_ctx();
	cap = (size_t)len * (size_t)sz;
	if (tid != -1 && pr_encodable(ctx, tag < 0 ? 0 : tag)) {
		struct fx f = {
		    .w = {tid, tag, ctx}, .p = pvmrcpi_peer(tid, 0), .buf = buf, .cap = cap};
		if (fast_ok(&f.w, f.p) && fx_finish(&f, fast_step(&f), &rc, rtid, rtag, rlen)) {
			if (!rc)
				precv_note(f.p, ctx);
			return rc;
		}
	}
	rc = precv_match(tid, tag, ctx, buf, cap, rtid, rtag, rlen);
	if (!rc && tid != -1 && (p = pvmrcpi_peer(tid, 0)) != NULL)
		precv_note(p, ctx);
	return rc;
}

/* The receive posted ahead by pvm_precv's fast path (R, or NULL: its post
 * failed) gave RC, *ST other than a message: what fast_step's first
 * round would do next (without a second look: one nic poll before the
 * wait, pvmt polls-per-look), then the rest of the fast path, else the
 * matcher. */
static __attribute__((noinline)) int precv_more(struct pr_peer *p, int tid, int tag, int ctx,
                                                void *buf, size_t cap, rcp_req *r, int rc,
                                                struct rcp_status *st, int *rtid, int *rtag,
                                                int *rlen)
{
	struct fx f = {.w = {tid, tag, ctx}, .p = p, .buf = buf, .cap = cap};
	int out;
	if (r && rc == RCP_EAGAIN) {
		f.r = r; /* posted: nothing yet, or a rendezvous under way */
		rc = fast_nothing(&f);
	} else if (r && fast_end(&f, r, rc, st, 0)) {
		rc = 1; /* FX_DONE: an error */
	} else {
		rc = fast_step(&f); /* another message first, or the post failed */
	}
	if (fx_finish(&f, rc, &out, rtid, rtag, rlen))
		return out;
	return precv_match(tid, tag, ctx, buf, cap, rtid, rtag, rlen);
}

/* The fast path (glue.h, FAST PATHS): the task last looked up, whose
 * checks passed in this context and generation, and a tag the receive
 * can be posted ahead for (fast_step's first round, its common case
 * inline): anything else is precv_slow's. */
int pvm_precv(int tid, int tag, void *buf, int len, int dt, int *rtid, int *rtag, int *rlen)
{
	struct pr_peer *p = S.last_peer;
	if (__builtin_expect(p && p->tid == tid && p->recv_gen == S.gen, 1) && len >= 0 &&
	    tag >= -1) {
		int sz = pvmrcpi_dtsize(dt), ctx = pvmrcpi_ctx();
		uint64_t t = tag >= 0 ? pr_rtag(ctx, tag) : p->last_rtag1 - 1;
		if (sz > 0 && p->recv_ctx == ctx &&
		    (tag >= 0 || (p->last_rtag1 && pr_rtag_ctx(t) == ctx))) {
			size_t cap = (size_t)len * (size_t)sz;
			struct rcp_status st;
			rcp_req *r;
			int rc = rcp_irecv_next(p->ep, p->ch, t, buf, cap, &r);
			if (!rc) {
				rc = rcp_test(r, &st); /* progresses */
				if (__builtin_expect(rc == 0 || rc == RCP_ETRUNC, 1)) {
					p->last_rtag1 = st.tag + 1;
					if (rtid)
						*rtid = tid;
					if (rtag)
						*rtag = pr_rtag_tag(st.tag);
					if (rlen)
						*rlen = (int)st.len;
					return 0;
				}
			} else {
				r = NULL;
			}
			return precv_more(p, tid, tag, ctx, buf, cap, r, rc, &st, rtid, rtag, rlen);
		}
	}
	return precv_slow(tid, tag, buf, len, dt, rtid, rtag, rlen);
}

int pvm_recv(int tid, int tag)
{
	struct rx x = {{tid, tag, 0}, {0}, 0};
	int rc;
	if (!pvmrcpi_ready())
		return pvmrcpi_resolve() ? PvmSysErr : pvmrcpi_real.recv(tid, tag);
	pvmrcpi_free_rbuf();
	x.w.ctx = pvm_getcontext();
	rc = rx_wait(&x, 0, 0);
	return rc < 0 ? rc : deliver_buf(&x.c, 1);
}

int pvm_trecv(int tid, int tag, struct timeval *tmout)
{
	struct rx x = {{tid, tag, 0}, {0}, 0};
	uint64_t deadline;
	int rc;
	if (!pvmrcpi_ready())
		return pvmrcpi_resolve() ? PvmSysErr : pvmrcpi_real.trecv(tid, tag, tmout);
	if (!tmout)
		return pvm_recv(tid, tag);
	if (tmout->tv_sec < 0 || tmout->tv_usec < 0)
		return PvmBadParam;
	pvmrcpi_free_rbuf();
	x.w.ctx = pvm_getcontext();
	deadline = pvmrcpi_now() + (uint64_t)tmout->tv_sec * 1000000000ull +
	           (uint64_t)tmout->tv_usec * 1000ull;
	rc = try_once(&x.w, &x.c, &x.since, 1);
	if (!rc && (tmout->tv_sec || tmout->tv_usec))
		rc = pvmrcpi_block(rx_done, &x, NULL, 0, deadline, 0);
	return rc <= 0 ? rc : deliver_buf(&x.c, 1);
}

int pvm_nrecv(int tid, int tag)
{
	struct rx x = {{tid, tag, 0}, {0}, 0};
	int rc;
	if (!pvmrcpi_ready())
		return pvmrcpi_resolve() ? PvmSysErr : pvmrcpi_real.nrecv(tid, tag);
	pvmrcpi_free_rbuf();
	x.w.ctx = pvm_getcontext();
	rc = try_once(&x.w, &x.c, &x.since, 1);
	return rc <= 0 ? rc : deliver_buf(&x.c, 1);
}

int pvm_probe(int tid, int tag)
{
	struct rx x = {{tid, tag, 0}, {0}, 0};
	int rc;
	if (!pvmrcpi_ready())
		return pvmrcpi_resolve() ? PvmSysErr : pvmrcpi_real.probe(tid, tag);
	x.w.ctx = pvm_getcontext();
	rc = try_once(&x.w, &x.c, &x.since, 1);
	return rc <= 0 ? rc : deliver_buf(&x.c, 0);
}
