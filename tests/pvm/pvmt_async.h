/*
 * tests/pvm/pvmt_async.h — when a large packed pvm_send returns, and what
 * pvm_mcast of in-place data copies (session 21, packed6), included by
 * tests/pvm/pvmt.c (its helpers: CHECK, spawn, fill, check, quit).
 *
 * packed-returns: a Raw pvm_send above PVMRCP_COPY_MAX goes from
 * libpvm3's fragments, kept by reference (pvm-glue/frags.c, KEPT BY
 * REFERENCE), and returns while the receiver makes no PVM call: the
 * child blocks reading a FIFO that the parent writes only after its
 * sends returned.  No sleep decides anything: if pvm_send waited for the
 * receiver it could never return, so a watchdog (SIGALRM, 60 s, only
 * there to turn that deadlock into a failure) writes the FIFO itself and
 * the test fails.  Right after each send the parent frees or replaces
 * the buffer and packs other bytes (the freed memory reused), and the
 * child checks every byte it gets.
 */
#include <fcntl.h>
#include <sys/stat.h>

#define PA_N ((1 << 20) + 3 * 4096 + 8) /* > PVMRCP_COPY_MAX, 2 in flight < COPY_BYTES */

static volatile sig_atomic_t pa_fired;
static int pa_fd = -1;

static void pa_alarm(int sig)
{
	char c = 1;
	(void)sig;
	pa_fired = 1;
	if (write(pa_fd, &c, 1) != 1)
		_exit(3);
}

/* Packs SEED and PA_N bytes from SEED into the current send buffer. */
static int pa_pack(int seed, char *buf)
{
	fill(buf, PA_N, (uint32_t)seed);
	return pvm_pkint(&seed, 1, 1) || pvm_pkbyte(buf, PA_N, 1) ? -1 : 0;
}

/* Child of packed-returns: gets the FIFO's name, answers, blocks on the
 * FIFO outside PVM, then checks messages 601 and 602; sends 1 (all
 * intact) or 0 with tag 609. */
static int child_pasync(void)
{
	int parent = pvm_parent(), ok = 1, fd, seed;
	char path[256], c;
	char *buf = malloc(PA_N);
	if (!buf || pvm_recv(parent, 600) < 0 || pvm_upkstr(path) < 0)
		return 1;
	/* the answer, then the parent's go: the answer has arrived before this
	 * task stops progressing (over udp its frames need this task) */
	if (pvm_psend(parent, 600, &ok, 1, PVM_INT) < 0 || pvm_recv(parent, 605) < 0 ||
	    (fd = open(path, O_RDONLY)) < 0)
		return 1;
	if (read(fd, &c, 1) != 1) /* no PVM call until the parent's sends returned */
		return 1;
	close(fd);
	for (int t = 601; t <= 602; t++) {
		if (pvm_recv(parent, t) < 0 || pvm_upkint(&seed, 1, 1) || seed != t ||
		    pvm_upkbyte(buf, PA_N, 1) || check(buf, PA_N, (uint32_t)seed) != -1)
			ok = 0;
	}
	free(buf);
	pvm_psend(parent, 609, &ok, 1, PVM_INT);
	return 0;
}

static int t_packed_returns(void)
{
	int tid, ok = 0, atid, atag, alen, returned;
	char path[256], c = 1;
	char *buf;
	const char *dir = getenv("TMPDIR");
#ifdef PVMT_STOCK
	return 1; /* stock's direct route may block on the socket: relinked only */
#endif
	snprintf(path, sizeof path, "%s/pvmt-hold.%x", dir ? dir : "/tmp", (unsigned)pvm_mytid());
	unlink(path);
	CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
	CHECK((pa_fd = open(path, O_RDWR)) >= 0, "open %s", path); /* O_RDWR: no wait */
	CHECK((buf = malloc(PA_N)) != NULL, "no memory");
	CHECK(spawn("pasync", 1, &tid, NULL) == 0, "spawn");
	CHECK(pvm_initsend(PvmDataRaw) > 0 && pvm_pkstr(path) == 0 && pvm_send(tid, 600) == 0,
	      "send the name");
	CHECK(pvm_precv(tid, 600, &ok, 1, PVM_INT, &atid, &atag, &alen) == 0, "answer");
	CHECK(pvm_initsend(PvmDataRaw) > 0 && pvm_send(tid, 605) == 0, "go");
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tid), "the pair is not on RCP");
	long sent0 = pvm_rcp_packed_sent(0);
	unsigned long g0, c0, g1, c1;
	pvm_rcp_sendstats(&g0, &c0, NULL);
