/*
 * pvm-glue/msgbuf.c — libpvm3 buffers made for RCP messages: a message
 * that came over RCP becomes a PvmDataRaw buffer when the application
 * asks for one (pvm_recv and friends, not pvm_precv), its bytes packed as
 * a stock psend's, or a packed message (PR_PACKED, packed.c) rebuilt by
 * pvm_upkmesg, or one in this host's raw encoding copied into libpvm3's
 * fragments.  syn[] records each such buffer's source, tag and length,
 * since pvm_bufinfo must tell them as for a message libpvm3 received:
 * pvm_bufinfo, pvm_getminfo and pvm_freebuf are wrapped here (moved
 * from recv.c in session 21).  Called from recv.c; calls only libpvm3,
 * upk.c and glue.c's state.
 */
#include <stdlib.h>
#include <string.h>

#include "pvm-glue/inplace.h"
#include "pvm-glue/msgbuf.h"
#include "pvm-glue/upk.h"

#define S pvmrcpi_st

struct pr_syn *pvmrcpi_syn_find(int bufid)
{
	for (int i = 0; i < S.nsyn; i++)
		if (S.syn[i].bufid == bufid)
			return &S.syn[i];
	return NULL;
}

void pvmrcpi_syn_del(int bufid)
{
	struct pr_syn *s = pvmrcpi_syn_find(bufid);
	if (s)
		*s = S.syn[--S.nsyn];
}

static int syn_add(int bufid, const struct pr_msg *m)
{
	if (S.nsyn == S.capsyn) {
		int nc = S.capsyn ? 2 * S.capsyn : 16;
		struct pr_syn *n = realloc(S.syn, (size_t)nc * sizeof *n);
		if (!n)
			return PvmNoMem;
		S.syn = n;
		S.capsyn = nc;
	}
	S.syn[S.nsyn++] = (struct pr_syn){bufid, (int)m->len, m->tag, m->src, m->ctx};
	return 0;
}

/* A packed message in this host's raw encoding (packed Raw, or in-place,
 * which is sent raw): its fragments' bytes, which take_msg checked add up,
 * packed into a PvmDataRaw buffer (one copy, into libpvm3's small
 * fragments; pvm_upkmesg would copy them twice and allocate a fragment of
 * the message's size), its source, tag and length told by syn[] as for a
 * psend.  Raw data is a byte stream to pvm_upk*, fragments or not
 * (inplace.c), so they decode as stock.  A large message of one fragment
 * (an in-place send's) is not copied at all: the buffer stays empty and
 * pvm_upk* read the bytes where they landed (upk.c, ADOPTED BUFFERS). */
static int unpack_raw(struct pr_msg *m)
{
	const char *p = (const char *)m->data + 8 * sizeof(int);
	int b = pvm_mkbuf(PvmDataRaw), old, rc = 0;
	long left = ((int *)m->data)[0];
	if (b < 0)
		return b;
	m->len = (size_t)left;
	/* left > 0 first: an empty message (PVMRCP_UPK_MIN=0) has no fragment
	 * length after the header to read (review21, session 21) */
	if (pvmrcpi_upk_min() >= 0 && left > 0 && left >= pvmrcpi_upk_min() &&
	    ((int *)p)[0] == left && !syn_add(b, m)) {
		/* one fragment: pvm_upk* read it where it lies (upk.c) */
		if (!pvmrcpi_upk_adopt(b, 0, m->data, p + sizeof(int), (size_t)left)) {
			m->bufid = b;
			m->data = NULL;
			return 0;
		}
		pvmrcpi_syn_del(b);
	}
	old = pvm_setsbuf(b);
	while (left > 0 && rc >= 0) {
		int frl;
		memcpy(&frl, p, sizeof frl);
		if (frl)
			rc = pvm_pkbyte((char *)p + sizeof frl, frl, 1);
		p += sizeof frl + (size_t)frl;
		left -= frl;
	}
	pvm_setsbuf(old);
	if (rc < 0 || syn_add(b, m)) {
		pvmrcpi_real.freebuf(b);
		return rc < 0 ? rc : PvmNoMem;
	}
	m->bufid = b;
	free(m->data);
	m->data = NULL;
	return 0;
}

/* An XDR message of one fragment of at least PVMRCP_UPK_MIN bytes (what
 * a relinked sender makes, frags.c): an empty PvmDataDefault buffer whose
 * pvm_upk* decode the bytes where they landed (upk.c, ADOPTED BUFFERS),
 * its source, tag and length told by syn[].  0 done; else M is as it was
 * and the caller rebuilds the message with pvm_upkmesg. */
static int adopt_xdr(struct pr_msg *m)
{
	const char *p = (const char *)m->data + 8 * sizeof(int);
	long left = ((int *)m->data)[0];
	size_t len = m->len;
	int b;
	if (pvmrcpi_upk_min() < 0 || left <= 0 || left < pvmrcpi_upk_min() || (left & 3) ||
	    ((int *)p)[0] != left || (b = pvm_mkbuf(PvmDataDefault)) < 0)
		return 1;
	m->len = (size_t)left;
	if (!syn_add(b, m)) {
		if (!pvmrcpi_upk_adopt(b, 1, m->data, p + sizeof(int), (size_t)left)) {
			m->bufid = b;
			m->data = NULL;
			return 0;
		}
		pvmrcpi_syn_del(b);
	}
	pvmrcpi_real.freebuf(b);
	m->len = len;
	return 1;
}

