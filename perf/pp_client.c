/*
 * perf/pp_client.c — rcp-pingpong's client: the timed round trips, size by
 * size, and the table or CSV rows they make.
 *
 * Why a file: everything timed is here, so what the figures mean can be
 * read in one place.  One round trip is irecv(pong), isend(ping),
 * wait(send), wait(recv); verification and buffer allocation stay outside
 * the timed part (rcp_pingpong.c's head comment).  The idle channels of
 * --idle-chans (the cost of many peers) are opened here too, since they
 * belong to the client's endpoint.
 *
 * Calls pp_proto.c and perf/tcp_pingpong.c (the round-trip statistics).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <rcp/rcp.h>

#include "perf/rcp_pingpong.h"

struct client {
	const struct opts *o;
	rcp_ep *ep;
	rcp_chan *ch;
	const char *server;
	int verify;
	/* per size */
	size_t size, cap;
	unsigned char *sbuf, *rbuf;
	uint64_t sent;
	/* --verify: messages whose every byte was checked (warm-up included),
	 * and their bytes, counted once per direction */
	uint64_t verified_msgs, verified_bytes;
	char err[640];
};

/* Receives the control message KIND; anything else (C_ERR included) is a
 * failure described in c->err.  The wait follows the endpoint's mode. */
static int ctrl_expect(struct client *c, unsigned kind, struct ctrl *msg)
{
	unsigned char buf[CTRL_LEN];
	struct rcp_status st;
	rcp_req *r;
	unsigned got;
	int rc;

	rc = rcp_irecv(c->ep, c->ch, RCP_ANY_TAG, buf, sizeof buf, &r);
	if (!rc)
		rc = rcp_wait(r, &st, ms_ns(c->o->timeout_ms));
	if (rc) {
		snprintf(c->err, sizeof c->err, "no answer from %s: %s", c->server,
		         rcp_strerror(rc));
		return rc;
	}
	got = rpp_ctrl_unpack(buf, &st, msg);
	if (got == C_ERR) {
		snprintf(c->err, sizeof c->err, "the server failed: %s", msg->text);
		return RCP_EPROTO;
	}
	if (got != kind) {
		snprintf(c->err, sizeof c->err, "unexpected message from the server (tag %#llx)",
		         (unsigned long long)st.tag);
		return RCP_EPROTO;
	}
	return 0;
}

/* One timed round trip (pp_bounce_fn). */
static int rcp_bounce(void *ctx, long seq, uint64_t *rtt_ns)
{
	struct client *c = ctx;
	struct rcp_status st, sst;
	rcp_req *rr, *sr;
	uint64_t t0, t1;
	int rc;

	if (c->verify)
		rpp_pat_fill(c->sbuf, c->size, rpp_pat_seed(c->size, (uint64_t)seq));
	/* Send, then post the receive while the message is on its way, as
	 * the TCP and UDP ping-pongs do: the echo cannot come back before
	 * the next progress call, so it still lands in rbuf directly. */
	t0 = pp_now_ns();
	rc = rcp_isend(c->ch, (uint64_t)seq, c->sbuf, c->size, &sr);
	if (rc) {
		snprintf(c->err, sizeof c->err, "isend: %s", rcp_strerror(rc));
		return 1;
	}
	c->sent++;
	rc = rcp_irecv(c->ep, c->ch, RCP_ANY_TAG, c->rbuf, c->cap, &rr);
	if (rc) {
		snprintf(c->err, sizeof c->err, "irecv: %s", rcp_strerror(rc));
		return 1;
	}
	rc = rcp_wait(sr, &sst, ms_ns(c->o->timeout_ms));
	if (rc) {
		snprintf(c->err, sizeof c->err, "round trip %ld: send: %s", seq, rcp_strerror(rc));
		/* A server that failed says why before it leaves: prefer that. */
		if (rcp_test(rr, &st) == 0 && (st.tag & TAG_CTRL)) {
			struct ctrl m;
			if (rpp_ctrl_unpack(c->rbuf, &st, &m) == C_ERR)
				snprintf(c->err, sizeof c->err, "the server failed: %s", m.text);
		}
		return 1;
	}
	rc = rcp_wait(rr, &st, ms_ns(c->o->timeout_ms));
	t1 = pp_now_ns();
	if (rc) {
		snprintf(c->err, sizeof c->err, "round trip %ld: receive: %s", seq,
		         rcp_strerror(rc));
		return 1;
	}
	if (st.tag & TAG_CTRL) {
		struct ctrl m;
		if (rpp_ctrl_unpack(c->rbuf, &st, &m) == C_ERR)
			snprintf(c->err, sizeof c->err, "the server failed: %s", m.text);
		else
			snprintf(c->err, sizeof c->err, "round trip %ld: control message %#llx",
			         seq, (unsigned long long)st.tag);
		return 1;
	}
	if (st.tag != (uint64_t)seq || st.len != c->size) {
		snprintf(c->err, sizeof c->err, "round trip %ld: echo has tag %llu and %zu B", seq,
		         (unsigned long long)st.tag, st.len);
		return 1;
	}
	if (c->verify) {
		unsigned want, got;
		long bad = rpp_pat_check(c->rbuf, c->size, rpp_pat_seed(c->size, (uint64_t)seq),
		                         &want, &got);
		if (bad >= 0) {
			snprintf(c->err, sizeof c->err,
			         "verify: echo of message %ld: byte %ld is 0x%02x, expected 0x%02x",
			         seq, bad, got, want);
			return 1;
		}
		/* the server checked the ping, we the echo */
		c->verified_msgs += 2;
		c->verified_bytes += 2 * (uint64_t)c->size;
	}
	*rtt_ns = t1 - t0;
	return 0;
}

