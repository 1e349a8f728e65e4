/*
 * rcpio/xfer.c — endpoints, progress thread, rpc calls, bulk moves (xfer.h).
 */
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rcp/bulk.h>
#include <rcp/nic.h>
#include <rcp/rpc.h>

#include "rcpio/pmap.h"
#include "rcpio/xfer.h"

struct q_in {
	uint64_t fid, block, gen;
	uint32_t me;
	int64_t offer;
	uint32_t stride, ahead;
};
struct q_out {
	uint32_t kind, owner, slot;
	uint64_t gen;
	struct rcp_bytes next; /* AHEAD struct rcpio_loc, host order */
};
struct r_in {
	uint64_t fid, block;
	uint32_t owner, slot;
};
struct p_in {
	uint64_t fid, block, gen;
	uint32_t slot, off;
	rcp_bulk *data;
};
struct c_in {
	uint64_t fid;
	uint32_t owner;
	struct rcp_bytes claims; /* struct rcpio_claim, host order */
};
struct c_out {
	struct rcp_bytes status; /* int32_t per claim */
};

RCP_PROC_DEFINE(proc_q_in, struct q_in, rcp_proc_u64(p, &v->fid); rcp_proc_u64(p, &v->block);
                rcp_proc_u64(p, &v->gen); rcp_proc_u32(p, &v->me); rcp_proc_i64(p, &v->offer);
                rcp_proc_u32(p, &v->stride); rcp_proc_u32(p, &v->ahead))
RCP_PROC_DEFINE(proc_q_out, struct q_out, rcp_proc_u32(p, &v->kind); rcp_proc_u32(p, &v->owner);
                rcp_proc_u32(p, &v->slot); rcp_proc_u64(p, &v->gen); rcp_proc_bytes(p, &v->next))
RCP_PROC_DEFINE(proc_r_in, struct r_in, rcp_proc_u64(p, &v->fid); rcp_proc_u64(p, &v->block);
                rcp_proc_u32(p, &v->owner); rcp_proc_u32(p, &v->slot))
RCP_PROC_DEFINE(proc_p_in, struct p_in, rcp_proc_u64(p, &v->fid); rcp_proc_u64(p, &v->block);
                rcp_proc_u64(p, &v->gen); rcp_proc_u32(p, &v->slot); rcp_proc_u32(p, &v->off);
                rcp_proc_bulk(p, &v->data))
RCP_PROC_DEFINE(proc_c_in, struct c_in, rcp_proc_u64(p, &v->fid); rcp_proc_u32(p, &v->owner);
                rcp_proc_bytes(p, &v->claims))
RCP_PROC_DEFINE(proc_c_out, struct c_out, rcp_proc_bytes(p, &v->status))

struct blob {
	char addr[128];
	uint64_t block, stride, hlen;
	/* The pool's file, for a peer of this host to map (pid 0: do not):
	 * the owner's pid and descriptor (/proc/PID/fd/FD), the file's
	 * identity, the block area's place in it.  Session 20. */
	uint64_t pid, fd, dev, ino, area_off, area_len;
	unsigned char handle[RCPIO_BLOB - 128 - 24 - 48];
};
_Static_assert(sizeof(struct blob) == RCPIO_BLOB, "blob size");

enum { C_QUERY, C_READY, C_EVICT, C_PUT, C_ALIVE, C_CLAIM, NCALLS };
static const char *const names[NCALLS] = {"rcpio.query", "rcpio.ready", "rcpio.evict",
                                          "rcpio.put",   "rcpio.alive", "rcpio.claim"};

/* The server addresses of one open file's ranks (rcpio_net_members). */
struct members {
	struct members *next;
	uint64_t fid;
	uint32_t me, size;
	char (*addr)[128];
};

struct rcpio_net {
	pthread_mutex_t *lock;
	rcpio_meta *meta;
	rcpio_pool *pool;
	/* server side: the progress thread's */
	rcp_ep *sep;
	rcp_bulk_ctx *sbulk;
	rcp_rpc *srpc;
	rcp_bulk *spool; /* the block area, READWRITE */
	struct members *mem;
	pthread_t thr;
	volatile int stop;
	/* client side: the application thread's while it is inside an
	 * rcpio_net_* call, the progress thread's between them (CL) */
	pthread_mutex_t cl;
	rcp_ep *cep;
	rcp_bulk_ctx *cbulk;
	rcp_rpc *crpc;
	unsigned char *stage; /* block + tag: bounce buffer of puts, pulled tags */
	rcp_bulk *cstage;
	uint64_t id[NCALLS];
	int outstanding, ready_err;
	int shared;              /* the client nic says RCP_NIC_CAP_SHARED_SEG */
	struct rcpio_pmap *maps; /* peers' pools mapped so far (application thread) */
	struct rcpio_net_stats st;
};

