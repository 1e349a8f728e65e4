/*
 * perf/pp_run.c — the ways rcp-pingpong runs: as a server (--listen), as a
 * client (--connect), both ends here (the server forked), and kernel TCP
 * (--compare tcp on loopback, tcp:HOST:PORT between two hosts).
 *
 * Why a file: each way pairs the same client and server differently —
 * which process opens which endpoint, how the server's address reaches the
 * client (a pipe, or the command line), how a forked server is reaped —
 * and none of that belongs to the measurement itself.
 *
 * Calls pp_client.c, pp_server.c, pp_proto.c and perf/tcp_pingpong.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rcp/rcp.h>

#include "perf/rcp_pingpong.h"

/* Picks the client's own address for reaching SERVER: for udp the local IP
 * the kernel would route from (so a remote server can answer), any port. */
static int client_addr(const struct opts *o, const char *server, char *out, size_t len)
{
	char host[256];
	const char *h, *e;
	struct addrinfo hints = {0}, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char ip[INET6_ADDRSTRLEN];
	int s, ok;

	if (o->local) {
		snprintf(out, len, "%s", o->local);
		return 0;
	}
	if (!strcmp(o->transport, "shm")) {
		snprintf(out, len, "shm:rpp-%d-c", (int)getpid());
		return 0;
	}
	h = server + 4; /* after "udp:" */
	if (*h == '[') {
		e = strchr(h, ']');
		if (!e)
			return -1;
		h++;
	} else {
		e = strrchr(h, ':');
		if (!e)
			e = h + strlen(h);
	}
	if ((size_t)(e - h) >= sizeof host)
		return -1;
	memcpy(host, h, (size_t)(e - h));
	host[e - h] = 0;
	if (!*host) {
		snprintf(out, len, "udp:");
		return 0;
	}
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, "9", &hints, &ai) || !ai)
		return -1;
	/* Like the backend, prefer IPv4 when a name has both. */
	for (struct addrinfo *p = ai; p; p = p->ai_next)
		if (p->ai_family == AF_INET) {
			ai->ai_family = p->ai_family;
			ai->ai_addr = p->ai_addr;
			ai->ai_addrlen = p->ai_addrlen;
			break;
		}
	s = socket(ai->ai_family, SOCK_DGRAM, 0);
	ok = s >= 0 && !connect(s, ai->ai_addr, ai->ai_addrlen) &&
	     !getsockname(s, (struct sockaddr *)&ss, &sl);
	if (s >= 0)
		close(s);
	freeaddrinfo(ai);
	if (!ok)
		return -1;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
		snprintf(out, len, "udp:%s:", ip);
	} else {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof ip);
		snprintf(out, len, "udp:[%s]:", ip);
	}
	return 0;
}

int rpp_run_listen(const struct opts *o)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	rcp_ep *ep;

	if (o->pin)
		pp_pin_cpu(1);
	if (rpp_open_ep(o, o->listen, 1, &ep))
		return 1;
	if (rcp_ep_addr(ep, addr, sizeof addr))
		snprintf(addr, sizeof addr, "%s", o->listen);
	printf(PROG ": serving %s (wait: %s%s), one session\n", addr, pp_mode_name(o->mode),
	       o->verify ? ", verifying" : "");
	fflush(stdout);
	return rpp_serve(o, ep, PROG);
}

int rpp_run_connect(const struct opts *o, struct row *rows)
{
	char me[RCP_NIC_ADDRSTR_MAX];
	rcp_ep *ep;

	if (o->pin)
		pp_pin_cpu(0);
	if (client_addr(o, o->connect, me, sizeof me)) {
		fprintf(stderr, PROG ": cannot find a local address to reach %s (use --local)\n",
		        o->connect);
		return 1;
	}
	if (rpp_open_ep(o, me, 0, &ep))
		return 1;
	return rpp_run_client(o, ep, o->connect, rows);
}

/* After a failure the server normally exits by itself (it got C_ERR, or
 * fails on its own), closing its endpoint so no shm segment is left behind;
 * one still running after MS milliseconds is killed. */
static void reap_or_kill(pid_t child, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		siginfo_t si = {0};
		/* WNOWAIT: leave the exit status for the caller's waitpid. */
		if (waitid(P_PID, (id_t)child, &si, WEXITED | WNOHANG | WNOWAIT) ||
		    si.si_pid == child)
			return;
		usleep(10000);
	}
	kill(child, SIGKILL);
}

/* Forks the echo server, then is the client.  The pipe carries the
 * server's address (and tells the client it is open), nothing else. */
