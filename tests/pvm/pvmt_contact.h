/*
 * tests/pvm/pvmt_contact.h — first contact over udp, included by pvmt.c
 * (issue 20: tests/cluster_down.sh hung before it streamed, and two tasks
 * whose first psends crossed left one direction silent).
 *
 * first-contact: the crossing made deterministic on one host, with every
 * pair on udp (PVMRCP_MULTIHOST=remote or RCP_TRANSPORT=udp).
 *   1. The child psends to us first (its HELLO and message 11).  We make
 *      no RCP call until its first frame waits in our udp socket
 *      (/proc/net/udp's rx_queue), then stop it (SIGSTOP).
 *   2. One progress of ours reads the frame: our accepting endpoint, not
 *      knowing the sender, answers with a cookie challenge named after
 *      its own epoch.  The child, stopped, cannot answer yet.
 *   3. We connect to the child (pvm_rcp_route): a channel with an epoch of
 *      its own, so the child's echo of the challenge, and everything it
 *      sends after, names an epoch this channel does not have.  A helper
 *      process lets the child run on (SIGCONT) once our first frame on
 *      that channel waits in the child's socket (since the fix, the
 *      HELLO that pvm_rcp_route waits for; before, the psend below).
 *   4. We psend the child message 1 and receive with any tag.  The
 *      conversation settles only after the child's channel restarts,
 *      which fails whatever it had sent: before the fix message 11 was
 *      lost without a word and 12 came first.
 * Checked: 11 then 12, with their payloads; the child checks 1.  Nothing
 * waits on time: the loops below poll a condition (bounded).
 *
 * Since rcp 2baa966 (session 17) step 3 no longer gives our channel an
 * epoch of its own: a channel the user opens sends the endpoint epoch
 * (the one the challenge named), and since session 18 that holds per
 * peer: until a conversation with THAT peer ended (rcp/chan.c, PER
 * PEER), so the crossing restarts nothing even for a parent whose
 * earlier peers are gone, and the glue no longer waits for its HELLO
 * (pvm-glue/send.c, FIRST CONTACT).  Every case ends one conversation of
 * ours first (end_conversation: a child we spoke to over RCP is killed,
 * and a psend that finds it gone closes its channel): first-contact
 * checks that this does not bring the restart back (with the old
 * per-endpoint rule, RCP_TEST_EPOCH_PER_ENDPOINT=1, it fails: message 11
 * lost).  restart-reported and restart-reported-recv need that old rule
 * in this process (tests/pvm/run.sh runs them so, and they SKIP
 * without): the child's channel restarts under its copied psend of 11
 * every time, and the loss must be reported (message 13 carrying
 * PvmSysErr); without the report that fails ("message 11 was lost
 * without a word").
 */
#ifndef PVMT_STOCK
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

/* Bytes waiting in the receive queues of the udp sockets bound to PORT
 * (the nic's main socket and its connected ones per peer), from
 * /proc/net/udp (this network namespace); -1 if none is found. */
static long udp_rxq(int port)
{
	char line[512];
	long q = -1;
	FILE *f = fopen("/proc/net/udp", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		unsigned lport, tx, rx;
		if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %*x %x:%x", &lport, &tx,
		           &rx) == 3 &&
		    (int)lport == port)
			q = (q < 0 ? 0 : q) + (long)rx;
	}
	fclose(f);
	return q;
}

/* 1 if a udp socket bound to port LPORT is connected to port RPORT. */
static int udp_connected(int lport, int rport)
{
	char line[512];
	int yes = 0;
	FILE *f = fopen("/proc/net/udp", "r");
	if (!f)
		return 0;
	while (!yes && fgets(line, sizeof line, f)) {
		unsigned l, r;
		if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x", &l, &r) == 2)
			yes = (int)l == lport && (int)r == rport;
	}
	fclose(f);
	return yes;
}

/* Our own published udp port, or -1. */
static int my_udp_port(void)
{
	char addrs[600], *u, *c;
	if (published(pvm_mytid(), addrs) <= 0 || !(u = strstr(addrs, "udp:")))
		return -1;
	for (c = u; *c && *c != ' '; c++)
		;
	*c = 0;
	c = strrchr(u, ':');
	return c ? atoi(c + 1) : -1;
}

/* TID's process id (pvm_tasks), or -1. */
static int task_pid(int tid)
{
	struct pvmtaskinfo *ti;
	int n = 0;
	if (pvm_tasks(0, &n, &ti) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (ti[i].ti_tid == tid)
			return ti[i].ti_pid;
	return -1;
}

/* The state letter of process PID (/proc/PID/stat), or 0. */
static char proc_state(int pid)
{
	char path[64], buf[512], *p, st = 0;
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) && p[1] == ' ')
		st = p[2];
	fclose(f);
	return st;
}

