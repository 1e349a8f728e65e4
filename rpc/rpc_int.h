/*
 * rpc/rpc_int.h — what the files of the call engine (rpc/rpc.c's head lists
 * them and their layers) and rpc/rfp.c (remote fetch) share.  Not
 * installed.  Functions one file offers another are named rpci_*, and are
 * not exported from the library (only rcp_* is).
 */
#ifndef RCP_RPC_INT_H
#define RCP_RPC_INT_H

#include <stdint.h>
#include <string.h>

#include <rcp/rpc.h>

#include "common/rcp_common.h"
#include "common/rcp_tags.h"

struct rfp_srv;
struct rfp_cli;
/* Remote fetch's settings (RCP_RFP_*), read once by rfp_init. */
struct rfp_cfg {
	uint32_t slots, fs_min, fs_max, retry;
	uint64_t fetch_ns;
};

/* Message header, in the sender's byte order (ORDER tells which). */
#define RPC_ORDER   0x01020304u
#define RPC_VERSION 1
enum { K_REQ = 1, K_RESP = 2 };
enum {
	F_OVF = 1u << 0,  /* payload follows in a second message (aux = bytes) */
	F_TIME = 1u << 1, /* REQ: the client wants the processing time (TIMING, server.c) */
};

struct rpc_hdr {
	uint32_t order;
	uint8_t kind, version;
	uint16_t flags;
	int32_t status;  /* RESP: 0 or the call's error */
	uint32_t len;    /* payload bytes in this message */
	uint64_t id;     /* rpc id */
	uint64_t cookie; /* client's request id, echoed */
	uint64_t aux;    /* F_OVF: payload bytes; RESP: server processing ns or 0 */
};
#define HDR_LEN ((uint32_t)sizeof(struct rpc_hdr))

/* Tags: the reserved space of common/rcp_tags.h, layer rpc (0x02); the
 * low 48 bits are kind << 44 | cookie (44 bits). */
#define TAG_KIND(k) RCPI_TAG(RCPI_TAG_LAYER_RPC, (uint64_t)(k) << 44)
#define TAG_REQ     TAG_KIND(1)
#define TAG_RESP    TAG_KIND(2)
#define TAG_OVF(c)  (TAG_KIND(3) | ((c)&0xfffffffffffull))
#define COOKIE_IDX  0xffffffu /* cookie = (gen & COOKIE_GEN) << 24 | index */
#define COOKIE_GEN  0xfffffu

struct call {
	uint64_t id;
	char *name;
	rcp_proc_fn in_proc, out_proc;
	rcp_rpc_handler handler;
	void *harg;
};

enum { Q_FREE, Q_PENDING, Q_OVF_WAIT, Q_DONE };

/* A receive buffer posted to rcp. */
struct rbuf {
	rcp_rpc *rpc;
	unsigned char *data;
	rcp_req *rq;                /* posted, with client.c's or server.c's recv_cb */
	struct rbuf *next;          /* free list */
	struct rbuf *lprev, *lnext; /* posted list */
	struct peer *peer;          /* posted on: a peer, NULL the server's */
	int posted;
	int canceling; /* a surplus response receive being canceled */
	uint32_t refs; /* handles / requests whose message lies here (+ 1 while parsed) */
};

/* The receives posted with the same (channel, tag), in posting order. */
struct blist {
	struct rbuf *head, *tail;
	uint32_t n;
};

/* Secondary rcp requests: overflow sends and receives. */
enum { AUX_SEND_FREE, AUX_RECV_REQ, AUX_RECV_HANDLE, AUX_ORPHAN };
struct aux {
	rcp_rpc *rpc;
	rcp_req *rq; /* with its owner's callback (rpci_aux_add) */
	int kind;
	void *buf;
	void *owner;
	uint64_t gen;
	struct aux *next, *prev;
};

/* Messages of one kind queued for a channel during a progress round and
 * sent as one rcp message at its end (BATCHES in batch.c). */
struct outq {
	unsigned char *buf;
	size_t len, cap;
	uint32_t n, gen;   /* messages queued; batches sent */
	int dirty;         /* on the context's dirty list */
	struct outq *next; /* dirty list */
	rcp_chan *ch;
	struct peer *peer; /* requests: the calls' peer; responses: NULL */
	uint64_t tag;      /* TAG_REQ or TAG_RESP */
};
#define RSQ      8 /* response queues of a server (by channel hash) */
#define HALF_MIN 4 /* fewest calls a batch HALVES sends early (batch.c) */

