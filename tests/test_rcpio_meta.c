/*
 * tests/test_rcpio_meta — the manager's decisions (rcpio/meta.h): miss
 * with pre-update, busy while filling, hit, eviction and recovery claims.
 */
#include "tests/testutil.h"

#include <rcp/error.h>

#include "rcpio/meta.h"

static void t_miss_busy_hit(void **state)
{
	rcpio_meta *m;
	struct rcpio_meta_reply r;
	struct rcpio_meta_stats st;
	(void)state;
	assert_int_equal(rcpio_meta_create(&m), 0);
	/* Rank 2 asks for block 7 and offers its slot 5: it owns it now. */
	assert_int_equal(rcpio_meta_query(m, 99, 7, 2, 5, 1000, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	assert_true(r.owner == 2 && r.slot == 5 && r.gen == 1000);
	/* Rank 1 asks while rank 2 fills: busy, its offer is not taken. */
	assert_int_equal(rcpio_meta_query(m, 99, 7, 1, 3, 2000, &r), 0);
	assert_int_equal(r.kind, RCPIO_BUSY);
	/* Only the owner's slot makes it ready. */
	assert_int_equal(rcpio_meta_ready(m, 99, 7, 1, 5), RCP_ENOENT);
	assert_int_equal(rcpio_meta_ready(m, 99, 7, 2, 4), RCP_ENOENT);
	assert_int_equal(rcpio_meta_ready(m, 99, 7, 2, 5), 0);
	assert_int_equal(rcpio_meta_query(m, 99, 7, 1, 3, 2000, &r), 0);
	assert_int_equal(r.kind, RCPIO_HIT);
	assert_true(r.owner == 2 && r.slot == 5 && r.gen == 1000);
	/* Peeking (the locations a reply carries ahead) changes nothing and
	 * tells only VALID blocks. */
	assert_int_equal(rcpio_meta_peek(m, 99, 7, &r), 1);
	assert_true(r.kind == RCPIO_HIT && r.owner == 2 && r.slot == 5 && r.gen == 1000);
	assert_int_equal(rcpio_meta_peek(m, 99, 8, &r), 0);
	assert_int_equal(rcpio_meta_query(m, 99, 9, 3, 1, 3000, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	assert_int_equal(rcpio_meta_peek(m, 99, 9, &r), 0); /* FILLING */
	assert_int_equal(rcpio_meta_ready(m, 99, 9, 3, 1), 0);
	assert_int_equal(rcpio_meta_peek(m, 99, 9, &r), 1);
	assert_true(r.owner == 3 && r.slot == 1 && r.gen == 3000);
	assert_int_equal(rcpio_meta_evict(m, 99, 9, 3, 1), 0);
	/* Another file, same block: independent. */
	assert_int_equal(rcpio_meta_query(m, 98, 7, 1, -1, 0, &r), 0);
	assert_int_equal(r.kind, RCPIO_NONE);
	rcpio_meta_get_stats(m, &st);
	assert_true(st.queries == 5 && st.misses == 2 && st.busy == 1 && st.hits == 1 &&
	            st.none == 1 && st.entries == 1 && st.peeks == 2);
	rcpio_meta_destroy(m);
}

static void t_evict(void **state)
{
	rcpio_meta *m;
	struct rcpio_meta_reply r;
	(void)state;
	assert_int_equal(rcpio_meta_create(&m), 0);
	assert_int_equal(rcpio_meta_query(m, 5, 1, 0, 9, 1, &r), 0);
	assert_int_equal(rcpio_meta_ready(m, 5, 1, 0, 9), 0);
	/* A stale eviction (old slot) does not remove the new owner. */
	assert_int_equal(rcpio_meta_evict(m, 5, 1, 0, 8), RCP_ENOENT);
	assert_int_equal(rcpio_meta_evict(m, 5, 1, 3, 9), RCP_ENOENT);
	assert_int_equal(rcpio_meta_evict(m, 5, 1, 0, 9), 0);
	assert_int_equal(rcpio_meta_query(m, 5, 1, 3, 2, 7, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	assert_int_equal(r.owner, 3);
	rcpio_meta_destroy(m);
}

/* A filler that dies after its MISS: the manager's probe (rcpio/xfer.c)
 * reports it gone and the block becomes fillable again; a live filler,
 * a VALID entry or another filler's entry are never dropped. */
static void t_filler_lost(void **state)
{
	rcpio_meta *m;
	struct rcpio_meta_reply r;
	struct rcpio_meta_stats st;
	(void)state;
	assert_int_equal(rcpio_meta_create(&m), 0);
	assert_int_equal(rcpio_meta_query(m, 8, 3, 1, 4, 10, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	/* Rank 2 is told BUSY and who fills. */
	assert_int_equal(rcpio_meta_query(m, 8, 3, 2, 6, 20, &r), 0);
	assert_int_equal(r.kind, RCPIO_BUSY);
	assert_true(r.owner == 1 && r.slot == 4 && r.gen == 10);
	/* One probe at a time, only of that filler. */
	assert_int_equal(rcpio_meta_probe(m, 8, 3, 1, 5), 0);
	assert_int_equal(rcpio_meta_probe(m, 8, 3, 1, 4), 1);
	assert_int_equal(rcpio_meta_probe(m, 8, 3, 1, 4), 0);
	/* Alive: kept, and may be probed again. */
	assert_int_equal(rcpio_meta_probed(m, 8, 3, 1, 4, 1), 0);
	assert_int_equal(rcpio_meta_query(m, 8, 3, 2, 6, 20, &r), 0);
	assert_int_equal(r.kind, RCPIO_BUSY);
	assert_int_equal(rcpio_meta_probe(m, 8, 3, 1, 4), 1);
	/* Gone: another slot's report changes nothing, the filler's drops it. */
	assert_int_equal(rcpio_meta_probed(m, 8, 3, 1, 7, 0), 0);
	assert_int_equal(rcpio_meta_probed(m, 8, 3, 1, 4, 0), 1);
	assert_int_equal(rcpio_meta_query(m, 8, 3, 2, 6, 20, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	assert_true(r.owner == 2 && r.slot == 6);
	/* The late READY of the dead one is stale; a VALID entry is never
	 * dropped by a probe. */
	assert_int_equal(rcpio_meta_ready(m, 8, 3, 1, 4), RCP_ENOENT);
	assert_int_equal(rcpio_meta_ready(m, 8, 3, 2, 6), 0);
	assert_int_equal(rcpio_meta_probe(m, 8, 3, 2, 6), 0);
	assert_int_equal(rcpio_meta_probed(m, 8, 3, 2, 6, 0), 0);
	assert_int_equal(rcpio_meta_query(m, 8, 3, 3, -1, 0, &r), 0);
	assert_int_equal(r.kind, RCPIO_HIT);
	rcpio_meta_get_stats(m, &st);
	assert_true(st.probes == 2 && st.lost == 1 && st.entries == 1);
	rcpio_meta_destroy(m);
}

static void t_insert_drop(void **state)
{
	rcpio_meta *m;
	struct rcpio_meta_reply r;
	uint64_t seed = 42;
	(void)state;
	assert_int_equal(rcpio_meta_create(&m), 0);
	/* Recovery claims: the first claim of a block wins. */
	for (uint64_t b = 0; b < 1000; b++)
		assert_int_equal(rcpio_meta_insert(m, 11, b, (uint32_t)(b % 4), (uint32_t)b, b + 1),
		                 0);
	assert_int_equal(rcpio_meta_insert(m, 11, 500, 3, 1, 1), RCP_EADDRINUSE);
	assert_int_equal(rcpio_meta_insert(m, 12, 500, 3, 1, 1), 0);
	for (int i = 0; i < 200; i++) {
		uint64_t b = test_rand(&seed) % 1000;
		assert_int_equal(rcpio_meta_query(m, 11, b, 0, -1, 0, &r), 0);
		if (r.kind != RCPIO_HIT || r.owner != b % 4 || r.slot != b || r.gen != b + 1)
			fail_msg("block %llu: kind %u owner %u (seed 42)", (unsigned long long)b,
			         r.kind, r.owner);
	}
	assert_int_equal(rcpio_meta_drop_file(m, 11), 1000);
	assert_int_equal(rcpio_meta_query(m, 11, 3, 0, -1, 0, &r), 0);
	assert_int_equal(r.kind, RCPIO_NONE);
	assert_int_equal(rcpio_meta_query(m, 12, 500, 0, -1, 0, &r), 0);
	assert_int_equal(r.kind, RCPIO_HIT);
	rcpio_meta_destroy(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_miss_busy_hit),
	    cmocka_unit_test(t_evict),
	    cmocka_unit_test(t_filler_lost),
	    cmocka_unit_test(t_insert_drop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
