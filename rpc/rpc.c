/*
 * rpc/rpc.c — the call engine: registration, client requests, server
 * handles, progress and waiting.
 *
 * MESSAGES.  Every call is one request message (tag TAG_REQ) from client
 * to server and one response message (tag TAG_RESP) back, each a 40-byte
 * header (struct rpc_hdr: byte-order mark, kind, status, payload length,
 * rpc id, the client's cookie, aux) followed by the encoded arguments.
 * Up to msg_max bytes (RCP_RPC_MSG_MAX, capped so a message is one nic
 * frame) a message is eager in rcp: one frame, no handshake, and up to
 * 2 KiB the send completes at once.  A larger encoded payload travels as a
 * header with F_OVF (aux = its size) and a second message on
 * TAG_OVF(cookie): rcp moves it by rendezvous, which on shm is one RMA get
 * by the receiver — the receiver pulls it when it has posted the buffer,
 * so a server controls its inbound flow as with a bulk pull.
 *
 * RECEIVES.  A server keeps `recvs` request receives posted on
 * (any channel, TAG_REQ), in a ring; a client keeps, per server channel,
 * one response receive posted on (that channel, TAG_RESP) for every call
 * whose response may still come ("expect"), so the response is
 * pre-posted, and the channel counts as busy for rcp's liveness checks: a
 * server that dies or falls silent fails the channel after
 * RCP_PEER_TIMEOUT and every call on it completes with RCP_EPEER.
 * Responses carry the cookie (index | generation << 24 of the client's
 * request slot); a response whose cookie no longer names a pending call
 * (timed out, canceled) is counted as stale and dropped, and its receive
 * is reposted only if responses are still expected.
 *
 * BATCHES.  Requests forwarded and responses given while the context's
 * progress runs (from callbacks and handlers: the steady state of a client
 * keeping calls in flight and of a server) are not sent one by one: they
 * are appended to a queue of their channel (a request queue per peer; a
 * few response queues by channel hash) and each queue goes out as one rcp
 * message when the round ends, nested rounds included, or earlier when
 * the next one would pass msg_max.  A message thus holds one or more
 * [header, payload] in a row; a lone one is exactly the message of old.
 * rcp's per-message cost (sequence, slot, frame, ack, matching, posting
 * the receive again) is then paid once per batch, which is what lifts the
 * rate at 16 calls in flight.  A receiver checks every header of a
 * message (order, kind, version, payload wholly inside, F_OVF only alone)
 * before it uses any; one bad header drops the whole message (bad_msgs
 * +1).  Calls forwarded outside progress go at once, as before (a lone
 * call's latency is unchanged); RCP_RPC_BATCH=0 turns batching off.  One
 * response receive may now carry several calls' responses: the client's
 * surplus receives stay posted while calls are pending and are canceled
 * when none is (peer_repost).
 *
 * COMPLETIONS.  The context never looks for completions: every rcp
 * request it owns (posted receives, overflow messages, a send rcp could
 * not take at once) carries an rcp completion callback (rcp.h,
 * rcp_isend_cb ...) whose user pointer is its owner (rbuf, request,
 * handle, aux); rcp runs
 * it from the progress that finished it, with the status, and releases
 * the request.  The cost of a completed call is then a constant whatever
 * the number of calls in flight: scanning the outstanding receives or
 * sends for the few that completed (as this engine once did whenever rcp
 * reported a completion it could not place, on udp every round) cost
 * O(calls in flight) per completion, 11 s latency at 30,000 in flight.
 * Callbacks run outside rcp's core, so they post, cancel and run handlers
 * (which may respond, forward, even progress: rcp nests that safely).
 * stats.polls counts every callback and every request the timers touch:
 * tests/test_rpc.c holds it to a constant per call.
 *
 * CLIENT STATE MACHINE (struct rcp_rpc_req):
 *   FREE -> PENDING (forward: request sent, expect++ on its peer)
 *   PENDING -> OVF_WAIT (response header said F_OVF: its receive posted)
 *   PENDING/OVF_WAIT -> DONE (response decoded; timeout; cancel; peer
 *                      failure; context destroyed) — exactly once: only
 *                      done() moves a request to DONE, and only from
 *                      PENDING/OVF_WAIT; a callback request is queued and
 *                      its callback runs from the next progress round,
 *                      then it returns to FREE; a request object stays
 *                      DONE until rcp_rpc_req_free.
 * Timers: each pending request may have a deadline, kept in a binary
 * min-heap (O(log n) to arm, disarm or fire; nothing is scanned).  The
 * clock is read once per progress round only while timers are armed.
 *
 * SERVER: a completed request receive becomes a handle (pool) whose input
 * is decoded on demand (rcp_rpc_get_input) straight from the receive
 * buffer; rcp_rpc_respond encodes the output into the handle's send
 * buffer and sends it; the handle returns to the pool when the send
 * completes.  Handlers may keep handles and respond from later rounds.
 *
 * Requests and responses (one frame each) go detached (send_msg): rcp
 * sends them or keeps a copy, so no completion comes back for them.
 *
 * INVARIANTS.  posted receives on a peer >= expect + watch (while the
 * channel has not failed), and none once both are 0 (surplus canceled);
 * every queued message is sent by the end of the progress round that
 * queued it; every pending request is on its peer's list;
 * every rcp request the context owns has its callback set, and rpc frees
 * nothing a callback may still name (destroy detaches them); a buffer
 * given to rcp is never freed or reused before rcp completes it (on
 * destroy, receives rcp refuses to cancel are leaked, never freed early);
 * input from the wire is decoded only after the header's order, kind,
 * version and lengths check out, by bounds-checked procs.
 *
 * REMOTE FETCH: see rpc/rfp.c.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/wait.h"
#include "rcp/core.h"
#include "rcp/ep_int.h"
#include "rpc/rpc_int.h"

static int wait_look(void *arg);
static int wait_arm(void *arg, int64_t *timeout_ns);

#define RESP_MIN              256 /* initial send-buffer capacity */
#define OWNER(p, type, field) ((type *)(void *)((char *)(p)-offsetof(type, field)))

/* ---- small helpers ------------------------------------------------------------------ */

static uint64_t now_ns(void)
{
	return rcpi_now_ns();
}

uint64_t rcp_rpc_id(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	if (!name)
		return 0;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
	return h ? h : 1;
}

static struct call *call_find(const rcp_rpc *rpc, uint64_t id)
{
	if (!rpc->callcap)
		return NULL;
	for (uint32_t i = (uint32_t)id & (rpc->callcap - 1);; i = (i + 1) & (rpc->callcap - 1)) {
		if (rpc->calls[i].id == id)
			return &rpc->calls[i];
		if (!rpc->calls[i].id)
			return NULL;
	}
}

static int call_grow(rcp_rpc *rpc)
{
	uint32_t cap = rpc->callcap ? rpc->callcap * 2 : 16;
	struct call *n = calloc(cap, sizeof *n);
	if (!n)
		return RCP_ENOMEM;
	for (uint32_t j = 0; j < rpc->callcap; j++) {
		struct call *c = &rpc->calls[j];
		uint32_t i;
		if (!c->id)
			continue;
		for (i = (uint32_t)c->id & (cap - 1); n[i].id; i = (i + 1) & (cap - 1))
			;
		n[i] = *c;
	}
	free(rpc->calls);
	rpc->calls = n;
	rpc->callcap = cap;
	return 0;
}

/* ---- completion callbacks (COMPLETIONS above) ------------------------------------------- */

static void recv_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void sreq_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void send_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void aux_cb(rcp_req *rq, const struct rcp_status *st, void *user);
static void done(struct rcp_rpc_req *r, int status);

static void blist_push(struct blist *l, struct rbuf *b)
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

static void blist_del(struct blist *l, struct rbuf *b)
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

