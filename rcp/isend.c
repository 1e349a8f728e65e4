/*
 * rcp/isend.c — posting a send: the entry points that give the core a
 * message to send (rcpc_isend, rcpc_issend, rcpc_isendv,
 * rcpc_isend_detached, rcpc_mcast) and the one-pass path of a small one
 * (SMALL SENDS).  Above start.c (a message's first frame, the pump) and
 * express.c (the compact header written into the slot); nothing below
 * calls back up here.  Split out of core.c in session 21, when core.c
 * passed the project's ~1,000 lines (docs/core.md).
 */
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

/* SMALL SENDS.  Most messages are a few bytes, sent on a channel with
 * nothing queued ahead: they go as one eager frame whose slot keeps a copy
 * (inline), so the send is done when the frame leaves.  That case skips
 * the general machinery: no request on any list, no send_start, no
 * completion bookkeeping (rcpi_complete) — the slot is taken and sent
 * here, and the caller gets a request born finished (rcpc_isend) or none
 * at all (rcpc_isend_detached).  Exactly the checks of the general path
 * for this case: nothing to resend, no control frame or earlier start
 * queued, no put into a READY promise out, room in the window, a credit
 * left (CREDITS); a promise (READY) never takes a message of one frame.
 * Returns 1 (sent, or kept for a resend the nic refused: its slot holds
 * the copy), or 0 (not this case: nothing changed). */
static RCPI_HOT_INLINE int send_small(rcp_chan *ch, uint64_t tag, const void *buf, size_t len,
                                      uint64_t now)
{
	rcpc_core *c = ch->core;
	struct slot *s;
	uint32_t msg;
	uint64_t live;

	/* (PLAIN, chan.h: control frames, a READY put and resends due are
	 * parts of the word; set, they are looked at one by one.) */
	if (len > c->small_max || !list_empty(&ch->startq) ||
	    ch->credits_used == ch->credits_granted || ch->tx_next - ch->tx_una >= window(ch) ||
	    (!chan_plain(ch) && (ch->ctl_count || ch->rma_start || rcpi_chan_resend_due(ch))))
		return 0;
	live = chan_work_from(ch, now);
	msg = ch->tx_msg_next++;
	ch->tx_msg_start++;
	/* A promise for this message or an earlier one is used up (send_start). */
	if (RCPI_UNLIKELY(ch->ready_valid) && rcpw_seq_le(ch->ready.msg, msg))
		ch->ready_valid = 0;
	ch->credit_stalled = 0;
	ch->credits_used++;
	if (RCPI_LIKELY(rcpi_slot_express_ok(ch))) {
		s = rcpi_slot_express(ch, msg, tag, buf, (uint32_t)len); /* (EXPRESS) */
	} else {
		s = rcpi_slot_new(ch, NULL, RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, msg, tag, len,
		                  buf, (uint32_t)len, 1);
		s->own = NULL;
	}
	c->xmit_now = 1;                  /* its one frame rings the nic at once */
	(void)rcpi_slot_send(ch, s, now); /* refused: resent from the slot; failed: ch->failed */
	c->xmit_now = 0;
	/* Its timers (TIMERS) lower the key: the frame's RTO (if no other
	 * frame was out, it is the oldest: base now or later; else the
	 * oldest's was covered already), the tail-loss probe, liveness.  A
	 * frame the nic refused, or a failure: keyed anew. */
	if (RCPI_UNLIKELY(!s->sent_at || ch->failed)) {
		chan_retime(ch);
	} else {
		uint64_t at = now + ch->rto;
		if (ch->tlp_at && ch->tlp_at < at)
			at = ch->tlp_at;
		chan_arm(ch, live < at ? live : at);
	}
	c->st.msgs_sent++;
	c->st.bytes_sent += len;
	return 1;
}

/* SENT REQUESTS.  A small send's request is born finished (SMALL SENDS)
 * and is read only as a finished send is (rcpc_req_done and the
 * callback's status: error, chan, tag, total; cancel, which finds it
 * done; multicast's fold).  Such requests are kept apart, on the core's
 * free_sent list, with the fields no finished send changes (core, kind,
 * state Q_DONE, error 0, own_buf, src, mr, parent and cb NULL) left as
 * they are: taking one writes its channel, tag and length only, and
 * rcpi_req_free puts it back there (r->sent, set for good: it never
 * returns to the general pool, whose rcpi_req_alloc would give it any
 * other shape).  A callback given to one after it finished
 * (rcpc_req_set_cb) is the one field that moves; the free clears it.
 * (Session 21, chan3: the finished-send token of session 20's notes,
 * without an API change: -~18 instructions per 8 B round trip.)  The
 * list grows to the most such requests held at once; they stay in the
 * pool's slabs, freed with the core.  Counted as completed for the
 * progress that follows, as rcpi_complete would. */
