/*
 * rpc/proc.c — argument encoding and decoding (procs).
 *
 * No XDR: values are copied in host byte order, unaligned (memcpy), and
 * the rpc message header says which order that was (rpc/hdr.c refuses a
 * foreign one before any proc runs).  One proc function serves the three
 * operations: ENCODE writes into the buffer, SIZE only counts, DECODE
 * reads from it with every access bounds-checked — the buffer comes from
 * the wire and is never trusted.  Strings and byte arrays decode to
 * pointers into the buffer (no allocation).
 *
 * Layout: integers and floats as their sizeof bytes; a string as a u32
 * length L (0xffffffff: NULL) then L bytes then a NUL; bytes as a u32
 * length then the bytes.
 */
#include <string.h>

#include <rcp/rpc.h>

#include "rpc/rpc_int.h"

#define NULL_STRING 0xffffffffu

static int fail(rcp_proc *p, int rc)
{
	if (!p->error)
		p->error = rc;
	return p->error;
}

/* Moves LEN bytes between *V and the buffer. */
static int xfer(rcp_proc *p, void *v, size_t len)
{
	if (p->error)
		return p->error;
	switch (p->op) {
	case RCP_PROC_SIZE: p->pos += len; return 0;
	case RCP_PROC_ENCODE:
		if (len > p->size - p->pos)
			return fail(p, RCP_ERANGE);
		if (len)
			memcpy(p->buf + p->pos, v, len);
		p->pos += len;
		return 0;
	case RCP_PROC_DECODE:
		if (len > p->size - p->pos)
			return fail(p, RCP_EPROTO);
		if (len)
			memcpy(v, p->buf + p->pos, len);
		p->pos += len;
		return 0;
	default: return fail(p, RCP_EINVAL);
	}
}

#define SCALAR(name, type)                                                                         \
	int rcp_proc_##name(rcp_proc *p, type *v)                                                  \
	{                                                                                          \
		if (!p || !v)                                                                      \
			return RCP_EINVAL;                                                         \
		return xfer(p, v, sizeof *v);                                                      \
	}

SCALAR(u8, uint8_t)
SCALAR(u16, uint16_t)
SCALAR(u32, uint32_t)
SCALAR(u64, uint64_t)
SCALAR(i8, int8_t)
SCALAR(i16, int16_t)
SCALAR(i32, int32_t)
SCALAR(i64, int64_t)
SCALAR(float, float)
SCALAR(double, double)

int rcp_proc_raw(rcp_proc *p, void *data, size_t len)
{
	if (!p || (!data && len))
		return RCP_EINVAL;
	return xfer(p, data, len);
}

/* DECODE: a pointer to LEN bytes in the buffer, consumed. */
static const unsigned char *take(rcp_proc *p, size_t len)
{
	const unsigned char *at;
	if (len > p->size - p->pos) {
		fail(p, RCP_EPROTO);
		return NULL;
	}
	at = p->buf + p->pos;
	p->pos += len;
	return at;
}

/* Decoding a u32 length and that many bytes: the bytes in place, *N the
 * length; NULL with p->error set if the message is too short. */
static const unsigned char *take_counted(rcp_proc *p, uint32_t *n)
{
	if (xfer(p, n, sizeof *n))
		return NULL;
	return take(p, *n);
}

int rcp_proc_string(rcp_proc *p, const char **s)
{
	uint32_t n;
	if (!p || !s)
		return RCP_EINVAL;
	if (p->error)
		return p->error;
	if (p->op == RCP_PROC_DECODE) {
		const unsigned char *at;
		if (xfer(p, &n, sizeof n))
			return p->error;
		if (n == NULL_STRING) {
			*s = NULL;
			return 0;
		}
		at = take(p, (size_t)n + 1);
		if (!at)
			return p->error;
		if (at[n] != 0 || memchr(at, 0, n))
			return fail(p, RCP_EPROTO);
		*s = (const char *)at;
		return 0;
	}
	if (!*s) {
		n = NULL_STRING;
		return xfer(p, &n, sizeof n);
	}
	{
		size_t len = strlen(*s);
		if (len >= NULL_STRING)
			return fail(p, RCP_ERANGE);
		n = (uint32_t)len;
		xfer(p, &n, sizeof n);
		return xfer(p, (void *)(uintptr_t)*s, len + 1);
	}
}

