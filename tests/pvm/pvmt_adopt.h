/*
 * tests/pvm/pvmt_adopt.h — large raw messages the relinked receiver
 * unpacks where they landed (pvm-glue/upk.c, ADOPTED BUFFERS), included
 * by pvmt.c.  Every step is checked against the values, so pvmt-stock
 * runs the same steps on libpvm3's own buffers; relinked, the glue's
 * counters say which calls it served and when it built libpvm3's buffer.
 */

/* AD_N ints and their count in place: 64 KiB + 4 bytes, one fragment,
 * over RCP (under PVMRCP_INPLACE_MAX's default) and adopted (at least
 * PVMRCP_UPK_MIN's default). */
#define AD_N 16384

static int ad_val(int seed, int i)
{
	return seed * 7 + i;
}

/* Child of packed-adopted: a message with tag T (T_QUIT ends) asks for
 * the in-place message {AD_N, ad_val(T, 0..AD_N-1)} with tag T. */
static int child_adsend(void)
{
	int parent = pvm_parent(), nb, tag, src, n = AD_N, *v = malloc(AD_N * sizeof *v);
	if (!v)
		return 1;
	for (;;) {
		int b = pvm_recv(parent, -1);
		if (b < 0 || pvm_bufinfo(b, &nb, &tag, &src) < 0)
			return 1;
		if (tag == T_QUIT)
			break;
		for (int i = 0; i < AD_N; i++)
			v[i] = ad_val(tag, i);
		if (pvm_initsend(PvmDataInPlace) < 0 || pvm_pkint(&n, 1, 1) ||
		    pvm_pkint(v, AD_N, 1) || pvm_send(parent, tag) < 0)
			return 1;
	}
	free(v);
	return 0;
}

/* Asks TID for message T and receives it (pvm_recv); the buffer id. */
static int ad_get(int tid, int t)
{
	char c = 0;
	if (pvm_psend(tid, t, &c, 1, PVM_BYTE) < 0)
		return -1;
	return pvm_recv(tid, t);
}

/* Relinked: the glue's counters moved by ADOPTED, SERVED, BUILT since
 * the last call (stock: always true); MARK: only start counting. */
static int ad_moved(unsigned long adopted, unsigned long served, unsigned long built, int mark)
{
#ifndef PVMT_STOCK
	static unsigned long a0, s0, b0;
	unsigned long a, s, b;
	int ok;
	pvm_rcp_upkstats(&a, &s, &b);
	ok = mark || (a - a0 == adopted && s - s0 == served && b - b0 == built);
	if (!ok)
		fprintf(stderr, "upkstats moved %lu %lu %lu, want %lu %lu %lu\n", a - a0, s - s0,
		        b - b0, adopted, served, built);
	a0 = a;
	s0 = s;
	b0 = b;
	return ok;
#else
	(void)adopted, (void)served, (void)built, (void)mark;
	return 1;
#endif
}

/* In-place messages of 64 KiB from a task built as we are, read by every
 * kind of call (the numbers are each message's tag and seed):
 *  1  pvm_bufinfo/pvm_getminfo tell its length, tag, source, this task
 *     as dst; two pvm_upkint served; one with stride 2 needs libpvm3's
 *     buffer, built with its cursor where ours was (values after the
 *     first 11 ints), and the next unpacks go on from there;
 *  2  pvm_setrbuf of it again goes on where it was (libpvm3 rewinds only
 *     a buffer not yet unpacking), then an unpack past its end: PvmNoData
 *     from libpvm3, as stock;
 *  3  pvm_unpackf after a served unpack: built, its cursor after it;
 *  4  pvm_setsbuf of it (to pack into it or send it): built, its bytes
 *     all there for pvm_upk* after pvm_setrbuf;
 *  5  pvm_precv of it: its bytes as a stock precv gets them (served).
 * Relinked, each message is adopted, 7 calls served and 3 builds. */
