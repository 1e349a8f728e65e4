/*
 * perf/tcp_pingpong.c — the kernel TCP baseline and the shared measurement
 * loop (see tcp_pingpong.h for what the numbers mean).
 *
 * The TCP ping-pong is the ordinary way two processes on one host would
 * talk without RCP: a loopback connection with TCP_NODELAY (so small
 * messages are not held back by Nagle), one message of SIZE bytes each
 * way per round trip, and the echo side answering only once the whole
 * message is in.  Waiting follows the caller's mode so a comparison with
 * a spinning or sleeping RCP endpoint is like for like:
 *   spin             non-blocking socket, recv/send(MSG_DONTWAIT) retried
 *                    in a busy loop;
 *   sleep            blocking socket (the kernel puts the caller to sleep
 *                    and the peer's send wakes it: one cross-CPU wake-up
 *                    per direction, ~25 us each on this VM kind);
 *   spin-then-sleep  busy-poll for spin_ns, then poll() — what rcp_ep does
 *                    by default.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf/tcp_pingpong.h"

/* ---- shared measurement helpers -------------------------------------- */

uint64_t pp_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void pp_pin_cpu(int cpu)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (cpu < 0 || n < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu % n, &set);
	sched_setaffinity(0, sizeof set, &set);
}

const char *pp_mode_name(enum pp_mode mode)
{
	switch (mode) {
	case PP_SPIN: return "spin";
	case PP_SLEEP: return "sleep";
	default: return "spin-then-sleep";
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int pp_run(pp_bounce_fn bounce, void *ctx, size_t size, long iters, long warmup, uint64_t target_ns,
           struct pp_result *res)
{
	uint64_t start, *rtt = NULL, spent = 0, junk;
	long seq = 0, n = 0, cap;
	int rc;

	if (!target_ns)
		target_ns = PP_TARGET_NS;
	/* Warm-up: page faults, cache and branch warm-up, the protocol's RTT
	 * estimate and congestion window all settle here, unrecorded. */
	start = pp_now_ns();
	for (; warmup >= 0 ? seq < warmup : seq < PP_WARM_MAX; seq++) {
		if (warmup < 0 && seq >= PP_WARM_MIN && pp_now_ns() - start >= PP_WARM_NS)
			break;
		rc = bounce(ctx, seq, &junk);
		if (rc)
			return rc;
	}
	/* Measurement.  The automatic count stops on the summed round trips,
	 * not on wall time, so the time spent checking data between round
	 * trips (--verify) does not shrink the sample. */
	cap = iters > 0 ? iters : 4096;
	rtt = malloc((size_t)cap * sizeof *rtt);
	if (!rtt)
		return -1;
	for (;; n++, seq++) {
		if (iters > 0 ? n >= iters
		              : n >= PP_ITERS_MAX || (n >= PP_ITERS_MIN && spent >= target_ns))
			break;
		if (n == cap) {
			uint64_t *nr = realloc(rtt, (size_t)cap * 2 * sizeof *rtt);
			if (!nr) {
				free(rtt);
				return -1;
			}
			rtt = nr;
			cap *= 2;
		}
		rc = bounce(ctx, seq, &rtt[n]);
		if (rc) {
			free(rtt);
			return rc;
		}
		spent += rtt[n];
	}
	qsort(rtt, (size_t)n, sizeof *rtt, cmp_u64);
	res->iters = n;
	res->median_us = rtt[n / 2] / 1000.0;
	res->p99_us = rtt[(long)((n - 1) * 0.99)] / 1000.0;
	/* One direction moves SIZE bytes in half a round trip; bytes per us
	 * is MB/s with MB = 1e6 bytes. */
	res->bandwidth_MBps = res->median_us > 0 ? (double)size / (res->median_us / 2) : 0;
	free(rtt);
	return 0;
}

/* ---- the TCP ping-pong -------------------------------------------------- */

struct tcp_side {
	int fd;
	unsigned char *buf;
	size_t size;
	enum pp_mode mode;
	int64_t spin_ns;
	long timeout_ms;
};

/* Moves the whole message one way.  Returns 0, 1 on end of stream before
 * the first byte (the other side is done), or -1 with errno set. */
static int xfer(const struct tcp_side *s, int out)
{
	size_t done = 0;
	uint64_t deadline = 0, spin_end = 0;
	int flags = (s->mode == PP_SLEEP ? 0 : MSG_DONTWAIT) | (out ? MSG_NOSIGNAL : 0);

	while (done < s->size) {
		ssize_t n = out ? send(s->fd, s->buf + done, s->size - done, flags)
		                : recv(s->fd, s->buf + done, s->size - done, flags);
		uint64_t now;
		struct pollfd pfd;

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0) {
			if (done == 0)
				return 1;
			errno = EPIPE;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		/* A blocking socket says EAGAIN only when SO_RCVTIMEO/SNDTIMEO
		 * ran out. */
		if (s->mode == PP_SLEEP) {
			errno = ETIMEDOUT;
			return -1;
		}
		now = pp_now_ns();
		if (!deadline) {
			deadline = now + (uint64_t)s->timeout_ms * 1000000ull;
			spin_end = now + (uint64_t)s->spin_ns;
		}
		if (now > deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (s->mode == PP_SPIN || now < spin_end)
			continue;
		pfd.fd = s->fd;
		pfd.events = out ? POLLOUT : POLLIN;
		if (poll(&pfd, 1, (int)((deadline - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return -1;
	}
	return 0;
}

static int setup_socket(int fd, const struct tcp_pp_config *cfg)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
		return -1;
	if (cfg->mode == PP_SLEEP) {
		struct timeval tv = {cfg->timeout_ms / 1000, (cfg->timeout_ms % 1000) * 1000};
		if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ||
		    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv))
			return -1;
	}
	return 0;
}

static unsigned char *alloc_buf(size_t size)
{
	void *p;
	size_t len = (size + 4095) & ~(size_t)4095;

	if (posix_memalign(&p, 4096, len ? len : 4096))
		return NULL;
	/* Touch every page now so no page fault lands in a timed round trip. */
	memset(p, 0x5a, len ? len : 4096);
	return p;
}

/* The forked peer: echo messages until the parent closes the connection. */
static int echo_peer(const struct tcp_pp_config *cfg, const struct sockaddr_in *sa)
{
	struct tcp_side s = {-1, NULL, cfg->size, cfg->mode, cfg->spin_ns, cfg->timeout_ms};
	int rc;

	pp_pin_cpu(cfg->peer_cpu);
	s.buf = alloc_buf(cfg->size);
	s.fd = socket(AF_INET, SOCK_STREAM | (cfg->mode == PP_SLEEP ? 0 : SOCK_NONBLOCK), 0);
	if (!s.buf || s.fd < 0)
		return 1;
	/* connect() on a non-blocking socket may report EINPROGRESS even on
	 * loopback; the first transfer then simply waits for it. */
	if (connect(s.fd, (const struct sockaddr *)sa, sizeof *sa) && errno != EINPROGRESS) {
		perror("rcp tcp ping-pong peer: connect");
		return 1;
	}
	if (setup_socket(s.fd, cfg))
		return 1;
	for (;;) {
		rc = xfer(&s, 0);
		if (rc == 1)
			return 0;
		if (rc || xfer(&s, 1)) {
			perror("rcp tcp ping-pong peer");
			return 1;
		}
	}
}

struct tcp_bounce {
	struct tcp_side s;
	const char *err;
};

static int tcp_bounce(void *ctx, long seq, uint64_t *rtt_ns)
{
	struct tcp_bounce *b = ctx;
	uint64_t t0 = pp_now_ns();
	int rc;

	(void)seq;
	rc = xfer(&b->s, 1);
	if (rc) {
		b->err = "send";
		return -1;
	}
	rc = xfer(&b->s, 0);
	if (rc) {
		if (rc == 1)
			errno = EPIPE; /* the peer left mid-run */
		b->err = "recv";
		return -1;
	}
	*rtt_ns = pp_now_ns() - t0;
	return 0;
}

int tcp_pingpong(const struct tcp_pp_config *cfg, struct pp_result *res)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof sa;
	struct tcp_bounce b = {{-1, NULL, cfg->size, cfg->mode, cfg->spin_ns, cfg->timeout_ms},
	                       NULL};
	struct pollfd pfd;
	int lfd, rc = -1, st;
	pid_t child;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) || listen(lfd, 1)) {
		perror("rcp tcp ping-pong: listen");
		if (lfd >= 0)
			close(lfd);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	child = fork();
	if (child < 0) {
		perror("rcp tcp ping-pong: fork");
		close(lfd);
		return -1;
	}
	if (child == 0) {
		/* Never outlive the measuring process (e.g. killed by ^C). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(lfd);
		_exit(echo_peer(cfg, &sa));
	}
	pfd.fd = lfd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, (int)cfg->timeout_ms) != 1) {
		fprintf(stderr, "rcp tcp ping-pong: the echo peer never connected\n");
		goto out;
	}
	b.s.fd = accept4(lfd, NULL, NULL, cfg->mode == PP_SLEEP ? 0 : SOCK_NONBLOCK);
	b.s.buf = alloc_buf(cfg->size);
	if (b.s.fd < 0 || !b.s.buf || setup_socket(b.s.fd, cfg)) {
		perror("rcp tcp ping-pong: accept");
		goto out;
	}
	rc = pp_run(tcp_bounce, &b, cfg->size, cfg->iters, cfg->warmup, cfg->target_ns, res);
	if (rc) {
		if (b.err)
			fprintf(stderr, "rcp tcp ping-pong: %zu B: %s: %s\n", cfg->size, b.err,
			        strerror(errno));
		else
			fprintf(stderr, "rcp tcp ping-pong: out of memory\n");
		rc = -1;
	}
out:
	close(lfd);
	if (b.s.fd >= 0)
		close(b.s.fd); /* end of stream: the peer exits 0 */
	free(b.s.buf);
	if (rc)
		kill(child, SIGKILL);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st))) {
		fprintf(stderr, "rcp tcp ping-pong: the echo peer failed\n");
		rc = -1;
	}
	return rc;
}

