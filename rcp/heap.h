/*
 * rcp/heap.h — a binary min-heap of timer nodes, for the core's timers
 * (rcp/timers.c, TIMERS).  Intrusive: the node lives in its owner (a
 * channel) and knows its place in the heap, so a node's key changes in
 * O(log n) without a search, and the earliest key is read in O(1).
 * Nothing here allocates except rcpi_heap_reserve: a caller that reserves
 * room for every node it may insert (one per channel, at channel open)
 * never sees an insert fail.  Internal (rcpi_): not exported.
 */
#ifndef RCP_HEAP_H
#define RCP_HEAP_H

#include <stdint.h>

#define RCPI_HEAP_NONE UINT32_MAX /* rcpi_tnode.idx of a node not in a heap */

struct rcpi_tnode {
	uint64_t at;  /* key: the time the owner is due */
	uint32_t idx; /* index in the heap's array, or RCPI_HEAP_NONE */
};

struct rcpi_heap {
	struct rcpi_tnode **v; /* v[0] has the least key; v[i] <= v[2i+1], v[2i+2] */
	uint32_t n, cap;
};

static inline void rcpi_tnode_init(struct rcpi_tnode *t)
{
	t->at = UINT64_MAX;
	t->idx = RCPI_HEAP_NONE;
}

/* Room for N nodes in all.  Returns 0 or RCP_ENOMEM. */
int rcpi_heap_reserve(struct rcpi_heap *h, uint32_t n);
/* T (in H or not) gets key AT: inserted, or moved up or down.  AT ==
 * UINT64_MAX takes T out (never due).  An insert needs reserved room. */
void rcpi_heap_set(struct rcpi_heap *h, struct rcpi_tnode *t, uint64_t at);
/* Takes T out of H if it is in. */
void rcpi_heap_del(struct rcpi_heap *h, struct rcpi_tnode *t);
void rcpi_heap_free(struct rcpi_heap *h);

/* The node with the least key, or NULL. */
static inline struct rcpi_tnode *rcpi_heap_top(const struct rcpi_heap *h)
{
	return h->n ? h->v[0] : (struct rcpi_tnode *)0;
}

/* The least key, or UINT64_MAX when empty. */
static inline uint64_t rcpi_heap_min(const struct rcpi_heap *h)
{
	return h->n ? h->v[0]->at : UINT64_MAX;
}

#endif
