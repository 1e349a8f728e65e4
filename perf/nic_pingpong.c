/*
 * rcp-nic-pingpong — raw frame round trip over nic backends, with the
 * kernel UDP socket ping-pong measured in the same run.
 *
 * It forks the peer itself: parent and child each open an endpoint, swap
 * addresses over a pipe, then bounce one frame of SIZE bytes ITERS times.
 * Two modes:
 *   spin   both sides poll without sleeping (needs one CPU each);
 *   sleep  both sides sleep until the frame comes (nic: rcp_nic_recv_wait,
 *          which for udp is a blocking receive; kernel UDP: blocking recv),
 *          paying the wake-up each way.
 * Every round trip is timed; the median and p99 are printed.  Rows can be
 * printed as CSV (--csv): transport,mode,size,iters,rtt_median_us,rtt_p99_us
 *
 * The frame is checked on every bounce (length and a sequence number), so
 * a backend that loses or mangles frames makes the tool fail instead of
 * printing a flattering number.
 *
 * Transport "memory" (spin only) is the floor under every shared-memory
 * path: the two processes copy SIZE bytes into a shared buffer, publish a
 * sequence word with release semantics, and the other side polls it and
 * copies the bytes out.  No nic, no protocol, no ring management: what the
 * cache-line transfers between the two CPUs cost by themselves.
 *
 * --cluster NAME runs between hosts h1 and h2 of an rcp-cluster
 * (tools/rcp-cluster) instead of on one host: after the fork the parent
 * enters h1's network namespace and the child h2's, each before it opens
 * its endpoint (xdp:eth0, udp:198.18.0.N:7100), so the frame crosses the
 * cluster's link.  The address swap still goes over the pipe: both sides
 * come from one process.  Only the nic transports (xdp, udp, shm) mean
 * anything there; the kernel-udp and memory baselines are refused.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rcp/nic.h>

#include "perf/clock.h"
#include "perf/cluster_ns.h"

struct opts {
	const char *transports;
	const char *modes;
	size_t size;
	long iters, warmup;
	int csv, pin, faults_ok;
	long timeout_ms;
	const char *cluster; /* --cluster NAME, or NULL: one host */
};

static void report(const struct opts *o, const char *transport, const char *mode, uint64_t *rtt,
                   long n)
{
	double med, p99;
	qsort(rtt, (size_t)n, sizeof *rtt, cmp_u64);
	med = rtt[n / 2] / 1000.0;
	p99 = rtt[(long)((n - 1) * 0.99)] / 1000.0;
	if (o->csv)
		printf("%s,%s,%zu,%ld,%.3f,%.3f\n", transport, mode, o->size, n, med, p99);
	else
		printf("%-17s %-6s %8zu B  median %9.3f us  p99 %9.3f us  (%ld iters)\n", transport,
		       mode, o->size, med, p99, n);
	fflush(stdout);
}

/* ---- nic ping-pong ----------------------------------------------------- */

/* Waits for one frame; returns its length or a negative code.  The frame's
 * first 8 bytes carry the sequence number, checked against EXPECT. */
static int nic_await(rcp_nic *nic, int sleep_mode, uint64_t expect, uint64_t deadline)
{
	struct rcp_nic_frame f;
	int n, len;
	uint64_t seq = 0;

	for (unsigned spins = 0;; spins++) {
		n = sleep_mode ? rcp_nic_recv_wait(nic, &f, 1, 100000000)
		               : rcp_nic_recv(nic, &f, 1);
		if (n < 0)
			return n;
		if (n == 1)
			break;
		if ((sleep_mode || (spins & 1023) == 0) && now_ns() > deadline)
			return RCP_ETIMEDOUT;
	}
	len = (int)f.len;
	if (f.len >= 8)
		memcpy(&seq, f.data, 8);
	rcp_nic_release(nic, &f, 1);
	if (len >= 8 && seq != expect)
		return RCP_EPROTO;
	return len;
}

