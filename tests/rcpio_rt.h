/*
 * tests/rcpio_rt.h — one rcpio runtime (pool, table, endpoints and
 * progress thread) on udp, for the tests that run a manager and its
 * requesters as several runtimes in one process (test_rcpio_idle,
 * test_rcpio_snap, test_rcpio_map).  The includer defines BLOCK (the
 * pool's block size) and fills dir (a directory it made) before rt_start;
 * rt_start_on takes another transport.
 */
#ifndef RCP_TESTS_RCPIO_RT_H
#define RCP_TESTS_RCPIO_RT_H

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "rcpio/meta.h"
#include "rcpio/pool.h"
#include "rcpio/xfer.h"

static char dir[64];

struct rt {
	pthread_mutex_t lock;
	rcpio_pool *pool;
	rcpio_meta *meta;
	rcpio_net *net;
	char path[128];
	unsigned char blob[RCPIO_BLOB];
};

static void rt_start_on(struct rt *r, const char *name, const char *transport)
{
	struct rcpio_pool_cfg cfg = {BLOCK, 4};
	pthread_mutex_init(&r->lock, NULL);
	snprintf(r->path, sizeof r->path, "%s/%s.pool", dir, name);
	assert_int_equal(rcpio_pool_open(r->path, &cfg, &r->pool, NULL), 0);
	assert_int_equal(rcpio_meta_create(&r->meta), 0);
	assert_int_equal(rcpio_net_start(transport, &r->lock, r->meta, r->pool, &r->net), 0);
	assert_int_equal(rcpio_net_blob(r->net, r->blob), 0);
}

static void rt_start(struct rt *r, const char *name)
{
	rt_start_on(r, name, "udp");
}

static void rt_stop(struct rt *r)
{
	rcpio_net_stop(r->net);
	rcpio_meta_destroy(r->meta);
	rcpio_pool_close(r->pool);
	unlink(r->path);
	pthread_mutex_destroy(&r->lock);
}

#endif
