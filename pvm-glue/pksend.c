/*
 * pvm-glue/pksend.c — packed messages sent over RCP: pvm_send and
 * pvm_mcast (a stock send otherwise, counted for order: send.c).
 */
#include <stdlib.h>
#include <string.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/frags.h"
#include "pvm-glue/glue.h"
#include "pvm-glue/inplace.h"
#include "pvm-glue/packed.h"
#include "pvm-glue/send.h"

#define S pvmrcpi_st

/* The encodings whose buffers go over RCP: PvmDataRaw, PvmDataDefault
 * (XDR) and PvmDataInPlace, as libpvm3 tells them in pvm_getminfo's enc
 * (learnt once from buffers of each kind, in this order).  An in-place
 * buffer's fragments point into the user's memory; packed_bytes gathers
 * them from there and labels the message raw, as stock libpvm3 does when
 * it sends one (a receiver has no in-place decoders: pvm_upk* would fail).
 * User encodings go by pvmd. */
static int enc_known, enc_sig[3];

static int enc_ok(int enc)
{
	if (!enc_known) {
		static const int kinds[3] = {PvmDataRaw, PvmDataDefault, PvmDataInPlace};
		enc_known = 1;
		pvmrcpi_ip_malloc_setup(); /* the first packed message of this task */
		for (int i = 0; i < 3; i++) {
			struct pvmminfo mi;
			int b = pvm_mkbuf(kinds[i]);
			enc_sig[i] = -1 - i;
			if (b > 0 && pvmrcpi_real.getminfo(b, &mi) >= 0)
				enc_sig[i] = mi.enc;
			pvmrcpi_real.freebuf(b);
		}
		/* three different signatures, or we cannot tell them apart */
		if (enc_sig[0] == enc_sig[1] || enc_sig[0] == enc_sig[2] ||
		    enc_sig[1] == enc_sig[2])
			enc_known = -1;
		if (!pvmrcpi_real.midtobuf || !pvmrcpi_real.pmsg_setlen)
			enc_sig[2] = enc_sig[0]; /* no in-place over RCP */
	}
	return enc_known > 0 && (enc == enc_sig[0] || enc == enc_sig[1] || enc == enc_sig[2]);
}

/* In-place messages whose packs inplace.c did not record all of go by
 * pvmd above this size: they are copied twice (pvm_pkmesg into a
 * temporary buffer, then into the message) and libpvm3 allocates a fresh
 * fragment of their size for each, while stock's direct route sends them
 * from the user's memory: at 4 MiB stock took 2.2 ms a round trip, RCP
 * 14.5 ms (docs/results.md, issue 22).  Smaller ones are far faster over
 * RCP (3.0 against 62.6 us at 8 B). */
#define INPLACE_RCP_MAX 16384

/* Gathered in-place messages above this go by pvmd too
 * (PVMRCP_INPLACE_MAX, read once; -1: no limit): session 18 measured the
 * gather 2.3x faster than stock's direct route at 64 KiB but 0.7x at
 * 1 MiB and 0.6x at 4 MiB (one copy more than stock's writev; and the
 * receiver's pvm_pkbyte), so the limit was 128 KiB.  Since session 20
 * the receiver unpacks them where they landed (upk.c): 2.1-2.4x stock's
 * best route at 4 MiB, 3.6-5.5x at 1 MiB in three alternating runs, so the
 * limit is 8 MiB: a 4 MiB array with anything packed beside it (the
 * benchmark's count: 4 MiB + 4 bytes) stays on RCP; larger sizes were not
 * measured (docs/results.md). */
static long gather_max(void)
{
	static long max = -2;
	if (max == -2) {
		const char *e = getenv("PVMRCP_INPLACE_MAX");
		max = e && *e ? strtol(e, NULL, 10) : 8388608;
		if (max < 0)
			max = 0x7fffffff;
	}
	return max;
}

/* This host's raw encoding (pvm_getminfo's enc of a PvmDataRaw buffer),
 * or XDR's (PvmDataDefault), or -1 if they could not be told apart. */
