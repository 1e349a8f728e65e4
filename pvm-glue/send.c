/*
 * pvm-glue/send.c — pvm_psend and pvm_pmcast over RCP, and the counting of
 * stock sends that keeps order between the two paths (see glue.c, "ORDER
 * BETWEEN THE TWO PATHS"); packed messages (pvm_send, pvm_mcast) are
 * pksend.c's, which uses what send.h declares from here.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/frags.h"
#include "pvm-glue/glue.h"
#include "pvm-glue/inplace.h"
#include "pvm-glue/packed.h"
#include "pvm-glue/send.h"

#define S pvmrcpi_st

/* Nonzero while a real libpvm3 call that sends (and may call pvm_send
 * through the PLT, as pvm_psend does) runs: we counted already. */
int pvmrcpi_in_real;

/* A stock message must not overtake RCP messages sent before it: RCP may
 * still hold them (window, credits) while pvmd is quick.  A FENCE sent by
 * rcp_issend completes only when acknowledged, and the ack is cumulative:
 * once it completes, the receiver's RCP holds everything sent before on
 * the channel.  Its number (1, 2, ...) tells the receiver that
 * stock messages may now come unannounced until the next BARRIER, whose
 * totals cover it (pr_quiet). */
static void fence(struct pr_peer *p)
{
	static int32_t f[PR_FENCE_LEN / sizeof(int32_t)];
	rcp_req *r;
	pr_changed(); /* (glue.h, FAST PATHS) */
	f[0] = (int32_t)++p->fences;
	if (rcp_issend(p->ch, PR_FENCE, f, sizeof f, &r) == 0 &&
	    pvmrcpi_wait_req(r, NULL, &p->tid, 1, 1) == PvmNoTask)
		pvmrcpi_peer_dead(p);
	p->rcp_dirty = 0;
}

/* Messages sent, for PVMRCP_STATS: over RCP by psend and pmcast (one per
 * destination), by pvmd (counted by pvmrcpi_count_stock); packed ones
 * over RCP are pvmrcpi_packed_sent (counted by pksend.c), below. */
static long rcp_sent, stock_sent;
long pvmrcpi_bad_packed;

void pvmrcpi_count_stock(int tid, int ctx)
{
	struct pr_peer *p;
	struct pr_ctxstate *cs;
	if (S.state != PR_READY)
		return;
	stock_sent++;
	pr_changed(); /* the stock counters (glue.h, FAST PATHS) */
	p = pvmrcpi_peer(tid, 1);
	if (p && p->rcp_dirty && p->ch)
		fence(p);
	if (p && (cs = pvmrcpi_cs(p, ctx)))
		cs->stock_sent++;
	if (p)
		p->stock_total++;
}

/* Copies of small messages: a psend of a few bytes is over in well under
 * a microsecond, and malloc + free of its copy was a tenth of it.  Buffers
 * of COPY_SMALL bytes are kept for reuse, up to COPY_KEEP of them. */
#define COPY_SMALL 512
#define COPY_KEEP  64
static void *copy_pool[COPY_KEEP];
static int ncopy_pool;

static void *copy_get(size_t len, int *pooled)
{
	*pooled = len <= COPY_SMALL;
	if (!*pooled)
		return malloc(len ? len : 1);
	return ncopy_pool ? copy_pool[--ncopy_pool] : malloc(COPY_SMALL);
}

static void copy_put(void *buf, int pooled)
{
	if (pooled && ncopy_pool < COPY_KEEP)
		copy_pool[ncopy_pool++] = buf;
	else
		free(buf);
}

/* Copies in flight: bytes of sends that returned before RCP took them
 * (psend's copies, packed messages, pmcast copies).  Unbounded, a task
 * that sends in a loop and never receives would queue every message in
 * its own memory, and, making no call that progresses, never see the
 * acks that would let them go.  So past S.copy_bytes (PVMRCP_COPY_BYTES)
 * a send first waits, progressing, for earlier ones to complete; the wait
 * takes other peers' messages after PVMRCP_STASH_US, as psend's does, so
 * two tasks that both send never wait for each other. */
size_t pvmrcpi_inflight;

