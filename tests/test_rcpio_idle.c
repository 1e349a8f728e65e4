/*
 * tests/test_rcpio_idle — a rank's client endpoint while its application
 * stays away from rcpio (rcpio/xfer.c, "the client endpoint between
 * calls"; docs/rcpio.md, the open finding of session 18).  No MPI: a
 * manager (pool, table, progress thread) and a requester, two rcpio
 * runtimes in this process, on udp.
 *
 * Between MPI-IO calls an application computes or waits in MPI; nothing
 * of rcpio runs on its thread.  Its client endpoint still owes the ack of
 * the last reply and answers to pings, and may hold a READY the manager
 * has not taken yet.  Before session 19 nobody drove it then:
 *  - t_idle_client: a requester silent longer than RCP_PEER_TIMEOUT after
 *    a query was taken for dead by its manager (which held the unacked
 *    reply): its next query failed with RCP_EPEER (an MPI_File_read_all
 *    error under load, rcpio_mpi.sh / cluster_rcpio.sh);
 *  - t_ready_unattended: a READY whose channel needs one more exchange
 *    (here: the first message of a fresh channel, which the manager
 *    answers with a cookie challenge; under the faults wrapper: a READY
 *    dropped) never arrived while the filler's application stayed away,
 *    and every other requester of the block was told BUSY for ever (the
 *    filler's server answers the manager's probes: rcpio_mpi.sh step 9b's
 *    hang).
 * The silence in t_idle_client is the condition under test (a peer that
 * is quiet longer than the peer timeout), not a synchronisation: with
 * the old code the manager fails the channel however the threads are
 * scheduled, as its own progress thread judges the silence; with the fix
 * the requester's progress thread answers every ping.  t_ready_unattended
 * waits for the manager's table to say VALID (never, before the fix: the
 * watchdog ends the run).
 */
#include "tests/testutil.h"

#include <pthread.h>
#include <sched.h>

#include <rcp/error.h>

#include "rcpio/meta.h"
#include "rcpio/pool.h"
#include "rcpio/xfer.h"

#define BLOCK   65536u
#define FID     4343u
#define TIMEOUT 1000 /* RCP_PEER_TIMEOUT, ms (set in main) */

#include "tests/rcpio_rt.h"

static void mkdir_tmp(void)
{
	snprintf(dir, sizeof dir, "/tmp/rcpio-idle-XXXXXX");
	assert_non_null(mkdtemp(dir));
}

/* A slot of R's pool offered for (FID, BLOCK), as cache.c's block_io
 * takes one: its number, and the generation in *GEN. */
static uint32_t offer(struct rt *r, uint64_t block, uint64_t *gen)
{
	struct rcpio_slot *sl;
	int s;
	pthread_mutex_lock(&r->lock);
	s = rcpio_pool_alloc(r->pool);
	assert_true(s >= 0);
	*gen = rcpio_pool_next_gen(r->pool);
	sl = rcpio_pool_slot(r->pool, (uint32_t)s);
	sl->fid = FID;
	sl->block = block;
	pthread_mutex_unlock(&r->lock);
	return (uint32_t)s;
}

/* The requester (rank 1) queries, is told MISS and reports READY; queries
 * another block (MISS: the manager's reply is the last frame between
 * them, its ack owed by the requester); then stays away from rcpio for
 * 2.5 peer timeouts; then queries again: answered. */
