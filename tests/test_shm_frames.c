/*
 * tests/test_shm_frames.c — the shared-memory backend (nic/shm/): frames: sizes,
 * back-pressure, senders learned from `src`, partial release, fairness,
 * garbage segments and hostile headers.
 * What every shm test shares, and the rules they follow: tests/shm_test.h.
 */
#include "shm_test.h"

/* ---- frames ------------------------------------------------------------------------ */

static void t_emsgsize(void **state)
{
	struct rcp_nic_config cfg = {0};
	unsigned char *buf = calloc(1, 20000);
	rcp_nic *a, *b, *c;
	int pb, pc;
	(void)state;

	a = open_ep("mtu-a");
	b = open_ep("mtu-b");
	cfg.mtu = 512;
	c = open_cfg(getpid(), "mtu-c", &cfg);
	pb = add_ep(a, b);
	pc = add_ep(a, c);
	assert_int_equal(send_buf(a, pb, buf, 16385), RCP_EMSGSIZE);
	assert_int_equal(send_buf(a, pb, buf, 16384), 0);
	assert_int_equal(send_buf(a, pb, buf, 0), 0); /* empty frames exist */
	/* The receiver's MTU bounds what may be sent to it. */
	assert_int_equal(send_buf(a, pc, buf, 513), RCP_EMSGSIZE);
	assert_int_equal(send_buf(a, pc, buf, 512), 0);
	{
		struct rcp_nic_frame fr[4];
		assert_int_equal(recv_wait(b, fr, 4, -1), 2);
		assert_int_equal(fr[0].len, 16384);
		assert_int_equal(fr[1].len, 0);
		rcp_nic_release(b, fr, 2);
		assert_int_equal(recv_wait(c, fr, 4, -1), 1);
		assert_int_equal(fr[0].len, 512);
		rcp_nic_release(c, fr, 1);
	}
	rcp_nic_close(a);
	rcp_nic_close(b);
	rcp_nic_close(c);
	free(buf);
}

/* Fills the ring with random-size frames until RCP_EAGAIN, drains and
 * checks, several times round (WRAP markers, the full test, recovery). */
