/*
 * tests/test_rcp_slots.c — where a send slot keeps a copied payload
 * (rcp/chan.h, SLOT STORAGE; session 21): up to SLOT_SMALL bytes in the
 * slot itself, so a small message's ring stays 192 B a slot, and a bigger
 * inline payload in the slot's own INLINE_CAP bytes of ch->inl.
 *
 *   t_where       white box: an 8 B, an 80 B and an 81 B message, each
 *                 the next slot: the first two point into their slot, the
 *                 third into that slot's bytes of ch->inl;
 *   t_lossy_sizes messages of sizes across the boundaries (1, 79, 80, 81,
 *                 1000, 2047, 2048 and a gather send of 81 B in three
 *                 pieces), hundreds in flight over a link that drops 5%:
 *                 every resend comes from the slot's storage, so a slot
 *                 whose bytes another overwrote (or that points at the
 *                 wrong place) delivers wrong bytes or none; all arrive,
 *                 in order, byte for byte; with and without CRC (without,
 *                 the express path copies).
 *
 * On the simulator (tests/sim.c): deterministic, seeded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rcp/chan.h" /* the slots, white box */
#include "rcp/core.h"
#include "sim.h"
#include "testutil.h"

#define SEC 1000000000ull

static struct sim *pair(uint64_t seed, double drop, int crc)
{
	struct sim_opts o = {0};
	struct sim *s;
	o.n = 2;
	o.seed = seed;
	o.link.drop = drop;
	o.link.latency = 5000;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 64;
	o.params.crc = crc;
	s = sim_new(&o);
	sim_chan(s, 0, 1);
	sim_chan(s, 1, 0);
	return s;
}

static void t_where(void **state)
{
	static const size_t sizes[3] = {8, SLOT_SMALL, SLOT_SMALL + 1};
	uint64_t seed = test_seed(2100);
	struct sim *s = pair(seed, 0, 1);
	rcp_chan *ab = sim_chan(s, 0, 1);
	unsigned char out[SLOT_SMALL + 1];
	(void)state;

	for (int i = 0; i < 3; i++) {
		uint32_t seq = ab->tx_next;
		const struct slot *sl;
		rcp_req *r;
		test_fill(out, sizes[i], (uint64_t)i);
		assert_int_equal(rcpc_isend(ab, (uint64_t)i, out, sizes[i], sim_now(s), &r), 0);
		assert_int_equal(ab->tx_next, seq + 1);
		sl = slot_of(ab, seq);
		assert_int_equal(sl->plen, sizes[i]);
		if (sizes[i] <= SLOT_SMALL)
			assert_ptr_equal(sl->payload, sl->sml);
		else
			assert_ptr_equal(sl->payload,
			                 ab->inl + (size_t)(seq & (ab->nslots - 1)) * INLINE_CAP);
		assert_int_equal(test_check(sl->payload, sizes[i], (uint64_t)i), -1);
		{
			struct sim_one x = {r, {0}, 0};
			assert_int_equal(sim_run(s, sim_one_done, &x, SEC), 0);
			assert_int_equal(x.st.error, 0);
		}
	}
	sim_free(s);
}

static int all_done(void *arg)
{
	struct sim_one *o = arg;
	for (; o->r; o++)
		if (!sim_one_done(o))
			return 0;
	return 1;
}

static void lossy_sizes(int crc)
{
	enum { N = 400 };
	static const size_t sizes[] = {1, 79, SLOT_SMALL, SLOT_SMALL + 1, 1000, 2047, 2048, 81};
	enum { NS = sizeof sizes / sizeof sizes[0] };
	uint64_t seed = test_seed(2101 + (uint64_t)crc);
	struct sim *s = pair(seed, 0.05, crc);
	rcp_chan *ab = sim_chan(s, 0, 1), *ba = sim_chan(s, 1, 0);
	static unsigned char out[N][2048], in[N][2048];
	static struct sim_one rx[N + 1], tx[N + 1];

	memset(rx, 0, sizeof rx);
	memset(tx, 0, sizeof tx);
	for (int i = 0; i < N; i++) {
		memset(in[i], 0, sizeof in[i]);
		assert_int_equal(rcpc_irecv(sim_core(s, 1), ba, 100 + (uint64_t)i, in[i],
		                            sizeof in[i], sim_now(s), &rx[i].r),
		                 0);
	}
	for (int i = 0; i < N; i++) {
		size_t len = sizes[i % NS];
		test_fill(out[i], len, seed + (uint64_t)i);
		if (i % NS == NS - 1) {
			/* A gather send of three pieces: gathered into the slot. */
			struct rcp_iov v[3] = {{out[i], 20}, {out[i] + 20, 40}, {out[i] + 60, 21}};
			assert_int_equal(
			    rcpc_isendv(ab, 100 + (uint64_t)i, v, 3, sim_now(s), &tx[i].r), 0);
		} else {
			assert_int_equal(
			    rcpc_isend(ab, 100 + (uint64_t)i, out[i], len, sim_now(s), &tx[i].r),
			    0);
		}
		assert_non_null(tx[i].r);
	}
	assert_int_equal(sim_run(s, all_done, rx, 60 * SEC), 0);
	assert_int_equal(sim_run(s, all_done, tx, 60 * SEC), 0);
	for (int i = 0; i < N; i++) {
		size_t len = sizes[i % NS];
		if (rx[i].st.error || rx[i].st.len != len ||
		    test_check(in[i], len, seed + (uint64_t)i) != -1)
			fail_msg(
			    "message %d (%zu B, crc %d): error %d, %zu B, bytes %s (seed %#llx)", i,
			    len, crc, rx[i].st.error, rx[i].st.len,
			    test_check(in[i], len, seed + (uint64_t)i) == -1 ? "right" : "wrong",
			    (unsigned long long)seed);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(tx[i].st.error, 0);
	{
		struct sim_stats st;
		sim_stats(s, &st);
		assert_true(st.dropped > 0); /* resends happened */
	}
	sim_free(s);
}

static void t_lossy_sizes(void **state)
{
	(void)state;
	lossy_sizes(1);
	lossy_sizes(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_where),
	    cmocka_unit_test(t_lossy_sizes),
	};
	return cmocka_run_group_tests_name("rcp send slots", tests, NULL, NULL);
}