struct peer {
	rcp_chan *ch;
	struct blist posted; /* response receives */
	uint32_t expect;     /* responses that may still come */
	int failed;
	struct rfp_cli *rfp; /* remote fetch, if attached */
	int rfp_state;       /* 0 unknown, 1 attaching, 2 attached, -1 none */
	uint32_t watch;      /* receives kept posted beyond expect (RFP: liveness) */
	struct outq rq;      /* a batch of requests */
	uint32_t trimming;   /* posted response receives being canceled (idle) */
	int trimq;           /* on the context's trim list (client.c, TRIMMING) */
	struct peer *tnext;  /* trim list */
	uint32_t flight;     /* most calls pending at once since idle (HALVES, batch.c) */
};

struct rcp_rpc_req {
	rcp_rpc *rpc;
	uint32_t idx, gen;
	int state, status;
	struct call *call;
	void *out;
	rcp_rpc_cb cb;
	void *arg;
	struct peer *peer;
	uint64_t deadline;
	rcp_req *sreq; /* request send not yet complete (sreq_cb clears it) */
	unsigned char *sbuf;
	size_t scap;
	struct rbuf *resp;       /* response held while OUT is in use */
	unsigned char *ovf_resp; /* overflowed response payload */
	struct aux *ovf_aux;
	uint32_t rfp_slot;         /* RFP slot + 1, 0: reply mode */
	uint32_t hidx;             /* deadline heap index + 1, 0: none */
	uint32_t qgen;             /* queued in its peer's batch qgen - 1 */
	struct rcp_rpc_req *dnext; /* done queue / free list */
};

struct rcp_rpc_handle {
	rcp_rpc *rpc;
	struct call *call;
	rcp_chan *ch;
	uint64_t cookie, t0;
	struct rbuf *rb;         /* request (or NULL: RFP / overflow) */
	const unsigned char *in; /* encoded input */
	size_t inlen;
	unsigned char *ovf_in; /* overflowed input */
	unsigned char *sbuf;
	size_t scap;
	rcp_req *sreq; /* response send (send_cb returns the handle) */
	int responded;
	uint32_t rfp_cli, rfp_slot;          /* RFP slot + 1, 0: message */
	struct rcp_rpc_handle *next, *sprev; /* free list / sending list */
};

struct rcp_rpc {
	rcp_ep *ep;
	rcp_bulk_ctx *bulk;
	unsigned flags;
	int64_t def_timeout;
	int wait_id;          /* our wait source on the endpoint */
	uint64_t events_seen; /* events at the waiter's last look */
	size_t msg_max;
	int nrecvs;
	/* calls: open addressing on id, of pointers (STABLE, calls.c) */
	struct call **calls;
	uint32_t ncalls, callcap;
	/* peers: open addressing on channel pointer */
	struct peer **peers;
	uint32_t npeers, peercap;
	struct peer *last_peer; /* rpci_peer_get's last answer */
	/* client requests, by index */
	struct rcp_rpc_req **reqs;
	uint32_t nreqs, reqcap;
	struct rcp_rpc_req *freereqs, *doneq, **donetail;
	/* pending requests with a deadline: a binary min-heap */
	struct rcp_rpc_req **heap;
	uint32_t ntimed, heapcap;
	int closing;         /* destroy: request receives are no longer handled */
	int depth;           /* progress rounds running (nested): forwards are batched */
	int batch;           /* RCP_RPC_BATCH */
	uint32_t split;      /* RCP_RPC_SPLIT: batches in flight a peer (HALVES, batch.c) */
	struct outq *dirty;  /* queues with messages */
	struct peer *trim;   /* peers whose surplus receives wait for the round's end */
	struct outq sq[RSQ]; /* batches of responses, by channel hash */
	/* server */
	int serving;
	struct blist srv;
	struct rcp_rpc_handle *freeh, *sending; /* handles whose response is in flight */
	struct rbuf *freerb;
	struct aux *aux, *freeaux;
	uint64_t events; /* handlers run + requests completed */
	struct rcp_rpc_stats st;
	struct rfp_srv *rfps;
	uint64_t rfp_attach_id;
	struct rfp_cfg rfpc;
};

/* rcp_proc_decode with a bulk context for bulk handles. */
int rpci_proc_decode(rcp_proc_fn fn, void *data, const void *buf, size_t len, rcp_bulk_ctx *bulk);

