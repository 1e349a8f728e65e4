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
 * when its waits really sleep, 0 when they spin).  The wait mode is not a
 * column: a run has one; perf/sweep.sh prepends it when it merges runs.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rcp/rcp.h>

#include "perf/tcp_pingpong.h"

#define PROG      "rcp-pingpong"
#define MAX_SIZES 256

/* Data messages are tagged with their sequence number (< 2^62); control
 * messages with TAG_CTRL | kind. */
#define TAG_CTRL (1ull << 62)
enum ctrl_kind {
	C_HELLO = 1, /* client: flags CF_VERIFY */
	C_HELLO_ACK, /* server: its wait mode in a, CF_VERIFY if it verifies */
	C_SIZE,      /* client: a = message size */
	C_SIZE_ACK,  /* server: buffers ready, next receive posted */
	C_END,       /* client: a = data messages sent at this size */
	C_END_ACK,   /* server: a = messages echoed, b = its retransmissions */
	C_BYE,
	C_BYE_ACK,
	C_ERR, /* either side: text says what went wrong */
};
#define CF_VERIFY 1u

#define CTRL_MAGIC   0x52505050u /* "RPPP" */
#define CTRL_VERSION 1u
/* Control messages are padded to CTRL_LEN bytes.  Above the core's inline
 * limit (256 B) an eager send completes only once the peer acknowledged
 * it, so the server knows its BYE_ACK arrived before it closes.  Receive
 * buffers are never smaller than this, so a C_ERR sent instead of an echo
 * is never truncated. */
#define CTRL_LEN 512

struct ctrl {
	uint32_t magic, version, kind, flags;
	uint64_t a, b;
	char text[CTRL_LEN - 32];
};
_Static_assert(sizeof(struct ctrl) == CTRL_LEN, "control message size");

struct opts {
	const char *transport; /* "shm" or "udp" */
	size_t sizes[MAX_SIZES];
	int nsizes;
	long iters, warmup, timeout_ms;
	uint64_t target_ns;
	int verify, compare_tcp, csv, pin;
	int idle_chans; /* idle channels the client's endpoint also holds */
	enum pp_mode mode;
	int64_t spin_ns;
	const char *faults; /* NULL: nic default (RCP_FAULTS) */
	const char *listen, *connect, *local;
};

static int64_t ms_ns(long ms)
{
	return (int64_t)ms * 1000000;
}

/* ---- control messages ----------------------------------------------------- */

/* Control messages are little-endian on the wire so a client and server of
 * different byte order agree. */
static void ctrl_pack(struct ctrl *c, unsigned kind, unsigned flags, uint64_t a, uint64_t b,
                      const char *text)
{
	memset(c, 0, sizeof *c);
	c->magic = htole32(CTRL_MAGIC);
	c->version = htole32(CTRL_VERSION);
	c->kind = htole32(kind);
	c->flags = htole32(flags);
	c->a = htole64(a);
	c->b = htole64(b);
	if (text)
		snprintf(c->text, sizeof c->text, "%s", text);
}

/* Decodes a received control message; returns its kind or 0 if malformed. */
static unsigned ctrl_unpack(const void *buf, const struct rcp_status *st, struct ctrl *c)
{
	if (st->len != CTRL_LEN || !(st->tag & TAG_CTRL))
		return 0;
	memcpy(c, buf, sizeof *c);
	c->magic = le32toh(c->magic);
	c->version = le32toh(c->version);
	c->kind = le32toh(c->kind);
	c->flags = le32toh(c->flags);
	c->a = le64toh(c->a);
	c->b = le64toh(c->b);
	c->text[sizeof c->text - 1] = 0;
	if (c->magic != CTRL_MAGIC || c->version != CTRL_VERSION || st->tag != (TAG_CTRL | c->kind))
		return 0;
	return c->kind;
}

static int ctrl_send(rcp_chan *ch, unsigned kind, unsigned flags, uint64_t a, uint64_t b,
                     const char *text, int64_t timeout_ns)
{
	struct ctrl c;
	rcp_req *r;
	int rc;

	ctrl_pack(&c, kind, flags, a, b, text);
	rc = rcp_isend(ch, TAG_CTRL | kind, &c, sizeof c, &r);
	return rc ? rc : rcp_wait(r, NULL, timeout_ns);
}

/* Waits for REQ like rcp_wait, but always asleep on the endpoint fd: for
 * the server's idle moments (between sizes, before the first client),
 * whatever the endpoint's wait mode.  POLL_MS bounds each sleep because
 * the API does not tell when the core's next timer (retransmission,
 * delayed ack) is due. */