static int nic_side(const struct opts *o, const char *transport, int sleep_mode, int is_parent,
                    int rfd, int wfd, uint64_t *rtt)
{
	char addr[RCP_NIC_ADDRSTR_MAX], peer_addr[RCP_NIC_ADDRSTR_MAX];
	rcp_nic *nic = NULL;
	int peer, rc;
	unsigned char *buf;
	size_t sz = o->size < 8 ? 8 : o->size;
	uint64_t deadline;
	long total = o->iters + o->warmup;

	if (o->cluster && rcpi_cluster_enter(o->cluster, is_parent ? 1 : 2)) {
		fprintf(stderr, "rcp-nic-pingpong: cannot enter host h%d of cluster %s\n",
		        is_parent ? 1 : 2, o->cluster);
		return RCP_EINVAL;
	}
	if (!strcmp(transport, "shm"))
		snprintf(addr, sizeof addr, "shm:pp-%d-%d", (int)getpid(), is_parent);
	else if (o->cluster && !strcmp(transport, "xdp"))
		snprintf(addr, sizeof addr, "xdp:eth0");
	else if (o->cluster && !strcmp(transport, "udp"))
		snprintf(addr, sizeof addr, "udp:198.18.0.%d:7100", is_parent ? 1 : 2);
	else
		snprintf(addr, sizeof addr, "%s:", transport);
	{
		/* Sleep mode sleeps in every wait: tell the nic, as an
		 * RCP_EP_SLEEP endpoint does (udp then has no lane). */
		struct rcp_nic_config cfg = {.flags = sleep_mode ? RCP_NIC_SLEEPER : 0u};
		rc = rcp_nic_open(addr, &cfg, &nic);
	}
	if (rc) {
		fprintf(stderr, "rcp-nic-pingpong: open %s: %s\n", addr, rcp_strerror(rc));
		return rc;
	}
	rcp_nic_addr_str(nic, addr, sizeof addr);
	/* Swap addresses over the pipes (NUL-terminated, fixed size). */
	if (write(wfd, addr, sizeof addr) != (ssize_t)sizeof addr ||
	    read(rfd, peer_addr, sizeof peer_addr) != (ssize_t)sizeof peer_addr) {
		rcp_nic_close(nic);
		return RCP_ESYS;
	}
	rc = rcp_nic_peer_add_str(nic, peer_addr, &peer);
	if (rc) {
		fprintf(stderr, "rcp-nic-pingpong: peer %s: %s\n", peer_addr, rcp_strerror(rc));
		rcp_nic_close(nic);
		return rc;
	}
	/* Both sides have the peer: a second swap makes sure neither sends
	 * before the other can receive (shm rings exist once peer_add ran). */
	if (write(wfd, "k", 1) != 1 || read(rfd, addr, 1) != 1) {
		rcp_nic_close(nic);
		return RCP_ESYS;
	}
	buf = calloc(1, sz);
	deadline = now_ns() + (uint64_t)o->timeout_ms * 1000000ull;
	for (long i = 0; i < total; i++) {
		struct iovec iov = {buf, o->size};
		uint64_t seq = (uint64_t)i, t0 = now_ns();
		if (o->size >= 8)
			memcpy(buf, &seq, 8);
		if (is_parent) {
			while ((rc = rcp_nic_send(nic, peer, &iov, 1, 0)) == RCP_EAGAIN)
				;
			if (rc)
				break;
			rc = nic_await(nic, sleep_mode, seq, deadline);
		} else {
			rc = nic_await(nic, sleep_mode, seq, deadline);
			if (rc < 0)
				break;
			while ((rc = rcp_nic_send(nic, peer, &iov, 1, 0)) == RCP_EAGAIN)
				;
		}
		if (rc < 0)
			break;
		if (is_parent && rc != (int)o->size) {
			rc = RCP_EPROTO;
			break;
		}
		rc = 0;
		if (is_parent && i >= o->warmup)
			rtt[i - o->warmup] = now_ns() - t0;
	}
	if (rc)
		fprintf(stderr, "rcp-nic-pingpong: %s %s: %s\n", transport,
		        is_parent ? "parent" : "child", rcp_strerror(rc));
	free(buf);
	/* Make sure the peer is done with our endpoint before we close it. */
	if (write(wfd, "d", 1) != 1 || read(rfd, addr, 1) != 1)
		rc = rc ? rc : RCP_ESYS;
	rcp_nic_close(nic);
	return rc;
}

