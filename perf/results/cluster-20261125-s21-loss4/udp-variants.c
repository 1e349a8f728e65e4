/* throwaway: UDP 8 B ping-pong variants between two cluster hosts, spinning.
 * ub server|client SELF PEER MODE ITERS ; MODE bits: 1 lane (second socket
 * reuseaddr on the port, connected; main unconnected), 2 recvmmsg(8),
 * 4 recvfrom with address, 8 look at main socket every 4th look */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/udp.h>
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#include <time.h>
#include <errno.h>
#include <sched.h>
#include <unistd.h>
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}
static int cmp(const void *a, const void *b)
{
	double x = *(double *)a, y = *(double *)b;
	return (x > y) - (x < y);
}
int main(int c, char **v)
{
	int srv = !strcmp(v[1], "server");
	int mode = atoi(v[4]);
	long it = atol(v[5]);
	cpu_set_t cs;
	CPU_ZERO(&cs);
	CPU_SET(srv ? 1 : 0, &cs);
	sched_setaffinity(0, sizeof cs, &cs);
	struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(7300)}, pe = me;
	inet_pton(AF_INET, v[2], &me.sin_addr);
	inet_pton(AF_INET, v[3], &pe.sin_addr);
	int one = 1, s = socket(AF_INET, SOCK_DGRAM, 0), l = -1;
	if (mode & 1)
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s, (void *)&me, sizeof me)) {
		perror("bind");
		return 1;
	}
	if (mode & 1) {
		l = socket(AF_INET, SOCK_DGRAM, 0);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(l, (void *)&me, sizeof me) || connect(l, (void *)&pe, sizeof pe)) {
			perror("lane");
			return 1;
		}
	} else if (connect(s, (void *)&pe, sizeof pe)) {
		perror("connect");
		return 1;
	}
	int rs = l >= 0 ? l : s;
	if (mode & 16) {
		setsockopt(rs, SOL_UDP, UDP_GRO, &one, sizeof one);
		if (rs != s)
			setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
	}
	char ctl[64];
	char buf[8][2048];
	struct mmsghdr mm[8];
	struct iovec iov[8];
	struct sockaddr_in src[8];
	for (int i = 0; i < 8; i++) {
		iov[i] = (struct iovec){buf[i], 2048};
		memset(&mm[i], 0, sizeof mm[i]);
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		mm[i].msg_hdr.msg_name = &src[i];
		mm[i].msg_hdr.msg_namelen = sizeof src[i];
	}
	double *r = malloc(sizeof(double) * it);
	long looks = 0;
	unsigned k = 0;
	for (long i = -2000; i < it; i++) {
		double t0 = now();
		if (!srv) {
			if (l >= 0)
				send(l, buf[0], 8, 0);
			else
				send(s, buf[0], 8, 0);
		}
		for (long sp = 0;; sp++) {
			ssize_t n;
			int fd = rs;
			looks++;
			if ((mode & 8) && (++k & 3) == 0)
				fd = s;
			if (mode & 16) {
				struct msghdr *m = &mm[0].msg_hdr;
				m->msg_namelen = sizeof src[0];
				m->msg_control = ctl;
				m->msg_controllen = sizeof ctl;
				n = recvmsg(fd, m, MSG_DONTWAIT);
			} else if (mode & 2) {
				for (int j = 0; j < 8; j++)
					mm[j].msg_hdr.msg_namelen = sizeof src[j];
				n = recvmmsg(fd, mm, 8, MSG_DONTWAIT, NULL);
			} else if (mode & 4) {
				socklen_t al = sizeof src[0];
				n = recvfrom(fd, buf[0], 2048, MSG_DONTWAIT | MSG_TRUNC,
				             (void *)&src[0], &al);
			} else
				n = recv(fd, buf[0], 2048, MSG_DONTWAIT);
			if (n >= 0)
				break;
			if (!srv && i == -2000 && sp % 100000 == 99999)
				send(rs, buf[0], 8, 0);
		}
		if (srv) {
			if (l >= 0)
				send(l, buf[0], 8, 0);
			else
				send(s, buf[0], 8, 0);
		} else if (i >= 0)
			r[i] = now() - t0;
	}
	if (!srv) {
		qsort(r, it, sizeof *r, cmp);
		printf("mode %d median %.3f us p99 %.3f looks/rt %.1f\n", mode, r[it / 2] / 1e3,
		       r[it * 99 / 100] / 1e3, (double)looks / (it + 2000));
	}
	return 0;
}