/* Polls COND-returning F until it holds, 10 s at most; 0 or -1. */
static int poll_until(int (*f)(long), long arg)
{
	for (int i = 0; i < 10000; i++) {
		if (f(arg))
			return 0;
		usleep(1000); /* polls a condition; the clock is no part of it */
	}
	return -1;
}

/* Ends one conversation of our udp endpoint (rcp/chan.c: a channel the
 * user opens after that takes a conversation epoch, not the endpoint's):
 * an echo child answers once over RCP and is killed; once pvmd says it
 * is gone, a psend too big to be copied waits for it, finds it gone and
 * closes its channel (a precv would only mark it dead: its messages can
 * still be received).  0 or -1. */
static int task_gone(long tid)
{
	return pvm_pstat((int)tid) == PvmNoTask;
}

static int end_conversation(void)
{
	int tid, atid, atag, alen, rc;
	char c = 5, *big;
	CHECK(spawn("echo", 1, &tid, NULL) == 0, "spawn echo");
	CHECK(pvm_psend(tid, T_ECHO, &c, 1, PVM_BYTE) == 0 &&
	          pvm_precv(tid, T_ECHO, &c, 1, PVM_BYTE, &atid, &atag, &alen) == 0,
	      "echo");
	CHECK(pvm_rcp_route(tid) == 1, "echo not on RCP");
	CHECK(pvm_kill(tid) == 0 && poll_until(task_gone, tid) == 0, "pvm_kill");
	CHECK((big = calloc(1, 1 << 20)) != NULL, "calloc");
	rc = pvm_psend(tid, T_ECHO, big, 1 << 20, PVM_BYTE);
	free(big);
	CHECK(rc == PvmNoTask, "psend to the killed echo returned %d", rc);
	return 0;
}

/* The child (its udp port) has connected to us (port), and bytes wait
 * in our socket. */
static int cport_of_child, port_of_ours;
static long our_base; /* bytes no progress of ours takes (see first_contact) */
static int child_frame_waits(long unused)
{
	(void)unused;
	return udp_connected(cport_of_child, port_of_ours) && udp_rxq(port_of_ours) > our_base;
}

static int stopped(long pid)
{
	return proc_state((int)pid) == 'T';
}

static long rxq_base;
static int rxq_grew(long port)
{
	return udp_rxq((int)port) > rxq_base;
}

/* Forks a helper that sends PID SIGCONT once more bytes than now wait in
 * the socket of udp PORT (or after 10 s); its pid, or -1. */
static int cont_on_frame(int pid, int port)
{
	int h;
	rxq_base = udp_rxq(port);
	h = fork();
	if (h == 0) {
		poll_until(rxq_grew, port);
		kill(pid, SIGCONT);
		_exit(0);
	}
	return h;
}
#endif

/* psends 11, receives 1, psends 12, waits for T_QUIT. */
static int child_cross(void)
{
	int parent = pvm_parent(), atid, atag, alen;
	int32_t v = 11, w = -1;
	char c;
	if (pvm_psend(parent, 11, &v, 1, PVM_INT) < 0)
		return 1;
	if (pvm_precv(parent, 1, &w, 1, PVM_INT, &atid, &atag, &alen) < 0)
		return 1;
	v = w == 1 ? 12 : -12;
	if (pvm_psend(parent, 12, &v, 1, PVM_INT) < 0)
		return 1;
	pvm_precv(parent, T_QUIT, &c, 1, PVM_BYTE, &atid, &atag, &alen);
	return 0;
}

/* restart-reported: as child_cross, against a parent that ended a
 * conversation and keeps the per-endpoint epoch rule
 * (RCP_TEST_EPOCH_PER_ENDPOINT=1), so the crossing restarts the child's
 * channel under message 11 (send.c, LOST SENDS).  A loss is reported by the next call touching us: its PvmSysErr
 * goes to us as message 13 (then nothing more); without one, 12 follows. */
static int child_rcross(void)
{
	int parent = pvm_parent(), atid, atag, alen, rc;
	int32_t v = 11, w = -1, err = 0;
	char c;
	if (pvm_psend(parent, 11, &v, 1, PVM_INT) < 0)
		return 1;
	rc = pvm_precv(parent, 1, &w, 1, PVM_INT, &atid, &atag, &alen);
	if (rc == PvmSysErr) { /* reported: message 1 is still due */
		err = rc;
		rc = pvm_precv(parent, 1, &w, 1, PVM_INT, &atid, &atag, &alen);
	}
	if (rc < 0 || w != 1)
		return 1;
	v = 12;
	if (!err && (rc = pvm_psend(parent, 12, &v, 1, PVM_INT)) < 0) {
		if (rc != PvmSysErr)
			return 1;
		err = rc;
	}
	if (err && pvm_psend(parent, 13, &err, 1, PVM_INT) < 0)
		return 1;
	pvm_precv(parent, T_QUIT, &c, 1, PVM_BYTE, &atid, &atag, &alen);
	return 0;
}

