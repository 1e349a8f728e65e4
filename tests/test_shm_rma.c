/*
 * tests/test_shm_rma.c — the shared-memory backend (nic/shm/): RMA by cross-memory
 * attach, forged keys, local registrations.
 * What every shm test shares, and the rules they follow: tests/shm_test.h.
 */
#include "shm_test.h"

/* ---- RMA ---------------------------------------------------------------------------- */

#define RMA_BYTES (8u << 20)

struct rkeys {
	uint32_t len;
	unsigned char rw[RCP_NIC_RKEY_MAX], ro[RCP_NIC_RKEY_MAX], wo[RCP_NIC_RKEY_MAX];
};

static void rma_child(rcp_nic *inherited, const char *paddr)
{
	unsigned char *rw = malloc(RMA_BYTES), *ro = malloc(4096), *wo = malloc(4096);
	char addr[RCP_NIC_ADDRSTR_MAX];
	rcp_nic_mr *mrw, *mro, *mwo;
	struct rcp_nic_frame f;
	struct rkeys k;
	size_t len;
	rcp_nic *c;
	int pp;

	rcp_nic_close(inherited);
	CHILD_CHECK(rw && ro && wo);
	test_fill(rw, RMA_BYTES, 100);
	test_fill(ro, 4096, 101);
	memset(wo, 0, 4096);
	addr_of(addr, sizeof addr, getpid(), "rma-c");
	CHILD_CHECK(rcp_nic_open(addr, NULL, &c) == 0);
	CHILD_CHECK(rcp_nic_peer_add_str(c, paddr, &pp) == 0);
	CHILD_CHECK(rcp_nic_mr_reg(c, rw, RMA_BYTES, RCP_NIC_ACCESS_READ | RCP_NIC_ACCESS_WRITE,
	                           &mrw) == 0);
	CHILD_CHECK(rcp_nic_mr_reg(c, ro, 4096, RCP_NIC_ACCESS_READ, &mro) == 0);
	CHILD_CHECK(rcp_nic_mr_reg(c, wo, 4096, RCP_NIC_ACCESS_WRITE, &mwo) == 0);
	memset(&k, 0, sizeof k);
	len = sizeof k.rw;
	CHILD_CHECK(rcp_nic_mr_pack(mrw, k.rw, &len) == 0);
	k.len = (uint32_t)len;
	len = sizeof k.ro;
	CHILD_CHECK(rcp_nic_mr_pack(mro, k.ro, &len) == 0);
	len = sizeof k.wo;
	CHILD_CHECK(rcp_nic_mr_pack(mwo, k.wo, &len) == 0);
	len = 1;
	CHILD_CHECK(rcp_nic_mr_pack(mrw, k.rw, &len) == RCP_ERANGE);
	CHILD_CHECK(send_buf(c, pp, &k, sizeof k) == 0);

	/* 1: parent has put into rw and wo; check, answer. */
	CHILD_CHECK(recv_wait(c, &f, 1, -1) == 1);
	rcp_nic_release(c, &f, 1);
	CHILD_CHECK(test_check(rw + 4096, 65536, 200) == -1);
	CHILD_CHECK(test_check(rw, 4096, 100) == -1); /* around it: untouched */
	CHILD_CHECK(test_check(wo, 4096, 201) == -1);
	CHILD_CHECK(test_check(ro, 4096, 101) == -1);
	CHILD_CHECK(send_buf(c, pp, "ok", 2) == 0);

	/* 2: deregister rw, tell. */
	CHILD_CHECK(recv_wait(c, &f, 1, -1) == 1);
	rcp_nic_release(c, &f, 1);
	CHILD_CHECK(rcp_nic_mr_dereg(mrw) == 0);
	CHILD_CHECK(send_buf(c, pp, "dereg", 5) == 0);

	/* 3: done. */
	CHILD_CHECK(recv_wait(c, &f, 1, -1) == 1);
	rcp_nic_release(c, &f, 1);
	CHILD_CHECK(rcp_nic_mr_dereg(mro) == 0);
	CHILD_CHECK(rcp_nic_mr_dereg(mwo) == 0);
	CHILD_CHECK(rcp_nic_mr_dereg(NULL) == 0);
	rcp_nic_close(c);
	free(rw);
	free(ro);
	free(wo);
	child_exit(0);
}