#endif
	signal(SIGALRM, pa_alarm);
	alarm(60);
	/* sent, then the buffer replaced (pvm_initsend frees it) */
	CHECK(pvm_initsend(PvmDataRaw) > 0 && pa_pack(601, buf) == 0, "pack 601");
	CHECK(pvm_send(tid, 601) == 0, "send 601");
	CHECK(pvm_initsend(PvmDataRaw) > 0 && pa_pack(602, buf) == 0, "pack 602");
	CHECK(pvm_send(tid, 602) == 0, "send 602");
	/* sent, then freed, and its memory likely packed over */
	CHECK(pvm_freebuf(pvm_getsbuf()) == 0, "freebuf");
	CHECK(pvm_initsend(PvmDataRaw) > 0 && pa_pack(603, buf) == 0, "pack 603 (unsent)");
	returned = !pa_fired;
	alarm(0);
	if (returned && write(pa_fd, &c, 1) != 1)
		returned = 0;
	ok = 0;
	CHECK(pvm_precv(tid, 609, &ok, 1, PVM_INT, &atid, &atag, &alen) == 0, "result");
	close(pa_fd);
	unlink(path);
	free(buf);
	signal(SIGALRM, SIG_DFL);
	CHECK(returned, "pvm_send waited for a receiver outside PVM (the watchdog released it)");
	CHECK(ok == 1, "a message arrived changed (the buffer was freed or packed into after "
	               "pvm_send returned)");
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_packed_sent(0) - sent0 == 2, "%ld packed sends over RCP, want 2",
	      pvm_rcp_packed_sent(0) - sent0);
	pvm_rcp_sendstats(&g1, &c1, NULL);
	CHECK(g1 - g0 == 2 && c1 == c0, "%lu sent from the fragments, %lu copied: want 2, 0",
	      g1 - g0, c1 - c0);
#endif
	return 0;
}

/* packed-mcast-inplace: pvm_mcast of 4 MiB of in-place data to two
 * relinked tasks on this host goes as one rcp_mcastv gathered from the
 * arrays (pvm-glue/send.c, mcast_inplace): pvm_rcp_sendstats counts one
 * gathered send and no byte copied; each task checks every value.  Over
 * udp (RCP_TRANSPORT=udp) the multicast still copies once: counted so. */
static int t_packed_mcast_inplace(void)
{
	struct pi_arrays a, s;
	int tids[2];
#ifndef PVMT_STOCK
	unsigned long g0, c0, g1, c1;
	unsigned long long b0, b1;
	int shm;
#endif
	CHECK(pi_alloc(&a, PI_N) == 0 && pi_alloc(&s, 10) == 0, "no memory");
	CHECK(spawn("pichk", 2, tids, NULL) == 0, "spawn");
	/* a small one first: the children become known as relinked */
	pi_set(&s, 831);
	CHECK(pvm_initsend(PvmDataInPlace) > 0 && pi_pack(&s) == 0, "pack 831");
	CHECK(pvm_mcast(tids, 2, 831) == 0, "mcast 831");
	if (pi_answers(tids, 2, 831))
		return -1;
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tids[0]) && pvm_rcp_route(tids[1]), "the pairs are not on RCP");
	pvm_rcp_sendstats(&g0, &c0, &b0);
#endif
	pi_set(&a, 841);
	CHECK(pvm_initsend(PvmDataInPlace) > 0 && pi_pack(&a) == 0, "pack 841");
	CHECK(pvm_mcast(tids, 2, 841) == 0, "mcast 841");
	if (pi_answers(tids, 2, 841))
		return -1;
#ifndef PVMT_STOCK
	pvm_rcp_sendstats(&g1, &c1, &b1);
	shm = !strcmp(pvm_rcp_mcast_route(tids[0]), "shm") &&
	      !strcmp(pvm_rcp_mcast_route(tids[1]), "shm");
	if (shm)
		CHECK(g1 - g0 == 1 && c1 == c0 && b1 == b0,
		      "%lu gathered, %lu copied (%llu bytes): want 1, 0 (0)", g1 - g0, c1 - c0,
		      b1 - b0);
	else
		CHECK(c1 - c0 == 1, "over %s: %lu copies, want 1", pvm_rcp_mcast_route(tids[0]),
		      c1 - c0);
#endif
	pi_free(&a);
	pi_free(&s);
	quit(tids, 2);
	return 0;
}