static int below_limit(void *arg)
{
	(void)arg;
	return pvmrcpi_inflight <= S.copy_bytes;
}

/* Before a copied send of LEN bytes: 0, or a PVM code (PvmNoTask: a task
 * of LIVE died meanwhile). */
int pvmrcpi_throttle(const int *live, int nlive, size_t len)
{
	int rc;
	if (!pvmrcpi_inflight || pvmrcpi_inflight + len <= S.copy_bytes)
		return 0;
	rc = pvmrcpi_block(below_limit, NULL, live, nlive, 0, 1);
	return rc < 0 ? rc : 0;
}

void pvmrcpi_inflight_done(size_t len)
{
	pvmrcpi_inflight -= len < pvmrcpi_inflight ? len : pvmrcpi_inflight;
}

/* A copied send completed (rcp callback, from whichever call progressed
 * the endpoint; at the latest from rcp_ep_close at exit): its copy goes.
 * Nothing is kept per send and nothing walked: the status is the message
 * length (a send's, failed or not), which tells a pooled copy from a
 * malloc'd one. */
/* LOST SENDS.  A psend that copies its message (or gives it to RCP
 * detached) returns before the peer's RCP holds it; if the channel then
 * restarts under it (the peer's endpoint shows a new epoch: a first
 * contact settling, a peer whose channel timed out and started a new
 * conversation, a challenge lost), RCP fails what was pending with
 * RCP_EPEER and the task still lives.  Until session 17 nobody looked:
 * the message was gone without a word and a PVM program hung in a
 * receive, waiting for it.
 *
 * Contract.  Such a loss is never silent: the next psend, pvm_send of a
 * packed buffer, or receive from that task (precv, recv, trecv... naming
 * it; a wildcard receive blocked while it happens) returns PvmSysErr,
 * once per loss, and says on stderr which task's messages may be gone;
 * the call that reports does nothing else (a psend sent nothing: a
 * retry sends it once).  Never blocking: the check is a look at the
 * peer, and pvmd is asked (pvm_pstat) only once a loss is seen: a task
 * that is gone is PvmNoTask, as before (a wildcard receive goes on).  Conservative: "may" -- every message sent since the channel was
 * last known to hold everything (a FENCE acknowledged) counts as lost
 * when it restarts, acked or not, so a restart after the peer took them
 * all is reported too; a restart with nothing sent since is not.
 *
 * Why report and not resend.  Resending exactly would need to know which
 * messages the peer's RCP took before the restart, and RCP does not say:
 * a send of up to 2 KiB completes when it goes out (RCP keeps the copy
 * for retransmission), a detached one reports nothing at all, so a
 * completion callback's success does not mean the peer has it, and a
 * resent message the peer already took would be delivered twice --
 * worse than an error.  Holding every copy until an issend ack would
 * cost a round trip per message or a per-channel acked-sequence API
 * that RCP does not have (include/rcp/rcp.h).
 *
 * Detection.  The core tells: a restart watch (rcp_chan_watch) on the
 * channel completes with its next reset, and its callback, run by the
 * progress like a send's, sets p->lost if the restart count moved (not a
 * failure) while data went since the last acknowledged point (FENCE:
 * p->rcp_dirty), then watches again.  pr_dirty posts the first watch of a
 * channel; after that a psend only stores rcp_dirty and compares two
 * pointers, and pr_lost reads p->lost.  (Until session 18 each psend
 * asked rcp_chan_restarts: callgrind pvm row 4,571 -> 4,535 per round
 * trip.)
 * Copied sends whose completion callback says RCP_EPEER set p->lost as
 * well (RCP_ECLOSED: we closed the channel, the task is known gone).  After a
 * report the HELLO goes again (it may have been lost with the data: the
 * receiver takes a repeated HELLO as fresh totals).  pvmt
 * restart-reported (the next psend reports) and restart-reported-recv (a
 * blocked precv does) force a first-contact restart under a copied
 * psend: the parent has ended a conversation and keeps the epoch rule
 * before per-peer epochs (RCP_TEST_EPOCH_PER_ENDPOINT=1). */
