/*
 * tests/rcp_sim_test.h — what the tests of the protocol core on a simulated
 * network (tests/sim.c) share: a static pair of ends and a predicate that
 * never holds.  Included once per test program: test_rcp_sim.c (two-way
 * workloads, single scenarios), test_rcp_sim_hostile.c (hostile frames, the
 * wire tape), test_rcp_sim_echo.c (echo, piggybacked acks, windows),
 * test_rcp_sim_acks.c (selective retransmission, forged frames);
 * test_rcp_limits.c, test_rcp_timers.c, test_rcp_stale.c, test_rcp_rma.c,
 * test_rcp_crowded.c and test_rcp_ready.c take pair() or pair_opts() and
 * never() from it.
 * Deterministic: each case names its seed, and a failure prints it.
 * RCP_TEST_SEED overrides the base.
 */
#ifndef RCP_TESTS_RCP_SIM_TEST_H
#define RCP_TESTS_RCP_SIM_TEST_H

#include "rcp/core.h"
#include "rcp/wire.h"
#include "sim.h"
#include "testutil.h"

#define SEC 1000000000ull

/* The options of pair(), for tests that change a parameter first. */
static inline struct sim_opts pair_opts(uint64_t seed, double drop, int rma, uint32_t mtu)
{
	struct sim_opts o = {0};
	o.n = 2;
	o.seed = seed;
	o.link.drop = drop;
	o.link.latency = 5000;
	o.rma = rma;
	rcpc_params_default(&o.params);
	o.params.mtu = mtu;
	o.params.rx_frames = 64;
	o.params.crc = 1;
	return o;
}

static inline struct sim *pair_from(const struct sim_opts *o)
{
	/* Static channels: each side records the other. */
	struct sim *s = sim_new(o);
	sim_chan(s, 0, 1);
	sim_chan(s, 1, 0);
	return s;
}

static inline struct sim *pair(uint64_t seed, double drop, int rma, uint32_t mtu)
{
	struct sim_opts o = pair_opts(seed, drop, rma, mtu);
	return pair_from(&o);
}

static inline int never(void *arg)
{
	(void)arg;
	return 0;
}

#endif