struct rcpio_peer {
	rcpio_net *n;
	rcp_chan *ch;
	rcp_bulk *pool;
	const unsigned char *area; /* its block area, mapped (NULL: pull by bulk) */
	uint64_t area_len;
};

/* ---- server ---------------------------------------------------------- */

/* ---- probes of fillers ----------------------------------------------
 *
 * A requester told MISS owns the block at its manager until it reports
 * READY; if it dies in between, the entry stays FILLING and every other
 * requester of the block is told BUSY for ever.  The manager learns of
 * the death the way an owner learns of a requester dying mid-put: from
 * the channel's failure.  When it answers BUSY it sends the filler an
 * empty rcpio.alive — to the filler's server endpoint, whose progress
 * thread answers while its application computes, so a live filler is
 * never taken for dead however long it takes to fill — one probe per
 * entry at a time (rcpio_meta_probe).  RCP_EPEER (the filler silent past
 * RCP_PEER_TIMEOUT, or restarted) drops the FILLING entry, so the next
 * query is a MISS and another requester fills the block.  Any other
 * status keeps the entry; the next BUSY probes again. */
struct probe {
	rcpio_net *n;
	uint64_t fid, block;
	uint32_t owner, slot;
};

static void probed(rcpio_net *n, const struct probe *pr, int status)
{
	int dead = status == RCP_EPEER;
	pthread_mutex_lock(n->lock);
	if (rcpio_meta_probed(n->meta, pr->fid, pr->block, pr->owner, pr->slot, !dead))
		n->st.fillers_lost++;
	pthread_mutex_unlock(n->lock);
}

static void probe_cb(rcp_rpc_req *req, int status, void *out, void *arg)
{
	struct probe *pr = arg;
	(void)req;
	(void)out;
	probed(pr->n, pr, status);
	free(pr);
}

static void probe(rcpio_net *n, uint64_t fid, uint64_t block, const struct rcpio_meta_reply *r)
{
	struct probe *pr;
	char addr[128] = "";
	rcp_chan *ch;
	int rc;

	pthread_mutex_lock(n->lock);
	if (!rcpio_meta_probe(n->meta, fid, block, r->owner, r->slot)) {
		pthread_mutex_unlock(n->lock);
		return;
	}
	for (struct members *m = n->mem; m; m = m->next)
		if (m->fid == fid) {
			if (r->owner < m->size && r->owner != m->me)
				memcpy(addr, m->addr[r->owner], sizeof addr);
			break;
		}
	n->st.probes++;
	pthread_mutex_unlock(n->lock);
	if (!(pr = malloc(sizeof *pr))) {
		struct probe tmp = {n, fid, block, r->owner, r->slot};
		probed(n, &tmp, RCP_ENOMEM);
		return;
	}
	*pr = (struct probe){n, fid, block, r->owner, r->slot};
	if (!addr[0])
		rc = RCP_ENOENT; /* not a member we know: nothing to ask */
	else if (!(rc = rcp_connect(n->sep, addr, &ch)))
		rc = rcp_rpc_forward(n->srpc, ch, n->id[C_ALIVE], NULL, NULL, -1, probe_cb, pr,
		                     NULL);
	if (rc) {
		probed(n, pr, rc == RCP_ECLOSED ? RCP_EPEER : rc);
		free(pr);
	}
}

static void h_alive(rcp_rpc_handle *h, void *arg)
{
	(void)arg;
	rcp_rpc_respond(h, NULL, 0);
}

static void h_query(rcp_rpc_handle *h, void *arg)
{
	rcpio_net *n = arg;
	struct q_in in;
	struct rcpio_meta_reply r;
	struct rcpio_loc next[RCPIO_AHEAD_MAX];
	struct q_out out;
	int rc = rcp_rpc_get_input(h, &in);
	memset(&r, 0, sizeof r);
	memset(&out, 0, sizeof out);
	if (!rc) {
		/* The locations of the next blocks this manager manages, on
		 * the way back: a reader going through the file then finds
		 * them by hint, one query for AHEAD blocks. */
		uint32_t ahead = in.ahead < RCPIO_AHEAD_MAX ? in.ahead : RCPIO_AHEAD_MAX;
		pthread_mutex_lock(n->lock);
		rc = rcpio_meta_query(n->meta, in.fid, in.block, in.me, in.offer, in.gen, &r);
		n->st.queries_served++;
		memset(next, 0, sizeof next);
		for (uint32_t i = 0; !rc && in.stride && i < ahead; i++) {
			struct rcpio_meta_reply a;
			if (rcpio_meta_peek(n->meta, in.fid,
			                    in.block + (uint64_t)(i + 1) * in.stride, &a))
				next[i] = (struct rcpio_loc){a.gen, a.owner, a.slot};
		}
		if (in.stride) {
			out.next.data = next;
			out.next.len = ahead * sizeof next[0];
		}
		pthread_mutex_unlock(n->lock);
		if (!rc && r.kind == RCPIO_BUSY)
			probe(n, in.fid, in.block, &r);
	}
	out.kind = r.kind;
	out.owner = r.owner;
	out.slot = r.slot;
	out.gen = r.gen;
	rcp_rpc_respond(h, rc ? NULL : &out, rc);
}