/* A packed message (PR_PACKED): its bytes are what pvm_pkmesg wrote in
 * the sender's PvmDataRaw buffer (pksend.c, packed_bytes), checked and in
 * this host's byte order again (take_msg, packed.c); pvm_upkmesg
 * rebuilds the message from them, encoding included, so pvm_upk* decode
 * it (and fail past its end or on another type) exactly as stock.  The
 * header's ctx, tag, src and dst are set to what this message is, so
 * libpvm3's own pvm_bufinfo/pvm_getminfo tell the truth about it. */
static int unpack_msg(struct pr_msg *m)
{
	int b, old, save, nb, rc, *hdr = m->data;
	if (m->len < 8 * sizeof(int) || hdr[0] < 0)
		return PvmBadMsg;
	if (hdr[4] == pvmrcpi_enc_sig(0))
		return unpack_raw(m);
	if (hdr[4] == pvmrcpi_enc_sig(1) && !adopt_xdr(m))
		return 0;
	hdr[1] = m->ctx;
	hdr[2] = m->tag;
	hdr[6] = m->src;
	hdr[7] = S.mytid;
	b = pvm_mkbuf(PvmDataRaw);
	if (b < 0)
		return b;
	old = pvm_setsbuf(b);
	rc = pvm_pkbyte(m->data, (int)m->len, 1);
	pvm_setsbuf(old);
	save = pvm_setrbuf(b);
	nb = rc < 0 ? rc : pvm_upkmesg();
	pvm_setrbuf(save);
	pvmrcpi_real.freebuf(b);
	if (nb < 0)
		return nb;
	m->bufid = nb;
	m->len = (size_t)hdr[0]; /* the message's length, as pvm_bufinfo's */
	free(m->data);
	m->data = NULL;
	return 0;
}

/* Packs M's bytes into a PvmDataRaw buffer, as a stock psend would. */
int pvmrcpi_pack_msg(struct pr_msg *m)
{
	int b, old, rc;
	if (m->bufid)
		return 0;
	if (m->packed)
		return unpack_msg(m);
	b = pvm_mkbuf(PvmDataRaw);
	if (b < 0)
		return b;
	old = pvm_setsbuf(b);
	rc = m->len ? pvm_pkbyte(m->data, (int)m->len, 1) : 0;
	pvm_setsbuf(old);
	if (rc < 0 || syn_add(b, m)) {
		pvmrcpi_real.freebuf(b);
		return rc < 0 ? rc : PvmNoMem;
	}
	m->bufid = b;
	free(m->data);
	m->data = NULL;
	return 0;
}

/* A buffer we made: does libpvm3 still see one of ours under that id?
 * (libpvm3 reports a packed, never-sent buffer as from this task, length
 * 0; a message received from another task has another source.) */
static struct pr_syn *syn_valid(int bufid)
{
	struct pr_syn *s = S.nsyn ? pvmrcpi_syn_find(bufid) : NULL;
	int nb, tag, src;
	if (!s)
		return NULL;
	if (pvmrcpi_real.bufinfo(bufid, &nb, &tag, &src) < 0 || src != S.mytid) {
		pvmrcpi_syn_del(bufid);
		return NULL;
	}
	return s;
}

void pvmrcpi_free_rbuf(void)
{
	int old = pvm_getrbuf();
	if (old > 0) {
		pvmrcpi_syn_del(old);
		pvmrcpi_upk_drop(old);
		pvmrcpi_real.freebuf(old);
	}
}

int pvm_bufinfo(int bufid, int *len, int *tag, int *tid)
{
	struct pr_syn *s;
	if (pvmrcpi_resolve())
		return PvmSysErr;
	s = syn_valid(bufid);
	if (!s)
		return pvmrcpi_real.bufinfo(bufid, len, tag, tid);
	if (len)
		*len = s->len;
	if (tag)
		*tag = s->tag;
	if (tid)
		*tid = s->src;
	return 0;
}

int pvm_getminfo(int bufid, struct pvmminfo *info)
{
	struct pr_syn *s;
	int rc;
	if (pvmrcpi_resolve())
		return PvmSysErr;
	s = syn_valid(bufid);
	rc = pvmrcpi_real.getminfo(bufid, info);
	if (rc >= 0 && s && info) {
		info->len = s->len;
		info->tag = s->tag;
		info->src = s->src;
		info->ctx = s->ctx;
		info->dst = S.mytid;
	}
	return rc;
}

int pvm_freebuf(int bufid)
{
	if (pvmrcpi_resolve())
		return PvmSysErr;
	if (S.nsyn)
		pvmrcpi_syn_del(bufid);
	pvmrcpi_upk_drop(bufid);
	return pvmrcpi_real.freebuf(bufid);
}