/* ---- kernel UDP socket ping-pong (the baseline) -------------------------- */

/* CONNECTED: connect() to the peer and use send/recv, the fastest a kernel
 * UDP socket goes.  Unconnected: sendto/recvfrom, what a socket that must
 * accept unknown senders (like the udp backend) has to do. */
static int udp_side(const struct opts *o, int sleep_mode, int connected, int is_parent, int rfd,
                    int wfd, uint64_t *rtt)
{
	struct sockaddr_in me = {.sin_family = AF_INET}, peer;
	socklen_t sl = sizeof me;
	size_t sz = o->size < 8 ? 8 : o->size;
	unsigned char *buf = calloc(1, sz), *rbuf = calloc(1, sz + 1);
	long total = o->iters + o->warmup;
	int s = socket(AF_INET, SOCK_DGRAM, 0), rc = 0;
	uint64_t deadline = now_ns() + (uint64_t)o->timeout_ms * 1000000ull;

	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&me, sizeof me) ||
	    getsockname(s, (struct sockaddr *)&me, &sl) ||
	    write(wfd, &me, sizeof me) != (ssize_t)sizeof me ||
	    read(rfd, &peer, sizeof peer) != (ssize_t)sizeof peer ||
	    (connected && connect(s, (struct sockaddr *)&peer, sizeof peer))) {
		rc = -1;
		goto out;
	}
	for (long i = 0; i < total && !rc; i++) {
		uint64_t t0 = now_ns();
		for (int turn = 0; turn < 2; turn++) {
			if ((turn == 0) == (is_parent != 0)) {
				if (sendto(s, buf, o->size, 0,
				           connected ? NULL : (struct sockaddr *)&peer,
				           connected ? 0 : sizeof peer) != (ssize_t)o->size)
					rc = -1;
				continue;
			}
			for (;;) {
				struct sockaddr_in from;
				socklen_t fl = sizeof from;
				ssize_t n =
				    connected
				        ? recv(s, rbuf, sz + 1, sleep_mode ? 0 : MSG_DONTWAIT)
				        : recvfrom(s, rbuf, sz + 1, sleep_mode ? 0 : MSG_DONTWAIT,
				                   (struct sockaddr *)&from, &fl);
				if (n == (ssize_t)o->size)
					break;
				if (n >= 0 || errno != EAGAIN || now_ns() > deadline) {
					rc = -1;
					break;
				}
			}
		}
		if (is_parent && i >= o->warmup)
			rtt[i - o->warmup] = now_ns() - t0;
	}
out:
	if (rc)
		perror("rcp-nic-pingpong: kernel udp");
	if (s >= 0)
		close(s);
	free(buf);
	free(rbuf);
	return rc;
}

/* ---- bare shared memory (the floor) ------------------------------------- */

/* One direction: the sequence word and the payload right after it (8 B
 * travel in one line, as in a ring cell), at a 128-byte boundary so the
 * two directions never share a line pair. */
struct mem_dir {
	_Atomic uint64_t seq;
	unsigned char data[]; /* o->size bytes; the whole rounded up to 128 */
};

static size_t mem_dir_bytes(size_t size)
{
	return (sizeof(struct mem_dir) + size + 127) & ~(size_t)127;
}

