/*
 * tests/pvm/pvmt_packed.h — the packed-message tests of pvmt (pvm_initsend,
 * pvm_pk*, pvm_send, pvm_recv, pvm_upk*), included by tests/pvm/pvmt.c
 * (they use its helpers: CHECK, spawn, quit).  Relinked, a pvm_send to a
 * relinked task on RCP goes as one RCP message (pvm-glue/send.c); the
 * stock build runs the same checks, so its results are the reference.
 */

#define PK_N 4 /* message sizes: n = 0, 1, 100, 10000 */

static int pk_fill(int seed, int n);

/* A message of N ints, N doubles, a string and N bytes, all from SEED,
 * in a new send buffer of encoding ENC. */
static int pk_layout(int enc, int seed, int n)
{
	return pvm_initsend(enc) < 0 ? -1 : pk_fill(seed, n);
}

/* The same, packed into the current send buffer. */
static int pk_fill(int seed, int n)
{
	int *iv = malloc(((size_t)n + 1) * sizeof *iv);
	double *dv = malloc(((size_t)n + 1) * sizeof *dv);
	char *bv = malloc((size_t)n + 1), str[64];
	int rc;
	for (int i = 0; i < n; i++) {
		iv[i] = seed * 7 + i - n / 2;
		dv[i] = seed + i * 0.25;
	}
	fill(bv, (size_t)n, (uint32_t)seed);
	snprintf(str, sizeof str, "packed %d/%d", seed, n);
	rc = pvm_pkint(&n, 1, 1) || pvm_pkint(iv, n, 1) || pvm_pkdouble(dv, n, 1) ||
	     pvm_pkstr(str) || pvm_pkbyte(bv, n, 1);
	free(iv);
	free(dv);
	free(bv);
	return rc ? -1 : 0;
}

/* Unpacks pk_layout(., SEED, .) from the receive buffer and checks every
 * value, then one more int: past the end, PvmNoData.  0 or -1 (why). */
static int pk_check(int seed, int *np)
{
	int n = -1, rc = 0, extra = 0;
	int *iv;
	double *dv;
	char *bv, str[64], want[64];
	if (pvm_upkint(&n, 1, 1) || n < 0 || n > 100000)
		return fail("seed %d: count %d", seed, n);
	if (np)
		*np = n;
	iv = malloc(((size_t)n + 1) * sizeof *iv);
	dv = malloc(((size_t)n + 1) * sizeof *dv);
	bv = malloc((size_t)n + 1);
	if (pvm_upkint(iv, n, 1) || pvm_upkdouble(dv, n, 1) || pvm_upkstr(str) ||
	    pvm_upkbyte(bv, n, 1))
		rc = fail("seed %d n %d: an unpack failed", seed, n);
	for (int i = 0; !rc && i < n; i++)
		if (iv[i] != seed * 7 + i - n / 2 || dv[i] != seed + i * 0.25)
			rc = fail("seed %d n %d: value %d differs", seed, n, i);
	snprintf(want, sizeof want, "packed %d/%d", seed, n);
	if (!rc && strcmp(str, want))
		rc = fail("seed %d: string '%s', want '%s'", seed, str, want);
	if (!rc && check(bv, (size_t)n, (uint32_t)seed) != -1)
		rc = fail("seed %d n %d: bytes differ", seed, n);
	if (!rc) {
		int ae = pvm_setopt(PvmAutoErr, 0); /* libpvm3 would print the error */
		extra = pvm_upkint(&n, 1, 1);
		pvm_setopt(PvmAutoErr, ae);
	}
	if (!rc && extra != PvmNoData)
		rc = fail("seed %d: unpack past the end gave %d, want PvmNoData", seed, extra);
	free(iv);
	free(dv);
	free(bv);
	return rc;
}

/* Child: each packed message from the parent (any tag; T_QUIT ends) is
 * checked with seed = its tag and answered: with tag + 1000 and the same
 * layout (seed tag + 1000) in the encoding the tag says (odd: Raw, even:
 * Default) if the check passed, else with tag 998 and no data. */
static int child_pchk(void)
{
	int parent = pvm_parent(), nb, tag, src, n;
	for (;;) {
		int b = pvm_recv(parent, -1);
		if (b < 0 || pvm_bufinfo(b, &nb, &tag, &src) < 0)
			return 1;
		if (tag == T_QUIT)
			return 0;
		why[0] = 0;
		if (src == parent && pk_check(tag, &n) == 0) {
			if (pk_layout(tag & 1 ? PvmDataRaw : PvmDataDefault, tag + 1000, n))
				return 1;
			if (pvm_send(parent, tag + 1000) < 0)
				return 1;
		} else {
			fprintf(stderr, "pchk: %s\n", why);
			pvm_initsend(PvmDataDefault);
			if (pvm_send(parent, 998) < 0)
				return 1;
		}
	}
}

