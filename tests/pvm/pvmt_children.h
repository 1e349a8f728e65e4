/*
 * tests/pvm/pvmt_children.h — the child tasks of pvmt: what each role
 * spawned by the master (tests/pvm/pvmt.c, spawn) runs: echo, ordered runs,
 * mixed paths, wildcards, contexts, multicast, sleeping, killing, tags,
 * sources, a pinned echo.  Included by pvmt.c (they use its helpers:
 * CHECK, fill, check).
 */

/* ---------------- children ---------------- */

static int child_echo(void)
{
	int parent = pvm_parent(), atid, atag = 0, alen;
	char *buf = malloc(BIG + 64);
	for (;;) {
		if (pvm_precv(parent, -1, buf, BIG + 64, PVM_BYTE, &atid, &atag, &alen) < 0)
			break;
		if (atag == T_QUIT)
			break;
		if (pvm_psend(parent, atag, buf, alen, PVM_BYTE) < 0)
			break;
	}
	free(buf);
	return atag == T_QUIT ? 0 : 1;
}

/* Sends V to DST (tag 5) by PATH: 0 psend, 1 pvm_send, 2 pvm_mcast. */
static int send_by(int dst, int32_t v, int path)
{
	if (path == 0)
		return pvm_psend(dst, 5, &v, 1, PVM_INT);
	pvm_initsend(PvmDataRaw);
	pvm_pkint(&v, 1, 1);
	return path == 1 ? pvm_send(dst, 5) : pvm_mcast(&dst, 1, 5);
}

/* Sends N messages (tag 5, payload = index) mixing psend, pvm_send and
 * pvm_mcast, to DST. */
static int send_mixed(int dst, int n)
{
	for (int i = 0; i < n; i++)
		if (send_by(dst, i, i % 3) < 0)
			return -1;
	return 0;
}

/* Receives N messages from SRC (tag 5) alternating precv, pvm_recv,
 * pvm_nrecv-until-found and probe+recv; checks they come 0..N-1. */
static int recv_mixed(int src, int n)
{
	for (int i = 0; i < n; i++) {
		int32_t v = -1;
		int atid = 0, atag = 0, alen = 0, b;
		switch (i % 4) {
		case 0:
			CHECK(pvm_precv(src, -1, &v, 1, PVM_INT, &atid, &atag, &alen) == 0,
			      "precv");
			CHECK(alen == 4 && atag == 5 && atid == src, "alen %d atag %d", alen, atag);
			break;
		case 1:
			CHECK((b = pvm_recv(-1, 5)) > 0, "recv");
			CHECK(pvm_bufinfo(b, &alen, &atag, &atid) == 0 && alen == 4 && atag == 5 &&
			          atid == src,
			      "bufinfo %d %d %x", alen, atag, atid);
			CHECK(pvm_upkint(&v, 1, 1) == 0, "upk");
			break;
		case 2:
			while ((b = pvm_nrecv(src, 5)) == 0)
				;
			CHECK(b > 0, "nrecv %d", b);
			CHECK(pvm_upkint(&v, 1, 1) == 0, "upk");
			break;
		default:
			while ((b = pvm_probe(src, -1)) == 0)
				;
			CHECK(b > 0, "probe %d", b);
			CHECK(pvm_recv(src, -1) == b, "recv after probe: other bufid");
			CHECK(pvm_upkint(&v, 1, 1) == 0, "upk");
			break;
		}
		CHECK(v == i, "message %d arrived as #%d (order)", v, i);
	}
	return 0;
}

/* Runs of 1..8 messages by one path (psend, pvm_send, pvm_mcast) chosen by
 * a seeded generator, so the receiver's precv meets every switch: a quiet
 * RCP peer turning stock (FENCE), stock turning RCP (BARRIER), long
 * stretches of each. */
static int send_runs(int dst, int n, uint32_t seed)
{
	uint32_t s = seed;
	int i = 0;
	while (i < n) {
		int path, run;
		s = s * 1103515245u + 12345u;
		path = (int)((s >> 16) % 3);
		run = 1 + (int)((s >> 20) % 8);
		for (int k = 0; k < run && i < n; k++, i++)
			if (send_by(dst, i, path) < 0)
				return -1;
	}
	return 0;
}

/* Receives N such messages with precv from SRC (tag: -1 or 5) only. */
static int recv_runs(int src, int n)
{
	for (int i = 0; i < n; i++) {
		int32_t v = -1;
		int atid = 0, atag = 0, alen = 0;
		CHECK(pvm_precv(src, i & 1 ? 5 : -1, &v, 1, PVM_INT, &atid, &atag, &alen) == 0,
		      "precv");
		CHECK(alen == 4 && atag == 5 && atid == src, "alen %d atag %d", alen, atag);
		CHECK(v == i, "message %d arrived as #%d (order)", v, i);
	}
	return 0;
}

static int child_runs(void)
{
	int parent = pvm_parent(), r = 0;
	if (send_runs(parent, 2000, 7))
		return 1;
	why[0] = 0;
	if (recv_runs(parent, 2000)) {
		fprintf(stderr, "child runs: %s\n", why);
		r = 1;
	}
	pvm_psend(parent, 6, &r, 1, PVM_INT);
	return 0;
}

static int child_mixed(void)
{
	int parent = pvm_parent(), r = 0;
	if (send_mixed(parent, 60))
		return 1;
	why[0] = 0;
	if (recv_mixed(parent, 60)) {
		fprintf(stderr, "child mixed: %s\n", why);
		r = 1;
	}
	pvm_psend(parent, 6, &r, 1, PVM_INT);
	return 0;
}

