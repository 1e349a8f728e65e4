/*
 * common/wait.c — the one spin-then-sleep policy every wait runs.
 *
 * Until issue 19 the policy was written five times (the endpoint's wait,
 * bulk's, rpc's, relinked PVM's and the nic's) and the copies disagreed:
 * bulk ignored the endpoint's mode, the nic slept in milliseconds, only
 * PVM's noticed a crowded CPU.  Now they all call rcpi_waiter_wait, with
 * what they watch as wait sources (include/rcp/wait.h).
 *
 * A WAIT.  Ask DONE; if not, look at every source (progress).  A look that
 * found something (a frame, an event) restarts the spin: more tends to
 * follow (a stream's next frame, the reply a request just triggered).
 *
 * SPINNING.  Spinning pays only while the task we wait for runs on another
 * CPU, at once: a reply from a task on another CPU comes well within
 * RCPI_SOLO_NS of the last event (w->solo_ns: a nic whose own round trip
 * is about that long asks for more, rcp_nic_info.solo_ns; xdp 50 µs).
 * Past that, each look offers the CPU
 * (sched_yield): when the task we wait for shares our CPU (more runnable
 * tasks than CPUs: a cluster node running other jobs; or the scheduler
 * placing both ends of a ping-pong on one CPU, as it did for PVM's bwtest
 * on 2 vCPUs), a pure spinner keeps it off until the scheduler tick
 * preempts us — bwtest took ~8 ms a round trip with RCP_WAIT=spin before
 * the yields, ~110 µs by default (2 x the 50 µs spin), against 17-25 µs
 * for stock PVM.  With nothing else runnable the yield returns at once
 * (a system call, ~0.2-1 µs).
 *
 * CROWDED.  A yield hands the CPU to any task that shares it, and a task
 * that computes keeps it for its whole slice (milliseconds), while a
 * sleeper woken by its peer's doorbell is run at once.  So a waiter must
 * know whether tasks that compute share its CPU, and it asks its own
 * thread's scheduler account (/proc/thread-self/schedstat: the time it was
 * runnable but kept off the CPU, and how often it got the CPU back), once
 * a millisecond before yielding: kept off 100 µs or more, for 50 µs or
 * more on average each time, and the CPU is crowded (runq_crowded: why the
 * magnitude and not the number of runnable tasks).  And a yield that kept
 * us off the CPU for RCPI_YIELD_SLOW_NS, other tasks running meanwhile,
 * marks the CPU crowded for the next RCPI_CROWDED_NS.  Crowded, every
 * wait sleeps once past its time alone, RCP_WAIT=spin too (beside CPU
 * hogs a task that never sleeps gets its CPU share in slices, and the two
 * ends of a ping-pong seldom hold theirs at once: 1.4-24 ms a round trip
 * measured, yielding or not).
 * The verdict is per process (the CPU is what is crowded, not a wait) and a
 * relaxed atomic: a stale read costs one wait its best choice, never
 * correctness.  The account's last reading is per thread.
 *
 * SLEEPING.  Every source is armed first (a frame that came to one while
 * another was armed must not be slept over; one that finds work waiting
 * says RCP_EAGAIN and the wait looks again), and may shorten the sleep
 * (a timer).  Alone, the first source sleeps in its own call when it has
 * one (the nic's blocking receive returns the frames it woke for, one
 * system call less); else ppoll on every source's fds, in nanoseconds
 * (timers are microseconds apart: poll's milliseconds would stretch every
 * one).
 *
 * MODES (RCP_WAIT, the endpoint's flags): DEFAULT spins RCP_SPIN_NS past
 * the last event, then sleeps; SPIN never sleeps unless the CPU is
 * crowded; SLEEP sleeps at the first look that finds nothing.
 *
 * COUNTED, NOT TIMED.  struct rcp_wait_stats counts looks, yields, sleeps
 * and the longest run of looks past the time alone without giving the CPU
 * away (a few: the clock is read every 16th look; a spinner that keeps the
 * CPU makes tens of thousands): tests count, never time.  Tests may give
 * a waiter its own clock, yield and scheduler account (w->now, w->yield,
 * w->sched).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rcp_common.h"
#include "common/wait.h"

static _Atomic uint64_t crowded_until;
static _Atomic uint64_t runq_next; /* a waiting thread's last account look: */
static _Atomic int runq_verdict;   /* ... its verdict (runq_crowded) */
static _Atomic uint64_t load_next; /* when runq_probe may look again */
static _Atomic int load_verdict;   /* what it saw last */

