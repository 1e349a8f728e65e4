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

/* ---- a filler killed after its MISS ---------------------------------- */

#define FBLOCK 11u

/* Filler A (a child): its own pool and rcpio runtime (rank 1), sends the
 * parent its blob, reads the manager's, asks for block FBLOCK offering a
 * slot — a MISS: A owns the block, FILLING — tells the parent the reply
 * kind and then never fills nor reports READY: it is killed there. */
static void filler(int from, int tell)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct rcpio_pool_cfg cfg = {BLOCK, 4};
	struct rcpio_meta_reply r;
	unsigned char mine[RCPIO_BLOB], mgr[RCPIO_BLOB];
	char fpath[128];
	rcpio_pool *pool;
	rcpio_meta *meta;
	rcpio_net *net;
	rcpio_peer *m;
	uint32_t kind;
	uint64_t gen;
	int s;

	snprintf(fpath, sizeof fpath, "%s/a.pool", dir);
	if (rcpio_pool_open(fpath, &cfg, &pool, NULL) || rcpio_meta_create(&meta) ||
	    rcpio_net_start("udp", &lock, meta, pool, &net) || rcpio_net_blob(net, mine))
		_exit(20);
	if (write(tell, mine, sizeof mine) != (ssize_t)sizeof mine ||
	    read(from, mgr, sizeof mgr) != (ssize_t)sizeof mgr || rcpio_net_peer(net, mgr, &m))
		_exit(21);
	pthread_mutex_lock(&lock);
	s = rcpio_pool_alloc(pool);
	gen = rcpio_pool_next_gen(pool);
	pthread_mutex_unlock(&lock);
	if (s < 0 || rcpio_net_query(net, m, FID, FBLOCK, 1, s, gen, &r))
		_exit(22);
	kind = r.kind;
	if (write(tell, &kind, sizeof kind) != (ssize_t)sizeof kind)
		_exit(23);
	for (;;)
		pause();
}

/* The manager (this process, rank 0) learns that the filler died after
 * its MISS — the probe it sends when it answers BUSY fails with
 * RCP_EPEER — and drops the FILLING entry: requester B (rank 2, a second
 * runtime in this process) is told MISS, fills the block and reports
 * READY, and a third reader pulls the right bytes from B's pool.
 * Counted, not timed: B's first query after the kill is BUSY (the probe
 * starts there), one probe is sent and fails, and once the manager
 * counts the filler lost, B's very next query is a MISS. */