static void h_ready(rcp_rpc_handle *h, void *arg)
{
	rcpio_net *n = arg;
	struct r_in in;
	int rc = rcp_rpc_get_input(h, &in);
	if (!rc) {
		pthread_mutex_lock(n->lock);
		rc = rcpio_meta_ready(n->meta, in.fid, in.block, in.owner, in.slot);
		pthread_mutex_unlock(n->lock);
	}
	rcp_rpc_respond(h, NULL, rc);
}

static void h_evict(rcp_rpc_handle *h, void *arg)
{
	rcpio_net *n = arg;
	struct r_in in;
	int rc = rcp_rpc_get_input(h, &in);
	if (!rc) {
		pthread_mutex_lock(n->lock);
		rc = rcpio_meta_evict(n->meta, in.fid, in.block, in.owner, in.slot);
		pthread_mutex_unlock(n->lock);
	}
	rcp_rpc_respond(h, NULL, rc);
}

/* Deferred claims (session 21, xfer.h): each one is what a recovery claim
 * is at open — this rank's slot holds the block's bytes, VALID at once —
 * and gets the same answer: taken, or RCP_EADDRINUSE when the block
 * already has an entry (another owner, or a filler): the requester then
 * writes its bytes where a query says.  A malformed array is counted and
 * refused whole. */
static void h_claim(rcp_rpc_handle *h, void *arg)
{
	rcpio_net *n = arg;
	struct c_in in;
	struct c_out out;
	int32_t st[RCPIO_CLAIM_MAX];
	uint32_t k = 0;
	int rc = rcp_rpc_get_input(h, &in);
	memset(&out, 0, sizeof out);
	if (!rc && (in.claims.len % sizeof(struct rcpio_claim) ||
	            in.claims.len > sizeof(struct rcpio_claim) * RCPIO_CLAIM_MAX ||
	            (in.claims.len && !in.claims.data)))
		rc = RCP_EPROTO;
	pthread_mutex_lock(n->lock);
	if (rc == RCP_EPROTO)
		n->st.errors++;
	if (!rc)
		k = (uint32_t)(in.claims.len / sizeof(struct rcpio_claim));
	for (uint32_t i = 0; i < k; i++) {
		struct rcpio_claim c;
		memcpy(&c, (const unsigned char *)in.claims.data + i * sizeof c, sizeof c);
		st[i] = rcpio_meta_insert(n->meta, in.fid, c.block, in.owner, c.slot, c.gen);
	}
	n->st.claims_served += k;
	pthread_mutex_unlock(n->lock);
	out.status.data = st;
	out.status.len = k * sizeof st[0];
	rcp_rpc_respond(h, rc ? NULL : &out, rc);
}

struct put_job {
	rcpio_net *n;
	rcp_rpc_handle *h;
	rcp_bulk *remote;
	uint32_t slot, off, len;
};

/* The end of a put's pull, whatever its status: the pin and the held
 * bytes are given back here and only here.  A pull that failed — the
 * requester died or went silent mid-transfer (RCP_EPEER after
 * RCP_PEER_TIMEOUT) — may have landed part of its bytes: the range is
 * marked dirty all the same, so the file gets what the slot holds and
 * the two never disagree (a write cut short by a dead writer may leave
 * old and new bytes mixed, as a torn write would). */
static void put_done(void *arg, int status)
{
	struct put_job *j = arg;
	rcpio_net *n = j->n;
	struct rcpio_slot *sl;
	pthread_mutex_lock(n->lock);
	sl = rcpio_pool_slot(n->pool, j->slot);
	sl->pins--;
	n->st.held_bytes -= j->len;
	if (j->off < sl->lo)
		sl->lo = j->off;
	if (j->off + j->len > sl->hi)
		sl->hi = j->off + j->len;
	if (!status)
		n->st.puts_served++;
	else
		n->st.puts_failed++;
	pthread_mutex_unlock(n->lock);
	rcp_rpc_respond(j->h, NULL, status);
	rcp_bulk_free(j->remote);
	free(j);
}

/* The owner side of a remote write.  The slot is checked and pinned under
 * the lock, so it cannot be evicted or reused while the bytes land; a
 * committed slot is uncommitted (persistently) before it changes, so a
 * crash never leaves a committed entry over half-written data. */
