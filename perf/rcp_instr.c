/*
 * rcp-instr — the round trips that perf/callgrind.sh counts instructions
 * of (issue 19, item 5).  Time on these shared 2-vCPU VMs varies by 2x
 * between runs; callgrind's instruction count does not, so this is the
 * figure the small-message path is tuned against.
 *
 *   rcp-instr nic  N    (a) the bare shm nic frame: two nic endpoints in
 *                       this process, 8 B frame A -> B, then B -> A
 *   rcp-instr chan N    (b) an RCP channel: two rcp endpoints in this
 *                       process, rcp_irecv posted ahead, rcp_isend of 8 B
 *                       A -> B and back, progressing both endpoints
 *
 * Each mode runs N/10 + 10 warm-up round trips, then N counted ones with
 * callgrind's collection toggled on (CALLGRIND_TOGGLE_COLLECT, run with
 * --collect-atstart=no), so start-up, connection set-up and tear-down are
 * left out.  Both endpoints are in one thread: nothing ever waits, a
 * frame is in the peer's ring when its receiver looks, so the count is
 * the work of one round trip, both sides (two sends, two receives).
 * Outside valgrind the toggles are no-ops and the program is an ordinary
 * (slow-looped) ping-pong.  It prints one line
 *   MODE rt=N frames=F polls=P
 * F: frames sent by both sides while counting, P: looks at an endpoint
 * (nic receives or rcp_progress/rcp_test calls) while counting; both per
 * N round trips, so a change that adds frames or polls shows next to
 * the instruction count.  Every echo is checked (exit 1 if wrong).
 * Relinked PVM (c) is perf/rcp_instr_pvm.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rcp/rcp.h>

#include "perf/instr.h"

#define TAG 7

static int nic_mode(long n)
{
	char aa[64], ab[64];
	struct rcp_nic_config nc = {.faults = "", .key = ""};
	struct rcp_nic_stats sa, sb;
	struct rcp_nic_frame f;
	rcp_nic *a, *b;
	int pa, pb, rc;
	uint64_t polls = 0, tx0;
	unsigned char msg[8] = {0}, echo[8];
	struct iovec iov;

	snprintf(aa, sizeof aa, "shm:rcp-instr-%d-a", (int)getpid());
	snprintf(ab, sizeof ab, "shm:rcp-instr-%d-b", (int)getpid());
	if ((rc = rcp_nic_open(aa, &nc, &a)) || (rc = rcp_nic_open(ab, &nc, &b))) {
		fprintf(stderr, "rcp-instr: nic open: %s\n", rcp_strerror(rc));
		return 1;
	}
	if (rcp_nic_peer_add_str(a, ab, &pb) || rcp_nic_peer_add_str(b, aa, &pa)) {
		fprintf(stderr, "rcp-instr: peer_add failed\n");
		return 1;
	}
	rcp_nic_get_stats(a, &sa);
	rcp_nic_get_stats(b, &sb);
	tx0 = sa.tx_frames + sb.tx_frames;
	for (long i = -(n / 10) - 10; i < n; i++) {
		if (i == 0) {
			rcp_nic_get_stats(a, &sa);
			rcp_nic_get_stats(b, &sb);
			tx0 = sa.tx_frames + sb.tx_frames;
			polls = 0;
			INSTR_TOGGLE();
		}
		memcpy(msg, &i, sizeof i < sizeof msg ? sizeof i : sizeof msg);
		/* A -> B */
		iov.iov_base = msg;
		iov.iov_len = sizeof msg;
		while ((rc = rcp_nic_send(a, pb, &iov, 1, 0)) == RCP_EAGAIN)
			;
		if (rc)
			goto fail;
		do
			polls++;
		while ((rc = rcp_nic_recv(b, &f, 1)) == 0);
		if (rc < 0 || f.len != sizeof msg)
			goto fail;
		memcpy(echo, f.data, sizeof echo);
		rcp_nic_release(b, &f, 1);
		/* B -> A */
		iov.iov_base = echo;
		while ((rc = rcp_nic_send(b, pa, &iov, 1, 0)) == RCP_EAGAIN)
			;
		if (rc)
			goto fail;
		do
			polls++;
		while ((rc = rcp_nic_recv(a, &f, 1)) == 0);
		if (rc < 0 || f.len != sizeof msg || memcmp(f.data, msg, sizeof msg))
			goto fail;
		rcp_nic_release(a, &f, 1);
	}
	INSTR_TOGGLE();
	rcp_nic_get_stats(a, &sa);
	rcp_nic_get_stats(b, &sb);
	printf("nic rt=%ld frames=%llu polls=%llu\n", n,
	       (unsigned long long)(sa.tx_frames + sb.tx_frames - tx0), (unsigned long long)polls);
	rcp_nic_close(a);
	rcp_nic_close(b);
	return 0;
