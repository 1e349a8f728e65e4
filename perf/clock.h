/*
 * perf/clock.h — the helpers every ping-pong program of perf/ needs: a
 * monotonic clock (in microseconds as a double, or in nanoseconds), the
 * comparisons that sort round trips for their median, and pinning a
 * process to a CPU (the two ends of a spinning ping-pong each need one).
 */
#ifndef RCP_PERF_CLOCK_H
#define RCP_PERF_CLOCK_H

#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static inline double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* qsort comparison of doubles, ascending. */
static inline int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* qsort comparison of uint64_t, ascending. */
static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Pins this process to CPU (modulo the CPUs online); nothing on one CPU. */
static inline void pin_cpu(int cpu)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu % n, &set);
	sched_setaffinity(0, sizeof set, &set);
}

#endif
