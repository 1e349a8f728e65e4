/*
 * rpc/calls.c — the registry of calls: name -> id (FNV-1a 64, the same in
 * every process, so no exchange of ids is needed), and the table of what
 * an id means here (its procs, its handler).
 *
 * An open-addressing table on the id, grown at half full: a request that
 * arrives looks its id up once (rpci_call_find), and a lookup never
 * allocates.
 *
 * STABLE (session 21).  A pending request (rcp_rpc_req.call) and a handle
 * whose answer is still to come (rcp_rpc_handle.call) keep a pointer to
 * their call, so a call never moves: the table holds pointers, each call
 * is allocated once, and growing the table moves only the pointers.  It
 * held the calls themselves until session 21, and a registration that
 * grew it while calls were pending left those calls pointing into the
 * freed table (read again by the answer: the output's proc, the id).  Two names with one id are refused at registration
 * (RCP_EADDRINUSE) rather than confused on the wire.
 *
 * A leaf: it calls no other file of rpc/.  Setting a handler lives with
 * the server (server.c), since the first handler starts serving.
 */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"

uint64_t rcp_rpc_id(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	if (!name)
		return 0;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
	return h ? h : 1;
}

struct call *rpci_call_find(const rcp_rpc *rpc, uint64_t id)
{
	if (!rpc->callcap)
		return NULL;
	for (uint32_t i = (uint32_t)id & (rpc->callcap - 1);; i = (i + 1) & (rpc->callcap - 1)) {
		struct call *c = rpc->calls[i];
		if (!c || c->id == id)
			return c;
	}
}

static int call_grow(rcp_rpc *rpc)
{
	uint32_t cap = rpc->callcap ? rpc->callcap * 2 : 16;
	struct call **n = calloc(cap, sizeof *n);
	if (!n)
		return RCP_ENOMEM;
	for (uint32_t j = 0; j < rpc->callcap; j++) {
		struct call *c = rpc->calls[j];
		uint32_t i;
		if (!c)
			continue;
		for (i = (uint32_t)c->id & (cap - 1); n[i]; i = (i + 1) & (cap - 1))
			;
		n[i] = c; /* STABLE: the call stays where it is */
	}
	free(rpc->calls);
	rpc->calls = n;
	rpc->callcap = cap;
	return 0;
}

int rcp_rpc_register(rcp_rpc *rpc, const char *name, rcp_proc_fn in_proc, rcp_proc_fn out_proc,
                     uint64_t *id)
{
	uint64_t h;
	struct call *c;
	uint32_t i;

	if (!rpc || !name || !*name)
		return RCP_EINVAL;
	h = rcp_rpc_id(name);
	c = rpci_call_find(rpc, h);
	if (c) {
		if (strcmp(c->name, name) || c->in_proc != in_proc || c->out_proc != out_proc)
			return RCP_EADDRINUSE;
		if (id)
			*id = h;
		return 0;
	}
	if ((rpc->ncalls + 1) * 2 > rpc->callcap && call_grow(rpc))
		return RCP_ENOMEM;
	for (i = (uint32_t)h & (rpc->callcap - 1); rpc->calls[i]; i = (i + 1) & (rpc->callcap - 1))
		;
	c = calloc(1, sizeof *c);
	if (!c)
		return RCP_ENOMEM;
	c->name = strdup(name);
	if (!c->name) {
		free(c);
		return RCP_ENOMEM;
	}
	rpc->calls[i] = c;
	c->id = h;
	c->in_proc = in_proc;
	c->out_proc = out_proc;
	c->handler = NULL;
	rpc->ncalls++;
	if (id)
		*id = h;
	return 0;
}