static int idle_wait(rcp_ep *ep, rcp_req *req, struct rcp_status *st, int64_t timeout_ns,
                     int poll_ms)
{
	uint64_t until = timeout_ns < 0 ? UINT64_MAX : pp_now_ns() + (uint64_t)timeout_ns;
	struct pollfd pfd = {rcp_ep_fd(ep), POLLIN, 0};
	int rc;

	for (;;) {
		rc = rcp_test(req, st);
		if (rc != RCP_EAGAIN)
			return rc;
		if (pp_now_ns() >= until)
			return RCP_ETIMEDOUT;
		rc = rcp_ep_arm(ep);
		if (rc == RCP_EAGAIN)
			continue;
		if (rc)
			return rc;
		if (poll(&pfd, 1, poll_ms) < 0 && errno != EINTR)
			return RCP_ESYS;
	}
}

/* ---- the verification pattern ---------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
	/* splitmix64's finaliser: every input bit flips half the output. */
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Unique per (size, sequence): a stale buffer from the previous round
 * trip, or a message of another size, never passes the check. */
static uint64_t pat_seed(size_t size, uint64_t seq)
{
	return mix64(mix64(size) ^ seq);
}

static void pat_fill(unsigned char *p, size_t len, uint64_t seed)
{
	size_t i;
	uint64_t w;

	for (i = 0; i + 8 <= len; i += 8) {
		w = htole64(mix64(seed + i));
		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		w = htole64(mix64(seed + i));
		memcpy(p + i, &w, len - i);
	}
}

/* Returns -1 if P holds the pattern, else the offset of the first bad
 * byte (with the byte expected and the byte found).  Whole words are
 * compared as integers: a memcmp() call per word was 8x slower, and the
 * server's check is inside the client's round trip. */
static long pat_check(const unsigned char *p, size_t len, uint64_t seed, unsigned *want,
                      unsigned *got)
{
	unsigned char ref[8];
	size_t i, n;
	uint64_t w, v;

	for (i = 0; i + 8 <= len; i += 8) {
		w = htole64(mix64(seed + i));
		memcpy(&v, p + i, 8);
		if (v != w)
			break;
	}
	if (i >= len)
		return -1;
	n = len - i < 8 ? len - i : 8;
	w = htole64(mix64(seed + i));
	memcpy(ref, &w, 8);
	for (size_t j = 0; j < n; j++) {
		if (p[i + j] != ref[j]) {
			*want = ref[j];
			*got = p[i + j];
			return (long)(i + j);
		}
	}
	return -1;
}

/* ---- buffers ----------------------------------------------------------------- */

static unsigned char *buf_alloc(size_t len)
{
	void *p;
	size_t n = (len + 4095) & ~(size_t)4095;

	if (posix_memalign(&p, 4096, n))
		return NULL;
	/* Touched now, so no page fault lands inside a timed round trip. */
	memset(p, 0xa5, n);
	return p;
}

static size_t cap_for(size_t size)
{
	return size > CTRL_LEN ? size : CTRL_LEN;
}

/* ---- endpoints -------------------------------------------------------------- */

static int open_ep(const struct opts *o, const char *addr, int accept, rcp_ep **ep)
{
	struct rcp_nic_config nc = {0};
	struct rcp_ep_config ec = {0};
	int rc;

	ec.flags = accept ? RCP_EP_ACCEPT : 0;
	if (o->mode == PP_SPIN)
		ec.flags |= RCP_EP_SPIN;
	else if (o->mode == PP_SLEEP)
		ec.flags |= RCP_EP_SLEEP;
	ec.crc = -1;
	if (o->faults) {
		nc.faults = o->faults;
		ec.nic = &nc;
	}
	rc = rcp_ep_open(addr, &ec, ep);
	if (rc)
		fprintf(stderr, PROG ": cannot open endpoint %s: %s\n", addr, rcp_strerror(rc));
	return rc;
}

/* Is fault injection on for our endpoints (--faults, else RCP_FAULTS)? */
static int faults_on(const struct opts *o)
{
	const char *env = getenv("RCP_FAULTS");
	return o->faults ? *o->faults != 0 : env && *env;
}

static uint64_t ep_retransmits(const rcp_ep *ep)
{
	struct rcp_ep_stats s;
	return rcp_ep_get_stats(ep, &s) ? 0 : s.retransmits;
}

/* ---- server ------------------------------------------------------------------- */

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
		ctrl_send(s->ch, C_ERR, 0, 0, 0, text, ms_ns(1000));
	return 1;
}

/* Echoes SIZE-byte messages until C_END.  Two buffers alternate so the
 * next receive is posted before the echo leaves from the other one. */