static int t_packed_adopted(void)
{
	int tid, b, n = -1, v[16], x = -1, nb, tag, src, ae, rc, rlen, me = pvm_mytid();
	struct pvmminfo mi;
	char *raw;

	CHECK(spawn("adsend", 1, &tid, NULL) == 0, "spawn");
	CHECK((b = ad_get(tid, 1)) > 0, "recv 1");
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tid), "the pair is not on RCP");
#endif
	ad_moved(0, 0, 0, 1); /* from here on */
	CHECK(pvm_bufinfo(b, &nb, &tag, &src) == 0 && nb == 4 * (AD_N + 1) && tag == 1 &&
	          src == tid,
	      "bufinfo %d %d t%x", nb, tag, (unsigned)src);
	CHECK(pvm_getminfo(b, &mi) == 0 && mi.len == nb && mi.tag == 1 && mi.src == tid &&
	          mi.dst == me,
	      "getminfo len %d tag %d src t%x dst t%x", mi.len, mi.tag, (unsigned)mi.src,
	      (unsigned)mi.dst);
	CHECK(pvm_upkint(&n, 1, 1) == 0 && n == AD_N, "count %d", n);
	CHECK(pvm_upkint(v, 10, 1) == 0 && v[0] == ad_val(1, 0) && v[9] == ad_val(1, 9),
	      "first ints %d %d", v[0], v[9]);
	memset(v, 0, sizeof v);
	CHECK(pvm_upkint(v, 5, 2) == 0, "strided unpack");
	for (int i = 0; i < 5; i++)
		CHECK(v[2 * i] == ad_val(1, 10 + i) && v[2 * i + 1] == 0, "strided int %d: %d", i,
		      v[2 * i]);
	CHECK(pvm_upkint(v, 3, 1) == 0 && v[0] == ad_val(1, 15) && v[2] == ad_val(1, 17),
	      "ints after the strided unpack %d %d", v[0], v[2]);
	CHECK(ad_moved(0, 2, 1, 0), "message 1: served 2, built 1");

	CHECK((b = ad_get(tid, 2)) > 0, "recv 2");
	CHECK(pvm_upkint(&n, 1, 1) == 0 && pvm_upkint(v, 5, 1) == 0 && v[4] == ad_val(2, 4),
	      "message 2 %d", v[4]);
	CHECK(pvm_setrbuf(b) == b && pvm_upkint(&x, 1, 1) == 0 && x == ad_val(2, 5),
	      "after pvm_setrbuf: %d, want the next int (no rewind)", x);
	raw = malloc(4 * (AD_N + 2));
	CHECK(raw, "no memory");
	ae = pvm_setopt(PvmAutoErr, 0);
	rc = pvm_upkint((int *)raw, AD_N + 1, 1);
	pvm_setopt(PvmAutoErr, ae);
	CHECK(rc == PvmNoData, "unpack past the end: %d, want PvmNoData", rc);
	CHECK(ad_moved(1, 3, 1, 0), "message 2: served 3, built 1");

	CHECK((b = ad_get(tid, 3)) > 0, "recv 3");
	CHECK(pvm_upkint(&n, 1, 1) == 0 && pvm_unpackf("%d", &x) == 0 && x == ad_val(3, 0),
	      "pvm_unpackf after a served unpack: %d", x);
	CHECK(pvm_upkint(&x, 1, 1) == 0 && x == ad_val(3, 1), "after pvm_unpackf: %d", x);
	CHECK(ad_moved(1, 1, 1, 0), "message 3: served 1, built 1");

	CHECK((b = ad_get(tid, 4)) > 0, "recv 4");
	CHECK(pvm_setsbuf(b) >= 0 && pvm_setsbuf(0) == b && pvm_setrbuf(b) == 0, "setsbuf, back");
	CHECK(pvm_upkint(&n, 1, 1) == 0 && n == AD_N && pvm_upkint((int *)raw, AD_N, 1) == 0,
	      "unpack after pvm_setsbuf");
	for (int i = 0; i < AD_N; i++)
		CHECK(((int *)raw)[i] == ad_val(4, i), "int %d: %d", i, ((int *)raw)[i]);
	CHECK(ad_moved(1, 0, 1, 0), "message 4: built 1");

	{
		char c = 0;
		CHECK(pvm_psend(tid, 5, &c, 1, PVM_BYTE) == 0, "ask 5");
	}
	CHECK(pvm_precv(tid, 5, raw, 4 * (AD_N + 1), PVM_BYTE, &src, &tag, &rlen) == 0 &&
	          rlen == 4 * (AD_N + 1),
	      "precv 5: %d bytes", rlen);
	CHECK(((int *)raw)[0] == AD_N && ((int *)raw)[AD_N] == ad_val(5, AD_N - 1),
	      "precv 5's ints %d %d", ((int *)raw)[0], ((int *)raw)[AD_N]);
	CHECK(ad_moved(1, 1, 0, 0), "message 5: served 1");
	free(raw);
	quit(&tid, 1);
	return 0;
}