static void h_put(rcp_rpc_handle *h, void *arg)
{
	rcpio_net *n = arg;
	struct p_in in;
	struct rcpio_slot *sl;
	struct put_job *j;
	uint64_t len;
	int rc;

	memset(&in, 0, sizeof in);
	if ((rc = rcp_rpc_get_input(h, &in))) {
		rcp_bulk_free(in.data);
		rcp_rpc_respond(h, NULL, rc);
		return;
	}
	len = rcp_bulk_size(in.data);
	pthread_mutex_lock(n->lock);
	sl = rcpio_pool_slot(n->pool, in.slot);
	if (!sl || !sl->used || sl->fid != in.fid || sl->block != in.block || sl->gen != in.gen ||
	    (uint64_t)in.off + len > rcpio_pool_block(n->pool))
		rc = RCP_ENOENT;
	else if (sl->committed) {
		if (!(rc = rcpio_pool_tx_begin(n->pool))) {
			rc = rcpio_pool_tx_slot_clear(n->pool, in.slot);
			if (rc)
				rcpio_pool_tx_abort(n->pool);
			else
				rcpio_pool_tx_commit(n->pool);
		}
	}
	if (!rc)
		sl->pins++;
	else
		n->st.puts_stale++;
	pthread_mutex_unlock(n->lock);
	if (rc || !(j = calloc(1, sizeof *j))) {
		if (!rc) {
			pthread_mutex_lock(n->lock);
			sl->pins--;
			pthread_mutex_unlock(n->lock);
			rc = RCP_ENOMEM;
		}
		rcp_bulk_free(in.data);
		rcp_rpc_respond(h, NULL, rc);
		return;
	}
	j->n = n;
	j->h = h;
	j->remote = in.data;
	j->slot = in.slot;
	j->off = in.off;
	j->len = (uint32_t)len;
	pthread_mutex_lock(n->lock);
	n->st.held_bytes += len;
	pthread_mutex_unlock(n->lock);
	rc = rcp_bulk_transfer(n->sbulk, rcp_rpc_handle_chan(h), RCP_BULK_PULL, in.data, 0,
	                       n->spool, (uint64_t)in.slot * rcpio_pool_stride(n->pool) + in.off,
	                       len, put_done, j, NULL);
	if (rc)
		put_done(j, rc);
}

/* ---- the client endpoint between calls ---------------------------------
 *
 * The application thread drives its endpoint only inside rcpio's calls;
 * between them it computes or waits in MPI, for as long as the program
 * likes — on a crowded machine, seconds in a barrier for the slowest
 * rank.  An endpoint nobody drives still owes things: the ack of the last
 * reply it took (delayed, ack_delay), answers to the manager's pings,
 * the resend of a lost frame, the echo of a server's cookie challenge (a
 * READY that is the first message on its channel).  Left owing, a
 * manager holding an unacked reply takes the silent rank for dead after
 * RCP_PEER_TIMEOUT and fails its channel: the rank's next query ends
 * with RCP_EPEER (the MPI-IO call fails), its READY never arrives, and
 * every other rank asking for that block is told BUSY for ever — the
 * filler's server endpoint answers the probes, so it is never given up
 * (docs/rcpio.md, the open finding of session 18, explained in session
 * 19: a short RCP_PEER_TIMEOUT reproduced both).  So the progress thread
 * tends the client endpoint between calls: CL is held by the application
 * thread inside every client call (a sync wait, a bulk transfer and the
 * READY callbacks run under it), and the progress thread, after each of
 * its own rounds, takes it only if it is free (never waits for it: a call
 * in progress drives the endpoint itself), takes in what came, and fires
 * the client's timers if any is due: rcp_progress alone looks at the
 * clock only now and then when idle, rcp_ep_arm runs due timers and
 * sends the acks owed.  The thread's rounds end at the client's next
 * deadline, TICK_NS at the latest (a ping every RCP_PEER_TIMEOUT/8 is
 * answered within TICK_NS) and TICK_MIN_NS at the earliest (a delayed ack
 * may go 1 ms late: the thread does not wake every 50 us while the
 * application makes calls). */
#define TICK_NS     (20 * 1000 * 1000)
#define TICK_MIN_NS (1000 * 1000)

