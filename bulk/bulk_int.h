/*
 * bulk/bulk_int.h — what the files of bulk/ share.  See bulk/bulk.c for the
 * design.  Internal names carry the `rcpb_` prefix (not exported).
 */
#ifndef RCP_BULK_INT_H
#define RCP_BULK_INT_H

#include <stddef.h>
#include <stdint.h>

#include <rcp/bulk.h>
#include <rcp/nic.h>
#include <rcp/rcp.h>

#include "common/rcp_tags.h"

/* ---- tags (low 48 bits of the bulk layer's tag space) ----
 * bits 47..44 kind, bits 43..0 piece id. */
#define RCPB_KIND_REQ  0u
#define RCPB_KIND_DATA 1u
#define RCPB_KIND_STAT 2u
#define RCPB_ID_MASK   0x00000FFFFFFFFFFFull
#define RCPB_TAG(kind, id)                                                                         \
	RCPI_TAG(RCPI_TAG_LAYER_BULK, ((uint64_t)(kind) << 44) | ((uint64_t)(id)&RCPB_ID_MASK))

/* ---- emulated-RMA messages (host byte order; magic tells) ---- */
#define RCPB_MSG_MAGIC 0x52425031u /* "1PBR" */
enum { RCPB_OP_READ = 1, RCPB_OP_WRITE = 2 };

struct rcpb_req_msg {
	uint32_t magic;
	uint32_t op; /* RCPB_OP_* */
	uint64_t id; /* requester's piece id (echoed in tags) */
	uint64_t key;
	uint64_t off; /* logical offset in the owner's handle */
	uint64_t len;
};

struct rcpb_stat_msg {
	uint32_t magic;
	int32_t status; /* 0 (GO / DONE) or RCP_E* */
	uint64_t id;
};

/* Kinds of rcp requests bulk/ waits for (each has its rcp callback). */
enum {
	RCPB_W_RX,    /* the posted request receive */
	RCPB_W_PREQ,  /* requester: REQ send */
	RCPB_W_PDATA, /* requester: DATA receive (pull) or send (push) */
	RCPB_W_PSTAT, /* requester: STAT receive */
	RCPB_W_SDATA, /* owner: DATA send (read) or receive (write) */
	RCPB_W_SSTAT, /* owner: STAT send (refusal or GO) */
	RCPB_W_SDONE, /* owner: DONE send (write) */
};

/* Emulated pieces one transfer keeps in flight. */
#define RCPB_WINDOW 16

/* ---- handles ---- */
struct rcpb_seg {
	char *ptr;      /* local handles only */
	uint64_t len;   /* bytes */
	uint64_t start; /* logical offset of its first byte */
};

struct rcpb_reg; /* registration cache entry */

struct rcp_bulk {
	rcp_bulk_ctx *ctx;
	int remote; /* deserialised (a peer's) */
	unsigned perm;
	int nseg;
	uint64_t size;
	uint64_t key;
	int users;   /* transfers of this process using it */
	int serving; /* peers' emulated accesses in progress */
	int revoked; /* key removed from the table */
	struct rcpb_seg *segs;
	uint32_t rkeylen; /* 0: no rkeys (no one-sided path) */
	uint8_t *rkeys;   /* nseg * rkeylen */
	struct rcpb_reg **regs;
	struct rcp_bulk *hnext; /* key table chain */
	struct rcp_bulk *prev, *next;
};

/* ---- operations ---- */
enum { RCPB_PENDING, RCPB_QUEUED, RCPB_DELIVERED };

struct rcpb_pipeline;

struct rcp_bulk_op {
	rcp_bulk_ctx *ctx;
	rcp_bulk_cb cb;
	void *arg;
	int state;
	int status; /* first error */
	int user;   /* the caller holds a pointer (test/wait releases) */
	int canceled;
	int dir;
	rcp_chan *chan;
	rcp_bulk *remote, *local;
	uint64_t roff, loff, left; /* cursor of what is not yet issued */
	int inflight;              /* emulated pieces outstanding */
	struct rcpb_pipeline *pl;  /* a pipeline's own op */
	rcp_bulk_op *parent;       /* a pipeline chunk: its pipeline op */
	size_t chunk;              /* chunk index (children) */
	uint64_t chunk_off, chunk_len;
	rcp_bulk_op *qnext;       /* completion queue */
	rcp_bulk_op *prev, *next; /* ctx's pending list */
};

struct rcpb_piece; /* an emulated request in flight (requester) */
struct rcpb_serve; /* an emulated access being served (owner) */

