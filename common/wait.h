/*
 * common/wait.h — the one spin-then-sleep policy (common/wait.c).
 *
 * A waiter holds wait sources (struct rcp_wait_src): the first is the
 * endpoint that owns it, the others were added (rcp_ep_wait_add).  Nothing
 * here knows what a source is; the endpoint, the nic's own wait, bulk, rpc
 * and relinked PVM all wait through rcpi_waiter_wait.
 */
#ifndef RCP_COMMON_WAIT_H
#define RCP_COMMON_WAIT_H

#include <stdint.h>

#include <rcp/wait.h>

enum { RCPI_WAIT_DEFAULT = 0, RCPI_WAIT_SPIN, RCPI_WAIT_SLEEP };

/* Spin alone this long after the last event before yielding each look:
 * the default of struct rcpi_waiter's solo_ns (a nic may ask for more,
 * rcp_nic_info.solo_ns). */
#define RCPI_SOLO_NS 5000u
/* A yield that kept us off the CPU this long ran another task's slice. */
#define RCPI_YIELD_SLOW_NS 100000u
/* How long the CPU counts as crowded after such a yield. */
#define RCPI_CROWDED_NS  20000000u
#define RCPI_WAIT_MAXFDS 64
/* How often a thread looks at its scheduler account (runq_crowded). */
#define RCPI_RUNQ_EVERY_NS 1000000u
/* Kept off the CPU this long on average each time it came back: by tasks
 * that compute, not by a peer's turn or the kernel's (common/wait.c). */
#define RCPI_STRETCH_NS 50000u

struct rcpi_waiter {
	int mode;        /* RCPI_WAIT_* */
	int64_t spin_ns; /* DEFAULT: spin this long past the last event */
	/* Spin alone this long past the last event (RCPI_SOLO_NS unless the
	 * owner sets it from its nic's rcp_nic_info.solo_ns). */
	uint64_t solo_ns;
	struct rcp_wait_src *src;
	int *ids; /* src[i]'s id (rcpi_waiter_add) */
	int nsrc, cap, next_id;
	/* Sleeps in source 0's own blocking call when it is alone (the nic's
	 * receive, which returns the frames it woke for): > 0 something came,
	 * 0 nothing, < 0 error.  NULL: ppoll on its fd. */
	int (*sleep_alone)(void *arg, int64_t timeout_ns);
	int busy; /* in rcpi_waiter_wait: sources may not be removed */
	struct rcp_wait_stats st;
	/* Tests only (NULL: the monotonic clock, sched_yield). */
	uint64_t (*now)(void);
	void (*yield)(void);
	/* The thread's run delay and arrivals: 0, or < 0 unknown (NULL:
	 * /proc/thread-self/schedstat). */
	int (*sched)(uint64_t *delay_ns, uint64_t *arrivals);
};

/* The process's policy, from RCP_WAIT (spin|sleep) and RCP_SPIN_NS (read
 * once): *MODE and *SPIN_NS. */
void rcpi_wait_policy(int *mode, int64_t *spin_ns);

/* Sets W up with the process's policy, or MODE (>= 0) and SPIN_NS (>= 0)
 * where given, and SRC0 (may be NULL) as its first source. */
int rcpi_waiter_init(struct rcpi_waiter *w, int mode, int64_t spin_ns,
                     const struct rcp_wait_src *src0);
void rcpi_waiter_fini(struct rcpi_waiter *w);
/* Adds SRC: its id (> 0), or RCP_ENOMEM / RCP_EINVAL. */
int rcpi_waiter_add(struct rcpi_waiter *w, const struct rcp_wait_src *src);
/* Removes the source ID: 0, RCP_EINVAL (no such id), RCP_EBUSY (a wait
 * on W is running: remove it after). */
int rcpi_waiter_remove(struct rcpi_waiter *w, int id);
/* Waits until DONE(ARG) > 0 (returns 0) or < 0 (returns that), a source
 * fails (its code), or TIMEOUT_NS passes (RCP_ETIMEDOUT; < 0: never).
 * DONE is asked before each look, so an instant wait costs one call. */
int rcpi_waiter_wait(struct rcpi_waiter *w, int (*done)(void *), void *arg, int64_t timeout_ns);

/* Whether the CPU is crowded, for the protocol (where RMA starts): a slow
 * yield within RCPI_CROWDED_NS, the last look at a waiting thread's
 * scheduler account while fresh, or more tasks runnable than CPUs
 * (/proc/loadavg, read at most once per RCPI_RUNQ_EVERY_NS per process). */
int rcpi_wait_crowded(uint64_t now);
/* Tests: forget that the CPU was crowded, and this thread's account. */
void rcpi_wait_uncrowd(void);

#endif