/* Round trips of packed messages, Raw and Default, n = 0 .. 10000. */
static int t_packed(void)
{
	static const int ns[PK_N] = {0, 1, 100, 10000};
	int tid, nb, tag, src, k = 0;
#ifndef PVMT_STOCK
	long sent0 = pvm_rcp_packed_sent(0);
#endif
	CHECK(spawn("pchk", 1, &tid, NULL) == 0, "spawn");
	for (int rep = 0; rep < 2; rep++)
		for (int e = 0; e < 2; e++)
			for (int i = 0; i < PK_N; i++) {
				int t = 100 + 2 * k++ + (e == 0), b; /* odd tag: Raw */
				CHECK(pk_layout(e == 0 ? PvmDataRaw : PvmDataDefault, t, ns[i]) ==
				          0,
				      "pack");
				CHECK(pvm_send(tid, t) == 0, "send");
				b = pvm_recv(tid, -1);
				CHECK(b > 0 && pvm_bufinfo(b, &nb, &tag, &src) == 0, "recv %d", b);
				CHECK(tag == t + 1000,
				      "tag %d, want %d (998: the child's check failed)", tag,
				      t + 1000);
				CHECK(src == tid && nb > 0, "src t%x len %d", (unsigned)src, nb);
				if (pk_check(t + 1000, NULL))
					return -1;
			}
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tid), "the pair is not on RCP");
	/* all but the first: a task just spawned may not be known as
	 * relinked yet (its address not published), and goes by pvmd */
	CHECK(pvm_rcp_packed_sent(0) - sent0 >= k - 1, "%ld of %d packed sends went over RCP",
	      pvm_rcp_packed_sent(0) - sent0, k);
#endif
	quit(&tid, 1);
	return 0;
}

/* Message I of a mixed run to DST with TAG: psend, packed Raw, packed
 * Default, or PvmDataInPlace (by pvmd, also relinked), by turns (the
 * first NK of them). */
#define PK_RUN 40
static int pk_mixed_send(int dst, int tag, int i, int nk)
{
	int32_t v = i;
	static const int enc[] = {0, PvmDataRaw, PvmDataDefault, PvmDataInPlace};
	if (i % nk == 0)
		return pvm_psend(dst, tag, &v, 1, PVM_INT);
	if (pvm_initsend(enc[i % nk]) < 0 || pvm_pkint(&v, 1, 1))
		return -1;
	return pvm_send(dst, tag);
}

/* Receives message I of a mixed run from SRC (I odd and WILD: any
 * source, any tag); 0 if it is the one expected (value I, tag TAG). */
static int pk_mixed_recv(int src, int tag, int i, int wild)
{
	int b = (i & 1) && wild ? pvm_recv(-1, -1) : pvm_recv(src, tag), nb, atag, asrc, v = -1;
	if (b <= 0 || pvm_bufinfo(b, &nb, &atag, &asrc) < 0)
		return fail("message %d: recv %d", i, b);
	if (asrc != src || atag != tag || nb < 4)
		return fail("message %d: t%x tag %d len %d", i, (unsigned)asrc, atag, nb);
	if (pvm_upkint(&v, 1, 1) || v != i)
		return fail("message %d came as number %d (order)", i, v);
	return 0;
}

/* Child: a mixed run from the parent (tag 5) is checked in order, then a
 * run of psends and packed sends goes back (tag 6), then the result: tag 7, an int 1 if the
 * first run came whole and in order. */
static int child_pord(void)
{
	int parent = pvm_parent(), ok = 1;
	for (int i = 0; i < PK_RUN; i++)
		if (pk_mixed_recv(parent, 5, i, 1)) {
			fprintf(stderr, "pord: %s\n", why);
			ok = 0;
			break;
		}
	for (int i = 0; i < PK_RUN; i++)
		if (pk_mixed_send(parent, 6, i, 3) < 0)
			return 1;
	pvm_initsend(PvmDataDefault);
	pvm_pkint(&ok, 1, 1);
	return pvm_send(parent, 7) < 0;
}

/* Order across psend, packed sends (Raw, Default) and stock in-place
 * sends from one task, both ways, with wildcard receives in between. */
static int t_packed_order(void)
{
	int tid, ok = 0;
	CHECK(spawn("pord", 1, &tid, NULL) == 0, "spawn");
	for (int i = 0; i < PK_RUN; i++)
		CHECK(pk_mixed_send(tid, 5, i, 4) >= 0, "send %d", i);
	/* back: psend and packed sends only (no BARRIER between them), each
	 * received by its tag: the glue must not take a later psend before
	 * an earlier packed message of the same tag, or the reverse */
	for (int i = 0; i < PK_RUN; i++)
		if (pk_mixed_recv(tid, 6, i, 0))
			return -1;
	CHECK(pvm_recv(tid, 7) > 0 && pvm_upkint(&ok, 1, 1) == 0, "result");
	CHECK(ok == 1, "the child got the first run out of order or short (see its output)");
	return 0;
}

