/*
 * pvm-glue/wait.c — how libpvmrcp blocks: through the one wait policy of
 * librcp (common/wait.c: spin RCP_SPIN_NS past the last event, yielding
 * after the first 5 µs, then sleep; RCP_WAIT=spin|sleep; a crowded CPU
 * makes every wait sleep), on the first RCP endpoint, with the others and
 * libpvm3's sockets (pvm_getfds) as its wait sources, so a message by any
 * path wakes the task.  While blocked on specific tasks it asks pvmd every
 * PVMRCP_LIVE_MS whether they still run (see glue.c, EXIT AND FAILURE).
 * Why a spinner yields, and sleeps on a crowded CPU: common/wait.c.
 * pvm_rcp_waitstats() gives the first endpoint's wait counts (looks,
 * yields, sleeps, the longest run of looks past the time alone without
 * giving the CPU away): tests count, never time.
 */
#include <string.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/glue.h"

#define S      pvmrcpi_st
#define MAXFDS 64
/* A sleep lasts 10 ms at most: libpvm3 may hold a message it read from
 * a socket (no fd says so). */
#define SLEEP_MAX_NS 10000000ll

/* The blocking call being waited for (libpvm3 is not threaded; a wait
 * may nest in another's DONE: taking a message out of the way waits for
 * its bytes; the outer one's is saved and put back). */
static struct blocked {
	int (*done)(void *);
	void *arg;
	int rc;          /* DONE's verdict */
	const int *live; /* tasks pvmd is asked about */
	int nlive, stash;
	uint64_t t0, next_live;
	unsigned looks;
	struct watch *w; /* [MAXWATCH]: live[k]'s watch, k < MAXWATCH */
} cur;

/* WATCHES.  Asked about a task on another host, pvm_pstat blocks until
 * that host's pvmd answers, and a host cut off (link down, crashed) is
 * declared dead by PVM only minutes later.  A user who sets
 * RCP_PEER_TIMEOUT (libpvmrcp otherwise raises it to a day: glue.c)
 * chooses RCP's liveness for such tasks instead: their channel is watched,
 * pvmd is not asked.  A watch is a receive posted with a tag nobody sends
 * (W_TAG): it gives the channel work, so RCP pings the silent peer and
 * fails the channel after RCP_PEER_TIMEOUT of silence (rcp/timers.c); the
 * receive then completes with RCP_EPEER and the wait ends as for a task
 * pvmd says is gone (PvmNoTask).  Posted once a wait has lasted
 * PVMRCP_LIVE_MS (short waits pay nothing), canceled when it ends.
 * tests/cluster_down.sh cuts a host off mid-stream. */
#define W_TAG    (PR_CTRL | 0xffffffull)
#define MAXWATCH 8
struct watch {
	rcp_req *req;
	rcp_chan *ch;
	unsigned restarts; /* the channel's, when posted */
	int lost;
};

/* Is TID's liveness RCP's (WATCHES)?  A task reached by stock PVM is
 * still asked about through pvmd. */
static int watched(int tid)
{
	struct pr_peer *p;

	if (!S.rcp_liveness || pvm_tidtohost(tid) == pvm_tidtohost(S.mytid))
		return 0;
	p = pvmrcpi_peer(tid, 0);
	return p && p->route == PR_RCP && p->ch;
}

static void watch_cb(rcp_req *req, const struct rcp_status *st, void *user)
{
	struct watch *w = user;
	(void)req;
	w->req = NULL;
	/* A restart fails what is posted too, but the channel lives on (a
	 * first contact settling, send.c): posted again at the next look. */
	if (st->error == RCP_EPEER && rcp_chan_restarts(w->ch) != w->restarts)
		return;
	if (st->error != RCP_ECANCELED)
		w->lost = 1;
}

/* 1 when P's channel failed (a receive can no longer be posted on it). */
static int chan_failed(struct pr_peer *p)
{
	static char none;
	rcp_req *r;
	int rc;

	if (!p->ch)
		return 0;
	rc = rcp_irecv(p->ep, p->ch, W_TAG, &none, 0, &r);
	if (!rc) {
		rcp_cancel(r);
		rcp_wait(r, NULL, -1); /* ECANCELED at once: nobody sends W_TAG */
	}
	return rc == RCP_EPEER || rc == RCP_ECLOSED;
}