int rcp_proc_bytes(rcp_proc *p, struct rcp_bytes *b)
{
	uint32_t n;
	if (!p || !b)
		return RCP_EINVAL;
	if (p->error)
		return p->error;
	if (p->op == RCP_PROC_DECODE) {
		const unsigned char *at = take_counted(p, &n);
		if (!at)
			return p->error;
		b->data = n ? at : NULL;
		b->len = n;
		return 0;
	}
	if (b->len >= NULL_STRING || (!b->data && b->len))
		return fail(p, RCP_ERANGE);
	n = (uint32_t)b->len;
	xfer(p, &n, sizeof n);
	return xfer(p, (void *)(uintptr_t)b->data, b->len);
}

int rcp_proc_bulk(rcp_proc *p, rcp_bulk **h)
{
	uint32_t n;
	if (!p || !h)
		return RCP_EINVAL;
	if (p->error)
		return p->error;
	if (p->op == RCP_PROC_DECODE) {
		const unsigned char *at = take_counted(p, &n);
		if (!at)
			return p->error;
		*h = NULL;
		if (!p->bulk || rcp_bulk_deserialize(p->bulk, at, n, h))
			return fail(p, RCP_EPROTO);
		return 0;
	}
	{
		size_t sz = rcp_bulk_serialized_size(*h);
		if (!*h || !sz || sz >= NULL_STRING)
			return fail(p, RCP_EINVAL);
		n = (uint32_t)sz;
		if (xfer(p, &n, sizeof n))
			return p->error;
		if (p->op == RCP_PROC_SIZE) {
			p->pos += sz;
			return 0;
		}
		if (sz > p->size - p->pos)
			return fail(p, RCP_ERANGE);
		if (rcp_bulk_serialize(*h, p->buf + p->pos, &sz))
			return fail(p, RCP_EINVAL);
		p->pos += sz;
		return 0;
	}
}

int rcp_proc_struct(rcp_proc *p, rcp_proc_fn fn, void *data)
{
	int rc;
	if (!p || !fn)
		return RCP_EINVAL;
	if (p->error)
		return p->error;
	rc = fn(p, data);
	if (rc)
		fail(p, rc);
	return p->error;
}

int rcp_proc_op(const rcp_proc *p)
{
	return p ? p->op : RCP_EINVAL;
}

int rcp_proc_error(const rcp_proc *p)
{
	return p ? p->error : RCP_EINVAL;
}

int rcp_proc_encode(rcp_proc_fn fn, const void *data, void *buf, size_t len, size_t *used)
{
	rcp_proc p = {buf, len, 0, RCP_PROC_ENCODE, 0, NULL};
	if (!fn || (!buf && len))
		return RCP_EINVAL;
	rcp_proc_struct(&p, fn, (void *)(uintptr_t)data);
	if (used)
		*used = p.error ? 0 : p.pos;
	return p.error;
}

size_t rcp_proc_size(rcp_proc_fn fn, const void *data, int *rc)
{
	rcp_proc p = {NULL, 0, 0, RCP_PROC_SIZE, 0, NULL};
	if (!fn) {
		if (rc)
			*rc = RCP_EINVAL;
		return 0;
	}
	rcp_proc_struct(&p, fn, (void *)(uintptr_t)data);
	if (rc)
		*rc = p.error;
	return p.error ? 0 : p.pos;
}

int rcp_proc_decode(rcp_proc_fn fn, void *data, const void *buf, size_t len)
{
	return rpci_proc_decode(fn, data, buf, len, NULL);
}

int rpci_proc_decode(rcp_proc_fn fn, void *data, const void *buf, size_t len, rcp_bulk_ctx *bulk)
{
	rcp_proc p = {(unsigned char *)(uintptr_t)buf, len, 0, RCP_PROC_DECODE, 0, bulk};
	if (!fn || (!buf && len))
		return RCP_EINVAL;
	rcp_proc_struct(&p, fn, data);
	if (!p.error && p.pos != len)
		p.error = RCP_EPROTO; /* trailing bytes: not what this proc encodes */
	/* A user proc that returns a positive or odd value is a bad proc. */
	return p.error;
}