int pvmrcpi_enc_sig(int xdr)
{
	(void)enc_ok(0); /* learns the encodings once */
	return enc_known > 0 ? enc_sig[xdr ? 1 : 0] : -1;
}

/* Does buffer SBUF (*MI filled) go over RCP: 0 no; 1 by pvm_pkmesg's
 * bytes (an encoding we carry; an in-place message not above
 * INPLACE_RCP_MAX, its length counted first, as pvm_send would); 2 an
 * in-place message gathered from the user's memory (inplace.c). */
static int for_rcp(int sbuf, struct pvmminfo *mi)
{
	if (pvmrcpi_real.getminfo(sbuf, mi) < 0 || !enc_ok(mi->enc))
		return 0;
	if (mi->enc == enc_sig[2] && enc_sig[2] != enc_sig[0]) {
		void *mp = pvmrcpi_real.midtobuf(sbuf);
		if (!mp || pvmrcpi_real.pmsg_setlen(mp) < 0 || pvmrcpi_real.getminfo(sbuf, mi) < 0)
			return 0;
		if (pvmrcpi_ip_ok(sbuf, mi->len) && mi->len <= gather_max())
			return 2;
		return mi->len <= INPLACE_RCP_MAX;
	}
	return 1;
}

/* Raw and XDR buffers are sent from libpvm3's fragments (frags.c); an
 * in-place one that takes the pvm_pkmesg path is relabelled raw there. */
static int frags_ok(const struct pvmminfo *mi)
{
	return mi->enc == enc_sig[0] || mi->enc == enc_sig[1];
}

/* The bytes pvm_pkmesg writes for buffer SBUF in a PvmDataRaw buffer:
 * 8 native ints {len, ctx, tag, wid, enc, crc, src, dst}, then each
 * fragment as {int length, bytes}; the receiver's pvm_upkmesg rebuilds
 * the buffer from them, encoding included, so pvm_upk* there decode them
 * as stock; an in-place message is labelled raw (enc_ok).  SBUF passed
 * for_rcp, which counted an in-place message's length and said HOW
 * (2: gathered by inplace.c instead).  malloc'd into *OUT (*LEN bytes);
 * 0 or a PVM code. */
static int packed_bytes(int sbuf, int how, const struct pvmminfo *mi, char **out, size_t *len)
{
	int tmp, old, save, hdr[8], rc;
	size_t cap, n;
	char *b = NULL;

	if (how == 1 && frags_ok(mi) &&
	    (rc = pvmrcpi_frags_copy(sbuf, mi, mi->enc == enc_sig[1], out, len)) != 0)
		return rc < 0 ? rc : 0;
	if (how == 2) {
		rc = pvmrcpi_ip_gather(sbuf, mi->len, enc_sig[0], &b, &n);
		if (!rc && (rc = pvmrcpi_pk_to_wire((unsigned char *)b, n)) < 0)
			free(b);
		if (!rc) {
			*out = b;
			*len = n;
		}
		return rc;
	}
	if ((tmp = pvm_mkbuf(PvmDataRaw)) < 0)
		return tmp;
	old = pvm_setsbuf(tmp);
	rc = pvm_pkmesg(sbuf);
	pvm_setsbuf(old);
	save = pvm_setrbuf(tmp);
	if (rc >= 0)
		rc = pvm_upkint(hdr, 8, 1);
	if (rc >= 0 && hdr[0] < 0)
		rc = PvmBadMsg;
	if (rc >= 0 && hdr[4] == enc_sig[2])
		hdr[4] = enc_sig[0];
	cap = sizeof hdr + (rc >= 0 ? (size_t)hdr[0] : 0) + 64;
	if (rc >= 0 && !(b = malloc(cap)))
		rc = PvmNoMem;
	if (rc >= 0) {
		long left = hdr[0];
		memcpy(b, hdr, sizeof hdr);
		n = sizeof hdr;
		while (left > 0) {
			int frl;
			if ((rc = pvm_upkint(&frl, 1, 1)) < 0)
				break;
			if (frl < 0 || frl > left) {
				rc = PvmBadMsg;
				break;
			}
			if (n + sizeof frl + (size_t)frl > cap) {
				char *nb;
				cap = 2 * cap + sizeof frl + (size_t)frl;
				if (!(nb = realloc(b, cap))) {
					rc = PvmNoMem;
					break;
				}
				b = nb;
			}
			memcpy(b + n, &frl, sizeof frl);
			n += sizeof frl;
			if (frl && (rc = pvm_upkbyte(b + n, frl, 1)) < 0)
				break;
			n += (size_t)frl;
			left -= frl;
		}
	}
	pvm_setrbuf(save);
	pvmrcpi_real.freebuf(tmp);
	if (rc >= 0)
		rc = pvmrcpi_pk_to_wire((unsigned char *)b, n); /* big-endian ints */
	if (rc < 0) {
		free(b);
		return rc;
	}
	*out = b;
	*len = n;
	return 0;
}