static int child_wild(void)
{
	int parent = pvm_parent(), me = pvm_mytid(), atid, atag, alen;
	char c;
	for (int i = 0; i < 10; i++) {
		int32_t v[2] = {me, i};
		if (pvm_psend(parent, 10 + i, v, 2, PVM_INT))
			return 1;
	}
	pvm_precv(parent, T_QUIT, &c, 1, PVM_BYTE, &atid, &atag, &alen);
	return 0;
}

static int child_ctx(void)
{
	int parent = pvm_parent(), ctx, atid, atag, alen, base = pvm_getcontext();
	int32_t x = 1, y = 2;
	char c;
	if (pvm_precv(parent, 70, &ctx, 1, PVM_INT, &atid, &atag, &alen))
		return 1;
	pvm_psend(parent, 7, &x, 1, PVM_INT); /* base context */
	pvm_setcontext(ctx);
	pvm_psend(parent, 7, &y, 1, PVM_INT); /* the parent's new context */
	pvm_initsend(PvmDataRaw);
	y = 3;
	pvm_pkint(&y, 1, 1);
	pvm_send(parent, 7); /* stock, same context */
	pvm_setcontext(base);
	pvm_precv(parent, T_QUIT, &c, 1, PVM_BYTE, &atid, &atag, &alen);
	return 0;
}

static int child_mc(void)
{
	int parent = pvm_parent(), atid, atag = 0, alen;
	char *buf = malloc((1 << 20) + 16);
	for (;;) {
		int32_t r[3];
		if (pvm_precv(parent, -1, buf, (1 << 20) + 16, PVM_BYTE, &atid, &atag, &alen) < 0 ||
		    atag == T_QUIT) {
			free(buf);
			return atag == T_QUIT ? 0 : 1;
		}
		r[0] = alen;
		r[1] = (int32_t)check(buf, (size_t)alen, (uint32_t)atag);
		r[2] = atag;
		pvm_psend(parent, 41, r, 3, PVM_INT);
	}
}

static int child_sleeper(void)
{
	int parent = pvm_parent();
	char c = 1;
	pvm_psend(parent, 80, &c, 1, PVM_BYTE);
	/* Until killed: progress (over udp its own psend may need resends or
	 * a handshake) but take nothing: a waiting receive would take the
	 * parent's psend into its held queue after PVMRCP_STASH_US (as stock
	 * buffers it), completing that psend before the kill.  The 1 ms
	 * naps only keep this loop off the CPU. */
	for (;;) {
		pvm_probe(parent, 12345);
		usleep(1000);
	}
	return 0;
}

static int child_killer(void)
{
	int parent = pvm_parent(), victim, atid, atag, alen;
	for (;;) {
		if (pvm_precv(parent, -1, &victim, 1, PVM_INT, &atid, &atag, &alen) < 0)
			return 1;
		if (atag == T_QUIT)
			return 0;
		pvm_kill(victim);
	}
}

/* On each T_GO message (payload: 1 psend, 2 pvm_send) sends tags 1, 2, 3,
 * each carrying its tag, to the parent; echoes tag 0 (opens the pair). */
#define T_GO 20
static int child_tags(void)
{
	int parent = pvm_parent(), atid, atag, alen;
	int32_t how = 0;
	for (;;) {
		if (pvm_precv(parent, -1, &how, 1, PVM_INT, &atid, &atag, &alen) < 0)
			return 1;
		if (atag == T_QUIT)
			return 0;
		if (atag == 0) {
			pvm_psend(parent, 0, &how, 1, PVM_INT);
			continue;
		}
		for (int32_t t = 1; t <= 3; t++) {
			if (how == 1) {
				pvm_psend(parent, t, &t, 1, PVM_INT);
			} else {
				pvm_initsend(PvmDataRaw);
				pvm_pkint(&t, 1, 1);
				pvm_send(parent, t);
			}
		}
	}
}

/* On T_GO sends its tid with tag 7 to the parent (stock send in either
 * build: the parent holds it in its queue), then waits for T_QUIT. */
static int child_src(void)
{
	int parent = pvm_parent(), me = pvm_mytid(), atid, atag, alen;
	char c;
	if (pvm_precv(parent, T_GO, &c, 1, PVM_BYTE, &atid, &atag, &alen) < 0)
		return 1;
	pvm_initsend(PvmDataRaw);
	pvm_pkint(&me, 1, 1);
	pvm_send(parent, 7);
	pvm_precv(parent, T_QUIT, &c, 1, PVM_BYTE, &atid, &atag, &alen);
	return 0;
}

/* Pins the calling process to CPU; 0 or -1. */
static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof set, &set);
}

/* Pins itself to the CPU the parent sends (tag 30), then echoes; before
 * each reply it offers the CPU to the parent (sched_yield).  Woken on the
 * parent's CPU, this task may preempt the parent inside its send (stock
 * PVM: pvmd forwards the ping at once) and answer before the parent
 * receives: the parent then never waits and shared-cpu has nothing to
 * count (3 of 3 tries in a fresh-clone CI run).  Yielding first lets a
 * preempted parent reach its receive and wait there, as it would for a
 * peer that computes before it answers. */
static int child_pinned_echo(void)
{
	int parent = pvm_parent(), atid, atag = 0, alen;
	int32_t cpu = -1;
	char buf[64];
	if (pvm_precv(parent, 30, &cpu, 1, PVM_INT, &atid, &atag, &alen) < 0)
		return 1;
	cpu = pin(cpu);
	pvm_psend(parent, 30, &cpu, 1, PVM_INT);
	for (;;) {
		if (pvm_precv(parent, -1, buf, sizeof buf, PVM_BYTE, &atid, &atag, &alen) < 0 ||
		    atag == T_QUIT)
			break;
		sched_yield();
		if (pvm_psend(parent, atag, buf, alen, PVM_BYTE) < 0)
			break;
	}
	return atag == T_QUIT ? 0 : 1;
}
