/*
 * tests/pvm/pvmt_transport.h — the transport tests of pvmt: which
 * transport a pair uses and which addresses a task publishes, a VM of
 * several real hosts, and one udp port reused by task after task.
 * Included by tests/pvm/pvmt.c (they use its helpers: CHECK, spawn,
 * quit); tests/pvm/pvmt_contact.h, included after, uses published,
 * udp_pairs and wait_published.
 */

#ifndef PVMT_STOCK
/* TID's published RCP addresses (its mailbox entry pvmrcp:TID) into ADDRS
 * (at least 600 bytes).  Returns the entry's buffer id (> 0; freed
 * already), or <= 0: not published (yet), or unreadable. */
static int published(int tid, char *addrs)
{
	char name[64];
	int save = pvm_setrbuf(0), b;
	snprintf(name, sizeof name, "pvmrcp:%x", (unsigned)tid);
	b = pvm_recvinfo(name, 0, PvmMboxDefault);
	if (b > 0 && pvm_upkstr(addrs) != 0)
		b = -1;
	pvm_freebuf(pvm_setrbuf(save));
	return b;
}

/* 1 if pairs of tasks on this host talk udp under this environment. */
static int udp_pairs(void)
{
	const char *mh = getenv("PVMRCP_MULTIHOST"), *tr = getenv("RCP_TRANSPORT");
	return (mh && !strcmp(mh, "remote")) || (tr && !strcmp(tr, "udp"));
}
#endif

/* Which transport a pair of tasks on this host uses, and which addresses a
 * task publishes, under the environment run.sh gives: nothing (one-host
 * VM: shm only), PVMRCP_MULTIHOST=1 (the VM pretends to have several
 * hosts: shm and udp published, this same-host pair still on shm),
 * PVMRCP_MULTIHOST=remote (every peer treated as on another host: udp,
 * while the shm endpoint stays open too), RCP_TRANSPORT=udp (udp only).
 * A real second host is not available here. */
static int t_transport(void)
{
#ifdef PVMT_STOCK
	return 1;
#else
	const char *mh = getenv("PVMRCP_MULTIHOST"), *tr = getenv("RCP_TRANSPORT");
	struct pvmhostinfo *hi;
	int nhost = 1, narch;
	int multi =
	    (mh && *mh && strcmp(mh, "0")) || (pvm_config(&nhost, &narch, &hi) == 0 && nhost > 1);
	int forced_udp = tr && !strcmp(tr, "udp");
	const char *want = udp_pairs() ? "udp" : "shm";
	int tid, atid, atag, alen, b;
	char addrs[600] = {0}, c = 1;

	b = published(pvm_mytid(), addrs);
	CHECK(b > 0, "mailbox entry pvmrcp:%x: %d", (unsigned)pvm_mytid(), b);
	CHECK(!strstr(addrs, "shm:") == !!forced_udp, "published %.200s", addrs);
	CHECK(!strstr(addrs, "udp:") == !(forced_udp || multi), "published %.200s", addrs);
	CHECK(spawn("echo", 1, &tid, NULL) == 0, "spawn");
	if (pvm_tidtohost(tid) != pvm_tidtohost(pvm_mytid()))
		want = forced_udp || multi ? "udp" : "stock"; /* spawned on another host */
	CHECK(!strcmp(pvm_rcp_transport(tid), "stock"), "a channel before any use");
	/* a round trip first: the child may not have published yet (then this
	 * one goes by stock PVM, and the child's reply opens the channel) */
	CHECK(pvm_psend(tid, 2, &c, 1, PVM_BYTE) == 0 &&
	          pvm_precv(tid, 2, &c, 1, PVM_BYTE, &atid, &atag, &alen) == 0,
	      "first round trip");
	CHECK(pvm_rcp_route(tid), "a relinked task reported as stock");
	CHECK(!strcmp(pvm_rcp_transport(tid), want), "pair on %s, want %s (published %.200s)",
	      pvm_rcp_transport(tid), want, addrs);
	for (int i = 0; i < 100; i++) {
		int ps = pvm_psend(tid, 2, &c, 1, PVM_BYTE);
		int pr = ps ? 0 : pvm_precv(tid, 2, &c, 1, PVM_BYTE, &atid, &atag, &alen);
		CHECK(ps == 0 && pr == 0, "round trip %d: psend %d precv %d on %s", i, ps, pr,
		      pvm_rcp_transport(tid));
	}
	quit(&tid, 1);
	return 0;
#endif
}