/* The answers of the three checking children TIDS[0..2] to a message
 * with tag T sent to all of them: one each, checked, and no more.  0 or
 * -1 (why). */
static int pk_answers(const int *tids, int t)
{
	int got[3] = {0, 0, 0}, nb, tag, src;
	for (int i = 0; i < 3; i++) {
		int b = pvm_recv(-1, -1);
		CHECK(b > 0 && pvm_bufinfo(b, &nb, &tag, &src) == 0, "recv %d", b);
		CHECK(tag == t + 1000, "tag %d, want %d (998: a child's check failed)", tag,
		      t + 1000);
		for (int j = 0; j < 3; j++)
			if (src == tids[j])
				got[j]++;
		if (pk_check(t + 1000, NULL))
			return -1;
	}
	CHECK(got[0] == 1 && got[1] == 1 && got[2] == 1, "answers %d %d %d", got[0], got[1],
	      got[2]);
	CHECK(pvm_nrecv(-1, -1) == 0, "a copy too many (to the caller?)");
	return 0;
}

/* pvm_mcast of packed buffers (Raw, Default) to three checking children,
 * the caller and a duplicate in the list (neither gets a copy). */
static int t_packed_mcast(void)
{
	int tids[5];
#ifndef PVMT_STOCK
	long sent0 = pvm_rcp_packed_sent(0);
#endif
	CHECK(spawn("pchk", 3, tids, NULL) == 0, "spawn");
	tids[3] = pvm_mytid();
	tids[4] = tids[0];
	for (int k = 0; k < 4; k++) {
		int t = 300 + k; /* odd: Raw */
		CHECK(pk_layout(t & 1 ? PvmDataRaw : PvmDataDefault, t, k * 333) == 0, "pack");
		CHECK(pvm_mcast(tids, 5, t) >= 0, "mcast");
		if (pk_answers(tids, t))
			return -1;
	}
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_packed_sent(0) - sent0 >= 9, "%ld of 12 packed copies went over RCP",
	      pvm_rcp_packed_sent(0) - sent0);
#endif
	quit(tids, 3);
	return 0;
}

/* PvmDataInPlace: the buffer keeps pointers into the caller's arrays,
 * which must stay valid until pvm_send returns; they are freed (and the
 * memory poisoned) right after, so a copy taken later would show.  The
 * child checks the values as for Raw and answers in Raw. */
static int pk_inplace_send(int tid, int t, int n)
{
	int *iv = malloc(((size_t)n + 1) * sizeof *iv);
	double *dv = malloc(((size_t)n + 1) * sizeof *dv);
	char *bv = malloc((size_t)n + 1), str[64];
	int rc, slen;
	for (int i = 0; i < n; i++) {
		iv[i] = t * 7 + i - n / 2;
		dv[i] = t + i * 0.25;
	}
	fill(bv, (size_t)n, (uint32_t)t);
	slen = snprintf(str, sizeof str, "packed %d/%d", t, n) + 1;
	/* pvm_pkstr is PvmNotImpl in place; a string is its length (with
	 * the NUL) and its bytes, which pvm_upkstr takes as raw data */
	rc = pvm_initsend(PvmDataInPlace) < 0 || pvm_pkint(&n, 1, 1) || pvm_pkint(iv, n, 1) ||
	     pvm_pkdouble(dv, n, 1) || pvm_pkint(&slen, 1, 1) || pvm_pkbyte(str, slen, 1) ||
	     pvm_pkbyte(bv, n, 1) || pvm_send(tid, t) < 0;
	memset(iv, 0x5a, ((size_t)n + 1) * sizeof *iv);
	memset(dv, 0x5a, ((size_t)n + 1) * sizeof *dv);
	memset(bv, 0x5a, (size_t)n + 1);
	n = slen = 0x5a5a; /* pvm_pkint kept pointers to them too */
	memset(str, 0x5a, sizeof str);
	free(iv);
	free(dv);
	free(bv);
	return rc ? -1 : 0;
}

/* Round trips of in-place messages, n = 0 .. 100000 (1.3 MB).  Relinked,
 * all go over RCP, gathered from the arrays (inplace.c): the arrays are
 * poisoned right after pvm_send, so data read later would show. */