static void t_filler_killed(void **state)
{
	pthread_mutex_t lm = PTHREAD_MUTEX_INITIALIZER, lb = PTHREAD_MUTEX_INITIALIZER;
	struct rcpio_pool_cfg cfg = {BLOCK, 4};
	struct rcpio_meta_reply r;
	struct rcpio_meta_stats ms;
	struct rcpio_net_stats st;
	struct rcpio_slot *sl;
	rcpio_pool *pm, *pb;
	rcpio_meta *mm, *mb;
	rcpio_net *nm, *nb;
	rcpio_peer *b_to_m, *m_to_m, *m_to_b;
	unsigned char blobs[3 * RCPIO_BLOB], *want = malloc(BLOCK), *got = malloc(BLOCK);
	char pm_path[128], pb_path[128];
	int down[2], up[2], wst, s;
	uint64_t gen, busy = 0, lost_before;
	uint32_t kind;
	pid_t a;
	(void)state;

	snprintf(dir, sizeof dir, "/tmp/rcpio-xfer-XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	a = fork();
	assert_true(a >= 0);
	if (a == 0) {
		close(down[1]);
		close(up[0]);
		filler(down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	snprintf(pm_path, sizeof pm_path, "%s/m.pool", dir);
	snprintf(pb_path, sizeof pb_path, "%s/b.pool", dir);
	assert_int_equal(rcpio_pool_open(pm_path, &cfg, &pm, NULL), 0);
	assert_int_equal(rcpio_pool_open(pb_path, &cfg, &pb, NULL), 0);
	assert_int_equal(rcpio_meta_create(&mm), 0);
	assert_int_equal(rcpio_meta_create(&mb), 0);
	assert_int_equal(rcpio_net_start("udp", &lm, mm, pm, &nm), 0);
	assert_int_equal(rcpio_net_start("udp", &lb, mb, pb, &nb), 0);
	assert_int_equal(rcpio_net_blob(nm, blobs), 0);
	assert_int_equal(rcpio_net_blob(nb, blobs + 2 * RCPIO_BLOB), 0);
	assert_int_equal(read(up[0], blobs + RCPIO_BLOB, RCPIO_BLOB), RCPIO_BLOB);
	/* As cache.c does at open: the manager knows the file's ranks. */
	assert_int_equal(rcpio_net_members(nm, FID, 0, 3, blobs), 0);
	assert_int_equal(write(down[1], blobs, RCPIO_BLOB), RCPIO_BLOB);
	assert_int_equal(read(up[0], &kind, sizeof kind), (ssize_t)sizeof kind);
	assert_int_equal(kind, RCPIO_MISS);
	kill(a, SIGKILL);
	assert_int_equal(waitpid(a, &wst, 0), a);

	/* B asks, offering its slot, until the manager gives it the block. */
	assert_int_equal(rcpio_net_peer(nb, blobs, &b_to_m), 0);
	pthread_mutex_lock(&lb);
	s = rcpio_pool_alloc(pb);
	assert_true(s >= 0);
	gen = rcpio_pool_next_gen(pb);
	sl = rcpio_pool_slot(pb, (uint32_t)s);
	sl->fid = FID;
	sl->block = FBLOCK;
	pthread_mutex_unlock(&lb);
	for (;;) {
		lost_before = stats(nm).fillers_lost;
		assert_int_equal(rcpio_net_query(nb, b_to_m, FID, FBLOCK, 2, s, gen, &r), 0);
		if (r.kind == RCPIO_MISS)
			break;
		assert_int_equal(r.kind, RCPIO_BUSY);
		/* Told who fills, and never after the manager gave up on it. */
		assert_true(r.owner == 1);
		assert_int_equal(lost_before, 0);
		/* One probe, however many BUSYs: a failed probe that kept the
		 * entry would be followed by another at once. */
		assert_true(stats(nm).probes <= 1);
		busy++;
	}
	assert_true(busy >= 1);
	assert_true(r.owner == 2 && r.slot == (uint32_t)s && r.gen == gen);
	st = stats(nm);
	assert_int_equal(st.probes, 1);
	assert_int_equal(st.fillers_lost, 1);
	rcpio_meta_get_stats(mm, &ms);
	assert_int_equal(ms.lost, 1);

	/* B fills the block (the file's bytes) and reports READY. */
	test_fill(want, BLOCK, 77);
	pthread_mutex_lock(&lb);
	memcpy(rcpio_pool_data(pb, (uint32_t)s), want, BLOCK);
	sl->gen = gen;
	rcpio_pool_tag_set(pb, (uint32_t)s, FID, FBLOCK, gen);
	pthread_mutex_unlock(&lb);
	assert_int_equal(rcpio_net_ready(nb, b_to_m, FID, FBLOCK, 2, (uint32_t)s), 0);
	assert_int_equal(rcpio_net_drain(nb), 0);

	/* Another reader (the manager's own client side) is told HIT at B
	 * and pulls the block's bytes from B's pool. */
	assert_int_equal(rcpio_net_peer(nm, blobs, &m_to_m), 0);
	assert_int_equal(rcpio_net_peer(nm, blobs + 2 * RCPIO_BLOB, &m_to_b), 0);
	assert_int_equal(rcpio_net_query(nm, m_to_m, FID, FBLOCK, 0, -1, 0, &r), 0);
	assert_int_equal(r.kind, RCPIO_HIT);
	assert_true(r.owner == 2 && r.slot == (uint32_t)s && r.gen == gen);
	memset(got, 0, BLOCK);
	assert_int_equal(rcpio_net_pull(nm, m_to_b, FID, FBLOCK, r.slot, r.gen, 0, got, BLOCK), 0);
	assert_memory_equal(got, want, BLOCK);
	assert_int_equal(stats(nm).probes, 1);

	rcpio_net_peer_free(m_to_b);
	rcpio_net_peer_free(m_to_m);
	rcpio_net_peer_free(b_to_m);
	rcpio_net_members_drop(nm, FID);
	rcpio_net_stop(nb);
	rcpio_net_stop(nm);
	rcpio_meta_destroy(mb);
	rcpio_meta_destroy(mm);
	rcpio_pool_close(pb);
	rcpio_pool_close(pm);
	close(down[1]);
	close(up[0]);
	free(want);
	free(got);
	unlink(pm_path);
	unlink(pb_path);
	snprintf(pm_path, sizeof pm_path, "%s/a.pool", dir);
	unlink(pm_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_requester_killed),
	    cmocka_unit_test(t_filler_killed),
	};
	/* A manager that never learns of a dead filler would answer BUSY for
	 * ever: the watchdog ends the run (a failure) after 60 s instead of
	 * counting looks. */
	alarm(60);
	/* Quick death notices: the owner's pull fails 300 ms after the
	 * requester's last frame (read once, before any endpoint opens). */
	setenv("RCP_PEER_TIMEOUT", "300", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