static long voluntary_csw(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_nvcsw;
}

void rpp_print_header(const struct opts *o)
{
	if (o->csv) {
		printf("transport,size,iters,rtt_median_us,rtt_p99_us,bandwidth_MBps%s\n",
		       o->compare_tcp ? ",tcp_rtt_median_us,tcp_bandwidth_MBps,rtt_ratio,bw_ratio"
		                      : "");
	} else {
		printf("%-9s %9s %7s %11s %11s %10s %5s %5s", "transport", "size_B", "iters",
		       "rtt_med_us", "rtt_p99_us", "bw_MBps", "retx", "cs/rt");
		if (o->compare_tcp)
			printf("  %11s %10s %9s %8s", "tcp_med_us", "tcp_MBps", "rtt_ratio",
			       "bw_ratio");
		printf("\n");
	}
	fflush(stdout);
}

void rpp_print_row(const struct opts *o, size_t size, const struct row *r)
{
	const struct pp_result *p = &r->rcp, *t = &r->tcp;

	if (o->csv) {
		printf("%s,%zu,%ld,%.3f,%.3f,%.3f", o->transport, size, p->iters, p->median_us,
		       p->p99_us, p->bandwidth_MBps);
		/* Size 0 has no TCP counterpart: empty fields. */
		if (o->compare_tcp && r->have_tcp)
			printf(",%.3f,%.3f,%.4f,%.4f", t->median_us, t->bandwidth_MBps,
			       p->median_us / t->median_us,
			       t->bandwidth_MBps > 0 ? p->bandwidth_MBps / t->bandwidth_MBps : 0);
		else if (o->compare_tcp)
			printf(",,,,");
	} else {
		printf("%-9s %9zu %7ld %11.3f %11.3f %10.2f %5llu %5.2f", o->transport, size,
		       p->iters, p->median_us, p->p99_us, p->bandwidth_MBps,
		       (unsigned long long)r->retx, r->csw_per_rt);
		if (o->compare_tcp && r->have_tcp)
			printf("  %11.3f %10.2f %9.3f %8.3f", t->median_us, t->bandwidth_MBps,
			       p->median_us / t->median_us,
			       t->bandwidth_MBps > 0 ? p->bandwidth_MBps / t->bandwidth_MBps : 0);
		else if (o->compare_tcp)
			printf("  %11s %10s %9s %8s", "-", "-", "-", "-");
	}
	printf("\n");
	fflush(stdout);
}

