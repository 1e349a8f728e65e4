/*
 * rcp-xdp-pingpong — a bare frame's round trip over the xdp nic backend,
 * the udp nic backend and a plain kernel UDP socket, on one veth pair
 * between two network namespaces the tool makes (and removes) itself.
 *
 * Both ends spin (non-blocking receives in a loop); the parent, in
 * namespace A, times ITERS round trips of one SIZE-byte frame after WARMUP
 * unmeasured ones and prints the median and 99th percentile.  Every
 * transport runs on the same pair in the same run, so the three figures
 * compare.  Needs root.  CSV (--csv): transport,size,iters,rtt_median_us,
 * rtt_p99_us,bandwidth_MBps (SIZE / half the median round trip).
 *
 * --cluster NAME runs between hosts h1 and h2 of an rcp-cluster instead
 * (namespaces rcpc-NAME-h1/-h2, interface eth0, 198.18.0.1 and .2).
 * kernel-tcp is a TCP_NODELAY connection, both ends spinning on
 * non-blocking sockets, a message of SIZE bytes (up to 64 MiB) each way
 * per round trip, the echo answering once the whole message is in: the
 * baseline for RCP's own round trip and bandwidth across the same link
 * (perf/xdp_bench.sh).
 *
 * --turn-ns N and --touch-kb K (nic transports; session 20) put work
 * between a frame in and the answer out at both ends, as a protocol
 * does: N ns of spinning on the clock (time, no memory), then a write to
 * each cache line of K KiB (memory the kernel's kick path then finds
 * displaced).  docs/results.md "Session 20 (xdp4 lane)": the kick costs
 * the same after 500 ns of spinning and more after 32 KiB touched.
 *
 *   rcp-xdp-pingpong [--transport xdp,udp,kernel-udp,kernel-tcp] [--size N]
 *                    [--iters N] [--csv] [--no-pin] [--cluster NAME]
 *                    [--turn-ns N] [--touch-kb K]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rcp/nic.h>
#include "common/sh.h"
#include "perf/cluster_ns.h"
#include "perf/clock.h"

#define PROG "rcp-xdp-pingpong"

static char ns[2][32], ifn[2][16];
static int made, pin = 1;
static long turn_ns, touch_kb; /* --turn-ns, --touch-kb */
static volatile unsigned char *touch_buf;

static const char *ip_of[2] = {"198.18.0.1", "198.18.0.2"};

#define sh rcpi_sh

static void net_down(void)
{
	if (made)
		sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns[0], ns[1]);
	made = 0;
}