static struct rbuf *rbuf_get(rcp_rpc *rpc)
{
	struct rbuf *b = rpc->freerb;
	if (b) {
		rpc->freerb = b->next;
		b->refs = 1;
		b->canceling = 0;
		return b;
	}
	b = calloc(1, sizeof *b);
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

static void rbuf_put(rcp_rpc *rpc, struct rbuf *b)
{
	b->rq = NULL;
	b->next = rpc->freerb;
	rpc->freerb = b;
}

/* Drops one reference of a request buffer shared by the handles of a
 * batch (BATCHES above). */
static void rbuf_unref(rcp_rpc *rpc, struct rbuf *b)
{
	if (--b->refs == 0)
		rbuf_put(rpc, b);
}

static int grow_buf(unsigned char **buf, size_t *cap, size_t need)
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
static int send_msg(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req_cb cb,
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

static struct aux *aux_add(rcp_rpc *rpc, rcp_req *rq, int kind, void *buf, void *owner)
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
	rcp_req_set_cb(rq, aux_cb, a);
	return a;
}

static void aux_del(rcp_rpc *rpc, struct aux *a)
{
	if (a->prev)
		a->prev->next = a->next;
	else
		rpc->aux = a->next;
	if (a->next)
		a->next->prev = a->prev;
}

/* Sends the messages queued on Q as one rcp message (BATCHES above).  If
 * a batch of requests cannot be sent, its calls fail with the error (a
 * batch of responses is lost as a lost message would be: its calls time
 * out or fail with the channel). */
static void flush_q(rcp_rpc *rpc, struct outq *q)
{
	struct peer *p = q->peer;
	rcp_req *held = NULL;
	uint32_t gen;
	int rc;
	if (!q->n)
		return;
	gen = ++q->gen;
	if (q->n > 1)
		rpc->st.batched_out += q->n;
	rc = p && p->failed ? p->failed
	                    : send_msg(q->ch, q->tag, q->buf, q->len, aux_cb, NULL, &held);
	q->len = 0;
	q->n = 0;
	if (held) {
		/* rcp still reads the batch: the buffer goes with the send */
		(void)aux_add(rpc, held, AUX_SEND_FREE, q->buf, NULL); /* else leaked */
		q->buf = NULL;
		q->cap = 0;
	}
	if (rc && p)
		for (struct rcp_rpc_req *r = p->live, *nx; r; r = nx) {
			nx = r->pnext;
			if (r->qgen == gen) {
				if (p->expect)
					p->expect--;
				done(r, rc);
			}
		}
}

static void flush_all(rcp_rpc *rpc)
{
	while (rpc->dirty) {
		struct outq *q = rpc->dirty;
		rpc->dirty = q->next;
		q->dirty = 0;
		flush_q(rpc, q);
	}
}

/* Appends message MSG (LEN bytes, header included) to Q; its batch number
 * in *GEN (NULL: not wanted).  The batch goes out first if MSG would not
 * fit. */
static int queue_msg(rcp_rpc *rpc, struct outq *q, const void *msg, size_t len, uint32_t *gen)
{
	if (q->n && q->len + len > rpc->msg_max)
		flush_q(rpc, q);
	if (grow_buf(&q->buf, &q->cap, q->len + len))
		return RCP_ENOMEM;
	memcpy(q->buf + q->len, msg, len);
	q->len += len;
	if (!q->n++ && !q->dirty) {
		q->dirty = 1;
		q->next = rpc->dirty;
		rpc->dirty = q;
	}
	if (gen)
		*gen = q->gen + 1;
	return 0;
}

struct rbuf *rpci_rbuf_get(rcp_rpc *rpc)
{
	return rbuf_get(rpc);
}

void rpci_rbuf_put(rcp_rpc *rpc, struct rbuf *b)
{
	rbuf_put(rpc, b);
}

/* ---- peers ----------------------------------------------------------------------------- */

static uint32_t ptr_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 17;
	x *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(x >> 32);
}

static struct peer *peer_find(rcp_rpc *rpc, rcp_chan *ch)
{
	if (!rpc->peercap)
		return NULL;
	for (uint32_t i = ptr_hash(ch) & (rpc->peercap - 1);; i = (i + 1) & (rpc->peercap - 1)) {
		if (!rpc->peers[i])
			return NULL;
		if (rpc->peers[i]->ch == ch)
			return rpc->peers[i];
	}
}

static struct peer *peer_get(rcp_rpc *rpc, rcp_chan *ch)
{
	struct peer *p = peer_find(rpc, ch);
	uint32_t i;
	if (p)
		return p;
	if ((rpc->npeers + 1) * 2 > rpc->peercap) {
		uint32_t cap = rpc->peercap ? rpc->peercap * 2 : 16;
		struct peer **n = calloc(cap, sizeof *n);
		if (!n)
			return NULL;
		for (uint32_t j = 0; j < rpc->peercap; j++) {
			if (!rpc->peers[j])
				continue;
			for (i = ptr_hash(rpc->peers[j]->ch) & (cap - 1); n[i];
			     i = (i + 1) & (cap - 1))
				;
			n[i] = rpc->peers[j];
		}
		free(rpc->peers);
		rpc->peers = n;
		rpc->peercap = cap;
	}
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->ch = ch;
	p->rq.peer = p;
	p->rq.ch = ch;
	p->rq.tag = TAG_REQ;
	for (i = ptr_hash(ch) & (rpc->peercap - 1); rpc->peers[i]; i = (i + 1) & (rpc->peercap - 1))
		;
	rpc->peers[i] = p;
	rpc->npeers++;
	return p;
}

/* ---- contexts --------------------------------------------------------------------------- */

int rcp_rpc_create(rcp_ep *ep, const struct rcp_rpc_config *cfg, rcp_rpc **out)
{
	rcp_rpc *rpc;
	struct rcp_nic_info info;
	int64_t mm;

	if (!ep || !out)
		return RCP_EINVAL;
	*out = NULL;
	rcpi_env_init();
	rpc = calloc(1, sizeof *rpc);
	if (!rpc)
		return RCP_ENOMEM;
	rpc->ep = ep;
	rpc->bulk = cfg ? cfg->bulk : NULL;
	if (rpc->bulk && rcp_bulk_ctx_ep(rpc->bulk) != ep) {
		free(rpc);
		return RCP_EINVAL;
	}
	rpc->flags = cfg ? cfg->flags : 0;
	{
		int mode;
		int64_t spin;
		rcpi_wait_policy(&mode, &spin); /* RCP_WAIT forces it */
		if (mode == RCPI_WAIT_SPIN)
			rpc->flags = (rpc->flags & ~RCP_RPC_SLEEP) | RCP_RPC_SPIN;
		else if (mode == RCPI_WAIT_SLEEP)
			rpc->flags = (rpc->flags & ~RCP_RPC_SPIN) | RCP_RPC_SLEEP;
	}
	{
		const char *m = rcpi_env_str("RCP_RPC_MODE");
		if (m && !strcmp(m, "fetch"))
			rpc->flags |= RCP_RPC_FETCH;
		else if (m && !strcmp(m, "reply"))
			rpc->flags &= ~RCP_RPC_FETCH;
	}
	rpc->def_timeout = cfg && cfg->timeout_ns ? cfg->timeout_ns
	                                          : rcpi_env_int("RCP_RPC_TIMEOUT_MS", 0) * 1000000;
	if (rpc->def_timeout == 0)
		rpc->def_timeout = -1;
	rpc->nrecvs = cfg && cfg->recvs > 0 ? cfg->recvs : (int)rcpi_env_int("RCP_RPC_RECVS", 64);
	if (rpc->nrecvs < 1)
		rpc->nrecvs = 1;
	/* One message must stay one frame (else a posted receive on a channel
	 * larger than a frame would turn into a READY promise). */
	mm = rcpi_env_int("RCP_RPC_MSG_MAX", 16384);
	rcp_nic_query(rcp_ep_nic(ep), &info);
	if (mm > (int64_t)info.mtu - 128)
		mm = (int64_t)info.mtu - 128;
	if (mm < 512)
		mm = 512;
	rpc->msg_max = (size_t)mm;
	rpc->donetail = &rpc->doneq;
	rpc->batch = rcpi_env_int("RCP_RPC_BATCH", 1) != 0;
	for (int i = 0; i < RSQ; i++)
		rpc->sq[i].tag = TAG_RESP;
	if (rfp_init(rpc)) {
		free(rpc);
		return RCP_ENOMEM;
	}
	{
		struct rcp_wait_src src = {
		    .fd = -1, .progress = wait_look, .arm = wait_arm, .arg = rpc};
		int id = rcp_ep_wait_add(ep, &src);
		if (id < 0) {
			rfp_fini(rpc);
			free(rpc);
			return id;
		}
		rpc->wait_id = id;
	}
	*out = rpc;
	return 0;
}