static void forget_account(void);

void rcpi_wait_uncrowd(void)
{
	atomic_store_explicit(&crowded_until, 0, memory_order_relaxed);
	atomic_store_explicit(&runq_next, 0, memory_order_relaxed);
	atomic_store_explicit(&runq_verdict, 0, memory_order_relaxed);
	atomic_store_explicit(&load_next, 0, memory_order_relaxed);
	forget_account();
}

void rcpi_wait_policy(int *mode, int64_t *spin_ns)
{
	static int read_once, m;
	static int64_t s;
	if (!read_once) {
		const char *v;
		rcpi_env_init();
		v = rcpi_env_str("RCP_WAIT");
		m = v && !strcmp(v, "spin")    ? RCPI_WAIT_SPIN
		    : v && !strcmp(v, "sleep") ? RCPI_WAIT_SLEEP
		                               : RCPI_WAIT_DEFAULT;
		if (v && m == RCPI_WAIT_DEFAULT)
			rcpi_warn("RCP_WAIT=%s: neither spin nor sleep, ignored", v);
		s = rcpi_env_int("RCP_SPIN_NS", 50000);
		if (s < 0)
			s = 0;
		read_once = 1; /* benign race: both threads read the same values */
	}
	*mode = m;
	*spin_ns = s;
}

int rcpi_waiter_init(struct rcpi_waiter *w, int mode, int64_t spin_ns,
                     const struct rcp_wait_src *src0)
{
	int m;
	int64_t s;
	memset(w, 0, sizeof *w);
	rcpi_wait_policy(&m, &s);
	w->mode = mode >= 0 ? mode : m;
	w->spin_ns = spin_ns >= 0 ? spin_ns : s;
	w->solo_ns = RCPI_SOLO_NS;
	if (src0 && rcpi_waiter_add(w, src0) < 0)
		return RCP_ENOMEM;
	return 0;
}

void rcpi_waiter_fini(struct rcpi_waiter *w)
{
	free(w->src);
	free(w->ids);
	w->src = NULL;
	w->ids = NULL;
	w->nsrc = w->cap = 0;
}

int rcpi_waiter_add(struct rcpi_waiter *w, const struct rcp_wait_src *src)
{
	if (!src)
		return RCP_EINVAL;
	if (w->nsrc == w->cap) {
		int cap = w->cap ? 2 * w->cap : 4;
		struct rcp_wait_src *s = realloc(w->src, (size_t)cap * sizeof *s);
		int *ids;
		if (!s)
			return RCP_ENOMEM;
		w->src = s;
		ids = realloc(w->ids, (size_t)cap * sizeof *ids);
		if (!ids)
			return RCP_ENOMEM;
		w->ids = ids;
		w->cap = cap;
	}
	w->src[w->nsrc] = *src;
	w->ids[w->nsrc] = ++w->next_id;
	return w->ids[w->nsrc++];
}

int rcpi_waiter_remove(struct rcpi_waiter *w, int id)
{
	for (int i = 0; i < w->nsrc; i++) {
		if (w->ids[i] != id)
			continue;
		if (w->busy)
			return RCP_EBUSY;
		memmove(&w->src[i], &w->src[i + 1], (size_t)(w->nsrc - i - 1) * sizeof *w->src);
		memmove(&w->ids[i], &w->ids[i + 1], (size_t)(w->nsrc - i - 1) * sizeof *w->ids);
		w->nsrc--;
		return 0;
	}
	return RCP_EINVAL;
}

static uint64_t clock_of(const struct rcpi_waiter *w)
{
	return w->now ? w->now() : rcpi_now_ns();
}

/* The CPU was given away (yield or sleep) after *RUN looks in a row. */
static void handed_over(struct rcpi_waiter *w, unsigned long long *run)
{
	if (*run > w->st.max_run)
		w->st.max_run = *run;
	*run = 0;
}

/* This thread's scheduler account, from /proc/thread-self/schedstat
 * ("exec_ns run_delay_ns arrivals"): *DELAY_NS, the time it was runnable
 * but kept off the CPU by other tasks, and *ARRIVALS, the times it was
 * given a CPU.  Opened each time (once per RCPI_RUNQ_EVERY_NS per thread,
 * ~2-4 µs): a kept fd would name the opening thread, wrong after fork()
 * and leaked by every thread that waited once.  0, or -1 (no such file:
 * a kernel without CONFIG_SCHED_INFO, no /proc). */