/* Returns when the progress thread should look again, ns from now. */
static int64_t tend_client(rcpio_net *n)
{
	int64_t t = TICK_NS;
	if (pthread_mutex_trylock(&n->cl))
		return t; /* a call is driving it */
	(void)rcp_rpc_progress(n->crpc);
	if (!rcp_ep_timeout_ns(n->cep) && rcp_ep_arm(n->cep) == RCP_EAGAIN)
		(void)rcp_rpc_progress(n->crpc); /* what the timers completed */
	t = rcp_ep_timeout_ns(n->cep);
	pthread_mutex_unlock(&n->cl);
	if (t < 0 || t > TICK_NS)
		return TICK_NS;
	return t > TICK_MIN_NS ? t : TICK_MIN_NS;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The server's rounds, and the client's tending when it is due (not after
 * every round of a busy server: a look at the client costs a system call
 * on udp). */
static void *progress(void *arg)
{
	rcpio_net *n = arg;
	int64_t due = now_ns();
	while (!n->stop) {
		int64_t now = now_ns();
		int rc;
		if (now >= due)
			due = now + tend_client(n);
		rc = rcp_rpc_loop(n->srpc, due - now < TICK_NS ? due - now : TICK_NS);
		if (rc < 0 && rc != RCP_ETIMEDOUT)
			n->st.errors++;
	}
	return NULL;
}

/* ---- setup ----------------------------------------------------------- */

static int ep_addr(const char *transport, const char *side, char *buf, size_t len)
{
	if (!transport || !strcmp(transport, "shm")) {
		/* The pid, and a count: tests run several runtimes in one
		 * process (tests/test_rcpio_map). */
		static atomic_uint seq;
		snprintf(buf, len, "shm:rcpio-%d-%u%s", (int)getpid(), atomic_fetch_add(&seq, 1),
		         side);
		return 0;
	}
	if (!strcmp(transport, "udp")) {
		/* Reachable from other hosts: the address the host name resolves to. */
		char host[64];
		struct addrinfo hints, *ai = NULL;
		memset(&hints, 0, sizeof hints);
		hints.ai_family = AF_INET;
		if (gethostname(host, sizeof host) || getaddrinfo(host, NULL, &hints, &ai) || !ai) {
			snprintf(buf, len, "udp:");
			return 0;
		}
		getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof host, NULL, 0,
		            NI_NUMERICHOST);
		freeaddrinfo(ai);
		snprintf(buf, len, "udp:%s:0", host);
		return 0;
	}
	return RCP_EINVAL;
}

static int open_side(rcpio_net *n, const char *transport, int server, rcp_ep **ep,
                     rcp_bulk_ctx **bulk, rcp_rpc **rpc)
{
	struct rcp_ep_config ec;
	struct rcp_rpc_config rcf;
	char addr[128];
	int rc;
	memset(&ec, 0, sizeof ec);
	memset(&rcf, 0, sizeof rcf);
	ec.flags = server ? RCP_EP_ACCEPT : 0;
	if ((rc = ep_addr(transport, server ? "s" : "c", addr, sizeof addr)) ||
	    (rc = rcp_ep_open(addr, &ec, ep)) || (rc = rcp_bulk_ctx_open(*ep, bulk)))
		return rc;
	rcf.bulk = *bulk;
	rcf.timeout_ns = -1;
	if ((rc = rcp_rpc_create(*ep, &rcf, rpc)))
		return rc;
	rc = rcp_rpc_register(*rpc, names[C_QUERY], proc_q_in, proc_q_out, &n->id[C_QUERY]);
	if (!rc)
		rc = rcp_rpc_register(*rpc, names[C_READY], proc_r_in, NULL, &n->id[C_READY]);
	if (!rc)
		rc = rcp_rpc_register(*rpc, names[C_EVICT], proc_r_in, NULL, &n->id[C_EVICT]);
	if (!rc)
		rc = rcp_rpc_register(*rpc, names[C_PUT], proc_p_in, NULL, &n->id[C_PUT]);
	if (!rc)
		rc = rcp_rpc_register(*rpc, names[C_ALIVE], NULL, NULL, &n->id[C_ALIVE]);
	if (!rc)
		rc = rcp_rpc_register(*rpc, names[C_CLAIM], proc_c_in, proc_c_out, &n->id[C_CLAIM]);
	return rc;
}

int rcpio_net_start(const char *transport, pthread_mutex_t *lock, rcpio_meta *meta,
                    rcpio_pool *pool, rcpio_net **out)
{
	rcpio_net *n = calloc(1, sizeof *n);
	rcp_rpc_handler hs[NCALLS] = {h_query, h_ready, h_evict, h_put, h_alive, h_claim};
	size_t area_len, stage_len = rcpio_pool_stride(pool);
	void *area;
	int rc;

	if (!n)
		return RCP_ENOMEM;
	n->lock = lock;
	n->meta = meta;
	n->pool = pool;
	pthread_mutex_init(&n->cl, NULL);
	if ((rc = open_side(n, transport, 1, &n->sep, &n->sbulk, &n->srpc)) ||
	    (rc = open_side(n, transport, 0, &n->cep, &n->cbulk, &n->crpc)))
		goto fail;
	for (int i = 0; i < NCALLS; i++)
		if ((rc = rcp_rpc_set_handler(n->srpc, n->id[i], hs[i], n)))
			goto fail;
	area = rcpio_pool_area(pool, &area_len);
	if ((rc = rcp_bulk_create(n->sbulk, 1, &area, &area_len, RCP_BULK_READWRITE, &n->spool)))
		goto fail;
	if (!(n->stage = malloc(stage_len))) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	{
		void *p = n->stage;
		if ((rc = rcp_bulk_create(n->cbulk, 1, &p, &stage_len, RCP_BULK_READWRITE,
		                          &n->cstage)))
			goto fail;
	}
	{
		struct rcp_nic_info ni;
		n->shared =
		    !rcp_nic_query(rcp_ep_nic(n->cep), &ni) && (ni.caps & RCP_NIC_CAP_SHARED_SEG);
	}
	if (pthread_create(&n->thr, NULL, progress, n)) {
		rc = RCP_ESYS;
		goto fail;
	}
	*out = n;
	return 0;
fail:
	n->stop = 2; /* no thread */
	rcpio_net_stop(n);
	return rc;
}

