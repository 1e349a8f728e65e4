/*
 * pvm-glue/glue.h — internal declarations shared by the pvm-glue files
 * (see pvm-glue/glue.c for the design).  Internal symbols carry the
 * `pvmrcpi_` prefix and are hidden from the shared library.
 */
#ifndef PVMRCP_GLUE_H
#define PVMRCP_GLUE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <pvm3.h>
#include <rcp/rcp.h>

#define PRI __attribute__((visibility("hidden")))

/* ---- the real libpvm3 functions (dlsym(RTLD_NEXT, ...)) ---- */
struct pvmrcpi_real {
	int (*psend)(int, int, void *, int, int);
	int (*precv)(int, int, void *, int, int, int *, int *, int *);
	int (*send)(int, int);
	int (*mcast)(int *, int, int);
	int (*recv)(int, int);
	int (*nrecv)(int, int);
	int (*trecv)(int, int, struct timeval *);
	int (*probe)(int, int);
	int (*bufinfo)(int, int *, int *, int *);
	int (*getminfo)(int, struct pvmminfo *);
	int (*freebuf)(int);
	int (*exit)(void);
	/* Optional, libpvm3's own internals (exported by its shared
	 * library, declared in no header): the descriptor of a buffer and
	 * "compute its length", which pvm_send does before sending and
	 * pvm_pkmesg does not; an in-place buffer's length is 0 until then
	 * (pksend.c).  NULL where absent: in-place messages then go by pvmd. */
	void *(*midtobuf)(int);
	int (*pmsg_setlen)(void *);
	void (*pmsg_unref)(void *);
	/* Optional, libpvm3's current context, the variable pvm_getcontext
	 * returns (exported, declared in no header).  psend and precv read it
	 * on every call: 24 instructions less each than the call, which also
	 * puts a trace event of its own in a traced program's log. */
	const int *myctx;
};
PRI extern struct pvmrcpi_real pvmrcpi_real;
/* The current context: pvm_getcontext()'s value. */
static inline int pvmrcpi_ctx(void)
{
	return pvmrcpi_real.myctx ? *pvmrcpi_real.myctx : pvm_getcontext();
}
/* Resolves pvmrcpi_real once; 0 or -1 (libpvm3 not found after us). */
PRI int pvmrcpi_resolve(void);

/* ---- RCP tags ----
 * Data: (ctx << 31) | tag, ctx in [0, 2^30), tag in [0, 2^31); bit 62 set
 * (PR_PACKED): a pvm_send'd buffer, its bytes as pvm_pkmesg writes them in
 * a PvmDataRaw buffer (pksend.c), rebuilt with pvm_upkmesg (recv.c); clear:
 * psend data.  Control: bit 63 set. */
#define PR_CTRL   (1ull << 63)
#define PR_PACKED (1ull << 62)
/* Bit 61 set (PR_MCNET): a stub {id, length} of a message sent by IP
 * multicast, in its place in the channel's order (pvm-glue/mcast.c). */
#define PR_MCNET (1ull << 61)
/* HELLO and BARRIER also carry {stock messages sent to the receiver in all
 * contexts, FENCEs sent}; FENCE carries its number (1, 2, ...): with them
 * the receiver knows when no stock message can be pending (pr_quiet). */
#define PR_HELLO     (PR_CTRL | 1) /* first on a channel: {tid, total, fences} */
#define PR_BARRIER   (PR_CTRL | 2) /* {ctx, stock sent so far in ctx, total, fences} */
#define PR_FENCE     (PR_CTRL | 3) /* {fence number}; acked before a stock send */
#define PR_FENCE_LEN 16            /* sent by rcp_issend: completes on ack */

static inline int pr_encodable(int ctx, int tag)
{
	return ctx >= 0 && ctx < (1 << 30) && tag >= 0;
}
static inline uint64_t pr_rtag(int ctx, int tag)
{
	return ((uint64_t)(uint32_t)ctx << 31) | (uint32_t)tag;
}
static inline int pr_rtag_ctx(uint64_t t)
{
	return (int)((t >> 31) & 0x3fffffff);
}
static inline int pr_rtag_tag(uint64_t t)
{
	return (int)(t & 0x7fffffff);
}