/* A send kept by reference completed (frags.c): libpvm3's message goes. */
static void held_done(rcp_req *r, const struct rcp_status *st, void *hold)
{
	(void)r;
	pvmrcpi_note_failed(st);
	pvmrcpi_inflight_done(((struct pr_hold *)hold)->len);
	pvmrcpi_frags_release(hold);
}

/* The message as the segments IOV (N of them, the first its head in
 * wire order), one RCP message (rcp_isendv), no copy on this side.  A
 * large Raw or XDR one from libpvm3's fragments (frags.c) keeps them by
 * reference (HOLD) and returns at once, within the in-flight budget.  An
 * in-place one gathered from the user's memory (inplace.c, HOLD NULL) is
 * waited for, as a large psend is, since PVM lets the user change the
 * arrays once pvm_send returns (other tasks' messages are taken
 * meanwhile, so two tasks sending to each other do not wait for each
 * other).  Frees IOV.  1 sent, or a PVM code. */
static int packed_send_iov(struct pr_peer *p, int ctx, int tag, struct rcp_iov *iov, int n,
                           struct pr_hold *hold)
{
	struct rcp_status st;
	rcp_req *r;
	int rc, tid = p->tid;

	if (hold && (rc = pvmrcpi_throttle(&p->tid, 1, hold->len)) != 0) {
		free(iov);
		pvmrcpi_frags_release(hold);
		return rc;
	}
	rc = pvmrcpi_prepare(p, ctx); /* RCP codes from here */
	pr_dirty(p);
	if (!rc)
		rc = rcp_isendv(p->ch, pr_rtag(ctx, tag) | PR_PACKED, iov, n, &r);
	free(iov); /* rcp_isendv keeps a copy of the array */
	if (rc && hold)
		pvmrcpi_frags_release(hold);
	if (rc == RCP_EPEER || rc == RCP_ECLOSED) {
		pvmrcpi_peer_dead(p);
		return PvmNoTask;
	}
	if (rc)
		return pvmrcpi_err(rc);
	pvmrcpi_packed_sent++;
	pvmrcpi_sent_gathered++;
	if (hold) {
		pvmrcpi_inflight += hold->len;
		rcp_req_set_cb(r, held_done, hold);
		return 1;
	}
	rc = pvmrcpi_wait_req(r, &st, &tid, 1, 1);
	if (rc == PvmNoTask)
		pvmrcpi_peer_dead(p);
	return rc < 0 ? rc : 1;
}

/* Sent as segments where its bytes lie (packed_send_iov): an in-place
 * message (HOW 2) from the user's memory (inplace.c), a Raw or XDR one of
 * more than PVMRCP_COPY_MAX bytes from libpvm3's fragments (frags.c).
 * 1 sent, 0 not this way (the caller copies), or a PVM code. */