static int t_packed_inplace(void)
{
	static const int ns[] = {0, 1, 100, 10000, 100000};
	int tid, nb, tag, src, k = 0;
#ifndef PVMT_STOCK
	long sent0 = pvm_rcp_packed_sent(0);
#endif
	CHECK(spawn("pchk", 1, &tid, NULL) == 0, "spawn");
	for (int rep = 0; rep < 2; rep++)
		for (int i = 0; i < (int)(sizeof ns / sizeof ns[0]); i++) {
			int t = 401 + 2 * k++, b; /* odd: the child answers Raw */
			CHECK(pk_inplace_send(tid, t, ns[i]) == 0, "pack+send in place");
			b = pvm_recv(tid, -1);
			CHECK(b > 0 && pvm_bufinfo(b, &nb, &tag, &src) == 0, "recv %d", b);
			CHECK(tag == t + 1000, "tag %d, want %d (998: the child's check failed)",
			      tag, t + 1000);
			if (pk_check(t + 1000, NULL))
				return -1;
		}
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tid), "the pair is not on RCP");
	/* all but the first (the child may not be known as relinked yet) */
	CHECK(pvm_rcp_packed_sent(0) - sent0 >= k - 1 && pvm_rcp_packed_sent(0) - sent0 <= k,
	      "%ld in-place sends went over RCP, want %d or %d", pvm_rcp_packed_sent(0) - sent0,
	      k - 1, k);
#endif
	quit(&tid, 1);
	return 0;
}

/* Child of packed-bcast: joins group "pvmt-bc", tells the parent, then
 * answers each broadcast as pchk does (T_QUIT ends; leaves the group). */
static int child_gchk(void)
{
	int parent = pvm_parent(), rc, inst = pvm_joingroup("pvmt-bc");
	if (inst < 0)
		return 1;
	pvm_initsend(PvmDataDefault);
	pvm_pkint(&inst, 1, 1);
	if (pvm_send(parent, 9) < 0)
		return 1;
	rc = child_pchk();
	pvm_lvgroup("pvmt-bc");
	return rc;
}

/* pvm_bcast (libgpvm3: the group's tids from the group server, then
 * pvm_mcast, which the relinked task's own pvm_mcast takes) of packed
 * buffers to three group members; the caller, also a member, gets none. */
static int t_packed_bcast(void)
{
	int tids[3], me;
#ifndef PVMT_STOCK
	long sent0 = pvm_rcp_packed_sent(0);
#endif
	CHECK((me = pvm_joingroup("pvmt-bc")) >= 0, "joingroup: %d", me);
	CHECK(spawn("gchk", 3, tids, NULL) == 0, "spawn");
	for (int i = 0; i < 3; i++)
		CHECK(pvm_recv(-1, 9) > 0, "a child did not join");
	CHECK(pvm_gsize("pvmt-bc") == 4, "group size %d, want 4", pvm_gsize("pvmt-bc"));
	for (int k = 0; k < 4; k++) {
		int t = 500 + k; /* odd: Raw */
		CHECK(pk_layout(t & 1 ? PvmDataRaw : PvmDataDefault, t, k * 333) == 0, "pack");
		CHECK(pvm_bcast("pvmt-bc", t) >= 0, "bcast");
		if (pk_answers(tids, t))
			return -1;
	}
#ifndef PVMT_STOCK
	/* the first bcast may find the children not yet known as relinked */
	CHECK(pvm_rcp_packed_sent(0) - sent0 >= 9, "%ld of 12 broadcast copies went over RCP",
	      pvm_rcp_packed_sent(0) - sent0);
#endif
	quit(tids, 3);
	pvm_lvgroup("pvmt-bc");
	return 0;
}

/* Child of packed-killed: answers the parent's go (tag 9) and then sends
 * packed messages 1000, 1001, ... (layout of pk_layout, seed = tag,
 * n = 1000, Raw and Default by turns) until it is killed. */
static int child_pstream(void)
{
	int parent = pvm_parent();
	if (pvm_recv(parent, 9) < 0)
		return 1;
	for (int k = 0;; k++) {
		int t = 1000 + k;
		if (pk_layout(k & 1 ? PvmDataRaw : PvmDataDefault, t, 1000) ||
		    pvm_send(parent, t) < 0)
			return 1;
	}
}

/* A task killed in mid-stream of packed messages: the receiver gets
 * whole, checked messages in order, then none (never a partial one or a
 * hang), learns of the death from pvmd, and its RCP path still works with
 * a new task. */