rcp_ep *rcp_rpc_ep(const rcp_rpc *rpc)
{
	return rpc ? rpc->ep : NULL;
}

int rcp_rpc_get_stats(const rcp_rpc *rpc, struct rcp_rpc_stats *st)
{
	if (!rpc || !st)
		return RCP_EINVAL;
	*st = rpc->st;
	return 0;
}

int rcp_rpc_register(rcp_rpc *rpc, const char *name, rcp_proc_fn in_proc, rcp_proc_fn out_proc,
                     uint64_t *id)
{
	uint64_t h;
	struct call *c;
	uint32_t i;

	if (!rpc || !name || !*name)
		return RCP_EINVAL;
	h = rcp_rpc_id(name);
	c = call_find(rpc, h);
	if (c) {
		if (strcmp(c->name, name) || c->in_proc != in_proc || c->out_proc != out_proc)
			return RCP_EADDRINUSE;
		if (id)
			*id = h;
		return 0;
	}
	if ((rpc->ncalls + 1) * 2 > rpc->callcap && call_grow(rpc))
		return RCP_ENOMEM;
	for (i = (uint32_t)h & (rpc->callcap - 1); rpc->calls[i].id;
	     i = (i + 1) & (rpc->callcap - 1))
		;
	c = &rpc->calls[i];
	c->name = strdup(name);
	if (!c->name)
		return RCP_ENOMEM;
	c->id = h;
	c->in_proc = in_proc;
	c->out_proc = out_proc;
	c->handler = NULL;
	rpc->ncalls++;
	if (id)
		*id = h;
	return 0;
}

/* Posts one request receive on the server ring. */
static int srv_post(rcp_rpc *rpc)
{
	struct rbuf *b = rbuf_get(rpc);
	int rc;
	if (!b)
		return RCP_ENOMEM;
	rc =
	    rcp_irecv_cb(rpc->ep, RCP_ANY_CHAN, TAG_REQ, b->data, rpc->msg_max, recv_cb, b, &b->rq);
	if (rc) {
		rbuf_put(rpc, b);
		return rc;
	}
	b->peer = NULL;
	blist_push(&rpc->srv, b);
	return 0;
}

int rcp_rpc_set_handler(rcp_rpc *rpc, uint64_t id, rcp_rpc_handler fn, void *arg)
{
	struct call *c;
	if (!rpc)
		return RCP_EINVAL;
	c = call_find(rpc, id);
	if (!c)
		return RCP_ENOENT;
	c->handler = fn;
	c->harg = arg;
	if (fn && !rpc->serving) {
		rpc->serving = 1;
		for (int i = 0; i < rpc->nrecvs; i++) {
			int rc = srv_post(rpc);
			if (rc)
				return rc;
		}
		rfp_serve(rpc);
	}
	return 0;
}

/* ---- deadlines: a binary min-heap of pending requests ------------------------------------ */

static void heap_set(rcp_rpc *rpc, uint32_t i, struct rcp_rpc_req *r)
{
	rpc->heap[i] = r;
	r->hidx = i + 1;
}

static void heap_up(rcp_rpc *rpc, uint32_t i)
{
	struct rcp_rpc_req *r = rpc->heap[i];
	while (i > 0 && rpc->heap[(i - 1) / 2]->deadline > r->deadline) {
		heap_set(rpc, i, rpc->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(rpc, i, r);
}

static void heap_down(rcp_rpc *rpc, uint32_t i)
{
	struct rcp_rpc_req *r = rpc->heap[i];
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= rpc->ntimed)
			break;
		if (c + 1 < rpc->ntimed && rpc->heap[c + 1]->deadline < rpc->heap[c]->deadline)
			c++;
		if (rpc->heap[c]->deadline >= r->deadline)
			break;
		heap_set(rpc, i, rpc->heap[c]);
		i = c;
	}
	heap_set(rpc, i, r);
}

static int timer_add(rcp_rpc *rpc, struct rcp_rpc_req *r)
{
	if (rpc->ntimed == rpc->heapcap) {
		uint32_t cap = rpc->heapcap ? rpc->heapcap * 2 : 64;
		struct rcp_rpc_req **n = realloc(rpc->heap, cap * sizeof *n);
		if (!n)
			return RCP_ENOMEM;
		rpc->heap = n;
		rpc->heapcap = cap;
	}
	rpc->heap[rpc->ntimed++] = r;
	heap_up(rpc, rpc->ntimed - 1);
	return 0;
}

static void timer_del(rcp_rpc *rpc, struct rcp_rpc_req *r)
{
	uint32_t i = r->hidx - 1;
	r->hidx = 0;
	r->deadline = 0;
	if (i != --rpc->ntimed) {
		heap_set(rpc, i, rpc->heap[rpc->ntimed]);
		heap_down(rpc, i);
		heap_up(rpc, i);
	}
}

/* ---- completing client requests ------------------------------------------------------- */

static void live_del(struct rcp_rpc_req *r)
{
	struct peer *p = r->peer;
	if (r->pprev)
		r->pprev->pnext = r->pnext;
	else if (p->live == r)
		p->live = r->pnext;
	if (r->pnext)
		r->pnext->pprev = r->pprev;
	r->pnext = r->pprev = NULL;
}

/* The one place a request completes. */
static void done(struct rcp_rpc_req *r, int status)
{
	rcp_rpc *rpc = r->rpc;
	if (r->state != Q_PENDING && r->state != Q_OVF_WAIT)
		return;
	live_del(r);
	if (r->rfp_slot) {
		rfp_cli_abandon(rpc, r->peer, r->rfp_slot);
		r->rfp_slot = 0;
	}
	if (r->hidx)
		timer_del(rpc, r);
	if (r->ovf_aux) {
		/* Overflowed response not yet in: rcp keeps its buffer until
		 * the receive completes; it is freed then (orphan). */
		if (rcp_cancel(r->ovf_aux->rq) == 0)
			(void)0;
		r->ovf_aux->kind = AUX_ORPHAN;
		r->ovf_aux = NULL;
	}
	r->state = Q_DONE;
	r->status = status;
	if (status == 0)
		rpc->st.completed_ok++;
	else {
		rpc->st.failed++;
		if (status == RCP_ETIMEDOUT)
			rpc->st.timeouts++;
		else if (status == RCP_ECANCELED)
			rpc->st.canceled++;
		else if (status == RCP_EPEER)
			rpc->st.peer_errors++;
	}
	r->gen++; /* later responses with the old cookie are stale */
	if (!r->cb)
		rpc->events++; /* callbacks count when they run */
	if (r->cb) {
		r->dnext = NULL;
		*rpc->donetail = r;
		rpc->donetail = &r->dnext;
	}
}

static void req_release(struct rcp_rpc_req *r)
{
	rcp_rpc *rpc = r->rpc;
	if (r->resp) {
		rbuf_unref(rpc, r->resp);
		r->resp = NULL;
	}
	free(r->ovf_resp);
	r->ovf_resp = NULL;
	r->state = Q_FREE;
	r->dnext = rpc->freereqs;
	rpc->freereqs = r;
}

/* Runs queued callbacks.  Returns how many. */
static int run_callbacks(rcp_rpc *rpc)
{
	int n = 0;
	while (rpc->doneq) {
		struct rcp_rpc_req *r = rpc->doneq;
		rpc->doneq = r->dnext;
		if (!rpc->doneq)
			rpc->donetail = &rpc->doneq;
		r->cb(r, r->status, r->out, r->arg);
		req_release(r);
		rpc->events++;
		n++;
	}
	return n;
}

static void fail_peer(rcp_rpc *rpc, struct peer *p, int err)
{
	(void)rpc;
	p->failed = err ? err : RCP_EPEER;
	p->rq.len = p->rq.n = 0; /* the queued calls fail below, unsent */
	while (p->live)
		done(p->live, err == RCP_ECLOSED ? RCP_ECLOSED : RCP_EPEER);
	p->expect = 0;
}