static void t_idle_client(void **state)
{
	struct rt m, b;
	struct rcpio_meta_reply r;
	struct rcpio_net_stats st;
	rcpio_peer *to_m;
	uint64_t gen;
	uint32_t s;
	int rc;
	(void)state;

	mkdir_tmp();
	rt_start(&m, "m");
	rt_start(&b, "b");
	assert_int_equal(rcpio_net_peer(b.net, m.blob, &to_m), 0);
	s = offer(&b, 1, &gen);
	assert_int_equal(rcpio_net_query(b.net, to_m, FID, 1, 1, s, gen, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	assert_int_equal(rcpio_net_ready(b.net, to_m, FID, 1, 1, s), 0);
	assert_int_equal(rcpio_net_drain(b.net), 0);
	s = offer(&b, 2, &gen);
	assert_int_equal(rcpio_net_query(b.net, to_m, FID, 2, 1, s, gen, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);

	/* The application computes (or waits in MPI) longer than the peer
	 * timeout: the condition under test, see the top of the file. */
	usleep(TIMEOUT * 2500);

	s = offer(&b, 3, &gen);
	rc = rcpio_net_query(b.net, to_m, FID, 3, 1, s, gen, &r);
	if (rc)
		print_error("query after %d ms away from rcpio: %s\n", TIMEOUT * 5 / 2,
		            rcp_strerror(rc));
	assert_int_equal(rc, 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	assert_int_equal(rcpio_net_ready(b.net, to_m, FID, 3, 1, s), 0);
	assert_int_equal(rcpio_net_drain(b.net), 0);
	rcpio_net_get_stats(b.net, &st);
	assert_int_equal(st.queries_sent, 3);
	assert_int_equal(st.errors, 0);

	rcpio_net_peer_free(to_m);
	rt_stop(&b);
	rt_stop(&m);
	rmdir(dir);
}

/* The filler (rank 1) holds block 5 FILLING at the manager, as its query
 * left it, and sends READY as the first message of its channel to the
 * manager; then its application stays away from rcpio.  The manager's
 * table says VALID without the filler's application doing anything more,
 * and another requester (rank 2) is told HIT at the filler. */
static void t_ready_unattended(void **state)
{
	struct rt m, b, c;
	struct rcpio_meta_reply r;
	rcpio_peer *b_to_m, *c_to_m;
	uint64_t gen, looks = 0;
	uint32_t s;
	(void)state;

	mkdir_tmp();
	rt_start(&m, "m");
	rt_start(&b, "b");
	rt_start(&c, "c");
	s = offer(&b, 5, &gen);
	pthread_mutex_lock(&m.lock);
	assert_int_equal(rcpio_meta_query(m.meta, FID, 5, 1, s, gen, &r), 0);
	assert_int_equal(r.kind, RCPIO_MISS);
	pthread_mutex_unlock(&m.lock);
	assert_int_equal(rcpio_net_peer(b.net, m.blob, &b_to_m), 0);
	assert_int_equal(rcpio_net_ready(b.net, b_to_m, FID, 5, 1, s), 0);

	/* No call on B from here until the table says VALID. */
	for (;;) {
		int valid;
		pthread_mutex_lock(&m.lock);
		valid = rcpio_meta_peek(m.meta, FID, 5, &r);
		pthread_mutex_unlock(&m.lock);
		if (valid)
			break;
		looks++;
		sched_yield();
	}
	assert_true(r.kind == RCPIO_HIT && r.owner == 1 && r.slot == s && r.gen == gen);
	assert_int_equal(rcpio_net_peer(c.net, m.blob, &c_to_m), 0);
	assert_int_equal(rcpio_net_query(c.net, c_to_m, FID, 5, 2, -1, 0, &r), 0);
	assert_int_equal(r.kind, RCPIO_HIT);
	assert_true(r.owner == 1 && r.slot == s && r.gen == gen);
	/* B's READY completed (its callback ran on the progress thread). */
	assert_int_equal(rcpio_net_drain(b.net), 0);
	print_message("# the manager took the READY after %llu looks\n", (unsigned long long)looks);

	rcpio_net_peer_free(c_to_m);
	rcpio_net_peer_free(b_to_m);
	rt_stop(&c);
	rt_stop(&b);
	rt_stop(&m);
	rmdir(dir);
}

int main(void)
{
	char t[16];
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_idle_client),
	    cmocka_unit_test(t_ready_unattended),
	};
	/* A READY nobody delivers leaves t_ready_unattended looking for
	 * ever: the watchdog ends the run (a failure) instead. */
	alarm(60);
	/* Read once, before any endpoint opens. */
	snprintf(t, sizeof t, "%d", TIMEOUT);
	setenv("RCP_PEER_TIMEOUT", t, 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
