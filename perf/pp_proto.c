/*
 * perf/pp_proto.c — what both ends of rcp-pingpong share: the control
 * messages that frame each size, the idle wait, the verification pattern,
 * buffers, and opening an endpoint.
 *
 * Why a file: the client (pp_client.c) and the echo server (pp_server.c)
 * must agree on every byte of the control protocol and of the pattern; with
 * one definition each, they cannot drift apart.  Control messages are
 * little-endian and padded to CTRL_LEN (perf/rcp_pingpong.h says why); the
 * pattern is unique to (size, sequence), so a message delivered to the
 * wrong slot or twice fails --verify as surely as a flipped byte.
 *
 * Calls only the RCP API.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/rcp.h>

#include "perf/rcp_pingpong.h"

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
unsigned rpp_ctrl_unpack(const void *buf, const struct rcp_status *st, struct ctrl *c)
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

int rpp_ctrl_send(rcp_chan *ch, unsigned kind, unsigned flags, uint64_t a, uint64_t b,
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
int rpp_idle_wait(rcp_ep *ep, rcp_req *req, struct rcp_status *st, int64_t timeout_ns, int poll_ms)
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
uint64_t rpp_pat_seed(size_t size, uint64_t seq)
{
	return mix64(mix64(size) ^ seq);
}

void rpp_pat_fill(unsigned char *p, size_t len, uint64_t seed)
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
long rpp_pat_check(const unsigned char *p, size_t len, uint64_t seed, unsigned *want, unsigned *got)
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

unsigned char *rpp_buf_alloc(size_t len)
{
	void *p;
	size_t n = (len + 4095) & ~(size_t)4095;

	if (posix_memalign(&p, 4096, n))
		return NULL;
	/* Touched now, so no page fault lands inside a timed round trip. */
	memset(p, 0xa5, n);
	return p;
}

size_t rpp_cap_for(size_t size)
{
	return size > CTRL_LEN ? size : CTRL_LEN;
}

int rpp_open_ep(const struct opts *o, const char *addr, int accept, rcp_ep **ep)
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
int rpp_faults_on(const struct opts *o)
{
	const char *env = getenv("RCP_FAULTS");
	return o->faults ? *o->faults != 0 : env && *env;
}

uint64_t rpp_ep_retransmits(const rcp_ep *ep)
{
	struct rcp_ep_stats s;
	return rcp_ep_get_stats(ep, &s) ? 0 : s.retransmits;
}

/* Prints on stderr what loss recovery cost WHO's endpoint EP since
 * snapshot *S0 over MSGS messages of SIZE bytes: frames resent, of those
 * by RACK (a later frame arrived), tail-loss probes, retransmission
 * timeouts, frames the endpoint took twice or out of order, and the
 * ACK frames and all frames it sent (perf/cluster_bench.sh adds both
 * ends' lines to its CSV). */
/* A sum over its count (0 for none). */
static double per(uint64_t sum, uint64_t n)
{
	return n ? (double)sum / (double)n : 0.0;
}

void rpp_loss_stats(const rcp_ep *ep, const struct rcp_ep_stats *s0, const char *who, size_t size,
                    uint64_t msgs)
{
	struct rcp_ep_stats s;
	memset(&s, 0, sizeof s);
	if (rcp_ep_get_stats(ep, &s))
		return;
	fprintf(
	    stderr,
	    "loss-stats %s size %zu msgs %llu retx %llu rack %llu tlp %llu rto %llu dup %llu "
	    "ooo %llu acks %llu frames %llu rtt_us %.1f pipe %.1f rackwait_us %.1f srtt_us %.1f "
	    "rttvar_us %.1f minrtt_us %.1f cwnd %llu\n",
	    who, size, (unsigned long long)msgs,
	    (unsigned long long)(s.retransmits - s0->retransmits),
	    (unsigned long long)(s.rack_resends - s0->rack_resends),
	    (unsigned long long)(s.tlp_probes - s0->tlp_probes),
	    (unsigned long long)(s.timeouts - s0->timeouts),
	    (unsigned long long)(s.dup_frames - s0->dup_frames),
	    (unsigned long long)(s.ooo_frames - s0->ooo_frames),
	    (unsigned long long)(s.acks_sent - s0->acks_sent),
	    (unsigned long long)(s.frames_sent - s0->frames_sent),
	    per(s.rtt_sum_ns - s0->rtt_sum_ns, s.rtt_samples - s0->rtt_samples) / 1e3,
	    per(s.pipe_sum - s0->pipe_sum, s.rtt_samples - s0->rtt_samples),
	    per(s.rack_wait_ns - s0->rack_wait_ns, s.rack_resends - s0->rack_resends) / 1e3,
	    s.srtt_ns / 1e3, s.rttvar_ns / 1e3, s.min_rtt_ns / 1e3,
	    (unsigned long long)s.cwnd_frames);
}