/* Decodes a response payload into the request's output. */
void rpci_finish_resp(struct rcp_rpc_req *r, int status, const unsigned char *pl, size_t len)
{
	if (!status && r->call->out_proc && r->out)
		status = rpci_proc_decode(r->call->out_proc, r->out, pl, len, r->rpc->bulk);
	else if (!status && len)
		status = RCP_EPROTO;
	if (status == RCP_EPROTO)
		r->rpc->st.bad_msgs++;
	done(r, status);
}

static void bswap_hdr(struct rpc_hdr *h)
{
	h->order = __builtin_bswap32(h->order);
	h->flags = __builtin_bswap16(h->flags);
	h->status = (int32_t)__builtin_bswap32((uint32_t)h->status);
	h->len = __builtin_bswap32(h->len);
	h->id = __builtin_bswap64(h->id);
	h->cookie = __builtin_bswap64(h->cookie);
	h->aux = __builtin_bswap64(h->aux);
}

/* Checks the header at OFF of a received message of LEN bytes (one
 * message or a batch: BATCHES above) into *H, without counting: 0 good,
 * 1 foreign order (swapped; such a call is answered or failed with
 * RCP_ENOTSUP), -1 bad.  Every header must lie wholly inside the message,
 * its payload too; an overflow header (F_OVF, no payload) only alone in
 * its message. */
static int sub_hdr(const unsigned char *msg, size_t len, size_t off, int kind, struct rpc_hdr *h)
{
	int swapped = 0;
	if (len - off < HDR_LEN)
		return -1;
	memcpy(h, msg + off, HDR_LEN);
	if (h->order != RPC_ORDER) {
		if (h->order != __builtin_bswap32(RPC_ORDER))
			return -1;
		bswap_hdr(h);
		swapped = 1;
	}
	if (h->kind != kind || (!swapped && h->version != RPC_VERSION))
		return -1;
	if ((size_t)h->len > len - off - HDR_LEN)
		return -1;
	if ((h->flags & F_OVF) && (h->len || off || len != HDR_LEN))
		return -1;
	return swapped;
}

/* Checks a whole received message of KIND before anything in it is used:
 * 0 and the number of messages in *N, or -1 (bad_msgs counted once). */
static int msg_check(rcp_rpc *rpc, const unsigned char *msg, const struct rcp_status *st, int kind,
                     uint32_t *n)
{
	struct rpc_hdr h;
	*n = 0;
	if (st->len < HDR_LEN || st->len > rpc->msg_max)
		goto bad;
	for (size_t off = 0; off < st->len; off += HDR_LEN + h.len, ++*n)
		if (sub_hdr(msg, st->len, off, kind, &h) < 0)
			goto bad;
	return 0;
bad:
	rpc->st.bad_msgs++;
	return -1;
}

static struct rcp_rpc_req *req_by_cookie(rcp_rpc *rpc, uint64_t cookie)
{
	uint32_t idx = (uint32_t)(cookie & COOKIE_IDX);
	struct rcp_rpc_req *r;
	if (idx >= rpc->nreqs)
		return NULL;
	r = rpc->reqs[idx];
	if ((r->state != Q_PENDING && r->state != Q_OVF_WAIT) ||
	    (r->gen & COOKIE_GEN) != (uint32_t)(cookie >> 24))
		return NULL;
	return r;
}

/* Reposts response receives on P up to its expectations.  A batch of
 * responses uses one receive for several calls, so receives can outnumber
 * the expectations for a while: the surplus stays posted while calls are
 * pending (the next calls use it) and is canceled once none is, so an idle
 * channel has no receive posted (rcp would ping its peer for it). */
static void peer_repost(rcp_rpc *rpc, struct peer *p)
{
	uint32_t want = p->expect + p->watch;
	while (!p->failed && p->posted.n - p->trimming < want) {
		struct rbuf *b = rbuf_get(rpc);
		if (!b)
			return;
		if (rcp_irecv_cb(rpc->ep, p->ch, TAG_RESP, b->data, rpc->msg_max, recv_cb, b,
		                 &b->rq)) {
			rbuf_put(rpc, b);
			return;
		}
		b->peer = p;
		blist_push(&p->posted, b);
	}
	if (!want && p->posted.n > p->trimming)
		for (struct rbuf *b = p->posted.tail; b; b = b->lprev)
			if (!b->canceling && rcp_cancel(b->rq) == 0) {
				b->canceling = 1;
				p->trimming++;
			}
}

/* One response of a response message (header checked, CHK from sub_hdr).
 * B stays referenced by the call whose output may point into it. */
static void on_response_one(rcp_rpc *rpc, struct peer *p, struct rbuf *b, const struct rpc_hdr *h,
                            size_t off, int chk)
{
	struct rcp_rpc_req *r = req_by_cookie(rpc, h->cookie);

	if (p->expect)
		p->expect--;
	if (!r || r->peer != p) {
		rpc->st.stale_responses++;
		return;
	}
	rfp_cli_note_reply(rpc, p->rfp, r->call->id, h->aux);
	if (chk == 1) {
		rpc->st.foreign_order++;
		done(r, RCP_ENOTSUP);
	} else if (h->flags & F_OVF) {
		/* The payload follows on TAG_OVF(cookie). */
		if (h->status || h->aux > (uint64_t)SIZE_MAX / 2) {
			done(r, h->status ? h->status : RCP_EPROTO);
		} else {
			rcp_req *rq;
			unsigned char *buf = malloc(h->aux ? h->aux : 1);
			if (!buf ||
			    rcp_irecv(rpc->ep, p->ch, TAG_OVF(h->cookie), buf, h->aux, &rq)) {
				free(buf);
				done(r, RCP_ENOMEM);
			} else {
				r->ovf_aux = aux_add(rpc, rq, AUX_RECV_REQ, buf, r);
				if (!r->ovf_aux) {
					/* cannot track it: let rcp fail it */
					done(r, RCP_ENOMEM);
				} else {
					r->ovf_aux->gen = r->gen;
					r->state = Q_OVF_WAIT;
					p->expect++; /* keep the channel watched meanwhile */
				}
			}
		}
	} else {
		b->refs++;
		r->resp = b;
		rpci_finish_resp(r, h->status, b->data + off + HDR_LEN, h->len);
	}
}

/* A response receive completed on P: one response or a batch. */
static void on_response(rcp_rpc *rpc, struct peer *p, struct rbuf *b, const struct rcp_status *st)
{
	struct rpc_hdr h;
	uint32_t n;

	if (b->canceling)
		p->trimming--;
	if (st->error == RCP_EPEER || st->error == RCP_ECLOSED || st->error == RCP_ECANCELED) {
		rbuf_put(rpc, b);
		if (st->error != RCP_ECANCELED)
			fail_peer(rpc, p, st->error);
		return;
	}
	if (st->error || msg_check(rpc, b->data, st, K_RESP, &n)) {
		/* dropped whole; no call's response is in it as far as we
		 * know, so every call keeps its receive (reposted) */
		if (st->error)
			rpc->st.bad_msgs++;
		rbuf_put(rpc, b);
		peer_repost(rpc, p);
		return;
	}
	if (n > 1)
		rpc->st.batched_in += n;
	for (size_t off = 0; off < st->len; off += HDR_LEN + h.len)
		on_response_one(rpc, p, b, &h, off, sub_hdr(b->data, st->len, off, K_RESP, &h));
	rbuf_unref(rpc, b); /* ours (rbuf_get's) */
	peer_repost(rpc, p);
}

void rpci_peer_repost(rcp_rpc *rpc, struct peer *p)
{
	peer_repost(rpc, p);
}

void rpci_done(struct rcp_rpc_req *r, int status)
{
	done(r, status);
}

/* ---- server ------------------------------------------------------------------------------ */

static struct rcp_rpc_handle *handle_get(rcp_rpc *rpc)
{
	struct rcp_rpc_handle *h = rpc->freeh;
	if (h) {
		rpc->freeh = h->next;
		h->rb = NULL;
		h->ovf_in = NULL;
		h->sreq = NULL;
		h->responded = 0;
		h->rfp_slot = 0;
		return h;
	}
	h = calloc(1, sizeof *h);
	if (h)
		h->rpc = rpc;
	return h;
}

