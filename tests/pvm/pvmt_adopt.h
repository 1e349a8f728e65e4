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
