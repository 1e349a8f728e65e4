/*
 * pvm-glue/wait.c — how libpvmrcp blocks: spin for RCP_SPIN_NS (RCP_WAIT=
 * spin: forever, sleep: not at all), then sleep in ppoll() on the fds of
 * every RCP endpoint (shm, udp) and libpvm3's sockets (pvm_getfds), so a
 * message by any path wakes the task.  While blocked on specific tasks it asks pvmd every
 * PVMRCP_LIVE_MS whether they still run (see glue.c, EXIT AND FAILURE).
 *
 * WHY A SPINNER YIELDS.  Spinning pays only while the task we wait for
 * runs on another CPU.  When it shares ours (more runnable tasks than
 * CPUs: a cluster node running other jobs, or the scheduler placing both
 * ends of a ping-pong on one CPU, as it did for PVM's bwtest on 2 vCPUs),
 * a pure spinner keeps it off the CPU until the scheduler tick preempts
 * us: PVM's bwtest took ~8 ms a round trip with RCP_WAIT=spin and ~110 us
 * by default (2 x the 50 us spin) against 17-25 us for stock PVM.  The
 * same holds for pvmd (stock messages, pvm_pstat) and the group server.
 * So a wait spins alone for SOLO_NS only (a reply from a task on another
 * CPU comes well within it), then offers the CPU with sched_yield() after
 * every look: a task that shares our CPU runs at once; with none, the call
 * returns at once (a system call, ~0.2-1 us: later replies are seen that
 * much later, while the wait is already past SOLO_NS).  But a yield hands
 * the CPU to any task that shares it, and a task that computes keeps it
 * for its whole time slice (milliseconds), while a sleeper woken by the
 * peer's doorbell gets it back at once: bwtest beside CPU hogs took
 * 2-7 ms a round trip by default with yields every time.  So when a yield
 * kept us off the CPU for YIELD_SLOW_NS, the CPU is crowded: for the next
 * CROWDED_NS waits sleep after their time alone, with RCP_WAIT=spin too
 * (it spun beside CPU hogs at 1.4-24 ms a round trip, yielding or not:
 * a task that never sleeps gets its CPU share in slices, and the two ends
 * of a ping-pong seldom hold theirs at once).  So RCP_WAIT=spin spins,
 * yielding, on CPUs of its own or shared with its peer only.
 * pvm_rcp_waitstats() counts looks, yields, sleeps and the longest run of
 * looks past SOLO_NS without giving the CPU away (a few: the clock is read
 * every 8th look; a spinner that keeps the CPU until preempted makes tens
 * of thousands): tests count, never time.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/glue.h"

#define S       pvmrcpi_st
#define MAXFDS  64
#define SOLO_NS 5000ull
/* A yield that kept us off the CPU this long ran some other task's time
 * slice: the CPU is crowded.  For CROWDED_NS then, a wait that may sleep
 * sleeps after its time alone instead of yielding. */
#define YIELD_SLOW_NS 100000ull
#define CROWDED_NS    20000000ull

static struct pvm_rcp_waitstats ws;
static uint64_t crowded_until;

int pvm_rcp_waitstats(struct pvm_rcp_waitstats *out, int reset)
{
	if (out)
		*out = ws;
	if (reset)
		memset(&ws, 0, sizeof ws);
	return 0;
}

/* The CPU is given away (yield or sleep) after RUN looks in a row. */
static void handed_over(unsigned long long *run)
{
	if (*run > ws.max_run)
		ws.max_run = *run;
	*run = 0;
}

/* Arms every endpoint and sleeps until WAKE or a message by any path:
 * 0 slept (or was interrupted), 1 arming found work (no sleep), -1 error. */
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
			return 1; /* work waiting (or error: progress will tell) */
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
	unsigned long long run = 0;

	for (unsigned i = 0;; i++) {
		int rc = done(arg);
		if (rc) {
			handed_over(&run);
			return rc > 0 ? 1 : rc;
		}
		ws.waits += i == 0;
		ws.polls++;
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
		if (now - t0 >= SOLO_NS)
			run++; /* a look past the time alone */
		if (now < spin_end && now - t0 >= SOLO_NS && now < crowded_until)
			spin_end = now; /* others want this CPU: sleep (wakes on the doorbell) */
		if (now < spin_end) {
			if (now - t0 >= SOLO_NS) {
				uint64_t t;
				handed_over(&run);
				ws.yields++;
				sched_yield();
				t = pvmrcpi_now();
				if (t - now >= YIELD_SLOW_NS) {
					crowded_until = t + CROWDED_NS;
					ws.crowded++;
				}
				now = t;
			}
			continue;
		}
		{
			uint64_t wake = now + 10000000; /* 10 ms at most */
			if (nlive && next_live < wake)
				wake = next_live;
			if (deadline_ns && deadline_ns < wake)
				wake = deadline_ns;
			rc = sleep_once(now, wake);
			if (rc < 0)
				return PvmSysErr;
		}
		/* Arming found work instead (a peer on our CPU may be halfway
		 * through a send): no sleep, so yield, or this loop spins. */
		if (rc == 0) {
			ws.sleeps++;
		} else {
			ws.yields++;
			sched_yield();
		}
		handed_over(&run);
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