static int packed_send_segs(struct pr_peer *p, int ctx, int tag, int sbuf,
                            const struct pvmminfo *mi, int how)
{
	unsigned char head[(PR_PK_HDR + 1) * sizeof(int)];
	struct pr_hold *hold = NULL;
	struct rcp_iov *iov = NULL;
	size_t hl;
	int n, rc = 0;

	if (how == 2) {
		rc = pvmrcpi_ip_iov(sbuf, mi->len, enc_sig[0], head, &hl, &iov, &n);
		if (!rc && (rc = pvmrcpi_pk_head_to_wire(head, hl)) < 0)
			free(iov);
		rc = rc ? rc : 1;
	} else if (frags_ok(mi)) {
		rc =
		    pvmrcpi_frags_iov(sbuf, mi, mi->enc == enc_sig[1], S.copy_max, &hold, &iov, &n);
	}
	return rc <= 0 ? rc : packed_send_iov(p, ctx, tag, iov, n, hold);
}

/* pvm_send over RCP when TID's pair is: 1 sent, 0 not for RCP (stock),
 * <0 a PVM code. */
static int packed_send(int tid, int tag)
{
	struct pvmminfo mi;
	struct pr_peer *p;
	int sbuf = pvm_getsbuf(), ctx = pvm_getcontext(), rc, how;
	char *bytes;
	size_t len;

	if (sbuf <= 0 || !pr_encodable(ctx, tag) || !pr_tid_is_task(tid) || tid == S.mytid)
		return 0;
	if (!(how = for_rcp(sbuf, &mi)))
		return 0;
	if ((rc = pr_send_peer(tid, &p)) != 0)
		return rc;
	if (pvmrcpi_route(p) != PR_RCP)
		return 0;
	if ((rc = packed_send_segs(p, ctx, tag, sbuf, &mi, how)) != 0)
		return rc;
	if ((rc = packed_bytes(sbuf, how, &mi, &bytes, &len)) < 0)
		return rc;
	pvmrcpi_count_copy(len);
	rc = pvmrcpi_throttle(&p->tid, 1, len);
	if (rc) {
		free(bytes);
		return rc;
	}
	rc = pvmrcpi_prepare(p, ctx);
	pr_dirty(p);
	if (!rc)
		rc = rcp_isend_cb(p->ch, pr_rtag(ctx, tag) | PR_PACKED, bytes, len,
		                  pvmrcpi_mcast_copy_done, bytes, NULL);
	if (!rc)
		pvmrcpi_inflight += len;
	if (rc) {
		free(bytes);
		if (rc == RCP_EPEER || rc == RCP_ECLOSED) {
			pvmrcpi_peer_dead(p);
			return PvmNoTask;
		}
		return pvmrcpi_err(rc);
	}
	pvmrcpi_packed_sent++;
	return 1;
}

int pvm_send(int tid, int tag)
{
	if (pvmrcpi_resolve())
		return PvmSysErr;
	if (pvmrcpi_ready() && !pvmrcpi_in_real) {
		int rc = packed_send(tid, tag);
		if (rc)
			return rc < 0 ? rc : 0;
		pvmrcpi_count_stock(tid, pvm_getcontext());
	}
	return pvmrcpi_real.send(tid, tag);
}

/* pvm_mcast of in-place data to NCH channels all on the shm endpoint:
 * one rcp_mcastv gathered from the user's memory (inplace.c), no copy,
 * waited for as an in-place pvm_send is.  1 sent (*RC its result), 0 not
 * this way (another endpoint among them: the caller copies once). */
static int mcast_inplace(rcp_chan **chans, int nch, uint64_t tag, int sbuf,
                         const struct pvmminfo *mi, int *rc)
{
	unsigned char head[(PR_PK_HDR + 1) * sizeof(int)];
	struct rcp_iov *iov;
	struct rcp_status st;
	rcp_req *r;
	size_t hl;
	int n;

	for (int i = 0; i < nch; i++) {
		struct pr_peer *p = pvmrcpi_chan_get(chans[i]);
		if (!p || p->ep != S.eps[PR_SHM])
			return 0;
	}
	if (pvmrcpi_ip_iov(sbuf, mi->len, enc_sig[0], head, &hl, &iov, &n))
		return 0;
	n = pvmrcpi_pk_head_to_wire(head, hl) < 0 || rcp_mcastv(chans, nch, tag, iov, n, &r);
	free(iov); /* each channel's send keeps a copy of the array */
	if (n)
		return 0;
	for (int i = 0; i < nch; i++)
		pvmrcpi_chan_get(chans[i])->mc_how = 'h';
	pvmrcpi_sent_gathered++;
	*rc = pvmrcpi_wait_req(r, &st, NULL, 0, 1);
	return 1;
}

