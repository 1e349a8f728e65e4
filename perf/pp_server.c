/*
 * perf/pp_server.c — rcp-pingpong's echo server: one client per session,
 * size by size, each ping echoed from one of two alternating buffers so
 * that its next receive is posted before the echo leaves.
 *
 * Why a file: the server is the half a remote host runs alone
 * (--listen), and what it may not do is strict: between sizes it sleeps on
 * the endpoint fd whatever the wait mode (an idle server must not compete
 * for the CPUs with the next measurement), and any failure is reported to
 * the client as C_ERR so that the client fails with the reason instead of
 * timing out.
 *
 * Calls pp_proto.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/rcp.h>

#include "perf/rcp_pingpong.h"

struct server {
	const struct opts *o;
	rcp_ep *ep;
	rcp_chan *ch;
	int verify;
	const char *who; /* message prefix */
	/* The two echo buffers of the current size.  After a failure a
	 * receive may still point into them: freed only once the endpoint is
	 * closed. */
	unsigned char *buf[2];
};

/* Reports a failure on stderr and, best effort, to the client as C_ERR
 * (so it fails with the reason instead of timing out).  Returns 1. */
static int server_fail(struct server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int server_fail(struct server *s, const char *fmt, ...)
{
	char text[sizeof(((struct ctrl *)0)->text)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", s->who, text);
	if (s->ch)
		rpp_ctrl_send(s->ch, C_ERR, 0, 0, 0, text, ms_ns(1000));
	return 1;
}

/* Echoes SIZE-byte messages until C_END.  Two buffers alternate so the
 * next receive is posted before the echo leaves from the other one. */
static int serve_size(struct server *s, size_t size)
{
	const struct opts *o = s->o;
	size_t cap = rpp_cap_for(size);
	unsigned char **buf = s->buf;
	uint64_t retx0 = rpp_ep_retransmits(s->ep);
	struct rcp_ep_stats st0;
	struct rcp_status st;
	struct ctrl c;
	rcp_req *r;
	uint64_t k;
	int rc;

	buf[0] = rpp_buf_alloc(cap);
	buf[1] = rpp_buf_alloc(cap);
	if (!buf[0] || !buf[1])
		return server_fail(s, "no memory for two %zu-byte buffers", cap);
	memset(&st0, 0, sizeof st0); /* a library before tlp_probes fills less */
	rcp_ep_get_stats(s->ep, &st0);
	rc = rcp_irecv(s->ep, s->ch, RCP_ANY_TAG, buf[0], cap, &r);
	if (rc)
		return server_fail(s, "%zu B: irecv: %s", size, rcp_strerror(rc));
	rc = rpp_ctrl_send(s->ch, C_SIZE_ACK, 0, size, 0, NULL, ms_ns(o->timeout_ms));
	if (rc)
		return server_fail(s, "%zu B: sending SIZE_ACK: %s", size, rcp_strerror(rc));
	for (k = 0;; k++) {
		unsigned char *b = buf[k & 1];
		rcp_req *sr;

		rc = rcp_wait(r, &st, ms_ns(o->timeout_ms));
		if (rc)
			return server_fail(s, "%zu B: waiting for message %llu: %s", size,
			                   (unsigned long long)k, rcp_strerror(rc));
		if (st.tag & TAG_CTRL) {
			unsigned kind = rpp_ctrl_unpack(b, &st, &c);
			if (kind == C_ERR) {
				fprintf(stderr, "%s: the client failed: %s\n", s->who, c.text);
				return 1;
			}
			if (kind != C_END || c.a != k)
				return server_fail(s, "%zu B: expected END after %llu messages",
				                   size, (unsigned long long)k);
			break;
		}
		if (st.tag != k || st.len != size)
			return server_fail(s, "%zu B: message %llu arrived as tag %llu, %zu B",
			                   size, (unsigned long long)k, (unsigned long long)st.tag,
			                   st.len);
		if (s->verify) {
			unsigned want, got;
			long bad = rpp_pat_check(b, size, rpp_pat_seed(size, k), &want, &got);
			if (bad >= 0)
				return server_fail(
				    s,
				    "verify: %zu B message %llu: byte %ld is 0x%02x, "
				    "expected 0x%02x",
				    size, (unsigned long long)k, bad, got, want);
		}
		/* The echo goes out first: posting the next receive is off
		 * the round trip (the client cannot send before it has it). */
		rc = rcp_isend(s->ch, k, b, size, &sr);
		if (!rc)
			rc = rcp_irecv(s->ep, s->ch, RCP_ANY_TAG, buf[(k + 1) & 1], cap, &r);
		if (!rc)
			rc = rcp_wait(sr, NULL, ms_ns(o->timeout_ms));
		if (rc)
			return server_fail(s, "%zu B: echo %llu: %s", size, (unsigned long long)k,
			                   rcp_strerror(rc));
	}
	/* Nothing points into the buffers any more. */
	free(buf[0]);
	free(buf[1]);
	buf[0] = buf[1] = NULL;
	rpp_loss_stats(s->ep, &st0, "server", size, k);
	rc = rpp_ctrl_send(s->ch, C_END_ACK, 0, k, rpp_ep_retransmits(s->ep) - retx0, NULL,
	                   ms_ns(o->timeout_ms));
	if (rc)
		return server_fail(s, "%zu B: sending END_ACK: %s", size, rcp_strerror(rc));
	return 0;
}

/* Serves one client session; returns 0 or 1. */
static int serve_session(struct server *s)
{
	const struct opts *o = s->o;
	rcp_ep *ep = s->ep;
	unsigned char cbuf[CTRL_LEN];
	struct rcp_status st;
	struct ctrl c;
	rcp_req *r;
	int rc;

	/* The first client to speak becomes the session; nothing is pending
	 * before it, so a long sleep between checks costs nothing. */
	rc = rcp_irecv(ep, RCP_ANY_CHAN, TAG_CTRL | C_HELLO, cbuf, sizeof cbuf, &r);
	if (!rc)
		rc = rpp_idle_wait(ep, r, &st, -1, 50);
	if (rc)
		return server_fail(s, "waiting for a client: %s", rcp_strerror(rc));
	s->ch = st.chan;
	if (rpp_ctrl_unpack(cbuf, &st, &c) != C_HELLO)
		return server_fail(s, "malformed HELLO (version mismatch?)");
	s->verify |= (c.flags & CF_VERIFY) != 0;
	rc = rpp_ctrl_send(s->ch, C_HELLO_ACK, s->verify ? CF_VERIFY : 0, (uint64_t)o->mode, 0,
	                   NULL, ms_ns(o->timeout_ms));
	if (rc)
		return server_fail(s, "sending HELLO_ACK: %s", rcp_strerror(rc));
	for (;;) {
		rc = rcp_irecv(ep, s->ch, RCP_ANY_TAG, cbuf, sizeof cbuf, &r);
		if (!rc)
			rc = rpp_idle_wait(ep, r, &st, ms_ns(o->timeout_ms), 1);
		if (rc)
			return server_fail(s, "waiting for the client: %s", rcp_strerror(rc));
		switch (rpp_ctrl_unpack(cbuf, &st, &c)) {
		case C_SIZE:
			if (serve_size(s, (size_t)c.a))
				return 1;
			break;
		case C_BYE:
			/* The send completes once the client acked it (see
			 * CTRL_LEN); a client already gone is no failure. */
			rpp_ctrl_send(s->ch, C_BYE_ACK, 0, 0, 0, NULL, ms_ns(1000));
			return 0;
		case C_ERR:
			/* The client gave up; it says why. */
			fprintf(stderr, "%s: the client failed: %s\n", s->who, c.text);
			return 1;
		default:
			return server_fail(s, "unexpected control message (tag %#llx)",
			                   (unsigned long long)st.tag);
		}
	}
}

/* Serves one client on EP, then closes EP; returns 0 or 1. */
int rpp_serve(const struct opts *o, rcp_ep *ep, const char *who)
{
	struct server s = {o, ep, NULL, o->verify, who, {NULL, NULL}};
	int rc = serve_session(&s);

	/* After a failure a receive may still point into the buffers: the
	 * endpoint goes first. */
	rcp_ep_close(ep);
	free(s.buf[0]);
	free(s.buf[1]);
	return rc;
}
