/*
 * pvm-glue/wait.c — how libpvmrcp blocks: spin for RCP_SPIN_NS (RCP_WAIT=
 * spin: forever, sleep: not at all), then sleep in ppoll() on the fds of
 * every RCP endpoint (shm, udp) and libpvm3's sockets (pvm_getfds), so a
 * message by any path wakes the task.  While blocked on specific tasks it asks pvmd every
 * PVMRCP_LIVE_MS whether they still run (see glue.c, EXIT AND FAILURE).
 */
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "pvm-glue/glue.h"

#define S      pvmrcpi_st
#define MAXFDS 64

static int sleep_once(uint64_t now, uint64_t wake)
{
	struct pollfd pfd[MAXFDS];
	int n = 0, first_pvm, *fds, nf, rc, i = 0;
	rcp_ep *ep;

	/* Arm every endpoint before sleeping: a frame that came to one while
	 * another was being armed must not be slept over. */
	while ((ep = pvmrcpi_ep_next(&i)) != NULL) {
		int64_t t;
		if (rcp_ep_arm(ep))
			return 0; /* work waiting (or error: progress will tell) */
		pfd[n].fd = rcp_ep_fd(ep);
		pfd[n++].events = POLLIN;
		t = rcp_ep_timeout_ns(ep);
		if (t >= 0 && now + (uint64_t)t < wake)
			wake = now + (uint64_t)t;
	}
	first_pvm = n;
	nf = pvm_getfds(&fds);
	for (int k = 0; k < nf && n < MAXFDS; k++) {
		pfd[n].fd = fds[k];
		pfd[n++].events = POLLIN;
	}
	{
		uint64_t ns = wake > now ? wake - now : 0;
		struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
		rc = ppoll(pfd, (nfds_t)n, &ts, NULL);
	}
	for (int k = first_pvm; rc > 0 && k < n; k++)
		if (pfd[k].revents)
			S.pvm_readable = 1;
	return rc < 0 && errno != EINTR ? -1 : 0;
}

int pvmrcpi_block(int (*done)(void *), void *arg, const int *live, int nlive, uint64_t deadline_ns,
                  int stash)
{
	uint64_t t0 = pvmrcpi_now(), now = t0;
	uint64_t next_live = t0 + S.live_ns;
	uint64_t spin_end = S.spin_ns < 0 ? UINT64_MAX : t0 + (uint64_t)S.spin_ns;

	for (unsigned i = 0;; i++) {
		int rc = done(arg);
		if (rc)
			return rc > 0 ? 1 : rc;
		/* A clock read (~40 ns here) is as long as a poll of an idle
		 * endpoint: while spinning read it every 8th round only; the
		 * timeouts below are milliseconds, spinning tens of us. */
		if ((i & 7) == 0 || now >= spin_end)
			now = pvmrcpi_now();
		if (deadline_ns && now >= deadline_ns)
			return 0;
		if (stash && now - t0 >= S.stash_ns)
			pvmrcpi_stash_some();
		if (nlive && now >= next_live) {
			for (int k = 0; k < nlive; k++) {
				if (pvm_pstat(live[k]) == PvmNoTask) {
					rc = done(arg);
					if (rc)
						return rc > 0 ? 1 : rc;
					return PvmNoTask;
				}
			}
			next_live = pvmrcpi_now() + S.live_ns;
		}
		if (now < spin_end)
			continue;
		{
			uint64_t wake = now + 10000000; /* 10 ms at most */
			if (nlive && next_live < wake)
				wake = next_live;
			if (deadline_ns && deadline_ns < wake)
				wake = deadline_ns;
			if (sleep_once(now, wake))
				return PvmSysErr;
		}
	}
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
			if (p && pvm_pstat(live[k]) == PvmNoTask)
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
