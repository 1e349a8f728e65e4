/*
 * tests/test_rpc_proc.c — procs: round trips of every built-in and of a
 * nested struct, bounds checks on hostile input, registration and ids.
 */
#include <float.h>
#include <math.h>

#include <rcp/rpc.h>

#include "testutil.h"

struct inner {
	int16_t a;
	float f;
	const char *name;
};

struct outer {
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	int8_t i8;
	int32_t i32;
	int64_t i64;
	double d;
	const char *s, *nul;
	struct rcp_bytes b;
	unsigned char raw[5];
	struct inner in[2];
};

RCP_PROC_DEFINE(proc_inner, struct inner, rcp_proc_i16(p, &v->a); rcp_proc_float(p, &v->f);
                rcp_proc_string(p, &v->name))

RCP_PROC_DEFINE(proc_outer, struct outer, rcp_proc_u8(p, &v->u8); rcp_proc_u16(p, &v->u16);
                rcp_proc_u32(p, &v->u32); rcp_proc_u64(p, &v->u64); rcp_proc_i8(p, &v->i8);
                rcp_proc_i32(p, &v->i32); rcp_proc_i64(p, &v->i64); rcp_proc_double(p, &v->d);
                rcp_proc_string(p, &v->s); rcp_proc_string(p, &v->nul); rcp_proc_bytes(p, &v->b);
                rcp_proc_raw(p, v->raw, sizeof v->raw); rcp_proc_struct(p, proc_inner, &v->in[0]);
                rcp_proc_struct(p, proc_inner, &v->in[1]))

static void fill(struct outer *o)
{
	static const unsigned char bytes[] = {0, 1, 2, 255, 0, 7};
	memset(o, 0, sizeof *o);
	o->u8 = 0xfe;
	o->u16 = 0xbeef;
	o->u32 = 0xdeadbeef;
	o->u64 = 0x0123456789abcdefull;
	o->i8 = -5;
	o->i32 = INT32_MIN;
	o->i64 = -1234567890123ll;
	o->d = -DBL_MAX;
	o->s = "héllo";
	o->nul = NULL;
	o->b.data = bytes;
	o->b.len = sizeof bytes;
	memcpy(o->raw, "abcde", 5);
	o->in[0].a = -7;
	o->in[0].f = 3.5f;
	o->in[0].name = "";
	o->in[1].a = 32767;
	o->in[1].f = -INFINITY;
	o->in[1].name = "inner";
}

static void test_round_trip(void **state)
{
	struct outer a, b;
	unsigned char buf[512];
	size_t used, sz;
	int rc;
	(void)state;
	fill(&a);
	assert_int_equal(rcp_proc_encode(proc_outer, &a, buf, sizeof buf, &used), 0);
	sz = rcp_proc_size(proc_outer, &a, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(sz, used);
	memset(&b, 0x55, sizeof b);
	assert_int_equal(rcp_proc_decode(proc_outer, &b, buf, used), 0);
	assert_int_equal(b.u8, a.u8);
	assert_int_equal(b.u16, a.u16);
	assert_int_equal(b.u32, a.u32);
	assert_true(b.u64 == a.u64);
	assert_int_equal(b.i8, a.i8);
	assert_int_equal(b.i32, a.i32);
	assert_true(b.i64 == a.i64);
	assert_true(b.d == a.d);
	assert_string_equal(b.s, a.s);
	assert_null(b.nul);
	assert_int_equal(b.b.len, a.b.len);
	assert_memory_equal(b.b.data, a.b.data, a.b.len);
	assert_memory_equal(b.raw, a.raw, 5);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(b.in[i].a, a.in[i].a);
		assert_true(b.in[i].f == a.in[i].f);
		assert_string_equal(b.in[i].name, a.in[i].name);
	}
	/* Decoded strings point into the buffer: no allocation. */
	assert_true((const unsigned char *)b.s > buf && (const unsigned char *)b.s < buf + used);
}

static void test_short_and_long(void **state)
{
	struct outer a, b;
	unsigned char buf[512];
	size_t used;
	(void)state;
	fill(&a);
	assert_int_equal(rcp_proc_encode(proc_outer, &a, buf, sizeof buf, &used), 0);
	/* Every truncation is refused, never read past. */
	for (size_t n = 0; n < used; n++) {
		unsigned char *c = malloc(n ? n : 1);
		memcpy(c, buf, n);
		assert_int_equal(rcp_proc_decode(proc_outer, &b, c, n), RCP_EPROTO);
		free(c);
	}
	/* Trailing bytes are refused too. */
	assert_int_equal(rcp_proc_decode(proc_outer, &b, buf, used + 1), RCP_EPROTO);
	/* Encoding into a short buffer: RCP_ERANGE, no overrun. */
	for (size_t n = 0; n < used; n++)
		assert_int_equal(rcp_proc_encode(proc_outer, &a, buf, n, NULL), RCP_ERANGE);
}