/* ---- session 21: Raw and XDR messages sent from libpvm3's fragments
 * (pvm-glue/frags.c) and XDR ones unpacked where they landed ---- */

/* Child of packed-frags: a message with tag T (T_QUIT ends) asks for
 * message T: 1 and 2 XDR, {AD_N, ad_val(T, 0..AD_N-1)} then (1 only) 5
 * bytes, 3 shorts, 2 floats, 2 doubles, a complex, a double complex and a
 * long; 3 the same ints Raw; 4 eight ints XDR (a small message). */
static int child_fxsend(void)
{
	int parent = pvm_parent(), nb, tag, src, n = AD_N, *v = malloc(AD_N * sizeof *v);
	short sh[3] = {-2, 7, 30000};
	float fl[2] = {1.5f, -2.25f}, cx[2] = {3.5f, -1.0f};
	double db[2] = {1e300, -0.125}, dz[2] = {2.5, 1e-300};
	long lg = -5;
	if (!v)
		return 1;
	for (;;) {
		int b = pvm_recv(parent, -1), rc;
		if (b < 0 || pvm_bufinfo(b, &nb, &tag, &src) < 0)
			return 1;
		if (tag == T_QUIT)
			break;
		for (int i = 0; i < AD_N; i++)
			v[i] = ad_val(tag, i);
		rc = pvm_initsend(tag == 3 ? PvmDataRaw : PvmDataDefault) < 0;
		if (tag == 4)
			rc |= pvm_pkint(v, 8, 1);
		else
			rc |= pvm_pkint(&n, 1, 1) | pvm_pkint(v, AD_N, 1);
		if (tag == 1)
			rc |= pvm_pkbyte("abcde", 5, 1) | pvm_pkshort(sh, 3, 1) |
			      pvm_pkfloat(fl, 2, 1) | pvm_pkdouble(db, 2, 1) |
			      pvm_pkcplx(cx, 1, 1) | pvm_pkdcplx(dz, 1, 1) | pvm_pklong(&lg, 1, 1);
		if (rc || pvm_send(parent, tag) < 0)
			return 1;
	}
	free(v);
	return 0;
}

/* Messages from a task built as we are (numbers: each message's tag):
 *  1  XDR, 64 KiB of ints in libpvm3's fragments then one of each type:
 *     every value as packed; relinked the message came as one fragment
 *     and is adopted, every unpack served but the long's (libpvm3 decodes
 *     longs itself: built once; stock's value, whatever its XDR long
 *     makes of -5), then PvmNoData past the end;
 *  2  XDR ints unpacked as doubles (another type than packed): each
 *     double is two ints' words, as stock's decoder makes it;
 *  3  the same ints Raw, in several fragments: adopted, served;
 *  4  eight XDR ints: a small message, copied, not adopted. */
