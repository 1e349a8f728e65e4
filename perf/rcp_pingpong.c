/*
 * rcp-pingpong — round trip and bandwidth of RCP channels, message size by
 * message size, optionally next to kernel TCP on loopback (--compare tcp:
 * Figure 6 of Dong & Zheng, live).
 *
 * What is measured.  A client and an echo server, each with one rcp_ep.
 * One round trip of SIZE bytes, timed by the client:
 *     t0; rcp_irecv(pong); rcp_isend(ping); rcp_wait(send); rcp_wait(recv); t1
 * The server keeps its next receive posted before it echoes, and the
 * client posts its receive before it sends, as a real application would:
 * large messages then take RCP's receiver-first (READY) path instead of a
 * request-to-send round trip.  Each size is warmed up, then measured for
 * a fixed count (--iters) or for about --target-ms of summed round trips
 * (at least 20); see perf/tcp_pingpong.h.  Reported: median and 99th
 * percentile round trip in us, and bandwidth = size / (median / 2) in MB/s
 * (1 MB = 1e6 bytes).  Buffers are page-aligned, allocated and touched
 * once per size and reused, so no allocation or page fault is timed.
 *
 * How the two ends meet.  Only through the RCP API: the server opens its
 * endpoint at ADDR with RCP_EP_ACCEPT; the client opens its own endpoint
 * and rcp_connect()s to ADDR; the server learns the client's channel from
 * the status of the first message.  Control messages (tag TAG_CTRL|kind)
 * frame each size: SIZE/SIZE_ACK, the data messages (tag = sequence
 * number), END/END_ACK (counts and the server's retransmissions), and a
 * final BYE/BYE_ACK.  Without --listen/--connect the tool forks the server
 * itself; a pipe then carries the server's address, nothing else.
 *
 * Waiting.  --spin / --sleep give both endpoints RCP_EP_SPIN / RCP_EP_SLEEP
 * (default: the library's spin-then-sleep).  A sleeping wait pays a
 * cross-CPU wake-up each way (on these VMs an idle vCPU halts), so small
 * round trips differ by an order of magnitude between modes: always say
 * which one a number is for.
 * Between sizes the server sleeps on the endpoint fd whatever the mode, so
 * an idle server never competes for the CPUs with the next measurement.
 *
 * Trust.  --verify fills every ping with a pattern unique to (size,
 * sequence) — outside the timed part — and checks every byte of it at the
 * server (inside the client's round trip: verified runs are slower) and
 * of the echo at the client.  Any error status, timeout, wrong tag or
 * length, count mismatch or bad byte ends the run with a message and a
 * nonzero exit, and no row is printed for that size.
 *
 * Output.  A table, or with --csv the columns transport,size,iters,
 * rtt_median_us,rtt_p99_us,bandwidth_MBps, plus with --compare tcp
 * tcp_rtt_median_us,tcp_bandwidth_MBps,rtt_ratio,bw_ratio where both ratios
 * are RCP / TCP: rtt_ratio < 1 and bw_ratio > 1 mean RCP is faster.  The
 * table adds retx (frames retransmitted by both ends at that size) and
 * cs/rt (the client's voluntary context switches per round trip: about 1
 * when its waits really sleep, 0 when they spin).  On stderr each end
 * prints a "loss-stats" line per size (pp_proto.c rpp_loss_stats).  The wait mode is not a
 * column: a run has one; perf/sweep.sh prepends it when it merges runs.
 *
 * Files.  This one: options and main.  pp_run.c: the ways to run (server,
 * client, both here, kernel TCP).  pp_client.c: the timed round trips and
 * the rows.  pp_server.c: the echo server.  pp_proto.c: what both ends
 * share (control messages, pattern, buffers, endpoints).  Each calls only
 * the ones after it; perf/rcp_pingpong.h holds what they share.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/rcp.h>

#include "perf/rcp_pingpong.h"

/* ---- options ---------------------------------------------------------------------- */

