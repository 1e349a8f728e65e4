/*
 * tests/fuzz_core.c — libFuzzer target: the protocol core's state machine.
 *
 * fuzz_wire feeds one core frames; most of what the core does happens
 * only between two cores that talk (acks, retransmissions, rendezvous,
 * RMA, split transfers, close, restart), so this target runs two cores, A
 * (node 0) and B (node 1), over a network the input controls.  The input
 * is a script: its first byte picks the parameters (CRC, RMA, split, the
 * window, the MTU), every following byte an operation whose arguments are
 * the bytes after it:
 *
 *   deliver / deliver-all / drop / duplicate a queued frame (reordering is
 *   delivering out of queue order), mutate one (and reseal its CRC),
 *   inject raw bytes as a frame (from the peer or from a stranger),
 *   advance virtual time (then both cores' timers run), jump to the next
 *   deadline, isend / issend / irecv / mcast of a size from a table,
 *   cancel, probe, close a channel, restart a core (new epoch), reap, and
 *   the rest of the API (ack_owed, deadline, ban_epoch, stats).
 *
 * RMA is simulated over this process's memory like tests/sim.c (the
 * transfers a core asks for are performed after each operation and each
 * frame delivered), except that a key is an index into the harness's
 * table of registrations,
 * checked (owner, bounds, access, generation) the way an HCA checks an
 * rkey: a hostile key names nothing.  Each frame travels in its own
 * exact-size allocation so an over-read is ASan's to see.
 *
 * Oracle, besides the sanitizers: while the input neither mutated nor
 * injected a frame, every byte a receive completes with must be the
 * sender's pattern for that tag and length, and a receive of a given tag
 * completes only with that tag.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcp/core.h"
#include "rcp/wire.h"
#include "fuzz_guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Closing and reopening a channel, restarting a core and a channel
 * failed by the peer timeout keep the byte oracle on: a conversation that
 * starts again has a new epoch, and frames of the old one are stale
 * (rcp/chan.c, CHANNELS; tests/corpus/regress/core/close-reopen and the
 * two beside it were this fault's inputs). */

enum { NNODES = 2, QMAX = 96, RMAX = 48, MRMAX = 64, STRANGERS = 6 };
#define BUDGET (3u << 20) /* bytes of message buffers per input */

struct frame {
	unsigned char *b;
	size_t len;
};

struct queue {
	struct frame f[QMAX];
	int n;
};

struct mr {
	int owner, live;
	unsigned char *addr;
	size_t len;
	unsigned access;
	uint32_t gen;
};

struct req {
	rcp_req *r;
	int node, recv, gen;
	uint64_t tag; /* posted tag (RCP_ANY_TAG for any) */
	unsigned char *buf;
	size_t len;
};

static struct {
	rcpc_core *core[NNODES];
	int gen[NNODES]; /* incarnation: a restart bumps it */
	struct rcpc_params p;
	struct queue q[NNODES]; /* q[i]: frames on their way to node i */
	struct mr mrs[MRMAX];
	int nmr;
	uint32_t mrgen;
	struct req reqs[RMAX];
	int nreq;
	uint64_t now;
	size_t spent;
	int tainted;
	const uint8_t *in, *end;
} F;

static unsigned get8(void)
{
	return F.in < F.end ? *F.in++ : 0;
}

static unsigned get16(void)
{
	unsigned v = get8();
	return v | get8() << 8;
}

static int node_of(void *ctx)
{
	return (int)(intptr_t)ctx;
}

/* ---- the network -------------------------------------------------------- */

static int io_send(void *ctx, int peer, const struct iovec *iov, int iovcnt, unsigned flags)
{
	struct queue *q;
	size_t len = 0, at = 0;
	unsigned char *b;
	(void)flags;
	(void)ctx;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > F.p.mtu)
		__builtin_trap(); /* the core built a frame its nic refuses */
	if (peer < 0 || peer >= NNODES)
		return 0; /* a stranger: the frame goes nowhere */
	q = &F.q[peer];
	if (q->n == QMAX)
		return 0; /* the link is full: a loss */
	b = malloc(len ? len : 1);
	if (!b)
		return RCP_ENOMEM;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(b + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	q->f[q->n].b = b;
	q->f[q->n].len = len;
	q->n++;
	return 0;
}