struct rcp_bulk_ctx {
	rcp_ep *ep;
	rcp_nic *nic;
	int rma; /* use one-sided nic RMA where handles offer it */
	int regcache;
	int rma_refused; /* the nic said RCP_EPERM once: emulate */
	int wait_id;     /* our wait source on the endpoint (0: none) */
	uint64_t next_id;
	/* key table (local handles) */
	rcp_bulk **buckets;
	size_t nbuckets, nkeys;
	rcp_bulk *handles; /* every handle */
	/* the posted request receive */
	rcp_req *req_rx;
	struct rcpb_req_msg req_buf;
	struct rcpb_piece *pieces;
	struct rcpb_serve *serves;
	rcp_bulk_op *ops; /* pending (not yet queued) */
	rcp_bulk_op *qhead, *qtail;
	int delivering;
	int closing;
	struct rcpb_reg **rbuckets;
	size_t nrbuckets, nregs;
	struct rcp_bulk_stats stats;
};

/* handle.c */
uint64_t rcpb_random64(void);
int rcpb_key_insert(rcp_bulk_ctx *ctx, rcp_bulk *h);
void rcpb_key_remove(rcp_bulk_ctx *ctx, rcp_bulk *h);
rcp_bulk *rcpb_key_find(rcp_bulk_ctx *ctx, uint64_t key);
void rcpb_handle_destroy(rcp_bulk *h);
/* Checks an access to H of [OFF, OFF+LEN) needing PERM bits; on success
 * stores the segment holding it whole in *SEG.  Returns 0, RCP_EACCES
 * (perm, bounds), RCP_EPROTO (crosses a segment border). */
int rcpb_check_access(const rcp_bulk *h, uint64_t off, uint64_t len, unsigned perm, int *seg);

/* regcache.c */
int rcpb_reg_get(rcp_bulk_ctx *ctx, void *addr, size_t len, unsigned access, struct rcpb_reg **out);
void rcpb_reg_put(rcp_bulk_ctx *ctx, struct rcpb_reg *r);
/* The packed rkey of R; *LEN gets its length. */
const uint8_t *rcpb_reg_rkey(const struct rcpb_reg *r, uint32_t *len);
void rcpb_reg_clear(rcp_bulk_ctx *ctx);

/* bulk.c */
void rcpb_op_complete(rcp_bulk_op *op, int status);
rcp_bulk_op *rcpb_op_new(rcp_bulk_ctx *ctx, rcp_bulk_cb cb, void *arg);
/* Binds user-level OP to its transfer: direction, channel and handles
 * (each held while OP lives); hands OP to the caller in *OPP if given. */
void rcpb_op_bind(rcp_bulk_op *op, int dir, rcp_chan *chan, rcp_bulk *remote, rcp_bulk *local,
                  rcp_bulk_op **opp);

/* transfer.c */
/* Starts OP (fields dir, chan, remote, local, roff, loff, left set). */
void rcpb_op_start(rcp_bulk_op *op);
/* Validates a transfer's arguments.  Returns 0 or the public error. */
int rcpb_check_args(rcp_bulk_ctx *ctx, rcp_chan *chan, int dir, rcp_bulk *remote,
                    uint64_t remote_off, rcp_bulk *local, uint64_t local_off, uint64_t len);
/* Closing: fails every piece, cancels its receives. */
void rcpb_pieces_close(rcp_bulk_ctx *ctx);
/* Closing gave up waiting: detaches the callbacks of the pieces' requests
 * (the pieces stay allocated: rcp may still use their buffers). */
void rcpb_pieces_forget(rcp_bulk_ctx *ctx);

/* serve.c */
void rcpb_serve_request(rcp_bulk_ctx *ctx, const struct rcpb_req_msg *m, size_t len,
                        rcp_chan *chan);
/* rcpb_pieces_forget for the owner's serves. */
void rcpb_serves_forget(rcp_bulk_ctx *ctx);
/* Stops serving H: cancels what can be canceled. */
void rcpb_serves_revoke(rcp_bulk_ctx *ctx, rcp_bulk *h);
/* Forgets H in every serve (H is being destroyed regardless). */
void rcpb_serves_detach(rcp_bulk_ctx *ctx, rcp_bulk *h);

/* pipeline.c */
void rcpb_pipeline_chunk_done(rcp_bulk_op *child);
void rcpb_pipeline_cancel(rcp_bulk_op *op);

#endif