/* "4096", "64k", "4M", "1G" (binary multiples).  Returns 0 or -1. */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end || v > (SIZE_MAX >> shift))
		return -1;
	*out = (size_t)v << shift;
	return 0;
}

/* "1,8,64", "1:4M" (a, 2a, 4a, ... up to b), or a mix: "0,1:64,1000". */
static int parse_sizes(const char *arg, struct opts *o)
{
	char *list = strdup(arg), *item, *save, *colon;
	int rc = -1;

	o->nsizes = 0;
	if (!list)
		return -1;
	for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		size_t a, b;
		colon = strchr(item, ':');
		if (colon)
			*colon = 0;
		if (parse_size(item, &a))
			goto out;
		if (!colon) {
			if (o->nsizes == MAX_SIZES)
				goto out;
			o->sizes[o->nsizes++] = a;
			continue;
		}
		if (parse_size(colon + 1, &b) || !a || b < a)
			goto out;
		for (;;) {
			if (o->nsizes == MAX_SIZES)
				goto out;
			o->sizes[o->nsizes++] = a;
			if (a > b / 2)
				break;
			a *= 2;
		}
	}
	rc = o->nsizes ? 0 : -1;
out:
	free(list);
	return rc;
}

static const char usage_text[] =
    "usage: rcp-pingpong [--transport shm|udp] [--sizes LIST] [--iters N] [--warmup N]\n"
    "                    [--target-ms MS] [--verify] [--faults SPEC] [--compare tcp]\n"
    "                    [--spin|--sleep] [--csv] [--no-pin] [--timeout-ms MS]\n"
    "                    [--idle-chans N] [--listen ADDR | --connect ADDR [--local ADDR]]\n"
    "Round trip and bandwidth of RCP channels (rcp_isend/rcp_irecv) per message size.\n"
    "  --transport T   shm (default) or udp; with --listen/--connect taken from ADDR\n"
    "  --sizes LIST    comma-separated sizes and ranges; a:b means a, 2a, 4a, ... <= b;\n"
    "                  suffixes k, M, G are binary (default 1,8,64,512,4k,32k,256k,1M)\n"
    "  --iters N       round trips measured per size (default: as many as fit in\n"
    "                  --target-ms of round trips, default 300, at least 20)\n"
    "  --warmup N      unmeasured round trips first (default: 30 ms' worth, 5..1000)\n"
    "  --verify        check every byte of every message at both ends (slower)\n"
    "  --faults SPEC   fault injection for the nic, e.g. drop=0.01,seed=3\n"
    "                  (RCP_FAULTS works too)\n"
    "  --compare tcp   also run kernel TCP (loopback, TCP_NODELAY, same sizes and\n"
    "                  wait mode) and add the columns tcp_rtt_median_us,\n"
    "                  tcp_bandwidth_MBps, rtt_ratio = rcp rtt / tcp rtt (< 1: RCP\n"
    "                  faster), bw_ratio = rcp bandwidth / tcp bandwidth (> 1: RCP\n"
    "                  faster); TCP always runs on loopback on this host\n"
    "  --spin, --sleep waits never sleep / sleep at once, at both ends (default: the\n"
    "                  library's spin-then-sleep, RCP_SPIN_NS; RCP_WAIT also works)\n"
    "  --csv           CSV: transport,size,iters,rtt_median_us,rtt_p99_us,\n"
    "                  bandwidth_MBps (+ the --compare columns)\n"
    "  --no-pin        do not pin the client to CPU 0 and the server to CPU 1\n"
    "  --timeout-ms MS any single wait longer than this fails the run (10000)\n"
    "  --idle-chans N  the client's endpoint also holds N idle channels (to N more\n"
    "                  endpoints of its own): the cost of many peers (default 0)\n"
    "  --listen ADDR   be the echo server at ADDR (udp:IP:PORT, udp: for any port on\n"
    "                  127.0.0.1, shm:NAME); serves one client, then exits\n"
    "  --connect ADDR  be the client of the server at ADDR; --local sets our address\n"
    "  tcp:HOST:PORT   with --listen/--connect: kernel TCP between two hosts instead\n"
    "                  (the server serves until the client is done)\n"
    "Without --listen/--connect both ends run here (the server is forked).\n"
    "Round trip = irecv+isend+wait+wait as timed by the client; bandwidth =\n"
    "size / (median / 2) in MB/s (1 MB = 1e6 B).  cs/rt: the client's voluntary\n"
    "context switches per round trip (about 1 when its waits sleep, 0 when they spin).\n"
    "retx: frames retransmitted by both ends at that size, by loss recovery or by\n"
    "timer (tail-loss probe, retransmission timeout): a process stalled longer than\n"
    "those timers (descheduled) draws resends on a link that lost nothing.  Each\n"
    "end also prints per size on stderr \"loss-stats WHO size N msgs M retx R rack K\n"
    "tlp T rto O dup D ooo O acks A frames F rtt_us R pipe P rackwait_us W srtt_us S\n"
    "rttvar_us V minrtt_us M cwnd C\": its own resends, of those by RACK, tail-loss\n"
    "probes, timeouts, frames taken twice or out of order, ACK frames and all frames\n"
    "sent; the mean RTT sample, frames in the network at a sample, and age of a frame\n"
    "RACK resent; at the end, srtt, rttvar, least RTT and congestion window.\n"
    "--verify ends with a line \"verified: N messages, N bytes\" (both directions).\n"
    "Exit status: 0 ok, 1 failure (no row for the failed size), 2 usage.\n";

