/*
 * tests/test_wait.c — the one wait policy (common/wait.c), on a fake clock
 * and a fake yield: every decision is counted (looks, yields, sleeps,
 * callbacks), nothing is timed.
 *
 * - t_spin_then_yield: DEFAULT mode spins alone for RCPI_SOLO_NS, then
 *   yields at every look until RCP_SPIN_NS, then sleeps.
 * - t_solo_ns: the waiter's own time alone (a nic's, rcp_nic_info.solo_ns)
 *   replaces RCPI_SOLO_NS: 20 µs alone, then yields; 60 µs, past a 50 µs
 *   spin, never yields.
 * - t_crowded_sleeps: a yield that kept us off the CPU long marks the CPU
 *   crowded: the next look sleeps, RCP_WAIT=spin too.
 * - t_account_crowded: the thread's scheduler account (fake) says a task
 *   that computes kept it off its CPU: past its time alone a wait sleeps
 *   without paying a yield for the news.
 * - t_short_turns_not_crowded: the same run delay in many short turns (a
 *   peer sharing the CPU, kernel work), or a little in all: not crowded,
 *   RCP_WAIT=spin never sleeps.
 * - t_slow_yield_no_task: a slow yield during which no task ran (the
 *   hypervisor took the vCPU) is not crowding; without an account the
 *   clock alone decides.
 * - t_spin_never_sleeps: SPIN mode on an uncrowded CPU only yields.
 * - t_sleep_mode: SLEEP sleeps at the first quiet look.
 * - t_arm_eagain: a source that has work when armed keeps the wait awake.
 * - t_readable: a source's fd ends the sleep and its readable hook runs;
 *   fds from a source's fds hook are watched too.
 * - t_news_keeps_spinning: news restarts the time alone.
 * - t_errors: a source's error ends the wait; DONE's negative verdict is
 *   returned; the timeout; removal inside a wait is refused.
 */
#include <fcntl.h>
#include <unistd.h>

#include <rcp/error.h>

#include "common/wait.h"
#include "testutil.h"

/* Yields between the time alone and the end of a 50 µs spin. */
#define YIELDS ((50000 - RCPI_SOLO_NS) / 300)

static uint64_t fake_ns;
static uint64_t tick_ns;  /* the clock advances this much per read */
static uint64_t yield_ns; /* a yield costs this much */
static unsigned yields_seen;

static uint64_t fake_now(void)
{
	fake_ns += tick_ns;
	return fake_ns;
}

/* The thread's scheduler account (struct rcpi_waiter's sched hook). */
static uint64_t fake_delay, fake_arrivals, sched_reads;
static int no_account;     /* the hook says: unknown */
static int yield_ran_task; /* a yield ran another task for yield_ns */

static int fake_sched(uint64_t *delay_ns, uint64_t *arrivals)
{
	sched_reads++;
	if (no_account)
		return -1;
	*delay_ns = fake_delay;
	*arrivals = fake_arrivals;
	return 0;
}

static void fake_yield(void)
{
	yields_seen++;
	fake_ns += yield_ns;
	if (yield_ran_task && yield_ns > 1000) {
		fake_delay += yield_ns;
		fake_arrivals++;
	}
}

struct src_state {
	int looks, arms, arm_eagain, readable, news_left, err_at, sleep_zero, quiet_first;
};

static int s_progress(void *arg)
{
	struct src_state *s = arg;
	s->looks++;
	if (s->err_at && s->looks >= s->err_at)
		return RCP_EPROTO;
	if (s->looks > s->quiet_first && s->news_left > 0) {
		s->news_left--;
		return 1;
	}
	return 0;
}

static int s_arm(void *arg, int64_t *timeout_ns)
{
	struct src_state *s = arg;
	s->arms++;
	if (s->sleep_zero)
		*timeout_ns = 0; /* never block the test */
	if (s->arm_eagain > 0) {
		s->arm_eagain--;
		return RCP_EAGAIN;
	}
	return 0;
}

static void s_readable(void *arg)
{
	((struct src_state *)arg)->readable++;
}

struct until {
	struct rcpi_waiter *w;
	unsigned sleeps, looks; /* done once either count is reached */
	int verdict;
};

