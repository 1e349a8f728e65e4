/*
 * tests/test_rcpio_snap — a pull from an owner whose slot changes while
 * the pull's frames are lost and resent (udp under the faults wrapper;
 * bulk/serve.c, SNAPSHOTS; docs/rcpio.md, session 19).  No MPI: an owner
 * and a requester, two rcpio runtimes in this process.
 *
 * On udp a pull is emulated: the owner's progress thread sends the bytes
 * as an RCP message.  rcpio's owner changes its slots whenever it likes
 * (evictions, fills, puts; here a thread rewriting the slot without a
 * pause).  Before session 19 the owner sent straight from the slot, so a
 * frame dropped and resent after a change went out under the crc of the
 * old bytes: the requester dropped it as bad at every resend and the
 * pull waited for ever (rcpio_mpi.sh step 9b's third hang).  Now every
 * pull ends: with the block's bytes as some instant saw them (the tag,
 * which the writer leaves alone, checks out), counted, not timed; the
 * watchdog ends a run that hangs.
 *
 * The faults drop a fifth of all frames: each 64 KiB pull is two DATA
 * frames, so among PULLS pulls many resend one.  Any corrupt rate turns
 * RCP's crc on (the wrapper no longer says the nic checks payloads), as
 * in rcpio_mpi.sh step 9b; without the crc a resend would carry the new
 * bytes unnoticed.  The seed (RCP_TEST_SEED) is printed.
 */
#include "tests/testutil.h"

#include <pthread.h>
#include <stdatomic.h>

#include <rcp/error.h>

#include "rcpio/meta.h"
#include "rcpio/pool.h"
#include "rcpio/xfer.h"

#define BLOCK 65536u
#define FID   4545u
#define BNUM  3u
#define PULLS 200

#include "tests/rcpio_rt.h"

/* The owner's application: rewrites the slot's data (not its tag) until
 * told to stop, as a stream of fills and writes would. */
struct writer {
	unsigned char *data;
	atomic_int stop;
	unsigned long rounds;
};

static void *write_loop(void *arg)
{
	struct writer *w = arg;
	while (!atomic_load(&w->stop)) {
		memset(w->data, (int)(w->rounds & 0xff), BLOCK);
		w->rounds++;
	}
	return NULL;
}

static void t_pull_changing_slot(void **state)
{
	struct rt m, b;
	struct writer w;
	pthread_t thr;
	rcpio_peer *to_m = NULL;
	unsigned char *got = malloc(BLOCK);
	uint64_t gen;
	int s, ok = 0, stale = 0;
	(void)state;

	snprintf(dir, sizeof dir, "/tmp/rcpio-snap-XXXXXX");
	assert_non_null(mkdtemp(dir));
	rt_start(&m, "m");
	rt_start(&b, "b");
	/* The owner's slot holds the block, tagged, as after a miss. */
	pthread_mutex_lock(&m.lock);
	s = rcpio_pool_alloc(m.pool);
	assert_true(s >= 0);
	gen = rcpio_pool_next_gen(m.pool);
	rcpio_pool_slot(m.pool, (uint32_t)s)->fid = FID;
	rcpio_pool_slot(m.pool, (uint32_t)s)->block = BNUM;
	rcpio_pool_slot(m.pool, (uint32_t)s)->gen = gen;
	rcpio_pool_tag_set(m.pool, (uint32_t)s, FID, BNUM, gen);
	pthread_mutex_unlock(&m.lock);
	w.data = rcpio_pool_data(m.pool, (uint32_t)s);
	atomic_init(&w.stop, 0);
	w.rounds = 0;
	assert_int_equal(pthread_create(&thr, NULL, write_loop, &w), 0);

	assert_int_equal(rcpio_net_peer(b.net, m.blob, &to_m), 0);
	for (int i = 0; i < PULLS; i++) {
		int rc = rcpio_net_pull(b.net, to_m, FID, BNUM, (uint32_t)s, gen, 0, got, BLOCK);
		if (rc && rc != RCP_ENOENT)
			print_error("pull %d: %s\n", i, rcp_strerror(rc));
		assert_true(rc == 0 || rc == RCP_ENOENT);
		if (rc)
			stale++;
		else
			ok++;
	}
	atomic_store(&w.stop, 1);
	pthread_join(thr, NULL);
	print_message("# %d pulls ended (%d with the tag, %d without), the writer made %lu "
	              "rounds\n",
	              ok + stale, ok, stale, w.rounds);
	/* The tag is never touched: every pull finds it. */
	assert_int_equal(ok, PULLS);

	rcpio_net_peer_free(to_m);
	rt_stop(&b);
	rt_stop(&m);
	rmdir(dir);
	free(got);
}

int main(void)
{
	char spec[96];
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_pull_changing_slot),
	};
	uint64_t seed = test_seed(11);
	/* A pull that never ends: the watchdog ends the run (a failure). */
	alarm(60);
	/* Read once, before any endpoint opens. */
	snprintf(spec, sizeof spec, "drop=0.2,corrupt=0.001,seed=%llu", (unsigned long long)seed);
	setenv("RCP_FAULTS", spec, 1);
	printf("# RCP_FAULTS=%s\n", spec);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
