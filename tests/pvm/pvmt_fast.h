/*
 * tests/pvm/pvmt_fast.h — psend's and precv's fast paths (pvm-glue/glue.h,
 * FAST PATHS, session 21) across stock messages: included by pvmt.c.
 *
 * The fast paths skip psend's and precv's checks while the generation
 * they were passed in holds; a stock message between two psends must
 * move it, or the second psend skips the BARRIER that tells the receiver
 * a stock message comes first, and the receiver delivers them out of
 * order.  Between two relinked tasks almost every message goes by RCP
 * (packed ones too, since session 20), so the sender makes its stock
 * messages the one way that still goes by pvmd: in-place messages larger
 * than a packed one RCP carries (16 KiB) with the gather turned off
 * (PVMRCP_INPLACE_MAX=0, read at the task's first in-place send), and
 * checks that none went by RCP (pvm_rcp_packed_sent).
 */

#define FSTK_INTS 5000 /* 20,000 B: above INPLACE_RCP_MAX (send.c) */

/* Sends messages FROM..TO-1 (tag 5, the index first) to DST in runs of
 * 1..8 psends or 1..8 stock in-place sends drawn from *S; counts the
 * stock ones in *NSTOCK.  0 or -1. */
static int fstk_send(int dst, int from, int to, uint32_t *s, int *nstock)
{
	static int32_t big[FSTK_INTS];
	int i = from;
	while (i < to) {
		int stock, run;
		*s = *s * 1103515245u + 12345u;
		stock = (int)((*s >> 16) & 1);
		run = 1 + (int)((*s >> 20) % 8);
		for (int k = 0; k < run && i < to; k++, i++) {
			big[0] = i;
			if (!stock) {
				CHECK(pvm_psend(dst, 5, big, 1, PVM_INT) == 0, "psend %d", i);
				continue;
			}
			++*nstock;
			CHECK(pvm_initsend(PvmDataInPlace) >= 0 &&
			          pvm_pkint(big, FSTK_INTS, 1) >= 0 && pvm_send(dst, 5) >= 0,
			      "stock send %d", i);
		}
	}
	return 0;
}

/* Receives messages FROM..TO-1 from SRC with precv (tag 5 or any) and
 * checks their order; PROBE: every other one is found by pvm_probe first
 * (which takes it out of RCP into the held queue). */
static int fstk_recv(int src, int from, int to, int probe)
{
	static int32_t big[FSTK_INTS];
	int atid, atag, alen, b;
	for (int i = from; i < to; i++) {
		big[0] = -1;
		if (probe && (i & 1) == 0) {
			while ((b = pvm_probe(src, 5)) == 0)
				;
			CHECK(b > 0, "probe #%d: %d", i, b);
		}
		CHECK(pvm_precv(src, i & 1 ? 5 : -1, big, FSTK_INTS, PVM_INT, &atid, &atag,
		                &alen) == 0 &&
		          atid == src && atag == 5 && (alen == 4 || alen == 4 * FSTK_INTS),
		      "precv #%d (t%x tag %d, %d B)", i, atid, atag, alen);
		CHECK(big[0] == i, "message #%d arrived as #%d (order)", big[0], i);
	}
	return 0;
}

/* "fstk" child: {peer, role (0 sends, 1 receives), n, seed} from the
 * parent.  Three parts of N messages: the first received as they come;
 * the second sent whole, then a psend of tag 8, which the receiver waits
 * for before it takes any of them, so every stock message is held when
 * the psends after it are matched (a missing BARRIER then reorders them
 * every run, not only when RCP outruns pvmd); the third received with a
 * pvm_probe before every other precv.  Both send the parent a verdict
 * (tag 6): 0, or 1 (why on stderr). */
static int child_fstk(void)
{
	int parent = pvm_parent(), atid, atag, alen, arg[4], r = 0, n;
	char c = 0;

	setenv("PVMRCP_INPLACE_MAX", "0", 1);
	if (pvm_precv(parent, 7, arg, 4, PVM_INT, &atid, &atag, &alen) || alen != 16)
		return 1;
	why[0] = 0;
	n = arg[2];
	if (arg[1] == 0) {
		uint32_t s = (uint32_t)arg[3];
		int nstock = 0;
#ifndef PVMT_STOCK
		pvm_rcp_packed_sent(1);
#endif
		r = fstk_send(arg[0], 0, n, &s, &nstock) ||
		    fstk_send(arg[0], n, 2 * n, &s, &nstock) ||
		    pvm_psend(arg[0], 8, &c, 1, PVM_BYTE) ||
		    fstk_send(arg[0], 2 * n, 3 * n, &s, &nstock);
#ifndef PVMT_STOCK
		if (!r && pvm_rcp_packed_sent(0) != 0)
			r = fail("%ld of %d in-place messages went by RCP", pvm_rcp_packed_sent(0),
			         nstock);
#endif
		if (!r && nstock == 0)
			r = fail("no stock message in %d", 3 * n);
	} else {
		r = fstk_recv(arg[0], 0, n, 0) ||
		    pvm_precv(arg[0], 8, &c, 1, PVM_BYTE, &atid, &atag, &alen) ||
		    fstk_recv(arg[0], n, 2 * n, 0) || fstk_recv(arg[0], 2 * n, 3 * n, 1);
	}
	if (r)
		fprintf(stderr, "fstk %s (seed %d): %s\n", arg[1] ? "receiver" : "sender", arg[3],
		        why[0] ? why : "a call failed");
	pvm_psend(parent, 6, &r, 1, PVM_INT);
	return 0;
}

/* fast-stock: psends and stock messages from one task to another in
 * seeded runs arrive in order (the sender's psend fast path moves to the
 * slow one after each stock message, which sends the BARRIER; the
 * receiver's precv fast path leaves them to the matcher, and a message
 * pvm_probe moved to the held queue to precv's slow path).  Mutants seen
 * failing: no generation move at a stock send (send.c fence and
 * pvmrcpi_count_stock both), precv's fast path not comparing the
 * generation, held_add not moving it. */
static int t_fast_stock(void)
{
	int tids[2], atid, atag, alen, r;
	enum { N = 300, SEED = 1 };
	CHECK(spawn("fstk", 2, tids, NULL) == 0, "spawn");
	for (int k = 0; k < 2; k++) {
		int arg[4] = {tids[1 - k], k, N, SEED};
		CHECK(pvm_psend(tids[k], 7, arg, 4, PVM_INT) == 0, "psend args");
	}
	for (int k = 0; k < 2; k++) {
		r = -1;
		CHECK(pvm_precv(tids[k], 6, &r, 1, PVM_INT, &atid, &atag, &alen) == 0, "verdict");
		CHECK(r == 0, "the %s saw a problem (see its stderr; seed %d)",
		      k ? "receiver" : "sender", SEED);
	}
	return 0;
}