static void test_hostile(void **state)
{
	uint64_t seed = test_seed(0x5eed), r = seed;
	struct outer b;
	unsigned char buf[256];
	const char *s;
	(void)state;
	/* A string whose length points past the end, one without its NUL,
	 * one with an inner NUL. */
	{
		uint32_t n = 1000;
		memcpy(buf, &n, 4);
		assert_int_equal(rcp_proc_decode((rcp_proc_fn)rcp_proc_string, &s, buf, 10),
		                 RCP_EPROTO);
		n = 3;
		memcpy(buf, &n, 4);
		memcpy(buf + 4, "abcd", 4);
		assert_int_equal(rcp_proc_decode((rcp_proc_fn)rcp_proc_string, &s, buf, 8),
		                 RCP_EPROTO);
		memcpy(buf + 4, "a\0c\0", 4);
		assert_int_equal(rcp_proc_decode((rcp_proc_fn)rcp_proc_string, &s, buf, 8),
		                 RCP_EPROTO);
		memcpy(buf + 4, "abc\0", 4);
		assert_int_equal(rcp_proc_decode((rcp_proc_fn)rcp_proc_string, &s, buf, 8), 0);
		assert_string_equal(s, "abc");
	}
	/* Random garbage: never crashes, never reads out of bounds (ASan). */
	for (int i = 0; i < 20000; i++) {
		size_t n = test_rand(&r) % sizeof buf;
		for (size_t j = 0; j < n; j++)
			buf[j] = (unsigned char)test_rand(&r);
		unsigned char *c = malloc(n ? n : 1);
		memcpy(c, buf, n);
		int rc = rcp_proc_decode(proc_outer, &b, c, n);
		if (rc && rc != RCP_EPROTO) {
			print_error("seed %llu: unexpected %d\n", (unsigned long long)seed, rc);
			fail();
		}
		free(c);
	}
}

static int bad_proc(rcp_proc *p, void *data)
{
	(void)data;
	(void)p;
	return RCP_EINVAL;
}

static void test_register(void **state)
{
	rcp_ep *ep;
	rcp_rpc *rpc;
	uint64_t id, id2;
	char addr[64];
	(void)state;
	snprintf(addr, sizeof addr, "shm:rpcproc-%d", (int)getpid());
	if (rcp_ep_open(addr, NULL, &ep))
		test_skip_all("no shm endpoint");
	assert_int_equal(rcp_rpc_create(ep, NULL, &rpc), 0);
	assert_true(rcp_rpc_id("echo") == rcp_rpc_id("echo"));
	assert_true(rcp_rpc_id("echo") != rcp_rpc_id("echp"));
	assert_true(rcp_rpc_id("") != 0);
	assert_int_equal(rcp_rpc_register(rpc, "echo", proc_outer, NULL, &id), 0);
	assert_true(id == rcp_rpc_id("echo"));
	assert_int_equal(rcp_rpc_register(rpc, "echo", proc_outer, NULL, &id2), 0);
	assert_true(id2 == id);
	/* Same name, other procs: refused. */
	assert_int_equal(rcp_rpc_register(rpc, "echo", bad_proc, NULL, NULL), RCP_EADDRINUSE);
	/* FNV-1a 64 collision pair is hard to find; many names must all get
	 * distinct ids and register. */
	for (int i = 0; i < 500; i++) {
		char n[32];
		snprintf(n, sizeof n, "call.%d", i);
		assert_int_equal(rcp_rpc_register(rpc, n, NULL, NULL, NULL), 0);
	}
	assert_int_equal(rcp_rpc_register(rpc, "", NULL, NULL, NULL), RCP_EINVAL);
	assert_int_equal(rcp_rpc_set_handler(rpc, 42, NULL, NULL), RCP_ENOENT);
	/* A bad proc fails the forward synchronously (RCP_EPROTO). */
	{
		rcp_chan *ch;
		rcp_rpc_req *rq;
		assert_int_equal(rcp_rpc_register(rpc, "bad", bad_proc, NULL, &id), 0);
		assert_int_equal(rcp_connect(ep, addr, &ch), 0);
		assert_int_equal(rcp_rpc_forward(rpc, ch, id, NULL, NULL, -1, NULL, NULL, &rq),
		                 RCP_EPROTO);
		assert_int_equal(rcp_rpc_forward(rpc, ch, 12345, NULL, NULL, -1, NULL, NULL, &rq),
		                 RCP_ENOENT);
	}
	rcp_rpc_destroy(rpc);
	rcp_ep_close(ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_short_and_long),
	    cmocka_unit_test(test_hostile),
	    cmocka_unit_test(test_register),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
