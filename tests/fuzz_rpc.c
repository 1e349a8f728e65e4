/*
 * tests/fuzz_rpc.c — libFuzzer target: rpc argument decoding (rpc/proc.c)
 * as a server decodes a request, bulk handles included.
 *
 * Input: a schema, then the encoded arguments.  Schema: a count N (at
 * most 16), then N type bytes: 0 u8, 1 u16, 2 u32, 3 u64, 4 float,
 * 5 double, 6 string, 7 bytes, 8 bulk handle, 9 a nested struct holding
 * the fields after it (at most 4 deep), 10 raw 3 bytes, others i32.  The
 * arguments are copied into an allocation of exactly their length, so an
 * over-read is ASan's; decoded strings are read with strlen (a string
 * not terminated inside the buffer is caught the same way).  When the
 * arguments decode, encoding the decoded values must give back exactly
 * the input bytes (the decoder accepts the canonical form only) and
 * rcp_proc_size must agree.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/bulk.h>
#include <rcp/rcp.h>
#include <rcp/rpc.h>

#include "rpc/rpc_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FIELDS = 16 };

union val {
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	int32_t i32;
	float f;
	double d;
	const char *s;
	struct rcp_bytes b;
	rcp_bulk *h;
	unsigned char raw[3];
};

static unsigned char schema[FIELDS];
static int nfields;
static union val vals[FIELDS];
static rcp_bulk_ctx *ctx;

/* Fields FROM.. of the schema; a nested struct recurses. */
static int proc_from(rcp_proc *p, void *arg)
{
	int from = (int)(intptr_t)arg;
	for (int i = from; i < nfields; i++) {
		union val *v = &vals[i];
		switch (schema[i]) {
		case 0: rcp_proc_u8(p, &v->u8); break;
		case 1: rcp_proc_u16(p, &v->u16); break;
		case 2: rcp_proc_u32(p, &v->u32); break;
		case 3: rcp_proc_u64(p, &v->u64); break;
		case 4: rcp_proc_float(p, &v->f); break;
		case 5: rcp_proc_double(p, &v->d); break;
		case 6:
			rcp_proc_string(p, &v->s);
			if (rcp_proc_op(p) == RCP_PROC_DECODE && !rcp_proc_error(p) && v->s)
				(void)strlen(v->s);
			break;
		case 7: rcp_proc_bytes(p, &v->b); break;
		case 8: rcp_proc_bulk(p, &v->h); break;
		case 9: return rcp_proc_struct(p, proc_from, (void *)(intptr_t)(i + 1));
		case 10: rcp_proc_raw(p, v->raw, sizeof v->raw); break;
		default: rcp_proc_i32(p, &v->i32); break;
		}
	}
	return rcp_proc_error(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *buf, *again;
	size_t len, used = 0;
	int rc, depth = 0;

	if (!ctx) {
		rcp_ep *ep;
		struct rcp_ep_config ec = {0};
		if (rcp_ep_open("udp:", &ec, &ep) || rcp_bulk_ctx_open(ep, &ctx))
			abort();
	}
	if (size < 1)
		return 0;
	nfields = data[0] % (FIELDS + 1);
	if (size < 1 + (size_t)nfields)
		return 0;
	for (int i = 0; i < nfields; i++) {
		schema[i] = data[1 + i] % 12;
		if (schema[i] == 9 && ++depth > 4)
			schema[i] = 2;
	}
	data += 1 + nfields;
	len = size - 1 - (size_t)nfields;
	buf = malloc(len ? len : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, len);
	memset(vals, 0, sizeof vals);
	rc = rpci_proc_decode(proc_from, (void *)(intptr_t)0, buf, len, ctx);
	if (!rc) {
		int src;
		if (rcp_proc_size(proc_from, (void *)(intptr_t)0, &src) != len || src)
			__builtin_trap();
		again = malloc(len ? len : 1);
		if (!again || rcp_proc_encode(proc_from, (void *)(intptr_t)0, again, len, &used) ||
		    used != len || memcmp(again, buf, len))
			__builtin_trap(); /* decoded something that is not what it encodes */
		free(again);
	}
	for (int i = 0; i < nfields; i++)
		if (schema[i] == 8 && vals[i].h) {
			rcp_bulk_free(vals[i].h);
			vals[i].h = NULL;
		}
	free(buf);
	return 0;
}