static int serve_size(struct server *s, size_t size)
{
	const struct opts *o = s->o;
	size_t cap = cap_for(size);
	unsigned char **buf = s->buf;
	uint64_t retx0 = ep_retransmits(s->ep);
	struct rcp_status st;
	struct ctrl c;
	rcp_req *r;
	uint64_t k;
	int rc;

	buf[0] = buf_alloc(cap);
	buf[1] = buf_alloc(cap);
	if (!buf[0] || !buf[1])
		return server_fail(s, "no memory for two %zu-byte buffers", cap);
	rc = rcp_irecv(s->ep, s->ch, RCP_ANY_TAG, buf[0], cap, &r);
	if (rc)
		return server_fail(s, "%zu B: irecv: %s", size, rcp_strerror(rc));
	rc = ctrl_send(s->ch, C_SIZE_ACK, 0, size, 0, NULL, ms_ns(o->timeout_ms));
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
			unsigned kind = ctrl_unpack(b, &st, &c);
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
			long bad = pat_check(b, size, pat_seed(size, k), &want, &got);
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
	rc = ctrl_send(s->ch, C_END_ACK, 0, k, ep_retransmits(s->ep) - retx0, NULL,
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
		rc = idle_wait(ep, r, &st, -1, 50);
	if (rc)
		return server_fail(s, "waiting for a client: %s", rcp_strerror(rc));
	s->ch = st.chan;
	if (ctrl_unpack(cbuf, &st, &c) != C_HELLO)
		return server_fail(s, "malformed HELLO (version mismatch?)");
	s->verify |= (c.flags & CF_VERIFY) != 0;
	rc = ctrl_send(s->ch, C_HELLO_ACK, s->verify ? CF_VERIFY : 0, (uint64_t)o->mode, 0, NULL,
	               ms_ns(o->timeout_ms));
	if (rc)
		return server_fail(s, "sending HELLO_ACK: %s", rcp_strerror(rc));
	for (;;) {
		rc = rcp_irecv(ep, s->ch, RCP_ANY_TAG, cbuf, sizeof cbuf, &r);
		if (!rc)
			rc = idle_wait(ep, r, &st, ms_ns(o->timeout_ms), 1);
		if (rc)
			return server_fail(s, "waiting for the client: %s", rcp_strerror(rc));
		switch (ctrl_unpack(cbuf, &st, &c)) {
		case C_SIZE:
			if (serve_size(s, (size_t)c.a))
				return 1;
			break;
		case C_BYE:
			/* The send completes once the client acked it (see
			 * CTRL_LEN); a client already gone is no failure. */
			ctrl_send(s->ch, C_BYE_ACK, 0, 0, 0, NULL, ms_ns(1000));
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
static int serve(const struct opts *o, rcp_ep *ep, const char *who)
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

/* ---- client ------------------------------------------------------------------- */

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
	got = ctrl_unpack(buf, &st, msg);
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
		pat_fill(c->sbuf, c->size, pat_seed(c->size, (uint64_t)seq));
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
			if (ctrl_unpack(c->rbuf, &st, &m) == C_ERR)
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
		if (ctrl_unpack(c->rbuf, &st, &m) == C_ERR)
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
		long bad =
		    pat_check(c->rbuf, c->size, pat_seed(c->size, (uint64_t)seq), &want, &got);
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

struct row {
	struct pp_result rcp, tcp;
	int have_tcp;
	uint64_t retx;
	double csw_per_rt; /* client's voluntary context switches per round trip */
};

static long voluntary_csw(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_nvcsw;
}

static void print_header(const struct opts *o)
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

static void print_row(const struct opts *o, size_t size, const struct row *r)
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
	uint64_t retx0 = ep_retransmits(c->ep);
	long csw0;
	struct ctrl m;
	int rc;

	c->size = size;
	c->cap = cap_for(size);
	c->sent = 0;
	free(c->sbuf);
	free(c->rbuf);
	c->sbuf = buf_alloc(c->cap);
	c->rbuf = buf_alloc(c->cap);
	if (!c->sbuf || !c->rbuf) {
		snprintf(c->err, sizeof c->err, "no memory for two %zu-byte buffers", c->cap);
		return 1;
	}
	rc = ctrl_send(c->ch, C_SIZE, 0, size, 0, NULL, ms_ns(o->timeout_ms));
	if (rc) {
		snprintf(c->err, sizeof c->err, "sending SIZE: %s", rcp_strerror(rc));
		return 1;
	}
	if (ctrl_expect(c, C_SIZE_ACK, &m))
		return 1;
	csw0 = voluntary_csw();
	rc = pp_run(rcp_bounce, c, size, o->iters, o->warmup, o->target_ns, &row->rcp);
	/* Tells whether waits really slept (about 1 per round trip) or spun
	 * (about 0): the mode's label alone does not prove it. */
	row->csw_per_rt = (double)(voluntary_csw() - csw0) / (double)(c->sent ? c->sent : 1);
	if (rc) {
		if (rc < 0)
			snprintf(c->err, sizeof c->err, "out of memory");
		return 1;
	}
	rc = ctrl_send(c->ch, C_END, 0, c->sent, 0, NULL, ms_ns(o->timeout_ms));
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
	row->retx = ep_retransmits(c->ep) - retx0 + m.b;
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
		if (open_ep(o, a, 0, &idle[i]))
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
	rc = ctrl_send(c->ch, C_HELLO, o->verify ? CF_VERIFY : 0, 0, 0, NULL, ms_ns(o->timeout_ms));
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
	print_header(o);
	for (int i = 0; i < o->nsizes; i++) {
		if (client_size(c, o->sizes[i], &rows[i])) {
			fprintf(stderr, PROG ": %s %zu B: %s\n", o->transport, o->sizes[i], c->err);
			/* Tell a server that is still listening why we stop. */
			ctrl_send(c->ch, C_ERR, 0, 0, 0, c->err, ms_ns(200));
			return 1;
		}
		print_row(o, o->sizes[i], &rows[i]);
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
	rc = ctrl_send(c->ch, C_BYE, 0, 0, 0, NULL, ms_ns(o->timeout_ms));
	if (rc || ctrl_expect(c, C_BYE_ACK, &m)) {
		fprintf(stderr, PROG ": ending the session: %s\n", rc ? rcp_strerror(rc) : c->err);
		fail = 1;
	}
	/* Under injected faults our ack of BYE_ACK may be lost; stay a few
	 * retransmission timeouts so the server's resend is answered. */
	if (faults_on(o))
		linger(c->ep, 100);
	return fail;
}

/* Runs every size against the server at SERVER; prints a row per size.
 * Returns 0 or 1. */
static int run_client(const struct opts *o, rcp_ep *ep, const char *server, struct row *rows)
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

/* ---- addresses ------------------------------------------------------------------- */

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

/* ---- the three ways to run ------------------------------------------------------- */

static int run_listen(const struct opts *o)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	rcp_ep *ep;

	if (o->pin)
		pp_pin_cpu(1);
	if (open_ep(o, o->listen, 1, &ep))
		return 1;
	if (rcp_ep_addr(ep, addr, sizeof addr))
		snprintf(addr, sizeof addr, "%s", o->listen);
	printf(PROG ": serving %s (wait: %s%s), one session\n", addr, pp_mode_name(o->mode),
	       o->verify ? ", verifying" : "");
	fflush(stdout);
	return serve(o, ep, PROG);
}

static int run_connect(const struct opts *o, struct row *rows)
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
	if (open_ep(o, me, 0, &ep))
		return 1;
	return run_client(o, ep, o->connect, rows);
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
static int run_local(const struct opts *o, struct row *rows)
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
		if (open_ep(o, saddr, 1, &ep))
			_exit(1);
		rcp_ep_addr(ep, saddr, sizeof saddr);
		if (write(pfd[1], saddr, sizeof saddr) != (ssize_t)sizeof saddr)
			_exit(1);
		close(pfd[1]);
		rc = serve(o, ep, PROG " (server)");
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
	if (open_ep(o, caddr, 0, &ep))
		goto out;
	rc = run_client(o, ep, saddr, rows);
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
static int run_tcp_remote(const struct opts *o, struct row *rows)
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
	print_header(o);
	for (int i = 0; i < o->nsizes; i++) {
		if (!o->sizes[i])
			continue; /* TCP has no zero-byte message */
		tc.size = o->sizes[i];
		if (tcp_pp_client(&tc, host, port + 1, &rows[i].rcp))
			return 1;
		print_row(o, o->sizes[i], &rows[i]);
	}
	tc.size = 0; /* the server's end */
	return tcp_pp_client(&tc, host, port + 1, NULL) ? 1 : 0;
}

/* Kernel TCP for every size first, while no RCP process exists yet to
 * compete for the CPUs.  Returns 0 or 1. */
static int run_tcp(const struct opts *o, struct row *rows)
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
    "those timers (descheduled) draws resends on a link that lost nothing.\n"
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
		return run_tcp_remote(&o, rows);
	if (o.listen)
		return run_listen(&o);
	if (o.compare_tcp && run_tcp(&o, rows))
		return 1;
	rc = o.connect ? run_connect(&o, rows) : run_local(&o, rows);
	return rc ? 1 : 0;
}