static int t_packed_killed(void)
{
	int victim, killer, b, nb, tag, src, got = 0, next = 1000, dead = 0;
	CHECK(spawn("killer", 1, &killer, NULL) == 0, "spawn");
	CHECK(spawn("pstream", 1, &victim, NULL) == 0, "spawn");
	CHECK(pvm_notify(PvmTaskExit, 98, 1, &victim) >= 0, "notify");
	pvm_initsend(PvmDataDefault);
	CHECK(pvm_send(victim, 9) == 0, "go");
	while (!dead) {
		b = pvm_recv(-1, -1);
		CHECK(b > 0 && pvm_bufinfo(b, &nb, &tag, &src) == 0, "recv %d", b);
		if (tag == 98) {
			dead = 1;
			break;
		}
		CHECK(src == victim && tag == next, "message %d from t%x, want %d", tag,
		      (unsigned)src, next);
		if (pk_check(tag, NULL))
			return -1;
		next++;
		if (++got != 50)
			continue;
#ifndef PVMT_STOCK
		CHECK(pvm_rcp_route(victim), "the stream is not on RCP");
#endif
		CHECK(pvm_psend(killer, 1, &victim, 1, PVM_INT) == 0, "order the kill");
	}
	/* what it sent before it died and is here: whole, in order */
	while ((b = pvm_nrecv(victim, -1)) > 0) {
		CHECK(pvm_bufinfo(b, &nb, &tag, &src) == 0 && tag == next,
		      "late message %d, want %d", tag, next);
		if (pk_check(tag, NULL))
			return -1;
		next++;
		got++;
	}
	CHECK(b == 0, "nrecv after the death: %d", b);
	CHECK(got >= 50, "%d messages", got);
#ifndef PVMT_STOCK
	/* a new task: the endpoint still works */
	quit(&killer, 1);
	return t_packed();
#else
	quit(&killer, 1);
	return 0;
#endif
}

/* Peak resident memory of this process, kB (VmHWM). */
static long hwm_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

#define FLOOD_N  4000
#define FLOOD_SZ 4096
/* Child of packed-bounded: sends FLOOD_N Raw messages of FLOOD_SZ bytes
 * (16 MB) to the parent without receiving anything, then psends how much
 * its peak memory grew meanwhile (kB, tag 11). */
static int child_pflood(void)
{
	int parent = pvm_parent();
	static char buf[FLOOD_SZ];
	int32_t grew;
	long h0 = hwm_kb();
	for (int k = 0; k < FLOOD_N; k++) {
		memset(buf, (char)k, sizeof buf);
		memcpy(buf, &k, sizeof k);
		if (pvm_initsend(PvmDataRaw) < 0 || pvm_pkbyte(buf, FLOOD_SZ, 1) ||
		    pvm_send(parent, 10) < 0)
			return 1;
	}
	grew = (int32_t)(hwm_kb() - h0);
	return pvm_psend(parent, 11, &grew, 1, PVM_INT) < 0;
}

/* A task that sends packed messages in a loop and never receives keeps
 * a bounded amount of them in its own memory (PVMRCP_COPY_BYTES, 4 MiB),
 * where stock PVM keeps them in pvmd's: all 16 MB arrive, in order, and
 * the sender's peak memory grew by less than 10 MB. */
static int t_packed_bounded(void)
{
	int tid, atid, atag, alen;
	int32_t grew = -1;
	static char buf[FLOOD_SZ];
	CHECK(spawn("pflood", 1, &tid, NULL) == 0, "spawn");
	CHECK(pvm_precv(tid, 11, &grew, 1, PVM_INT, &atid, &atag, &alen) == 0, "done");
	for (int k = 0; k < FLOOD_N; k++) {
		int b = pvm_recv(tid, 10), nb, tag, src, got;
		CHECK(b > 0 && pvm_bufinfo(b, &nb, &tag, &src) == 0, "recv %d", b);
		CHECK(pvm_upkbyte(buf, FLOOD_SZ, 1) == 0, "unpack");
		memcpy(&got, buf, sizeof got);
		CHECK(got == k && buf[FLOOD_SZ - 1] == (char)k, "message %d where %d was due", got,
		      k);
	}
	printf("packed-bounded: the sender's peak memory grew by %d kB for %d kB sent\n", (int)grew,
	       FLOOD_N * FLOOD_SZ / 1024);
#if !defined(PVMT_STOCK) && !defined(__SANITIZE_ADDRESS__)
	/* (ASan keeps freed memory in quarantine: no bound to see there) */
	CHECK(pvm_rcp_route(tid), "the pair is not on RCP");
	CHECK(grew >= 0 && grew < 10 * 1024, "the sender's peak memory grew by %d kB", (int)grew);
#endif
	quit(&tid, 1);
	return 0;
}

/* Child of packed-buffers: forwards every message it gets from the
 * parent back to it unchanged, by making the received buffer its send
 * buffer (pvm_setsbuf(pvm_getrbuf())), with the tag + 1000; T_QUIT ends. */
static int child_pfwd(void)
{
	int parent = pvm_parent(), nb, tag, src;
	for (;;) {
		int b = pvm_recv(parent, -1), old;
		if (b < 0 || pvm_bufinfo(b, &nb, &tag, &src) < 0)
			return 1;
		if (tag == T_QUIT)
			return 0;
		old = pvm_setsbuf(b);
		if (pvm_send(parent, tag + 1000) < 0)
			return 1;
		pvm_setsbuf(old);
	}
}

/* Receives the forward of tag T from TID; its bufid, or -1. */
static int pk_back(int tid, int t)
{
	int b = pvm_recv(tid, t + 1000), nb, tag, src;
	if (b <= 0 || pvm_bufinfo(b, &nb, &tag, &src) || tag != t + 1000 || src != tid)
		return -1;
	return b;
}