static int io_peer_add(void *ctx, const void *src, size_t srclen, int *peer)
{
	(void)ctx;
	if (srclen != 1)
		return RCP_EADDR;
	/* Strangers only: the nodes are always known by index. */
	*peer = NNODES + *(const unsigned char *)src % STRANGERS;
	return 0;
}

/* ---- RMA: keys index the table -------------------------------------------- */

static int io_mr_reg(void *ctx, void *addr, size_t len, unsigned access, void **mrp, void *rkey,
                     size_t *rkeylen)
{
	uint32_t key[2];
	int i;
	for (i = 0; i < F.nmr && F.mrs[i].live; i++)
		;
	if (i == MRMAX || *rkeylen < sizeof key)
		return RCP_ENOMEM;
	if (i == F.nmr)
		F.nmr++;
	F.mrs[i] = (struct mr){node_of(ctx), 1, addr, len, access, ++F.mrgen};
	key[0] = (uint32_t)i;
	key[1] = F.mrs[i].gen;
	memcpy(rkey, key, sizeof key);
	*rkeylen = sizeof key;
	*mrp = &F.mrs[i];
	return 0;
}

static void io_mr_dereg(void *ctx, void *mrp)
{
	struct mr *m = mrp;
	if (!m->live || m->owner != node_of(ctx))
		__builtin_trap(); /* deregistered twice, or someone else's */
	m->live = 0;
}

static int rma(void *ctx, int peer, unsigned char *local, const unsigned char *clocal, size_t len,
               const void *rkey, size_t rkeylen, uint64_t off)
{
	uint32_t key[2];
	struct mr *m;
	(void)ctx;
	if (rkeylen != sizeof key || peer < 0 || peer >= NNODES)
		return RCP_EACCES;
	memcpy(key, rkey, sizeof key);
	if (key[0] >= (uint32_t)F.nmr)
		return RCP_EACCES;
	m = &F.mrs[key[0]];
	if (!m->live || m->gen != key[1] || m->owner != peer || off > m->len || len > m->len - off)
		return RCP_EACCES;
	if (local) {
		if (!(m->access & RCP_NIC_ACCESS_READ))
			return RCP_EACCES;
		memcpy(local, m->addr + off, len);
	} else {
		if (!(m->access & RCP_NIC_ACCESS_WRITE))
			return RCP_EACCES;
		memcpy(m->addr + off, clocal, len);
	}
	return 0;
}

/* Performs the transfers node I's core asked for, in order, and gives
 * each result back (what rcp/endpoint.c does); then flushes the FINs. */
static void rma_run(int i)
{
	struct rcpc_rma ev;
	if (!F.core[i])
		return;
	while (*rcpc_rma_queued(F.core[i])) {
		while (rcpc_rma_take(F.core[i], &ev)) {
			int rc = rma((void *)(intptr_t)i, ev.peer, ev.write ? NULL : ev.local,
			             ev.local, ev.len, ev.rkey, ev.rkeylen, ev.off);
			if (rcpc_rma_done(F.core[i], ev.token, rc, F.now))
				__builtin_trap(); /* a token it just gave out */
		}
		rcpc_flush(F.core[i], F.now);
	}
}

/* ---- cores ------------------------------------------------------------------ */

static void node_start(int i, unsigned cfg)
{
	struct rcpc_io io = {0};
	struct rcpc_params p = F.p;
	io.ctx = (void *)(intptr_t)i;
	io.send = io_send;
	io.peer_add = io_peer_add;
	if (cfg & 2) {
		io.mr_reg = io_mr_reg;
		io.mr_dereg = io_mr_dereg;
	}
	p.epoch = 0x100u * (uint32_t)(i + 1) + (uint32_t)F.gen[i];
	/* B is the server: it learns A from A's first frame. */
	if (i == 1 && (cfg & 32))
		p.flags |= RCP_EP_ACCEPT;
	if (rcpc_core_new(&p, &io, NULL, &F.core[i]))
		__builtin_trap();
}

