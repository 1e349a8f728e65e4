/*
 * pvm-glue/frags.c — a Raw or XDR send buffer's data read where libpvm3
 * holds it.
 *
 * WHY.  Until session 21 a packed pvm_send over RCP asked libpvm3 for the
 * message with pvm_pkmesg (a copy of every fragment into a temporary raw
 * buffer, itself cut into fresh 4 KiB fragments) and unpacked that into
 * one block with pvm_upkbyte (a second copy), before RCP copied it a
 * third time onto the wire: at 1 MiB the sender's glue moved every byte
 * twice and allocated ~260 fragments per message.  pvm3.h has no call
 * that lends a buffer's bytes, so the glue now reads libpvm3's own
 * message descriptor (midtobuf, exported by libpvm3.so and already used
 * for in-place messages, pksend.c) and walks its fragment list: each
 * fragment's bytes become a segment of one gathered RCP message
 * (rcp_isendv, pksend.c), or, for a small message, are copied once into a
 * block.
 *
 * CHECKED, NOT ASSUMED.  The descriptor and fragment layouts below are
 * those of PVM 3.4 (pmsg.h, pvmfrag.h), unchanged since 1997, declared
 * in no installed header.  Before trusting them the walk checks what a
 * wrong layout could not pass: the descriptor's id and encoding are the
 * ones pvm_getminfo reports, the fragment list is a consistent ring
 * (each fragment's back link points at the one before) of at most
 * MAX_FRAGS, each fragment's data lies inside its buffer, and the
 * fragments add up to libpvm3's own length of the message (pmsg_setlen,
 * then pvm_getminfo).  Anything else returns 0 and the send takes the
 * pvm_pkmesg path as before.  Nothing here writes to libpvm3's memory
 * except through pmsg_setlen.
 *
 * ONE FRAGMENT ON THE WIRE.  The fragments are sent as ONE fragment of
 * the message's whole length (the header says {len}, then {len, all the
 * bytes}), so the receiver can unpack it where it landed (upk.c).  The
 * receiver cannot tell a difference in what pvm_upk* return:
 * - Raw data is a byte stream to libpvm3's decoder (lpvmpack.c, byteupk
 *   crosses fragments), so any cut gives the same bytes.
 * - XDR: libpvm3's encoder starts a new fragment only between items (an
 *   item that does not fit is written again in the next fragment) or
 *   inside a byte array, and each item is a multiple of 4 bytes (byte
 *   arrays padded), so when every fragment ends on a 4-byte boundary
 *   the concatenation is the same XDR stream, item for item, and the
 *   decoder's positions agree mod 4 (its byte-array padding rounds the
 *   position within a fragment).  An item decoded across a boundary
 *   (unpacking in another type than packed) gives the same value: stock
 *   libpvm3 copies the split item's head before the next fragment
 *   (dec_xdr_step); here it is simply contiguous.  A fragment off the
 *   boundary (a fragment size that is not a multiple of 4 cutting a byte
 *   array) makes the walk return 0.
 *
 * KEPT BY REFERENCE (session 21, packed6).  PVM lets the user pack into,
 * free or replace the send buffer as soon as pvm_send returns, so a send
 * from the fragments first waited for RCP to finish with them: a sender
 * whose receiver computed outside PVM blocked until its next PVM call,
 * where stock returns at once (the message sits in pvmd or a socket).
 * libpvm3's messages are reference counted (pmsg.h m_ref; pvm_freebuf is
 * umbuf_free: the id goes, then pmsg_unref, which frees the fragments
 * only at zero), so pvmrcpi_frags_iov takes one reference of its own and
 * the send's completion callback drops it (pvmrcpi_frags_release):
 * pvm_freebuf or pvm_initsend meanwhile only gives up the id.  Packing
 * more into a buffer that is still sending appends after every
 * fragment's length, so the bytes sent are never rewritten.  pvm_send
 * returns at once, within PVMRCP_COPY_BYTES in flight as a copied send
 * (send.c's pvmrcpi_throttle).  In-place data stay waited for: that memory is
 * the user's, not libpvm3's.
 */
#include <pvm3.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/frags.h"
#include "pvm-glue/glue.h"
#include "pvm-glue/packed.h"

/* libpvm3 3.4's fragment (pvmfrag.h), as far as it is read here. */
struct lp_frag {
	struct lp_frag *link, *rlink; /* ring through the message's master */
	char *buf;                    /* the fragment's buffer; NULL in the master */
	char *dat;                    /* its data, at or after buf */
	int max;                      /* buffer size */
	int len;                      /* data length */
};

/* libpvm3 3.4's message descriptor (pmsg.h), its leading fields. */
struct lp_pmsg {
	void *link, *rlink, *codef;
	struct lp_frag *frag; /* master fragment: the ring's head, no data */
	struct lp_frag *cfrag;
	int ref, mid, len, ctx, tag, wid, src, dst, enc, flag, cpos, crc;
};

/* More fragments than this and the walk gives up (a broken ring, or a
 * message of 256 MiB in 4 KiB fragments: the pvm_pkmesg path). */
#define MAX_FRAGS 65536

unsigned long pvmrcpi_frags_gathered, pvmrcpi_frags_copied;
unsigned long pvmrcpi_sent_gathered, pvmrcpi_sent_copied;
unsigned long long pvmrcpi_bytes_copied;

int pvm_rcp_sendstats(unsigned long *gathered, unsigned long *copied, unsigned long long *bytes)
{
	if (gathered)
		*gathered = pvmrcpi_sent_gathered;
	if (copied)
		*copied = pvmrcpi_sent_copied;
	if (bytes)
		*bytes = pvmrcpi_bytes_copied;
	return 0;
}