static int schedstat_read(uint64_t *delay_ns, uint64_t *arrivals)
{
	char buf[96];
	unsigned long long run, delay, arr;
	ssize_t n;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (sscanf(buf, "%llu %llu %llu", &run, &delay, &arr) != 3)
		return -1;
	*delay_ns = delay;
	*arrivals = arr;
	return 0;
}

static int sched_of(const struct rcpi_waiter *w, uint64_t *delay_ns, uint64_t *arrivals)
{
	return w->sched ? w->sched(delay_ns, arrivals) : schedstat_read(delay_ns, arrivals);
}

/* What this thread's account said at its last look. */
static _Thread_local struct {
	uint64_t next;     /* when it may look again (RCPI_RUNQ_EVERY_NS) */
	uint64_t delay;    /* run delay then */
	uint64_t arrivals; /* arrivals then */
	int have;          /* delay and arrivals hold a reading */
	int verdict;
} me;

static void forget_account(void)
{
	memset(&me, 0, sizeof me);
}

/* Whether other tasks kept this thread off its CPU since its last look:
 * at least RCPI_YIELD_SLOW_NS in all, and RCPI_STRETCH_NS or more on
 * average each time it got the CPU back.  Why not count the runnable tasks
 * (/proc/loadavg, until issue 20): between two hosts of a cluster on
 * this machine, a spinning 8 B ping-pong found more tasks runnable than
 * CPUs in most of its looks (its own peer spinning on the other CPU, the
 * kernel's veth and bridge work, any short-lived process of another
 * user) and slept in 56-98% of its round trips: 53-60 µs against kernel
 * TCP's 12-17.  None of those waits for OUR CPU long: a peer on the
 * other CPU never, kernel threads and short processes a few µs each time,
 * a peer on our own CPU (two ends pinned to one) a turn of its ping-pong
 * each time we yield to it.  A task that computes keeps us off for its
 * whole slice (0.75-3 ms) each time; that is what makes yielding lose
 * (the CROWDED note at the top).  Only the magnitude tells them apart. */
static int overrun(uint64_t delay, uint64_t arrivals)
{
	return delay >= RCPI_YIELD_SLOW_NS && delay >= arrivals * (uint64_t)RCPI_STRETCH_NS;
}

/* Looks at this thread's account once per RCPI_RUNQ_EVERY_NS (a ~2-4 µs
 * read, against a yield that pays another task's slice for the news:
 * beside one CPU hog, relinked bwtest at 80 KB took 91-115 µs a round trip
 * spinning, 38-52 sleeping, when each 20 ms window of RCPI_CROWDED_NS
 * began with a slow yield).  The verdict is also published for
 * rcpi_wait_crowded.  Unknown (no schedstat): not crowded. */
static int runq_crowded(struct rcpi_waiter *w, uint64_t now)
{
	uint64_t d, a;
	int v = 0;

	if (now < me.next)
		return me.verdict;
	me.next = now + RCPI_RUNQ_EVERY_NS;
	if (sched_of(w, &d, &a) == 0) {
		v = me.have && overrun(d - me.delay, a - me.arrivals);
		me.delay = d;
		me.arrivals = a;
		me.have = 1;
	}
	me.verdict = v;
	atomic_store_explicit(&runq_next, me.next, memory_order_relaxed);
	atomic_store_explicit(&runq_verdict, v, memory_order_relaxed);
	if (v)
		w->st.crowded++;
	return v;
}

/* More tasks runnable than CPUs we may use, from /proc/loadavg's
 * "running/total" field (the kernel's nr_running() at the read, us
 * included).  Not the waits' test any more (runq_crowded says why), but
 * the protocol's: where RMA starts (rcpc_set_crowded) is about wake-ups,
 * and an RMA transfer costs one on each side whenever the machine has
 * more work than CPUs, whichever CPU it lands on.  Measured beside two CPU
 * hogs, relinked bwtest at 80 KB (RMA unless crowded), default wait mode,
 * interleaved runs: with the waits' account alone as the verdict 368 and
 * 521 µs a round trip, with this count 145 and 247-252 (stock PVM 233 and
 * 106: the machine drifted between the two sets).  Unknown (no /proc): no. */