static int done_when(void *arg)
{
	struct until *u = arg;
	if ((u->sleeps && u->w->st.sleeps >= u->sleeps) || (u->looks && u->w->st.looks >= u->looks))
		return u->verdict ? u->verdict : 1;
	return 0;
}

static void setup_w(struct rcpi_waiter *w, int mode, int64_t spin_ns, struct src_state *s)
{
	struct rcp_wait_src src = {.fd = -1, .progress = s_progress, .arm = s_arm, .arg = s};
	s->sleep_zero = 1;
	assert_int_equal(rcpi_waiter_init(w, mode, spin_ns, &src), 0);
	w->now = fake_now;
	w->yield = fake_yield;
	w->sched = fake_sched;
	fake_delay = fake_arrivals = sched_reads = 0;
	no_account = 0;
	yield_ran_task = 1;
	fake_ns = 1000000000ull;
	tick_ns = 100;
	yield_ns = 100;
	yields_seen = 0;
	rcpi_wait_uncrowd();
}

static void t_spin_then_yield(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 1, 0, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_DEFAULT, 50000, &s);
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	/* Spun alone 5 µs (no yield), then yielded each look until 50 µs,
	 * then slept once. */
	assert_int_equal(w.st.sleeps, 1);
	assert_true(w.st.yields > 100);
	assert_int_equal(w.st.yields, yields_seen);
	assert_true(w.st.max_run <= 1);
	assert_int_equal(w.st.crowded, 0);
	/* Alone: no yield before RCPI_SOLO_NS.  A look past it reads the
	 * clock (100 ns), yields (100 ns) and reads it again (100 ns). */
	assert_true(w.st.yields <= YIELDS + 1);
	assert_true(w.st.yields >= YIELDS - 5);
	assert_true(s.arms == 1);
	rcpi_waiter_fini(&w);
}

static void t_solo_ns(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 1, 0, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_DEFAULT, 50000, &s);
	assert_int_equal(w.solo_ns, RCPI_SOLO_NS);
	w.solo_ns = 20000;
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	/* As t_spin_then_yield, the yields from 20 µs on (300 ns a look). */
	assert_int_equal(w.st.sleeps, 1);
	assert_true(w.st.yields <= (50000 - 20000) / 300 + 1);
	assert_true(w.st.yields >= (50000 - 20000) / 300 - 5);
	rcpi_waiter_fini(&w);

	setup_w(&w, RCPI_WAIT_DEFAULT, 50000, &s);
	w.solo_ns = 60000;
	u.sleeps = 1;
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	assert_int_equal(w.st.yields, 0);
	assert_int_equal(w.st.sleeps, 1);
	rcpi_waiter_fini(&w);
}

/* One wait past its time alone in MODE: returns after the first sleep. */
static void wait_to_sleep(struct rcpi_waiter *w)
{
	struct until u = {w, 1, 0, 0};
	assert_int_equal(rcpi_waiter_wait(w, done_when, &u, -1), 0);
	assert_int_equal(w->st.sleeps, 1);
}

static void t_crowded_sleeps(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	(void)state;
	for (int mode = RCPI_WAIT_DEFAULT; mode <= RCPI_WAIT_SPIN; mode++) {
		setup_w(&w, mode, 50000, &s);
		yield_ns = RCPI_YIELD_SLOW_NS; /* someone else ran a slice */
		wait_to_sleep(&w);
		/* One slow yield, then the CPU counts as crowded: sleep. */
		assert_int_equal(w.st.yields, 1);
		assert_int_equal(w.st.crowded, 1);
		/* The next wait, still crowded, sleeps past its time alone
		 * without yielding at all. */
		memset(&w.st, 0, sizeof w.st);
		yield_ns = 100;
		wait_to_sleep(&w);
		assert_int_equal(w.st.yields, 0);
		rcpi_waiter_fini(&w);
	}
}

/* A first wait reads the account (nothing to compare yet: it yields). */
static void prime(struct rcpi_waiter *w)
{
	struct until u = {w, 0, 2000, 0};
	assert_int_equal(rcpi_waiter_wait(w, done_when, &u, -1), 0);
	assert_true(sched_reads >= 1);
	assert_int_equal(w->st.crowded, 0);
	memset(&w->st, 0, sizeof w->st);
}

/* Another task kept us off the CPU 2 ms in two stretches (a CPU hog's
 * slices): past the time alone a wait sleeps without yielding. */
