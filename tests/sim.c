/*
 * tests/sim.c — see sim.h.  Events are kept in a binary heap ordered by
 * (delivery time, insertion number), so equal times keep send order and
 * runs are deterministic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct ev {
	uint64_t at, order;
	int from, to;
	size_t len;
	unsigned char *data;
};

struct node {
	struct sim *s;
	int id, dead;
	rcpc_core *core;
	rcp_chan **chans;
	uint64_t link_free; /* bandwidth model: when the link is idle again */
	uint64_t unpushed;  /* frames sent with RCP_NIC_MORE since the last io.flush */
};

struct sim {
	struct sim_opts o;
	uint64_t now, order, rng;
	struct node *nodes;
	struct ev *heap;
	size_t nheap, capheap;
	struct sim_stats st;
	void (*tap)(void *, int, int, const void *, size_t);
	void *tap_arg;
	int64_t (*fate)(void *, int, int, const void *, size_t);
	void *fate_arg;
	struct sim_rma_exec rx; /* set: RMA transfers are the test's (sim_set_rma_exec) */
};

void sim_set_rma_exec(struct sim *s, const struct sim_rma_exec *x)
{
	if (x)
		s->rx = *x;
	else
		memset(&s->rx, 0, sizeof s->rx);
}

void sim_set_fate(struct sim *s,
                  int64_t (*fate)(void *arg, int from, int to, const void *frame, size_t len),
                  void *arg)
{
	s->fate = fate;
	s->fate_arg = arg;
}

void sim_set_tap(struct sim *s,
                 void (*tap)(void *arg, int from, int to, const void *frame, size_t len), void *arg)
{
	s->tap = tap;
	s->tap_arg = arg;
}