void pvmrcpi_note_failed(const struct rcp_status *st)
{
	struct pr_peer *p;
	if (st->error && st->error != RCP_ECLOSED && st->chan && (p = pvmrcpi_chan_get(st->chan))) {
		pr_changed();
		p->lost = 1;
	}
}

static void watch_done(rcp_req *r, const struct rcp_status *st, void *user)
{
	struct pr_peer *p = user;
	if (r != p->watch)
		return; /* canceled, or a channel P left */
	pr_changed();
	p->watch = NULL;
	p->watch_ch = NULL;
	if (st->error != RCP_EPEER || st->chan != p->ch)
		return; /* closed (the channel may be gone), or not P's now */
	if (rcp_chan_restarts(p->ch) != p->watch_restarts && p->rcp_dirty)
		p->lost = 1; /* a restart, not a failure, under our data */
	pvmrcpi_watch(p);
}

void pvmrcpi_watch(struct pr_peer *p)
{
	rcp_req *r;
	pr_changed();
	if (p->watch)
		pvmrcpi_unwatch(p); /* on a channel P left */
	if (!p->ch || rcp_chan_watch(p->ch, watch_done, p, &r))
		return; /* no memory: the next psend tries again */
	p->watch = r;
	p->watch_ch = p->ch;
	p->watch_restarts = rcp_chan_restarts(p->ch);
}

void pvmrcpi_unwatch(struct pr_peer *p)
{
	rcp_req *r = p->watch;
	pr_changed();
	p->watch = NULL;
	p->watch_ch = NULL;
	if (r)
		rcp_cancel(r); /* its callback ignores it */
}

int pvmrcpi_lost(struct pr_peer *p)
{
	pr_changed();
	p->lost = 0;
	p->rcp_dirty = 0;
	if (pvm_pstat(p->tid) == PvmNoTask) {
		p->dead = 1; /* its messages to us can still be received */
		return PvmNoTask;
	}
	fprintf(stderr,
	        "libpvmrcp: t%x: messages sent to t%x may be lost (its channel restarted); "
	        "reported as PvmSysErr\n",
	        (unsigned)S.mytid, (unsigned)p->tid);
	p->hello_sent = 0;
	return PvmSysErr;
}

static void copy_done(rcp_req *r, const struct rcp_status *st, void *copy)
{
	(void)r;
	pvmrcpi_note_failed(st);
	pvmrcpi_inflight_done(st->len);
	copy_put(copy, st->len <= COPY_SMALL);
}

/* The same for pvm_pmcast's and packed sends' copies (malloc'd to size). */
void pvmrcpi_mcast_copy_done(rcp_req *r, const struct rcp_status *st, void *copy)
{
	(void)r;
	pvmrcpi_note_failed(st);
	pvmrcpi_inflight_done(st->len);
	free(copy);
}

/* Sends BUF (copied) with TAG on P's channel; returns at once. */
static int send_copy(struct pr_peer *p, uint64_t tag, const void *buf, size_t len)
{
	int pooled;
	void *copy;
	int rc = pvmrcpi_throttle(&p->tid, 1, len);

	if (rc)
		return rc == PvmNoTask ? RCP_EPEER : RCP_ESYS;
	if (!(copy = copy_get(len, &pooled)))
		return RCP_ENOMEM;
	memcpy(copy, buf, len);
	rc = rcp_isend_cb(p->ch, tag, copy, len, copy_done, copy, NULL);
	if (rc)
		copy_put(copy, pooled);
	else
		pvmrcpi_inflight += len;
	return rc;
}

int pvmrcpi_ctrl_send(struct pr_peer *p, uint64_t tag, const void *buf, size_t len)
{
	return send_copy(p, tag, buf, len);
}