static void t_account_crowded(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	(void)state;
	for (int mode = RCPI_WAIT_DEFAULT; mode <= RCPI_WAIT_SPIN; mode++) {
		setup_w(&w, mode, 50000, &s);
		prime(&w);
		fake_ns += 2 * RCPI_RUNQ_EVERY_NS;
		fake_delay += 2000000;
		fake_arrivals += 2;
		wait_to_sleep(&w);
		assert_int_equal(w.st.yields, 0);
		assert_int_equal(w.st.crowded, 1);
		rcpi_waiter_fini(&w);
	}
}

/* The same 2 ms in 200 turns of 10 µs (a peer on our CPU answering each
 * yield, kernel threads), or 60 µs in one stretch: RCP_WAIT=spin keeps
 * yielding, never sleeps. */
static void t_short_turns_not_crowded(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 0, 4000, 0};
	(void)state;
	for (int k = 0; k < 2; k++) {
		setup_w(&w, RCPI_WAIT_SPIN, 50000, &s);
		prime(&w);
		fake_ns += 2 * RCPI_RUNQ_EVERY_NS;
		fake_delay += k == 0 ? 2000000 : 60000;
		fake_arrivals += k == 0 ? 200 : 1;
		u.looks = 4000;
		assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
		assert_true(sched_reads >= 2);
		assert_int_equal(w.st.sleeps, 0);
		assert_int_equal(w.st.crowded, 0);
		assert_true(w.st.yields > 100);
		rcpi_waiter_fini(&w);
	}
}

/* A yield that took RCPI_YIELD_SLOW_NS while no task ran (the account did
 * not move): not crowded.  With no account, the clock decides: crowded. */
static void t_slow_yield_no_task(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 0, 3000, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_SPIN, 50000, &s);
	yield_ran_task = 0;
	yield_ns = RCPI_YIELD_SLOW_NS;
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	assert_true(w.st.yields > 10);
	assert_int_equal(w.st.sleeps, 0);
	assert_int_equal(w.st.crowded, 0);
	rcpi_waiter_fini(&w);

	setup_w(&w, RCPI_WAIT_SPIN, 50000, &s);
	no_account = 1;
	yield_ran_task = 0;
	yield_ns = RCPI_YIELD_SLOW_NS;
	wait_to_sleep(&w);
	assert_int_equal(w.st.yields, 1);
	assert_int_equal(w.st.crowded, 1);
	rcpi_waiter_fini(&w);
}

static void t_spin_never_sleeps(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 0, 20000, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_SPIN, 50000, &s);
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	assert_int_equal(w.st.sleeps, 0);
	assert_true(w.st.yields > 1000);
	assert_int_equal(s.arms, 0);
	rcpi_waiter_fini(&w);
}

static void t_sleep_mode(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 3, 0, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_SLEEP, 50000, &s);
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	/* Every quiet look sleeps: three sleeps in three looks. */
	assert_int_equal(w.st.sleeps, 3);
	assert_int_equal(w.st.looks, 3);
	assert_int_equal(w.st.yields, 0);
	rcpi_waiter_fini(&w);
}

static void t_arm_eagain(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 1, 0, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_SLEEP, 0, &s);
	s.arm_eagain = 5; /* work found while arming: look again, no sleep */
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	assert_int_equal(s.arms, 6);
	assert_int_equal(w.st.sleeps, 1);
	assert_int_equal(w.st.looks, 6);
	rcpi_waiter_fini(&w);
}

static void t_readable(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0}, t = {0};
	struct until u = {&w, 1, 0, 0};
	int p[2];
	(void)state;
	assert_int_equal(pipe(p), 0);
	setup_w(&w, RCPI_WAIT_SLEEP, 0, &s);
	s.sleep_zero = 0; /* sleep for real: only the fd may end it */
	{
		struct rcp_wait_src a = {.fd = p[0], .readable = s_readable, .arg = &t};
		assert_true(rcpi_waiter_add(&w, &a) > 0);
	}
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	assert_int_equal(t.readable, 1);
	assert_int_equal(s.readable, 0);
	close(p[0]);
	close(p[1]);
	rcpi_waiter_fini(&w);
}

static int fds_from(void *arg, int *fds, int max)
{
	(void)max;
	fds[0] = *(int *)arg;
	return 1;
}