static void on_signal(int sig)
{
	net_down();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int net_up(void)
{
	int pid = (int)getpid();

	for (int i = 0; i < 2; i++) {
		snprintf(ns[i], sizeof ns[i], "rcpxpp-%d-%c", pid, 'a' + i);
		snprintf(ifn[i], sizeof ifn[i], "xpp%c%d", 'a' + i, pid);
	}
	made = 1;
	atexit(net_down);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	return sh("ip netns add %s && ip netns add %s && "
	          "ip link add %s netns %s type veth peer name %s netns %s && "
	          "ip -n %s addr add %s/30 dev %s && ip -n %s addr add %s/30 dev %s && "
	          "ip -n %s link set %s up && ip -n %s link set %s up",
	          ns[0], ns[1], ifn[0], ns[0], ifn[1], ns[1], ns[0], ip_of[0], ifn[0], ns[1],
	          ip_of[1], ifn[1], ns[0], ifn[0], ns[1], ifn[1]);
}

/* --cluster NAME: two hosts of an rcp-cluster (tools/rcp-cluster). */
static void use_cluster(const char *name)
{
	for (int i = 0; i < 2; i++) {
		rcpi_cluster_ns(ns[i], sizeof ns[i], name, i + 1);
		snprintf(ifn[i], sizeof ifn[i], "eth0");
	}
}

static int enter(int side)
{
	return rcpi_netns_enter(ns[side]);
}

/* One side of a nic ping-pong.  The parent (side 0) times. */
static int nic_side(const char *t, int side, int rfd, int wfd, size_t size, long iters, long warm,
                    uint64_t *rtt)
{
	char addr[RCP_NIC_ADDRSTR_MAX], peer_addr[RCP_NIC_ADDRSTR_MAX];
	struct rcp_nic_frame fr[8];
	unsigned char buf[4096] = {0};
	struct iovec v = {buf, size};
	rcp_nic *nic;
	int peer, rc;

	if (!strcmp(t, "xdp"))
		snprintf(addr, sizeof addr, "xdp:%s", ifn[side]);
	else
		snprintf(addr, sizeof addr, "udp:%s:%d", ip_of[side], 7100);
	rc = rcp_nic_open(addr, NULL, &nic);
	if (rc) {
		fprintf(stderr, PROG ": open %s: %s\n", addr, rcp_strerror(rc));
		return 1;
	}
	rcp_nic_addr_str(nic, addr, sizeof addr);
	if (write(wfd, addr, sizeof addr) != (ssize_t)sizeof addr ||
	    read(rfd, peer_addr, sizeof peer_addr) != (ssize_t)sizeof peer_addr)
		return 1;
	rc = rcp_nic_peer_add_str(nic, peer_addr, &peer);
	if (rc) {
		fprintf(stderr, PROG ": peer %s: %s\n", peer_addr, rcp_strerror(rc));
		return 1;
	}
	for (long i = 0; i < warm + iters; i++) {
		uint64_t t0 = now_ns();
		int n;
		if (side == 0) {
			while ((rc = rcp_nic_send(nic, peer, &v, 1, 0)) == RCP_EAGAIN)
				;
			if (rc)
				return 1;
		}
		while ((n = rcp_nic_recv(nic, fr, 8)) == 0)
			;
		if (n < 0)
			return 1;
		rcp_nic_release(nic, fr, n);
		if (turn_ns) {
			uint64_t e = now_ns() + (uint64_t)turn_ns;
			while (now_ns() < e)
				;
		}
		for (long b = 0; b < touch_kb * 1024; b += 64)
			touch_buf[b]++;
		if (side == 1) {
			while ((rc = rcp_nic_send(nic, peer, &v, 1, 0)) == RCP_EAGAIN)
				;
			if (rc)
				return 1;
		} else if (i >= warm) {
			rtt[i - warm] = now_ns() - t0;
		}
	}
	rcp_nic_close(nic);
	return 0;
}

static int kudp_side(int side, size_t size, long iters, long warm, uint64_t *rtt)
{
	struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(7200)}, peer = me;
	char buf[4096] = {0};
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, ip_of[side], &me.sin_addr);
	inet_pton(AF_INET, ip_of[!side], &peer.sin_addr);
	if (s < 0 || bind(s, (struct sockaddr *)&me, sizeof me) ||
	    connect(s, (struct sockaddr *)&peer, sizeof peer))
		return 1;
	/* Side 0 waits until side 1 is bound: a first datagram may be lost
	 * otherwise, so it resends until the first echo. */
	for (long i = 0; i < warm + iters; i++) {
		uint64_t t0 = now_ns();
		if (side == 0 && send(s, buf, size, 0) < 0)
			return 1;
		for (long spins = 0;; spins++) {
			if (recv(s, buf, sizeof buf, MSG_DONTWAIT) >= 0)
				break;
			if (errno != EAGAIN && errno != ECONNREFUSED)
				return 1;
			if (side == 0 && i == 0 && spins % 100000 == 99999)
				(void)!send(s, buf, size, 0);
		}
		if (side == 1 && send(s, buf, size, 0) < 0)
			return 1;
		if (side == 0 && i >= warm)
			rtt[i - warm] = now_ns() - t0;
	}
	close(s);
	return 0;
}

/* Spins until LEN bytes of BUF went out (or in, RX) on non-blocking S. */
static int tcp_all(int s, char *buf, size_t len, int rx)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = rx ? recv(s, buf + done, len - done, MSG_DONTWAIT)
		               : send(s, buf + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0)
			done += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return 1;
	}
	return 0;
}

/* Kernel TCP: side 1 listens, side 0 connects (retrying until side 1
 * listens), then SIZE bytes each way per round trip. */
static int ktcp_side(int side, size_t size, long iters, long warm, uint64_t *rtt)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7300)};
	char *buf = calloc(1, size);
	int one = 1, s = -1, l;

	inet_pton(AF_INET, ip_of[1], &a.sin_addr);
	if (!buf)
		return 1;
	if (side == 1) {
		l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1))
			return 1;
		s = accept(l, NULL, NULL);
		close(l);
	} else {
		for (int k = 0; k < 5000 && s < 0; k++) {
			s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a)) {
				close(s);
				s = -1;
				usleep(1000); /* the listener has no event we can wait on here */
			}
		}
	}
	if (s < 0)
		return 1;
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
	for (long i = 0; i < warm + iters; i++) {
		uint64_t t0 = now_ns();
		if ((side == 0 && tcp_all(s, buf, size, 0)) || tcp_all(s, buf, size, 1) ||
		    (side == 1 && tcp_all(s, buf, size, 0)))
			return 1;
		if (side == 0 && i >= warm)
			rtt[i - warm] = now_ns() - t0;
	}
	close(s);
	free(buf);
	return 0;
}