void rcpio_net_stop(rcpio_net *n)
{
	if (!n)
		return;
	if (n->stop != 2) {
		n->stop = 1;
		pthread_join(n->thr, NULL);
	}
	rcp_bulk_free(n->cstage);
	rcp_bulk_free(n->spool);
	rcp_rpc_destroy(n->crpc);
	rcp_rpc_destroy(n->srpc);
	rcp_bulk_ctx_close(n->cbulk);
	rcp_bulk_ctx_close(n->sbulk);
	rcp_ep_close(n->cep);
	rcp_ep_close(n->sep);
	while (n->mem) {
		struct members *m = n->mem;
		n->mem = m->next;
		free(m->addr);
		free(m);
	}
	rcpio_pmap_free(&n->maps);
	free(n->stage);
	pthread_mutex_destroy(&n->cl);
	free(n);
}

int rcpio_net_members(rcpio_net *n, uint64_t fid, uint32_t me, uint32_t size, const void *blobs)
{
	struct members *m = calloc(1, sizeof *m);
	if (!m || !(m->addr = calloc(size ? size : 1, sizeof *m->addr))) {
		free(m);
		return RCP_ENOMEM;
	}
	m->fid = fid;
	m->me = me;
	m->size = size;
	for (uint32_t i = 0; i < size; i++) {
		/* a blob begins with its server address */
		memcpy(m->addr[i], (const unsigned char *)blobs + (size_t)i * RCPIO_BLOB,
		       sizeof m->addr[i]);
		m->addr[i][sizeof m->addr[i] - 1] = 0;
	}
	pthread_mutex_lock(n->lock);
	m->next = n->mem;
	n->mem = m;
	pthread_mutex_unlock(n->lock);
	return 0;
}

void rcpio_net_members_drop(rcpio_net *n, uint64_t fid)
{
	struct members *m = NULL;
	pthread_mutex_lock(n->lock);
	for (struct members **pm = &n->mem; *pm; pm = &(*pm)->next)
		if ((*pm)->fid == fid) {
			m = *pm;
			*pm = m->next;
			break;
		}
	pthread_mutex_unlock(n->lock);
	if (m)
		free(m->addr);
	free(m);
}

int rcpio_net_blob(rcpio_net *n, void *out)
{
	struct blob b;
	size_t len = sizeof b.handle;
	int rc;
	memset(&b, 0, sizeof b);
	if ((rc = rcp_ep_addr(n->sep, b.addr, sizeof b.addr)) ||
	    (rc = rcp_bulk_serialize(n->spool, b.handle, &len)))
		return rc;
	b.hlen = len;
	b.block = rcpio_pool_block(n->pool);
	b.stride = rcpio_pool_stride(n->pool);
	{
		struct stat st;
		size_t alen;
		(void)rcpio_pool_area(n->pool, &alen);
		if (!fstat(rcpio_pool_fd(n->pool), &st)) {
			b.pid = (uint64_t)getpid();
			b.fd = (uint64_t)rcpio_pool_fd(n->pool);
			b.dev = (uint64_t)st.st_dev;
			b.ino = (uint64_t)st.st_ino;
			b.area_off = rcpio_pool_area_offset(n->pool);
			b.area_len = alen;
		}
	}
	memcpy(out, &b, sizeof b);
	return 0;
}

/* ---- reads from a mapped pool (the design: rcpio/pmap.c) -------------- */

static const unsigned char *peer_area(rcpio_net *n, const struct blob *b)
{
	uint64_t need = b->area_off + b->area_len;
	const unsigned char *base;
	int fresh = 0;
	if (!n->shared || !b->pid || !b->area_len || need < b->area_off)
		return NULL;
	if (!(base = rcpio_pmap_get(&n->maps, b->pid, b->fd, b->dev, b->ino, need, &fresh)))
		return NULL;
	n->st.pools_mapped += (uint64_t)fresh;
	return base + b->area_off;
}

int rcpio_net_peer(rcpio_net *n, const void *blob, rcpio_peer **out)
{
	struct blob b;
	rcpio_peer *p;
	int rc;
	memcpy(&b, blob, sizeof b);
	b.addr[sizeof b.addr - 1] = 0;
	if (b.hlen > sizeof b.handle || b.block != rcpio_pool_block(n->pool) ||
	    b.stride != rcpio_pool_stride(n->pool))
		return RCP_EPROTO;
	if (!(p = calloc(1, sizeof *p)))
		return RCP_ENOMEM;
	p->n = n;
	if ((p->area = peer_area(n, &b)))
		p->area_len = b.area_len;
	pthread_mutex_lock(&n->cl);
	if ((rc = rcp_connect(n->cep, b.addr, &p->ch)) ||
	    (rc = rcp_bulk_deserialize(n->cbulk, b.handle, b.hlen, &p->pool)))
		free(p);
	else
		*out = p;
	pthread_mutex_unlock(&n->cl);
	return rc;
}