/* FIRST CONTACT OVER UDP (and xdp).  An accepting endpoint answers a
 * frame from an unknown sender with a cookie challenge named after the
 * endpoint's epoch (docs/protocol.md, "Channels and epochs").  When two
 * tasks' first sends to each other cross (the first frame of one reaches
 * the other before that one connects), the channel the second opens must
 * send that same epoch, or the first takes it for a restart claim, its
 * channel restarts and everything it had sent so far fails with RCP_EPEER
 * (a copied psend was lost without a word: tests/cluster_down.sh "never
 * streamed", pvmt first-contact).  Until session 18 the HELLO that opens
 * a channel went alone and was waited for here, because rcp chose a
 * channel's epoch per endpoint: once any conversation of the endpoint had
 * ended (a long-running master whose earlier workers exited), a channel
 * it opened took an epoch of its own and the crossing restarted as
 * before.  rcp now chooses it per peer (rcp/chan.c, PER PEER): a peer with
 * which no conversation of ours ended hears one epoch of ours.  So the
 * HELLO goes ahead of the data, unwaited, on every transport; a restart
 * that still happens (a task restarted on a reused udp port) is reported
 * (LOST SENDS above), and pvmt restart-reported provokes one with the
 * old rule (RCP_TEST_EPOCH_PER_ENDPOINT=1 in the parent). */
int pvmrcpi_hello(struct pr_peer *p)
{
	int32_t h[3] = {S.mytid, (int32_t)p->stock_total, (int32_t)p->fences};
	int rc;

	if (p->hello_sent)
		return 0;
	rc = pvmrcpi_ctrl_send(p, PR_HELLO, h, sizeof h);
	if (rc)
		return rc;
	pr_changed();
	p->hello_sent = 1;
	p->total_told = p->stock_total;
	p->fences_told = p->fences;
	return 0;
}

/* HELLO first on the channel; BARRIER if stock messages went since (in
 * any context: the totals let the receiver skip libpvm3, see pr_quiet). */
int pvmrcpi_prepare(struct pr_peer *p, int ctx)
{
	struct pr_ctxstate *cs;
	int rc;

	if (!p->hello_sent && (rc = pvmrcpi_hello(p)) != 0)
		return rc;
	cs = pvmrcpi_cs(p, ctx);
	if (!cs)
		return RCP_ENOMEM;
	if (cs->stock_sent != cs->barrier_sent || p->stock_total != p->total_told ||
	    p->fences != p->fences_told) {
		int32_t b[4] = {ctx, (int32_t)cs->stock_sent, (int32_t)p->stock_total,
		                (int32_t)p->fences};
		rc = pvmrcpi_ctrl_send(p, PR_BARRIER, b, sizeof b);
		if (rc)
			return rc;
		pr_changed();
		cs->barrier_sent = cs->stock_sent;
		p->total_told = p->stock_total;
		p->fences_told = p->fences;
	}
	return 0;
}

static int stock_psend(int tid, int tag, void *buf, int len, int dt)
{
	int rc;
	pvmrcpi_count_stock(tid, pvm_getcontext());
	pvmrcpi_in_real++;
	rc = pvmrcpi_real.psend(tid, tag, buf, len, dt);
	pvmrcpi_in_real--;
	return rc;
}

/* A send to P failed with RC (an RCP code): PvmNoTask when P is gone. */
static int psend_err(struct pr_peer *p, int rc)
{
	if (rc == RCP_EPEER || rc == RCP_ECLOSED) {
		pvmrcpi_peer_dead(p);
		return PvmNoTask;
	}
	return pvmrcpi_err(rc);
}

/* rcp_isend_detached of a message of up to S.copy_max bytes to P (tag T)
 * returned RC and R other than "sent, nothing to wait for". */
static __attribute__((noinline)) int psend_small_end(struct pr_peer *p, int tid, uint64_t t,
                                                     const void *buf, size_t bytes, int rc,
                                                     rcp_req *r)
{
	struct rcp_status st;
	if (rc == RCP_EMSGSIZE)
		rc = send_copy(p, t, buf, bytes);
	else if (!rc && r)
		return pvmrcpi_wait_req(r, &st, &tid, 1, 1); /* no memory to copy */
	return psend_err(p, rc);
}

/* psend's checks hold for P in CTX: its fast path may skip them until
 * S.gen moves (glue.h, FAST PATHS). */
static void psend_note(struct pr_peer *p, int ctx)
{
	if (S.state == PR_READY && p->route == PR_RCP && p->ch && !p->dead && !pr_lost(p) &&
	    pr_encodable(ctx, 0) && pr_prepared(p, ctx) && p->watch_ch == p->ch) {
		p->send_gen = S.gen;
		p->send_ctx = ctx;
	}
}