/* pvm_mcast of a packed buffer: one RCP multicast of its bytes to the
 * tasks on RCP, a stock pvm_mcast to the rest (counted for order).  1
 * done (*RC: the result), 0 not for RCP (stock does it all). */
static int packed_mcast(int *tids, int ntask, int tag, int *rcout)
{
	struct pvmminfo mi;
	rcp_chan **chans;
	int *rest, nch = 0, nrest = 0, sbuf = pvm_getsbuf(), ctx = pvm_getcontext(), rc = 0, how;
	char *bytes = NULL;
	size_t len = 0;

	if (sbuf <= 0 || !pr_encodable(ctx, tag) || !(how = for_rcp(sbuf, &mi)))
		return 0;
	/* every tid first, as stock: a bad one means nothing is sent */
	for (int i = 0; i < ntask; i++)
		if (!pr_tid_is_task(tids[i]))
			return 0;
	chans = calloc((size_t)ntask, sizeof *chans);
	rest = calloc((size_t)ntask, sizeof *rest);
	if (!chans || !rest) {
		free(chans);
		free(rest);
		return 0;
	}
	for (int i = 0; i < ntask; i++) {
		struct pr_peer *p;
		int dup = 0;
		if (tids[i] == S.mytid)
			continue;
		for (int j = 0; j < i; j++)
			dup |= tids[j] == tids[i];
		if (dup)
			continue;
		p = pvmrcpi_peer(tids[i], 1);
		if (p && !p->dead && pvmrcpi_route(p) == PR_RCP && pvmrcpi_prepare(p, ctx) == 0) {
			chans[nch++] = p->ch;
			pr_dirty(p);
		} else {
			rest[nrest++] = tids[i];
		}
	}
	if (nch && how == 2 &&
	    mcast_inplace(chans, nch, pr_rtag(ctx, tag) | PR_PACKED, sbuf, &mi, &rc)) {
		if (!rc)
			pvmrcpi_packed_sent += nch;
	} else if (nch && (rc = packed_bytes(sbuf, how, &mi, &bytes, &len)) == 0) {
		pvmrcpi_count_copy(len);
		/* per endpoint, as pvm_pmcast (the tasks may be on several hosts) */
		rc = pvmrcpi_mcast_by_ep(chans, nch, pr_rtag(ctx, tag) | PR_PACKED, bytes, len,
		                         NULL, 0, bytes);
		if (!rc)
			pvmrcpi_packed_sent += nch;
	}
	if (nrest) {
		int rc2;
		for (int i = 0; i < nrest; i++)
			pvmrcpi_count_stock(rest[i], ctx);
		pvmrcpi_in_real++;
		rc2 = pvmrcpi_real.mcast(rest, nrest, tag);
		pvmrcpi_in_real--;
		if (rc2 < 0 && !rc)
			rc = rc2;
	}
	free(chans);
	free(rest);
	*rcout = rc;
	return 1;
}

int pvm_mcast(int *tids, int ntask, int tag)
{
	if (pvmrcpi_resolve())
		return PvmSysErr;
	if (pvmrcpi_ready() && !pvmrcpi_in_real && tids && ntask > 0) {
		int ctx = pvm_getcontext(), rc;
		if (packed_mcast(tids, ntask, tag, &rc))
			return rc;
		for (int i = 0; i < ntask; i++)
			if (tids[i] != S.mytid)
				pvmrcpi_count_stock(tids[i], ctx);
	}
	return pvmrcpi_real.mcast(tids, ntask, tag);
}