void rcpio_net_peer_free(rcpio_peer *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->n->cl);
	rcp_bulk_free(p->pool);
	pthread_mutex_unlock(&p->n->cl);
	free(p);
}

/* ---- client ---------------------------------------------------------- */

/* A call and its wait; the caller holds CL. */
static int call(rcpio_net *n, rcpio_peer *p, int c, const void *in, void *out)
{
	rcp_rpc_req *req;
	int rc = rcp_rpc_forward(n->crpc, p->ch, n->id[c], in, out, -1, NULL, NULL, &req);
	if (rc)
		return rc;
	rc = rcp_rpc_wait(req, -1);
	rcp_rpc_req_free(req);
	return rc;
}

int rcpio_net_query_ahead(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t me,
                          int64_t offer, uint64_t gen, struct rcpio_meta_reply *r, uint32_t stride,
                          uint32_t ahead, struct rcpio_loc *next)
{
	struct q_in in = {fid, block, gen, me, offer, stride, ahead};
	struct q_out out;
	rcp_rpc_req *req;
	int rc;
	if (ahead > RCPIO_AHEAD_MAX)
		return RCP_EINVAL;
	memset(&out, 0, sizeof out);
	pthread_mutex_lock(&n->cl);
	if ((rc = rcp_rpc_forward(n->crpc, mgr->ch, n->id[C_QUERY], &in, &out, -1, NULL, NULL,
	                          &req))) {
		pthread_mutex_unlock(&n->cl);
		return rc;
	}
	rc = rcp_rpc_wait(req, -1);
	n->st.queries_sent++;
	if (!rc && out.kind > RCPIO_NONE)
		rc = RCP_EPROTO;
	if (!rc) {
		r->kind = out.kind;
		r->owner = out.owner;
		r->slot = out.slot;
		r->gen = out.gen;
		/* (the bytes point into the reply: copied before it is freed;
		 * a short or missing array reads as no locations) */
		if (next) {
			memset(next, 0, ahead * sizeof *next);
			if (out.next.len <= ahead * sizeof *next && out.next.data)
				memcpy(next, out.next.data, out.next.len);
		}
	}
	rcp_rpc_req_free(req);
	pthread_mutex_unlock(&n->cl);
	return rc;
}

int rcpio_net_query(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t me,
                    int64_t offer, uint64_t gen, struct rcpio_meta_reply *r)
{
	return rcpio_net_query_ahead(n, mgr, fid, block, me, offer, gen, r, 0, 0, NULL);
}

int rcpio_net_evict(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t owner,
                    uint32_t slot)
{
	struct r_in in = {fid, block, owner, slot};
	int rc;
	pthread_mutex_lock(&n->cl);
	n->st.evicts_sent++;
	rc = call(n, mgr, C_EVICT, &in, NULL);
	pthread_mutex_unlock(&n->cl);
	return rc;
}

int rcpio_net_claim(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint32_t owner,
                    const struct rcpio_claim *claims, uint32_t count, int32_t *status)
{
	struct c_in in = {fid, owner, {claims, count * sizeof *claims}};
	struct c_out out;
	rcp_rpc_req *req;
	int rc;
	if (count > RCPIO_CLAIM_MAX)
		return RCP_EINVAL;
	memset(&out, 0, sizeof out);
	pthread_mutex_lock(&n->cl);
	if (!(rc = rcp_rpc_forward(n->crpc, mgr->ch, n->id[C_CLAIM], &in, &out, -1, NULL, NULL,
	                           &req))) {
		rc = rcp_rpc_wait(req, -1);
		n->st.claims_sent++;
		/* One status a claim, or the reply is not ours to trust (the
		 * statuses point into it: copied before it is freed). */
		if (!rc &&
		    (out.status.len != count * sizeof *status || (count && !out.status.data)))
			rc = RCP_EPROTO;
		if (!rc && count)
			memcpy(status, out.status.data, count * sizeof *status);
		rcp_rpc_req_free(req);
	}
	pthread_mutex_unlock(&n->cl);
	return rc;
}

static void ready_cb(rcp_rpc_req *req, int status, void *out, void *arg)
{
	rcpio_net *n = arg;
	(void)req;
	(void)out;
	n->outstanding--;
	if (status && !n->ready_err)
		n->ready_err = status;
}

int rcpio_net_ready(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t owner,
                    uint32_t slot)
{
	struct r_in in = {fid, block, owner, slot};
	int rc;
	pthread_mutex_lock(&n->cl);
	rc = rcp_rpc_forward(n->crpc, mgr->ch, n->id[C_READY], &in, NULL, -1, ready_cb, n, NULL);
	if (!rc) {
		n->outstanding++;
		n->st.readies_sent++;
	}
	pthread_mutex_unlock(&n->cl);
	return rc;
}