/* restart-reported-recv: as rcross, but blocked in a receive when the
 * restart comes: it waits for our message 2, which we send only once 11
 * or 13 came.  The loss must end that receive (PvmSysErr, then 13);
 * without that both tasks wait for good. */
static int child_rwait(void)
{
	int parent = pvm_parent(), atid, atag, alen, rc;
	int32_t v = 11, w = -1, err;
	char c;
	if (pvm_psend(parent, 11, &v, 1, PVM_INT) < 0)
		return 1;
	while ((rc = pvm_precv(parent, 2, &w, 1, PVM_INT, &atid, &atag, &alen)) == PvmSysErr) {
		err = rc;
		if (pvm_psend(parent, 13, &err, 1, PVM_INT) < 0)
			return 1;
	}
	if (rc < 0 || w != 2)
		return 1;
	v = 12;
	if ((rc = pvm_psend(parent, 12, &v, 1, PVM_INT)) == PvmSysErr) {
		err = rc;
		rc = pvm_psend(parent, 13, &err, 1, PVM_INT);
	}
	if (rc < 0)
		return 1;
	pvm_precv(parent, T_QUIT, &c, 1, PVM_BYTE, &atid, &atag, &alen);
	return 0;
}

#ifndef PVMT_STOCK
/* One int message from TID, any tag, into *GOT (*TAG); 0, or -1 after
 * 60 s: a bound for a test that would otherwise hang, never reached when
 * it passes (the child answers within a few round trips). */
static int recv_int(int tid, int32_t *got, int *tag)
{
	struct timeval tmo = {60, 0};
	int b = pvm_trecv(tid, -1, &tmo), len, src;
	if (b < 0)
		return b; /* PvmSysErr: a loss of ours reported */
	if (b == 0 || pvm_bufinfo(b, &len, tag, &src) < 0 || len != 4 || pvm_upkint(got, 1, 1) < 0)
		return -1;
	return 0;
}

/* What the parent of rwait takes: 13 (the loss reported to its blocked
 * receive) or 11 first; then message 2 goes, and 12 (or 13, reported by
 * that psend) comes back.  The loss must have been reported once. */
static int restart_recv(int tid)
{
	int32_t got = -1, two = 2;
	int tag = -1, reported, rc, ours = 0;
	/* The child's channel, reset under data it sent blind, starts a new
	 * conversation (docs/protocol.md): ours may restart too, and with our
	 * HELLO no longer waited for (pvm-glue/send.c, FIRST CONTACT) what we
	 * sent may be lost: that must be reported to us, once. */
	while ((rc = recv_int(tid, &got, &tag)) == PvmSysErr && !ours++)
		;
	CHECK(rc == 0, "nothing from the child in 60 s (%d): its receive never heard of the loss",
	      rc);
	CHECK((tag == 11 && got == 11) || (tag == 13 && got == PvmSysErr), "got tag %d (%d)", tag,
	      got);
	reported = tag == 13;
	while ((rc = pvm_psend(tid, 2, &two, 1, PVM_INT)) == PvmSysErr && !ours++)
		;
	CHECK(rc == 0, "psend 2: %d", rc);
	while ((rc = recv_int(tid, &got, &tag)) == PvmSysErr && !ours++)
		CHECK(pvm_psend(tid, 2, &two, 1, PVM_INT) == 0, "psend 2 again");
	CHECK(rc == 0, "no answer to 2 (%d)", rc);
	CHECK((tag == 12 && got == 12) || (tag == 13 && got == PvmSysErr), "got tag %d (%d)", tag,
	      got);
	reported += tag == 13;
	CHECK(reported == 1, "the restart was reported %d times (once is due)", reported);
	return 0;
}

/* What the parent of rcross takes: 13 carrying PvmSysErr, after 11 or
 * alone (the loss reported); 12 without 11 is a message lost without a
 * word, 11 then 12 a restart that did not happen or went unreported. */
static int restart_reported(int tid)
{
	int atid, atag, alen, seen11 = 0, rc, ours = 0;
	for (;;) {
		int32_t got = -1, one = 1;
		/* Our own channel may restart too (restart_recv): our message
		 * 1 lost is reported once, and then sent again. */
		while ((rc = pvm_precv(tid, -1, &got, 1, PVM_INT, &atid, &atag, &alen)) ==
		           PvmSysErr &&
		       !ours++)
			CHECK(pvm_psend(tid, 1, &one, 1, PVM_INT) == 0, "psend 1 again");
		CHECK(rc == 0, "precv: %d", rc);
		if (atag == 11 && !seen11 && got == 11) {
			seen11 = 1;
			continue;
		}
		CHECK(atag != 12 || seen11,
		      "message 11 was lost without a word (12 came first): the restart went "
		      "unreported");
		CHECK(atag == 13 && got == PvmSysErr,
		      "got tag %d (payload %d) where the loss report (13) was due", atag, got);
		return 0;
	}
}