static int runq_probe(void)
{
	static int ncpu;
	char buf[128];
	ssize_t n;
	unsigned long running = 0;
	const char *p;
	int fd;

	if (!ncpu) {
		cpu_set_t set;
		ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
		if (ncpu < 1)
			ncpu = 1;
	}
	fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* "0.12 0.08 0.01 3/187 4242" */
	p = buf;
	for (int field = 0; field < 3 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%lu/", &running) != 1)
		return 0;
	return running > (unsigned long)ncpu;
}

int rcpi_wait_crowded(uint64_t now)
{
	if (now < atomic_load_explicit(&crowded_until, memory_order_relaxed))
		return 1;
	/* Only in a process whose waits have looked at the CPU (runq_next
	 * set): one that never waits (a test spinning on rcp_test, a
	 * benchmark's busy loop) keeps the protocol's choices independent of
	 * what else the machine runs, as before the load count was asked
	 * here (test_verbs_rma's RMA counts failed beside a parallel build). */
	if (!atomic_load_explicit(&runq_next, memory_order_relaxed))
		return 0;
	if (now >= atomic_load_explicit(&load_next, memory_order_relaxed)) {
		atomic_store_explicit(&load_next, now + RCPI_RUNQ_EVERY_NS, memory_order_relaxed);
		atomic_store_explicit(&load_verdict, runq_probe(), memory_order_relaxed);
	}
	if (atomic_load_explicit(&load_verdict, memory_order_relaxed))
		return 1;
	return atomic_load_explicit(&runq_verdict, memory_order_relaxed) &&
	       now < atomic_load_explicit(&runq_next, memory_order_relaxed) + RCPI_CROWDED_NS;
}

/* Offers the CPU at NOW; returns the time after.  A yield that took
 * RCPI_YIELD_SLOW_NS is looked into: the CPU is crowded if other tasks
 * kept us off it that long (the account's run delay grew by as much since
 * its last look), not if the clock jumped for another reason (the
 * hypervisor ran another machine's vCPU: no task here wants the CPU).
 * Without an account, the clock alone decides. */
static uint64_t yield_cpu(struct rcpi_waiter *w, uint64_t now)
{
	uint64_t t, d, a;
	w->st.yields++;
	if (w->yield)
		w->yield();
	else
		sched_yield();
	t = clock_of(w);
	if (t - now < RCPI_YIELD_SLOW_NS)
		return t;
	if (sched_of(w, &d, &a) == 0) {
		int kept = !me.have || d - me.delay >= RCPI_YIELD_SLOW_NS;
		me.delay = d;
		me.arrivals = a;
		me.have = 1;
		me.next = t + RCPI_RUNQ_EVERY_NS;
		if (!kept)
			return t;
	}
	atomic_store_explicit(&crowded_until, t + RCPI_CROWDED_NS, memory_order_relaxed);
	w->st.crowded++;
	return t;
}

/* Sleeps up to TIMEOUT_NS (< 0: forever) on every source's fds.
 * 1 something may have come, 0 timed out, < 0 error. */
static int sleep_fds(struct rcpi_waiter *w, int64_t timeout_ns)
{
	struct pollfd pfd[RCPI_WAIT_MAXFDS];
	int owner[RCPI_WAIT_MAXFDS];
	int n = 0, rc;

	for (int i = 0; i < w->nsrc; i++) {
		const struct rcp_wait_src *s = &w->src[i];
		if (s->fd >= 0 && n < RCPI_WAIT_MAXFDS) {
			pfd[n].fd = s->fd;
			pfd[n].events = POLLIN;
			owner[n++] = i;
		}
		if (s->fds && n < RCPI_WAIT_MAXFDS) {
			int fds[RCPI_WAIT_MAXFDS];
			int k = s->fds(s->arg, fds, RCPI_WAIT_MAXFDS - n);
			for (int j = 0; j < k && n < RCPI_WAIT_MAXFDS; j++) {
				pfd[n].fd = fds[j];
				pfd[n].events = POLLIN;
				owner[n++] = i;
			}
		}
	}
	for (int k = 0; k < n; k++)
		pfd[k].revents = 0;
	if (timeout_ns < 0) {
		rc = ppoll(pfd, (nfds_t)n, NULL, NULL);
	} else {
		struct timespec ts = {(time_t)(timeout_ns / 1000000000),
		                      (long)(timeout_ns % 1000000000)};
		rc = ppoll(pfd, (nfds_t)n, &ts, NULL);
	}
	if (rc < 0)
		return errno == EINTR ? 1 : RCP_ESYS;
	for (int k = 0, last = -1; rc > 0 && k < n; k++) {
		const struct rcp_wait_src *s = &w->src[owner[k]];
		if (pfd[k].revents && s->readable && owner[k] != last) {
			last = owner[k];
			s->readable(s->arg);
		}
	}
	return rc > 0;
}

/* Arms every source and sleeps; TIMEOUT_NS as in sleep_fds.  1 something
 * came or may have (look again), 0 slept without news, < 0 error. */
static int sleep_once(struct rcpi_waiter *w, int64_t timeout_ns)
{
	for (int i = 0; i < w->nsrc; i++) {
		const struct rcp_wait_src *s = &w->src[i];
		if (s->arm) {
			int rc = s->arm(s->arg, &timeout_ns);
			if (rc == RCP_EAGAIN)
				return 1;
			if (rc < 0)
				return rc;
		}
	}
	w->st.sleeps++;
	if (w->nsrc == 1 && w->sleep_alone)
		return w->sleep_alone(w->src[0].arg, timeout_ns) != 0;
	return sleep_fds(w, timeout_ns);
}

int rcpi_waiter_wait(struct rcpi_waiter *w, int (*done)(void *), void *arg, int64_t timeout_ns)
{
	uint64_t start = 0, until = UINT64_MAX, last = 0, now = 0;
	unsigned long long run = 0;
	int rc = 0, stamp = 0;

	w->busy++;
	for (unsigned i = 0;; i++) {
		int news = 0;
		rc = done(arg);
		if (rc)
			break;
		w->st.looks++;
		for (int k = 0; k < w->nsrc; k++) {
			const struct rcp_wait_src *s = &w->src[k];
			if (s->progress && (s->every <= 1 || i % s->every == 0)) {
				int n = s->progress(s->arg);
				if (n < 0) {
					rc = n;
					goto out;
				}
				news |= n > 0;
			}
		}
		if (news) {
			/* Something came: look again at once (DONE first);
			 * the clock is read for it at the next quiet look, or
			 * every 16th look while news keeps coming (a timeout
			 * still ends the wait). */
			stamp = 1;
			if ((i & 15) != 15 || until == UINT64_MAX)
				continue;
		}
		/* A quiet look.  The clock (~25-40 ns) is read every 16th
		 * look only while spinning alone: the spin is tens of µs. */
		if (start && !stamp && (i & 15) != 15 && w->mode != RCPI_WAIT_SLEEP &&
		    now - last < w->solo_ns)
			continue;
		now = clock_of(w);
		if (!start) {
			start = last = now;
			w->st.waits++;
			if (timeout_ns >= 0)
				until = start + (uint64_t)timeout_ns;
		}
		if (stamp) {
			last = now;
			stamp = 0;
		}
		if (now >= until) {
			rc = RCP_ETIMEDOUT;
			break;
		}
		if (news)
			continue;
		if (now - last < w->solo_ns && w->mode != RCPI_WAIT_SLEEP) {
			rcpi_cpu_relax();
			continue;
		}
		run++;
		if (w->mode == RCPI_WAIT_SPIN ||
		    (w->mode == RCPI_WAIT_DEFAULT && now - last < (uint64_t)w->spin_ns)) {
			if (now >= atomic_load_explicit(&crowded_until, memory_order_relaxed) &&
			    !runq_crowded(w, now)) {
				handed_over(w, &run);
				now = yield_cpu(w, now);
				continue;
			}
			/* Crowded: others want this CPU; sleep (a doorbell
			 * wakes us at once). */
		}
		handed_over(w, &run);
		{
			int64_t t = until == UINT64_MAX ? -1 : (int64_t)(until - now);
			int n = sleep_once(w, t);
			if (n < 0) {
				rc = n;
				break;
			}
			if (n > 0) {
				stamp = 1;
			} else if (until != UINT64_MAX && clock_of(w) >= until) {
				/* Slept to the end with no news: no look after
				 * it (a nic's look would undo its arming, which
				 * a caller sleeping on its fd next relies on). */
				rc = RCP_ETIMEDOUT;
				break;
			}
		}
	}
out:
	handed_over(w, &run);
	w->busy--;
	return rc > 0 ? 0 : rc;
}