static void handle_put(rcp_rpc *rpc, struct rcp_rpc_handle *h)
{
	if (h->rb) {
		rbuf_unref(rpc, h->rb);
		h->rb = NULL;
	}
	free(h->ovf_in);
	h->ovf_in = NULL;
	h->next = rpc->freeh;
	rpc->freeh = h;
}

/* Sends a header-only response with STATUS (unknown rpc, bad order...). */
static void respond_status(rcp_rpc *rpc, rcp_chan *ch, const struct rpc_hdr *req, int status)
{
	struct rcp_rpc_handle *h = handle_get(rpc);
	if (!h)
		return;
	h->ch = ch;
	h->cookie = req->cookie;
	h->call = NULL;
	h->t0 = 0;
	h->in = NULL;
	h->inlen = 0;
	rpc->st.handled++;
	rcp_rpc_respond(h, NULL, status);
}

/* Runs the handler of H (input complete). */
static void dispatch(rcp_rpc *rpc, struct rcp_rpc_handle *h)
{
	rpc->st.handled++;
	rpc->events++;
	h->call->handler(h, h->call->harg);
}

void rpci_dispatch(rcp_rpc *rpc, rcp_chan *ch, uint64_t id, uint64_t cookie, const void *in,
                   size_t inlen, uint32_t rfp_cli, uint32_t rfp_slot)
{
	struct call *c = call_find(rpc, id);
	int known = c && c->handler;
	struct rcp_rpc_handle *h = handle_get(rpc);
	if (!h)
		return; /* the client times out */
	h->call = known ? c : NULL;
	h->ch = ch;
	h->cookie = cookie;
	h->t0 = known ? now_ns() : 0;
	h->in = known ? in : NULL;
	h->inlen = known ? inlen : 0;
	h->rfp_cli = rfp_cli;
	h->rfp_slot = rfp_slot;
	if (!known) {
		rpc->st.handled++;
		rcp_rpc_respond(h, NULL, RCP_ENOENT);
		return;
	}
	dispatch(rpc, h);
}

/* One request of a request message (header checked): a handle for it, the
 * handler run (or the error answered).  B stays referenced by the handle
 * whose input lies in it. */
static void on_request_one(rcp_rpc *rpc, struct rbuf *b, rcp_chan *ch, const struct rpc_hdr *hd,
                           size_t off, int chk)
{
	struct call *c;
	struct rcp_rpc_handle *h;

	if (chk == 1) {
		rpc->st.foreign_order++;
		respond_status(rpc, ch, hd, RCP_ENOTSUP);
		return;
	}
	c = call_find(rpc, hd->id);
	if (!c || !c->handler) {
		if (hd->flags & F_OVF) {
			/* Drain the overflow: the client's send must complete. */
			struct rcp_rpc_handle *d = handle_get(rpc);
			rcp_req *rq;
			unsigned char *buf =
			    hd->aux <= (1ull << 32) ? malloc(hd->aux ? hd->aux : 1) : NULL;
			int posted =
			    d && buf &&
			    !rcp_irecv(rpc->ep, ch, TAG_OVF(hd->cookie), buf, hd->aux, &rq);
			if (posted && aux_add(rpc, rq, AUX_ORPHAN, buf, NULL)) {
				handle_put(rpc, d);
				respond_status(rpc, ch, hd, RCP_ENOENT);
				return;
			}
			if (!posted)
				free(buf); /* else rcp may still write it: leaked (aux_add) */
			if (d)
				handle_put(rpc, d);
		}
		respond_status(rpc, ch, hd, RCP_ENOENT);
		return;
	}
	h = handle_get(rpc);
	if (!h)
		return; /* the client times out */
	h->call = c;
	h->ch = ch;
	h->cookie = hd->cookie;
	h->t0 = now_ns();
	if (hd->flags & F_OVF) {
		rcp_req *rq;
		if (hd->aux > ((uint64_t)1 << 32) || !(h->ovf_in = malloc(hd->aux ? hd->aux : 1)) ||
		    rcp_irecv(rpc->ep, ch, TAG_OVF(hd->cookie), h->ovf_in, hd->aux, &rq) ||
		    (!aux_add(rpc, rq, AUX_RECV_HANDLE, h->ovf_in, h) && !(h->ovf_in = NULL))) {
			/* (an untracked receive keeps its buffer: ovf_in NULL) */
			rpc->st.bad_msgs++;
			rcp_rpc_respond(h, NULL, RCP_ENOMEM);
			return;
		}
		h->in = h->ovf_in;
		h->inlen = hd->aux;
		rpc->st.overflow_in++;
		return; /* dispatched when the overflow is in */
	}
	b->refs++;
	h->rb = b;
	h->in = b->data + off + HDR_LEN;
	h->inlen = hd->len;
	dispatch(rpc, h);
}

/* A request receive completed: one request or a batch of them (BATCHES
 * above).  The whole message is checked before any request in it runs: a
 * bad header anywhere drops it all (counted once in bad_msgs). */
static void on_request(rcp_rpc *rpc, struct rbuf *b, const struct rcp_status *st)
{
	struct rpc_hdr hd;
	uint32_t n;

	if (st->error == RCP_ECANCELED || st->error == RCP_ECLOSED) {
		rbuf_put(rpc, b);
		return;
	}
	if ((st->error && st->error != RCP_ETRUNC) || msg_check(rpc, b->data, st, K_REQ, &n)) {
		if (st->error && st->error != RCP_ETRUNC)
			rpc->st.bad_msgs++;
		rbuf_put(rpc, b);
		return;
	}
	if (n > 1)
		rpc->st.batched_in += n;
	/* b->refs is ours (rbuf_get's): handlers may respond, and drop
	 * theirs, at once */
	for (size_t off = 0; off < st->len; off += HDR_LEN + hd.len)
		on_request_one(rpc, b, st->chan, &hd, off,
		               sub_hdr(b->data, st->len, off, K_REQ, &hd));
	rbuf_unref(rpc, b);
}

int rcp_rpc_get_input(rcp_rpc_handle *h, void *in)
{
	int rc;
	if (!h || !h->call || h->responded)
		return RCP_EINVAL;
	if (!h->call->in_proc)
		return h->inlen ? RCP_EPROTO : 0;
	if (!in)
		return RCP_EINVAL;
	rc = rpci_proc_decode(h->call->in_proc, in, h->in, h->inlen, h->rpc->bulk);
	if (rc)
		h->rpc->st.bad_msgs++;
	return rc;
}

uint64_t rcp_rpc_handle_id(const rcp_rpc_handle *h)
{
	return h && h->call ? h->call->id : 0;
}

rcp_chan *rcp_rpc_handle_chan(const rcp_rpc_handle *h)
{
	return h ? h->ch : NULL;
}