/* A task id (not a pvmd, group or multicast address), as libpvm3's
 * TIDISTASK: stock pvm_mcast refuses the whole list if one is not. */
static inline int pr_tid_is_task(int tid)
{
	return !((unsigned)tid & 0xc0000000u) && (tid & 0x3ffff);
}

/* ---- per-peer state ---- */
struct pr_ctxstate {
	int ctx;
	/* sender side (messages we send to this peer) */
	uint32_t stock_sent;   /* by stock PVM, in this context */
	uint32_t barrier_sent; /* stock_sent value last announced by BARRIER */
	/* receiver side (messages this peer sends us) */
	uint32_t drained; /* stock messages moved to the held queue */
	uint32_t cur_req; /* from the last BARRIER processed in order */
};

enum { PR_UNKNOWN, PR_RCP, PR_STOCK };

struct pr_peer {
	int tid;
	int route; /* PR_UNKNOWN, PR_RCP, PR_STOCK */
	rcp_chan *ch;
	rcp_ep *ep; /* the endpoint CH belongs to */
	int hello_sent;
	int rcp_dirty; /* RCP data sent since the last FENCE */
	/* the restart watch on watch_ch (rcp_chan_watch; NULL: none) and the
	 * channel's restart count when it was posted; lost: a restart while
	 * rcp_dirty, or a copied send to it failed (send.c, LOST SENDS) */
	rcp_req *watch;
	rcp_chan *watch_ch;
	unsigned watch_restarts;
	int lost;
	int dead;
	int mc_how;        /* how the last pmcast/mcast reached it (pvm-glue/mcast.c) */
	unsigned restarts; /* rcp_chan_restarts(ch) when this task took ch */
	/* sender side, all contexts: stock messages sent to this peer, FENCEs
	 * sent, and the values the last HELLO/BARRIER told */
	uint32_t stock_total, fences, total_told, fences_told;
	/* receiver side (what this peer sends us) */
	int hello_recv;       /* its HELLO was processed */
	uint32_t ann_total;   /* its stock total, from its last HELLO/BARRIER in order */
	uint32_t fence_cov;   /* its FENCE count, idem */
	uint32_t fence_seen;  /* highest FENCE number taken (in any order) */
	uint32_t drained_tot; /* its stock messages moved to the held queue */
	/* the RCP tag of the last psend data taken by precv's fast path (+1;
	 * 0: none yet): a precv of any tag posts its receive ahead for it
	 * (recv.c, the fast path) */
	uint64_t last_rtag1;
	uint64_t recheck_ns; /* PR_STOCK: when to look in the mailbox again */
	uint64_t backoff_ns;
	/* FAST PATHS (below): psend's and precv's checks passed in context
	 * send_ctx / recv_ctx while pvmrcpi_st.gen was send_gen / recv_gen
	 * (0: never) */
	uint64_t send_gen, recv_gen;
	int send_ctx, recv_ctx;
	struct pr_ctxstate *cs;
	int ncs, capcs;
	struct pr_peer *hnext;
};

/* ---- held messages (received from the transports, not yet delivered) ---- */
struct pr_msg {
	struct pr_msg *next, *prev;
	int src, tag, ctx;
	int stock;    /* 1: a libpvm3 buffer (bufid), 0: RCP data */
	int packed;   /* RCP data of a packed message (PR_PACKED) */
	uint32_t key; /* stock: index k (1-based); RCP: requirement r */
	int bufid;    /* stock buffer, or RCP data packed for pvm_recv (0: none yet) */
	void *data;   /* RCP data */
	size_t len;   /* bytes */
};

/* No stock message from P can precede its next RCP message or be waiting
 * in libpvm3 undrained: P is relinked (HELLO), every stock message it told
 * us of has been moved to the held queue, and no FENCE (a stock message
 * may follow) came after its last HELLO/BARRIER.  A sender FENCEs before
 * any stock message that follows RCP data and waits for the FENCE's ack,
 * so the FENCE is in our RCP queue before such a stock message can exist. */
static inline int pr_quiet(const struct pr_peer *p)
{
	return p->hello_recv && p->fence_seen == p->fence_cov && p->drained_tot == p->ann_total;
}