int rpp_run_local(const struct opts *o, struct row *rows)
{
	char saddr[RCP_NIC_ADDRSTR_MAX] = {0}, caddr[RCP_NIC_ADDRSTR_MAX];
	int pfd[2], st, rc = 1;
	pid_t child;
	rcp_ep *ep;

	if (pipe(pfd)) {
		perror(PROG ": pipe");
		return 1;
	}
	fflush(stdout);
	fflush(stderr);
	child = fork();
	if (child < 0) {
		perror(PROG ": fork");
		return 1;
	}
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(pfd[0]);
		if (o->pin)
			pp_pin_cpu(1);
		if (!strcmp(o->transport, "shm"))
			snprintf(saddr, sizeof saddr, "shm:rpp-%d-s", (int)getppid());
		else
			snprintf(saddr, sizeof saddr, "udp:");
		if (rpp_open_ep(o, saddr, 1, &ep))
			_exit(1);
		rcp_ep_addr(ep, saddr, sizeof saddr);
		if (write(pfd[1], saddr, sizeof saddr) != (ssize_t)sizeof saddr)
			_exit(1);
		close(pfd[1]);
		rc = rpp_serve(o, ep, PROG " (server)");
		_exit(rc);
	}
	close(pfd[1]);
	if (o->pin)
		pp_pin_cpu(0);
	if (read(pfd[0], saddr, sizeof saddr) != (ssize_t)sizeof saddr) {
		fprintf(stderr, PROG ": the server did not start\n");
		goto out;
	}
	saddr[sizeof saddr - 1] = 0;
	if (!strcmp(o->transport, "shm"))
		snprintf(caddr, sizeof caddr, "shm:rpp-%d-c", (int)getpid());
	else
		snprintf(caddr, sizeof caddr, "udp:");
	if (rpp_open_ep(o, caddr, 0, &ep))
		goto out;
	rc = rpp_run_client(o, ep, saddr, rows);
out:
	close(pfd[0]);
	if (rc)
		reap_or_kill(child, 2000);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st))) {
		fprintf(stderr, PROG ": the server failed\n");
		rc = 1;
	}
	return rc;
}

static struct tcp_pp_config tcp_config(const struct opts *o)
{
	struct tcp_pp_config tc = {
	    .iters = o->iters,
	    .warmup = o->warmup,
	    .target_ns = o->target_ns,
	    .mode = o->mode,
	    .spin_ns = o->spin_ns,
	    .peer_cpu = o->pin ? 1 : -1,
	    .timeout_ms = o->timeout_ms,
	};
	return tc;
}

/* --listen/--connect tcp:HOST:PORT: kernel TCP between two hosts, the
 * baseline of a udp run between the same hosts (perf/cluster_bench.sh);
 * rows as RCP's, transport "tcp".  Returns 0 or 1. */
int rpp_run_tcp_remote(const struct opts *o, struct row *rows)
{
	struct tcp_pp_config tc = tcp_config(o);
	const char *a = (o->listen ? o->listen : o->connect) + 4, *port = strrchr(a, ':');
	char host[256];
	size_t hl = port ? (size_t)(port - a) : 0;

	if (hl >= 2 && a[0] == '[' && a[hl - 1] == ']') { /* tcp:[v6]:PORT */
		a++;
		hl -= 2;
	}
	if (!port || !port[1] || hl >= sizeof host) {
		fprintf(stderr, PROG ": tcp address: tcp:HOST:PORT\n");
		return 1;
	}
	memcpy(host, a, hl);
	host[hl] = 0;
	if (o->listen)
		return tcp_pp_serve(&tc, host, port + 1, stdout) ? 1 : 0;
	if (o->pin)
		pp_pin_cpu(0);
	rpp_print_header(o);
	for (int i = 0; i < o->nsizes; i++) {
		if (!o->sizes[i])
			continue; /* TCP has no zero-byte message */
		tc.size = o->sizes[i];
		if (tcp_pp_client(&tc, host, port + 1, &rows[i].rcp))
			return 1;
		rpp_print_row(o, o->sizes[i], &rows[i]);
	}
	tc.size = 0; /* the server's end */
	return tcp_pp_client(&tc, host, port + 1, NULL) ? 1 : 0;
}

/* Kernel TCP for every size first, while no RCP process exists yet to
 * compete for the CPUs.  Returns 0 or 1. */
int rpp_run_tcp(const struct opts *o, struct row *rows)
{
	struct tcp_pp_config tc = tcp_config(o);

	if (o->pin)
		pp_pin_cpu(0);
	for (int i = 0; i < o->nsizes; i++) {
		if (!o->sizes[i])
			continue; /* TCP has no zero-byte message */
		tc.size = o->sizes[i];
		if (tcp_pingpong(&tc, &rows[i].tcp))
			return 1;
		rows[i].have_tcp = 1;
	}
	return 0;
}