/* Whatever the key's layout: no edit of any byte of a read-only key may
 * write, read outside its 4096 bytes, or read other bytes than the
 * region's (base, length and access come from the owner's table, not from
 * the key).  The child checks afterwards that its regions are intact. */
static void rma_forgeries(rcp_nic *p, int c, const struct rkeys *k)
{
	static const unsigned char masks[] = {0x01, 0x10, 0x80, 0xff};
	unsigned char forged[RCP_NIC_RKEY_MAX], got[4096 + 64], one = 0x77;

	for (uint32_t i = 0; i < k->len; i++) {
		for (size_t m = 0; m < sizeof masks; m++) {
			int rc;
			memcpy(forged, k->ro, k->len);
			forged[i] ^= masks[m];
			rc = rcp_nic_put(p, c, &one, 1, forged, k->len, 0);
			if (rc == 0)
				fail_msg("put through a read-only key with byte %u ^ %#x", i,
				         masks[m]);
			memset(got, 0, sizeof got);
			rc = rcp_nic_get(p, c, got, 4096, forged, k->len, 0);
			if (rc == 0 && test_check(got, 4096, 101) != -1)
				fail_msg("key byte %u ^ %#x read other memory (byte %ld)", i,
				         masks[m], test_check(got, 4096, 101));
			rc = rcp_nic_get(p, c, got, 1, forged, k->len, 4096);
			if (rc == 0)
				fail_msg("key byte %u ^ %#x read past the region", i, masks[m]);
			rc = rcp_nic_get(p, c, got, 4096 + 64, forged, k->len, 0);
			if (rc == 0)
				fail_msg("key byte %u ^ %#x read a longer region", i, masks[m]);
		}
	}
}