static rcp_chan *chan(int i)
{
	rcp_chan *ch = rcpc_chan_by_peer(F.core[i], 1 - i);
	if (!ch && rcpc_chan_open(F.core[i], 1 - i, F.now, &ch))
		return NULL;
	return ch;
}

static unsigned char pattern(uint64_t tag, size_t len, size_t k)
{
	return (unsigned char)(tag * 31 + len * 17 + k * 13 + (k >> 8));
}

/* The byte loops of the oracle are not the code under test: without
 * coverage instrumentation they cost nothing per byte. */
__attribute__((no_sanitize("coverage"))) static void fill(unsigned char *b, uint64_t tag,
                                                          size_t len)
{
	for (size_t k = 0; k < len; k++)
		b[k] = pattern(tag, len, k);
}

/* The first byte of B[0..n) that is not the pattern of (TAG, LEN), or N. */
__attribute__((no_sanitize("coverage"))) static size_t check(const unsigned char *b, size_t n,
                                                             uint64_t tag, size_t len)
{
	for (size_t k = 0; k < n; k++)
		if (b[k] != pattern(tag, len, k))
			return k;
	return n;
}

static void req_drop(int k)
{
	free(F.reqs[k].buf);
	F.spent -= F.reqs[k].len;
	F.reqs[k] = F.reqs[--F.nreq];
}

/* Takes the completed requests; checks what receives got. */
static void reap(void)
{
	for (int k = 0; k < F.nreq;) {
		struct req *q = &F.reqs[k];
		struct rcp_status st;
		if (!rcpc_req_done(q->r, &st)) {
			k++;
			continue;
		}
		if (q->recv && (!st.error || st.error == RCP_ETRUNC)) {
			size_t n = st.len < q->len ? st.len : q->len;
			if (q->tag != RCP_ANY_TAG && st.tag != q->tag)
				__builtin_trap(); /* matched another tag */
			size_t bad = F.tainted ? n : check(q->buf, n, st.tag, st.len);
			if (bad != n) {
				fprintf(stderr, "fuzz_core: recv tag %llu len %zu: byte %zu\n",
				        (unsigned long long)st.tag, st.len, bad);
				__builtin_trap();
			}
		}
		req_drop(k);
	}
}

/* Drops the harness's records of node I's requests (its core is gone). */
static void forget(int i)
{
	for (int k = 0; k < F.nreq;)
		if (F.reqs[k].node == i)
			req_drop(k);
		else
			k++;
}

static void node_stop(int i)
{
	rcpc_core_free(F.core[i]);
	/* Its nic is closed with it: its registrations go too. */
	for (int k = 0; k < F.nmr; k++)
		if (F.mrs[k].owner == i)
			F.mrs[k].live = 0;
	F.core[i] = NULL;
	forget(i);
}

/* ---- operations ---------------------------------------------------------------- */

/* Feeds FRAME to node TO from node FROM, or (FROM < 0) from the stranger
 * whose address is SRC. */
static void input(int to, int from, unsigned char src, const unsigned char *frame, size_t len)
{
	if (!F.core[to])
		return;
	if (fuzz_ack_spins(
	        rcpc_chan_by_peer(F.core[to], from >= 0 ? from : NNODES + src % STRANGERS), frame,
	        len, F.p.session))
		return; /* tests/fuzz_guard.h */
	rcpc_input(F.core[to], from < 0 ? RCP_NIC_PEER_NONE : from, &src, 1, frame, len, F.now);
}

