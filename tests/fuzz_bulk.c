/*
 * tests/fuzz_bulk.c — libFuzzer target: bulk handle deserialisation
 * (bulk/handle.c), what a peer's handle becomes on our side.
 *
 * Input: a 16-bit probe P (little-endian), then the serialised handle.
 * The handle is copied into an allocation of exactly its length (an
 * over-read is ASan's).  When it deserialises, the target checks what
 * the rest of bulk/ relies on:
 *   - serialising it again gives back exactly the input bytes (nothing
 *     accepted that is not the canonical form, nothing lost);
 *   - rcp_bulk_locate maps offsets 0, size-1, size and P-derived ones
 *     into a segment that holds them;
 *   - an access rcpb_check_access grants lies inside one segment and
 *     inside the handle's permission.
 * A udp endpoint (no /dev/shm state) gives the bulk context.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/bulk.h>
#include <rcp/rcp.h>

#include "bulk/bulk_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rcp_bulk_ctx *ctx;

static void setup(void)
{
	rcp_ep *ep;
	struct rcp_ep_config ec = {0};
	if (rcp_ep_open("udp:", &ec, &ep) || rcp_bulk_ctx_open(ep, &ctx)) {
		fprintf(stderr, "fuzz_bulk: no udp endpoint\n");
		abort();
	}
}

/* Checks the map at OFF. */
static void probe(const rcp_bulk *h, uint64_t off)
{
	uint64_t size = rcp_bulk_size(h), so;
	int seg, nseg = rcp_bulk_nseg(h);
	int rc = rcp_bulk_locate(h, off, &seg, &so);
	if (off > size) {
		if (rc != RCP_ERANGE)
			__builtin_trap();
		return;
	}
	if (rc || seg < 0 || seg > nseg || (off == size) != (seg == nseg))
		__builtin_trap();
	if (seg < nseg && so >= h->segs[seg].len)
		__builtin_trap(); /* the offset is not in that segment */
	for (unsigned perm = 1; perm <= 3; perm++) {
		uint64_t len = (off * 7 + perm) % (size + 2);
		if (!rcpb_check_access(h, off, len, perm, &seg) &&
		    ((rcp_bulk_perm(h) & perm) != perm || !len || seg < 0 || seg >= nseg ||
		     off < h->segs[seg].start || off - h->segs[seg].start + len > h->segs[seg].len))
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *copy, *again;
	size_t len, n;
	unsigned p;
	rcp_bulk *h;

	if (!ctx)
		setup();
	if (size < 2)
		return 0;
	p = data[0] | data[1] << 8;
	len = size - 2;
	copy = malloc(len ? len : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 2, len);
	if (!rcp_bulk_deserialize(ctx, copy, len, &h)) {
		uint64_t sz = rcp_bulk_size(h);
		n = rcp_bulk_serialized_size(h);
		again = malloc(n ? n : 1);
		if (!again || n != len || rcp_bulk_serialize(h, again, &n) || n != len ||
		    memcmp(again, copy, len))
			__builtin_trap(); /* not the canonical form */
		free(again);
		probe(h, 0);
		probe(h, sz);
		probe(h, sz ? sz - 1 : 0);
		probe(h, sz + 1);
		probe(h, sz ? (uint64_t)p * 0x9e3779b97f4a7c15ull % sz : 0);
		probe(h, sz ? (uint64_t)p % sz : 0);
		if (rcp_bulk_free(h))
			__builtin_trap();
	}
	free(copy);
	return 0;
}