static void t_rma(void **state)
{
	unsigned char *buf, small[4096];
	char paddr[RCP_NIC_ADDRSTR_MAX];
	struct rcp_nic_frame fr;
	struct rkeys k;
	rcp_nic *p;
	pid_t child;
	int c, rc;
	(void)state;

	p = open_ep("rma-p");
	assert_int_equal(rcp_nic_addr_str(p, paddr, sizeof paddr), 0);
	child = fork_child();
	if (child == 0)
		rma_child(p, paddr);
	buf = malloc(RMA_BYTES); /* after fork: see stream() in test_shm_procs.c */
	assert_non_null(buf);

	assert_int_equal(recv_wait(p, &fr, 1, -1), 1);
	assert_int_equal(fr.len, sizeof k);
	memcpy(&k, fr.data, sizeof k);
	assert_int_equal(rcp_nic_peer_add(p, fr.src, fr.srclen, &c), 0);
	rcp_nic_release(p, &fr, 1);
	assert_true(k.len > 0 && k.len <= RCP_NIC_RKEY_MAX);

	/* Whole region, and pieces at offsets. */
	memset(buf, 0, RMA_BYTES);
	rc = rcp_nic_get(p, c, buf, RMA_BYTES, k.rw, k.len, 0);
	if (rc == RCP_EPERM) {
		/* Yama ptrace_scope, seccomp in containers: not our bug. */
		printf("SKIP: cross-memory attach not permitted here\n");
		kill(child, SIGKILL);
		test_wait_child(child);
		rcp_nic_close(p);
		free(buf);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(test_check(buf, RMA_BYTES, 100), -1);
	assert_int_equal(rcp_nic_get(p, c, small, 100, k.rw, k.len, RMA_BYTES - 100), 0);
	assert_memory_equal(small, buf + RMA_BYTES - 100, 100);
	assert_int_equal(rcp_nic_get(p, c, small, 0, k.rw, k.len, RMA_BYTES), 0);
	assert_int_equal(rcp_nic_get(p, c, small, sizeof small, k.ro, k.len, 0), 0);
	assert_int_equal(test_check(small, sizeof small, 101), -1);

	/* Put, then read back. */
	test_fill(buf, 65536, 200);
	assert_int_equal(rcp_nic_put(p, c, buf, 65536, k.rw, k.len, 4096), 0);
	test_fill(small, sizeof small, 201);
	assert_int_equal(rcp_nic_put(p, c, small, sizeof small, k.wo, k.len, 0), 0);
	memset(buf, 0, 65536);
	assert_int_equal(rcp_nic_get(p, c, buf, 65536, k.rw, k.len, 4096), 0);
	assert_int_equal(test_check(buf, 65536, 200), -1);

	/* Outside the region, or not permitted by the key. */
	assert_int_equal(rcp_nic_get(p, c, buf, 2, k.rw, k.len, RMA_BYTES - 1), RCP_EACCES);
	assert_int_equal(rcp_nic_get(p, c, buf, 1, k.rw, k.len, RMA_BYTES + 1), RCP_EACCES);
	assert_int_equal(rcp_nic_get(p, c, buf, 1, k.rw, k.len, UINT64_MAX), RCP_EACCES);
	assert_int_equal(rcp_nic_put(p, c, buf, RMA_BYTES + 1, k.rw, k.len, 0), RCP_EACCES);
	assert_int_equal(rcp_nic_put(p, c, small, 1, k.ro, k.len, 0), RCP_EACCES);
	assert_int_equal(rcp_nic_get(p, c, small, 1, k.wo, k.len, 0), RCP_EACCES);
	assert_int_equal(rcp_nic_get(p, c, small, 1, k.rw, k.len - 1, 0), RCP_EINVAL);
	{
		unsigned char forged[RCP_NIC_RKEY_MAX];
		memcpy(forged, k.ro, k.len);
		forged[2] |= RCP_NIC_ACCESS_WRITE; /* access byte... */
		forged[k.len - 1] ^= 0x5a;         /* ...and a wrong key */
		assert_int_equal(rcp_nic_put(p, c, small, 1, forged, k.len, 0), RCP_EACCES);
	}
	rma_forgeries(p, c, &k);
	assert_int_equal(send_buf(p, c, "1", 1), 0);
	assert_int_equal(recv_wait(p, &fr, 1, -1), 1);
	assert_int_equal(fr.len, 2);
	rcp_nic_release(p, &fr, 1);

	/* Deregistered: the key is dead. */
	assert_int_equal(send_buf(p, c, "2", 1), 0);
	assert_int_equal(recv_wait(p, &fr, 1, -1), 1);
	assert_int_equal(fr.len, 5);
	rcp_nic_release(p, &fr, 1);
	assert_int_equal(rcp_nic_get(p, c, buf, 8, k.rw, k.len, 0), RCP_EACCES);
	assert_int_equal(rcp_nic_get(p, c, small, 8, k.ro, k.len, 0), 0);

	/* Gone. */
	assert_int_equal(send_buf(p, c, "3", 1), 0);
	assert_int_equal(test_wait_child(child), 0);
	assert_int_equal(rcp_nic_get(p, c, small, 8, k.ro, k.len, 0), RCP_EPEER);
	rcp_nic_close(p);
	free(buf);
}

/* Registration on this endpoint; its table is freed on close. */
static void t_mr_local(void **state)
{
	unsigned char buf[256], key[RCP_NIC_RKEY_MAX];
	rcp_nic_mr *m1, *m2;
	size_t len = sizeof key;
	rcp_nic *a;
	int self;
	(void)state;

	a = open_ep("mr");
	assert_int_equal(rcp_nic_mr_reg(a, buf, sizeof buf, RCP_NIC_ACCESS_READ, &m1), 0);
	assert_int_equal(rcp_nic_mr_reg(a, buf, sizeof buf, RCP_NIC_ACCESS_WRITE, &m2), 0);
	assert_int_equal(rcp_nic_mr_pack(m1, key, &len), 0);
	self = add_ep(a, a);
	memset(buf, 0x33, sizeof buf);
	{
		unsigned char out[256];
		assert_int_equal(rcp_nic_get(a, self, out, sizeof out, key, len, 0), 0);
		assert_memory_equal(out, buf, sizeof out);
	}
	assert_int_equal(rcp_nic_mr_dereg(m1), 0);
	/* m2 left registered: close releases it (ASan checks). */
	rcp_nic_close(a);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_rma),
		cmocka_unit_test(t_mr_local),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