static int mem_side(const struct opts *o, int is_parent, unsigned char *shared, uint64_t *rtt)
{
	size_t db = mem_dir_bytes(o->size);
	struct mem_dir *tx = (struct mem_dir *)(shared + (is_parent ? 0 : db));
	struct mem_dir *rx = (struct mem_dir *)(shared + (is_parent ? db : 0));
	unsigned char *sbuf = calloc(1, o->size + 8), *rbuf = calloc(1, o->size + 8);
	long total = o->iters + o->warmup;
	uint64_t deadline = now_ns() + (uint64_t)o->timeout_ms * 1000000ull;
	int rc = 0;

	if (!sbuf || !rbuf)
		rc = -1;
	else
		memset(sbuf, 0x5a, o->size);
	for (long i = 0; i < total && !rc; i++) {
		uint64_t t0 = now_ns();
		for (int turn = 0; turn < 2 && !rc; turn++) {
			uint64_t want = (uint64_t)(2 * i + turn + 1);
			if ((turn == 0) == (is_parent != 0)) {
				memcpy(tx->data, sbuf, o->size);
				atomic_store_explicit(&tx->seq, want, memory_order_release);
				continue;
			}
			for (unsigned spins = 0;
			     atomic_load_explicit(&rx->seq, memory_order_acquire) != want; spins++)
				if ((spins & 1023) == 1023 && now_ns() > deadline)
					rc = -1;
			memcpy(rbuf, rx->data, o->size);
			if (o->size && rbuf[o->size - 1] != 0x5a)
				rc = -1;
		}
		if (is_parent && i >= o->warmup)
			rtt[i - o->warmup] = now_ns() - t0;
	}
	if (rc)
		fprintf(stderr, "rcp-nic-pingpong: memory: timed out or bad bytes\n");
	free(sbuf);
	free(rbuf);
	return rc;
}