/* RESTART: 0 cross, 1 rcross (restart-reported), 2 rwait (-recv). */
static int first_contact(int *tidp, int *pidp, int restart)
{
	int tid, pid, cport, helper, port = my_udp_port(), atid, atag, alen, rc;
	char caddr[600], *c;
	int32_t v = 1;

	/* Frames of earlier tests' tasks (acks, lingering closes) read first.
	 * A socket the nic no longer reads (connected to a gone peer) may
	 * keep a datagram: what is left is the baseline. */
	CHECK(port > 0 && udp_rxq(port) >= 0, "our udp port %d", port);
	if (end_conversation())
		return -1;
	for (int k = 0; k < 1000 && udp_rxq(port) > 0; k++)
		pvm_probe(-1, 12345);
	our_base = udp_rxq(port);
	rc = spawn(restart == 2 ? "rwait" : restart ? "rcross" : "cross", 1, &tid, NULL);
	if (rc)
		return fail("spawn");
	*tidp = tid;
	/* pvm_spawn, pvm_tasks, pvm_recvinfo are libpvm3's: no RCP progress */
	pid = *pidp = task_pid(tid);
	CHECK(pid > 0, "pid of t%x", (unsigned)tid);
	CHECK(wait_published(tid) == 0 && published(tid, caddr) > 0 &&
	          (c = strstr(caddr, "udp:")) != NULL,
	      "t%x published no udp address", (unsigned)tid);
	cport = atoi(strrchr(strtok(c, " "), ':') + 1);
	cport_of_child = cport;
	port_of_ours = port;
	CHECK(poll_until(child_frame_waits, 0) == 0, "the child's first frame never came");
	CHECK(kill(pid, SIGSTOP) == 0 && poll_until(stopped, pid) == 0, "SIGSTOP %d", pid);
	/* progress until the frames are read (challenges sent) */
	for (int k = 0; k < 1000 && udp_rxq(port) > our_base; k++)
		pvm_probe(tid, 12345);
	CHECK(udp_rxq(port) <= our_base, "frames left unread: %ld bytes", udp_rxq(port));
	helper = cont_on_frame(pid, cport);
	CHECK(helper > 0, "fork");
	CHECK(pvm_rcp_route(tid) == 1, "no RCP route to t%x", (unsigned)tid);
	CHECK(pvm_psend(tid, 1, &v, 1, PVM_INT) == 0, "psend");
	CHECK(waitpid(helper, NULL, 0) == helper, "helper");
	for (int32_t want = 11; !restart && want <= 12; want++) {
		int32_t got = -1;
		CHECK(pvm_precv(tid, -1, &got, 1, PVM_INT, &atid, &atag, &alen) == 0, "precv");
		CHECK(atag == want && got == want,
		      "got tag %d (payload %d) where %d was due: the child's first message was "
		      "lost",
		      atag, got, want);
	}
	if (restart && (rc = restart == 2 ? restart_recv(tid) : restart_reported(tid)) != 0)
		return rc;
	CHECK(!strcmp(pvm_rcp_transport(tid), "udp"), "pair on %s", pvm_rcp_transport(tid));
	quit(&tid, 1);
	return 0;
}
#endif

static int contact_test(int restart)
{
#ifdef PVMT_STOCK
	(void)restart;
	return 1;
#else
	int tid = 0, pid = 0, rc;
	const char *ev;
	if (!udp_pairs()) {
		snprintf(why, sizeof why, "pairs are not on udp here");
		return 2;
	}
	/* Our endpoints were opened with the epoch rule restart-reported
	 * needs (read once, at open), or first-contact's must hold. */
	ev = getenv("RCP_TEST_EPOCH_PER_ENDPOINT");
	if (!restart != !(ev && atoi(ev))) {
		snprintf(why, sizeof why, "%s RCP_TEST_EPOCH_PER_ENDPOINT=1 in this process",
		         restart ? "needs" : "not with");
		return 2;
	}
	rc = first_contact(&tid, &pid, restart);
	if (rc && pid > 0)
		kill(pid, SIGCONT);
	if (rc && tid > 0)
		pvm_kill(tid);
	return rc;
#endif
}

static int t_first_contact(void)
{
	return contact_test(0);
}

static int t_restart_reported(void)
{
	return contact_test(1);
}

static int t_restart_reported_recv(void)
{
	return contact_test(2);
}