static __attribute__((noinline)) int psend_slow(int tid, int tag, void *buf, int len, int dt)
{
	struct pr_peer *p;
	size_t bytes;
	int sz, ctx, rc;
	rcp_req *r;
	struct rcp_status st;

	if (!pvmrcpi_ready())
		return pvmrcpi_resolve() ? PvmSysErr : pvmrcpi_real.psend(tid, tag, buf, len, dt);
	sz = pvmrcpi_dtsize(dt);
	if (sz < 0 || len < 0)
		return pvmrcpi_real.psend(tid, tag, buf, len, dt); /* its error code */
	ctx = pvmrcpi_ctx();
	if ((rc = pr_send_peer(tid, &p)) != 0)
		return rc;
	if (!pr_encodable(ctx, tag) || pvmrcpi_route(p) != PR_RCP)
		return stock_psend(tid, tag, buf, len, dt);
	bytes = (size_t)len * (size_t)sz;
	rc = pr_prepared(p, ctx) ? 0 : pvmrcpi_prepare(p, ctx);
	pr_dirty(p);
	rcp_sent++;
	if (!rc && bytes <= S.copy_max) {
		/* Up to a frame: RCP copies only what it cannot send at once. */
		rc = rcp_isend_detached(p->ch, pr_rtag(ctx, tag), buf, bytes, &r);
		if (rc || r)
			return psend_small_end(p, tid, pr_rtag(ctx, tag), buf, bytes, rc, r);
		psend_note(p, ctx);
		return 0;
	} else if (!rc) {
		rc = rcp_isend(p->ch, pr_rtag(ctx, tag), buf, bytes, &r);
		if (!rc) {
			/* pvmrcpi_wait_req returns PVM codes */
			rc = pvmrcpi_wait_req(r, &st, &tid, 1, 1);
			if (rc == PvmNoTask)
				pvmrcpi_peer_dead(p);
			return rc;
		}
	}
	return psend_err(p, rc);
}

/* The fast path (glue.h, FAST PATHS): the task last looked up, whose
 * checks passed in this context and generation, and a message RCP sends
 * or copies at once; anything else is psend_slow's. */
int pvm_psend(int tid, int tag, void *buf, int len, int dt)
{
	struct pr_peer *p = S.last_peer;
	if (__builtin_expect(p && p->tid == tid && p->send_gen == S.gen, 1) && tag >= 0 &&
	    len >= 0) {
		int sz = pvmrcpi_dtsize(dt), ctx = pvmrcpi_ctx();
		size_t bytes = (size_t)len * (size_t)sz;
		if (sz > 0 && p->send_ctx == ctx && bytes <= S.copy_max) {
			uint64_t t = pr_rtag(ctx, tag);
			rcp_req *r;
			int rc;
			p->rcp_dirty = 1; /* pr_dirty: watch_ch == ch (checked) */
			rcp_sent++;
			rc = rcp_isend_detached(p->ch, t, buf, bytes, &r);
			if (__builtin_expect(!rc && !r, 1))
				return 0;
			return psend_small_end(p, tid, t, buf, bytes, rc, r);
		}
	}
	return psend_slow(tid, tag, buf, len, dt);
}

/* An RCP multicast of BUF to the N channels of one endpoint.  OWN: BUF is
 * a malloc'd buffer the caller gives up, freed when the multicast is done
 * (or failed); else small ones go from a copy and return at once, larger
 * ones are waited for (LIVE: the tasks asked about meanwhile).  0 or a
 * PVM code. */
