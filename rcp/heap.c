/*
 * rcp/heap.c — see heap.h.  The textbook array heap: a node moves up
 * while its parent's key is larger, down while a child's key is smaller;
 * every move writes the node's new index back into it.
 */
#include <assert.h>
#include <stdlib.h>

#include "common/rcp_common.h"
#include "rcp/heap.h"

static void put(struct rcpi_heap *h, uint32_t i, struct rcpi_tnode *t)
{
	h->v[i] = t;
	t->idx = i;
}

static void sift_up(struct rcpi_heap *h, uint32_t i)
{
	struct rcpi_tnode *t = h->v[i];
	while (i) {
		uint32_t p = (i - 1) / 2;
		if (h->v[p]->at <= t->at)
			break;
		put(h, i, h->v[p]);
		i = p;
	}
	put(h, i, t);
}

static void sift_down(struct rcpi_heap *h, uint32_t i)
{
	struct rcpi_tnode *t = h->v[i];
	for (;;) {
		uint32_t k = 2 * i + 1;
		if (k >= h->n)
			break;
		if (k + 1 < h->n && h->v[k + 1]->at < h->v[k]->at)
			k++;
		if (t->at <= h->v[k]->at)
			break;
		put(h, i, h->v[k]);
		i = k;
	}
	put(h, i, t);
}

int rcpi_heap_reserve(struct rcpi_heap *h, uint32_t n)
{
	struct rcpi_tnode **v;
	uint32_t cap;
	if (n <= h->cap)
		return 0;
	cap = h->cap ? h->cap : 8;
	while (cap < n)
		cap *= 2;
	v = realloc(h->v, sizeof *v * cap);
	if (!v)
		return RCP_ENOMEM;
	h->v = v;
	h->cap = cap;
	return 0;
}

void rcpi_heap_del(struct rcpi_heap *h, struct rcpi_tnode *t)
{
	uint32_t i = t->idx;
	struct rcpi_tnode *last;

	if (i == RCPI_HEAP_NONE)
		return;
	assert(i < h->n && h->v[i] == t);
	t->idx = RCPI_HEAP_NONE;
	last = h->v[--h->n];
	if (last == t)
		return;
	/* The last node fills the hole: it may belong above or below it. */
	put(h, i, last);
	if (i && h->v[(i - 1) / 2]->at > last->at)
		sift_up(h, i);
	else
		sift_down(h, i);
}

void rcpi_heap_set(struct rcpi_heap *h, struct rcpi_tnode *t, uint64_t at)
{
	uint64_t was = t->at;

	if (at == UINT64_MAX) {
		rcpi_heap_del(h, t);
		t->at = at;
		return;
	}
	t->at = at;
	if (t->idx == RCPI_HEAP_NONE) {
		assert(h->n < h->cap);
		put(h, h->n++, t);
		sift_up(h, t->idx);
	} else if (at < was) {
		sift_up(h, t->idx);
	} else if (at > was && 2 * t->idx + 1 < h->n) {
		/* (A leaf stays: a channel alone in its heap, the common
		 * case of a small endpoint, moves its key every frame.) */
		sift_down(h, t->idx);
	}
}

void rcpi_heap_free(struct rcpi_heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}