/* ---- global state ---- */
enum { PR_OFF, PR_UNINIT, PR_INITING, PR_READY, PR_CLOSED };

/* Endpoints: one per transport, shm first (same host), udp (other hosts),
 * xdp (other hosts, RCP_TRANSPORT=xdp, where this task owns the link),
 * verbs (other hosts, RCP_TRANSPORT=verbs, where PVMRCP_VERBS_ADDR names
 * an HCA port that opens). */
#define PR_MAXEP 4
enum { PR_SHM, PR_UDP, PR_XDP, PR_VERBS };

struct pr_state {
	int state;
	int mytid;
	rcp_ep *eps[PR_MAXEP]; /* by transport; NULL: not open */
	int multihost;         /* the VM has (or pretends to have) several hosts */
	const char *stats;     /* PVMRCP_STATS: counts at pvm_exit, to stderr or a file */
	int all_remote;        /* PVMRCP_MULTIHOST=remote: every peer is "another host" */
	int pvm_readable;      /* a sleep woke on a libpvm3 socket: drain soon */
	char addr[2 * RCP_NIC_ADDRSTR_MAX + 2]; /* published: addresses, space-separated */
	char mbox[64];
	struct pr_peer **htab;     /* tid -> peer */
	struct pr_peer *last_peer; /* the last one found (pvmrcpi_peer) */
	uint64_t gen;              /* FAST PATHS: moves on every change they read (from 1) */
	unsigned hcap;
	struct pr_msg held; /* list head */
	int nheld;
	uint64_t last_drain_ns;
	uint64_t stash_ns; /* sends wait this long before taking others' messages */
	uint64_t live_ns;  /* liveness check period while blocked */
	int rcp_liveness;  /* RCP_PEER_TIMEOUT set: RCP, not pvmd, says a remote task is gone */
	uint64_t order_ns; /* longest wait for stock messages an RCP one follows */
	size_t copy_max;   /* psend copies messages up to this size and returns */
	size_t copy_bytes; /* PVMRCP_COPY_BYTES: copied sends in flight before a send waits */
	/* buffers made for pvm_recv of RCP messages: bufid -> info */
	struct pr_syn *syn;
	int nsyn, capsyn;
};
PRI extern struct pr_state pvmrcpi_st;

struct pr_syn {
	int bufid, len, tag, src, ctx;
};

/* FAST PATHS (session 21).  A psend or precv of a small message to or
 * from the task last looked up, after the first, passes the same checks
 * call after call: RCP route, channel, not dead, nothing lost, HELLO sent
 * and no stock message since the last BARRIER (psend); quiet, nothing
 * held, the context's BARRIER requirement met (precv).  Read one by one,
 * with the calls and frames around them, they were half of the glue's
 * own 326 instructions per psend+precv (callgrind pvm row, FUNCS=1;
 * 158 after, session 21).  So once the slow path has passed them it records
 * the generation S.gen in the peer (send_gen/recv_gen, with the context),
 * and the next call with the same peer and context that finds S.gen
 * unchanged skips them.  S.gen moves (pr_changed) on every write to a
 * field the checks read, for any peer: route, ch, dead, lost, watch_ch,
 * hello_sent, the stock, fence and told counters and a context's
 * counters (send.c, ctrl.c, glue.c), the held queue, drained counts and
 * pr_quiet's inputs (recv.c, ctrl.c), and the endpoints' close.  Those
 * writes are the rare events (first contact, stock messages, FENCE and
 * BARRIER, failures), so a steady exchange keeps its generation; a
 * writer that forgets pr_changed lets a fast call act on stale checks
 * (pvmt fast-stock catches it at a stock send and on the held queue). */
static inline void pr_changed(void)
{
	pvmrcpi_st.gen++;
}

/* glue.c */
PRI int pvmrcpi_ready(void); /* 1 if RCP is up (initialising on first use) */
/* One line: messages this task sent over RCP (psend/pmcast copies,
 * packed) and by pvmd; to stderr, or appended to the file PVMRCP_STATS
 * names (a path: with a '/') in one write, so that the lines of many
 * tasks never mix (PVMRCP_STATS, at pvm_exit). */