/* 1 when the watch on live[k] saw its channel fail; posts it first. */
static int watch_lost(int k)
{
	static char none;
	struct watch *w = &cur.w[k];
	struct pr_peer *p;
	int rc;

	if (w->lost || w->req)
		return w->lost;
	p = pvmrcpi_peer(cur.live[k], 0);
	if (!p || p->route != PR_RCP || !p->ch || p->dead)
		return 0;
	w->ch = p->ch;
	w->restarts = rcp_chan_restarts(p->ch);
	rc = rcp_irecv_cb(p->ep, p->ch, W_TAG, &none, 0, watch_cb, w, &w->req);
	if (rc)
		w->req = NULL;
	return rc == RCP_EPEER || rc == RCP_ECLOSED;
}

static rcp_ep *primary; /* the endpoint whose waiter we use */

int pvm_rcp_waitstats(struct pvm_rcp_waitstats *out, int reset)
{
	static uint64_t polls0, unexp0; /* nic_polls, unexpected_msgs at the last reset */
	struct rcp_wait_stats st = {0};
	struct rcp_ep_stats es = {0};
	int i = 0;
	rcp_ep *ep = primary ? primary : pvmrcpi_ep_next(&i); /* the waiter's, once set up */
	if (primary)
		rcp_ep_wait_stats(primary, &st, reset);
	if (ep)
		rcp_ep_get_stats(ep, &es);
	if (out) {
		out->waits = st.waits;
		out->polls = st.looks;
		out->yields = st.yields;
		out->sleeps = st.sleeps;
		out->max_run = st.max_run;
		out->crowded = st.crowded;
		out->nic_polls = es.nic_polls - polls0;
		out->unexpected = es.unexpected_msgs - unexp0;
	}
	if (reset) {
		polls0 = es.nic_polls;
		unexp0 = es.unexpected_msgs;
	}
	return 0;
}

/* libpvm3's sockets: a wait source of the first endpoint. */
static int pvm_fds(void *arg, int *out, int max)
{
	int *fds, nf = pvm_getfds(&fds), n = 0;
	(void)arg;
	for (int k = 0; k < nf && n < max && n < MAXFDS; k++)
		out[n++] = fds[k];
	return n;
}

static void pvm_readable(void *arg)
{
	(void)arg;
	S.pvm_readable = 1;
}

/* Per look: stash others' messages (sends), ask pvmd about the tasks we
 * wait for every live_ns; the clock is read every 8th look (~40 ns, as
 * long as a look at an idle endpoint; these periods are milliseconds). */
static int pvm_look(void *arg)
{
	uint64_t now;
	(void)arg;
	if (!cur.done || (cur.looks++ & 7))
		return 0;
	now = pvmrcpi_now();
	if (cur.stash && now - cur.t0 >= S.stash_ns)
		pvmrcpi_stash_some();
	if (cur.nlive && now >= cur.next_live) {
		for (int k = 0; k < cur.nlive; k++) {
			if (watched(cur.live[k])) {
				if (k < MAXWATCH && watch_lost(k))
					return RCP_EPEER;
				continue;
			}
			if (pvm_pstat(cur.live[k]) == PvmNoTask)
				return RCP_EPEER; /* block() asks DONE once more */
		}
		cur.next_live = pvmrcpi_now() + S.live_ns;
	}
	return 0;
}

static int pvm_arm(void *arg, int64_t *timeout_ns)
{
	int64_t t = SLEEP_MAX_NS;
	(void)arg;
	if (cur.done && cur.nlive) {
		uint64_t now = pvmrcpi_now();
		int64_t l = cur.next_live > now ? (int64_t)(cur.next_live - now) : 0;
		if (l < t)
			t = l;
	}
	if (*timeout_ns < 0 || t < *timeout_ns)
		*timeout_ns = t;
	return 0;
}