static int client_size(struct client *c, size_t size, struct row *row)
{
	const struct opts *o = c->o;
	uint64_t retx0 = rpp_ep_retransmits(c->ep);
	struct rcp_ep_stats st0;
	long csw0;
	struct ctrl m;
	int rc;

	c->size = size;
	c->cap = rpp_cap_for(size);
	c->sent = 0;
	free(c->sbuf);
	free(c->rbuf);
	c->sbuf = rpp_buf_alloc(c->cap);
	c->rbuf = rpp_buf_alloc(c->cap);
	if (!c->sbuf || !c->rbuf) {
		snprintf(c->err, sizeof c->err, "no memory for two %zu-byte buffers", c->cap);
		return 1;
	}
	rc = rpp_ctrl_send(c->ch, C_SIZE, 0, size, 0, NULL, ms_ns(o->timeout_ms));
	if (rc) {
		snprintf(c->err, sizeof c->err, "sending SIZE: %s", rcp_strerror(rc));
		return 1;
	}
	if (ctrl_expect(c, C_SIZE_ACK, &m))
		return 1;
	csw0 = voluntary_csw();
	memset(&st0, 0, sizeof st0); /* a library before tlp_probes fills less */
	rcp_ep_get_stats(c->ep, &st0);
	rc = pp_run(rcp_bounce, c, size, o->iters, o->warmup, o->target_ns, &row->rcp);
	/* Tells whether waits really slept (about 1 per round trip) or spun
	 * (about 0): the mode's label alone does not prove it. */
	row->csw_per_rt = (double)(voluntary_csw() - csw0) / (double)(c->sent ? c->sent : 1);
	if (rc) {
		if (rc < 0)
			snprintf(c->err, sizeof c->err, "out of memory");
		return 1;
	}
	rc = rpp_ctrl_send(c->ch, C_END, 0, c->sent, 0, NULL, ms_ns(o->timeout_ms));
	if (rc) {
		snprintf(c->err, sizeof c->err, "sending END: %s", rcp_strerror(rc));
		return 1;
	}
	if (ctrl_expect(c, C_END_ACK, &m))
		return 1;
	if (m.a != c->sent) {
		snprintf(c->err, sizeof c->err, "sent %llu messages, the server echoed %llu",
		         (unsigned long long)c->sent, (unsigned long long)m.a);
		return 1;
	}
	row->retx = rpp_ep_retransmits(c->ep) - retx0 + m.b;
	rpp_loss_stats(c->ep, &st0, "client", size, c->sent);
	return 0;
}

/* Keeps answering the peer for MS milliseconds, asleep between frames. */
static void linger(rcp_ep *ep, int ms)
{
	uint64_t until = pp_now_ns() + (uint64_t)ms * 1000000ull;
	struct pollfd pfd = {rcp_ep_fd(ep), POLLIN, 0};

	while (pp_now_ns() < until) {
		if (rcp_progress(ep) < 0)
			return;
		if (rcp_ep_arm(ep) == 0)
			poll(&pfd, 1, 1);
	}
}

/* --idle-chans: N more endpoints here, each with a channel from the
 * client's endpoint that never carries a message — a master with many
 * peers, only one of them talking.  Their endpoints go in IDLE (closed by
 * the caller).  Returns 0 or 1. */
static int idle_open(struct client *c, rcp_ep **idle)
{
	const struct opts *o = c->o;
	for (int i = 0; i < o->idle_chans; i++) {
		char a[RCP_NIC_ADDRSTR_MAX] = {0};
		rcp_chan *ch;
		int rc;
		if (!strcmp(o->transport, "shm"))
			snprintf(a, sizeof a, "shm:rpp-%d-i%d", (int)getpid(), i);
		else
			snprintf(a, sizeof a, "udp:");
		if (rpp_open_ep(o, a, 0, &idle[i]))
			return 1;
		rcp_ep_addr(idle[i], a, sizeof a);
		rc = rcp_connect(c->ep, a, &ch);
		if (rc) {
			fprintf(stderr, PROG ": idle channel to %s: %s\n", a, rcp_strerror(rc));
			return 1;
		}
	}
	return 0;
}