int rcp_rpc_respond(rcp_rpc_handle *h, const void *out, int status)
{
	rcp_rpc *rpc;
	struct rpc_hdr hd;
	size_t used = 0, len;
	int rc = 0;
	unsigned char *ovf = NULL;

	if (!h || h->responded || status > 0)
		return RCP_EINVAL;
	rpc = h->rpc;
	h->responded = 1;
	hd.order = RPC_ORDER;
	hd.kind = K_RESP;
	hd.version = RPC_VERSION;
	hd.flags = 0;
	hd.id = h->call ? h->call->id : 0;
	hd.cookie = h->cookie;
	hd.aux = h->t0 ? now_ns() - h->t0 : 0;
	if (!status && h->call && h->call->out_proc) {
		if (grow_buf(&h->sbuf, &h->scap, HDR_LEN + 64))
			goto nomem;
		rc = rcp_proc_encode(h->call->out_proc, out, h->sbuf + HDR_LEN,
		                     (h->scap < rpc->msg_max ? h->scap : rpc->msg_max) - HDR_LEN,
		                     &used);
		if (rc == RCP_ERANGE) {
			size_t need = rcp_proc_size(h->call->out_proc, out, &rc);
			if (!rc && HDR_LEN + need <= rpc->msg_max) {
				if (grow_buf(&h->sbuf, &h->scap, HDR_LEN + need))
					goto nomem;
				rc = rcp_proc_encode(h->call->out_proc, out, h->sbuf + HDR_LEN,
				                     h->scap - HDR_LEN, &used);
			} else if (!rc) {
				ovf = malloc(need ? need : 1);
				if (!ovf)
					goto nomem;
				rc = rcp_proc_encode(h->call->out_proc, out, ovf, need, &used);
			}
		}
		if (rc) {
			status = RCP_EPROTO;
			used = 0;
			free(ovf);
			ovf = NULL;
		}
	} else if (grow_buf(&h->sbuf, &h->scap, HDR_LEN)) {
		goto nomem;
	}
	hd.status = status;
	hd.len = ovf ? 0 : (uint32_t)used;
	if (ovf) {
		hd.flags = F_OVF;
		hd.aux = used;
	}
	len = HDR_LEN + hd.len;
	memcpy(h->sbuf, &hd, HDR_LEN);
	if (h->rfp_slot && !ovf) {
		hd.aux = h->t0 ? now_ns() - h->t0 : 0;
		if (rfp_srv_respond(rpc->rfps, h->rfp_cli, h->rfp_slot - 1, &hd, h->sbuf + HDR_LEN,
		                    hd.len)) {
			rpc->st.responded++;
			handle_put(rpc, h);
			return 0;
		}
		memcpy(h->sbuf, &hd, HDR_LEN);
	}
	if (rpc->depth && rpc->batch && !ovf && !h->rfp_slot) {
		/* answered inside a progress round: batched (BATCHES above) */
		struct outq *q = &rpc->sq[ptr_hash(h->ch) & (RSQ - 1)];
		if (q->n && q->ch != h->ch)
			flush_q(rpc, q);
		q->ch = h->ch;
		if (!queue_msg(rpc, q, h->sbuf, len, NULL)) {
			rpc->st.responded++;
			handle_put(rpc, h);
			return 0;
		}
	}
	if (h->rb) {
		/* The input is no longer needed: give the buffer back now. */
		rbuf_unref(rpc, h->rb);
		h->rb = NULL;
	}
	rc = send_msg(h->ch, TAG_RESP, h->sbuf, len, send_cb, h, &h->sreq);
	if (!rc)
		rpc->st.responded++;
	if (h->rfp_slot)
		rfp_srv_replied(rpc->rfps, h->rfp_cli, h->rfp_slot - 1);
	if (!rc && ovf) {
		rcp_req *rq;
		int src = rcp_isend(h->ch, TAG_OVF(h->cookie), ovf, used, &rq);
		if (src || !aux_add(rpc, rq, AUX_SEND_FREE, ovf, NULL)) {
			if (src)
				free(ovf); /* the channel failed; else leaked (aux_add) */
			rc = src ? RCP_EPEER : RCP_ENOMEM;
		}
		rpc->st.overflow_out++;
	} else {
		free(ovf);
	}
	if (!h->sreq) {
		handle_put(rpc, h); /* sent (or failed): sbuf is free again */
		return rc;
	}
	/* rcp still reads sbuf: the handle comes back by send_cb. */
	h->sprev = NULL;
	h->next = rpc->sending;
	if (rpc->sending)
		rpc->sending->sprev = h;
	rpc->sending = h;
	return rc;
nomem:
	handle_put(rpc, h);
	return RCP_ENOMEM;
}

/* ---- client ------------------------------------------------------------------------------- */

static struct rcp_rpc_req *req_get(rcp_rpc *rpc)
{
	struct rcp_rpc_req *r = rpc->freereqs;
	if (r) {
		rpc->freereqs = r->dnext;
		return r;
	}
	if (rpc->nreqs > COOKIE_IDX)
		return NULL;
	if (rpc->nreqs == rpc->reqcap) {
		uint32_t cap = rpc->reqcap ? rpc->reqcap * 2 : 64;
		struct rcp_rpc_req **n = realloc(rpc->reqs, cap * sizeof *n);
		if (!n)
			return NULL;
		rpc->reqs = n;
		rpc->reqcap = cap;
	}
	r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->rpc = rpc;
	r->idx = rpc->nreqs;
	rpc->reqs[rpc->nreqs++] = r;
	return r;
}

int rcp_rpc_forward(rcp_rpc *rpc, rcp_chan *ch, uint64_t id, const void *in, void *out,
                    int64_t timeout_ns, rcp_rpc_cb cb, void *arg, rcp_rpc_req **req)
{
	struct call *c;
	struct peer *p;
	struct rcp_rpc_req *r;
	struct rpc_hdr hd;
	size_t used = 0;
	unsigned char *ovf = NULL;
	int rc;

	if (!rpc || !ch || (!cb && !req))
		return RCP_EINVAL;
	if (req)
		*req = NULL;
	c = call_find(rpc, id);
	if (!c)
		return RCP_ENOENT;
	p = peer_get(rpc, ch);
	if (!p)
		return RCP_ENOMEM;
	if (p->failed)
		return p->failed;
	r = req_get(rpc);
	if (!r)
		return RCP_ENOMEM;
	r->call = c;
	r->out = out;
	r->cb = cb;
	r->arg = arg;
	r->peer = p;
	r->status = 0;
	if (r->sreq) {
		/* This slot's last request send is still with rcp (its call
		 * ended first: timeout, cancel): rcp may still read the
		 * buffer, so it goes with the send and is freed after it. */
		if (!aux_add(rpc, r->sreq, AUX_SEND_FREE, r->sbuf, NULL)) {
			rc = RCP_ENOMEM;
			goto fail;
		}
		r->sbuf = NULL;
		r->scap = 0;
	}
	r->sreq = NULL;
	r->rfp_slot = 0;
	r->qgen = 0;
	hd.order = RPC_ORDER;
	hd.kind = K_REQ;
	hd.version = RPC_VERSION;
	hd.flags = 0;
	hd.status = 0;
	hd.id = id;
	hd.cookie = ((uint64_t)(r->gen & COOKIE_GEN) << 24) | r->idx;
	hd.aux = 0;
	if (c->in_proc) {
		if (r->scap < HDR_LEN + 64 && grow_buf(&r->sbuf, &r->scap, HDR_LEN + 64)) {
			rc = RCP_ENOMEM;
			goto fail;
		}
		rc = rcp_proc_encode(c->in_proc, in, r->sbuf + HDR_LEN,
		                     (r->scap < rpc->msg_max ? r->scap : rpc->msg_max) - HDR_LEN,
		                     &used);
		if (rc == RCP_ERANGE) {
			size_t need = rcp_proc_size(c->in_proc, in, &rc);
			if (rc)
				;
			else if (HDR_LEN + need <= rpc->msg_max) {
				rc = grow_buf(&r->sbuf, &r->scap, HDR_LEN + need);
				if (!rc)
					rc = rcp_proc_encode(c->in_proc, in, r->sbuf + HDR_LEN,
					                     r->scap - HDR_LEN, &used);
			} else if (!(ovf = malloc(need ? need : 1))) {
				rc = RCP_ENOMEM;
			} else {
				rc = rcp_proc_encode(c->in_proc, in, ovf, need, &used);
			}
		}
		if (rc) {
			rc = rc == RCP_ENOMEM ? rc : RCP_EPROTO;
			goto fail;
		}
	} else if (r->scap < HDR_LEN && grow_buf(&r->sbuf, &r->scap, HDR_LEN)) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	if (ovf) {
		hd.flags = F_OVF;
		hd.aux = used;
		hd.len = 0;
	} else {
		hd.len = (uint32_t)used;
	}
	memcpy(r->sbuf, &hd, HDR_LEN);
	if (timeout_ns == 0)
		timeout_ns = rpc->def_timeout;
	r->deadline = 0;
	/* Remote fetch: the request goes into the server's segment. */
	if (!ovf && rfp_cli_submit(rpc, p, r, c->id, r->sbuf, HDR_LEN + hd.len, &r->rfp_slot)) {
		rc = 0;
	} else {
		/* The response receive first (pre-posted), then the request. */
		p->expect++;
		peer_repost(rpc, p);
		if (rpc->depth && rpc->batch && !ovf) {
			rc = queue_msg(rpc, &p->rq, r->sbuf, HDR_LEN + hd.len, &r->qgen);
		} else {
			if (p->rq.n)
				flush_q(rpc, &p->rq); /* in order */
			rc = send_msg(ch, TAG_REQ, r->sbuf, HDR_LEN + hd.len, sreq_cb, r, &r->sreq);
		}
		if (rc) {
			p->expect--;
			goto fail;
		}
		if (ovf) {
			rcp_req *rq;
			rc = rcp_isend(ch, TAG_OVF(hd.cookie), ovf, used, &rq);
			if (rc || !aux_add(rpc, rq, AUX_SEND_FREE, ovf, NULL)) {
				/* the header is out; the server times the overflow
				 * out with the channel; fail the call here */
				if (rc)
					free(ovf);
				ovf = NULL;
				r->state = Q_PENDING;
				r->pnext = p->live;
				r->pprev = NULL;
				if (p->live)
					p->live->pprev = r;
				p->live = r;
				done(r, rc ? rc : RCP_ENOMEM);
				rpc->st.forwarded++;
				if (req)
					*req = r;
				return 0;
			}
			rpc->st.overflow_in++;
		}
	}
	r->state = Q_PENDING;
	r->pnext = p->live;
	r->pprev = NULL;
	if (p->live)
		p->live->pprev = r;
	p->live = r;
	if (timeout_ns > 0) {
		r->deadline = now_ns() + (uint64_t)timeout_ns;
		if (timer_add(rpc, r)) {
			done(r, RCP_ENOMEM); /* sent, but it could never time out */
			rpc->st.forwarded++;
			if (req)
				*req = r;
			return 0;
		}
	}
	rpc->st.forwarded++;
	if (req)
		*req = r;
	return 0;
fail:
	free(ovf);
	r->state = Q_DONE;
	req_release(r);
	return rc;
}

