/*
 * tests/test_rcpio_xfer — the owner side of rcpio.put (rcpio/xfer.c) when
 * the requester is killed mid-transfer: the pin on the slot and the bytes
 * held for the transfer are given back, the put is counted as failed, and
 * the slot takes the next requester's put.  No MPI: this process is the
 * owner (pool, manager table, progress thread, on udp); each requester is
 * a child process speaking rcpio.put with the public rpc/bulk API.
 *
 * Why udp: its bulk transfers are emulated, so the owner's pull of the
 * requester's bytes is served by the requester's own progress.  The doomed
 * requester forwards its put and then never progresses again: the pull
 * cannot finish, whatever the scheduling, until the child is killed and
 * the owner's channel times out (RCP_PEER_TIMEOUT, set low here).  On shm
 * the owner would read the child's memory directly and might finish first.
 */
#include "tests/testutil.h"

#include <pthread.h>
#include <sched.h>

#include <rcp/bulk.h>
#include <rcp/error.h>
#include <rcp/rcp.h>
#include <rcp/rpc.h>

#include "rcpio/meta.h"
#include "rcpio/pool.h"
#include "rcpio/xfer.h"

#define BLOCK 65536u
#define FID   4242u
#define BNUM  7u

/* rcpio.put's arguments, as rcpio/xfer.c encodes them (the wire format
 * is part of what this test pins down). */
struct p_in {
	uint64_t fid, block, gen;
	uint32_t slot, off;
	rcp_bulk *data;
};
struct r_in {
	uint64_t fid, block;
	uint32_t owner, slot;
};
RCP_PROC_DEFINE(proc_r_in, struct r_in, rcp_proc_u64(p, &v->fid); rcp_proc_u64(p, &v->block);
                rcp_proc_u32(p, &v->owner); rcp_proc_u32(p, &v->slot))
RCP_PROC_DEFINE(proc_p_in, struct p_in, rcp_proc_u64(p, &v->fid); rcp_proc_u64(p, &v->block);
                rcp_proc_u64(p, &v->gen); rcp_proc_u32(p, &v->slot); rcp_proc_u32(p, &v->off);
                rcp_proc_bulk(p, &v->data))

static char dir[64], path[96];

/* What a requester is told once the owner is up. */
struct order {
	char addr[128];
	uint64_t gen, seq;
	uint32_t slot, off, len;
	int doomed;
};

/* A requester (a child): waits for its order on FROM, then puts LEN bytes
 * of pattern SEQ at OFF of (SLOT, GEN).  Doomed: after the forward it
 * tells the parent (one byte on TELL) and blocks without progressing —
 * it is killed there.  Otherwise it waits for the answer and exits with
 * 0 if the put succeeded.  First a whole call (an evict of a block
 * nobody has: refused, harmless) establishes the channel, so that the
 * put's request then leaves at once, inside the forward (a small
 * message on an established channel is sent eagerly, docs/protocol.md). */
static void requester(int from, int tell)
{
	struct order o;
	rcp_ep *ep;
	rcp_bulk_ctx *bctx;
	rcp_rpc *rpc;
	rcp_chan *ch;
	rcp_bulk *h;
	rcp_rpc_req *req;
	struct rcp_ep_config ec;
	struct rcp_rpc_config rcf;
	struct p_in in;
	struct r_in ev = {FID, 999, 0, 0};
	uint64_t id, evid;
	void *buf;
	size_t blen;
	char c = 1;

	if (read(from, &o, sizeof o) != (ssize_t)sizeof o || !(buf = malloc(o.len)))
		_exit(10);
	o.addr[sizeof o.addr - 1] = 0;
	blen = o.len;
	test_fill(buf, o.len, o.seq);
	memset(&ec, 0, sizeof ec);
	memset(&rcf, 0, sizeof rcf);
	if (rcp_ep_open("udp:127.0.0.1:0", &ec, &ep) || rcp_bulk_ctx_open(ep, &bctx))
		_exit(11);
	rcf.bulk = bctx;
	rcf.timeout_ns = -1;
	if (rcp_rpc_create(ep, &rcf, &rpc) ||
	    rcp_rpc_register(rpc, "rcpio.put", proc_p_in, NULL, &id) ||
	    rcp_rpc_register(rpc, "rcpio.evict", proc_r_in, NULL, &evid) ||
	    rcp_connect(ep, o.addr, &ch) ||
	    rcp_bulk_create(bctx, 1, &buf, &blen, RCP_BULK_READ_ONLY, &h))
		_exit(12);
	if (rcp_rpc_forward(rpc, ch, evid, &ev, NULL, -1, NULL, NULL, &req) ||
	    rcp_rpc_wait(req, -1) == RCP_EPEER || rcp_rpc_req_free(req))
		_exit(16);
	in = (struct p_in){FID, BNUM, o.gen, o.slot, o.off, h};
	if (rcp_rpc_forward(rpc, ch, id, &in, NULL, -1, NULL, NULL, &req))
		_exit(13);
	if (o.doomed) {
		if (write(tell, &c, 1) != 1)
			_exit(14);
		for (;;)
			pause();
	}
	_exit(rcp_rpc_wait(req, -1) ? 15 : 0);
}

struct child {
	pid_t pid;
	int to, told;
};

