/*
 * tests/pvm/pvmt_down.c — a host lost mid-stream (issue 20 item 2), run by
 * tests/cluster_down.sh on a 4-host rcp-cluster VM.
 *
 *   pvmt-down master NHOSTS AFTER     (on h1; spawns "worker" on h2..hN)
 *
 * Every task (the master and one worker per other host), once all have
 * said they run, streams to every other: round r, each psends r to each
 * live peer, then precvs r from each live peer.  After 100 rounds the
 * master prints "streaming" (the script then cuts the last host off: link
 * down, every process on it killed, so no FIN, RST or ICMP ever leaves
 * it).  A psend or precv involving the
 * lost task must return an error (PvmNoTask) once RCP's peer timeout
 * (RCP_PEER_TIMEOUT) ran out, never block for good; the survivor marks
 * that peer dead and streams on with the others, whose messages must all
 * arrive in order, until the agreed last round (THE END below), at least
 * AFTER rounds after its own loss.  Then each worker sends the master
 * its counts and waits for the master's goodbye, and the master prints,
 * per task:
 *   task hI: before N, errors E (first rc R), after A rounds, ..., last round L
 * (N: messages received from the lost task; E: error returns involving
 * it; A: rounds completed after its loss; L: its last round, the same for
 * all) and "ok" or "not ok: why".
 * A task that blocks for good is caught by the script's outer timeout.
 * The printed time from the last message of the lost task to the error
 * is for the reader, not asserted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rcp/pvmrcp.h> /* includes pvm3.h; pvm_rcp_route */

#define MAXT     16
#define T_LIST   10
#define T_DATA   11
#define T_REPORT 12
#define T_READY  13
#define T_BYE    14
#define READY_AT 100     /* rounds before the master says "streaming" */
#define MAXROUND 2000000 /* nobody died by then: give up (a broken run) */

struct counts {
	int32_t host;      /* this task's host number */
	int32_t before;    /* messages received from the lost task */
	int32_t errors;    /* error returns involving it */
	int32_t first_rc;  /* the first of them */
	int32_t after;     /* rounds completed after its loss */
	int32_t bad;       /* wrong payloads or errors from a survivor */
	int32_t detect_ms; /* last message from the lost task -> its error */
	int32_t end;       /* the agreed last round (THE END) */
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* THE END.  Tasks see the loss at different rounds: each one when its own
 * psend or precv naming the lost task fails, after the peer timeout counted
 * from its own last frame (on a loaded machine the master saw it ~200 ms,
 * a few rounds, after the workers).  Until session 18 each task stopped
 * AFTER rounds after its own loss round, so a task that saw it later still
 * streamed when the others were done and gone, and got PvmNoTask from
 * survivors.  Now every data message carries {round, the sender's loss
 * round (0: not yet)}; once a task knows its own loss round and that of
 * every peer it still streams with, the last round is the largest of them
 * plus AFTER.  Every survivor computes it from the same values, and learns
 * the last one a round after it is set, long before that end (AFTER > 1),
 * so all stop after the same round.  Leaving is agreed as well: a worker
 * exits only after the master's goodbye (T_BYE), sent once every report is
 * in, so no survivor leaves while another may still receive from it. */
#define MSGLEN 2

/* Streams with TIDS[0..n-1] (ours among them) until one peer is lost and
 * the agreed last round passed.  Only the task on host LOST may fail. */
static void stream(const int *tids, const int *hosts, int n, int after, int is_master,
                   struct counts *c)
{
	int me = pvm_mytid(), live[MAXT];
	int32_t lost_round = 0, peer_lost[MAXT] = {0}, end = 0;
	double last_from_lost = now_ms();

