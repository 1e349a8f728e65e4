/*
 * tests/test_rcp_crowded.c — where RMA starts when the CPU is crowded
 * (rcp/start.c rcpi_rma_min; rcpc_set_crowded).  Two cores on the simulator with
 * RMA, no loss: an 80 KB message sender-first and one receiver-first, each
 * checked byte for byte, moves by RMA on an uncrowded CPU (rma_msgs
 * counts it) and streams through the nic on a crowded one (rma_msgs
 * stays); 2 MiB moves by RMA either way.  Deterministic (seed printed).
 */
#include "rcp_sim_test.h"

/* Sends LEN bytes 0 -> 1, the receive posted first if RECV_FIRST;
 * returns how many messages moved by RMA (both sides' counts). */
static uint64_t one(int crowded, size_t len, int recv_first)
{
	struct sim_one two[2] = {{0}};
	struct rcp_ep_stats a, b;
	unsigned char *src = malloc(len), *dst = calloc(1, len);
	struct sim *s;

	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < len; i++)
		src[i] = (unsigned char)(i * 7 + 3);
	s = pair(7, 0, 1, 4096);
	rcpc_set_crowded(sim_core(s, 0), crowded);
	rcpc_set_crowded(sim_core(s, 1), crowded);
	if (recv_first) {
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 9, dst, len,
		                            sim_now(s), &two[1].r),
		                 0);
		(void)sim_run(s, sim_one_done, &two[1], 100000); /* its READY goes out */
	}
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 9, src, len, sim_now(s), &two[0].r), 0);
	if (!recv_first)
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 9, dst, len,
		                            sim_now(s), &two[1].r),
		                 0);
	if (sim_run(s, sim_two_done, two, 10 * SEC))
		fail_msg("%zu B (crowded %d, recv first %d) never arrived (seed %u)", len, crowded,
		         recv_first, 7u);
	assert_int_equal(two[1].st.error, 0);
	assert_int_equal(two[1].st.len, len);
	assert_memory_equal(src, dst, len);
	rcpc_core_stats(sim_core(s, 0), &a);
	rcpc_core_stats(sim_core(s, 1), &b);
	sim_free(s);
	free(src);
	free(dst);
	return a.rma_msgs + b.rma_msgs;
}

static void t_rma_when_crowded(void **state)
{
	(void)state;
	for (int recv_first = 0; recv_first < 2; recv_first++) {
		assert_true(one(0, 80000, recv_first) > 0);     /* uncrowded: by RMA */
		assert_int_equal(one(1, 80000, recv_first), 0); /* crowded: streamed */
		assert_true(one(1, 2u << 20, recv_first) > 0);  /* large: RMA anyway */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_rma_when_crowded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
