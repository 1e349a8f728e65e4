/*
 * perf/tcp_pingpong.h — kernel TCP ping-pong on loopback, the baseline the
 * RCP tools compare against, and the measurement helpers they share.
 *
 * Every tool that reports a round trip goes through pp_run(), so the
 * numbers mean the same thing everywhere:
 *   - warm-up first (not recorded): a fixed count, or by default until
 *     PP_WARM_NS have passed (at least PP_WARM_MIN, at most PP_WARM_MAX
 *     round trips);
 *   - then a fixed count, or by default round trips until their summed
 *     times reach the target time (at least PP_ITERS_MIN, at most
 *     PP_ITERS_MAX), so big sizes get fewer iterations and every size
 *     takes about the same time;
 *   - every round trip is timed on its own; the result is the median and
 *     the 99th percentile of those times, and the bandwidth of one
 *     direction: size / (median / 2), in MB/s (1 MB = 1e6 bytes).
 * Times are from CLOCK_MONOTONIC.
 */
#ifndef RCP_PERF_TCP_PINGPONG_H
#define RCP_PERF_TCP_PINGPONG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PP_WARM_NS   30000000ull /* default warm-up: 30 ms */
#define PP_WARM_MIN  5
#define PP_WARM_MAX  1000
#define PP_ITERS_MIN 20
#define PP_ITERS_MAX 1000000
#define PP_TARGET_NS 300000000ull /* default measured time per size: 0.3 s */

/* How a waiting side waits: the three policies of rcp_ep. */
enum pp_mode {
	PP_SPIN_THEN_SLEEP = 0, /* busy-poll for spin_ns, then block */
	PP_SPIN,                /* busy-poll, never block */
	PP_SLEEP,               /* block at once */
};

struct pp_result {
	long iters; /* round trips measured (warm-up excluded) */
	double median_us, p99_us;
	double bandwidth_MBps; /* size / (median / 2) */
};

/* One round trip number SEQ (0, 1, ... across warm-up and measurement).
 * Stores its own duration in *RTT_NS, so the callback may leave set-up
 * and checking out of the timed part.  Returns 0 or nonzero to stop. */
typedef int (*pp_bounce_fn)(void *ctx, long seq, uint64_t *rtt_ns);

/* Warms up, measures and summarises SIZE-byte round trips.
 * ITERS <= 0 and WARMUP < 0 select the automatic counts described above;
 * TARGET_NS 0 means PP_TARGET_NS.  Returns 0, or the first nonzero
 * value of BOUNCE (then RES is not filled), or -1 on allocation failure. */
int pp_run(pp_bounce_fn bounce, void *ctx, size_t size, long iters, long warmup, uint64_t target_ns,
           struct pp_result *res);

uint64_t pp_now_ns(void);
/* Pins the calling process to CPU (modulo the CPUs online); does nothing
 * for CPU < 0 or on a single-CPU machine. */
void pp_pin_cpu(int cpu);
const char *pp_mode_name(enum pp_mode mode);

struct tcp_pp_config {
	size_t size; /* bytes per message, each way */
	long iters;  /* <= 0: automatic (target_ns) */
	long warmup; /* < 0: automatic */
	uint64_t target_ns;
	enum pp_mode mode; /* spin: MSG_DONTWAIT busy-poll; sleep: blocking
			    * socket; spin-then-sleep: busy-poll, then poll() */
	int64_t spin_ns;   /* busy-poll budget of PP_SPIN_THEN_SLEEP */
	int peer_cpu;      /* pin the forked echo peer there; -1: no */
	long timeout_ms;   /* any single transfer taking longer fails */
};

/* Forks an echo peer connected over 127.0.0.1 (TCP_NODELAY on both ends)
 * and measures SIZE-byte round trips with pp_run().  The caller pins
 * itself.  Returns 0 and fills RES, or -1 after printing why to stderr. */
int tcp_pingpong(const struct tcp_pp_config *cfg, struct pp_result *res);

/* Across hosts (rcp-pingpong --listen/--connect tcp:HOST:PORT): the same
 * measurement between two processes that do not share a parent.  The
 * server listens at HOST:PORT and serves connections one after another;
 * each connection starts with the message size (8 bytes, big-endian),
 * then echoes messages of that size until the client closes it.  A size
 * of 0 ends the server.  READY, if not NULL, gets one line once the
 * socket listens.  Both return 0, or -1 after printing why to stderr. */
int tcp_pp_serve(const struct tcp_pp_config *cfg, const char *host, const char *port, FILE *ready);
/* One size against such a server (cfg->size > 0), or, with cfg->size 0,
 * tells it to exit. */
int tcp_pp_client(const struct tcp_pp_config *cfg, const char *host, const char *port,
                  struct pp_result *res);

#endif