fail:
	fprintf(stderr, "rcp-instr: nic round trip failed (%d)\n", rc);
	rcp_nic_close(a);
	rcp_nic_close(b);
	return 1;
}

/* Progresses both endpoints until R completes (rcp_test progresses R's
 * endpoint; the other one is progressed too, as a program holding both
 * would).  Returns rcp_test's result; counts the calls in *POLLS. */
static int drive(rcp_req *r, rcp_ep *other, uint64_t *polls)
{
	int rc;
	for (;;) {
		++*polls;
		rc = rcp_test(r, NULL);
		if (rc != RCP_EAGAIN)
			return rc;
		++*polls;
		rcp_progress(other);
	}
}

static int chan_mode(long n)
{
	char aa[64], ab[64];
	struct rcp_nic_config nc = {.faults = "", .key = ""};
	struct rcp_ep_config ec = {.nic = &nc, .flags = RCP_EP_SPIN};
	struct rcp_ep_stats sa, sb;
	rcp_ep *a, *b;
	rcp_chan *cab, *cba;
	rcp_req *ra = NULL, *rb = NULL, *s;
	uint64_t polls = 0, f0 = 0;
	unsigned char msg[8] = {0}, got_b[8], got_a[8];
	int rc;

	snprintf(aa, sizeof aa, "shm:rcp-instr-%d-a", (int)getpid());
	snprintf(ab, sizeof ab, "shm:rcp-instr-%d-b", (int)getpid());
	if ((rc = rcp_ep_open(aa, &ec, &a)) || (rc = rcp_ep_open(ab, &ec, &b)) ||
	    (rc = rcp_connect(a, ab, &cab)) || (rc = rcp_connect(b, aa, &cba))) {
		fprintf(stderr, "rcp-instr: endpoints: %s\n", rcp_strerror(rc));
		return 1;
	}
	if ((rc = rcp_irecv(b, cba, TAG, got_b, sizeof got_b, &rb)))
		goto fail;
	for (long i = -(n / 10) - 10; i < n; i++) {
		if (i == 0) {
			rcp_ep_get_stats(a, &sa);
			rcp_ep_get_stats(b, &sb);
			f0 = sa.frames_sent + sb.frames_sent;
			polls = 0;
			INSTR_TOGGLE();
		}
		memcpy(msg, &i, sizeof i < sizeof msg ? sizeof i : sizeof msg);
		/* A posts the echo's receive, sends; B's receive is posted. */
		if ((rc = rcp_irecv(a, cab, TAG, got_a, sizeof got_a, &ra)) ||
		    (rc = rcp_isend(cab, TAG, msg, sizeof msg, &s)))
			goto fail;
		if ((rc = drive(s, b, &polls)) || (rc = drive(rb, a, &polls)))
			goto fail;
		rb = NULL;
		/* B echoes and posts its next receive. */
		if ((rc = rcp_isend(cba, TAG, got_b, sizeof got_b, &s)) ||
		    (rc = drive(s, a, &polls)))
			goto fail;
		if ((rc = drive(ra, b, &polls)))
			goto fail;
		ra = NULL;
		if (memcmp(got_a, msg, sizeof msg)) {
			rc = RCP_EPROTO;
			goto fail;
		}
		if ((rc = rcp_irecv(b, cba, TAG, got_b, sizeof got_b, &rb)))
			goto fail;
	}
	INSTR_TOGGLE();
	rcp_ep_get_stats(a, &sa);
	rcp_ep_get_stats(b, &sb);
	printf("chan rt=%ld frames=%llu polls=%llu\n", n,
	       (unsigned long long)(sa.frames_sent + sb.frames_sent - f0),
	       (unsigned long long)polls);
	rcp_ep_close(a); /* completes rb with RCP_ECLOSED */
	rcp_ep_close(b);
	return 0;
fail:
	fprintf(stderr, "rcp-instr: channel round trip failed: %s\n", rcp_strerror(rc));
	rcp_ep_close(a);
	rcp_ep_close(b);
	return 1;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 0;
	if (argc != 3 || n < 1) {
		fprintf(stderr, "usage: %s nic|chan ROUND_TRIPS\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "nic"))
		return nic_mode(n);
	if (!strcmp(argv[1], "chan"))
		return chan_mode(n);
	fprintf(stderr, "%s: unknown mode %s (nic|chan)\n", argv[0], argv[1]);
	return 2;
}