static int mcast_one(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t bytes,
                     const int *live, int nlive, void *own)
{
	struct rcp_status st;
	void *copy = own;
	const void *src = own ? own : buf;
	rcp_req *r;
	int rc;
	if (copy || bytes <= S.copy_max) {
		if ((rc = pvmrcpi_throttle(live, nlive, bytes)) != 0) {
			free(own);
			return rc;
		}
	}
	if (!own && bytes <= S.copy_max) {
		copy = malloc(bytes ? bytes : 1);
		if (!copy)
			return PvmNoMem;
		memcpy(copy, buf, bytes);
		src = copy;
	}
	rc = rcp_mcast(chans, n, tag, src, bytes, &r);
	if (rc)
		rc = pvmrcpi_err(rc);
	else if (copy) {
		rcp_req_set_cb(r, pvmrcpi_mcast_copy_done, copy); /* frees COPY when done */
		copy = NULL;
		pvmrcpi_inflight += bytes;
	} else {
		rc = pvmrcpi_wait_req(r, &st, live, nlive, 1);
	}
	free(copy);
	return rc;
}

/* BUF to the NCH channels CHANS, one rcp_mcast per endpoint (tasks on
 * this host on shm, on others on udp: an RCP multicast's channels share
 * one endpoint); CHANS is reordered.  OWN (BUF malloc'd, given up): the
 * last endpoint's multicast takes it, the others copy.  0 or the first PVM
 * code. */
int pvmrcpi_mcast_by_ep(rcp_chan **chans, int nch, uint64_t tag, const void *buf, size_t bytes,
                        const int *live, int nlive, void *own)
{
	int rc = 0;
	for (int k = 0, done = 0; k < PR_MAXEP && done < nch; k++) {
		rcp_chan **left = chans + done;
		int nsub = 0, rc2;
		/* this endpoint's channels to the front */
		for (int i = 0; i < nch - done; i++) {
			struct pr_peer *p = pvmrcpi_chan_get(left[i]);
			if (p ? p->ep == S.eps[k] : k == 0) {
				rcp_chan *t = left[nsub];
				left[nsub++] = left[i];
				left[i] = t;
			}
		}
		if (!nsub)
			continue;
		done += nsub;
		if (k != PR_SHM) { /* network multicast where it can (mcast.c): the rest below */
			rc2 = pvmrcpi_mcn_send(left, nsub, tag, buf, bytes, live, nlive, &nsub);
			if (rc2 && !rc)
				rc = rc2;
		} else {
			for (int i = 0; i < nsub; i++) {
				struct pr_peer *p = pvmrcpi_chan_get(left[i]);
				if (p)
					p->mc_how = 'h';
			}
		}
		if (!nsub)
			continue;
		rc2 = mcast_one(left, nsub, tag, buf, bytes, live, nlive, done == nch ? own : NULL);
		if (done == nch)
			own = NULL; /* handed over */
		if (rc2 && !rc)
			rc = rc2;
	}
	free(own);
	return rc;
}

int pvm_pmcast(int *tids, int ntask, int tag, void *buf, int len, int dt)
{
	rcp_chan **chans = NULL;
	int *rest = NULL, *live = NULL, nch = 0, nrest = 0, nlive = 0, sz, ctx, rc = 0;
	size_t bytes;

	if (pvmrcpi_resolve())
		return PvmSysErr;
	sz = pvmrcpi_dtsize(dt);
	if (sz < 0)
		return sz;
	if (ntask < 0 || len < 0 || (ntask > 0 && !tids) || tag < 0)
		return PvmBadParam;
	if (ntask == 0)
		return 0;
	/* Every tid first, as stock pvm_mcast: a bad one anywhere in the list
	 * means nothing is sent (else a caller that retries the call would
	 * deliver twice to the tasks that got it over RCP). */
	for (int i = 0; i < ntask; i++)
		if (!pr_tid_is_task(tids[i]))
			return PvmBadParam;
	bytes = (size_t)len * (size_t)sz;
	ctx = pvm_getcontext();
	chans = calloc((size_t)ntask, sizeof *chans);
	rest = calloc((size_t)ntask, sizeof *rest);
	live = calloc((size_t)ntask, sizeof *live);
	if (!chans || !rest || !live) {
		rc = PvmNoMem;
		goto out;
	}
	{
		int up = pvmrcpi_ready();
		int me = up ? S.mytid : pvm_mytid();
		for (int i = 0; i < ntask; i++) {
			struct pr_peer *p;
			int dup = 0;
			if (tids[i] == me)
				continue; /* never to self, like pvm_mcast */
			for (int j = 0; j < i; j++)
				dup |= tids[j] == tids[i];
			if (dup)
				continue;
			p = up && pr_encodable(ctx, tag) ? pvmrcpi_peer(tids[i], 1) : NULL;
			if (p && !p->dead && pvmrcpi_route(p) == PR_RCP &&
			    pvmrcpi_prepare(p, ctx) == 0) {
				chans[nch++] = p->ch;
				pr_dirty(p);
				live[nlive++] = tids[i];
			} else {
				rest[nrest++] = tids[i];
			}
		}
	}
	if (nrest) {
		int sbf = pvm_setsbuf(pvm_mkbuf(PvmDataInPlace));
		pvm_pkbyte(buf, (int)bytes, 1);
		pvmrcpi_in_real++;
		rc = pvmrcpi_real.mcast(rest, nrest, tag);
		pvmrcpi_in_real--;
		pvmrcpi_real.freebuf(pvm_setsbuf(sbf));
		for (int i = 0; i < nrest; i++) {
			struct pr_peer *p = pvmrcpi_peer(rest[i], 0);
			pvmrcpi_count_stock(rest[i], ctx);
			if (p)
				p->mc_how = 's';
		}
		if (rc > 0)
			rc = 0;
	}
	if (nch) {
		int rc2 = pvmrcpi_mcast_by_ep(chans, nch, pr_rtag(ctx, tag), buf, bytes, live,
		                              nlive, NULL);
		if (!rc2)
			rcp_sent += nch;
		if (rc2 && !rc)
			rc = rc2;
	}
out:
	free(chans);
	free(rest);
	free(live);
	return rc;
}