static int side_run(const char *t, int side, int rfd, int wfd, size_t size, long iters, long warm,
                    uint64_t *rtt)
{
	if (!strcmp(t, "kernel-udp"))
		return kudp_side(side, size, iters, warm, rtt);
	if (!strcmp(t, "kernel-tcp"))
		return ktcp_side(side, size, iters, warm, rtt);
	return nic_side(t, side, rfd, wfd, size, iters, warm, rtt);
}

static void pin_to(int cpu)
{
	if (pin)
		pin_cpu(cpu);
}

static int run(const char *t, size_t size, long iters, int csv)
{
	long warm = iters / 10 + 100;
	uint64_t *rtt = calloc((size_t)iters, sizeof *rtt);
	int p2c[2], c2p[2], rc, st;
	pid_t child;

	if (!rtt || pipe(p2c) || pipe(c2p))
		return 1;
	fflush(stdout);
	child = fork();
	if (child == 0) {
		pin_to(1);
		if (enter(1))
			_exit(1);
		_exit(side_run(t, 1, p2c[0], c2p[1], size, iters, warm, NULL));
	}
	pin_to(0);
	if (child < 0 || enter(0))
		return 1;
	rc = side_run(t, 0, c2p[0], p2c[1], size, iters, warm, rtt);
	if (rc)
		kill(child, SIGKILL);
	waitpid(child, &st, 0);
	if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = 1;
	if (!rc) {
		qsort(rtt, (size_t)iters, sizeof *rtt, cmp_u64);
		double med = (double)rtt[iters / 2] / 1e3,
		       p99 = (double)rtt[iters * 99 / 100] / 1e3, mbps = (double)size / (med / 2);
		if (csv)
			printf("%s,%zu,%ld,%.3f,%.3f,%.1f\n", t, size, iters, med, p99, mbps);
		else
			printf("%-11s %8zu B  median %9.3f us  p99 %9.3f us  %8.1f MB/s  (%ld "
			       "iters)\n",
			       t, size, med, p99, mbps, iters);
	} else {
		fprintf(stderr, PROG ": %s failed\n", t);
	}
	close(p2c[0]), close(p2c[1]), close(c2p[0]), close(c2p[1]);
	free(rtt);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"transport", required_argument, 0, 't'},
	    {"size", required_argument, 0, 's'},
	    {"iters", required_argument, 0, 'n'},
	    {"csv", no_argument, 0, 'c'},
	    {"no-pin", no_argument, 0, 'p'},
	    {"cluster", required_argument, 0, 'C'},
	    {"turn-ns", required_argument, 0, 'T'},
	    {"touch-kb", required_argument, 0, 'K'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	char *list = strdup("xdp,udp,kernel-udp"), *save = NULL;
	size_t size = 8;
	long iters = 20000;
	int csv = 0, c, fail = 0;
	const char *cluster = NULL;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			free(list);
			list = strdup(optarg);
			break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = strtol(optarg, NULL, 0); break;
		case 'c': csv = 1; break;
		case 'p': pin = 0; break;
		case 'C': cluster = optarg; break;
		case 'T': turn_ns = strtol(optarg, NULL, 0); break;
		case 'K':
			touch_kb = strtol(optarg, NULL, 0);
			touch_buf = calloc((size_t)(touch_kb < 0 ? 0 : touch_kb) + 1, 1024);
			if (!touch_buf)
				return 1;
			break;
		case 'h':
			printf("usage: " PROG
			       " [--transport xdp,udp,kernel-udp,kernel-tcp] [--size N] "
			       "[--iters N] [--csv] [--no-pin] [--cluster NAME] [--turn-ns N]\n"
			       "       [--touch-kb K]\n"
			       "Bare frame round trip (spinning) on a veth pair between two\n"
			       "namespaces it makes itself, or hosts h1 and h2 of rcp-cluster\n"
			       "NAME (root).  kernel-tcp: SIZE up to 64 MiB.\n");
			return 0;
		default: return 2;
		}
	}
	if (size < 1 || size > (strcmp(list, "kernel-tcp") ? 1400u : 64u << 20) || iters < 10) {
		fprintf(stderr,
		        PROG ": --size 1..1400 (kernel-tcp alone: 64 MiB), --iters >= 10\n");
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, PROG ": needs root (namespaces, XDP)\n");
		return 77;
	}
	if (cluster)
		use_cluster(cluster);
	else if (net_up()) {
		fprintf(stderr, PROG ": cannot make the namespaces and veth pair\n");
		return 1;
	}
	if (csv)
		printf("transport,size,iters,rtt_median_us,rtt_p99_us,bandwidth_MBps\n");
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
		fail |= run(t, size, iters, csv);
	free(list);
	return fail;
}