/* ---- across hosts ------------------------------------------------------- */

/* The forked pair above shares a parent; across hosts the two ends are
 * started separately, so the size travels in a header at the start of
 * each connection, one connection per size (a fresh congestion window
 * each time, warmed up by pp_run like the loopback one). */

static struct addrinfo *resolve(const char *host, const char *port, int passive)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
	struct addrinfo *ai = NULL;
	int rc = getaddrinfo(host && *host ? host : NULL, port, &hints, &ai);

	if (rc) {
		fprintf(stderr, "rcp tcp ping-pong: %s port %s: %s\n", host && *host ? host : "*",
		        port, gai_strerror(rc));
		return NULL;
	}
	return ai;
}

/* SOCK: the connected socket, made non-blocking unless the mode sleeps. */
static int ready_socket(int fd, const struct tcp_pp_config *cfg)
{
	if (setup_socket(fd, cfg))
		return -1;
	if (cfg->mode != PP_SLEEP && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		return -1;
	return 0;
}

int tcp_pp_serve(const struct tcp_pp_config *cfg, const char *host, const char *port, FILE *ready)
{
	struct addrinfo *ai = resolve(host, port, 1);
	int lfd, one = 1, rc = -1;

	if (!ai)
		return -1;
	lfd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, 4)) {
		perror("rcp tcp ping-pong: listen");
		freeaddrinfo(ai);
		if (lfd >= 0)
			close(lfd);
		return -1;
	}
	freeaddrinfo(ai);
	pp_pin_cpu(cfg->peer_cpu);
	if (ready) {
		fprintf(ready, "rcp tcp ping-pong: serving tcp:%s:%s (wait: %s)\n",
		        host && *host ? host : "*", port, pp_mode_name(cfg->mode));
		fflush(ready);
	}
	for (;;) {
		struct tcp_side s = {-1, NULL, 0, cfg->mode, cfg->spin_ns, cfg->timeout_ms};
		uint64_t be;
		int r;

		s.fd = accept(lfd, NULL, NULL);
		if (s.fd < 0) {
			if (errno == EINTR)
				continue;
			perror("rcp tcp ping-pong: accept");
			break;
		}
		if (recv(s.fd, &be, sizeof be, MSG_WAITALL) != (ssize_t)sizeof be) {
			fprintf(stderr, "rcp tcp ping-pong: a connection without a size\n");
			close(s.fd);
			break;
		}
		s.size = (size_t)be64toh(be);
		if (!s.size) {
			close(s.fd);
			rc = 0; /* the client is done */
			break;
		}
		s.buf = alloc_buf(s.size);
		r = !s.buf || ready_socket(s.fd, cfg);
		while (!r) {
			r = xfer(&s, 0);
			if (r == 1) { /* end of this size */
				r = 0;
				break;
			}
			if (!r)
				r = xfer(&s, 1);
		}
		if (r)
			fprintf(stderr, "rcp tcp ping-pong: serving %zu B: %s\n", s.size,
			        strerror(errno));
		close(s.fd);
		free(s.buf);
		if (r)
			break;
	}
	close(lfd);
	return rc;
}