long pvmrcpi_packed_sent;

/* PVMRCP_STATS: the message counts, then a line per endpoint of what
 * its transport and waits did (frames each way, lone acks, frames the
 * express input took, messages buffered unexpected, nic polls; the first
 * endpoint's waits, looks, yields and sleeps), written in one write.
 * Per message these tell the cost of a pattern apart from its timing
 * (docs/pvm.md). */
void pvmrcpi_stats_print(void)
{
	char line[160 + PR_MAXEP * 200];
	int n = snprintf(
	    line, sizeof line, "pvmrcp t%x: sent over RCP %ld (packed %ld), by pvmd %ld\n",
	    (unsigned)S.mytid, rcp_sent + pvmrcpi_packed_sent, pvmrcpi_packed_sent, stock_sent);
	rcp_ep *ep;
	for (int i = 0, k, first = 1;
	     n > 0 && (size_t)n < sizeof line && (ep = pvmrcpi_ep_next(&i)); first = 0) {
		struct rcp_ep_stats es;
		struct pvm_rcp_waitstats ws = {0};
		char addr[64] = "";
		if (rcp_ep_get_stats(ep, &es))
			continue;
		rcp_ep_addr(ep, addr, sizeof addr);
		if (first) /* the waiter's endpoint (wait.c) */
			pvm_rcp_waitstats(&ws, 0);
		k = snprintf(
		    line + n, sizeof line - (size_t)n,
		    "pvmrcp t%x: %.4s frames out %llu in %llu acks %llu express %llu "
		    "unexpected %llu nic_polls %llu waits %llu looks %llu yields %llu "
		    "sleeps %llu\n",
		    (unsigned)S.mytid, addr, (unsigned long long)es.frames_sent,
		    (unsigned long long)es.frames_recv, (unsigned long long)es.acks_sent,
		    (unsigned long long)es.express_in, (unsigned long long)es.unexpected_msgs,
		    (unsigned long long)es.nic_polls, ws.waits, ws.polls, ws.yields, ws.sleeps);
		if (k > 0)
			n += k;
	}
	if ((size_t)n >= sizeof line)
		n = (int)sizeof line - 1;
	int fd = strchr(S.stats, '/')
	             ? open(S.stats, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)
	             : 2;
	if (fd >= 0 && n > 0) {
		ssize_t w = write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
		(void)w;
	}
	if (fd > 2)
		close(fd);
}

long pvm_rcp_packed_sent(int reset)
{
	long n = pvmrcpi_packed_sent;
	if (reset)
		pvmrcpi_packed_sent = 0;
	return n;
}