static void t_ring_full(void **state)
{
	struct rcp_nic_config cfg = {0};
	struct rcp_nic_frame fr[64];
	struct rcp_nic_info info;
	struct rcp_nic_stats st;
	uint64_t seed = test_seed(0x5eed1), s = seed, seq = 0, rseq = 0;
	rcp_nic *a, *b;
	int peer, rc;
	(void)state;

	cfg.rx_bytes = 65536;
	cfg.mtu = 1000;
	a = open_ep("full-a");
	b = open_cfg(getpid(), "full-b", &cfg);
	assert_int_equal(rcp_nic_query(b, &info), 0);
	peer = add_ep(a, b);

	/* MTU frames: at least rx_frames fit (the promised window). */
	{
		unsigned n = 0;
		while ((rc = send_seq(a, peer, seq, 1000)) == 0)
			n++, seq++;
		assert_int_equal(rc, RCP_EAGAIN);
		if (n < info.rx_frames)
			fail_msg("only %u MTU frames fit, rx_frames promises %u", n,
			         info.rx_frames);
		assert_int_equal(rcp_nic_get_stats(a, &st), 0);
		assert_true(st.tx_eagain >= 1);
		assert_int_equal(send_seq(a, peer, seq, 1000), RCP_EAGAIN); /* still */
	}
	for (int round = 0; round < 50; round++) {
		/* Drain and check everything sent so far. */
		while (rseq < seq) {
			int n = recv_wait(b, fr, 64, -1);
			if (n <= 0)
				fail_msg("round %d: frame %llu missing (seed %llu)", round,
				         (unsigned long long)rseq, (unsigned long long)seed);
			for (int i = 0; i < n; i++, rseq++) {
				long bad = test_check(fr[i].data, fr[i].len, rseq);
				if (bad >= 0)
					fail_msg("round %d frame %llu len %u: byte %ld (seed %llu)",
					         round, (unsigned long long)rseq, fr[i].len, bad,
					         (unsigned long long)seed);
			}
			rcp_nic_release(b, fr, n);
		}
		assert_int_equal(rcp_nic_recv(b, fr, 64), 0);
		/* Refill with random sizes, 0..mtu. */
		while ((rc = send_seq(a, peer, seq, (size_t)(test_rand(&s) % 1001))) == 0)
			seq++;
		assert_int_equal(rc, RCP_EAGAIN);
	}
	while (rseq < seq) {
		int n = recv_wait(b, fr, 64, -1);
		assert_true(n > 0);
		for (int i = 0; i < n; i++, rseq++)
			assert_int_equal(test_check(fr[i].data, fr[i].len, rseq), -1);
		rcp_nic_release(b, fr, n);
	}
	assert_int_equal(rcp_nic_get_stats(b, &st), 0);
	assert_int_equal(st.rx_frames, seq);
	assert_int_equal(st.rx_dropped, 0);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

static void t_src_peer_add(void **state)
{
	unsigned char blob[RCP_NIC_ADDR_MAX];
	struct rcp_nic_frame fr;
	size_t len = sizeof blob;
	rcp_nic *a, *b, *c;
	int ab, cb, ba, ba2, bc;
	(void)state;

	a = open_ep("src-a");
	b = open_ep("src-b");
	c = open_ep("src-c");
	ab = add_ep(a, b);
	assert_int_equal(rcp_nic_addr_blob(a, blob, &len), 0);

	/* Unknown sender: no index, but its address. */
	assert_int_equal(send_seq(a, ab, 1, 10), 0);
	assert_int_equal(recv_wait(b, &fr, 1, -1), 1);
	assert_int_equal(fr.peer, RCP_NIC_PEER_NONE);
	assert_int_equal(fr.srclen, len);
	assert_memory_equal(fr.src, blob, len);
	assert_int_equal(rcp_nic_peer_add(b, fr.src, fr.srclen, &ba), 0);
	rcp_nic_release(b, &fr, 1);
	ba2 = add_ep(b, a);
	assert_int_equal(ba2, ba); /* same address, same index */

	/* From now on its frames carry the index. */
	assert_int_equal(send_seq(a, ab, 2, 20), 0);
	expect_seq(b, 2, 20, ba);
	/* Both directions work. */
	assert_int_equal(send_seq(b, ba, 3, 30), 0);
	expect_seq(a, 3, 30, ab);

	/* Forgotten again: back to PEER_NONE. */
	assert_int_equal(rcp_nic_peer_remove(b, ba), 0);
	assert_int_equal(rcp_nic_peer_remove(b, ba), RCP_EINVAL);
	assert_int_equal(send_seq(a, ab, 4, 40), 0);
	expect_seq(b, 4, 40, RCP_NIC_PEER_NONE);

	/* Known before it ever sends: the index from the first frame on. */
	bc = add_ep(b, c);
	cb = add_ep(c, b);
	assert_int_equal(send_seq(c, cb, 5, 50), 0);
	expect_seq(b, 5, 50, bc);

	/* Sending to oneself. */
	{
		int aa = add_ep(a, a);
		assert_int_equal(send_seq(a, aa, 6, 60), 0);
		expect_seq(a, 6, 60, aa);
	}
	rcp_nic_close(a);
	rcp_nic_close(b);
	rcp_nic_close(c);
}

/* Frames released in part are handed out again; frames of a burst come
 * back in order. */
static void t_partial_release(void **state)
{
	struct rcp_nic_frame fr[8];
	rcp_nic *a, *b;
	int peer, n;
	(void)state;

	a = open_ep("part-a");
	b = open_ep("part-b");
	peer = add_ep(a, b);
	for (int i = 0; i < 5; i++)
		assert_int_equal(send_seq(a, peer, (uint64_t)i, (size_t)(i * 100)), 0);
	assert_int_equal(recv_wait(b, fr, 8, -1), 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(test_check(fr[i].data, fr[i].len, (uint64_t)i), -1);
	rcp_nic_release(b, fr, 2);
	n = rcp_nic_recv(b, fr, 8);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(test_check(fr[i].data, fr[i].len, (uint64_t)i + 2), -1);
	rcp_nic_release(b, fr, 3);
	rcp_nic_release(b, fr, 3); /* a repeated release is ignored */
	assert_int_equal(rcp_nic_recv(b, fr, 8), 0);
	assert_int_equal(send_seq(a, peer, 9, 9), 0);
	expect_seq(b, 9, 9, RCP_NIC_PEER_NONE);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* Each recv starts at the next ring: a busy sender cannot starve another. */
static void t_fairness(void **state)
{
	struct rcp_nic_frame fr;
	rcp_nic *a1, *a2, *b;
	int p1, p2, b1, b2, last = -2, runs = 0;
	(void)state;

	b = open_ep("fair-b");
	a1 = open_ep("fair-a1");
	a2 = open_ep("fair-a2");
	p1 = add_ep(a1, b);
	p2 = add_ep(a2, b);
	b1 = add_ep(b, a1);
	b2 = add_ep(b, a2);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(send_seq(a1, p1, (uint64_t)i, 8), 0);
		assert_int_equal(send_seq(a2, p2, (uint64_t)i + 100, 8), 0);
	}
	for (int i = 0; i < 40; i++) {
		assert_int_equal(recv_wait(b, &fr, 1, -1), 1);
		assert_true(fr.peer == b1 || fr.peer == b2);
		if (fr.peer == last)
			runs++;
		last = fr.peer;
		rcp_nic_release(b, &fr, 1);
	}
	assert_int_equal(runs, 0); /* strictly alternating */
	rcp_nic_close(a1);
	rcp_nic_close(a2);
	rcp_nic_close(b);
}

/* A peer that scribbles over our whole segment (slot table, rings) must not
 * crash us, make us read outside the segment, or hand out frames longer
 * than the MTU. */
static void t_garbage_segment(void **state)
{
	struct rcp_nic_config cfg = {0};
	uint64_t seed = test_seed(0x6a7ba6e), s = seed;
	struct rcp_nic_frame fr[16];
	size_t len;
	unsigned char *m;
	rcp_nic *a, *b;
	int peer;
	(void)state;

	cfg.rx_bytes = 4096;
	cfg.mtu = 256;
	setenv("RCP_SHM_PEERS", "4", 1);
	b = open_cfg(getpid(), "garbage", &cfg);
	unsetenv("RCP_SHM_PEERS");
	a = open_ep("garbage-a");
	peer = add_ep(a, b);
	assert_int_equal(send_seq(a, peer, 1, 100), 0);
	expect_seq(b, 1, 100, RCP_NIC_PEER_NONE);

	m = map_seg("garbage", &len);
	for (int round = 0; round < 20; round++) {
		/* Everything after the first 512 bytes (geometry, owner). */
		for (size_t i = 512; i + 8 <= len; i += 8) {
			uint64_t x = test_rand(&s);
			if (round & 1) /* half the rounds: plausible-looking words */
				x = (x & 0xff) | (1ull << 63);
			memcpy(m + i, &x, 8);
		}
		for (int k = 0; k < 10; k++) {
			int n = rcp_nic_recv(b, fr, 16);
			if (n < 0)
				fail_msg("round %d: recv %s (seed %llu)", round, rcp_strerror(n),
				         (unsigned long long)seed);
			for (int i = 0; i < n; i++)
				if (fr[i].len > 256)
					fail_msg("round %d: frame of %u bytes (seed %llu)", round,
					         fr[i].len, (unsigned long long)seed);
			rcp_nic_release(b, fr, n);
			(void)rcp_nic_arm(b);
		}
		(void)send_seq(a, peer, 2, 10);
	}
	munmap(m, len);
	rcp_nic_close(a);
	rcp_nic_close(b);
}

/* A sender that writes a hostile header into its own ring: a frame that
 * crosses the ring's end (its length fits the MTU, its cells do not fit
 * before the end), one longer than the MTU that fits the ring, and one
 * longer than the whole ring.  The reader must hand out no frame, count
 * each one once in rx_dropped and ignore that sender from then on, while a
 * well-behaved sender's frames still arrive.  The header is written where
 * the reader looks next, with the right check field, so only the length
 * tests stand between it and the frame. */
static uint64_t seg_u32(const unsigned char *m, size_t off)
{
	uint32_t v;
	memcpy(&v, m + off, 4);
	return v;
}

/* Slot of the sender called "ts-<pid>-TAG" in the segment M. */
static uint32_t slot_of(const unsigned char *m, const char *tag)
{
	char name[64];
	uint32_t nslots = (uint32_t)seg_u32(m, 12);
	snprintf(name, sizeof name, "ts-%d-%s", (int)getpid(), tag);
	for (uint32_t i = 0; i < nslots; i++) {
		const unsigned char *s = m + 512 + (size_t)i * 256;
		/* state word, start time, pid ns, then namelen and name */
		if (s[20] == strlen(name) && !memcmp(s + 21, name, strlen(name)))
			return i;
	}
	fail_msg("no slot for %s", name);
	return 0;
}

static void t_hostile_header(void **state)
{
	static const struct {
		const char *tag;
		uint32_t pre; /* one-cell frames sent (and received) first */
		uint64_t len; /* the hostile header's length */
	} cases[] = {
	    {"hx-end", 63, 100},         /* last cell, 2 cells: crosses the end */
	    {"hx-mtu", 1, 300},          /* 5 cells from cell 1: fits, above the MTU */
	    {"hx-huge", 5, 0xffffffffu}, /* longer than the ring */
	};
	struct rcp_nic_config cfg = {0};
	struct rcp_nic_stats st;
	struct rcp_nic_frame fr[4];
	size_t len;
	unsigned char *m;
	rcp_nic *b, *good;
	int gpeer;
	(void)state;

	cfg.rx_bytes = 4096; /* 64 cells */
	cfg.mtu = 256;
	setenv("RCP_SHM_PEERS", "4", 1);
	b = open_cfg(getpid(), "hostile", &cfg);
	unsetenv("RCP_SHM_PEERS");
	good = open_ep("hx-good");
	gpeer = add_ep(good, b);
	m = map_seg("hostile", &len);
	assert_int_equal(seg_u32(m, 16), 64); /* ring_cells */

	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		uint32_t nslots = (uint32_t)seg_u32(m, 12), nmrs = (uint32_t)seg_u32(m, 24), si;
		/* nic/shm/shm_int.h's layout(): the slot table, then the registration
		 * table (32 B entries) and the rings, each 64 KiB aligned. */
		uint64_t mrs_off = (512 + (uint64_t)nslots * 256 + 65535) & ~(uint64_t)65535;
		uint64_t rings_off = (mrs_off + (uint64_t)nmrs * 32 + 65535) & ~(uint64_t)65535;
		uint64_t pos = cases[k].pre, h;
		rcp_nic *a = open_ep(cases[k].tag);
		int peer = add_ep(a, b), n;

		for (uint32_t i = 0; i < cases[k].pre; i++) {
			assert_int_equal(send_seq(a, peer, i, 8), 0);
			expect_seq(b, i, 8, RCP_NIC_PEER_NONE);
		}
		si = slot_of(m, cases[k].tag);
		/* VALID | check (the cell index) | length, at the consumer index */
		h = 1ull << 63 | (pos & 0x7fffff) << 40 | cases[k].len;
		memcpy(m + rings_off + (uint64_t)si * 64 * 64 + (pos & 63) * 64, &h, 8);
		assert_int_equal(rcp_nic_get_stats(b, &st), 0);
		assert_int_equal(st.rx_dropped, k);
		for (int round = 0; round < 3; round++) {
			n = rcp_nic_recv(b, fr, 4);
			if (n > 0)
				fail_msg(
				    "%s: the reader handed out a frame of %u bytes at cell %llu "
				    "of a 64-cell ring",
				    cases[k].tag, fr[0].len, (unsigned long long)(pos & 63));
			assert_int_equal(n, 0);
		}
		assert_int_equal(rcp_nic_get_stats(b, &st), 0);
		if (st.rx_dropped != k + 1)
			fail_msg("%s: rx_dropped %llu, want %zu", cases[k].tag,
			         (unsigned long long)st.rx_dropped, k + 1);
		/* The sender is ignored from now on; the good one still arrives. */
		(void)send_seq(a, peer, 99, 8);
		assert_int_equal(send_seq(good, gpeer, k, 16), 0);
		expect_seq(b, k, 16, RCP_NIC_PEER_NONE);
		assert_int_equal(rcp_nic_recv(b, fr, 4), 0);
		rcp_nic_close(a);
	}
	assert_int_equal(rcp_nic_get_stats(b, &st), 0);
	assert_int_equal(st.rx_dropped, 3);
	munmap(m, len);
	rcp_nic_close(good);
	rcp_nic_close(b);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_emsgsize),
		cmocka_unit_test(t_ring_full),
		cmocka_unit_test(t_src_peer_add),
		cmocka_unit_test(t_partial_release),
		cmocka_unit_test(t_fairness),
		cmocka_unit_test(t_garbage_segment),
		cmocka_unit_test(t_hostile_header),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