int rcpio_net_drain(rcpio_net *n)
{
	int rc = 0;
	pthread_mutex_lock(&n->cl);
	while (n->outstanding > 0)
		if ((rc = rcp_rpc_loop(n->crpc, -1)) < 0 && rc != RCP_ETIMEDOUT)
			break;
	if (rc >= 0 || rc == RCP_ETIMEDOUT) {
		rc = n->ready_err;
		n->ready_err = 0;
	}
	pthread_mutex_unlock(&n->cl);
	return rc;
}

void rcpio_net_poll(rcpio_net *n)
{
	pthread_mutex_lock(&n->cl);
	rcp_rpc_progress(n->crpc);
	pthread_mutex_unlock(&n->cl);
}

int rcpio_net_put(rcpio_net *n, rcpio_peer *owner, uint64_t fid, uint64_t block, uint32_t slot,
                  uint64_t gen, uint32_t off, const void *src, size_t len)
{
	struct p_in in = {fid, block, gen, slot, off, NULL};
	rcp_bulk *sub;
	void *p = n->stage;
	int rc;
	pthread_mutex_lock(&n->cl);
	memcpy(n->stage, src, len);
	/* A handle of exactly LEN bytes: the owner pulls all of it. */
	if ((rc = rcp_bulk_create(n->cbulk, 1, &p, &len, RCP_BULK_READ_ONLY, &sub))) {
		pthread_mutex_unlock(&n->cl);
		return rc;
	}
	in.data = sub;
	rc = call(n, owner, C_PUT, &in, NULL);
	rcp_bulk_free(sub);
	n->st.puts_sent++;
	if (!rc)
		n->st.put_bytes += len;
	pthread_mutex_unlock(&n->cl);
	return rc;
}

/* A bulk pull and its wait; the caller holds CL. */
static int move(rcpio_net *n, rcpio_peer *p, uint64_t roff, rcp_bulk *local, uint64_t loff,
                uint64_t len)
{
	rcp_bulk_op *op;
	int st = 0;
	int rc = rcp_bulk_transfer(n->cbulk, p->ch, RCP_BULK_PULL, p->pool, roff, local, loff, len,
	                           NULL, NULL, &op);
	if (rc)
		return rc;
	rc = rcp_bulk_wait(op, -1, &st);
	return rc ? rc : st;
}

/* Data first, tag second: the owner clears a slot's tag before it reuses
 * the slot and sets it only after the data is in place, so a tag that
 * still names our block after the data was read proves the data was the
 * block's (docs/rcpio.md, "reads without the owner").  The data goes
 * straight into DST (a handle over it: no copy through the stage, ~10%
 * more re-read bandwidth from another rank's pool, docs/results.md);
 * bytes that fail the tag check are the caller's to discard: it asks
 * again and overwrites them. */
int rcpio_net_pull(rcpio_net *n, rcpio_peer *owner, uint64_t fid, uint64_t block, uint32_t slot,
                   uint64_t gen, uint32_t off, void *dst, size_t len)
{
	size_t bs = rcpio_pool_block(n->pool);
	uint64_t base = (uint64_t)slot * rcpio_pool_stride(n->pool);
	rcp_bulk *h;
	int rc;
	if (owner->area) {
		/* Reads from a mapped pool (above): no endpoint, no lock. */
		unsigned char tag[RCPIO_TAG];
		if (off > bs || len > bs - off || base + bs + RCPIO_TAG > owner->area_len)
			return RCP_ERANGE;
		memcpy(dst, owner->area + base + off, len);
		atomic_thread_fence(memory_order_acquire);
		memcpy(tag, owner->area + base + bs, sizeof tag);
		n->st.pulls_mapped++;
		if (!rcpio_tag_ok(tag, fid, block, gen))
			return RCP_ENOENT;
		n->st.pull_bytes += len;
		return 0;
	}
	pthread_mutex_lock(&n->cl);
	if ((rc = rcp_bulk_create(n->cbulk, 1, &dst, &len, RCP_BULK_READWRITE, &h)))
		goto out;
	rc = move(n, owner, base + off, h, 0, len);
	rcp_bulk_free(h);
	if (rc || (rc = move(n, owner, base + bs, n->cstage, bs, 40)))
		goto out;
	n->st.pulls++;
	if (!rcpio_tag_ok(n->stage + bs, fid, block, gen))
		rc = RCP_ENOENT;
	else
		n->st.pull_bytes += len;
out:
	pthread_mutex_unlock(&n->cl);
	return rc;
}

void rcpio_net_get_stats(rcpio_net *n, struct rcpio_net_stats *st)
{
	pthread_mutex_lock(n->lock);
	*st = n->st;
	pthread_mutex_unlock(n->lock);
}