static uint64_t rnd(struct sim *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double unit(struct sim *s)
{
	return (double)(rnd(s) >> 11) / 9007199254740992.0;
}

static int ev_less(const struct ev *a, const struct ev *b)
{
	return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void heap_push(struct sim *s, struct ev e)
{
	size_t i;
	if (s->nheap == s->capheap) {
		s->capheap = s->capheap ? 2 * s->capheap : 256;
		s->heap = realloc(s->heap, sizeof *s->heap * s->capheap);
	}
	i = s->nheap++;
	while (i && ev_less(&e, &s->heap[(i - 1) / 2])) {
		s->heap[i] = s->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	s->heap[i] = e;
}

static struct ev heap_pop(struct sim *s)
{
	struct ev top = s->heap[0], last = s->heap[--s->nheap];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct ev *cand = &last;
		if (l < s->nheap && ev_less(&s->heap[l], cand)) {
			m = l;
			cand = &s->heap[l];
		}
		if (r < s->nheap && ev_less(&s->heap[r], cand))
			m = r;
		if (m == i)
			break;
		s->heap[i] = s->heap[m];
		i = m;
	}
	if (s->nheap)
		s->heap[i] = last;
	return top;
}

static void enqueue(struct sim *s, int from, int to, const unsigned char *data, size_t len,
                    uint64_t extra)
{
	struct ev e;
	struct node *n = &s->nodes[from];
	uint64_t at = s->now;

	if (s->o.bandwidth) {
		uint64_t tx = (uint64_t)len * 1000000000ull / s->o.bandwidth;
		if (n->link_free > at)
			at = n->link_free;
		at += tx;
		n->link_free = at;
	}
	e.at = at + s->o.link.latency + extra;
	e.order = s->order++;
	e.from = from;
	e.to = to;
	e.len = len;
	e.data = malloc(len ? len : 1);
	memcpy(e.data, data, len);
	heap_push(s, e);
}

/* Frames are queued as they are sent; a flush only marks the batch as
 * pushed, so that sim_run can tell a core that never pushed its batch
 * (on a real nic those frames would wait, the peer asleep). */
static int io_flush(void *ctx)
{
	struct node *n = ctx;
	n->unpushed = 0;
	return 0;
}

static int io_send(void *ctx, int peer, const struct iovec *iov, int iovcnt, unsigned flags)
{
	struct node *n = ctx;
	struct sim *s = n->s;
	unsigned char buf[1 << 17];
	size_t len = 0;
	uint64_t fate_extra = 0;

	if (peer < 0 || peer >= s->o.n)
		return RCP_EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (len + iov[i].iov_len > sizeof buf)
			return RCP_EMSGSIZE;
		memcpy(buf + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	if (len > s->o.params.mtu)
		return RCP_EMSGSIZE;
	s->st.sent++;
	if (flags & RCP_NIC_MORE) {
		s->st.more++;
		n->unpushed++;
	}
	if (n->dead)
		return 0;
	if (s->fate) {
		int64_t f = s->fate(s->fate_arg, n->id, peer, buf, len);
		if (f < 0) {
			s->st.dropped++;
			return 0;
		}
		fate_extra = (uint64_t)f;
	}
	if (unit(s) < s->o.link.drop) {
		s->st.dropped++;
		return 0;
	}
	if (unit(s) < s->o.link.corrupt && len) {
		int flips = 1 + (int)(rnd(s) % 3);
		for (int i = 0; i < flips; i++) {
			size_t b = rnd(s) % (len * 8);
			buf[b / 8] ^= (unsigned char)(1u << (b % 8));
		}
		s->st.corrupted++;
	}
	{
		uint64_t extra = fate_extra;
		if (unit(s) < s->o.link.reorder) {
			extra += 1 + rnd(s) % (s->o.link.reorder_max ? s->o.link.reorder_max : 1);
			s->st.reordered++;
		}
		enqueue(s, n->id, peer, buf, len, extra);
	}
	if (unit(s) < s->o.link.dup) {
		s->st.duplicated++;
		enqueue(s, n->id, peer, buf, len, rnd(s) % (s->o.link.latency + 1));
	}
	return 0;
}

/* Simulated RMA: the key is the address, length and access of a region
 * in this same process. */
struct sim_mr {
	void *addr;
	size_t len;
	unsigned access;
};

static int io_mr_reg(void *ctx, void *addr, size_t len, unsigned access, void **mr, void *rkey,
                     size_t *rkeylen)
{
	struct sim_mr *m = malloc(sizeof *m);
	(void)ctx;
	if (!m)
		return RCP_ENOMEM;
	m->addr = addr;
	m->len = len;
	m->access = access;
	if (*rkeylen < sizeof *m) {
		free(m);
		return RCP_ERANGE;
	}
	memcpy(rkey, m, sizeof *m);
	*rkeylen = sizeof *m;
	*mr = m;
	return 0;
}

static void io_mr_dereg(void *ctx, void *mr)
{
	(void)ctx;
	free(mr);
}

static int rma(struct node *n, int peer, int write, void *local, const void *clocal, size_t len,
               const void *rkey, size_t rkeylen, uint64_t off)
{
	struct sim_mr m;
	if (rkeylen != sizeof m || peer < 0 || peer >= n->s->o.n)
		return RCP_EACCES;
	if (n->s->nodes[peer].dead)
		return RCP_EPEER;
	memcpy(&m, rkey, sizeof m);
	if (off > m.len || len > m.len - off)
		return RCP_EACCES;
	if (!write) {
		if (!(m.access & RCP_NIC_ACCESS_READ))
			return RCP_EACCES;
		memcpy(local, (char *)m.addr + off, len);
	} else {
		if (!(m.access & RCP_NIC_ACCESS_WRITE))
			return RCP_EACCES;
		memcpy((char *)m.addr + off, clocal, len);
	}
	return 0;
}

int sim_rma_perform(struct sim *s, int node, const struct rcpc_rma *ev)
{
	return rma(&s->nodes[node], ev->peer, ev->write, ev->local, ev->local, ev->len, ev->rkey,
	           ev->rkeylen, ev->off);
}

/* The transfers node I's core asked for: performed at once and given back
 * (what rcp/endpoint.c does), or handed to the test's executor.  Then a
 * flush sends the FINs they let the core send. */
static void rma_drain(struct sim *s, int i)
{
	rcpc_core *c = s->nodes[i].core;
	struct rcpc_rma ev;
	int any = 0;
	while (rcpc_rma_take(c, &ev)) {
		any = 1;
		if (s->rx.take)
			s->rx.take(s->rx.arg, i, &ev);
		else
			rcpc_rma_done(c, ev.token, sim_rma_perform(s, i, &ev), s->now);
	}
	if (any)
		rcpc_flush(c, s->now);
}

static int io_peer_add(void *ctx, const void *src, size_t srclen, int *peer)
{
	(void)ctx;
	if (srclen != sizeof(int))
		return RCP_EADDR;
	memcpy(peer, src, sizeof(int));
	return 0;
}

static void node_start(struct sim *s, int i, uint32_t epoch);

struct sim *sim_new(const struct sim_opts *o)
{
	struct sim *s = calloc(1, sizeof *s);
	s->o = *o;
	if (!s->o.params.mtu) {
		rcpc_params_default(&s->o.params);
		s->o.params.mtu = 4096;
		s->o.params.rx_frames = 32;
		s->o.params.crc = 1;
	}
	s->rng = o->seed;
	s->now = 1000000000ull; /* start at 1 s: 0 is "never" in places */
	s->nodes = calloc((size_t)o->n, sizeof *s->nodes);
	for (int i = 0; i < o->n; i++) {
		struct node *n = &s->nodes[i];
		n->s = s;
		n->id = i;
		n->chans = calloc((size_t)o->n, sizeof *n->chans);
		node_start(s, i, 0x1000u + (uint32_t)i);
	}
	return s;
}

void sim_restart(struct sim *s, int i, uint32_t epoch)
{
	struct node *n = &s->nodes[i];
	rcpc_core_free(n->core);
	n->core = NULL;
	memset(n->chans, 0, (size_t)s->o.n * sizeof *n->chans);
	node_start(s, i, epoch);
}

void sim_chan_close(struct sim *s, int from, int to)
{
	struct node *n = &s->nodes[from];
	rcp_chan *ch = sim_chan(s, from, to);
	n->chans[to] = NULL;
	rcpc_chan_close(ch, s->now);
}

static void node_start(struct sim *s, int i, uint32_t epoch)
{
	{
		struct node *n = &s->nodes[i];
		struct rcpc_io io = {0};
		struct rcpc_params p = s->o.params;
		const struct sim_opts *o = &s->o;
		io.ctx = n;
		io.send = io_send;
		io.flush = io_flush;
		io.peer_add = io_peer_add;
		if (o->rma) {
			io.mr_reg = io_mr_reg;
			io.mr_dereg = io_mr_dereg;
		}
		p.epoch = epoch;
		if (i < 4 && o->rx_frames[i])
			p.rx_frames = o->rx_frames[i];
		if (o->accept)
			p.flags |= RCP_EP_ACCEPT;
		rcpc_core_new(&p, &io, n, &n->core);
	}
}

void sim_free(struct sim *s)
{
	for (int i = 0; i < s->o.n; i++) {
		rcpc_core_free(s->nodes[i].core);
		free(s->nodes[i].chans);
	}
	while (s->nheap)
		free(heap_pop(s).data);
	free(s->heap);
	free(s->nodes);
	free(s);
}

rcpc_core *sim_core(struct sim *s, int i)
{
	return s->nodes[i].core;
}

rcp_chan *sim_chan(struct sim *s, int from, int to)
{
	struct node *n = &s->nodes[from];
	if (!n->chans[to]) {
		n->chans[to] = rcpc_chan_by_peer(n->core, to);
		if (!n->chans[to])
			rcpc_chan_open(n->core, to, s->now, &n->chans[to]);
	}
	return n->chans[to];
}

uint64_t sim_now(const struct sim *s)
{
	return s->now;
}

void sim_kill(struct sim *s, int i)
{
	s->nodes[i].dead = 1;
}

void sim_inject(struct sim *s, int from, int to, const void *frame, size_t len)
{
	int src = from;
	rcpc_input(s->nodes[to].core, from, &src, sizeof src, frame, len, s->now);
}

void sim_stats(const struct sim *s, struct sim_stats *st)
{
	*st = s->st;
}

/* No core's timer key is later than its channel's deadline, and a channel
 * with a deadline is in the heap, but for the channels marked to be keyed
 * anew (rcp/timers.c, TIMERS, LAZY KEYS): a channel an entry point changed
 * without marking it or lowering its key would have its timers fire late
 * or never. */
static void check_timers(const struct sim *s)
{
	for (int i = 0; i < s->o.n; i++) {
		int bad = s->nodes[i].dead ? 0 : rcpc_timers_check(s->nodes[i].core);
		if (bad) {
			fprintf(stderr,
			        "sim: node %d: %d channels with a stale timer key at %llu\n", i,
			        bad, (unsigned long long)s->now);
			abort();
		}
	}
}

int sim_run(struct sim *s, int (*done)(void *), void *arg, uint64_t limit)
{
	uint64_t end = s->now + limit;

	for (;;) {
		uint64_t next = UINT64_MAX;
		check_timers(s);
		for (int i = 0; i < s->o.n; i++) {
			if (s->nodes[i].dead)
				continue;
			rcpc_timers(s->nodes[i].core, s->now);
			rcpc_flush(s->nodes[i].core, s->now);
			while (*rcpc_rma_queued(s->nodes[i].core))
				rma_drain(s, i);
			if (s->nodes[i].unpushed)
				s->st.unpushed++;
		}
		check_timers(s);
		if (done(arg))
			return 0;
		if (s->nheap)
			next = s->heap[0].at;
		for (int i = 0; i < s->o.n; i++) {
			uint64_t d;
			if (s->nodes[i].dead)
				continue;
			d = rcpc_deadline(s->nodes[i].core);
			if (d < next)
				next = d;
		}
		if (s->rx.due) {
			uint64_t d = s->rx.due(s->rx.arg);
			if (d < next)
				next = d;
		}
		if (next == UINT64_MAX || next > end) {
			s->now = end; /* the time limit passed, also when idle */
			return -1;
		}
		if (next > s->now)
			s->now = next;
		else
			s->now += 1000; /* a core wants service now: let time move */
		/* Transfers due back, before the frames of the same time. */
		if (s->rx.due && s->rx.due(s->rx.arg) <= s->now)
			s->rx.run(s->rx.arg, s->now);
		/* Deliver everything due now, in order. */
		while (s->nheap && s->heap[0].at <= s->now) {
			struct ev e = heap_pop(s);
			if (!s->nodes[e.to].dead && !s->nodes[e.from].dead) {
				int src = e.from;
				s->st.delivered++;
				if (s->tap)
					s->tap(s->tap_arg, e.from, e.to, e.data, e.len);
				rcpc_input(s->nodes[e.to].core, e.from, &src, sizeof src, e.data,
				           e.len, s->now);
			}
			free(e.data);
		}
	}
}