	for (int k = 0; k < n; k++)
		live[k] = tids[k] != me;
	/* No warm-up: round 1 is every pair's first contact, both tasks'
	 * first psends crossing, as a relinked program meets it (until
	 * session 17 the test made contact pair by pair and waited for RCP
	 * routes, to keep out the glue bugs that hung it: pvmt first-contact). */
	for (int32_t r = 1; r < MAXROUND; r++) {
		int32_t out[MSGLEN] = {r, lost_round};
		for (int k = 0; k < n; k++) {
			int rc;
			if (!live[k])
				continue;
			rc = pvm_psend(tids[k], T_DATA, out, MSGLEN, PVM_INT);
			if (rc < 0) {
				if (hosts[k] != n)
					c->bad++;
				if (!c->errors++) {
					c->first_rc = rc;
					c->detect_ms = (int32_t)(now_ms() - last_from_lost);
				}
				live[k] = 0;
			}
		}
		for (int k = 0; k < n; k++) {
			int32_t v[MSGLEN] = {-1, 0};
			int atid, atag, alen, rc;
			if (!live[k])
				continue;
			rc = pvm_precv(tids[k], T_DATA, v, MSGLEN, PVM_INT, &atid, &atag, &alen);
			if (rc < 0 || v[0] != r) {
				if (hosts[k] != n || rc >= 0)
					c->bad++;
				if (rc < 0 && !c->errors++) {
					c->first_rc = rc;
					c->detect_ms = (int32_t)(now_ms() - last_from_lost);
				}
				live[k] = 0;
			} else {
				if (hosts[k] == n) {
					c->before++;
					last_from_lost = now_ms();
				}
				if (!peer_lost[k] && v[1] > 0)
					peer_lost[k] = v[1];
			}
		}
		if (is_master && r == READY_AT) {
			printf("streaming\n");
			fflush(stdout);
		}
		if (!lost_round && c->errors)
			lost_round = r;
		if (lost_round && !end) {
			int32_t last = lost_round;
			for (int k = 0; k < n && last; k++) {
				if (live[k] && !peer_lost[k])
					last = 0; /* not known yet */
				else if (live[k] && peer_lost[k] > last)
					last = peer_lost[k];
			}
			if (last)
				end = last + after;
		}
		if (end && r >= end) {
			c->after = r - lost_round;
			c->end = r;
			return;
		}
	}
	c->bad++; /* nobody was lost */
}

static int master(int nhosts, int after)
{
	int tids[MAXT], hosts[MAXT], rc = 0;
	struct counts c = {.host = 1};
	char arg[16], *argv[] = {"worker", arg, NULL};

	snprintf(arg, sizeof arg, "%d", after);
	tids[0] = pvm_mytid();
	hosts[0] = 1;
	for (int h = 2; h <= nhosts; h++) {
		char where[16];
		snprintf(where, sizeof where, "h%d", h);
		if (pvm_spawn("pvmt-down", argv, PvmTaskHost, where, 1, &tids[h - 1]) != 1) {
			printf("not ok: spawn on %s: %d\n", where, tids[h - 1]);
			return 1;
		}
		hosts[h - 1] = h;
	}
	for (int k = 1; k < nhosts; k++) {
		int32_t msg[2 * MAXT + 1];
		msg[0] = nhosts;
		for (int j = 0; j < nhosts; j++) {
			msg[1 + j] = tids[j];
			msg[1 + nhosts + j] = hosts[j];
		}
		msg[1 + 2 * nhosts] = hosts[k];
		if (pvm_psend(tids[k], T_LIST, msg, 2 + 2 * nhosts, PVM_INT) < 0) {
			printf("not ok: sending the task list\n");
			return 1;
		}
	}
	/* Everyone runs before anyone streams: a task still starting when a
	 * peer waits on it longer than the (short) peer timeout would be
	 * taken for lost. */
	for (int k = 1; k < nhosts; k++) {
		int32_t v;
		int atid, atag, alen;
		if (pvm_precv(tids[k], T_READY, &v, 1, PVM_INT, &atid, &atag, &alen) < 0) {
			printf("not ok: h%d never ready\n", hosts[k]);
			return 1;
		}
	}
	for (int k = 1; k < nhosts; k++)
		pvm_psend(tids[k], T_READY, &nhosts, 1, PVM_INT);
	stream(tids, hosts, nhosts, after, 1, &c);
	for (int k = 0; k < nhosts; k++) {
		struct counts w = c;
		int atid, atag, alen;
		if (k && hosts[k] == nhosts)
			continue; /* the lost one */
		if (k && pvm_precv(tids[k], T_REPORT, &w, sizeof w / 4, PVM_INT, &atid, &atag,
		                   &alen) < 0) {
			printf("not ok: no report from h%d\n", hosts[k]);
			rc = 1;
			continue;
		}
		printf("task h%d: before %d, errors %d (first rc %d), after %d rounds, "
		       "bad %d, %d ms from the last message to the error, last round %d\n",
		       w.host, w.before, w.errors, w.first_rc, w.after, w.bad, w.detect_ms, w.end);
		if (w.bad || w.errors < 1 || w.before < READY_AT || w.after < after ||
		    w.end != c.end) {
			printf("not ok: task h%d\n", w.host);
			rc = 1;
		}
	}
	/* Every report is in, so every survivor is past the last round:
	 * the workers may go. */
	for (int k = 1; k < nhosts; k++)
		if (hosts[k] != nhosts)
			pvm_psend(tids[k], T_BYE, &rc, 1, PVM_INT);
	if (!rc)
		printf("ok: every survivor saw the loss as an error and streamed on\n");
	fflush(stdout);
	return rc;
}

static int worker(int after)
{
	int32_t msg[2 * MAXT + 2];
	int tids[MAXT], hosts[MAXT], n, atid, atag, alen;
	struct counts c = {0};

	if (pvm_precv(pvm_parent(), T_LIST, msg, 2 * MAXT + 2, PVM_INT, &atid, &atag, &alen) < 0)
		return 1;
	n = msg[0];
	if (n < 2 || n > MAXT)
		return 1;
	for (int j = 0; j < n; j++) {
		tids[j] = msg[1 + j];
		hosts[j] = msg[1 + n + j];
	}
	c.host = msg[1 + 2 * n];
	if (pvm_psend(pvm_parent(), T_READY, &n, 1, PVM_INT) < 0 ||
	    pvm_precv(pvm_parent(), T_READY, msg, 1, PVM_INT, &atid, &atag, &alen) < 0)
		return 1;
	stream(tids, hosts, n, after, 0, &c);
	if (pvm_psend(pvm_parent(), T_REPORT, &c, sizeof c / 4, PVM_INT) < 0 ||
	    pvm_precv(pvm_parent(), T_BYE, msg, 1, PVM_INT, &atid, &atag, &alen) < 0)
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

	if (pvm_mytid() < 0)
		return 1;
	if (argc >= 4 && !strcmp(argv[1], "master")) {
		int n = atoi(argv[2]);
		if (n < 3 || n > MAXT) {
			fprintf(stderr, "pvmt-down: 3..%d hosts\n", MAXT);
			return 2;
		}
		rc = master(n, atoi(argv[3]));
	} else if (argc >= 3 && !strcmp(argv[1], "worker")) {
		rc = worker(atoi(argv[2]));
	} else {
		fprintf(stderr, "usage: pvmt-down master NHOSTS AFTER\n");
		return 2;
	}
	pvm_exit();
	return rc;
}