/* A VM of several real hosts (rcp-cluster, tests/cluster_pvm.sh): an echo
 * task on every host, ours included; after a round trip each pair must be
 * on shm when both tasks share a host and on udp across hosts, with
 * nothing set in the environment; on xdp across hosts with
 * RCP_TRANSPORT=xdp (tests/cluster_xdp.sh: we start first, so each
 * interface belongs to one task of the test).  Skips in a one-host VM. */
static int t_hosts(void)
{
#ifdef PVMT_STOCK
	return 1;
#else
	struct pvmhostinfo *hi;
	int nhost = 0, narch, tids[64], n = 0, nudp = 0, nshm = 0, me = pvm_mytid();
	const char *tr = getenv("RCP_TRANSPORT"), *far = tr && !strcmp(tr, "xdp") ? "xdp" : "udp";
	CHECK(pvm_config(&nhost, &narch, &hi) == 0, "pvm_config");
	if (nhost < 2 || getenv("PVMRCP_MULTIHOST") || (tr && strcmp(tr, "xdp"))) {
		snprintf(why, sizeof why, "a one-host VM (or a transport forced)");
		return 1;
	}
	CHECK(pvm_rcp_init() == 0, "pvm_rcp_init"); /* our endpoints before the children's */
	for (int i = 0; i < nhost && n < 64; i++) {
		char *av[] = {"child", "echo", NULL};
		CHECK(pvm_spawn(SELF, av, PvmTaskHost, hi[i].hi_name, 1, &tids[n]) == 1,
		      "spawn on %s: %d", hi[i].hi_name, tids[n]);
		n++;
	}
	for (int i = 0; i < n; i++) {
		int remote = pvm_tidtohost(tids[i]) != pvm_tidtohost(me), atid, atag, alen;
		char c = 1;
		const char *t;
		for (int k = 0; k < 3; k++) /* the first may go by stock PVM */
			CHECK(pvm_psend(tids[i], 2, &c, 1, PVM_BYTE) == 0 &&
			          pvm_precv(tids[i], 2, &c, 1, PVM_BYTE, &atid, &atag, &alen) == 0,
			      "round trip with t%x", (unsigned)tids[i]);
		t = pvm_rcp_transport(tids[i]);
		CHECK(!strcmp(t, remote ? far : "shm"), "t%x on %s host: %s", (unsigned)tids[i],
		      remote ? "another" : "our", t);
		nudp += remote;
		nshm += !remote;
		if (remote) { /* then a ping-pong of 1 MiB, checked byte for byte */
			enum { MB = 1 << 20 };
			unsigned char *o = malloc(MB), *e = malloc(MB);
			CHECK(o && e, "malloc");
			for (int k = 0; k < 4; k++) {
				for (int j = 0; j < MB; j++)
					o[j] = (unsigned char)(j * 7 + k + i);
				CHECK(pvm_psend(tids[i], 3, o, MB, PVM_BYTE) == 0 &&
				          pvm_precv(tids[i], 3, e, MB, PVM_BYTE, &atid, &atag,
				                    &alen) == 0 &&
				          alen == MB && !memcmp(o, e, MB),
				      "1 MiB round trip %d with t%x on %s", k, (unsigned)tids[i],
				      t);
			}
			free(o);
			free(e);
		}
	}
	quit(tids, n);
	CHECK(nudp == nhost - 1 && nshm == 1, "%d udp, %d shm pairs over %d hosts", nudp, nshm,
	      nhost);
	return 0;
#endif
}

#ifndef PVMT_STOCK
/* A free udp port on loopback (bound, read, closed), or -1. */
static int free_udp_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), port = -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Waits (10 s at most) until TID has published its RCP addresses, so that
 * our next psend to it goes by RCP.  Returns 0 or -1. */