static struct child spawn(void)
{
	int down[2], up[2];
	struct child k;
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	k.pid = fork();
	assert_true(k.pid >= 0);
	if (k.pid == 0) {
		close(down[1]);
		close(up[0]);
		requester(down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	k.to = down[1];
	k.told = up[0];
	return k;
}

static void order(struct child *k, const unsigned char *blob, uint32_t slot, uint64_t gen,
                  uint32_t off, uint32_t len, uint64_t seq, int doomed)
{
	struct order o;
	memset(&o, 0, sizeof o);
	memcpy(o.addr, blob, sizeof o.addr); /* a blob begins with the address */
	o.addr[sizeof o.addr - 1] = 0;
	o.slot = slot;
	o.gen = gen;
	o.off = off;
	o.len = len;
	o.seq = seq;
	o.doomed = doomed;
	assert_int_equal(write(k->to, &o, sizeof o), (ssize_t)sizeof o);
}

static struct rcpio_net_stats stats(rcpio_net *n)
{
	struct rcpio_net_stats st;
	rcpio_net_get_stats(n, &st);
	return st;
}

static void t_requester_killed(void **state)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct rcpio_pool_cfg cfg = {BLOCK, 4};
	struct rcpio_net_stats st;
	struct rcpio_slot *sl;
	rcpio_pool *pool = NULL;
	rcpio_meta *meta = NULL;
	rcpio_net *net = NULL;
	unsigned char blob[RCPIO_BLOB], *want = malloc(BLOCK);
	const uint32_t off = 4096, len = 32768;
	struct child a, b;
	int wst, s;
	uint64_t gen;
	char c;
	(void)state;

	/* The children first: they must not inherit the progress thread. */
	a = spawn();
	b = spawn();
	snprintf(dir, sizeof dir, "/tmp/rcpio-xfer-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/p.pool", dir);
	assert_int_equal(rcpio_pool_open(path, &cfg, &pool, NULL), 0);
	assert_int_equal(rcpio_meta_create(&meta), 0);
	assert_int_equal(rcpio_net_start("udp", &lock, meta, pool, &net), 0);
	/* The owner's slot holds the block, clean, as after a miss. */
	pthread_mutex_lock(&lock);
	s = rcpio_pool_alloc(pool);
	assert_true(s >= 0);
	sl = rcpio_pool_slot(pool, (uint32_t)s);
	gen = rcpio_pool_next_gen(pool);
	sl->fid = FID;
	sl->block = BNUM;
	sl->gen = gen;
	memset(rcpio_pool_data(pool, (uint32_t)s), 0, BLOCK);
	rcpio_pool_tag_set(pool, (uint32_t)s, FID, BNUM, gen);
	pthread_mutex_unlock(&lock);
	assert_int_equal(rcpio_net_blob(net, blob), 0);

	/* A: forwards its put and stops.  The owner pins the slot and holds
	 * LEN bytes for the pull, which A will never serve. */
	order(&a, blob, (uint32_t)s, gen, off, len, 1, 1);
	assert_int_equal(read(a.told, &c, 1), 1);
	while ((st = stats(net)).held_bytes == 0)
		sched_yield();
	assert_int_equal(st.held_bytes, len);
	pthread_mutex_lock(&lock);
	assert_int_equal(sl->pins, 1);
	pthread_mutex_unlock(&lock);
	/* A dies mid-transfer. */
	kill(a.pid, SIGKILL);
	assert_int_equal(waitpid(a.pid, &wst, 0), a.pid);
	/* The pull fails (the peer is silent past RCP_PEER_TIMEOUT): every
	 * byte and the pin are given back. */
	while ((st = stats(net)).puts_failed == 0)
		sched_yield();
	assert_int_equal(st.puts_failed, 1);
	assert_int_equal(st.puts_served, 0);
	assert_int_equal(st.held_bytes, 0);
	pthread_mutex_lock(&lock);
	assert_int_equal(sl->pins, 0);
	/* Whatever landed is dirty: the file will get what the slot holds. */
	assert_true(sl->lo <= off && sl->hi >= off + len);
	pthread_mutex_unlock(&lock);

	/* B: the same slot takes a whole put; its bytes are there. */
	order(&b, blob, (uint32_t)s, gen, off, len, 2, 0);
	assert_int_equal(waitpid(b.pid, &wst, 0), b.pid);
	assert_true(WIFEXITED(wst));
	assert_int_equal(WEXITSTATUS(wst), 0);
	st = stats(net);
	assert_int_equal(st.puts_served, 1);
	assert_int_equal(st.held_bytes, 0);
	test_fill(want, len, 2);
	pthread_mutex_lock(&lock);
	assert_int_equal(sl->pins, 0);
	assert_memory_equal(rcpio_pool_data(pool, (uint32_t)s) + off, want, len);
	pthread_mutex_unlock(&lock);

	close(a.to);
	close(a.told);
	close(b.to);
	close(b.told);
	rcpio_net_stop(net);
	rcpio_meta_destroy(meta);
	rcpio_pool_close(pool);
	free(want);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_requester_killed),
	};
	/* Quick death notices: the owner's pull fails 300 ms after the
	 * requester's last frame (read once, before any endpoint opens). */
	setenv("RCP_PEER_TIMEOUT", "300", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