int rcp_rpc_cancel(rcp_rpc_req *req)
{
	if (!req || req->state == Q_FREE)
		return RCP_EINVAL;
	rfp_cli_abandon(req->rpc, req->peer, req->rfp_slot);
	req->rfp_slot = 0;
	done(req, RCP_ECANCELED);
	return 0;
}

int rcp_rpc_req_free(rcp_rpc_req *req)
{
	if (!req || req->cb || req->state == Q_FREE)
		return RCP_EINVAL;
	if (req->state != Q_DONE)
		return RCP_EBUSY;
	req_release(req);
	return 0;
}

/* ---- progress ------------------------------------------------------------------------------ */

/* Fails the requests whose deadline has passed: only those are visited. */
static void fire_timeouts(rcp_rpc *rpc, uint64_t now)
{
	while (rpc->ntimed && rpc->heap[0]->deadline <= now) {
		struct rcp_rpc_req *r = rpc->heap[0];
		rpc->st.polls++;
		rfp_cli_abandon(rpc, r->peer, r->rfp_slot);
		r->rfp_slot = 0;
		done(r, RCP_ETIMEDOUT); /* takes it off the heap */
	}
}

/* A posted receive completed (rcp callback). */
static void recv_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct rbuf *b = user;
	rcp_rpc *rpc = b->rpc;
	(void)rq;
	rpc->st.polls++;
	b->rq = NULL;
	if (b->peer) {
		blist_del(&b->peer->posted, b);
		on_response(rpc, b->peer, b, st);
	} else {
		blist_del(&rpc->srv, b);
		if (rpc->closing) {
			rbuf_put(rpc, b); /* destroy: requests are no longer handled */
			return;
		}
		on_request(rpc, b, st);
		if (rpc->serving)
			srv_post(rpc);
	}
}

/* A client request's send completed. */
static void sreq_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct rcp_rpc_req *r = user;
	(void)rq;
	(void)st;
	r->rpc->st.polls++;
	r->sreq = NULL;
}

/* A response's send completed: the handle goes back to the pool. */
static void send_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct rcp_rpc_handle *h = user;
	rcp_rpc *rpc = h->rpc;
	(void)rq;
	(void)st;
	rpc->st.polls++;
	if (h->sprev)
		h->sprev->next = h->next;
	else
		rpc->sending = h->next;
	if (h->next)
		h->next->sprev = h->sprev;
	h->sreq = NULL;
	handle_put(rpc, h);
}

/* An overflow message (or a send left by a recycled request) completed. */
static void aux_cb(rcp_req *rq, const struct rcp_status *st, void *user)
{
	struct aux *a = user;
	rcp_rpc *rpc = a->rpc;
	(void)rq;
	rpc->st.polls++;
	aux_del(rpc, a);
	a->rq = NULL;
	switch (a->kind) {
	case AUX_RECV_REQ: {
		struct rcp_rpc_req *r = a->owner;
		r->ovf_aux = NULL;
		if (r->peer->expect)
			r->peer->expect--;
		if (st->error)
			done(r, st->error == RCP_ETRUNC ? RCP_EPROTO : st->error);
		else {
			r->ovf_resp = a->buf;
			a->buf = NULL;
			rpci_finish_resp(r, 0, r->ovf_resp, st->len);
		}
		free(a->buf);
		break;
	}
	case AUX_RECV_HANDLE: {
		struct rcp_rpc_handle *h = a->owner;
		if (st->error || st->len != h->inlen)
			rcp_rpc_respond(h, NULL, RCP_EPROTO);
		else
			dispatch(rpc, h);
		break;
	}
	default: free(a->buf); break;
	}
	a->next = rpc->freeaux;
	rpc->freeaux = a;
}

static int progress(rcp_rpc *rpc)
{
	int n;
	uint64_t ev0 = rpc->events;

	rpc->depth++; /* forwards from here on are batched (BATCHES above) */
	if (rpc->bulk) {
		/* bulk progresses the endpoint (and runs its callbacks) */
		n = rcp_bulk_progress(rpc->bulk);
		if (n >= 0)
			rpc->events += (uint64_t)n; /* bulk callbacks ran: callers look */
	} else {
		n = rcp_progress(rpc->ep); /* runs the rcp callbacks */
	}
	if (n >= 0) {
		rfp_poll(rpc);
		if (rpc->ntimed) {
			uint64_t now = now_ns();
			if (now >= rpc->heap[0]->deadline)
				fire_timeouts(rpc, now);
		}
		if (rpc->doneq)
			run_callbacks(rpc);
	}
	rpc->depth--;
	/* every round sends what it queued, nested rounds too: a callback
	 * that forwards and then waits is not left waiting on its own batch */
	if (rpc->dirty)
		flush_all(rpc);
	return n < 0 ? n : (int)(rpc->events - ev0);
}

int rcp_rpc_progress(rcp_rpc *rpc)
{
	if (!rpc)
		return RCP_EINVAL;
	return progress(rpc);
}

int64_t rcp_rpc_timeout_ns(const rcp_rpc *rpc)
{
	int64_t t;
	if (!rpc)
		return RCP_EINVAL;
	if (rpc->doneq || rfp_busy(rpc))
		return 0;
	t = rcp_ep_timeout_ns(rpc->ep);
	if (rpc->ntimed) {
		uint64_t now = now_ns(), dl = rpc->heap[0]->deadline;
		int64_t d = dl > now ? (int64_t)(dl - now) : 0;
		if (t < 0 || d < t)
			t = d;
	}
	return t;
}

/* ---- waiting: the endpoint's waiter (common/wait.c) ----
 * A context is a wait source of its endpoint (added at init): every wait
 * on the endpoint sees its events as news and does not sleep over its
 * queued notes and callbacks or past its call timeouts. */

/* News since the last look: events (handlers run, calls completed), or
 * a remote fetch in flight, which polls the server's memory: the wait
 * spins on without a yield, since its slow/fast decisions count fetches
 * of RCP_RFP_FETCH_NS, which a yield stretches (test_rfp then never sees
 * a call turn slow). */
static int wait_look(void *arg)
{
	rcp_rpc *rpc = arg;
	int news = rpc->events != rpc->events_seen || rfp_busy(rpc);
	rpc->events_seen = rpc->events;
	return news;
}