/* The buffer API around packed messages, each case relinked and stock
 * alike: a buffer made with pvm_mkbuf and made current with pvm_setsbuf;
 * a received buffer forwarded as it is (the child); pvm_getminfo of what
 * comes back; unpacking in another type than packed (stock decodes the
 * bytes, then PvmNoData past the end); a message packed inside another
 * with pvm_pkmesg and taken out with pvm_upkmesg. */
static int t_packed_buffers(void)
{
	int tid, b, b1, old, iv[3] = {1, 2, 3}, enc_def, ae, r1, r2;
	double d[2];
	struct pvmminfo mi;
#ifndef PVMT_STOCK
	long sent0 = pvm_rcp_packed_sent(0);
#endif
	CHECK(spawn("pfwd", 1, &tid, NULL) == 0, "spawn");
	/* a buffer of one's own, forwarded back */
	CHECK((b1 = pvm_mkbuf(PvmDataDefault)) > 0, "mkbuf");
	old = pvm_setsbuf(b1);
	CHECK(pvm_getsbuf() == b1, "getsbuf %d, want %d", pvm_getsbuf(), b1);
	CHECK(pk_fill(601, 100) == 0, "pack");
	CHECK(pvm_send(tid, 601) == 0, "send");
	CHECK((b = pk_back(tid, 601)) > 0, "the forward of 601");
	if (pk_check(601, NULL))
		return -1;
	CHECK(pvm_getminfo(b, &mi) == 0 && mi.tag == 1601 && mi.src == tid && mi.len > 0,
	      "getminfo: tag %d src t%x len %d", mi.tag, (unsigned)mi.src, mi.len);
	enc_def = mi.enc;
	/* a second buffer, made current while b1 waits */
	{
		int b2 = pvm_mkbuf(PvmDataDefault);
		CHECK(b2 > 0 && pvm_setsbuf(b2) == b1 && pvm_pkint(iv, 3, 1) == 0, "pack into b2");
		CHECK(pvm_send(tid, 602) == 0, "send b2");
		CHECK(pvm_setsbuf(b1) == b2 && pvm_freebuf(b2) == 0, "back to b1");
	}
	CHECK((b = pk_back(tid, 602)) > 0, "the forward of 602");
	CHECK(pvm_getminfo(b, &mi) == 0 && mi.enc == enc_def, "encoding %x, want %x", mi.enc,
	      enc_def);
	/* another type than packed: the bytes decode, then PvmNoData */
	ae = pvm_setopt(PvmAutoErr, 0);
	r1 = pvm_upkdouble(d, 1, 1);
	r2 = pvm_upkdouble(d, 1, 1);
	pvm_setopt(PvmAutoErr, ae);
	CHECK(r1 == 0 && r2 == PvmNoData, "ints unpacked as doubles: %d then %d", r1, r2);
	CHECK(pvm_freebuf(b1) == 0, "freebuf");
	pvm_setsbuf(old);
	/* a message inside a message */
	{
		int inner = pvm_mkbuf(PvmDataDefault), outer, in;
		old = pvm_setsbuf(inner);
		CHECK(pk_fill(700, 33) == 0, "pack inner");
		outer = pvm_mkbuf(PvmDataRaw);
		pvm_setsbuf(outer);
		CHECK(pvm_pkmesg(inner) == 0, "pkmesg");
		CHECK(pvm_send(tid, 603) == 0, "send outer");
		CHECK((b = pk_back(tid, 603)) > 0, "the forward of 603");
		CHECK((in = pvm_upkmesg()) > 0, "upkmesg: %d", in);
		pvm_setrbuf(in);
		if (pk_check(700, NULL))
			return -1;
		pvm_freebuf(inner);
		pvm_freebuf(outer);
		pvm_setsbuf(old);
	}
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tid), "the pair is not on RCP");
	/* ours and the child's forwards: 3 each way, all but the first ours */
	CHECK(pvm_rcp_packed_sent(0) - sent0 >= 2, "%ld of 3 sends went over RCP",
	      pvm_rcp_packed_sent(0) - sent0);
#endif
	quit(&tid, 1);
	return 0;
}

/* ---- in-place messages gathered from the user's memory (inplace.c) ----
 * A message of PI_N ints, PI_N doubles and PI_N bytes (PI_N * 13 bytes:
 * 4 MiB), each array packed in place, values from a seed. */
#define PI_N (4 << 20) / 13

struct pi_arrays {
	int n, *iv;
	double *dv;
	char *bv;
};

static void pi_set(struct pi_arrays *a, int seed)
{
	for (int i = 0; i < a->n; i++) {
		a->iv[i] = seed * 7 + i;
		a->dv[i] = seed + i * 0.5;
	}
	fill(a->bv, (size_t)a->n, (uint32_t)seed);
}

