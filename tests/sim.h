/*
 * tests/sim.h — a simulated lossy network on virtual time for RCP cores.
 *
 * N protocol cores (rcp/core.h) live in one process.  A frame one core
 * sends is copied into an event queue and delivered to its destination
 * after `latency` ns of virtual time, unless the link drops it; it may be
 * duplicated, delayed further (so it overtakes or is overtaken: reordering)
 * or have bits flipped, all decided by a seeded PRNG.  Nothing depends on
 * the wall clock, so a run is a pure function of its seed.
 *
 * Peer indices: core i reaches core j as peer j.  RMA is simulated over
 * the process's own memory when enabled: the transfers a core asks for
 * (rcpc_rma_take) are performed and given back as soon as sim_run sees
 * them, or handed to the test's own executor (sim_set_rma_exec).
 */
#ifndef RCP_TEST_SIM_H
#define RCP_TEST_SIM_H

#include <stdint.h>

#include "rcp/core.h"

struct sim_link {
	double drop, dup, reorder, corrupt;
	uint64_t latency;     /* ns */
	uint64_t reorder_max; /* extra delay of a reordered frame, ns */
};

struct sim;

struct sim_opts {
	int n; /* endpoints */
	uint64_t seed;
	struct sim_link link;
	int rma;                   /* offer simulated RMA */
	int accept;                /* RCP_EP_ACCEPT on every core */
	struct rcpc_params params; /* zeroed: defaults with mtu 4096 */
	uint64_t bandwidth;        /* bytes per second per link (0: infinite) */
	uint32_t rx_frames[4];     /* nonzero: node i's own rx_frames (i < 4) */
};

struct sim *sim_new(const struct sim_opts *o);
void sim_free(struct sim *s);
rcpc_core *sim_core(struct sim *s, int i);
rcp_chan *sim_chan(struct sim *s, int from, int to); /* opens on first use */
uint64_t sim_now(const struct sim *s);

/* Runs until DONE(arg) returns nonzero or virtual time passes LIMIT ns
 * from now.  Returns 0 when done, -1 on time limit. */
int sim_run(struct sim *s, int (*done)(void *), void *arg, uint64_t limit);

/* Cuts endpoint I off: its frames are no longer delivered either way and
 * it is no longer progressed (a killed process). */
void sim_kill(struct sim *s, int i);

/* Restarts endpoint I: its core is freed (its channels with it) and a new
 * one made with epoch EPOCH (a new incarnation; sim_new gives node i
 * 0x1000 + i).  Frames on their way to it reach the new core. */
void sim_restart(struct sim *s, int i, uint32_t epoch);

/* Closes FROM's channel to TO (rcpc_chan_close); sim_chan opens a new one. */
void sim_chan_close(struct sim *s, int from, int to);

/* Injects raw bytes as a frame from peer FROM to core TO, now. */
void sim_inject(struct sim *s, int from, int to, const void *frame, size_t len);

/* Calls TAP for every frame delivered (after faults), e.g. to record
 * real frames for replay tests.  NULL removes it. */
void sim_set_tap(struct sim *s,
                 void (*tap)(void *arg, int from, int to, const void *frame, size_t len),
                 void *arg);

/* Calls FATE for every frame sent, before the random faults: a negative
 * return drops it (counted in `dropped`), a positive one delays it by that
 * many ns more (it arrives after frames sent later: reordering), 0 lets it
 * go.  For scenarios that need one exact loss.  NULL removes it. */
void sim_set_fate(struct sim *s,
                  int64_t (*fate)(void *arg, int from, int to, const void *frame, size_t len),
                  void *arg);

/* An asynchronous RMA executor (tests/test_rcp_rma.c): with one set, each
 * transfer a core asks for goes to TAKE (NODE: whose core) instead of
 * being performed at once; the executor performs it when it likes
 * (sim_rma_perform) and gives the result back with rcpc_rma_done.
 * sim_run asks DUE for the virtual time of the executor's next completion
 * (UINT64_MAX: none) and calls RUN once that time has come; the frames
 * those completions let the cores send go out in the same step.  NULL
 * removes it (transfers still held are the test's). */
struct sim_rma_exec {
	void (*take)(void *arg, int node, const struct rcpc_rma *ev);
	uint64_t (*due)(void *arg);
	void (*run)(void *arg, uint64_t now);
	void *arg;
};
void sim_set_rma_exec(struct sim *s, const struct sim_rma_exec *x);
/* Performs transfer EV of node NODE on the simulated memory (its peer
 * dead: RCP_EPEER; a key that does not cover it: RCP_EACCES).  Returns 0
 * or that code. */
int sim_rma_perform(struct sim *s, int node, const struct rcpc_rma *ev);

/* A request a test waits for with sim_run(): sim_one_done(&one) is done
 * once R completed (its status in ST); sim_two_done(one[2]) once both. */
struct sim_one {
	rcp_req *r;
	struct rcp_status st;
	int done;
};

static inline int sim_one_done(void *arg)
{
	struct sim_one *o = arg;
	if (!o->done && rcpc_req_done(o->r, &o->st))
		o->done = 1;
	return o->done;
}

static inline int sim_two_done(void *arg)
{
	struct sim_one *o = arg;
	int a = sim_one_done(&o[0]), b = sim_one_done(&o[1]);
	return a && b;
}

/* Counters. */
struct sim_stats {
	uint64_t sent, delivered, dropped, duplicated, reordered, corrupted;
	uint64_t more;     /* of those sent, flagged RCP_NIC_MORE (batched) */
	uint64_t unpushed; /* flushes/timers a core left with batched frames not pushed
	                      (io.flush not called after them): a core bug */
};
void sim_stats(const struct sim *s, struct sim_stats *st);

#endif