static int wait_arm(void *arg, int64_t *timeout_ns)
{
	rcp_rpc *rpc = arg;
	if (rpc->doneq || rfp_busy(rpc))
		return RCP_EAGAIN; /* completed calls wait for their callbacks */
	if (rpc->ntimed) {
		uint64_t now = now_ns(), dl = rpc->heap[0]->deadline;
		int64_t d = dl > now ? (int64_t)(dl - now) : 0;
		if (*timeout_ns < 0 || d < *timeout_ns)
			*timeout_ns = d;
	}
	return 0;
}

struct run_ctx {
	rcp_rpc *rpc;
	int (*fin)(void *);
	void *arg;
	uint64_t ev0; /* events when the run began */
	int total;
};

/* Events count wherever they ran: in our progress, or in the endpoint's
 * look (an rcp callback that handled a call) before it. */
static int run_done(void *arg)
{
	struct run_ctx *x = arg;
	int n;
	if (x->fin && x->fin(x->arg))
		return 1;
	n = progress(x->rpc);
	if (n < 0)
		return n;
	x->total = (int)(x->rpc->events - x->ev0);
	return x->fin ? x->fin(x->arg) : x->total > 0;
}

/* Progresses until FIN(arg) or an event (FIN NULL), or TIMEOUT_NS.
 * Returns the events seen, RCP_ETIMEDOUT if none, or an error. */
static int run(rcp_rpc *rpc, int (*fin)(void *), void *arg, int64_t timeout_ns)
{
	struct run_ctx x = {rpc, fin, arg, rpc->events, 0};
	int mode = (rpc->flags & RCP_RPC_SPIN)    ? RCPI_WAIT_SPIN
	           : (rpc->flags & RCP_RPC_SLEEP) ? RCPI_WAIT_SLEEP
	                                          : -1;
	int rc = rcpi_ep_wait_mode(rpc->ep, mode, run_done, &x, timeout_ns);
	if (rc == RCP_ETIMEDOUT && x.total)
		return x.total;
	return rc < 0 ? rc : x.total;
}

int rcp_rpc_loop(rcp_rpc *rpc, int64_t timeout_ns)
{
	if (!rpc)
		return RCP_EINVAL;
	return run(rpc, NULL, NULL, timeout_ns);
}

static int req_finished(void *arg)
{
	return ((struct rcp_rpc_req *)arg)->state == Q_DONE;
}

int rcp_rpc_test(rcp_rpc_req *req)
{
	int rc;
	if (!req || req->cb || req->state == Q_FREE)
		return RCP_EINVAL;
	if (req->state != Q_DONE) {
		rc = progress(req->rpc);
		if (rc < 0)
			return rc;
	}
	return req->state == Q_DONE ? req->status : RCP_EAGAIN;
}

int rcp_rpc_wait(rcp_rpc_req *req, int64_t timeout_ns)
{
	int rc;
	if (!req || req->cb || req->state == Q_FREE)
		return RCP_EINVAL;
	rc = run(req->rpc, req_finished, req, timeout_ns);
	if (req->state == Q_DONE)
		return req->status;
	return rc < 0 && rc != RCP_ETIMEDOUT ? rc : RCP_EAGAIN;
}

/* ---- destroy --------------------------------------------------------------------------------- */

/* Receives still posted (server ring and every peer's responses). */
static uint32_t posted_count(const rcp_rpc *rpc)
{
	uint32_t n = rpc->srv.n;
	for (uint32_t i = 0; i < rpc->peercap; i++)
		if (rpc->peers[i])
			n += rpc->peers[i]->posted.n;
	return n;
}

static void cancel_list(struct blist *l)
{
	for (struct rbuf *b = l->head; b; b = b->lnext)
		(void)rcp_cancel(b->rq); /* RCP_EBUSY: being filled, completes */
}

/* Frees the receive buffers still posted after destroy's wait: rcp keeps
 * them (a READY promise), so they are detached and leaked, never freed
 * while rcp may write into them. */
static void leak_list(struct blist *l)
{
	while (l->head) {
		struct rbuf *b = l->head;
		blist_del(l, b);
		rcp_req_set_cb(b->rq, NULL, NULL);
		free(b); /* b->data stays */
		rcpi_warn("rpc: a receive rcp would not release is leaked at destroy");
	}
}

void rcp_rpc_destroy(rcp_rpc *rpc)
{
	if (!rpc)
		return;
	rcp_ep_wait_remove(rpc->ep, rpc->wait_id);
	rfp_fini(rpc);
	for (uint32_t i = 0; i < rpc->peercap; i++)
		if (rpc->peers[i])
			fail_peer(rpc, rpc->peers[i], RCP_ECLOSED);
	for (uint32_t i = 0; i < rpc->nreqs; i++)
		if (rpc->reqs[i]->state == Q_PENDING || rpc->reqs[i]->state == Q_OVF_WAIT)
			done(rpc->reqs[i], RCP_ECLOSED);
	run_callbacks(rpc);
	/* Let responses already handed to rcp go out (rcp_ep_close lingers
	 * for their acks); wait for the sends we still own and take the
	 * receives back: their callbacks return them (requests that arrive
	 * meanwhile are not handled). */
	rpc->closing = 1;
	rpc->serving = 0;
	rpc->dirty = NULL; /* (every peer failed above: nothing queued) */
	cancel_list(&rpc->srv);
	for (uint32_t i = 0; i < rpc->peercap; i++)
		if (rpc->peers[i]) {
			rpc->peers[i]->failed = RCP_ECLOSED; /* no reposting */
			cancel_list(&rpc->peers[i]->posted);
		}
	{
		uint64_t until = now_ns() + 100000000ull;
		while ((rpc->sending || rpc->aux || posted_count(rpc)) && now_ns() < until) {
			for (struct aux *a = rpc->aux; a; a = a->next)
				if (a->kind != AUX_SEND_FREE)
					(void)rcp_cancel(a->rq);
			rcp_progress(rpc->ep);
		}
	}
	/* From here owners are freed: every request rcp still has is
	 * detached first (its callback would name a freed owner). */
	for (struct rcp_rpc_handle *h = rpc->sending; h; h = h->next)
		rcp_req_set_cb(h->sreq, NULL, NULL); /* leaked with the handle: rcp reads sbuf */
	leak_list(&rpc->srv);
	for (uint32_t i = 0; i < rpc->peercap; i++) {
		struct peer *p = rpc->peers[i];
		if (!p)
			continue;
		leak_list(&p->posted);
		rfp_peer_free(p);
		free(p->rq.buf);
		free(p);
	}
	free(rpc->peers);
	for (uint32_t i = 0; i < rpc->nreqs; i++) {
		struct rcp_rpc_req *r = rpc->reqs[i];
		if (r->sreq) {
			/* rcp still reads sbuf: leak it rather than free early */
			rcp_req_set_cb(r->sreq, NULL, NULL);
			continue;
		}
		if (r->resp)
			rbuf_unref(rpc, r->resp); /* freed with the free list below */
		free(r->ovf_resp);
		free(r->sbuf);
		free(r);
	}
	free(rpc->reqs);
	free(rpc->heap);
	for (int i = 0; i < RSQ; i++)
		free(rpc->sq[i].buf);
	while (rpc->freeh) {
		struct rcp_rpc_handle *h = rpc->freeh;
		rpc->freeh = h->next;
		free(h->sbuf);
		free(h);
	}
	while (rpc->freerb) {
		struct rbuf *b = rpc->freerb;
		rpc->freerb = b->next;
		free(b->data);
		free(b);
	}
	for (struct aux *a = rpc->aux, *n; a; a = n) {
		n = a->next;
		rcp_req_set_cb(a->rq, NULL, NULL); /* pending: its buffer is leaked */
		free(a);
	}
	while (rpc->freeaux) {
		struct aux *a = rpc->freeaux;
		rpc->freeaux = a->next;
		free(a);
	}
	for (uint32_t i = 0; i < rpc->callcap; i++)
		free(rpc->calls[i].name);
	free(rpc->calls);
	free(rpc);
}