int pvmrcpi_frags(int bufid, int enc, int xdr, struct rcp_iov **iov, int *n, long *len)
{
	struct lp_pmsg *mp;
	struct lp_frag *head, *fp, *prev;
	struct pvmminfo mi;
	struct rcp_iov *v;
	long total = 0;
	int nf = 0, cap = 0;

	if (!pvmrcpi_real.midtobuf || !pvmrcpi_real.pmsg_setlen)
		return 0;
	if (!(mp = pvmrcpi_real.midtobuf(bufid)) || pvmrcpi_real.pmsg_setlen(mp) < 0 ||
	    pvmrcpi_real.getminfo(bufid, &mi) < 0)
		return 0;
	if (mp->mid != bufid || mp->enc != enc || mi.enc != enc || mp->len != mi.len ||
	    mi.len < 0 || !(head = mp->frag) || head->buf)
		return 0;
	/* count and check first: nothing allocated for a ring we refuse */
	for (prev = head, fp = head->link; fp != head; prev = fp, fp = fp->link) {
		if (!fp || fp->rlink != prev || ++cap > MAX_FRAGS || fp->len < 0 || fp->max < 0)
			return 0;
		if (fp->len &&
		    (!fp->buf || fp->dat < fp->buf || fp->dat - fp->buf > (long)fp->max - fp->len))
			return 0;
		if (xdr && (fp->len & 3))
			return 0;
		total += fp->len;
		if (total > mi.len)
			return 0;
	}
	if (head->rlink != prev || total != mi.len)
		return 0;
	if (!(v = malloc((size_t)(cap ? cap : 1) * sizeof *v)))
		return PvmNoMem;
	for (fp = head->link; fp != head; fp = fp->link)
		if (fp->len)
			v[nf++] = (struct rcp_iov){fp->dat, (size_t)fp->len};
	*iov = v;
	*n = nf;
	*len = total;
	return 1;
}

/* pvm_pkmesg's header {len, ctx, tag, wid, enc, crc, src, dst} as *MI
 * tells it, then the one fragment's length LEN (none if 0), in wire
 * order in HEAD; its length in bytes, 0 if refused (packed.c). */
static size_t head_of(unsigned char *head, const struct pvmminfo *mi, long len)
{
	int hdr[PR_PK_HDR + 1] = {(int)len, mi->ctx, mi->tag, mi->wid, mi->enc,
	                          mi->crc,  mi->src, mi->dst, (int)len};
	size_t hl = sizeof(int) * (PR_PK_HDR + (len ? 1u : 0u));
	memcpy(head, hdr, hl);
	return pvmrcpi_pk_head_to_wire(head, hl) ? 0 : hl;
}

int pvmrcpi_frags_copy(int bufid, const struct pvmminfo *mi, int xdr, char **out, size_t *len)
{
	struct rcp_iov *iov;
	long fl;
	size_t hl;
	char *b, *w;
	int n, rc = pvmrcpi_frags(bufid, mi->enc, xdr, &iov, &n, &fl);

	if (rc <= 0)
		return rc;
	if (!(b = malloc((PR_PK_HDR + 1) * sizeof(int) + (size_t)fl))) {
		free(iov);
		return PvmNoMem;
	}
	if (!(hl = head_of((unsigned char *)b, mi, fl))) {
		free(iov);
		free(b);
		return 0;
	}
	w = b + hl;
	for (int i = 0; i < n; i++) {
		memcpy(w, iov[i].base, iov[i].len);
		w += iov[i].len;
	}
	free(iov);
	pvmrcpi_frags_copied++;
	*out = b;
	*len = hl + (size_t)fl;
	return 1;
}

int pvmrcpi_frags_iov(int bufid, const struct pvmminfo *mi, int xdr, size_t min,
                      struct pr_hold **hold, struct rcp_iov **iov, int *n)
{
	struct rcp_iov *fr, *v;
	struct lp_pmsg *mp;
	struct pr_hold *h;
	long fl;
	size_t hl;
	int nf, rc;

	if (!pvmrcpi_real.pmsg_unref)
		return 0; /* nothing to let the reference go with */
	if ((rc = pvmrcpi_frags(bufid, mi->enc, xdr, &fr, &nf, &fl)) <= 0)
		return rc;
	mp = pvmrcpi_real.midtobuf(bufid); /* checked by pvmrcpi_frags */
	h = (size_t)fl > min && mp->ref > 0 ? malloc(sizeof *h) : NULL;
	if (!h || !(hl = head_of(h->head, mi, fl))) {
		rc = h || (size_t)fl <= min || mp->ref <= 0 ? 0 : PvmNoMem;
		free(h);
		free(fr);
		return rc;
	}
	if (!(v = malloc((size_t)(nf + 1) * sizeof *v))) {
		free(h);
		free(fr);
		return PvmNoMem;
	}
	v[0] = (struct rcp_iov){h->head, hl};
	memcpy(v + 1, fr, (size_t)nf * sizeof *fr);
	free(fr);
	mp->ref++; /* pvm_freebuf now leaves the message to pvmrcpi_frags_release */
	h->msg = mp;
	h->len = hl + (size_t)fl;
	pvmrcpi_frags_gathered++;
	*hold = h;
	*iov = v;
	*n = nf + 1;
	return 1;
}

void pvmrcpi_frags_release(struct pr_hold *h)
{
	pvmrcpi_real.pmsg_unref(h->msg);
	free(h);
}