/* Runs one (transport, mode) pair with a forked peer. */
static int run_pair(const struct opts *o, const char *transport, const char *mode)
{
	int p2c[2], c2p[2], sleep_mode = !strcmp(mode, "sleep"), rc, st;
	uint64_t *rtt = calloc((size_t)o->iters, sizeof *rtt);
	int kernel = !strncmp(transport, "kernel-udp", 10);
	int connected = !strcmp(transport, "kernel-udp");
	int memory = !strcmp(transport, "memory");
	unsigned char *shared = NULL;
	pid_t child;

	if (o->cluster && (kernel || memory)) {
		fprintf(stderr, "rcp-nic-pingpong: %s does not run across --cluster hosts\n",
		        transport);
		free(rtt);
		return 1;
	}
	if (memory && sleep_mode) {
		if (!o->csv)
			printf("%-17s %-6s (spin only: there is nothing to sleep on)\n", transport,
			       mode);
		free(rtt);
		return 0;
	}
	if (memory) {
		shared = mmap(NULL, 2 * mem_dir_bytes(o->size), PROT_READ | PROT_WRITE,
		              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (shared == MAP_FAILED)
			return 1;
	}
	if (!rtt || pipe(p2c) || pipe(c2p))
		return 1;
	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(p2c[1]);
		close(c2p[0]);
		if (o->pin)
			pin_cpu(1);
		rc = memory   ? mem_side(o, 0, shared, NULL)
		     : kernel ? udp_side(o, sleep_mode, connected, 0, p2c[0], c2p[1], NULL)
		              : nic_side(o, transport, sleep_mode, 0, p2c[0], c2p[1], NULL);
		_exit(rc ? 1 : 0);
	}
	close(p2c[0]);
	close(c2p[1]);
	if (o->pin)
		pin_cpu(0);
	rc = memory   ? mem_side(o, 1, shared, rtt)
	     : kernel ? udp_side(o, sleep_mode, connected, 1, c2p[0], p2c[1], rtt)
	              : nic_side(o, transport, sleep_mode, 1, c2p[0], p2c[1], rtt);
	close(c2p[0]);
	close(p2c[1]);
	if (rc)
		kill(child, SIGKILL);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st)))
		rc = 1;
	if (!rc)
		report(o, transport, mode, rtt, o->iters);
	if (shared)
		munmap(shared, 2 * mem_dir_bytes(o->size));
	free(rtt);
	return rc ? 1 : 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: rcp-nic-pingpong [--transport shm,udp,kernel-udp,kernel-udp-unconn,memory]\n"
	       "                        [--mode spin,sleep]\n"
	       "                        [--size BYTES] [--iters N] [--warmup N] [--csv]\n"
	       "                        [--no-pin] [--timeout-ms MS] [--cluster NAME]\n"
	       "Bounces one frame between this process and a forked peer and prints the\n"
	       "round trip (median, p99).  kernel-udp is a plain UDP socket ping-pong on\n"
	       "loopback (connected: send/recv), kernel-udp-unconn the same with\n"
	       "sendto/recvfrom, as a socket accepting unknown senders must do.\n"
	       "memory (spin only) copies the bytes through plain shared memory and\n"
	       "polls a sequence word: the floor under any shared-memory transport.\n"
	       "--cluster NAME: between hosts h1 (this process) and h2 (the peer) of\n"
	       "rcp-cluster NAME, over their eth0 (xdp, udp, shm only).\n"
	       "Defaults: all transports, both modes, 8 B,\n"
	       "100000 iterations (10000 in sleep mode), 10000 warm-up.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"transport", required_argument, 0, 't'},
	    {"transports", required_argument, 0, 't'},
	    {"mode", required_argument, 0, 'm'},
	    {"modes", required_argument, 0, 'm'},
	    {"size", required_argument, 0, 's'},
	    {"iters", required_argument, 0, 'n'},
	    {"warmup", required_argument, 0, 'w'},
	    {"csv", no_argument, 0, 'c'},
	    {"no-pin", no_argument, 0, 'P'},
	    {"timeout-ms", required_argument, 0, 'T'},
	    {"cluster", required_argument, 0, 'C'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	struct opts o = {
	    "shm,udp,kernel-udp,kernel-udp-unconn", "spin,sleep", 8, -1, -1, 0, 1, 0, 60000, NULL};
	char *tlist, *mlist, *t, *m, *s1, *s2;
	int c, fail = 0;

	while ((c = getopt_long(argc, argv, "t:m:s:n:w:cPT:C:h", lo, NULL)) != -1) {
		switch (c) {
		case 't': o.transports = optarg; break;
		case 'm': o.modes = optarg; break;
		case 's': o.size = strtoul(optarg, NULL, 0); break;
		case 'n': o.iters = strtol(optarg, NULL, 0); break;
		case 'w': o.warmup = strtol(optarg, NULL, 0); break;
		case 'c': o.csv = 1; break;
		case 'P': o.pin = 0; break;
		case 'T': o.timeout_ms = strtol(optarg, NULL, 0); break;
		case 'C': o.cluster = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (o.csv)
		printf("transport,mode,size,iters,rtt_median_us,rtt_p99_us\n");
	mlist = strdup(o.modes);
	for (m = strtok_r(mlist, ",", &s1); m; m = strtok_r(NULL, ",", &s1)) {
		struct opts om = o;
		if (strcmp(m, "spin") && strcmp(m, "sleep")) {
			fprintf(stderr, "rcp-nic-pingpong: unknown mode %s\n", m);
			return 2;
		}
		if (om.iters <= 0)
			om.iters = !strcmp(m, "sleep") ? 10000 : 100000;
		if (om.warmup < 0)
			om.warmup = !strcmp(m, "sleep") ? 1000 : 10000;
		tlist = strdup(o.transports);
		for (t = strtok_r(tlist, ",", &s2); t; t = strtok_r(NULL, ",", &s2))
			fail |= run_pair(&om, t, m);
		free(tlist);
	}
	free(mlist);
	return fail;
}