/* Delivers the frame at index K of the queue to node TO (removes it). */
static void deliver(int to, int k)
{
	struct queue *q = &F.q[to];
	struct frame f = q->f[k];
	memmove(&q->f[k], &q->f[k + 1], sizeof *q->f * (size_t)(q->n - k - 1));
	q->n--;
	input(to, 1 - to, 0, f.b, f.len);
	free(f.b);
	rma_run(to); /* the transfers the frame asked for, as the endpoint does */
	if (F.core[to])
		rcpc_flush(F.core[to], F.now);
}

static void flush_all(void)
{
	for (int i = 0; i < NNODES; i++)
		if (F.core[i])
			rcpc_flush(F.core[i], F.now);
}

static void deliver_all(unsigned rounds)
{
	for (unsigned r = 0; r < rounds; r++) {
		int any = 0;
		for (int i = 0; i < NNODES; i++)
			while (F.q[i].n) {
				deliver(i, 0);
				any = 1;
			}
		if (!any)
			break;
	}
}

static void timers(void)
{
	for (int i = 0; i < NNODES; i++)
		if (F.core[i])
			rcpc_timers(F.core[i], F.now);
	flush_all();
}

static void advance(unsigned t)
{
	F.now += (uint64_t)(1 + (t & 15)) << ((t >> 4) * 2);
	timers();
}

static void to_deadline(void)
{
	uint64_t d = UINT64_MAX;
	for (int i = 0; i < NNODES; i++)
		if (F.core[i]) {
			uint64_t x = rcpc_deadline(F.core[i]);
			d = x < d ? x : d;
		}
	if (d == UINT64_MAX)
		return;
	F.now = d > F.now ? d : F.now + 1000;
	timers();
}

static const size_t sizes[16] = {0,    1,    8,     40,    200,   300,    1000, 2000,
                                 3000, 5000, 12000, 17000, 40000, 100000, 4096, 8192};

static struct req *req_new(int node, int recv, uint64_t tag, size_t len)
{
	struct req *q;
	if (F.nreq == RMAX || F.spent + len > BUDGET)
		return NULL;
	q = &F.reqs[F.nreq];
	*q = (struct req){NULL, node, recv, F.gen[node], tag, malloc(len ? len : 1), len};
	if (!q->buf)
		return NULL;
	if (!recv)
		fill(q->buf, tag, len);
	return q;
}

static void post(struct req *q, int rc)
{
	if (rc) {
		free(q->buf);
		return;
	}
	F.spent += q->len;
	F.nreq++;
}

static void op_send(unsigned kind)
{
	unsigned a = get8();
	int i = a & 1;
	uint64_t tag = (a >> 1) & 3;
	size_t len = sizes[get8() & 15];
	rcp_chan *ch, *chs[2];
	struct req *q;
	int rc;
	if (!F.core[i] || !(ch = chan(i)) || !(q = req_new(i, 0, tag, len)))
		return;
	chs[0] = chs[1] = ch;
	if (kind == 0)
		rc = rcpc_isend(ch, tag, q->buf, len, F.now, &q->r);
	else if (kind == 1)
		rc = rcpc_issend(ch, tag, q->buf, len, F.now, &q->r);
	else
		rc = rcpc_mcast(chs, 1 + (a >> 7), tag, q->buf, len, F.now, &q->r);
	post(q, rc);
}

static void op_recv(void)
{
	unsigned a = get8();
	int i = a & 1;
	uint64_t tag = (a & 8) ? RCP_ANY_TAG : (a >> 1) & 3;
	size_t len = sizes[get8() & 15];
	rcp_chan *ch = NULL;
	struct req *q;
	if (!F.core[i] || ((a & 16) && !(ch = chan(i))) || !(q = req_new(i, 1, tag, len)))
		return;
	post(q, rcpc_irecv(F.core[i], ch, tag, q->buf, len, F.now, &q->r));
}