PRI void pvmrcpi_stats_print(void);
/* Packed messages from the wire that were not well formed (recv.c). */
PRI extern long pvmrcpi_bad_packed;
PRI struct pr_peer *pvmrcpi_peer_find(int tid, int create);
PRI struct pr_ctxstate *pvmrcpi_cs_find(struct pr_peer *p, int ctx);
/* A peer whose sent messages may have been lost (pr_lost), or NULL. */
PRI struct pr_peer *pvmrcpi_lost_any(void);
/* The peer of TID (made if CREATE; NULL if not, or out of memory).  A
 * ping-pong asks for the same peer call after call: the last one found is
 * looked at first, inline (peers are never freed). */
static inline struct pr_peer *pvmrcpi_peer(int tid, int create)
{
	struct pr_peer *p = pvmrcpi_st.last_peer;
	if (p && p->tid == tid)
		return p;
	return pvmrcpi_peer_find(tid, create);
}
/* P's state in context CTX (made on first use; NULL: out of memory).  The
 * first context used with P is looked at first, inline. */
static inline struct pr_ctxstate *pvmrcpi_cs(struct pr_peer *p, int ctx)
{
	if (p->ncs && p->cs[0].ctx == ctx)
		return &p->cs[0];
	return pvmrcpi_cs_find(p, ctx);
}
PRI int pvmrcpi_route(struct pr_peer *p);      /* PR_RCP or PR_STOCK */
PRI void pvmrcpi_peer_dead(struct pr_peer *p); /* closes its channel */
PRI void pvmrcpi_peer_gone(struct pr_peer *p); /* lets go of it, open */
PRI int pvmrcpi_err(int rcp_code);
PRI void pvmrcpi_chan_set(rcp_chan *ch, struct pr_peer *p); /* NULL: forget */
PRI struct pr_peer *pvmrcpi_chan_get(const rcp_chan *ch);
/* The open endpoints, from index *I (0 first); NULL at the end. */
static inline rcp_ep *pvmrcpi_ep_next(int *i)
{
	while (*i < PR_MAXEP)
		if (pvmrcpi_st.eps[(*i)++])
			return pvmrcpi_st.eps[*i - 1];
	return NULL;
}
PRI uint64_t pvmrcpi_now(void);
/* Bytes of one item of PVM type DT, or PvmNotImpl (PVM_STR, as stock
 * 3.4), PvmBadParam: inline, a table for PVM_BYTE..PVM_ULONG. */
static inline int pvmrcpi_dtsize(int dt)
{
	static const signed char sz[] = {[PVM_BYTE] = 1,
	                                 [PVM_SHORT] = sizeof(short),
	                                 [PVM_INT] = sizeof(int),
	                                 [PVM_FLOAT] = sizeof(float),
	                                 [PVM_CPLX] = 2 * sizeof(float),
	                                 [PVM_DOUBLE] = sizeof(double),
	                                 [PVM_DCPLX] = 2 * sizeof(double),
	                                 [PVM_LONG] = sizeof(long),
	                                 [PVM_USHORT] = sizeof(short),
	                                 [PVM_UINT] = sizeof(int),
	                                 [PVM_ULONG] = sizeof(long)};
	if ((unsigned)dt - 1u < sizeof sz - 1u)
		return sz[dt];
	return dt == PVM_STR ? PvmNotImpl : PvmBadParam;
}

/* send.c */
PRI int pvmrcpi_ctrl_send(struct pr_peer *p, uint64_t tag, const void *buf, size_t len);
PRI int pvmrcpi_prepare(struct pr_peer *p, int ctx);
/* Nothing for pvmrcpi_prepare to send before data to P in context CTX
 * (its HELLO went, no stock message since the last BARRIER), as a psend
 * after the first finds it: checked inline, first context only. */
static inline int pr_prepared(const struct pr_peer *p, int ctx)
{
	return p->hello_sent && p->ncs && p->cs[0].ctx == ctx &&
	       p->cs[0].stock_sent == p->cs[0].barrier_sent && p->stock_total == p->total_told &&
	       p->fences == p->fences_told;
}
/* Sends P's channel its HELLO if it has none yet (over udp and xdp waited
 * for: send.c, FIRST CONTACT); 0 or an RCP code. */
