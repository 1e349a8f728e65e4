/*
 * perf/clock.h — the two helpers every ping-pong program of perf/ needs:
 * a monotonic clock in microseconds and the comparison that sorts round
 * trips for their median.
 */
#ifndef RCP_PERF_CLOCK_H
#define RCP_PERF_CLOCK_H

#include <time.h>

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

#endif