static int pi_alloc(struct pi_arrays *a, int n)
{
	a->n = n;
	a->iv = malloc((size_t)n * sizeof *a->iv + 1);
	a->dv = malloc((size_t)n * sizeof *a->dv + 1);
	a->bv = malloc((size_t)n + 1);
	return a->iv && a->dv && a->bv ? 0 : -1;
}

static void pi_free(struct pi_arrays *a)
{
	free(a->iv);
	free(a->dv);
	free(a->bv);
}

/* Unpacks {n, ints, doubles, bytes} of SEED from the receive buffer and
 * checks every value and PvmNoData after them.  0 or -1 (why). */
static int pi_check(int seed)
{
	struct pi_arrays a;
	int n = -1, rc = 0, extra, ae;
	if (pvm_upkint(&n, 1, 1) || n < 0 || n > PI_N)
		return fail("seed %d: count %d", seed, n);
	if (pi_alloc(&a, n))
		return fail("no memory");
	if (pvm_upkint(a.iv, n, 1) || pvm_upkdouble(a.dv, n, 1) || pvm_upkbyte(a.bv, n, 1))
		rc = fail("seed %d n %d: an unpack failed", seed, n);
	for (int i = 0; !rc && i < n; i++)
		if (a.iv[i] != seed * 7 + i || a.dv[i] != seed + i * 0.5)
			rc = fail("seed %d n %d: value %d differs", seed, n, i);
	if (!rc && check(a.bv, (size_t)n, (uint32_t)seed) != -1)
		rc = fail("seed %d n %d: bytes differ", seed, n);
	ae = pvm_setopt(PvmAutoErr, 0);
	extra = pvm_upkint(&n, 1, 1);
	pvm_setopt(PvmAutoErr, ae);
	if (!rc && extra != PvmNoData)
		rc = fail("seed %d: unpack past the end gave %d, want PvmNoData", seed, extra);
	pi_free(&a);
	return rc;
}

/* Child of packed-inplace-gather (relinked or stock): a message with
 * tag T (T_QUIT ends) is checked with seed T and answered with tag
 * T + 1000 and 1 (all values right) or 0 (printing why), Raw. */
static int child_pichk(void)
{
	int parent = pvm_parent(), nb, tag, src;
	for (;;) {
		int b = pvm_recv(parent, -1), ok;
		if (b < 0 || pvm_bufinfo(b, &nb, &tag, &src) < 0)
			return 1;
		if (tag == T_QUIT)
			return 0;
		why[0] = 0;
		ok = src == parent && pi_check(tag) == 0;
		if (!ok)
			fprintf(stderr, "pichk: %s\n", why);
		if (pvm_initsend(PvmDataRaw) < 0 || pvm_pkint(&ok, 1, 1) ||
		    pvm_send(parent, tag + 1000) < 0)
			return 1;
	}
}

/* The answers to tag T from the NT tasks TIDS: each says its check
 * passed.  0 or -1 (why). */
static int pi_answers(const int *tids, int nt, int t)
{
	for (int j = 0; j < nt; j++) {
		int ok = -1;
		CHECK(pvm_recv(tids[j], t + 1000) > 0 && pvm_upkint(&ok, 1, 1) == 0,
		      "answer to %d from t%x", t, (unsigned)tids[j]);
		CHECK(ok == 1, "t%x's check of message %d failed (see its output)",
		      (unsigned)tids[j], t);
	}
	return 0;
}

/* Packs {n, ints, doubles, bytes} of A in place into the current send
 * buffer.  0 or -1. */
static int pi_pack(struct pi_arrays *a)
{
	return pvm_pkint(&a->n, 1, 1) || pvm_pkint(a->iv, a->n, 1) ||
	               pvm_pkdouble(a->dv, a->n, 1) || pvm_pkbyte(a->bv, a->n, 1)
	           ? -1
	           : 0;
}

/* PvmDataInPlace messages of 4 MiB to a relinked and a stock task at
 * once (pvm_mcast: to the first by one RCP message gathered from our
 * arrays, to the second by pvmd), every value checked by both:
 *  801  packed in place, sent;
 *  811  the same buffer sent again after the arrays changed: in place
 *       means the data is read at the send, as stock;
 *  821  packed across a pvm_setsbuf to another buffer and back (the
 *       record is per buffer), an in-place buffer freed before and its
 *       id reused by a Raw one in between;
 *  833  the doubles packed by libpvm3's own pvm_pkdouble, which the
 *       glue does not see: its record and libpvm3's length disagree, so
 *       the message goes the old way (by pvmd at this size), intact;
 * and a strided in-place pack fails with PvmNotImpl, as stock.
 * Relinked, 801, 811 and 821 go over RCP, 833 does not. */