static void usage(FILE *f)
{
	fputs(usage_text, f);
}

int main(int argc, char **argv)
{
	enum {
		O_SPIN = 256,
		O_SLEEP,
		O_NOPIN,
		O_TIMEOUT,
		O_TARGET,
		O_LISTEN,
		O_CONNECT,
		O_LOCAL,
		O_COMPARE,
		O_FAULTS,
		O_IDLE
	};
	static const struct option lo[] = {
	    {"transport", required_argument, 0, 't'},
	    {"sizes", required_argument, 0, 's'},
	    {"iters", required_argument, 0, 'n'},
	    {"warmup", required_argument, 0, 'w'},
	    {"target-ms", required_argument, 0, O_TARGET},
	    {"verify", no_argument, 0, 'v'},
	    {"faults", required_argument, 0, O_FAULTS},
	    {"compare", required_argument, 0, O_COMPARE},
	    {"spin", no_argument, 0, O_SPIN},
	    {"sleep", no_argument, 0, O_SLEEP},
	    {"csv", no_argument, 0, 'c'},
	    {"no-pin", no_argument, 0, O_NOPIN},
	    {"timeout-ms", required_argument, 0, O_TIMEOUT},
	    {"listen", required_argument, 0, O_LISTEN},
	    {"connect", required_argument, 0, O_CONNECT},
	    {"local", required_argument, 0, O_LOCAL},
	    {"idle-chans", required_argument, 0, O_IDLE},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	static struct opts o;
	static struct row rows[MAX_SIZES];
	const char *transport = NULL, *wait_env = getenv("RCP_WAIT"), *spin_env;
	int c, mode_set = 0, rc;
	char *end;

	o.iters = -1;
	o.warmup = -1;
	o.timeout_ms = 10000;
	o.pin = 1;
	o.mode = PP_SPIN_THEN_SLEEP;
	parse_sizes("1,8,64,512,4k,32k,256k,1M", &o);
	while ((c = getopt_long(argc, argv, "t:s:n:w:vch", lo, NULL)) != -1) {
		switch (c) {
		case 't': transport = optarg; break;
		case 's':
			if (parse_sizes(optarg, &o)) {
				fprintf(stderr, PROG ": bad --sizes %s\n", optarg);
				return 2;
			}
			break;
		case 'n':
			o.iters = strtol(optarg, &end, 10);
			if (*end || o.iters <= 0) {
				fprintf(stderr, PROG ": bad --iters %s\n", optarg);
				return 2;
			}
			break;
		case 'w':
			o.warmup = strtol(optarg, &end, 10);
			if (*end || o.warmup < 0) {
				fprintf(stderr, PROG ": bad --warmup %s\n", optarg);
				return 2;
			}
			break;
		case O_TARGET:
			o.target_ns = (uint64_t)strtoul(optarg, &end, 10) * 1000000ull;
			if (*end || !o.target_ns) {
				fprintf(stderr, PROG ": bad --target-ms %s\n", optarg);
				return 2;
			}
			break;
		case 'v': o.verify = 1; break;
		case O_FAULTS: o.faults = optarg; break;
		case O_COMPARE:
			if (strcmp(optarg, "tcp")) {
				fprintf(stderr, PROG ": --compare knows only tcp\n");
				return 2;
			}
			o.compare_tcp = 1;
			break;
		case O_SPIN:
			o.mode = PP_SPIN;
			mode_set = 1;
			break;
		case O_SLEEP:
			o.mode = PP_SLEEP;
			mode_set = 1;
			break;
		case 'c': o.csv = 1; break;
		case O_NOPIN: o.pin = 0; break;
		case O_TIMEOUT:
			o.timeout_ms = strtol(optarg, &end, 10);
			if (*end || o.timeout_ms <= 0) {
				fprintf(stderr, PROG ": bad --timeout-ms %s\n", optarg);
				return 2;
			}
			break;
		case O_IDLE:
			o.idle_chans = (int)strtol(optarg, &end, 10);
			if (*end || o.idle_chans < 0 || o.idle_chans > 4096) {
				fprintf(stderr, PROG ": bad --idle-chans %s\n", optarg);
				return 2;
			}
			break;
		case O_LISTEN: o.listen = optarg; break;
		case O_CONNECT: o.connect = optarg; break;
		case O_LOCAL: o.local = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || (o.listen && o.connect)) {
		usage(stderr);
		return 2;
	}
	/* The library also obeys RCP_WAIT; the label must say what runs. */
	if (wait_env && *wait_env) {
		enum pp_mode env = !strcmp(wait_env, "spin")    ? PP_SPIN
		                   : !strcmp(wait_env, "sleep") ? PP_SLEEP
		                                                : PP_SPIN_THEN_SLEEP;
		if (mode_set && env != o.mode) {
			fprintf(stderr, PROG ": RCP_WAIT=%s contradicts --%s\n", wait_env,
			        pp_mode_name(o.mode));
			return 2;
		}
		o.mode = env;
	}
	spin_env = getenv("RCP_SPIN_NS");
	o.spin_ns = spin_env && *spin_env ? strtoll(spin_env, NULL, 10) : 50000;
	if (o.listen || o.connect) {
		const char *a = o.listen ? o.listen : o.connect;
		const char *t = !strncmp(a, "shm:", 4)     ? "shm"
		                : !strncmp(a, "udp:", 4)   ? "udp"
		                : !strncmp(a, "xdp:", 4)   ? "xdp"   /* --listen/--connect only */
		                : !strncmp(a, "verbs:", 6) ? "verbs" /* likewise */
		                : !strncmp(a, "tcp:", 4)   ? "tcp"   /* kernel TCP across hosts */
		                                           : NULL;
		if (!t || (transport && strcmp(transport, t))) {
			fprintf(stderr, PROG ": %s is not a %s address\n", a,
			        transport ? transport : "shm: or udp:");
			return 2;
		}
		transport = t;
	}
	o.transport = transport ? transport : "shm";
	if (strcmp(o.transport, "shm") && strcmp(o.transport, "udp") && !(o.listen || o.connect)) {
		fprintf(stderr, PROG ": unknown transport %s (shm, udp)\n", o.transport);
		return 2;
	}
	if (!strcmp(o.transport, "tcp"))
		return rpp_run_tcp_remote(&o, rows);
	if (o.listen)
		return rpp_run_listen(&o);
	if (o.compare_tcp && rpp_run_tcp(&o, rows))
		return 1;
	rc = o.connect ? rpp_run_connect(&o, rows) : rpp_run_local(&o, rows);
	return rc ? 1 : 0;
}