/* Rewrites a 32-bit field of a queued frame, resealing its CRC. */
static void op_mutate(void)
{
	unsigned a = get8(), off = (get8() % 16) * 4;
	uint32_t v = get16() | (uint32_t)get16() << 16;
	struct queue *q = &F.q[a & 1];
	struct frame *f;
	if (!q->n)
		return;
	f = &q->f[(a >> 1) % q->n];
	F.tainted = 1;
	if (a & 0x80) {
		/* Truncate or keep the header only. */
		f->len = off < f->len ? off : f->len;
		return;
	}
	if (off + 4 > f->len)
		return;
	if (a & 0x40)
		v ^= f->b[off] | f->b[off + 1] << 8 | (uint32_t)f->b[off + 2] << 16 |
		     (uint32_t)f->b[off + 3] << 24;
	memcpy(f->b + off, &v, 4);
	if (f->len >= RCPW_CHLEN && (f->b[4] & RCPW_F_CRC)) {
		unsigned hl = f->b[6] | f->b[7] << 8;
		uint32_t crc;
		if (hl > f->len)
			return;
		memset(f->b + 40, 0, 4);
		crc = rcpw_crc32c(rcpw_crc32c(0, f->b, hl), f->b + hl, f->len - hl);
		memcpy(f->b + 40, &crc, 4);
	}
}

/* Raw bytes from the input as one frame, in their own allocation. */
static void op_inject(void)
{
	unsigned a = get8();
	size_t len = get16() % 4200;
	unsigned char *b;
	int from = (a & 2) ? -1 : 1 - (a & 1);
	if (len > (size_t)(F.end - F.in))
		len = (size_t)(F.end - F.in);
	b = malloc(len ? len : 1);
	if (!b)
		return;
	memcpy(b, F.in, len);
	F.in += len;
	F.tainted = 1;
	input(a & 1, from, (unsigned char)(a >> 2), b, len);
	free(b);
	if (F.core[a & 1])
		rcpc_flush(F.core[a & 1], F.now);
}

/* The rest of the API, and the ring invariant of docs/protocol.md:
 * tx_una <= tx_next <= tx_una + ring size (at most 1024 slots). */
static void op_misc(void)
{
	unsigned a = get8();
	int i = a & 1;
	rcp_chan *ch;
	struct rcp_ep_stats st;
	uint32_t inflight, wnd;
	unsigned una, next;
	char line[512];
	const char *t;
	if (!F.core[i])
		return;
	rcpc_core_stats(F.core[i], &st);
	(void)rcpc_core_busy(F.core[i]);
	if (a & 2)
		(void)rcpc_ack_owed(F.core[i], F.now);
	if (a & 4) {
		uint64_t d = rcpc_deadline(F.core[i]);
		if (d > F.now && d != UINT64_MAX && d - F.now < 10000000000ull) {
			F.now = d;
			timers();
		}
	}
	ch = rcpc_chan_by_peer(F.core[i], 1 - i);
	if (!ch)
		return;
	if (a & 8) /* what rcp_chan_reconnect does with the old incarnation */
		rcpc_chan_ban_epoch(ch, rcpc_chan_peer_epoch(ch) + ((a >> 4) & 1));
	(void)rcpc_chan_restarts(ch);
	rcpc_chan_window_stats(ch, &inflight, &wnd);
	rcpc_chan_debug(ch, line, sizeof line);
	t = strstr(line, "tx una ");
	if (!t || sscanf(t, "tx una %u next %u", &una, &next) != 2 || next - una > 1024u ||
	    inflight > 1024u) {
		fprintf(stderr, "fuzz_core: ring invariant: %s\n", line);
		__builtin_trap();
	}
}

