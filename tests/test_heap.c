/*
 * tests/test_heap.c — the core's timer heap (rcp/heap.c) against a brute
 * force: seeded random inserts, key changes up and down, removals and
 * pops on a few hundred nodes, the least key checked after every step
 * against a scan of all nodes, and the heap's shape (every parent <= its
 * children, every node's index pointing at itself) after every step.
 */
#include "testutil.h"

#include "rcp/heap.h"

#define NN 300

static struct rcpi_tnode node[NN];
static int in[NN]; /* the brute force: which nodes are in, their keys in node[].at */

static uint64_t brute_min(void)
{
	uint64_t m = UINT64_MAX;
	for (int i = 0; i < NN; i++)
		if (in[i] && node[i].at < m)
			m = node[i].at;
	return m;
}

/* Returns NULL or what is wrong with H's shape. */
static const char *shape(const struct rcpi_heap *h)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < h->n; i++) {
		if (h->v[i]->idx != i)
			return "a node's index is not its place";
		if (i && h->v[(i - 1) / 2]->at > h->v[i]->at)
			return "a parent's key is larger than its child's";
	}
	for (int i = 0; i < NN; i++) {
		if (in[i] != (node[i].idx != RCPI_HEAP_NONE))
			return "a node is in the heap iff the brute force has it: not so";
		n += (uint32_t)in[i];
	}
	return n == h->n ? NULL : "node count differs";
}

static void run(uint64_t seed, int steps)
{
	struct rcpi_heap h = {0};
	uint64_t s = seed;

	for (int i = 0; i < NN; i++) {
		rcpi_tnode_init(&node[i]);
		in[i] = 0;
	}
	assert_int_equal(rcpi_heap_reserve(&h, NN), 0);
	for (int step = 0; step < steps; step++) {
		uint64_t r = test_rand(&s);
		int i = (int)(r % NN);
		/* Keys from a small range: ties are frequent (channels due at
		 * once), and large ones too. */
		uint64_t at = (r >> 20) % 64 ? (r >> 32) % 1000 : (r >> 32);
		const char *bad;
		switch ((r >> 16) % 8) {
		case 0: /* take out */
			rcpi_heap_del(&h, &node[i]);
			in[i] = 0;
			break;
		case 1: /* set to "never": also takes out */
			rcpi_heap_set(&h, &node[i], UINT64_MAX);
			in[i] = 0;
			break;
		case 2: /* pop the least */
			if (h.n) {
				struct rcpi_tnode *t = rcpi_heap_top(&h);
				uint64_t m = brute_min();
				if (t->at != m)
					fail_msg("seed %llu step %d: top %llu, least %llu",
					         (unsigned long long)seed, step,
					         (unsigned long long)t->at, (unsigned long long)m);
				rcpi_heap_del(&h, t);
				in[t - node] = 0;
			}
			break;
		default: /* insert, or move up or down */
			rcpi_heap_set(&h, &node[i], at);
			in[i] = 1;
		}
		if (rcpi_heap_min(&h) != brute_min())
			fail_msg("seed %llu step %d: min %llu, brute force %llu",
			         (unsigned long long)seed, step,
			         (unsigned long long)rcpi_heap_min(&h),
			         (unsigned long long)brute_min());
		bad = shape(&h);
		if (bad)
			fail_msg("seed %llu step %d: %s", (unsigned long long)seed, step, bad);
	}
	/* Drain in order. */
	for (uint64_t last = 0; h.n;) {
		struct rcpi_tnode *t = rcpi_heap_top(&h);
		if (t->at < last)
			fail_msg("seed %llu: drained %llu after %llu", (unsigned long long)seed,
			         (unsigned long long)t->at, (unsigned long long)last);
		last = t->at;
		rcpi_heap_del(&h, t);
		in[t - node] = 0;
	}
	assert_true(rcpi_heap_top(&h) == NULL);
	assert_true(rcpi_heap_min(&h) == UINT64_MAX);
	rcpi_heap_free(&h);
}

static void t_random_ops(void **state)
{
	uint64_t seed = test_seed(0x4ea9);
	(void)state;
	for (uint64_t k = 0; k < 20; k++)
		run(seed + k, 5000);
}

/* A node set to its own key again, to the same key as others, and deleted
 * twice: no change, no damage. */
static void t_edges(void **state)
{
	struct rcpi_heap h = {0};
	(void)state;
	for (int i = 0; i < 4; i++) {
		rcpi_tnode_init(&node[i]);
		in[i] = 0;
	}
	assert_int_equal(rcpi_heap_reserve(&h, 4), 0);
	rcpi_heap_del(&h, &node[0]); /* not in: nothing */
	for (int i = 0; i < 4; i++) {
		rcpi_heap_set(&h, &node[i], 7);
		in[i] = 1;
	}
	rcpi_heap_set(&h, &node[2], 7);
	assert_null(shape(&h));
	rcpi_heap_set(&h, &node[3], 0);
	assert_ptr_equal(rcpi_heap_top(&h), &node[3]);
	rcpi_heap_del(&h, &node[3]);
	rcpi_heap_del(&h, &node[3]);
	in[3] = 0;
	assert_null(shape(&h));
	assert_int_equal(h.n, 3);
	assert_true(rcpi_heap_min(&h) == 7);
	rcpi_heap_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_random_ops),
	    cmocka_unit_test(t_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