/* Runs the handler for a call that arrived through remote fetch (or any
 * other path than a request message). */
void rpci_dispatch(rcp_rpc *rpc, rcp_chan *ch, uint64_t id, uint64_t cookie, const void *in,
                   size_t inlen, uint32_t rfp_cli, uint32_t rfp_slot);
/* Completes a client request (exactly once) / decodes its response. */
void rpci_finish_resp(struct rcp_rpc_req *r, int status, const unsigned char *pl, size_t len);

/* ---- what the files of rpc/ offer each other (rpc.c's head: the layers) ---- */

/* calls.c: the registry. */
struct call *rpci_call_find(const rcp_rpc *rpc, uint64_t id);

/* hdr.c: headers (MESSAGES).  rpci_msg_check: 0 and the number of
 * messages in *N, or -1 (bad_msgs counted). */
int rpci_msg_check(rcp_rpc *rpc, const unsigned char *msg, const struct rcp_status *st, int kind,
                   uint32_t *n);
void rpci_bswap_hdr(struct rpc_hdr *h);
/* The header at OFF of a message rpci_msg_check passed, into *H: 0, or 1
 * if it was in the foreign byte order (swapped; its call is answered or
 * failed with RCP_ENOTSUP). */
static inline int rpci_hdr_read(const unsigned char *msg, size_t off, struct rpc_hdr *h)
{
	memcpy(h, msg + off, HDR_LEN);
	if (RCPI_LIKELY(h->order == RPC_ORDER))
		return 0;
	rpci_bswap_hdr(h);
	return 1;
}

/* bufs.c: buffers lent to rcp, aux requests, detached sends. */
void rpci_blist_push(struct blist *l, struct rbuf *b);
void rpci_blist_del(struct blist *l, struct rbuf *b);
struct rbuf *rpci_rbuf_new(rcp_rpc *rpc);
/* A receive buffer from the pool (one reference), or NULL.  Inline: every
 * posted receive takes one (client.c, server.c, rfp.c), and once it was a
 * call into bufs.c, LTO no longer inlined it: an empty call in fetch mode
 * cost 908 instructions against 891 (perf/rpc_instr.sh); 889 inline. */
static inline struct rbuf *rpci_rbuf_get(rcp_rpc *rpc)
{
	struct rbuf *b = rpc->freerb;
	if (!b)
		return rpci_rbuf_new(rpc);
	rpc->freerb = b->next;
	b->refs = 1;
	b->canceling = 0;
	return b;
}
void rpci_rbuf_put(rcp_rpc *rpc, struct rbuf *b);
void rpci_rbuf_unref(rcp_rpc *rpc, struct rbuf *b);
void rpci_rbuf_done(struct blist *l, struct rbuf *b);
int rpci_grow_buf(unsigned char **buf, size_t *cap, size_t need);
int rpci_send_msg(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req_cb cb,
                  void *user, rcp_req **held);
struct aux *rpci_aux_add(rcp_rpc *rpc, rcp_req *rq, int kind, void *buf, void *owner,
                         rcp_req_cb cb);
void rpci_aux_free_cb(rcp_req *rq, const struct rcp_status *st, void *user);
void rpci_aux_begin(struct aux *a);
void rpci_aux_end(struct aux *a);

/* peer.c: peers by channel. */
uint32_t rpci_ptr_hash(const void *p);
struct peer *rpci_peer_get_slow(rcp_rpc *rpc, rcp_chan *ch);
/* The peer of CH (made if new), or NULL (no memory).  The last one found
 * is kept: a client mostly forwards to one server in a row (~15
 * instructions a call less than the hash probe, session 19). */
static inline struct peer *rpci_peer_get(rcp_rpc *rpc, rcp_chan *ch)
{
	if (RCPI_LIKELY(rpc->last_peer && rpc->last_peer->ch == ch))
		return rpc->last_peer;
	return rpci_peer_get_slow(rpc, ch);
}

/* deadline.c: the deadline heap. */
int rpci_timer_add(rcp_rpc *rpc, struct rcp_rpc_req *r);
void rpci_timer_del(rcp_rpc *rpc, struct rcp_rpc_req *r);

/* complete.c: completing client requests (the one place: rpci_done). */
void rpci_done(struct rcp_rpc_req *r, int status);
void rpci_req_release(struct rcp_rpc_req *r);
int rpci_run_callbacks(rcp_rpc *rpc);
void rpci_fail_peer(rcp_rpc *rpc, struct peer *p, int err);