static int fds_ready;
static void fds_readable(void *arg)
{
	(void)arg;
	fds_ready++;
}

static void t_fds_hook(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 1, 0, 0};
	int p[2];
	(void)state;
	assert_int_equal(pipe(p), 0);
	setup_w(&w, RCPI_WAIT_SLEEP, 0, &s);
	s.sleep_zero = 0;
	{
		struct rcp_wait_src b = {
		    .fd = -1, .fds = fds_from, .readable = fds_readable, .arg = &p[0]};
		assert_true(rcpi_waiter_add(&w, &b) > 0);
	}
	fds_ready = 0;
	assert_int_equal(write(p[1], "z", 1), 1);
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	assert_int_equal(fds_ready, 1);
	close(p[0]);
	close(p[1]);
	rcpi_waiter_fini(&w);
}

static void t_news_keeps_spinning(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 1, 0, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_DEFAULT, 50000, &s);
	/* Quiet a while, then a stream: news at every look for longer than
	 * RCP_SPIN_NS (the clock is read every 16th look: a timeout is set). */
	s.quiet_first = 20;
	s.news_left = 10000;
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, 10000000000ll), 0);
	/* No yield while news came; after the last, 5 µs alone, then yields
	 * until 50 µs past it, then one sleep. */
	assert_true(s.looks > 10000);
	assert_int_equal(w.st.sleeps, 1);
	assert_true(w.st.yields <= YIELDS + 1);
	assert_true(w.st.yields >= YIELDS - 5);
	rcpi_waiter_fini(&w);
}

/* A source looked at every 4th look only (another endpoint on udp). */
static void t_every(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0}, t = {0};
	struct until u = {&w, 0, 400, 0};
	(void)state;
	setup_w(&w, RCPI_WAIT_SPIN, 50000, &s);
	{
		struct rcp_wait_src b = {.fd = -1, .progress = s_progress, .arg = &t, .every = 4};
		assert_true(rcpi_waiter_add(&w, &b) > 0);
	}
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), 0);
	assert_int_equal(s.looks, 400);
	assert_int_equal(t.looks, 100);
	rcpi_waiter_fini(&w);
}

static void t_errors(void **state)
{
	struct rcpi_waiter w;
	struct src_state s = {0};
	struct until u = {&w, 0, 5, -77};
	int id;
	(void)state;
	setup_w(&w, RCPI_WAIT_DEFAULT, 50000, &s);
	/* DONE's negative verdict is the wait's result. */
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), -77);
	/* A source's error ends the wait with it. */
	memset(&w.st, 0, sizeof w.st);
	s.looks = 0;
	s.err_at = 3;
	u.looks = 1000;
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, -1), RCP_EPROTO);
	assert_int_equal(s.looks, 3);
	/* The timeout, on the fake clock. */
	s.err_at = 0;
	u.looks = 0;
	u.sleeps = 0;
	assert_int_equal(rcpi_waiter_wait(&w, done_when, &u, 20000), RCP_ETIMEDOUT);
	/* Sources come and go; not from inside a wait. */
	{
		struct rcp_wait_src x = {.fd = -1};
		id = rcpi_waiter_add(&w, &x);
		assert_true(id > 0);
		w.busy = 1;
		assert_int_equal(rcpi_waiter_remove(&w, id), RCP_EBUSY);
		w.busy = 0;
		assert_int_equal(rcpi_waiter_remove(&w, id), 0);
		assert_int_equal(rcpi_waiter_remove(&w, id), RCP_EINVAL);
		assert_int_equal(w.nsrc, 1);
	}
	rcpi_waiter_fini(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_spin_then_yield),
	    cmocka_unit_test(t_solo_ns),
	    cmocka_unit_test(t_crowded_sleeps),
	    cmocka_unit_test(t_spin_never_sleeps),
	    cmocka_unit_test(t_sleep_mode),
	    cmocka_unit_test(t_arm_eagain),
	    cmocka_unit_test(t_readable),
	    cmocka_unit_test(t_fds_hook),
	    cmocka_unit_test(t_news_keeps_spinning),
	    cmocka_unit_test(t_errors),
	    cmocka_unit_test(t_every),
	    cmocka_unit_test(t_account_crowded),
	    cmocka_unit_test(t_short_turns_not_crowded),
	    cmocka_unit_test(t_slow_yield_no_task),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