static int t_packed_inplace_gather(void)
{
	struct pi_arrays a;
	int tids[2], b, b2, old, rc;
#ifndef PVMT_STOCK
	long sent0;
#endif
	CHECK(pi_alloc(&a, PI_N) == 0, "no memory");
	CHECK(spawn("pichk", 1, &tids[0], NULL) == 0, "spawn");
	CHECK(spawn("pichk", 1, &tids[1], "pvmt-stock") == 0, "spawn stock");
	/* a small one first: the relinked child becomes known as relinked */
	{
		struct pi_arrays s;
		CHECK(pi_alloc(&s, 10) == 0, "no memory");
		pi_set(&s, 791);
		CHECK(pvm_initsend(PvmDataInPlace) > 0 && pi_pack(&s) == 0, "pack 791");
		CHECK(pvm_mcast(tids, 2, 791) == 0, "mcast 791");
		pi_free(&s);
		if (pi_answers(tids, 2, 791))
			return -1;
	}
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tids[0]), "the pair is not on RCP");
	CHECK(!pvm_rcp_route(tids[1]), "the stock task reported as relinked");
	sent0 = pvm_rcp_packed_sent(0);
#endif
	pi_set(&a, 801);
	CHECK((b = pvm_initsend(PvmDataInPlace)) > 0 && pi_pack(&a) == 0, "pack 801");
	CHECK(pvm_mcast(tids, 2, 801) == 0, "mcast 801");
	if (pi_answers(tids, 2, 801))
		return -1;
	pi_set(&a, 811); /* same pointers, new values, same buffer */
	CHECK(pvm_mcast(tids, 2, 811) == 0, "mcast 811");
	if (pi_answers(tids, 2, 811))
		return -1;
	/* an in-place buffer freed, its id (likely) reused by a Raw one */
	b = pvm_mkbuf(PvmDataInPlace);
	old = pvm_setsbuf(b);
	CHECK(pvm_pkint(a.iv, 1000, 1) == 0 && pvm_setsbuf(old) == b && pvm_freebuf(b) == 0,
	      "in place, freed");
	b2 = pvm_mkbuf(PvmDataRaw);
	/* packed across a switch: n and ints into b, bytes into b2, back */
	pi_set(&a, 821);
	b = pvm_mkbuf(PvmDataInPlace);
	old = pvm_setsbuf(b);
	CHECK(pvm_pkint(&a.n, 1, 1) == 0 && pvm_pkint(a.iv, a.n, 1) == 0, "pack 821 (1)");
	CHECK(pvm_setsbuf(b2) == b && pvm_pkbyte(a.bv, 100, 1) == 0, "pack into b2");
	CHECK(pvm_setsbuf(b) == b2 && pvm_pkdouble(a.dv, a.n, 1) == 0 &&
	          pvm_pkbyte(a.bv, a.n, 1) == 0,
	      "pack 821 (2)");
	CHECK(pvm_mcast(tids, 2, 821) == 0, "mcast 821");
	pvm_setsbuf(old);
	pvm_freebuf(b);
	pvm_freebuf(b2);
	if (pi_answers(tids, 2, 821))
		return -1;
	/* a pack the glue does not see: libpvm3's own pvm_pkdouble, called
	 * directly (as by a library bound to it before libpvmrcp) */
	{
		void *h = dlopen("libpvm3.so.3", RTLD_LAZY | RTLD_NOLOAD);
		int (*pkd)(double *, int, int) = NULL;
		if (h)
			*(void **)&pkd = dlsym(h, "pvm_pkdouble");
		CHECK(pkd, "libpvm3's pvm_pkdouble: %s", dlerror());
		pi_set(&a, 833);
		CHECK(pvm_initsend(PvmDataInPlace) > 0 && pvm_pkint(&a.n, 1, 1) == 0 &&
		          pvm_pkint(a.iv, a.n, 1) == 0 && pkd(a.dv, a.n, 1) == 0 &&
		          pvm_pkbyte(a.bv, a.n, 1) == 0,
		      "pack 833");
		CHECK(pvm_mcast(tids, 2, 833) == 0, "mcast 833");
		dlclose(h);
		if (pi_answers(tids, 2, 833))
			return -1;
	}
	/* a stride other than 1 in place: PvmNotImpl, as stock */
	{
		int ae = pvm_setopt(PvmAutoErr, 0);
		CHECK(pvm_initsend(PvmDataInPlace) > 0, "initsend");
		rc = pvm_pkint(a.iv, 10, 2);
		pvm_setopt(PvmAutoErr, ae);
		CHECK(rc == PvmNotImpl, "strided in-place pack: %d, want PvmNotImpl", rc);
	}
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_packed_sent(0) - sent0 == 3,
	      "%ld of the 4 MiB messages went over RCP, want 3 (801, 811, 821)",
	      pvm_rcp_packed_sent(0) - sent0);
#endif
	pi_free(&a);
	quit(tids, 2);
	return 0;
}
