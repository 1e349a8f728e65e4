/*
 * rpc/deadline.c — call deadlines: a binary min-heap of the pending client
 * requests that have a timeout.
 *
 * Why a heap: O(log n) to arm, disarm or fire, and nothing is scanned, so
 * a progress round with 100,000 calls in flight pays for the calls that
 * time out, not for the ones that do not.  The clock is read once per
 * progress round, and only while timers are armed (rpc.c).  A request
 * keeps its heap index (hidx, + 1; 0: not armed) so that completing it
 * disarms it in O(log n).
 *
 * A leaf: it calls no other file of rpc/.  Firing the timers (the call
 * completes with RCP_ETIMEDOUT) is progress's job (rpc.c).
 */
#include <stdlib.h>

#include "rpc/rpc_int.h"

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

int rpci_timer_add(rcp_rpc *rpc, struct rcp_rpc_req *r)
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

void rpci_timer_del(rcp_rpc *rpc, struct rcp_rpc_req *r)
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