static RCPI_HOT_INLINE rcp_req *req_sent(rcpc_core *c, rcp_chan *ch, uint64_t tag, size_t len)
{
	rcp_req *r = c->free_sent;

	if (RCPI_LIKELY(r)) {
		c->free_sent = r->pool_next;
	} else {
		r = c->free_reqs; /* (isend looked: not NULL) */
		c->free_reqs = r->pool_next;
		r->core = c;
		r->kind = REQ_SEND;
		r->state = Q_DONE;
		r->own_buf = 0;
		r->error = 0;
		r->src = NULL;
		r->mr = NULL;
		r->parent = NULL;
		r->cb = NULL;
		r->sent = 1;
	}
	r->chan = ch;
	r->tag = tag;
	r->len = r->total = len;
	c->completed++;
	return r;
}

/* Posts send R (buf, len, total, sync set) on CH with TAG. */
static RCPI_HOT_INLINE void send_post(rcp_chan *ch, rcp_req *r, uint64_t tag, uint64_t now)
{
	rcpc_core *c = ch->core;
	size_t len = r->total;

	chan_touch(ch, now);
	r->kind = REQ_SEND;
	r->chan = ch;
	r->tag = tag;
	r->msg = ch->tx_msg_next++;
	r->state = S_QUEUED;
	/* Start at once if the window allows: latency matters more than
	 * batching for a lone message.  Nothing queued ahead of it (resends,
	 * control frames, earlier starts) and room in the window: straight to
	 * send_start, not round rcpi_chan_pump (a small message's common case). */
	if (!rcpi_chan_resend_due(ch) && !ch->ctl_count && list_empty(&ch->startq) &&
	    ch->tx_next - ch->tx_una < window(ch) && rcpi_send_can_start(ch, r)) {
		/* A message streamed on a READY has only its first frame out:
		 * the pump sends the rest now, as far as the window allows,
		 * not when the first ack comes back. */
		int rc;
		c->xmit_now = len <= c->payload_max; /* eager: its one frame */
		rc = rcpi_send_start(ch, r, now);
		c->xmit_now = 0;
		if (!rc && r->state == S_STREAM)
			rcpi_chan_pump(ch, now);
	} else {
		list_add_tail(&ch->startq, &r->link);
		chan_dirty(ch);
		rcpi_chan_pump(ch, now);
	}
	core_push(c);
}

/* (Inlined into rcpc_isend and rcpc_issend: -20 instructions per 8 B
 * round trip.) */
static RCPI_HOT_INLINE int isend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, int sync,
                                 uint64_t now, rcp_req **req)
{
	rcpc_core *c;
	rcp_req *r;

	if (!ch || !req || tag == RCP_ANY_TAG || (!buf && len))
		return RCP_EINVAL;
	if (ch->failed)
		return ch->failed;
	c = ch->core;
	if (!sync && (c->free_sent || c->free_reqs) && send_small(ch, tag, buf, len, now)) {
		*req = req_sent(c, ch, tag, len);
		return 0;
	}
	r = rcpi_req_alloc(c);
	if (!r)
		return RCP_ENOMEM;
	r->buf = (unsigned char *)(uintptr_t)buf;
	r->len = r->total = len;
	r->sync = (uint8_t)sync;
	*req = r;
	send_post(ch, r, tag, now);
	return 0;
}

int rcpc_isend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now, rcp_req **req)
{
	return isend(ch, tag, buf, len, 0, now, req);
}

/* The API's (request.c): inlined whole into rcp_isend under LTO, whose
 * checks of CH and REQ then serve for both (gcc had split rcpc_isend
 * there, its checks inline and the rest a call of its own,
 * rcpc_isend.part.0, its arguments and registers moved once more:
 * session 20).  The core's other callers, tests among them, keep the
 * plain rcpc_isend. */
RCPI_HOT_INLINE int rcpc_isend_api(rcp_chan *ch, uint64_t tag, const void *buf, size_t len,
                                   int sync, uint64_t now, rcp_req **req)
{
	return isend(ch, tag, buf, len, sync, now, req);
}

int rcpc_issend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now,
                rcp_req **req)
{
	return isend(ch, tag, buf, len, 1, now, req);
}

int rcpc_isendv(rcp_chan *ch, uint64_t tag, const struct rcp_iov *iov, int iovcnt, uint64_t now,
                rcp_req **req)
{
	struct rcp_iov *v;
	uint32_t n;
	size_t total;
	rcp_req *r;
	int rc = !ch || !req || tag == RCP_ANY_TAG ? RCP_EINVAL : ch->failed;

	if (!rc)
		rc = rcpi_gv_make(iov, iovcnt, &v, &n, &total);
	if (rc)
		return rc;
	if (!(r = rcpi_req_alloc(ch->core))) {
		free(v);
		return RCP_ENOMEM;
	}
	r->gv = v;
	r->gv_cnt = n;
	r->gv_i = 0;
	r->gv_base = 0;
	r->own_buf = 1; /* V is freed with the request */
	r->len = r->total = total;
	*req = r;
	send_post(ch, r, tag, now);
	return 0;
}