static void op(unsigned o, unsigned cfg)
{
	unsigned a;
	struct queue *q;
	switch (o % 20) {
	case 0:
	case 1: /* deliver the head (most common: conversations progress) */
		a = get8();
		if (F.q[a & 1].n)
			deliver(a & 1, 0);
		break;
	case 2: /* deliver out of order */
		a = get8();
		q = &F.q[a & 1];
		if (q->n)
			deliver(a & 1, (int)((a >> 1) % (unsigned)q->n));
		break;
	case 3: deliver_all(1 + get8() % 8); break;
	case 4: /* drop */
		a = get8();
		q = &F.q[a & 1];
		if (q->n) {
			int k = (int)((a >> 1) % (unsigned)q->n);
			free(q->f[k].b);
			q->f[k] = q->f[--q->n];
		}
		break;
	case 5: /* duplicate */
		a = get8();
		q = &F.q[a & 1];
		if (q->n) {
			struct frame *f = &q->f[(a >> 1) % (unsigned)q->n];
			unsigned char *b = malloc(f->len ? f->len : 1);
			if (b) {
				memcpy(b, f->b, f->len);
				input(a & 1, 1 - (a & 1), 0, b, f->len);
				free(b);
				flush_all();
			}
		}
		break;
	case 6: advance(get8()); break;
	case 7: to_deadline(); break;
	case 8: op_send(0); break;
	case 9: op_send(1); break;
	case 10: op_send(2); break;
	case 11: op_recv(); break;
	case 12: /* cancel */
		a = get8();
		if (F.nreq)
			(void)rcpc_cancel(F.reqs[a % (unsigned)F.nreq].r, F.now);
		flush_all();
		break;
	case 13: /* probe */
	{
		struct rcp_status st;
		a = get8();
		if (F.core[a & 1])
			(void)rcpc_probe(F.core[a & 1], (a & 2) ? chan(a & 1) : NULL,
			                 (a & 4) ? RCP_ANY_TAG : (a >> 3) & 3, &st);
		break;
	}
	case 14: /* close */
		a = get8();
		if (F.core[a & 1]) {
			rcp_chan *ch = rcpc_chan_by_peer(F.core[a & 1], 1 - (a & 1));
			if (ch) {
				rcpc_chan_close(ch, F.now);
			}
		}
		break;
	case 15: /* restart a node: a new incarnation */
		a = get8() & 1;
		node_stop((int)a);
		F.gen[a]++;
		node_start((int)a, cfg);
		break;
	case 16: reap(); break;
	case 17: op_mutate(); break;
	case 18: op_inject(); break;
	case 19: op_misc(); break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned cfg;
	static const uint32_t mtus[4] = {512, 1500, 4096, 9000};

	memset(&F, 0, sizeof F);
	F.in = data;
	F.end = data + size;
	F.now = 1000000000ull;
	cfg = get8();
	rcpc_params_default(&F.p);
	F.p.crc = cfg & 1;
	F.p.mtu = mtus[(cfg >> 6) & 3];
	F.p.rx_frames = (cfg & 8) ? 8 : 32;
	F.p.reliable = (cfg & 16) != 0;
	F.p.rma_split = (cfg & 4) ? 0 : 16384;
	F.p.rma_min = 8192;
	F.p.inline_max = 256;
	F.p.send_buf = 64 * 1024;
	F.p.credits = 4;
	F.p.reorder_bytes = 32 * 1024;
	F.p.peer_timeout = 200000000ull;
	F.p.rto_init = 1000000;
	F.p.rto_max = 100000000;
	for (int i = 0; i < NNODES; i++)
		node_start(i, cfg);
	if (!(cfg & 32))
		(void)chan(1);
	(void)chan(0);

	while (F.in < F.end) {
		op(get8(), cfg);
		for (int i = 0; i < NNODES; i++)
			rma_run(i);
	}
	/* Let the conversation settle, so completions run too. */
	for (int r = 0; r < 64 && (F.nreq || F.q[0].n || F.q[1].n); r++) {
		deliver_all(4);
		to_deadline();
		for (int i = 0; i < NNODES; i++)
			rma_run(i);
		reap();
	}
	for (int i = 0; i < NNODES; i++)
		node_stop(i);
	for (int i = 0; i < NNODES; i++)
		for (int k = 0; k < F.q[i].n; k++)
			free(F.q[i].f[k].b);
	return 0;
}