PRI int pvmrcpi_hello(struct pr_peer *p);
PRI void pvmrcpi_count_stock(int tid, int ctx);
/* Posts a restart watch on P's channel (none yet, or another channel's);
 * the watch of P is canceled (P lets go of its channel): send.c, LOST
 * SENDS. */
PRI void pvmrcpi_watch(struct pr_peer *p);
PRI void pvmrcpi_unwatch(struct pr_peer *p);
/* RCP data goes to P now (send.c, LOST SENDS). */
static inline void pr_dirty(struct pr_peer *p)
{
	p->rcp_dirty = 1;
	if (__builtin_expect(p->watch_ch != p->ch, 0))
		pvmrcpi_watch(p); /* once per channel */
}
/* Messages sent to P may have been lost: a copied send failed, or its
 * channel restarted with data unacknowledged (send.c, LOST SENDS). */
static inline int pr_lost(const struct pr_peer *p)
{
	return p->lost;
}
/* Reports P's loss once (stderr) and forgets it: PvmSysErr, or
 * PvmNoTask (P marked dead, nothing said) if pvmd says P is gone. */
PRI int pvmrcpi_lost(struct pr_peer *p);
/* The peer a send to TID goes to (made if new): 0 and *PP, or what the
 * send returns instead: PvmNoMem; PvmNoTask once TID is known gone, so
 * every send to it says so (stock psend through pvmd would return 0 and
 * drop the message); or the report of lost sends (pvmrcpi_lost). */
static inline int pr_send_peer(int tid, struct pr_peer **pp)
{
	struct pr_peer *p = *pp = pvmrcpi_peer(tid, 1);
	if (!p)
		return PvmNoMem;
	if (p->dead)
		return PvmNoTask;
	return pr_lost(p) ? pvmrcpi_lost(p) : 0;
}

/* recv.c */
PRI int pvmrcpi_stash_some(void);
PRI void pvmrcpi_drain(void);
PRI void pvmrcpi_free_held(void);

/* ctrl.c: HELLO, BARRIER and FENCE; HELLO and FENCE by receives posted
 * on every endpoint once it is open (pvmrcpi_ctrl_open); process_hellos
 * probes for them only where those could not be posted. */
PRI void pvmrcpi_ctrl_open(void);
PRI void pvmrcpi_process_hellos(void);
PRI void pvmrcpi_take_ctrl(rcp_ep *ep, rcp_chan *ch, uint64_t t);

/* wait.c: blocks (spin, then sleep on the endpoint's and pvmd's fds) until
 * DONE(arg) returns nonzero: >0 -> returns 1, <0 -> returns that code.
 * LIVE[0..NLIVE): tasks whose exit ends the wait with PvmNoTask (checked
 * with pvmd every live_ns; DONE gets one last chance first).
 * DEADLINE_NS: 0 forever, else absolute; returns 0 when reached.
 * STASH: after stash_ns, take other peers' messages out of RCP (sends). */
PRI int pvmrcpi_block(int (*done)(void *), void *arg, const int *live, int nlive,
                      uint64_t deadline_ns, int stash);
/* mcast.c: the multicast groups, one per endpoint that can (opened after
 * the endpoints, closed after them); pvmrcpi_mcn_send multicasts BUF to
 * CHANS (all on one endpoint) when it can and puts a
 * stub on each channel that has it, the rest (*NFALL, moved to the front
 * of CHANS) need a unicast; pvmrcpi_mcn_take swaps a stub for its data.
 * Both: 0 or a PVM code. */
PRI void pvmrcpi_mcn_open(void);
PRI void pvmrcpi_mcn_close(void);
PRI int pvmrcpi_mcn_send(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t bytes,
                         const int *live, int nlive, int *nfall);
PRI int pvmrcpi_mcn_take(const void *stub, size_t len, void **data, size_t *dlen);
/* Waits for REQ; returns 0, or a PVM code (PvmNoTask when the peer died). */
PRI int pvmrcpi_wait_req(rcp_req *req, struct rcp_status *st, const int *live, int nlive,
                         int stash);

#endif
