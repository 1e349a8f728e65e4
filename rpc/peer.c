/*
 * rpc/peer.c — the peers of a context: one struct peer per channel the
 * context has forwarded calls on (its posted response receives, its
 * pending calls, its batch of requests, its remote-fetch state).
 *
 * An open-addressing table keyed by the channel pointer (hashed: channel
 * structures are allocated alike, so their low bits say little), grown at
 * half full, so forwarding finds its peer in O(1) whatever the number of
 * servers.  The server side keeps no peers: a request carries its channel,
 * and a response goes back on it (its batch queue is picked by the same
 * hash, rpci_ptr_hash).
 *
 * A leaf: it calls no other file of rpc/.
 */
#include <stdlib.h>

#include "rpc/rpc_int.h"

uint32_t rpci_ptr_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 17;
	x *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(x >> 32);
}

static struct peer *peer_find(rcp_rpc *rpc, rcp_chan *ch)
{
	if (!rpc->peercap)
		return NULL;
	for (uint32_t i = rpci_ptr_hash(ch) & (rpc->peercap - 1);;
	     i = (i + 1) & (rpc->peercap - 1)) {
		if (!rpc->peers[i])
			return NULL;
		if (rpc->peers[i]->ch == ch)
			return rpc->peers[i];
	}
}

struct peer *rpci_peer_get_slow(rcp_rpc *rpc, rcp_chan *ch)
{
	struct peer *p = peer_find(rpc, ch);
	uint32_t i;
	if (p) {
		rpc->last_peer = p;
		return p;
	}
	if ((rpc->npeers + 1) * 2 > rpc->peercap) {
		uint32_t cap = rpc->peercap ? rpc->peercap * 2 : 16;
		struct peer **n = calloc(cap, sizeof *n);
		if (!n)
			return NULL;
		for (uint32_t j = 0; j < rpc->peercap; j++) {
			if (!rpc->peers[j])
				continue;
			for (i = rpci_ptr_hash(rpc->peers[j]->ch) & (cap - 1); n[i];
			     i = (i + 1) & (cap - 1))
				;
			n[i] = rpc->peers[j];
		}
		free(rpc->peers);
		rpc->peers = n;
		rpc->peercap = cap;
	}
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->ch = ch;
	p->rq.peer = p;
	p->rq.ch = ch;
	p->rq.tag = TAG_REQ;
	for (i = rpci_ptr_hash(ch) & (rpc->peercap - 1); rpc->peers[i];
	     i = (i + 1) & (rpc->peercap - 1))
		;
	rpc->peers[i] = p;
	rpc->npeers++;
	rpc->last_peer = p;
	return p;
}
