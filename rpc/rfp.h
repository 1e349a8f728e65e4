/*
 * rpc/rfp.h — what remote fetch's two files share: the segment's layout
 * and slot states, the server's and the client's state.  rfp.c (the
 * segment, attach, the hooks client.c, server.c, complete.c and rpc.c
 * call) sits below those files; rfp_poll.c (fetching results, taking
 * requests) above them, called by rpc.c only.  Design notes: rpc/rfp.c.
 */
#ifndef RCP_RPC_RFP_H
#define RCP_RPC_RFP_H

#include <stdatomic.h>

#include "rpc/rpc_int.h"

enum { S_FREE, S_REQ, S_REQ_R, S_BUSY, S_BUSY_R, S_DONE, S_REPLIED };

#define REQ_MAX  1024u
#define MAXCLI   32
#define SLOT_HDR 64u
#define NSLOW    2 /* N: slow calls in a row before switching to reply */

struct slot {
	_Atomic uint32_t state;
	uint32_t req_len, resp_len;
};

struct geom {
	uint32_t slots, resp_max, slot_size;
	size_t cli_size;
};

static inline size_t cli_off(const struct geom *g, uint32_t cli)
{
	return (size_t)cli * g->cli_size;
}
/* client area: [0,64) doorbell (u32 head), [64, 64+4*slots) ring, slots */
static inline _Atomic uint32_t *ring_head(unsigned char *base, const struct geom *g, uint32_t cli)
{
	return (_Atomic uint32_t *)(void *)(base + cli_off(g, cli));
}
static inline _Atomic uint32_t *ring_ent(unsigned char *base, const struct geom *g, uint32_t cli,
                                         uint32_t i)
{
	return (_Atomic uint32_t *)(void *)(base + cli_off(g, cli) + 64 + 4 * (size_t)i);
}
static inline unsigned char *slot_at(unsigned char *base, const struct geom *g, uint32_t cli,
                                     uint32_t s)
{
	size_t ring = (64 + 4 * (size_t)g->slots + 63) & ~(size_t)63;
	return base + cli_off(g, cli) + ring + (size_t)s * g->slot_size;
}

struct rfp_srv {
	char name[64];
	unsigned char *base;
	size_t size;
	struct geom g;
	int ncli;
	rcp_chan *chans[MAXCLI];
	uint32_t tail[MAXCLI];
};

struct idmode {
	uint64_t id;
	int reply;    /* 1: server-reply for this id */
	int slow_run; /* slow calls in a row */
};

struct rfp_cli {
	unsigned char *base;
	size_t size;
	struct geom g;
	uint32_t cli, head;
	uint32_t *free_slots, nfree;
	struct rcp_rpc_req **owner; /* per slot: pending request, or NULL */
	uint8_t *zombie;            /* per slot: request gone, server not done */
	uint8_t *msgwait;           /* per slot: a receive is posted for its reply */
	uint32_t nzombie;
	uint32_t fs, fs_seen;
	struct idmode ids[64];
	uint64_t *next_fetch;
	uint32_t *fetches;
	int npending;
};

static inline struct idmode *idmode(struct rfp_cli *c, uint64_t id)
{
	for (uint32_t i = (uint32_t)id & 63, n = 0; n < 64; i = (i + 1) & 63, n++) {
		if (c->ids[i].id == id)
			return &c->ids[i];
		if (!c->ids[i].id) {
			c->ids[i].id = id;
			return &c->ids[i];
		}
	}
	return NULL; /* table full: reply mode for the rest */
}

static inline void slot_free(struct rfp_cli *c, uint32_t s)
{
	struct slot *h = (struct slot *)(void *)slot_at(c->base, &c->g, c->cli, s);
	atomic_store_explicit(&h->state, S_FREE, memory_order_relaxed);
	c->free_slots[c->nfree++] = s;
}

#endif /* RCP_RPC_RFP_H */
