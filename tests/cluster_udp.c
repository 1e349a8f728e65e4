/*
 * tests/cluster_udp.c — counted UDP datagrams between cluster hosts
 * (tests/cluster.sh).  There is no ping or netcat on every machine, and
 * the loss test needs exact counts, so this sends and counts itself.
 *
 *   cluster-udp recv PORT        bind [::]:PORT (IPv4 and IPv6), print
 *                                "ready", count datagrams until an END
 *                                one, print "received R of S"
 *   cluster-udp send HOST PORT N [SIZE] [-4|-6]
 *                                N numbered datagrams of SIZE bytes
 *                                (default 64), then 64 END datagrams
 *
 * END: the wire may drop any datagram, END ones too; 64 of them all lost
 * at the test's 10% loss has probability 1e-64.  The wire keeps order (one
 * bridge, FIFO queues), so every data datagram that survived arrived
 * before the first END: R counts them all, S (the END's count N) is how
 * many were sent.  The receiver gives up after 10 s without a datagram
 * (exit 1), so a broken cluster fails the test instead of hanging it.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#define MAGIC_DATA 0x44415441u
#define MAGIC_END  0x454e4421u

struct hdr {
	uint32_t magic;
	uint32_t seq;
};

static int do_recv(const char *port)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
	int fd = socket(AF_INET6, SOCK_DGRAM, 0), off = 0, big = 4 << 20;
	unsigned long got = 0;
	char buf[65536];

	a.sin6_port = htons((uint16_t)atoi(port));
	if (fd < 0 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) ||
	    bind(fd, (struct sockaddr *)&a, sizeof a)) {
		perror("cluster-udp: recv socket");
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		struct hdr h;
		ssize_t n;
		if (poll(&p, 1, 10000) != 1) {
			fprintf(stderr, "cluster-udp: nothing for 10 s after %lu datagrams\n", got);
			return 1;
		}
		n = recv(fd, buf, sizeof buf, 0);
		if (n < (ssize_t)sizeof h)
			continue;
		memcpy(&h, buf, sizeof h);
		if (h.magic == MAGIC_DATA)
			got++;
		else if (h.magic == MAGIC_END) {
			printf("received %lu of %u\n", got, (unsigned)h.seq);
			return 0;
		}
	}
}

static int do_send(int argc, char **argv)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
	unsigned long n = strtoul(argv[2], NULL, 0);
	size_t size = argc > 3 ? strtoul(argv[3], NULL, 0) : 64;
	static char buf[65536];
	int fd, rc;

	if (argc > 4)
		hints.ai_family = !strcmp(argv[4], "-6") ? AF_INET6 : AF_INET;
	if (size < sizeof(struct hdr) || size > sizeof buf) {
		fprintf(stderr, "cluster-udp: size %zu out of range\n", size);
		return 2;
	}
	rc = getaddrinfo(argv[0], argv[1], &hints, &res);
	if (rc) {
		fprintf(stderr, "cluster-udp: %s: %s\n", argv[0], gai_strerror(rc));
		return 1;
	}
	fd = socket(res->ai_family, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen)) {
		perror("cluster-udp: send socket");
		return 1;
	}
	freeaddrinfo(res);
	for (unsigned long i = 0; i < n + 64; i++) {
		struct hdr h = {.magic = i < n ? MAGIC_DATA : MAGIC_END,
		                .seq = (uint32_t)(i < n ? i : n)};
		memcpy(buf, &h, sizeof h);
		/* a full queue (ENOBUFS) is local back-pressure, not the
		 * wire's loss: send that datagram again */
		while (send(fd, buf, i < n ? size : sizeof h, 0) < 0) {
			/* the receiver has gone after the first END */
			if (i >= n && errno == ECONNREFUSED)
				return 0;
			if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
				perror("cluster-udp: send");
				return 1;
			}
			poll(NULL, 0, 1);
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "recv"))
		return do_recv(argv[2]);
	if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "send"))
		return do_send(argc - 2, argv + 2);
	fprintf(stderr, "usage: cluster-udp recv PORT | send HOST PORT N [SIZE [-4|-6]]\n");
	return 2;
}