static int t_packed_frags(void)
{
	int tid, b, n = -1, *v = malloc(4 * (AD_N + 1)), ae, rc, nb, tag, src;
	char by[8] = {0};
	short sh[3] = {0};
	float fl[2] = {0}, cx[2] = {0};
	double db[2] = {0}, dz[2] = {0}, d2[4];
	long lg = 0;

	CHECK(v, "no memory");
	CHECK(spawn("fxsend", 1, &tid, NULL) == 0, "spawn");
	CHECK((b = ad_get(tid, 1)) > 0, "recv 1");
#ifndef PVMT_STOCK
	CHECK(pvm_rcp_route(tid), "the pair is not on RCP");
#endif
	ad_moved(0, 0, 0, 1);
	CHECK(pvm_bufinfo(b, &nb, &tag, &src) == 0 && tag == 1 && src == tid && nb >= 4 * AD_N,
	      "bufinfo %d %d", nb, tag);
	CHECK(pvm_upkint(&n, 1, 1) == 0 && n == AD_N && pvm_upkint(v, AD_N, 1) == 0, "ints");
	for (int i = 0; i < AD_N; i++)
		CHECK(v[i] == ad_val(1, i), "int %d: %d", i, v[i]);
	CHECK(pvm_upkbyte(by, 5, 1) == 0 && !memcmp(by, "abcde", 5), "bytes %.5s", by);
	CHECK(pvm_upkshort(sh, 3, 1) == 0 && sh[0] == -2 && sh[1] == 7 && sh[2] == 30000,
	      "shorts %d %d %d", sh[0], sh[1], sh[2]);
	CHECK(pvm_upkfloat(fl, 2, 1) == 0 && fl[0] == 1.5f && fl[1] == -2.25f, "floats %g %g",
	      fl[0], fl[1]);
	CHECK(pvm_upkdouble(db, 2, 1) == 0 && db[0] == 1e300 && db[1] == -0.125, "doubles %g %g",
	      db[0], db[1]);
	CHECK(pvm_upkcplx(cx, 1, 1) == 0 && cx[0] == 3.5f && cx[1] == -1.0f, "cplx %g %g", cx[0],
	      cx[1]);
	CHECK(pvm_upkdcplx(dz, 1, 1) == 0 && dz[0] == 2.5 && dz[1] == 1e-300, "dcplx %g %g", dz[0],
	      dz[1]);
	CHECK(ad_moved(0, 8, 0, 0), "message 1: 8 served (adopted before the count began)");
	/* stock libpvm3 on LP64 gives 4294967291 (its XDR long is 32 bits,
	 * read back unsigned); relinked it is libpvm3's decoder too */
	CHECK(pvm_upklong(&lg, 1, 1) == 0 && (int)lg == -5, "long %ld", lg);
	ae = pvm_setopt(PvmAutoErr, 0);
	rc = pvm_upkint(&n, 1, 1);
	pvm_setopt(PvmAutoErr, ae);
	CHECK(rc == PvmNoData, "unpack past the end: %d, want PvmNoData", rc);
	CHECK(ad_moved(0, 0, 1, 0), "message 1: the long built it");

	CHECK((b = ad_get(tid, 2)) > 0 && pvm_upkint(&n, 1, 1) == 0 && n == AD_N, "recv 2");
	CHECK(pvm_upkdouble(d2, 4, 1) == 0, "ints as doubles");
	for (int i = 0; i < 4; i++) {
		uint64_t w =
		    (uint64_t)(uint32_t)ad_val(2, 2 * i) << 32 | (uint32_t)ad_val(2, 2 * i + 1);
		double want;
		memcpy(&want, &w, sizeof want);
		CHECK(!memcmp(&d2[i], &want, sizeof want), "double %d from ints %d %d", i,
		      ad_val(2, 2 * i), ad_val(2, 2 * i + 1));
	}
	CHECK(pvm_upkint(&n, 1, 1) == 0 && n == ad_val(2, 8), "int after the doubles %d", n);
	CHECK(ad_moved(1, 3, 0, 0), "message 2: adopted, 3 served");

	CHECK((b = ad_get(tid, 3)) > 0 && pvm_upkint(&n, 1, 1) == 0 && n == AD_N, "recv 3");
	CHECK(pvm_upkint(v, AD_N, 1) == 0, "raw ints");
	for (int i = 0; i < AD_N; i++)
		CHECK(v[i] == ad_val(3, i), "raw int %d: %d", i, v[i]);
	CHECK(ad_moved(1, 2, 0, 0), "message 3: adopted, 2 served");

	CHECK((b = ad_get(tid, 4)) > 0 && pvm_upkint(v, 8, 1) == 0 && v[7] == ad_val(4, 7),
	      "small XDR %d", v[7]);
	CHECK(ad_moved(0, 0, 0, 0), "message 4: not adopted");
	free(v);
	quit(&tid, 1);
	return 0;
}

/* Empty Raw and Default messages, packed, both ways (review21, session
 * 21): the child (pfwd) sends each back as it came.  Under
 * PVMRCP_UPK_MIN=0 (run.sh) every message is a candidate for adoption,
 * and an empty one has no fragment length after its 8-int header:
 * reading one there ran 4 bytes past the received block (msgbuf.c
 * unpack_raw and adopt_xdr; caught by ASan). */
static int t_packed_empty(void)
{
	int tid, nb, tag, src;
	CHECK(spawn("pfwd", 1, &tid, NULL) == 0, "spawn");
	for (int e = 0; e < 2; e++) {
		int b;
		CHECK(pvm_initsend(e ? PvmDataDefault : PvmDataRaw) > 0, "initsend");
		CHECK(pvm_send(tid, 300 + e) == 0, "send");
		b = pvm_recv(tid, -1);
		CHECK(b > 0 && pvm_bufinfo(b, &nb, &tag, &src) == 0, "recv %d", b);
		CHECK(tag == 1300 + e && src == tid && nb == 0, "tag %d len %d, want %d and 0", tag,
		      nb, 1300 + e);
	}
	quit(&tid, 1);
	return 0;
}