/* A send nobody waits for (rcp_send_detached).  Most small sends are done
 * when isend returns (inline, or copied into a pool buffer: send_start);
 * the request is freed there and then, and the caller's buffer was never
 * kept.  One that is not (queued behind the window or a credit, or an
 * eager frame out that waits for its ack with the send buffer full) still
 * points at BUF: it gets a copy of its own (the queued request's buf, the
 * slots that carry it), freed with the request, which goes to the
 * completion list with DROP as its callback (the endpoint releases it).
 * Only messages of one frame: a rendezvous reads BUF by RMA. */
int rcpc_isend_detached(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now,
                        rcp_req_cb drop, rcp_req **req)
{
	unsigned char *copy;
	rcp_req *r;
	int rc;

	*req = NULL;
	if (!ch || !drop)
		return RCP_EINVAL;
	if (len > ch->core->payload_max)
		return RCP_EMSGSIZE;
	/* The common case needs no request at all (SMALL SENDS). */
	if (tag != RCP_ANY_TAG && (buf || !len) && !ch->failed &&
	    send_small(ch, tag, buf, len, now))
		return 0;
	rc = isend(ch, tag, buf, len, 0, now, &r);
	if (rc)
		return rc;
	if (r->state == Q_DONE) {
		(void)rcpc_req_done(r, NULL);
		return 0;
	}
	copy = malloc(len ? len : 1);
	if (!copy) {
		*req = r; /* the caller waits for it: BUF stays in use */
		return 0;
	}
	memcpy(copy, buf, len);
	for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++) {
		struct slot *s = slot_of(ch, seq);
		if (s->in_use && s->req == r && s->payload >= r->buf && s->payload <= r->buf + len)
			s->payload = copy + (s->payload - r->buf);
	}
	r->buf = copy;
	r->own_buf = 1;
	rcpc_req_set_cb(r, drop, NULL);
	return 0;
}

/* A multicast's parent request and its children: one send per channel of
 * BUF (LEN bytes), or with IOV non-NULL a gather send of its IOVCNT
 * segments (rcp_mcastv: each child reads them where they lie, no copy),
 * LEN then their total. */
static int mcast(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t len,
                 const struct rcp_iov *iov, int iovcnt, uint64_t now, rcp_req **req)
{
	rcpc_core *c;
	rcp_req *pa;

	for (int i = 0; i < n; i++)
		if (!chans[i] || chans[i]->core != chans[0]->core)
			return RCP_EINVAL;
	c = chans[0]->core;
	pa = rcpi_req_alloc(c);
	if (!pa)
		return RCP_ENOMEM;
	pa->kind = REQ_MCAST;
	pa->tag = tag;
	pa->total = len;
	pa->children = n + 1; /* +1 holds completion until all are issued */
	pa->state = S_QUEUED;
	for (int i = 0; i < n; i++) {
		rcp_req *k;
		int rc = iov ? rcpc_isendv(chans[i], tag, iov, iovcnt, now, &k)
		             : rcpc_isend(chans[i], tag, buf, len, now, &k);
		if (rc) {
			/* Count it as one failed destination. */
			if (!pa->error)
				pa->error = rc;
			pa->children--;
			continue;
		}
		if (k->state == Q_DONE) {
			/* Completed inline: fold it in now. */
			if (k->error && !pa->error)
				pa->error = k->error;
			rcpi_req_free(k);
			pa->children--;
			continue;
		}
		k->parent = pa;
		k->internal = 1;
	}
	if (--pa->children == 0) {
		int e = pa->error;
		pa->error = 0;
		rcpi_complete(pa, e);
	}
	*req = pa;
	return 0;
}

int rcpc_mcast(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t len, uint64_t now,
               rcp_req **req)
{
	if (!chans || n <= 0 || !req || tag == RCP_ANY_TAG || (!buf && len))
		return RCP_EINVAL;
	return mcast(chans, n, tag, buf, len, NULL, 0, now, req);
}

int rcpc_mcastv(rcp_chan **chans, int n, uint64_t tag, const struct rcp_iov *iov, int iovcnt,
                uint64_t now, rcp_req **req)
{
	size_t total = 0;

	if (!chans || n <= 0 || !req || tag == RCP_ANY_TAG || iovcnt < 0 || (!iov && iovcnt))
		return RCP_EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].base && iov[i].len)
			return RCP_EINVAL;
		total += iov[i].len;
	}
	if (!iovcnt) /* nothing to gather: an empty message, as rcp_mcast's */
		return mcast(chans, n, tag, NULL, 0, NULL, 0, now, req);
	return mcast(chans, n, tag, NULL, total, iov, iovcnt, now, req);
}
