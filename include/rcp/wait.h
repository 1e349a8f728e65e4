/*
 * include/rcp/wait.h — what a wait watches besides its endpoint.
 *
 * Every wait of the library (rcp_wait, rcp_wait_any, rcp_bulk_wait,
 * rcp_rpc_wait/loop, relinked PVM's blocking calls, rcp_nic_wait) runs one
 * spin-then-sleep policy (common/wait.c, docs/waiting.md).  A
 * layer or a program that has more to watch than the endpoint's frames
 * (the pvmd socket, another endpoint, a user's fd, a queue of its own)
 * adds a wait source to the endpoint (rcp_ep_wait_add, in rcp.h): every
 * wait on the endpoint then looks at it while it spins and sleeps on its
 * fds too, so a message by any path ends the sleep.
 */
#ifndef RCP_WAIT_H
#define RCP_WAIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A wait source.  Every member is optional (NULL / -1). */
struct rcp_wait_src {
	/* Readable: a sleeping wait wakes.  -1: none. */
	int fd;
	/* One look, never blocking: > 0 something happened (the wait keeps
	 * spinning a while: more may follow), 0 nothing, < 0 an error that
	 * ends the wait with that code. */
	int (*progress)(void *arg);
	/* Before the wait sleeps: 0 it may sleep, and *timeout_ns (ns from
	 * now, -1 forever) may be lowered to wake earlier; RCP_EAGAIN work is
	 * waiting (look again, do not sleep); another negative code ends the
	 * wait with it. */
	int (*arm)(void *arg, int64_t *timeout_ns);
	/* More fds to sleep on, a set that changes between sleeps (libpvm3's
	 * sockets): writes up to MAX into FDS, returns how many. */
	int (*fds)(void *arg, int *fds, int max);
	/* After a sleep that one of this source's fds ended. */
	void (*readable)(void *arg);
	void *arg;
	/* progress is called every EVERY-th look only (0 or 1: every look):
	 * for a source whose look costs a system call (another endpoint on
	 * udp) while the wait spins on a cheap one.  Its fd still wakes a
	 * sleep at once. */
	unsigned every;
};

/* What the waits of an endpoint did (rcp_ep_wait_stats): counted, so
 * tests check the policy without timing it. */
struct rcp_wait_stats {
	unsigned long long waits;   /* waits that did not end at the first look */
	unsigned long long looks;   /* looks (progress rounds) while waiting */
	unsigned long long yields;  /* sched_yield calls */
	unsigned long long sleeps;  /* sleeps on the fds */
	unsigned long long max_run; /* most looks in a row past the time alone
	                               (5 us, or the nic's rcp_nic_info.solo_ns)
	                               without giving the CPU away */
	unsigned long long crowded; /* yields that kept us off the CPU long: the
	                               CPU is shared, waits sleep rather than yield */
};

#ifdef __cplusplus
}
#endif
#endif