int tcp_pp_client(const struct tcp_pp_config *cfg, const char *host, const char *port,
                  struct pp_result *res)
{
	struct tcp_bounce b = {{-1, NULL, cfg->size, cfg->mode, cfg->spin_ns, cfg->timeout_ms},
	                       NULL};
	struct addrinfo *ai = resolve(host, port, 0);
	uint64_t be = htobe64((uint64_t)cfg->size);
	int rc = -1;

	if (!ai)
		return -1;
	b.s.fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (b.s.fd < 0 || connect(b.s.fd, ai->ai_addr, ai->ai_addrlen)) {
		perror("rcp tcp ping-pong: connect");
		goto out;
	}
	if (send(b.s.fd, &be, sizeof be, MSG_NOSIGNAL) != (ssize_t)sizeof be) {
		perror("rcp tcp ping-pong: sending the size");
		goto out;
	}
	if (!cfg->size) {
		rc = 0;
		goto out;
	}
	b.s.buf = alloc_buf(cfg->size);
	if (!b.s.buf || ready_socket(b.s.fd, cfg)) {
		perror("rcp tcp ping-pong: socket");
		goto out;
	}
	rc = pp_run(tcp_bounce, &b, cfg->size, cfg->iters, cfg->warmup, cfg->target_ns, res);
	if (rc) {
		fprintf(stderr, "rcp tcp ping-pong: %zu B: %s: %s\n", cfg->size,
		        b.err ? b.err : "out of memory", b.err ? strerror(errno) : "");
		rc = -1;
	}
out:
	freeaddrinfo(ai);
	if (b.s.fd >= 0)
		close(b.s.fd);
	free(b.s.buf);
	return rc;
}