static int client_session(struct client *c, struct row *rows, rcp_ep **idle)
{
	const struct opts *o = c->o;
	const char *server = c->server;
	struct ctrl m;
	int rc, fail = 0;

	rc = rcp_connect(c->ep, server, &c->ch);
	if (rc) {
		fprintf(stderr, PROG ": cannot reach %s: %s\n", server, rcp_strerror(rc));
		return 1;
	}
	if (idle_open(c, idle))
		return 1;
	rc = rpp_ctrl_send(c->ch, C_HELLO, o->verify ? CF_VERIFY : 0, 0, 0, NULL,
	                   ms_ns(o->timeout_ms));
	if (rc || ctrl_expect(c, C_HELLO_ACK, &m)) {
		if (rc)
			snprintf(c->err, sizeof c->err, "no answer from %s: %s", server,
			         rcp_strerror(rc));
		fprintf(stderr, PROG ": %s\n", c->err);
		return 1;
	}
	if (m.a != (uint64_t)o->mode)
		fprintf(stderr, PROG ": note: the server waits in mode %s, this client in %s\n",
		        pp_mode_name((enum pp_mode)m.a), pp_mode_name(o->mode));
	if ((m.flags & CF_VERIFY) && !o->verify) {
		/* It checks our pattern, so we must send it. */
		fprintf(stderr, PROG ": note: the server verifies every message (slower)\n");
		c->verify = 1;
	}
	rpp_print_header(o);
	for (int i = 0; i < o->nsizes; i++) {
		if (client_size(c, o->sizes[i], &rows[i])) {
			fprintf(stderr, PROG ": %s %zu B: %s\n", o->transport, o->sizes[i], c->err);
			/* Tell a server that is still listening why we stop. */
			rpp_ctrl_send(c->ch, C_ERR, 0, 0, 0, c->err, ms_ns(200));
			return 1;
		}
		rpp_print_row(o, o->sizes[i], &rows[i]);
	}
	/* Below the table (stderr with --csv, which must stay one table). */
	if (!o->csv)
		printf(
		    "retx: frames sent again, both ends.  Timers resend (a tail-loss probe after\n"
		    "      ~2 round trips of silence, a timeout after >= 250 us), so a stalled\n"
		    "      process (descheduled, e.g. two spinners on two CPUs) causes them on a\n"
		    "      link that lost nothing; the peer then drops the duplicate.\n");
	if (c->verify)
		fprintf(o->csv ? stderr : stdout,
		        "verified: %llu messages, %llu bytes, every byte as sent (pings at the "
		        "server, echoes here)\n",
		        (unsigned long long)c->verified_msgs,
		        (unsigned long long)c->verified_bytes);
	fflush(stdout);
	rc = rpp_ctrl_send(c->ch, C_BYE, 0, 0, 0, NULL, ms_ns(o->timeout_ms));
	if (rc || ctrl_expect(c, C_BYE_ACK, &m)) {
		fprintf(stderr, PROG ": ending the session: %s\n", rc ? rcp_strerror(rc) : c->err);
		fail = 1;
	}
	/* Under injected faults our ack of BYE_ACK may be lost; stay a few
	 * retransmission timeouts so the server's resend is answered. */
	if (rpp_faults_on(o))
		linger(c->ep, 100);
	return fail;
}

/* Runs every size against the server at SERVER; prints a row per size.
 * Returns 0 or 1. */
int rpp_run_client(const struct opts *o, rcp_ep *ep, const char *server, struct row *rows)
{
	struct client c = {.o = o, .ep = ep, .server = server, .verify = o->verify};
	rcp_ep **idle = calloc((size_t)o->idle_chans + 1, sizeof *idle);
	int rc = idle ? client_session(&c, rows, idle) : 1;

	/* After a failure requests may still point into the buffers: the
	 * endpoint goes first. */
	rcp_ep_close(ep);
	for (int i = 0; idle && i < o->idle_chans; i++)
		rcp_ep_close(idle[i]);
	free(idle);
	free(c.sbuf);
	free(c.rbuf);
	return rc;
}