/* The first endpoint waits; the others and libpvm3's sockets are its wait
 * sources (added once: the endpoints live until exit). */
static rcp_ep *setup(void)
{
	int i = 0;
	rcp_ep *ep, *first = pvmrcpi_ep_next(&i);
	if (!first || first == primary)
		return first;
	primary = first;
	while ((ep = pvmrcpi_ep_next(&i)) != NULL)
		(void)rcp_ep_wait_add_ep(first, ep);
	{
		struct rcp_wait_src src = {.fd = -1,
		                           .progress = pvm_look,
		                           .arm = pvm_arm,
		                           .fds = pvm_fds,
		                           .readable = pvm_readable};
		(void)rcp_ep_wait_add(first, &src);
	}
	return first;
}

static int block_done(void *arg)
{
	int rc = cur.done(cur.arg);
	(void)arg;
	if (rc)
		cur.rc = rc;
	return rc;
}

int pvmrcpi_block(int (*done)(void *), void *arg, const int *live, int nlive, uint64_t deadline_ns,
                  int stash)
{
	rcp_ep *ep = setup();
	uint64_t t0 = pvmrcpi_now();
	int64_t timeout = -1;
	struct blocked outer = cur, me;
	struct watch w[MAXWATCH] = {{0}};
	int rc;

	if (!ep)
		return PvmSysErr;
	if (deadline_ns)
		timeout = deadline_ns > t0 ? (int64_t)(deadline_ns - t0) : 0;

	cur.done = done;
	cur.arg = arg;
	cur.rc = 0;
	cur.live = live;
	cur.nlive = nlive;
	cur.stash = stash;
	cur.t0 = t0;
	cur.next_live = t0 + S.live_ns;
	cur.looks = 0;
	cur.w = w;
	rc = rcp_ep_wait(ep, block_done, NULL, timeout);
	me = cur;
	cur = outer;
	for (int k = 0; k < MAXWATCH; k++)
		if (w[k].req) { /* detached first: W dies with this frame */
			rcp_req_set_cb(w[k].req, NULL, NULL);
			rcp_cancel(w[k].req);
		}
	if (me.rc)
		return me.rc > 0 ? 1 : me.rc;
	if (rc == RCP_EPEER) {
		/* pvmd says a task we wait for is gone: DONE's last chance */
		rc = done(arg);
		return rc ? (rc > 0 ? 1 : rc) : PvmNoTask;
	}
	if (rc == RCP_ETIMEDOUT)
		return 0;
	return rc ? PvmSysErr : 1;
}

struct req_wait {
	rcp_req *req;
	struct rcp_status *st;
	int rc;
};

static int req_done(void *arg)
{
	struct req_wait *w = arg;
	int rc = rcp_test(w->req, w->st);
	if (rc == RCP_EAGAIN)
		return 0;
	w->rc = rc;
	return 1;
}

int pvmrcpi_wait_req(rcp_req *req, struct rcp_status *st, const int *live, int nlive, int stash)
{
	struct req_wait w = {req, st, 0};
	int rc = pvmrcpi_block(req_done, &w, live, nlive, 0, stash);

	if (rc == PvmNoTask) {
		/* The peer is gone: close its channel(s) so the request completes. */
		for (int k = 0; k < nlive; k++) {
			struct pr_peer *p = pvmrcpi_peer(live[k], 0);
			if (p &&
			    (watched(live[k]) ? chan_failed(p) : pvm_pstat(live[k]) == PvmNoTask))
				pvmrcpi_peer_dead(p);
		}
		if (rcp_test(req, st) == RCP_EAGAIN) {
			rcp_cancel(req);
			rcp_wait(req, st, 1000000000ll);
		}
		return PvmNoTask;
	}
	if (rc < 0)
		return rc;
	if (w.rc == RCP_ETRUNC)
		return 0; /* the caller reads st->len */
	return w.rc == RCP_EPEER || w.rc == RCP_ECLOSED ? PvmNoTask : pvmrcpi_err(w.rc);
}