static int wait_published(int tid)
{
	char addrs[600];
	for (int i = 0; i < 10000; i++) {
		if (published(tid, addrs) > 0)
			return 0;
		usleep(1000); /* polls a condition; the clock is no part of it */
	}
	return -1;
}
#endif

/* The udp port of a task that exits is free for the next process, and a
 * long-lived task may still hold a channel to that address, speaking to
 * the gone one's incarnation (its frames would be dropped by the new
 * process as stale: this hung pmcast-1-3-16 now and then).  Here every
 * child binds the same port (PVMRCP_UDP_ADDR): four in turn, each one
 * exiting (pvm_notify) before the next starts.  Even children are spoken
 * to first by RCP (we send first); odd ones first hear a stock message and
 * answer by RCP (they speak first).  Each: 20 round trips with sizes
 * from 1 B to 256 KiB, bytes checked, on udp. */
static int t_reuse(void)
{
#ifdef PVMT_STOCK
	return 1;
#else
	const char *ex = getenv("PVM_EXPORT");
	static char env[64], exp[512];
	size_t max = 256 << 10;
	char *a = malloc(max), *b = malloc(max);
	int port = free_udp_port(), rc = 0;

	if (!udp_pairs()) {
		free(a);
		free(b);
		snprintf(why, sizeof why, "pairs are not on udp here");
		return 2;
	}
	CHECK(a && b && port > 0, "malloc / port");
	snprintf(env, sizeof env, "PVMRCP_UDP_ADDR=udp:127.0.0.1:%d", port);
	snprintf(exp, sizeof exp, "PVM_EXPORT=%s%sPVMRCP_UDP_ADDR", ex ? ex : "",
	         ex && *ex ? ":" : "");
	putenv(env);
	putenv(exp);
	for (int gen = 0; gen < 4 && !rc; gen++) {
		int tid, atid, atag, alen, x;
		if (spawn("echo", 1, &tid, NULL)) {
			rc = fail("spawn %d", gen);
			break;
		}
		if (!(gen & 1) && wait_published(tid)) {
			rc = fail("gen %d: t%x never published its addresses", gen, tid);
			break;
		}
		if (gen & 1) {
			/* the child speaks first by RCP: a stock ping, echoed by psend */
			x = gen;
			pvm_initsend(PvmDataRaw);
			pvm_pkint(&x, 1, 1);
			if (pvm_send(tid, 3) < 0 ||
			    pvm_precv(tid, 3, &x, 1, PVM_INT, &atid, &atag, &alen) != 0 ||
			    x != gen) {
				rc = fail("gen %d: stock ping: %d", gen, x);
				break;
			}
		}
		for (int i = 0; i < 20 && !rc; i++) {
			size_t n = i == 19 ? max : (size_t)1 << (i % 16);
			int ps, pr;
			fill(a, n, (uint32_t)(gen * 100 + i));
			memset(b, 0, n);
			ps = pvm_psend(tid, 4, a, (int)n, PVM_BYTE);
			pr = ps ? 0 : pvm_precv(tid, 4, b, (int)max, PVM_BYTE, &atid, &atag, &alen);
			if (ps || pr || alen != (int)n ||
			    check(b, n, (uint32_t)(gen * 100 + i)) != -1)
				rc = fail("gen %d round trip %d (%zu B): psend %d precv %d len %d",
				          gen, i, n, ps, pr, alen);
		}
		if (!rc && strcmp(pvm_rcp_transport(tid), "udp"))
			rc = fail("gen %d: pair on %s, want udp", gen, pvm_rcp_transport(tid));
		/* gone before the next one binds the port */
		if (pvm_notify(PvmTaskExit, 98, 1, &tid) < 0) {
			rc = fail("notify");
			break;
		}
		quit(&tid, 1);
		if (pvm_recv(-1, 98) < 0)
			rc = fail("gen %d: exit notice", gen);
	}
	putenv("PVMRCP_UDP_ADDR=");
	if (ex)
		setenv("PVM_EXPORT", ex, 1);
	else
		unsetenv("PVM_EXPORT");
	free(a);
	free(b);
	return rc;
#endif
}