/* batch.c: BATCHES. */
void rpci_flush_q(rcp_rpc *rpc, struct outq *q);
void rpci_flush_all(rcp_rpc *rpc);
int rpci_queue_msg(rcp_rpc *rpc, struct outq *q, const void *msg, size_t len, uint32_t *gen);
/* IN PLACE (batch.c): room at the end of Q (*ROOM bytes, NULL: no memory)
 * for one message written there, then added by rpci_queue_commit. */
unsigned char *rpci_queue_room_slow(rcp_rpc *rpc, struct outq *q, size_t *room);
static inline unsigned char *rpci_queue_room(rcp_rpc *rpc, struct outq *q, size_t *room)
{
	if (RCPI_UNLIKELY(q->cap < rpc->msg_max || q->len + HDR_LEN > rpc->msg_max))
		return rpci_queue_room_slow(rpc, q, room);
	*room = rpc->msg_max - q->len;
	return q->buf + q->len;
}
void rpci_queue_commit(rcp_rpc *rpc, struct outq *q, size_t len, uint32_t *gen);

/* client.c: response receives up to a peer's expectations; surplus ones
 * canceled at the end of the round (rpci_trim_all, TRIMMING). */
void rpci_peer_repost(rcp_rpc *rpc, struct peer *p);
void rpci_trim_all(rcp_rpc *rpc);

/* ---- remote fetch hooks (rpc/rfp.c; rpc.c calls rfp_poll.c's rfp_poll) ---- */
/* The answer of the attach rpc ("rcp.rfp.attach"): client.c forwards it,
 * server.c's handler answers it, rfp.c fills and reads it. */
struct attach_out {
	const char *name;
	uint32_t ok, cli, slots, resp_max;
};
int rfp_init(rcp_rpc *rpc);
void rfp_fini(rcp_rpc *rpc);
/* Server: offer remote fetch to clients. */
void rfp_serve(rcp_rpc *rpc);
/* rfp_poll.c: polls slots (server) and results (client); returns events. */
int rfp_poll(rcp_rpc *rpc);
/* Nonzero while remote fetch needs polling (never sleep then). */
int rfp_busy(const rcp_rpc *rpc);
/* Server: the attach answer for the client on CH (o->ok 0: no). */
void rfp_srv_attach(rcp_rpc *rpc, rcp_chan *ch, struct attach_out *o);
/* Client: the attach answer O (or STATUS) came: maps the server's area;
 * frees O.  Returns 1 if attached (the caller posts a receive: P->watch). */
int rfp_cli_attached(rcp_rpc *rpc, struct peer *p, int status, struct attach_out *o);
/* rfp_cli_submit's answers. */
enum {
	RFP_MSG = 0,        /* use a message */
	RFP_SLOT = 1,       /* placed in a slot */
	RFP_SLOT_REPLY = 2, /* placed, the result comes as a message: post a receive */
	RFP_ATTACH = 3,     /* use a message; attach to this server first */
};
/* Client: places request MSG (LEN bytes, header included) in the server's
 * segment if this (server, id) is in fetch mode; returns RFP_SLOT or
 * RFP_SLOT_REPLY (and *SLOT = slot + 1), or RFP_MSG or RFP_ATTACH. */
int rfp_cli_submit(rcp_rpc *rpc, struct peer *p, struct rcp_rpc_req *r, uint64_t id,
                   const void *msg, size_t len, uint32_t *slot);
/* The request in SLOT (+1; 0 none) completed otherwise: stop fetching. */
void rfp_cli_abandon(rcp_rpc *rpc, struct peer *p, uint32_t slot);
/* A reply message reported the server's processing time for ID. */
void rfp_cli_note_reply(rcp_rpc *rpc, struct rfp_cli *c, uint64_t id, uint64_t proc_ns);
/* Server: writes a response into the slot; 1 done, 0 send a message. */
/* Server: the result of SLOT went as a message (slot -> REPLIED). */
void rfp_srv_replied(struct rfp_srv *s, uint32_t cli, uint32_t slot);
/* Frees a peer's remote-fetch state (mapping). */
void rfp_peer_free(struct peer *p);
int rfp_srv_respond(struct rfp_srv *s, uint32_t cli, uint32_t slot, const struct rpc_hdr *h,
                    const void *payload, uint32_t len);

#endif
