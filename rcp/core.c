/*
 * rcp/core.c — the reduced communication protocol, without I/O.
 *
 * CHANNELS.  One channel per peer endpoint, keyed by the nic peer index.
 * Static, as in the paper: both sides record the peer locally and start at
 * sequence 1, message 1; nothing is exchanged to set a channel up between
 * peers that both connect.  Each side has an epoch (random per endpoint
 * open); frames carry the sender's epoch and the epoch it believes the
 * receiver has (0: none yet).  The epoch a channel sends (my_epoch) is
 * its conversation's: since every conversation numbers from 1, one that
 * starts again must differ on the wire from the one before, or the old
 * one's frames in flight are taken as the new one's (a receive completed
 * with another message's bytes: fuzz_core).  So a channel the user opens
 * (also one closed and opened again), a failed channel, and one reset for
 * a peer's restart after it sent frames with dst_epoch 0 (the new
 * incarnation may take those) take a new epoch, conv_epoch(); the peer
 * sees a restart claim and challenges it (HANDSHAKE): one round trip per
 * new conversation, none on an established channel, no header field.  An
 * accepted channel keeps the endpoint epoch its cookie named.  A frame
 * addressed to another epoch than the channel's is stale and dropped; a proven new epoch of the peer (HANDSHAKE) means
 * the peer restarted: everything pending on the channel fails with
 * RCP_EPEER and the channel starts afresh, and frames of the incarnation
 * it left (gone_epoch; rcpc_chan_ban_epoch sets it for a reconnected
 * channel) are stale from then on, never another restart.
 *
 * HANDSHAKE.  The pair (src_epoch, dst_epoch) is the channel's
 * verification tag, as SCTP's: both are random, and a sender that names
 * our epoch has received from us at its address, which a blind spoofer
 * cannot.  So a frame with dst_epoch 0 and an epoch other than the peer's
 * is only a claim of a restart: it is dropped (stats.restart_claims) and
 * answered with a challenge, a PING to the claimed incarnation with a
 * nonzero arg; the new incarnation takes our epoch from it and answers at
 * once with an ACK that names it (echoing the arg), and only that frame
 * resets the channel.  A new epoch on a frame that names ours is no
 * proof either (a straggler of a conversation before): challenged too.
 * The challenge is a nonce, one per claimed epoch, and only an ACK that
 * echoes it proves the claim; the echo is flagged FRESH when the echoing
 * channel has taken no reliable frame (rx_taken), and then our blind
 * frames cannot be in its conversation: ours goes on, no announce.  A
 * frame with dst_epoch 0 and the peer's own epoch is taken until the peer
 * has named us (named: its first frames were sealed before it heard us);
 * after that a blind frame of its epoch is a straggler, dropped, and our
 * own blind frames are resealed naming the peer when resent
 * (slot_unblind).  Before the first contact a connected channel takes the first
 * epoch it hears, as before (residual: a spoofer racing the real peer's
 * first frame).  Accepting endpoints (RCP_EP_ACCEPT) keep no state for an
 * unknown sender, whose frames may come from forged addresses: when the
 * glue offers io.send_to (udp), the frame is dropped and answered with a
 * challenge whose arg is a cookie, SipHash-2-4 under a per-endpoint random
 * key of the address, both epochs and a 8.6 s time slot; a peer index and
 * a channel are made only for an ACK naming our epoch that echoes a cookie
 * of this slot or the one before (stats.chans_accepted).  A channel that
 * gets a challenge echoes it and resends at once what it has out (the
 * challenger dropped it), so a client's first message costs one round trip
 * more on a server, an established channel none.  A challenge is never
 * answered with a challenge.  Accepted channels that carry no reliable
 * frame either way (half-open: the user cannot hold them, and a fresh
 * channel continues their numbering exactly) are closed once idle for
 * the peer timeout (looked for every peer_timeout/4 while any exist;
 * stats.chans_reclaimed), and the oldest of them makes room when the
 * nic's peer table is full.  RCP_EPEER from a send on a
 * nic that may lose frames relays an ICMP error (forgeable; a peer not up
 * yet draws one too): the frame counts as lost and only the peer timeout
 * fails the channel.
 *
 * RELIABILITY.  Reliable frames (DATA, RTS, READY, FIN) take consecutive
 * 32-bit sequence numbers per direction.  The sender keeps each in a slot
 * of a power-of-two ring until it is cumulatively acknowledged; the slot
 * holds the header as sent and, for DATA, points into the user's buffer,
 * so retransmission copies nothing.  Every frame carries the cumulative ack
 * (next sequence expected); ACK frames add a selective-ack bitmap of up to
 * 1024 frames past it.  A frame is taken as lost when a later frame has
 * been selectively acked and it has been out for the reordering window,
 * srtt x 5/4 (RACK, time-based; no count of later frames): it is resent at once (the paper's "resend the named frames
 * in the next window", but continuous).  If nothing is acked for an RTO
 * (RFC 6298: srtt + 4 rttvar, clamped, doubled per expiry, Karn's rule for
 * samples) every frame out longer than the RTO is resent.
 *
 * WINDOW.  Frames in flight <= min(cwnd, peer's advertised window, ring).
 * The advertised window is what the peer's nic holds per sender
 * (rcp_nic_info.rx_frames), sent in every header.  cwnd does AIMD: +1 per
 * acked frame below ssthresh, +1/cwnd above; halved once per window of
 * loss (fast retransmit) or on an RTO.
 *
 * RECEIVING.  In-order frames are processed at once.  Out-of-order frames
 * inside the window are marked in a bitmap; DATA frames of a message whose
 * buffer is known (matched or promised by READY) are placed straight into
 * that buffer; other frames (message starts, control) are copied into a
 * bounded reorder store and processed when the gap fills.  Duplicates are
 * recognised by sequence and dropped (and re-acked).  Acks: at once for
 * out-of-order or duplicate frames, for frames flagged ACKREQ (a sender is
 * waiting) and every quarter window; otherwise after ack_delay unless a
 * reverse frame carried the ack first (piggybacking).
 *
 * MESSAGES.  Per channel, messages take consecutive ids; their first frame
 * (eager DATA, RTS, STREAM DATA, or FIN-after-put) is a reliable frame, so
 * message starts are processed in send order, and matching against posted
 * receives (channel or any, tag or any, first posted first) keeps order.
 *   eager:  the message fits one frame and the sender holds a credit: sync
 *           and data go together.  Up to inline_max bytes the frame keeps a
 *           copy and the send completes at once; larger, a pool buffer
 *           takes the copy while send_buf allows (also at once); else, and
 *           always for rcpc_issend, it completes on the ack (ACKREQ).
 *   RTS:    larger (with a credit too): request-to-send with the total length
 *           (and, where the nic has RMA and the message is >= rma_min, a
 *           key to the send buffer).  The receiver, once matched, either
 *           pulls the data with one RMA get and answers FIN, or answers
 *           READY; the sender then streams DATA frames.
 *   READY first (receiver first): a receive posted for a specific channel
 *           with a buffer larger than one frame, which is the first posted
 *           receive that could take that channel's next message, sends
 *           READY(msg, tag filter, buffer length [, RMA key]) at once.  A
 *           sender whose next message fits it streams at once (STREAM) or
 *           puts the data by RMA and sends FIN: no RTS round trip.  From
 *           rma_split bytes both sides copy: FIN(FIRST|SPLIT) hands the
 *           receiver a key to the send buffer and it pulls the upper half
 *           while the sender puts the lower half (FIN(SPLIT) when done);
 *           the receiver's FIN frees the send buffer.  Sender first
 *           the same way round: on an RTS(SPLIT) with a key (the sender
 *           offers to put half: not below 512 KiB if it sleeps at once,
 *           as the READY would cost it a wake-up) the receiver sends
 *           READY(SPLIT, key) and pulls the upper half while the sender
 *           puts the lower half and answers FIN(SPLIT).  The
 *           receive is then reserved: it cannot be canceled.
 * CREDITS.  Every message start that does not claim a READY promise
 * (eager DATA, RTS) takes one of the receiver's credits, whatever its
 * size: the receiver may have to hold it (an eager payload in a pool
 * buffer, an RTS as a record) until a receive takes it.  Each channel
 * grants the peer credits_eff of them (the smaller of `credits` and what
 * fits `unexp_bytes` at one frame buffer and record each), returned
 * cumulatively in every header as messages are consumed.  A sender with
 * no credit left keeps its sends queued (S_QUEUED) until credits come
 * back: back-pressure, never a drop.  So count and bytes held for a
 * channel stay under both bounds whatever the peer sends; a start past
 * the grant is a broken or hostile peer and fails the channel.  Until it
 * hears the receiver's first header a sender assumes CREDITS_INIT, which
 * every receiver grants at least (the two ends may be configured
 * differently).  Before, small messages past the credits went by RTS,
 * whose records no bound limited (10^6 of them cost 126 MB).
 * DEMAND.  The bound must not turn into a hang: a receiver may leave
 * credits_eff messages of a channel unconsumed while it waits for a later
 * one of the same channel (another tag), which the peer cannot start
 * without a credit.  So while a receive that could take the channel's
 * messages (on that channel, or on any) is posted and the peer holds no
 * credit, the receiver grants one more per message it holds (the peer
 * starts its next message, which either is the one waited for or is held
 * too and draws the next grant), up to DEMAND_MAX x credits_eff held for
 * the channel.  Past that hard bound the waiting receives on that channel
 * fail with RCP_ENOMEM (counted in demand_fails, warned once): a clean
 * error naming the knob (RCP_CREDITS, RCP_UNEXP_BYTES) instead of an
 * endless wait or unbounded memory.  Memory past the plain bound is spent
 * only on what the application itself waits behind; a peer that floods
 * messages nobody waits for still stops at credits_eff.
 *
 * TIMERS.  Per channel: RTO of the oldest frame out, the delayed ack, and
 * liveness: while a channel has work pending, a peer silent for
 * peer_timeout/4 is pinged; silent for peer_timeout, the channel fails
 * and every pending operation on it completes with RCP_EPEER.  Every timer
 * an API call (send, receive) or a received frame can arm lies at least
 * timer_floor ahead (the TLP and reordering floors, ack_delay, rto_min,
 * peer_timeout/8), or it is "retry at once" (the nic refused a frame:
 * c->retry), or it is a reordering timer for a hole whose frame went out
 * long ago (c->soon_at keeps the earliest such).  So after an API call or
 * a batch of frames rcpc_deadline_soon() gives a safe early bound without
 * walking the channels; firing rcpc_timers early is harmless (nothing is
 * due, it does nothing), and the endpoint takes the exact rcpc_deadline()
 * after timers and before it sleeps.
 *
 * FLUSH.  rcpc_flush() visits only the channels on the core's dirty list,
 * not every channel: an endpoint with many peers pays per frame for the
 * channel the frame came on.  A channel goes on the list (chan_dirty)
 * when a frame of it is taken in, when a control frame is queued on it,
 * when it returns a credit, when a message joins its start or stream
 * queue, and when the nic refuses its ack; rcpc_timers flushes every
 * channel and takes them off.
 *
 * INVARIANTS.  tx_una <= tx_next <= tx_una + nslots; slot(s) in use iff
 * tx_una <= s < tx_next; a send request completes only when no slot
 * points at it; rx_next - 1 is the last frame processed in order; bits are
 * set only for rx_next < s < rx_next + RXW; every request completes exactly
 * once (complete() asserts it).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/core.h"
#include "rcp/wire.h"

#define RXW          1024u  /* receive window in frames (bitmap size) */
#define TXW_MAX      1024u  /* largest send ring */
#define ACK_EVERY    4u     /* in-order frames between forced acks */
#define INLINE_CAP   2048u  /* bytes a slot can hold inline */
#define CWND_ONE     1024u  /* cwnd fixed point */
#define TIMER_MIN_NS 20000u /* floor of the TLP and reordering timers */
#define CREDITS_INIT 8u     /* credits a sender assumes, every receiver grants (CREDITS) */
#define DEMAND_MAX   4u     /* hard bound, x credits_eff, for grants on demand (DEMAND) */
#define CREDITS_CAP  65536u /* largest grant (a sender takes grants <= 10^6 ahead) */
#define RKEY_MAX     RCP_NIC_RKEY_MAX

/* ---- lists --------------------------------------------------------------- */

struct list {
	struct list *next, *prev;
};

static void list_init(struct list *l)
{
	l->next = l->prev = l;
}
static int list_empty(const struct list *l)
{
	return l->next == l;
}
static void list_add_tail(struct list *l, struct list *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}
static void list_del(struct list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
/* Moves every node of FROM to the empty list TO; FROM is left empty. */
static void list_take(struct list *to, struct list *from)
{
	list_init(to);
	if (list_empty(from))
		return;
	*to = *from;
	to->next->prev = to;
	to->prev->next = to;
	list_init(from);
}
#define container_of(p, T, m) ((T *)(void *)((char *)(p)-offsetof(T, m)))
#define list_for_each_safe(pos, tmp, head)                                                         \
	for (pos = (head)->next, tmp = pos->next; pos != (head); pos = tmp, tmp = pos->next)

/* ---- structures ------------------------------------------------------------ */

enum req_kind { REQ_SEND = 1, REQ_RECV, REQ_MCAST };

enum req_state {
	/* send */
	S_QUEUED = 1, /* in startq: first frame not yet sent */
	S_RTS,        /* RTS out, waiting for READY or FIN (busyq) */
	S_STREAM,     /* streaming DATA (streamq while bytes are left) */
	S_WAITACK,    /* all frames out, waiting for acks (busyq) */
	/* recv */
	R_POSTED, /* in core->posted */
	R_READY,  /* in core->posted and ch->reserved: READY sent */
	R_FILL,   /* matched to a message, bytes arriving (ch->rndv) */
	/* all */
	Q_DONE,
};

struct rcp_req {
	struct list link;
	rcpc_core *core;
	rcp_chan *chan; /* NULL: any channel (recv) */
	uint8_t kind, state, internal, reserved_rma;
	uint8_t sync; /* send: complete on ack only (rcpc_issend) */
	int error;
	uint64_t tag;
	unsigned char *buf; /* send: const in spirit */
	size_t len;         /* buffer length */
	size_t total;       /* message length */
	size_t next_off;    /* send: next byte to frame */
	size_t got;         /* recv: bytes accounted */
	uint32_t msg;
	uint32_t frames_out; /* send: slots still pointing at this request */
	void *mr;            /* RMA registration of buf */
	rcp_req *parent;     /* mcast child -> parent */
	int children;        /* mcast: children not yet done */
	rcp_chan *src;       /* recv: channel the message came from */
	rcp_req *pool_next;
	rcp_req_cb cb; /* set: completion goes on core->cbq (CALLBACKS) */
	void *cb_user;
	rcp_req *cb_next;  /* core->cbq */
	struct list clink; /* posted recv: in chan->posted or core->posted_any */
	uint64_t pseq;     /* posted recv: posting order across both */
};

struct slot {
	struct rcpw_hdr hdr; /* wire order, as sent (CRC included) */
	rcp_req *req;        /* DATA frames of a non-inline send */
	uint64_t sent_at;    /* 0: never went out (nic said EAGAIN) */
	uint32_t seq;
	uint32_t plen;                /* payload bytes */
	const unsigned char *payload; /* user buffer, inl or own */
	unsigned char *own;           /* pool buffer holding a copied send */
	uint8_t in_use, sacked, nsent;
	uint8_t ackreq; /* flagged ACKREQ: the peer acks it at once */
	uint8_t hlen;   /* header bytes sent: RCPW_HLEN, or RCPW_CHLEN (compact) */
	unsigned char inl[INLINE_CAP];
};

struct ctl {
	uint8_t type;
	uint16_t flags;
	uint32_t msg;
	uint64_t tag, arg;
	uint8_t rkeylen;
	unsigned char rkey[RKEY_MAX];
};

struct ooo {
	struct rcpw_hdr hdr;
	size_t size; /* bytes charged to the reorder budget */
	unsigned char payload[];
};

struct unexp {
	struct list link;
	rcp_chan *ch;
	uint32_t msg;
	uint8_t is_rts, rma, rkeylen;
	uint32_t incarn; /* ch->incarn when it came: later, its credit is void */
	uint64_t tag;
	size_t total;
	unsigned char *data; /* eager payload (pool buffer) */
	unsigned char rkey[RKEY_MAX];
};

struct rcp_chan {
	struct list link;  /* core->chans */
	struct list dlink; /* core->dirty while on it, else empty */
	rcpc_core *core;
	int peer;
	void *user;
	uint32_t peer_epoch;
	unsigned restarts;   /* new peer incarnations seen (rcp_chan_restarts) */
	uint32_t gone_epoch; /* the incarnation before: its stragglers are stale */
	uint32_t my_epoch;   /* our epoch on this channel: of this conversation (CHANNELS) */
	int sent_blind;      /* a frame of this conversation went out with dst_epoch 0 */
	int rx_taken;        /* a reliable frame was taken since the last reset */
	int named;           /* peer_epoch has named one of our epochs: its blind frames are stale */
	uint64_t chal;       /* our last restart challenge: only its echo proves one */
	uint32_t chal_epoch; /* the incarnation it went to */
	int failed;          /* error every new operation gets, or 0 */
	struct list posted;  /* receives posted for this channel (rcpc_core.posted_any) */
	int accepted;        /* made for an unknown sender, unseen by the user (HANDSHAKE) */
	uint64_t echo;       /* the peer's last challenge: our ACKs echo it (HANDSHAKE) */
	int unreachable;     /* ICMP says so, and nothing heard since: close won't linger */

	/* send side */
	uint32_t tx_next, tx_una, nslots;
	struct slot *slots;
	uint32_t cwnd, ssthresh, peer_wnd, recover, highest_sacked, unsent, max_inflight;
	int have_sack;
	uint64_t srtt, rttvar, rto;
	uint64_t rto_base; /* last time the cumulative ack advanced */
	uint64_t rack_at;  /* when a hole below the highest sack turns lost */
	uint64_t tlp_at;   /* tail-loss probe due (0: none armed) */
	int tlp_probes;    /* probes since the last new frame: each waits twice as long */
	int wnd_told;      /* a full header (it carries wnd) was acked: compact ones may go */
	uint64_t last_tx;  /* last time a new reliable frame went out */
	int backoff;
	uint32_t tx_msg_next;  /* next message id to assign */
	uint32_t tx_msg_start; /* next message id whose first frame goes out */
	struct list startq, streamq, busyq;
	uint32_t credits_granted, credits_used;
	int ready_valid;
	struct ctl ready; /* the peer's latest READY hint */
	struct ctl *ctlq;
	uint32_t ctl_head, ctl_count, ctl_cap;

	/* receive side */
	uint32_t rx_next;
	uint32_t rx_gaps; /* bits set: frames held past a gap */
	uint64_t rx_bits[RXW / 64];
	struct ooo *ooo[RXW];
	uint32_t rx_msg_next;
	uint32_t credits_given;
	uint32_t credits_taken; /* message starts that took a credit (CREDITS) */
	uint32_t incarn;        /* chan_reset calls: which records' credits count */
	uint32_t unexp_count;   /* unexpected messages held for this channel */
	size_t unexp_bytes;     /* and their bytes (records and buffers) */
	int credit_stalled;     /* the head of startq waits for a credit */
	int nic_err;            /* what the nic said to our last frame (CLOSE) */
	struct list rndv;       /* R_FILL receives */
	rcp_req *reserved;
	uint32_t posted_specific; /* posted receives naming this channel */
	int ack_now, ack_pending;
	uint32_t since_ack;
	uint64_t ack_due;
	uint32_t acked_upto; /* rx_next as last told to the peer */
	uint64_t last_heard, last_ping;
	struct {
		struct rcpw_hdr hdr;
		uint64_t sack[RCPW_SACK_WORDS];
	} ackbuf;
};

struct rcpc_core {
	struct rcpc_params p;
	struct rcpc_io io;
	void *owner;
	uint32_t payload_max; /* mtu - header */
	struct list chans;
	struct list dirty;  /* channels chan_flush() must look at (FLUSH) */
	struct list posted; /* R_POSTED / R_READY receives, in post order */
	/* The same receives by channel (rcp_chan.posted) and those for any
	 * channel, with a posting number: matching a message looks at two list
	 * heads, never past the receives other channels wait on. */
	struct list posted_any;
	uint64_t post_seq;
	struct list unexp; /* unexpected messages, in arrival order */
	rcp_chan **by_peer;
	int npeers;
	rcp_req *free_reqs;
	struct list free_unexp; /* unexp records for reuse */
	void **req_slabs;
	int nslabs;
	unsigned char **free_bufs; /* eager payload buffers */
	int nfree_bufs, cap_free_bufs;
	size_t sendbuf_used; /* bytes of pool buffers held by copied sends */
	size_t reorder_used;
	uint64_t unexp_held;  /* eager unexpected messages buffered now */
	uint32_t credits_eff; /* credits a channel grants (CREDITS) */
	int completed;
	rcp_req *cbq, **cbtail; /* finished requests with a callback (CALLBACKS) */
	int retry;            /* a frame or ack the nic refused is waiting */
	uint64_t timer_floor; /* no timer is armed closer than this (TIMERS) */
	uint64_t soon_at;     /* earliest reordering timer armed closer (0: none) */
	uint64_t now;         /* of the entry point running (for deep callees) */
	int naccepted;        /* channels with ch->accepted set */
	uint64_t sweep_at;    /* next look for half-open channels to reclaim */
	uint32_t convs;       /* conversations begun: conv_epoch's counter */
	struct rcp_ep_stats st;
	int demand_warned; /* credit_demand's warning was given */
};

/* ---- parameters --------------------------------------------------------- */

void rcpc_params_default(struct rcpc_params *p)
{
	memset(p, 0, sizeof *p);
	p->mtu = 16384;
	p->rx_frames = 64;
	p->session = 0x52435031u; /* "RCP1" */
	p->epoch = 1;
	p->peer_timeout = 5000000000ull;
	p->rto_min = 250000;     /* 250 us: LAN round trips are tens of us */
	p->rto_max = 1000000000; /* 1 s */
	p->rto_init = 10000000;  /* 10 ms before the first sample */
	p->ack_delay = 50000;    /* 50 us */
	p->credits = 64;
	p->unexp_bytes = 4u << 20;
	p->inline_max = 2048;
	p->send_buf = 1u << 20;
	p->rma_min = 65536; /* docs/protocol.md: where RMA starts to pay */
	p->rma_split = 65536;
	p->reorder_bytes = 8u << 20;
	p->time_wait = 50000000; /* 50 ms: core.c, CLOSE */
}

/* ---- small helpers ---------------------------------------------------------- */

/* Copies of a few bytes without `rep movs`, which gcc emits for variable
 * sizes and whose start-up (~30 cycles) dominates a small message.  Large
 * copies go to libc's memcpy through a function it cannot inline. */
__attribute__((noinline)) static void copy_large(void *d, const void *s, size_t n)
{
	memcpy(d, s, n);
}

static inline void copy_bytes(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n > 64) {
		copy_large(d, s, n);
		return;
	}
	for (; n >= 8; n -= 8, d += 8, s += 8) {
		uint64_t v;
		memcpy(&v, s, 8);
		memcpy(d, &v, 8);
	}
	while (n--)
		*d++ = *s++;
}

static void complete(rcp_req *r, int error)
{
	rcpc_core *c = r->core;

	assert(r->state != Q_DONE);
	if (r->mr && c->io.mr_dereg) {
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
	}
	r->state = Q_DONE;
	r->error = error;
	c->completed++;
	if (r->cb) {
		r->cb_next = NULL;
		*c->cbtail = r;
		c->cbtail = &r->cb_next;
	}
	if (r->kind == REQ_SEND && !error) {
		c->st.msgs_sent++;
		c->st.bytes_sent += r->total;
	} else if (r->kind == REQ_RECV && (!error || error == RCP_ETRUNC)) {
		c->st.msgs_recv++;
		c->st.bytes_recv += r->total < r->len ? r->total : r->len;
	}
	if (r->parent) {
		rcp_req *pa = r->parent;
		if (error && !pa->error)
			pa->error = error;
		r->state = Q_DONE;
		r->pool_next = c->free_reqs;
		c->free_reqs = r;
		if (--pa->children == 0) {
			int e = pa->error;
			pa->error = 0;
			complete(pa, e);
		}
	}
}

static rcp_req *req_alloc(rcpc_core *c)
{
	rcp_req *r = c->free_reqs;
	if (!r) {
		enum { N = 64 };
		rcp_req *slab = calloc(N, sizeof *slab);
		void **ns = realloc(c->req_slabs, sizeof *ns * (size_t)(c->nslabs + 1));
		if (!slab || !ns) {
			free(slab);
			if (ns)
				c->req_slabs = ns;
			return NULL;
		}
		c->req_slabs = ns;
		c->req_slabs[c->nslabs++] = slab;
		for (int i = N - 1; i >= 0; i--) {
			slab[i].pool_next = c->free_reqs;
			c->free_reqs = &slab[i];
		}
		r = c->free_reqs;
	}
	c->free_reqs = r->pool_next;
	/* Field by field: a memset of the whole request compiles to `rep
	 * stos`, a measurable part of a small message's cost. */
	list_init(&r->link);
	list_init(&r->clink);
	r->core = c;
	r->chan = r->src = NULL;
	r->kind = r->state = r->internal = r->reserved_rma = r->sync = 0;
	r->error = 0;
	r->tag = 0;
	r->buf = NULL;
	r->len = r->total = r->next_off = r->got = 0;
	r->msg = r->frames_out = 0;
	r->mr = NULL;
	r->parent = NULL;
	r->children = 0;
	r->cb = NULL;
	return r;
}

static void req_free(rcp_req *r)
{
	rcpc_core *c = r->core;
	r->kind = 0;
	r->pool_next = c->free_reqs;
	c->free_reqs = r;
}

/* Unexpected-message records come and go once per unexpected message
 * (every message of a probe-then-receive user such as pvm_precv): reuse
 * them rather than calloc and free each. */
static struct unexp *unexp_get(rcpc_core *c)
{
	struct unexp *u;
	if (list_empty(&c->free_unexp))
		return calloc(1, sizeof *u);
	u = container_of(c->free_unexp.next, struct unexp, link);
	list_del(&u->link);
	memset(u, 0, sizeof *u);
	return u;
}

static void unexp_put(rcpc_core *c, struct unexp *u)
{
	list_add_tail(&c->free_unexp, &u->link);
}

static unsigned char *buf_get(rcpc_core *c)
{
	if (c->nfree_bufs)
		return c->free_bufs[--c->nfree_bufs];
	return malloc(c->payload_max ? c->payload_max : 1);
}

static void buf_put(rcpc_core *c, unsigned char *b)
{
	if (c->nfree_bufs == c->cap_free_bufs) {
		int ncap = c->cap_free_bufs ? 2 * c->cap_free_bufs : 16;
		unsigned char **n = realloc(c->free_bufs, sizeof *n * (size_t)ncap);
		if (!n) {
			free(b);
			return;
		}
		c->free_bufs = n;
		c->cap_free_bufs = ncap;
	}
	c->free_bufs[c->nfree_bufs++] = b;
}

/* Bytes unexpected record U holds: the record and its pool buffer. */
static size_t unexp_size(const rcpc_core *c, const struct unexp *u)
{
	return sizeof *u + (u->data ? c->payload_max : 0);
}

/* U (filled in, u->ch set) joins the unexpected queue: counted against
 * its channel's bounds (CREDITS) and in the stats. */
static void unexp_hold(rcpc_core *c, struct unexp *u)
{
	size_t n = unexp_size(c, u);
	u->incarn = u->ch->incarn;
	list_add_tail(&c->unexp, &u->link);
	u->ch->unexp_count++;
	u->ch->unexp_bytes += n;
	if (++c->st.unexp_count > c->st.unexp_count_peak)
		c->st.unexp_count_peak = c->st.unexp_count;
	if ((c->st.unexp_bytes += n) > c->st.unexp_bytes_peak)
		c->st.unexp_bytes_peak = c->st.unexp_bytes;
	if (!u->is_rts && ++c->unexp_held > c->st.unexpected_held_peak)
		c->st.unexpected_held_peak = c->unexp_held;
}

/* U leaves the unexpected queue (consumed or dropped); its buffer, if
 * any, is still u->data.  Returns 1 if it took a credit of the channel's
 * current incarnation (consumed, the credit goes back). */
static int unexp_release(rcpc_core *c, struct unexp *u)
{
	size_t n = unexp_size(c, u);
	list_del(&u->link);
	u->ch->unexp_count--;
	u->ch->unexp_bytes -= n;
	c->st.unexp_count--;
	c->st.unexp_bytes -= n;
	if (!u->is_rts)
		c->unexp_held--;
	return u->incarn == u->ch->incarn;
}

/* Frees slot S of CH (acked, or the channel reset): a copied send gives
 * its buffer back to the pool. */
static void slot_free(rcp_chan *ch, struct slot *s)
{
	rcpc_core *c = ch->core;
	s->in_use = 0;
	if (s->own) {
		buf_put(c, s->own);
		s->own = NULL;
		c->sendbuf_used -= c->payload_max;
	}
}

static int tag_match(uint64_t want, uint64_t tag)
{
	return want == RCP_ANY_TAG || want == tag;
}

static struct slot *slot_of(rcp_chan *ch, uint32_t seq)
{
	return &ch->slots[seq & (ch->nslots - 1)];
}

static int rx_bit(const rcp_chan *ch, uint32_t seq)
{
	uint32_t i = seq & (RXW - 1);
	return (int)((ch->rx_bits[i / 64] >> (i % 64)) & 1);
}

static void rx_set(rcp_chan *ch, uint32_t seq, int v)
{
	uint32_t i = seq & (RXW - 1);
	if (v) {
		ch->rx_bits[i / 64] |= 1ull << (i % 64);
		ch->rx_gaps++;
	} else {
		ch->rx_bits[i / 64] &= ~(1ull << (i % 64));
		ch->rx_gaps--;
	}
}

static int chan_has_work(const rcp_chan *ch)
{
	return ch->tx_una != ch->tx_next || !list_empty(&ch->startq) || !list_empty(&ch->streamq) ||
	       !list_empty(&ch->busyq) || !list_empty(&ch->rndv) || ch->posted_specific ||
	       ch->ctl_count;
}

/* Nothing out, queued or owed: no timer can be armed, a flush does
 * nothing.  The timer walks skip such channels (a master with many peers
 * mostly has idle ones). */
static int chan_idle(const rcp_chan *ch)
{
	return !ch->ack_now && !ch->ack_pending && !ch->ack_due && !chan_has_work(ch);
}

/* Called before a channel takes on work: silence while idle is no failure. */
static void chan_touch(rcp_chan *ch, uint64_t now)
{
	if (!chan_has_work(ch) && ch->last_heard < now)
		ch->last_heard = now;
}

/* ---- building and sending frames ---------------------------------------------- */

static void hdr_fill(rcp_chan *ch, struct rcpw_hdr *h, uint8_t type, uint16_t flags, uint32_t seq,
                     uint32_t msg, uint64_t tag, uint64_t arg, uint32_t len)
{
	rcpc_core *c = ch->core;
	h->magic = RCPW_MAGIC;
	h->version = RCPW_VERSION;
	h->type = type;
	h->flags = flags | (c->p.crc ? RCPW_F_CRC : 0);
	h->hlen = RCPW_HLEN;
	h->session = c->p.session;
	h->src_epoch = ch->my_epoch;
	h->dst_epoch = ch->peer_epoch;
	ch->sent_blind |= !ch->peer_epoch;
	h->seq = seq;
	h->ack = ch->rx_next;
	h->credits = ch->credits_given;
	h->wnd = c->p.rx_frames;
	h->len = len;
	h->crc = 0;
	h->msg = msg;
	h->tag = tag;
	h->arg = arg;
	ch->acked_upto = ch->rx_next;
	/* A piggybacked cumulative ack says nothing of frames held past a
	 * gap: then an ACK frame with the bitmap must still go. */
	if (!ch->rx_gaps || type == RCPW_ACK) {
		ch->ack_now = 0;
		ch->ack_pending = 0;
		/* No longer due either: a stale ack_due would otherwise fire
		 * right after the next frame arrives (chan_flush arms it only
		 * when unset) and send a pure ACK ahead of the reply. */
		ch->ack_due = 0;
	}
	ch->since_ack = 0;
}

/* Converts to wire order (the compact layout if h->hlen says so) and fills
 * the CRC over header and payload. */
static void hdr_seal(const rcpc_core *c, struct rcpw_hdr *h, const void *payload, uint32_t len)
{
	uint32_t hl = h->hlen;
	rcpw_hdr_swap(h);
	if (hl == RCPW_CHLEN)
		rcpw_compact(h);
	if (c->p.crc) {
		uint32_t crc = rcpw_crc32c(0, h, hl);
		crc = rcpw_crc32c(crc, payload, len);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		crc = __builtin_bswap32(crc);
#endif
		h->crc = crc;
	}
}

static int xmit(rcp_chan *ch, const void *hdr, uint32_t hlen, const void *payload, uint32_t plen,
                unsigned more)
{
	rcpc_core *c = ch->core;
	struct iovec iov[2] = {{(void *)hdr, hlen}, {(void *)payload, plen}};
	int rc = c->io.send(c->io.ctx, ch->peer, iov, plen ? 2 : 1, more ? RCP_NIC_MORE : 0);
	if (!rc)
		c->st.frames_sent++;
	ch->nic_err = rc;
	return rc;
}

static void chan_fail(rcp_chan *ch, int error);
static uint32_t conv_epoch(rcpc_core *c);

/* Tail-loss probe: if nothing is acked within ~2 round trips of the last
 * frame S, the newest one is resent so the receiver's SACK names whatever
 * else is missing (cheaper than waiting for the RTO).  Every send arms it;
 * each probe since the last new frame (or ack progress) waits twice as
 * long as the one before.
 * Without that backoff a silent peer drew a probe every ~70 us (each probe
 * also restarts the frame's RTO, so no RTO ever came): an 80 ms host stall
 * cost 1,100 frames (measured, udp 8 B ping-pong).  Doubling keeps heavy
 * random loss (a lost probe is soon followed by another) and makes 5 s of
 * silence cost ~16 probes. */
static void tlp_arm(rcp_chan *ch, const struct slot *s, uint64_t now)
{
	const struct rcpc_params *pa = &ch->core->p;
	uint64_t p = ch->srtt ? 2 * ch->srtt : 2 * pa->rto_min;
	/* A frame without ACKREQ (a small eager message, say) may have its
	 * ack held up to ack_delay for a piggyback (a reply being computed):
	 * probe only after that, or every request whose answer takes longer
	 * than 2 RTT is resent and dup-acked, and Karn's rule then keeps srtt
	 * from learning. */
	if (!s->ackreq && p < ch->srtt + pa->ack_delay + pa->ack_delay / 4)
		p = ch->srtt + pa->ack_delay + pa->ack_delay / 4;
	if (p < TIMER_MIN_NS)
		p = TIMER_MIN_NS;
	ch->tlp_at = now + (p << (ch->tlp_probes < 16 ? ch->tlp_probes : 16));
}

/* Transmits slot S (first time or again).  Returns 0 or RCP_EAGAIN. */
/* A frame sealed blind (dst_epoch 0) and resent after the peer was heard
 * goes out naming the peer: once the peer has named us it takes blind
 * frames of its epoch for stragglers (HANDSHAKE), and a resend must not
 * be one.  The crc is sealed again; the rest of the header is as sent. */
static void slot_unblind(rcp_chan *ch, struct slot *s)
{
	const rcpc_core *c = ch->core;
	uint32_t e = ch->peer_epoch;

	if (s->hdr.dst_epoch || !e)
		return;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	e = __builtin_bswap32(e);
#endif
	s->hdr.dst_epoch = e;
	if (c->p.crc) {
		uint32_t crc;
		s->hdr.crc = 0;
		crc = rcpw_crc32c(0, &s->hdr, s->hlen);
		crc = rcpw_crc32c(crc, s->payload, s->plen);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		crc = __builtin_bswap32(crc);
#endif
		s->hdr.crc = crc;
	}
}

static int slot_send(rcp_chan *ch, struct slot *s, uint64_t now)
{
	int rc;

	if (RCPI_UNLIKELY(!s->hdr.dst_epoch))
		slot_unblind(ch, s);
	rc = xmit(ch, &s->hdr, s->hlen, s->payload, s->plen, 1);
	if (rc == RCP_EAGAIN) {
		/* sent_at == 0 marks "the nic refused it": first in line
		 * for the next pump. */
		if (s->sent_at) {
			s->sent_at = 0;
			ch->unsent++;
		}
		ch->core->retry = 1;
		return rc;
	}
	if (rc == RCP_EPEER && !ch->core->p.reliable) {
		/* On a nic that may lose frames, RCP_EPEER relays an ICMP
		 * error: anyone can forge one, and a peer not started yet
		 * draws one too.  A hint, not a verdict: the frame counts as
		 * sent and lost, and only the peer timeout fails the channel
		 * (HANDSHAKE).  Its one use: closing does not linger here. */
		ch->unreachable = 1;
		rc = 0;
	}
	if (rc) {
		chan_fail(ch, rc);
		return rc;
	}
	if (!s->sent_at)
		ch->unsent--;
	if (s->nsent)
		ch->core->st.retransmits++;
	else
		ch->last_tx = now;
	s->sent_at = now ? now : 1;
	/* Every send (re)arms the tail-loss probe; a new frame also ends
	 * the probes' backoff (tlp_arm). */
	if (!ch->core->p.reliable) {
		if (!s->nsent)
			ch->tlp_probes = 0;
		tlp_arm(ch, s, now);
	}
	if (s->nsent < 255)
		s->nsent++;
	return 0;
}

/* Takes the next sequence number and a slot for a reliable frame. */
static struct slot *slot_new(rcp_chan *ch, rcp_req *req, uint8_t type, uint16_t flags, uint32_t msg,
                             uint64_t tag, uint64_t arg, const void *payload, uint32_t plen,
                             int copy)
{
	uint32_t seq = ch->tx_next++;
	struct slot *s = slot_of(ch, seq);
	uint32_t inflight = ch->tx_next - ch->tx_una;

	assert(ch->slots); /* an accepted channel is claimed before it sends */
	assert(!s->in_use);
	s->in_use = 1;
	s->sacked = 0;
	s->nsent = 0;
	s->sent_at = 1; /* becomes the real time in slot_send */
	s->seq = seq;
	s->req = req;
	s->plen = plen;
	s->ackreq = (flags & RCPW_F_ACKREQ) != 0;
	if (copy) {
		assert(plen <= INLINE_CAP);
		copy_bytes(s->inl, payload, plen);
		s->payload = s->inl;
	} else {
		s->payload = payload;
	}
	if (req)
		req->frames_out++;
	if (inflight > ch->max_inflight)
		ch->max_inflight = inflight;
	hdr_fill(ch, &s->hdr, type, flags, seq, msg, tag, arg, plen);
	/* A whole message goes under the compact header once the peer has our
	 * window (only full headers carry it). */
	if (type == RCPW_DATA && (flags & RCPW_F_EAGER) && ch->wnd_told)
		s->hdr.hlen = RCPW_CHLEN;
	s->hlen = (uint8_t)s->hdr.hlen;
	hdr_seal(ch->core, &s->hdr, s->payload, plen);
	return s;
}

static uint32_t window(const rcp_chan *ch)
{
	uint32_t w = ch->cwnd / CWND_ONE;
	if (w > ch->peer_wnd)
		w = ch->peer_wnd;
	if (w > ch->nslots)
		w = ch->nslots;
	return w ? w : 1;
}

/* Puts CH on the dirty list: the next rcpc_flush() pumps it and looks at
 * its acks (FLUSH).  Every change chan_flush() acts on that does not come
 * from a frame of CH (rcpc_input touches it) or from the timers (they
 * flush every channel) calls this. */
static void chan_dirty(rcp_chan *ch)
{
	if (list_empty(&ch->dlink))
		list_add_tail(&ch->core->dirty, &ch->dlink);
}

static int ctl_push(rcp_chan *ch, const struct ctl *k)
{
	chan_dirty(ch);
	if (ch->ctl_count == ch->ctl_cap) {
		uint32_t ncap = ch->ctl_cap ? 2 * ch->ctl_cap : 8;
		struct ctl *n = malloc(sizeof *n * ncap);
		if (!n)
			return RCP_ENOMEM;
		for (uint32_t i = 0; i < ch->ctl_count; i++)
			n[i] = ch->ctlq[(ch->ctl_head + i) % ch->ctl_cap];
		free(ch->ctlq);
		ch->ctlq = n;
		ch->ctl_head = 0;
		ch->ctl_cap = ncap;
	}
	ch->ctlq[(ch->ctl_head + ch->ctl_count++) % ch->ctl_cap] = *k;
	return 0;
}

/* The smallest RTS an endpoint that sleeps at once offers to split. */
#define SLEEPER_SPLIT_MIN (512u << 10)

/* Where a split RMA transfer of TOTAL bytes divides: the sender puts
 * [0, split), the receiver gets [split, total).  Both sides compute it. */
static uint64_t split_at(uint64_t total)
{
	return (total / 2) & ~(uint64_t)4095;
}

/* Receiver first, large message, RMA both ways: rather than one process
 * copying the whole message while the other waits, both copy half at once.
 * FIN(FIRST|SPLIT, key to our buffer) goes out first, so the receiver
 * starts pulling its half; we put ours, then FIN(SPLIT) says so; the
 * receiver's plain FIN says it has pulled (our buffer is free again).
 * Returns 0, RCP_EAGAIN, or 1 if it did not apply (then nothing changed). */
static int send_split(rcp_chan *ch, rcp_req *r, uint64_t now)
{
	rcpc_core *c = ch->core;
	unsigned char rkey[RKEY_MAX];
	size_t rklen = sizeof rkey;
	uint64_t split = split_at(r->total);
	struct slot *s;
	int rc;

	/* Two frames: the caller made sure of room for one. */
	if (!c->p.rma_split || r->total < c->p.rma_split || !c->io.mr_reg || !c->io.get ||
	    ch->tx_next - ch->tx_una + 2 > window(ch) ||
	    c->io.mr_reg(c->io.ctx, r->buf, r->total, RCP_NIC_ACCESS_READ, &r->mr, rkey, &rklen))
		return 1;
	c->st.rma_msgs++;
	s = slot_new(ch, NULL, RCPW_FIN, RCPW_F_FIRST | RCPW_F_SPLIT | RCPW_F_ACKREQ, r->msg,
	             r->tag, r->total, rkey, (uint32_t)rklen, 1);
	rc = slot_send(ch, s, now);
	if (c->io.flush)
		c->io.flush(c->io.ctx); /* the receiver must start now */
	r->next_off = (size_t)split;
	/* A failed put (the peer died) is reported as 0 bytes; the peer
	 * timeout or its FIN settles the rest. */
	if (c->io.put(c->io.ctx, ch->peer, r->buf, (size_t)split, ch->ready.rkey, ch->ready.rkeylen,
	              0)) {
		r->next_off = 0;
		r->got = 1; /* the send fails when the receiver's FIN comes */
	}
	s = slot_new(ch, NULL, RCPW_FIN, RCPW_F_SPLIT | RCPW_F_ACKREQ, r->msg, r->tag, r->next_off,
	             NULL, 0, 1);
	r->state = S_RTS; /* waits for the receiver's FIN, as after an RTS */
	list_add_tail(&ch->busyq, &r->link);
	rc = rc ? rc : slot_send(ch, s, now);
	return rc;
}

/* The smallest message a send on a READY moves by RMA.  With split
 * transfers on, a lone put below rma_split loses to streaming frames (the
 * same hops: put + FIN or DATA + ack; one copy by one process is slower
 * than the ring's two), so RMA starts with the split.  A sender-first RTS
 * takes RMA from rma_min: the get saves the READY hop. */
static uint64_t ready_rma_min(const rcpc_core *c)
{
	return c->p.rma_split > c->p.rma_min ? c->p.rma_split : c->p.rma_min;
}

/* Receiver first: the peer promised a buffer for exactly this message. */
static int ready_fits(const rcp_chan *ch, const rcp_req *r)
{
	return ch->ready_valid && ch->ready.msg == r->msg && r->total > ch->core->payload_max &&
	       ((ch->ready.flags & RCPW_F_ANYTAG) || ch->ready.tag == r->tag) &&
	       r->total <= ch->ready.arg;
}

/* Send R may start now: a promise takes it, or a credit is left (CREDITS).
 * Else it stays queued until the peer returns credits. */
static int send_can_start(rcp_chan *ch, const rcp_req *r)
{
	if (ch->credits_used != ch->credits_granted || ready_fits(ch, r)) {
		ch->credit_stalled = 0;
		return 1;
	}
	if (!ch->credit_stalled) {
		ch->credit_stalled = 1;
		ch->core->st.credit_stalls++;
	}
	return 0;
}

/* Starts send request R: its first frame.  The caller checked
 * send_can_start.  Returns 0 or RCP_EAGAIN. */
static int send_start(rcp_chan *ch, rcp_req *r, uint64_t now)
{
	rcpc_core *c = ch->core;
	struct slot *s;
	int rc;

	list_del(&r->link);
	ch->tx_msg_start++;
	if (ready_fits(ch, r)) {
		ch->ready_valid = 0;
		if ((ch->ready.flags & RCPW_F_RMA) && c->io.put && r->total >= ready_rma_min(c)) {
			rc = send_split(ch, r, now);
			if (rc <= 0)
				return rc;
			rc = c->io.put(c->io.ctx, ch->peer, r->buf, r->total, ch->ready.rkey,
			               ch->ready.rkeylen, 0);
			if (!rc) {
				c->st.rma_msgs++;
				s = slot_new(ch, r, RCPW_FIN, RCPW_F_FIRST | RCPW_F_ACKREQ, r->msg,
				             r->tag, r->total, NULL, 0, 0);
				r->state = S_WAITACK;
				list_add_tail(&ch->busyq, &r->link);
				return slot_send(ch, s, now);
			}
			/* Put failed (peer gone?): stream instead; the
			 * receiver takes either. */
		}
		c->st.rndv_msgs++;
		r->next_off = c->payload_max;
		s = slot_new(ch, r, RCPW_DATA, RCPW_F_FIRST | RCPW_F_STREAM, r->msg, r->tag,
		             r->total, r->buf, c->payload_max, 0);
		r->state = S_STREAM;
		list_add_tail(&ch->streamq, &r->link);
		chan_dirty(ch);
		return slot_send(ch, s, now);
	}
	/* A promise for this message that its terms did not fit, or for an
	 * earlier one, is used up. */
	if (ch->ready_valid && rcpw_seq_le(ch->ready.msg, r->msg))
		ch->ready_valid = 0;

	/* Every other start takes a credit (CREDITS). */
	assert(ch->credits_used != ch->credits_granted);
	ch->credits_used++;
	/* Eager: sync and data in one frame. */
	if (r->total <= c->payload_max) {
		int inl = !r->sync && r->total <= c->p.inline_max && r->total <= INLINE_CAP;
		unsigned char *own = NULL;
		int at_once;
		/* Larger: copied into a pool buffer while send_buf allows, so
		 * the send completes at once and its ack may wait for a
		 * piggyback like an inline one's; else it completes on an
		 * ack the peer sends at once (ACKREQ), which costs a frame
		 * each way and, in a request/reply pattern, a round trip. */
		if (!inl && !r->sync && c->sendbuf_used + c->payload_max <= c->p.send_buf &&
		    (own = buf_get(c)) != NULL) {
			copy_large(own, r->buf, r->total);
			c->sendbuf_used += c->payload_max;
		}
		at_once = inl || own;
		s = slot_new(ch, at_once ? NULL : r, RCPW_DATA,
		             RCPW_F_FIRST | RCPW_F_EAGER | (at_once ? 0 : RCPW_F_ACKREQ), r->msg,
		             r->tag, r->total, own ? own : r->buf, (uint32_t)r->total, inl);
		s->own = own;
		if (at_once) {
			complete(r, 0);
		} else {
			r->state = S_WAITACK;
			list_add_tail(&ch->busyq, &r->link);
		}
		return slot_send(ch, s, now);
	}
	/* Rendezvous: request to send, with an RMA key when worth it. */
	c->st.rndv_msgs++;
	r->state = S_RTS;
	list_add_tail(&ch->busyq, &r->link);
	if (c->io.mr_reg && r->total >= c->p.rma_min) {
		unsigned char rkey[RKEY_MAX];
		size_t rklen = sizeof rkey;
		/* SPLIT offers to put half when the receiver answers
		 * READY(SPLIT).  That READY costs an endpoint that sleeps
		 * at once a wake-up (~20-30 us here), more than half the
		 * copy saves below ~512 KiB (measured, relinked PVM
		 * sleeping: 64 KiB 53 -> 89 us with the offer; 1 MiB 225 ->
		 * 368-434 us without); so it offers only from there, and
		 * below the receiver pulls it all while the sender sleeps
		 * until the FIN. */
		uint16_t fl = RCPW_F_RMA;
		uint64_t min = c->p.rma_split;
		if ((c->p.flags & RCP_EP_SLEEP) && min < SLEEPER_SPLIT_MIN)
			min = SLEEPER_SPLIT_MIN;
		if (c->p.rma_split && r->total >= min && c->io.put)
			fl |= RCPW_F_SPLIT;
		if (!c->io.mr_reg(c->io.ctx, r->buf, r->total, RCP_NIC_ACCESS_READ, &r->mr, rkey,
		                  &rklen)) {
			s = slot_new(ch, NULL, RCPW_RTS, fl, r->msg, r->tag, r->total, rkey,
			             (uint32_t)rklen, 1);
			r->reserved_rma = 1;
			return slot_send(ch, s, now);
		}
	}
	s = slot_new(ch, NULL, RCPW_RTS, 0, r->msg, r->tag, r->total, NULL, 0, 1);
	return slot_send(ch, s, now);
}

/* How long a hole below the highest selectively acked frame may stay
 * open before it is taken as lost (RACK: reordering on these links is
 * shorter than a quarter round trip). */
static uint64_t rack_wait(const rcp_chan *ch)
{
	uint64_t w = ch->srtt ? ch->srtt + ch->srtt / 4 : ch->rto;
	return w < TIMER_MIN_NS ? TIMER_MIN_NS : w;
}

/* Frames to resend may be waiting: refused by the nic, or below the
 * highest selectively acked one (a hole). */
static int chan_resend_due(const rcp_chan *ch)
{
	return ch->unsent || (ch->have_sack && rcpw_seq_lt(ch->tx_una, ch->highest_sacked));
}

/* Resends frames taken as lost.  Returns 0 or RCP_EAGAIN. */
static int chan_retransmit(rcp_chan *ch, uint64_t now)
{
	uint64_t wait = rack_wait(ch);
	ch->rack_at = 0;
	if (!chan_resend_due(ch))
		return 0;
	for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++) {
		struct slot *s = slot_of(ch, seq);
		int lost;
		if (s->sacked)
			continue;
		/* Lost: never went out, or a later frame arrived and the
		 * reordering window has passed since this one was (re)sent. */
		lost = s->sent_at == 0 || (ch->have_sack && rcpw_seq_lt(seq, ch->highest_sacked) &&
		                           now - s->sent_at >= wait);
		if (!lost) {
			if (ch->have_sack && rcpw_seq_lt(seq, ch->highest_sacked) && s->sent_at &&
			    (!ch->rack_at || s->sent_at + wait < ch->rack_at)) {
				rcpc_core *c = ch->core;
				ch->rack_at = s->sent_at + wait;
				/* Closer than timer_floor: rcpc_deadline_soon must say so. */
				if (ch->rack_at < now + c->timer_floor &&
				    (!c->soon_at || ch->rack_at < c->soon_at))
					c->soon_at = ch->rack_at;
			}
			continue;
		}
		if (s->sent_at && rcpw_seq_le(ch->recover, seq)) {
			/* One multiplicative decrease per window of loss. */
			ch->ssthresh = ch->cwnd / 2 > 2 * CWND_ONE ? ch->cwnd / 2 : 2 * CWND_ONE;
			ch->cwnd = ch->ssthresh;
			ch->recover = ch->tx_next;
		}
		if (slot_send(ch, s, now))
			return RCP_EAGAIN;
	}
	return 0;
}

/* Sends whatever the window allows: retransmissions, control frames,
 * message starts, stream data. */
static void chan_pump(rcp_chan *ch, uint64_t now)
{
	rcpc_core *c = ch->core;

	if (ch->failed)
		return;
	if (chan_retransmit(ch, now))
		return;
	while (ch->tx_next - ch->tx_una < window(ch)) {
		struct slot *s;
		int rc;
		if (ch->ctl_count) {
			struct ctl *k = &ch->ctlq[ch->ctl_head];
			s = slot_new(ch, NULL, k->type, k->flags, k->msg, k->tag, k->arg, k->rkey,
			             k->rkeylen, 1);
			ch->ctl_head = (ch->ctl_head + 1) % ch->ctl_cap;
			ch->ctl_count--;
			rc = slot_send(ch, s, now);
		} else if (!list_empty(&ch->startq) &&
		           send_can_start(ch, container_of(ch->startq.next, rcp_req, link))) {
			rcp_req *r = container_of(ch->startq.next, rcp_req, link);
			rc = send_start(ch, r, now);
		} else if (!list_empty(&ch->streamq)) {
			rcp_req *r = container_of(ch->streamq.next, rcp_req, link);
			size_t n = r->total - r->next_off;
			uint16_t fl = 0;
			if (n > c->payload_max)
				n = c->payload_max;
			if (r->next_off + n == r->total) {
				fl = RCPW_F_ACKREQ;
				list_del(&r->link);
				r->state = S_WAITACK;
				list_add_tail(&ch->busyq, &r->link);
			}
			s = slot_new(ch, r, RCPW_DATA, fl, r->msg, r->tag, r->next_off,
			             r->buf + r->next_off, (uint32_t)n, 0);
			r->next_off += n;
			rc = slot_send(ch, s, now);
		} else {
			break;
		}
		if (rc)
			break;
	}
}

static void send_ack(rcp_chan *ch, uint64_t now)
{
	rcpc_core *c = ch->core;
	uint32_t words = 0;

	(void)now;
	_Static_assert(RCPW_SACK_WORDS * 64 == RXW, "the SACK bitmap covers the window");
	/* Bit i of the SACK is frame rx_next + 1 + i: the receive bitmap read
	 * a word at a time from that position, round the ring.  Nothing held
	 * past a gap (the common case): an empty SACK. */
	if (ch->rx_gaps) {
		uint32_t base = (ch->rx_next + 1) & (RXW - 1);
		for (uint32_t w = 0; w < RCPW_SACK_WORDS; w++) {
			uint32_t b = (base + 64 * w) & (RXW - 1), q = b / 64, r = b % 64;
			uint64_t v = ch->rx_bits[q] >> r;
			if (r)
				v |= ch->rx_bits[(q + 1) % (RXW / 64)] << (64 - r);
			ch->ackbuf.sack[w] = v;
			if (v)
				words = w + 1;
		}
	}
	hdr_fill(ch, &ch->ackbuf.hdr, RCPW_ACK, ch->echo && !ch->rx_taken ? RCPW_F_FRESH : 0, 0, 0,
	         0, ch->echo, words * 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (uint32_t w = 0; w < words; w++)
		ch->ackbuf.sack[w] = __builtin_bswap64(ch->ackbuf.sack[w]);
#endif
	hdr_seal(c, &ch->ackbuf.hdr, ch->ackbuf.sack, words * 8);
	if (!xmit(ch, &ch->ackbuf.hdr, RCPW_HLEN, ch->ackbuf.sack, words * 8, 0))
		c->st.acks_sent++;
	else {
		ch->ack_now = 1; /* try again later */
		c->retry = 1;
		chan_dirty(ch);
	}
}

static void send_ping(rcp_chan *ch, uint64_t now)
{
	struct rcpw_hdr h;
	hdr_fill(ch, &h, RCPW_PING, 0, 0, 0, 0, 0, 0);
	hdr_seal(ch->core, &h, NULL, 0);
	xmit(ch, &h, RCPW_HLEN, NULL, 0, 0);
	ch->last_ping = now;
}

/* ---- failure ------------------------------------------------------------------- */

static void fail_list(struct list *l, int error)
{
	struct list *p, *t;
	list_for_each_safe(p, t, l)
	{
		rcp_req *r = container_of(p, rcp_req, link);
		list_del(&r->link);
		complete(r, error);
	}
}

/* Drops all send/receive state of CH; pending operations complete with
 * ERROR.  Unexpected eager messages already received stay receivable. */
static void chan_reset(rcp_chan *ch, int error)
{
	rcpc_core *c = ch->core;
	struct list *p, *t;

	for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++)
		slot_free(ch, slot_of(ch, seq));
	ch->wnd_told = 0; /* a restarted peer knows nothing of us */
	fail_list(&ch->startq, error);
	fail_list(&ch->streamq, error);
	fail_list(&ch->busyq, error);
	fail_list(&ch->rndv, error);
	list_for_each_safe(p, t, &c->posted)
	{
		rcp_req *r = container_of(p, rcp_req, link);
		if (r->chan == ch) {
			list_del(&r->link);
			list_del(&r->clink);
			complete(r, error);
		}
	}
	list_for_each_safe(p, t, &c->unexp)
	{
		struct unexp *u = container_of(p, struct unexp, link);
		if (u->ch == ch && u->is_rts) {
			unexp_release(c, u);
			unexp_put(c, u);
		}
	}
	for (uint32_t i = 0; i < RXW; i++) {
		if (ch->ooo[i]) {
			c->reorder_used -= ch->ooo[i]->size;
			free(ch->ooo[i]);
			ch->ooo[i] = NULL;
		}
	}
	memset(ch->rx_bits, 0, sizeof ch->rx_bits);
	ch->rx_gaps = 0;
	ch->reserved = NULL;
	ch->posted_specific = 0;
	ch->ctl_count = ch->ctl_head = 0;
	ch->ready_valid = 0;
	ch->tx_next = ch->tx_una = 1;
	ch->rx_next = 1;
	ch->tx_msg_next = ch->tx_msg_start = ch->rx_msg_next = 1;
	/* CREDITS: the peer assumes CREDITS_INIT until our first header; the
	 * eager messages of the incarnation before stay held (receivable)
	 * and count against the new grant, which the peer's assumption may
	 * exceed by CREDITS_INIT at most (once per restart). */
	ch->incarn++;
	ch->credits_granted = CREDITS_INIT;
	ch->credits_given = c->credits_eff >= ch->unexp_count + CREDITS_INIT
	                        ? c->credits_eff - ch->unexp_count
	                        : CREDITS_INIT;
	ch->credits_used = ch->credits_taken = 0;
	ch->credit_stalled = 0;
	ch->unsent = 0;
	ch->have_sack = 0;
	ch->highest_sacked = 0;
	ch->recover = 1;
	ch->ack_now = ch->ack_pending = 0;
	ch->acked_upto = 1;
	ch->sent_blind = 0;
	ch->rx_taken = 0;
}

static void chan_fail(rcp_chan *ch, int error)
{
	ch->failed = error;
	ch->core->st.timeouts++;
	chan_reset(ch, error);
	/* The peer may still hold this conversation (or frames of it be on
	 * their way): whatever this channel sends later is a new one. */
	ch->my_epoch = conv_epoch(ch->core);
}

/* ---- receiving ----------------------------------------------------------------- */

static rcp_req *first_match(struct list *l, uint64_t tag)
{
	struct list *p;
	for (p = l->next; p != l; p = p->next) {
		rcp_req *r = container_of(p, rcp_req, clink);
		if (tag_match(r->tag, tag))
			return r;
	}
	return NULL;
}

/* The first posted receive for (CH, TAG): the earlier of CH's own and the
 * any-channel ones (each list in posting order). */
static rcp_req *match_posted(rcpc_core *c, rcp_chan *ch, uint64_t tag)
{
	rcp_req *r = first_match(&ch->posted, tag), *w = first_match(&c->posted_any, tag);
	return !r || (w && w->pseq < r->pseq) ? w : r;
}

static void recv_unpost(rcp_req *r)
{
	list_del(&r->link);
	list_del(&r->clink);
	if (r->chan) {
		r->chan->posted_specific--;
		if (r->chan->reserved == r)
			r->chan->reserved = NULL;
	}
}

static void try_ready(rcp_chan *ch);

/* Message data went into R; complete it once all bytes are accounted. */
static void recv_check_done(rcp_chan *ch, rcp_req *r)
{
	if (r->state == R_FILL && r->got >= r->total) {
		list_del(&r->link);
		complete(r, r->total > r->len ? RCP_ETRUNC : 0);
		try_ready(ch);
	}
}

static void place(rcp_req *r, uint64_t off, const unsigned char *p, uint32_t n)
{
	if (off < r->len) {
		size_t m = r->len - off < n ? r->len - off : n;
		copy_bytes(r->buf + off, p, m);
	}
	r->got += n;
}

/* The message starting now on CH matched receive R (R_POSTED or R_READY). */
static void recv_matched(rcp_chan *ch, rcp_req *r, uint32_t msg, uint64_t tag, size_t total)
{
	/* A receive promised to this very message may already hold bytes:
	 * data placed before the message's start frame was processed (the
	 * start was lost and resent while the sender streamed on our READY). */
	if (!(r->state == R_READY && r->msg == msg))
		r->got = 0;
	recv_unpost(r);
	r->src = ch;
	r->msg = msg;
	r->tag = tag;
	r->total = total;
}

/* Grants the peer one more unexpected message (one was consumed). */
static void credit_return(rcp_chan *ch)
{
	chan_dirty(ch);
	ch->credits_given++;
	ch->ack_pending = 1;
}

/* Is a receive posted that could take a message of CH (on CH or on any
 * channel)? */
static int chan_awaited(const rcp_chan *ch)
{
	return !list_empty(&ch->posted) || !list_empty(&ch->core->posted_any);
}

/* A receive waits on CH and the peer holds no credit (DEMAND): grant one
 * more, or past the hard bound fail CH's waiting receives. */
static void credit_demand(rcp_chan *ch)
{
	rcpc_core *c = ch->core;
	struct list *p, *t;
	int failed = 0;

	if (ch->failed || ch->credits_given != ch->credits_taken || !chan_awaited(ch))
		return;
	if (ch->unexp_count < (uint64_t)DEMAND_MAX * c->credits_eff) {
		c->st.demand_credits++;
		credit_return(ch);
		return;
	}
	list_for_each_safe(p, t, &ch->posted)
	{
		rcp_req *r = container_of(p, rcp_req, clink);
		if (r == ch->reserved)
			continue; /* promised by READY: needs no credit, and the
			             peer may be filling it */
		recv_unpost(r);
		complete(r, RCP_ENOMEM);
		c->st.demand_fails++;
		failed = 1;
	}
	if (failed && !c->demand_warned) {
		c->demand_warned = 1;
		rcpi_warn("a receive waited behind %u unconsumed messages of one channel "
		          "(RCP_CREDITS/RCP_UNEXP_BYTES x %u): failed with RCP_ENOMEM",
		          (unsigned)ch->unexp_count, DEMAND_MAX);
	}
}

/* A message start that needs a credit (eager DATA, RTS) came.  Past our
 * grant the peer ignores credits: a broken or hostile peer, which must
 * not make us hold more (CREDITS).  Returns 0, or -1 (channel failed). */
static int credit_take(rcp_chan *ch)
{
	if (ch->credits_taken == ch->credits_given) {
		ch->core->st.bad_frames++;
		chan_fail(ch, RCP_EPROTO);
		return -1;
	}
	ch->credits_taken++;
	return 0;
}

/* The receiver's half of a split transfer of matched receive R: pull
 * bytes [split, N) from the sender's buffer (RKEY), tell it by FIN that
 * its buffer is free, and wait in ch->rndv for its FIN(SPLIT).  A failed
 * pull is remembered in r->got and fails R then. */
static void split_pull(rcp_chan *ch, rcp_req *r, uint64_t n, const void *rkey, uint32_t rkeylen)
{
	rcpc_core *c = ch->core;
	uint64_t split = split_at(r->total), len = n > split ? n - split : 0;
	struct ctl k = {0};
	int rc = 0;

	if (len)
		rc = c->io.get ? c->io.get(c->io.ctx, ch->peer, r->buf + split, (size_t)len, rkey,
		                           rkeylen, split)
		               : RCP_EPROTO;
	k.type = RCPW_FIN;
	k.msg = r->msg;
	k.arg = rc ? 0 : len;
	ctl_push(ch, &k);
	r->state = R_FILL;
	r->got = rc ? 1 : 0;
	list_add_tail(&ch->rndv, &r->link);
}

/* Sender first, large, RMA both ways (see send_split for the other
 * order): READY(SPLIT, key to our buffer) goes out first so the sender puts
 * the lower half while we pull the upper half; our FIN frees its buffer,
 * its FIN(SPLIT) completes R.  Returns 0, or 1 if it did not apply. */
static int rts_split(rcp_chan *ch, rcp_req *r, const unsigned char *rkey, uint32_t rkeylen)
{
	rcpc_core *c = ch->core;
	struct ctl k = {0};
	size_t rklen = sizeof k.rkey;

	if (!c->p.rma_split || r->total < c->p.rma_split || r->total > r->len || !c->io.mr_reg ||
	    !c->io.put)
		return 1;
	if (r->mr) {
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
	}
	if (c->io.mr_reg(c->io.ctx, r->buf, r->total, RCP_NIC_ACCESS_WRITE, &r->mr, k.rkey, &rklen))
		return 1;
	k.type = RCPW_READY;
	k.flags = RCPW_F_RMA | RCPW_F_SPLIT;
	k.msg = r->msg;
	k.tag = r->tag;
	k.arg = r->total;
	k.rkeylen = (uint8_t)rklen;
	if (ctl_push(ch, &k))
		return 1;
	chan_pump(ch, c->now);
	if (c->io.flush)
		c->io.flush(c->io.ctx); /* the sender must start now */
	c->st.rma_msgs++;
	split_pull(ch, r, r->total, rkey, rkeylen);
	return 0;
}

/* What an RTS with FLAGS offers, as rts_matched takes it. */
static int rts_rma(uint16_t flags)
{
	return !(flags & RCPW_F_RMA) ? 0 : (flags & RCPW_F_SPLIT) ? 2 : 1;
}

/* RTS for MSG matched receive R: pull by RMA, or say READY.  RMA: 0 no
 * key, 1 a key, 2 a key and the sender's offer to split (RCPW_F_SPLIT). */
static void rts_matched(rcp_chan *ch, rcp_req *r, uint32_t msg, uint64_t tag, size_t total, int rma,
                        const unsigned char *rkey, uint32_t rkeylen)
{
	rcpc_core *c = ch->core;
	struct ctl k = {0};

	recv_matched(ch, r, msg, tag, total);
	if (rma > 1 && c->io.get && rts_split(ch, r, rkey, rkeylen) == 0)
		return;
	if (rma && c->io.get) {
		size_t n = total < r->len ? total : r->len;
		int rc = n ? c->io.get(c->io.ctx, ch->peer, r->buf, n, rkey, rkeylen, 0) : 0;
		k.type = RCPW_FIN;
		k.msg = msg;
		k.arg = rc ? 0 : total;
		ctl_push(ch, &k);
		c->st.rma_msgs++;
		complete(r, rc ? rc : (total > r->len ? RCP_ETRUNC : 0));
		try_ready(ch);
		return;
	}
	r->state = R_FILL;
	list_add_tail(&ch->rndv, &r->link);
	/* Always answer an RTS, even if a READY promise for this message
	 * is already out: the sender chose RTS, so it declined the promise
	 * (or had not seen it).  It ignores a READY it no longer waits for. */
	k.type = RCPW_READY;
	k.msg = msg;
	k.tag = tag;
	k.arg = total;
	ctl_push(ch, &k);
	recv_check_done(ch, r);
}

/* Receiver first: promise the next message of CH to the first receive
 * that could take it, if its buffer is larger than one frame. */
static void try_ready(rcp_chan *ch)
{
	rcpc_core *c = ch->core;
	rcp_req *r;
	struct ctl k = {0};

	if (ch->reserved || ch->failed || !ch->posted_specific || list_empty(&ch->posted))
		return;
	r = container_of(ch->posted.next, rcp_req, clink);
	if (!list_empty(&c->posted_any) &&
	    container_of(c->posted_any.next, rcp_req, clink)->pseq < r->pseq)
		return; /* a wildcard receive comes first: promise nothing */
	if (r->len <= c->payload_max)
		return;
	k.type = RCPW_READY;
	k.msg = ch->rx_msg_next;
	k.tag = r->tag;
	k.arg = r->len;
	k.flags = r->tag == RCP_ANY_TAG ? RCPW_F_ANYTAG : 0;
	if (r->mr) {
		/* Registered for an earlier, stale promise: the key was not
		 * kept, so register afresh. */
		c->io.mr_dereg(c->io.ctx, r->mr);
		r->mr = NULL;
	}
	if (c->io.mr_reg && r->len >= c->p.rma_min) {
		size_t rklen = sizeof k.rkey;
		if (!c->io.mr_reg(c->io.ctx, r->buf, r->len, RCP_NIC_ACCESS_WRITE, &r->mr, k.rkey,
		                  &rklen))
			k.rkeylen = (uint8_t)rklen;
	}
	if (k.rkeylen)
		k.flags |= RCPW_F_RMA;
	if (ctl_push(ch, &k))
		return;
	r->state = R_READY;
	r->msg = ch->rx_msg_next;
	/* A new promise holds no bytes yet: whatever an earlier, stale
	 * promise of R counted belonged to another message, and would make R
	 * complete before all of this one's bytes are in. */
	r->got = 0;
	ch->reserved = r;
}

/* After a message start that did not use the promised receive. */
static void ready_stale(rcp_chan *ch)
{
	rcp_req *r = ch->reserved;
	if (r && rcpw_seq_lt(r->msg, ch->rx_msg_next)) {
		/* Frames of that message that came before its first one were
		 * placed here (data_place): not ours, count them out. */
		r->got = 0;
		r->state = R_POSTED;
		ch->reserved = NULL;
		try_ready(ch);
	}
}

static rcp_req *rndv_find(rcp_chan *ch, uint32_t msg)
{
	struct list *p;
	for (p = ch->rndv.next; p != &ch->rndv; p = p->next) {
		rcp_req *r = container_of(p, rcp_req, link);
		if (r->msg == msg)
			return r;
	}
	return NULL;
}

static rcp_req *busy_find(rcp_chan *ch, uint32_t msg, uint8_t state)
{
	struct list *p;
	for (p = ch->busyq.next; p != &ch->busyq; p = p->next) {
		rcp_req *r = container_of(p, rcp_req, link);
		if (r->msg == msg && r->state == state)
			return r;
	}
	return NULL;
}

/* Non-first DATA: place into the receive its message belongs to.  Safe out
 * of order.  Returns 0, or -1 if no receive owns that message. */
static int data_place(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcp_req *r = rndv_find(ch, h->msg);
	if (!r && ch->reserved && ch->reserved->msg == h->msg)
		r = ch->reserved;
	if (!r)
		return -1;
	place(r, h->arg, pl, h->len);
	recv_check_done(ch, r);
	return 0;
}

static void bad(rcpc_core *c)
{
	c->st.bad_frames++;
}

/* H starts a message (eager or streamed DATA, RTS, FIN after a put or
 * starting a split): it must be the channel's next one.  Returns 0 and
 * counts it, or -1 (counted as bad: the caller drops H). */
static int msg_start(rcp_chan *ch, const struct rcpw_hdr *h)
{
	if (h->msg != ch->rx_msg_next) {
		bad(ch->core);
		return -1;
	}
	ch->rx_msg_next++;
	return 0;
}

/* A message start that claims our READY promise (STREAM data, or FIN
 * after an RMA put): returns the promised receive, now matched, or NULL
 * after failing the channel if the sender broke the promise's terms —
 * refusing is safer than guessing where its bytes belong. */
static rcp_req *take_promised(rcp_chan *ch, const struct rcpw_hdr *h)
{
	rcp_req *r = ch->reserved;
	if (!r || r->msg != h->msg || !tag_match(r->tag, h->tag)) {
		bad(ch->core);
		chan_fail(ch, RCP_EPROTO);
		return NULL;
	}
	recv_matched(ch, r, h->msg, h->tag, h->arg);
	return r;
}

/* Processes reliable frame H in sequence order. */
static void process_inorder(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcpc_core *c = ch->core;
	rcp_req *r;

	switch (h->type) {
	case RCPW_DATA:
		if (!(h->flags & RCPW_F_FIRST)) {
			if (data_place(ch, h, pl))
				bad(c);
			return;
		}
		if (msg_start(ch, h))
			return;
		if (h->flags & RCPW_F_STREAM) {
			r = take_promised(ch, h);
			if (!r)
				return;
			r->state = R_FILL;
			list_add_tail(&ch->rndv, &r->link);
			place(r, 0, pl, h->len);
			recv_check_done(ch, r);
			return;
		}
		/* Eager: the whole message is here. */
		if (credit_take(ch))
			return;
		r = match_posted(c, ch, h->tag);
		if (r) {
			recv_matched(ch, r, h->msg, h->tag, h->len);
			place(r, 0, pl, h->len);
			complete(r, h->len > r->len ? RCP_ETRUNC : 0);
			credit_return(ch);
		} else {
			struct unexp *u = unexp_get(c);
			unsigned char *b = h->len ? buf_get(c) : NULL;
			if (!u || (h->len && !b)) {
				/* Out of memory: drop the message start, which
				 * cannot be retried once acked.  Fail loudly. */
				if (u)
					unexp_put(c, u);
				free(b);
				chan_fail(ch, RCP_ENOMEM);
				return;
			}
			if (h->len)
				memcpy(b, pl, h->len);
			u->ch = ch;
			u->msg = h->msg;
			u->tag = h->tag;
			u->total = h->len;
			u->data = b;
			unexp_hold(c, u);
			credit_demand(ch);
			c->st.unexpected_msgs++;
		}
		ready_stale(ch);
		return;
	case RCPW_RTS:
		if (msg_start(ch, h) || credit_take(ch))
			return;
		r = match_posted(c, ch, h->tag);
		if (r) {
			credit_return(ch);
			rts_matched(ch, r, h->msg, h->tag, h->arg, rts_rma(h->flags), pl, h->len);
		} else {
			struct unexp *u = unexp_get(c);
			if (!u) {
				chan_fail(ch, RCP_ENOMEM);
				return;
			}
			u->ch = ch;
			u->msg = h->msg;
			u->tag = h->tag;
			u->total = h->arg;
			u->is_rts = 1;
			u->rma = (uint8_t)rts_rma(h->flags);
			u->rkeylen = (uint8_t)h->len;
			memcpy(u->rkey, pl, h->len);
			unexp_hold(c, u);
			credit_demand(ch);
			c->st.unexpected_msgs++;
		}
		ready_stale(ch);
		return;
	case RCPW_READY:
		/* The peer is ready for our message h->msg.  Only on terms
		 * that fit it: a promise READY sent before our RTS arrived,
		 * for a receive whose tag filter does not take this message,
		 * is not an answer to the RTS.  The RTS will match another
		 * receive there, and data streamed on the stale promise could
		 * be placed (out of order, ahead of the RTS) into the promised
		 * receive: found by tests/soak.c under drop+dup on shm. */
		r = busy_find(ch, h->msg, S_RTS);
		if (r && !(h->flags & RCPW_F_ANYTAG) && h->tag != r->tag)
			r = NULL;
		if (r) {
			if (r->reserved_rma && (h->flags & RCPW_F_SPLIT) &&
			    (h->flags & RCPW_F_RMA)) {
				/* Split: it pulls the upper half, we put the lower. */
				uint64_t split = split_at(r->total), put = 0;
				struct ctl k = {0};
				if (h->arg == r->total && c->io.put &&
				    !c->io.put(c->io.ctx, ch->peer, r->buf, (size_t)split, pl,
				               h->len, 0))
					put = split;
				if (!put)
					r->got = 1; /* fails when its FIN comes */
				k.type = RCPW_FIN;
				k.flags = RCPW_F_SPLIT;
				k.msg = h->msg;
				k.arg = put;
				ctl_push(ch, &k);
				return;
			}
			if (r->reserved_rma)
				return; /* it pulls by RMA and answers FIN */
			list_del(&r->link);
			r->state = S_STREAM;
			r->next_off = 0;
			list_add_tail(&ch->streamq, &r->link);
			chan_dirty(ch);
			return;
		}
		if (rcpw_seq_le(ch->tx_msg_start, h->msg)) {
			/* A promise for a message not started yet: keep it. */
			ch->ready_valid = 1;
			ch->ready.msg = h->msg;
			ch->ready.tag = h->tag;
			ch->ready.arg = h->arg;
			ch->ready.flags = h->flags;
			ch->ready.rkeylen = (uint8_t)h->len;
			memcpy(ch->ready.rkey, pl, h->len);
		}
		return;
	case RCPW_FIN:
		if ((h->flags & (RCPW_F_FIRST | RCPW_F_SPLIT)) == (RCPW_F_FIRST | RCPW_F_SPLIT)) {
			/* Split transfer starts: pull our half now. */
			if (msg_start(ch, h))
				return;
			r = take_promised(ch, h);
			if (!r)
				return;
			split_pull(ch, r, h->arg < r->len ? h->arg : r->len, pl, h->len);
			return;
		}
		if (h->flags & RCPW_F_SPLIT) {
			/* The sender's half is in place too. */
			r = rndv_find(ch, h->msg);
			if (!r || r->state != R_FILL) {
				bad(c);
				return;
			}
			list_del(&r->link);
			if (r->got || h->arg != split_at(r->total))
				complete(r, RCP_EPEER);
			else
				complete(r, r->total > r->len ? RCP_ETRUNC : 0);
			try_ready(ch);
			return;
		}
		if (h->flags & RCPW_F_FIRST) {
			/* Sender put the message into our promised buffer. */
			if (msg_start(ch, h))
				return;
			r = take_promised(ch, h);
			if (!r)
				return;
			complete(r, h->arg > r->len ? RCP_ETRUNC : 0);
			try_ready(ch);
			return;
		}
		/* Receiver pulled our RTS message. */
		r = busy_find(ch, h->msg, S_RTS);
		if (!r) {
			bad(c);
			return;
		}
		list_del(&r->link);
		complete(r, r->got ? RCP_EPEER : 0);
		return;
	default: bad(c);
	}
}

/* One of our frames is acknowledged (cumulatively or selectively). */
static void slot_acked(rcp_chan *ch, struct slot *s, uint64_t now)
{
	rcp_req *r = s->req;

	if (s->nsent == 1 && s->sent_at > 1 && now >= s->sent_at) {
		uint64_t sample = now - s->sent_at;
		if (!ch->srtt) {
			ch->srtt = sample;
			ch->rttvar = sample / 2;
		} else {
			uint64_t d = sample > ch->srtt ? sample - ch->srtt : ch->srtt - sample;
			ch->rttvar = (3 * ch->rttvar + d) / 4;
			ch->srtt = (7 * ch->srtt + sample) / 8;
		}
	}
	if (ch->cwnd < ch->ssthresh)
		ch->cwnd += CWND_ONE;
	else
		ch->cwnd += CWND_ONE * CWND_ONE / (ch->cwnd ? ch->cwnd : 1);
	if (ch->cwnd > ch->nslots * CWND_ONE)
		ch->cwnd = ch->nslots * CWND_ONE;
	if (s->hlen == RCPW_HLEN)
		ch->wnd_told = 1;
	s->req = NULL;
	if (r && --r->frames_out == 0 && r->state == S_WAITACK) {
		list_del(&r->link);
		complete(r, 0);
	}
}

static void update_rto(rcp_chan *ch)
{
	const struct rcpc_params *p = &ch->core->p;
	uint64_t rto = ch->srtt ? ch->srtt + 4 * ch->rttvar : p->rto_init;
	if (rto < p->rto_min)
		rto = p->rto_min;
	rto <<= ch->backoff;
	ch->rto = rto > p->rto_max ? p->rto_max : rto;
}

/* Header fields every frame carries: cumulative ack, credits, window.
 * Returns -1, having changed nothing, for an ack of frames never sent.
 *
 * Ranges are checked as unsigned distances from the lower end, never by
 * two serial-number comparisons: those are both true for a value exactly
 * 2^31 away (RFC 1982 leaves that case undefined), so with nothing in
 * flight an ack of tx_una + 2^31 passed both, and the loop below walked
 * 2^31 slots (~8.6 s of CPU from one datagram) and left tx_una past
 * tx_next.  An ack at or behind tx_una (an old frame, reordered) is
 * normal; one past tx_next cannot come from a correct peer. */
static int process_ack_fields(rcp_chan *ch, const struct rcpw_hdr *h, uint64_t now)
{
	uint32_t inflight = ch->tx_next - ch->tx_una;
	uint32_t ahead = h->ack - ch->tx_una;
	int progress = 0;

	if (ahead > inflight && h->ack - ch->tx_next <= 0x80000000u)
		return -1; /* beyond tx_next (by up to 2^31): never sent */
	/* Credits: forward of what we hold, by at most what we used plus a
	 * bound, so a forged value cannot give unlimited credit. */
	if ((uint32_t)(h->credits - ch->credits_granted) - 1u <
	    (uint32_t)(ch->credits_used + 1000000 - ch->credits_granted))
		ch->credits_granted = h->credits;
	if (h->wnd)
		ch->peer_wnd = h->wnd > TXW_MAX ? TXW_MAX : h->wnd;
	if (ahead && ahead <= inflight) {
		while (ch->tx_una != h->ack) {
			struct slot *s = slot_of(ch, ch->tx_una);
			if (!s->sacked)
				slot_acked(ch, s, now);
			if (!s->sent_at)
				ch->unsent--;
			slot_free(ch, s);
			ch->tx_una++;
		}
		progress = 1;
	}
	if (progress) {
		/* RFC 6298 (5.3): restart the timer when new data is acked, so
		 * a deep queue behind a full window is not taken for loss. */
		ch->rto_base = now;
		ch->backoff = 0;
		ch->tlp_probes = 0;
		update_rto(ch);
		if (ch->tx_una == ch->tx_next)
			ch->tlp_at = 0;
		/* Marks behind tx_una mean nothing more; left there, 2^31
		 * frames later the serial comparisons against them would flip:
		 * every frame in flight taken for a hole (highest_sacked), or no
		 * window decrease on loss (recover). */
		if (ch->have_sack && !rcpw_seq_lt(ch->tx_una, ch->highest_sacked))
			ch->have_sack = 0;
		if (rcpw_seq_lt(ch->recover, ch->tx_una))
			ch->recover = ch->tx_una;
	}
	return 0;
}

static void process_sack(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl,
                         uint64_t now)
{
	uint32_t words = h->len / 8;
	for (uint32_t w = 0; w < words; w++) {
		uint64_t bits;
		memcpy(&bits, pl + 8 * w, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		bits = __builtin_bswap64(bits);
#endif
		while (bits) {
			uint32_t i = (uint32_t)__builtin_ctzll(bits);
			uint32_t seq = h->ack + 1 + 64 * w + i;
			bits &= bits - 1;
			/* Distance from tx_una, not serial comparisons (see
			 * process_ack_fields). */
			if (seq - ch->tx_una >= ch->tx_next - ch->tx_una)
				continue;
			struct slot *s = slot_of(ch, seq);
			if (s->sacked)
				continue;
			s->sacked = 1;
			slot_acked(ch, s, now);
			if (!ch->have_sack || rcpw_seq_lt(ch->highest_sacked, seq))
				ch->highest_sacked = seq;
			ch->have_sack = 1;
		}
	}
}

/* Stores an out-of-order frame for later; returns 0 or -1 (no memory). */
static int ooo_store(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcpc_core *c = ch->core;
	size_t size = sizeof(struct ooo) + h->len;
	struct ooo *o;

	if (c->reorder_used + size > c->p.reorder_bytes)
		return -1;
	o = malloc(size);
	if (!o)
		return -1;
	o->hdr = *h;
	o->size = size;
	memcpy(o->payload, pl, h->len);
	ch->ooo[h->seq & (RXW - 1)] = o;
	c->reorder_used += size;
	return 0;
}

static void process_reliable(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl)
{
	rcpc_core *c = ch->core;
	uint32_t d = h->seq - ch->rx_next;

	ch->rx_taken = 1;
	if (rcpw_seq_lt(h->seq, ch->rx_next) || (d && rx_bit(ch, h->seq))) {
		c->st.dup_frames++;
		ch->ack_now = 1; /* our ack may have been lost */
		return;
	}
	if (d >= RXW) {
		bad(c); /* beyond any window we could have allowed */
		return;
	}
	if (d) {
		/* Out of order. */
		c->st.ooo_frames++;
		ch->ack_now = 1;
		if (h->type == RCPW_DATA && !(h->flags & RCPW_F_FIRST)) {
			if (data_place(ch, h, pl) == 0) {
				rx_set(ch, h->seq, 1);
				return;
			}
		}
		if (ooo_store(ch, h, pl) == 0)
			rx_set(ch, h->seq, 1);
		return;
	}
	if (h->flags & RCPW_F_ACKREQ)
		ch->ack_now = 1;
	process_inorder(ch, h, pl);
	ch->rx_next++;
	ch->since_ack++;
	/* Drain frames that were waiting for this one. */
	while (!ch->failed && rx_bit(ch, ch->rx_next)) {
		uint32_t i = ch->rx_next & (RXW - 1);
		struct ooo *o = ch->ooo[i];
		rx_set(ch, ch->rx_next, 0);
		if (o) {
			ch->ooo[i] = NULL;
			c->reorder_used -= o->size;
			if (o->hdr.flags & RCPW_F_ACKREQ)
				ch->ack_now = 1;
			process_inorder(ch, &o->hdr, o->payload);
			free(o);
		}
		ch->rx_next++;
		ch->since_ack++;
	}
	/* Ack every few frames so the sender's window and RTO timer keep
	 * moving on long streams; small exchanges piggyback instead. */
	if (ch->since_ack >= ACK_EVERY)
		ch->ack_now = 1;
	ch->ack_pending = 1;
}

/* ---- handshake (HANDSHAKE) ---------------------------------------------------- */

#define COOKIE_SLOT_SHIFT 33 /* time slots of 2^33 ns (8.6 s): a cookie lives 1-2 */
#define COOKIE_SRC_MAX    64 /* address blob bytes a cookie covers */

static inline uint64_t rotl64(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

/* SipHash-2-4 (Aumasson and Bernstein): a keyed MAC, fast on short input. */
static uint64_t siphash24(const uint64_t k[2], const unsigned char *m, size_t n)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ k[0], v1 = 0x646f72616e646f6dull ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ k[0], v3 = 0x7465646279746573ull ^ k[1];
	uint64_t b = (uint64_t)n << 56, w;
	size_t i;
#define SIPROUND                                                                                   \
	do {                                                                                       \
		v0 += v1, v1 = rotl64(v1, 13), v1 ^= v0, v0 = rotl64(v0, 32);                      \
		v2 += v3, v3 = rotl64(v3, 16), v3 ^= v2;                                           \
		v0 += v3, v3 = rotl64(v3, 21), v3 ^= v0;                                           \
		v2 += v1, v1 = rotl64(v1, 17), v1 ^= v2, v2 = rotl64(v2, 32);                      \
	} while (0)
	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, m + i, 8);
		v3 ^= w;
		SIPROUND;
		SIPROUND;
		v0 ^= w;
	}
	for (size_t j = 0; i + j < n; j++)
		b |= (uint64_t)m[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
#undef SIPROUND
	return v0 ^ v1 ^ v2 ^ v3;
}

/* CHANNELS: our epoch for a new conversation, distinct from the endpoint
 * epoch (which accepted channels and cookies use) and, but by a 2^-32
 * chance, from the conversations before: frames of an old conversation
 * then name an epoch the new one does not have, and are stale. */
static uint32_t conv_epoch(rcpc_core *c)
{
	unsigned char m[8];
	uint32_t n = ++c->convs, v;
	memcpy(m, &c->p.epoch, 4);
	memcpy(m + 4, &n, 4);
	v = (uint32_t)siphash24(c->p.cookie_key, m, 8);
	while (!v || v == c->p.epoch)
		v = v * 2654435761u + 1;
	return v;
}

/* A restart challenge for incarnation EPOCH of CH's peer: never 0, never
 * one before (a counter under the key), so an echo of an old challenge
 * proves nothing. */
static uint64_t chal_nonce(rcpc_core *c, rcp_chan *ch, uint32_t epoch)
{
	unsigned char m[12];
	uint32_t n = ++c->convs;
	uint64_t v;
	memcpy(m, &ch->my_epoch, 4);
	memcpy(m + 4, &epoch, 4);
	memcpy(m + 8, &n, 4);
	v = siphash24(c->p.cookie_key, m, 12);
	return v ? v : 1;
}

/* The cookie for a sender at address SRC with incarnation EPOCH in time
 * slot SLOT: a MAC under the endpoint's secret, so checking an echo needs
 * no state.  Never 0 (0 means "no cookie"). */
static uint64_t cookie_of(const rcpc_core *c, const void *src, size_t srclen, uint32_t epoch,
                          uint64_t slot)
{
	unsigned char m[16 + COOKIE_SRC_MAX];
	uint64_t v;
	memcpy(m, &slot, 8);
	memcpy(m + 8, &c->p.epoch, 4);
	memcpy(m + 12, &epoch, 4);
	memcpy(m + 16, src, srclen);
	v = siphash24(c->p.cookie_key, m, 16 + srclen);
	return v ? v : 1;
}

/* H (from an unknown sender at SRC) echoes a cookie we gave it in this
 * time slot or the one before: the sender receives at its address. */
static int cookie_echoed(const rcpc_core *c, const void *src, size_t srclen,
                         const struct rcpw_hdr *h, uint64_t now)
{
	uint64_t slot = now >> COOKIE_SLOT_SHIFT;
	if (h->type != RCPW_ACK || !h->arg || h->dst_epoch != c->p.epoch)
		return 0;
	return h->arg == cookie_of(c, src, srclen, h->src_epoch, slot) ||
	       h->arg == cookie_of(c, src, srclen, h->src_epoch, slot - 1);
}

/* Sends a challenge: a PING to incarnation DST_EPOCH carrying COOKIE
 * (nonzero), as a fresh channel of ours would send it.  To nic peer PEER,
 * or, if PEER < 0, to the address SRC without making a peer of it.  The
 * receiver echoes COOKIE in an ACK, which names our epoch: proof that it
 * receives at that address (a blind sender never sees our epoch). */
static void send_challenge(rcpc_core *c, int peer, const void *src, size_t srclen,
                           uint32_t src_epoch, uint32_t dst_epoch, uint64_t cookie)
{
	struct rcpw_hdr h;
	int rc;

	memset(&h, 0, sizeof h);
	h.magic = RCPW_MAGIC;
	h.version = RCPW_VERSION;
	h.type = RCPW_PING;
	h.flags = c->p.crc ? RCPW_F_CRC : 0;
	h.hlen = RCPW_HLEN;
	h.session = c->p.session;
	h.src_epoch = src_epoch;
	h.dst_epoch = dst_epoch;
	h.ack = 1;
	h.credits = c->p.credits;
	h.wnd = c->p.rx_frames;
	h.arg = cookie;
	hdr_seal(c, &h, NULL, 0);
	if (peer >= 0) {
		struct iovec iov = {&h, RCPW_HLEN};
		rc = c->io.send(c->io.ctx, peer, &iov, 1, 0);
	} else {
		rc = c->io.send_to(c->io.ctx, src, srclen, &h, RCPW_HLEN);
	}
	if (!rc) {
		c->st.frames_sent++;
		c->st.challenges_sent++;
	}
}

static int chan_open(rcpc_core *c, int peer, uint64_t now, int lazy, rcp_chan **out);

/* The user has CH now, or a reliable frame came on it: never reclaimed,
 * and it gets its send ring (an accepted channel has none before: a
 * half-open one sends nothing reliable, and thousands of rings cost
 * ~280 KB each on udp). */
static void chan_claim(rcp_chan *ch)
{
	if (!ch->accepted)
		return;
	ch->accepted = 0;
	ch->core->naccepted--;
	if (!ch->slots && !(ch->slots = calloc(ch->nslots, sizeof *ch->slots)))
		chan_fail(ch, RCP_ENOMEM);
}

/* Closes accepted channels that are still half-open (no reliable frame
 * either way, so neither side's sequence or message numbers moved and a
 * fresh channel continues them exactly) and idle for the peer timeout: an
 * address that once echoed a cookie holds no memory for good. */
static void chans_sweep(rcpc_core *c, uint64_t now)
{
	struct list *p, *t;
	c->sweep_at = now + (c->p.peer_timeout / 4 ? c->p.peer_timeout / 4 : 1);
	list_for_each_safe(p, t, &c->chans)
	{
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->accepted && !ch->user && chan_idle(ch) &&
		    now - ch->last_heard > c->p.peer_timeout) {
			c->st.chans_reclaimed++;
			rcpc_chan_close(ch, now);
		}
	}
}

/* The nic's peer table (or memory) is full: makes room by closing the
 * half-open accepted channel heard from longest ago, idle or not.  Senders
 * that echo cookies from many addresses they own then displace each other,
 * never a channel that carried a message.  Returns 1 if one was closed. */
static int chans_evict(rcpc_core *c, uint64_t now)
{
	struct list *p;
	rcp_chan *old = NULL;
	for (p = c->chans.next; p != &c->chans; p = p->next) {
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->accepted && !ch->user && (!old || ch->last_heard < old->last_heard))
			old = ch;
	}
	if (!old)
		return 0;
	c->st.chans_reclaimed++;
	rcpc_chan_close(old, now);
	return 1;
}

/* Resends at once every frame out on CH: the peer's challenge says it
 * dropped them (it had no channel, or took us for a stranger). */
static void chan_resend_all(rcp_chan *ch, uint64_t now)
{
	for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next); seq++) {
		struct slot *s = slot_of(ch, seq);
		if (!s->sacked && s->sent_at && slot_send(ch, s, now))
			break;
	}
}

void rcpc_input(rcpc_core *c, int peer, const void *src, size_t srclen, const void *frame,
                size_t len, uint64_t now)
{
	struct rcpw_hdr h;
	const unsigned char *pl;
	enum rcpw_verdict v;
	rcp_chan *ch;
	int announce = 0;

	c->st.frames_recv++;
	c->now = now;
	v = rcpw_parse(frame, len, c->p.session, c->p.crc, &h, &pl);
	if (v != RCPW_OK) {
		if (v == RCPW_BAD_SESSION)
			c->st.stale_frames++;
		else
			bad(c);
		return;
	}
	if (RCPI_UNLIKELY(!h.src_epoch)) {
		c->st.stale_frames++; /* every sender has an epoch */
		return;
	}
	ch = peer >= 0 && peer < c->npeers ? c->by_peer[peer] : NULL;
	if (!ch) {
		/* Unknown sender: servers take it as a new channel, once it
		 * echoes a cookie (HANDSHAKE). */
		int np = peer;
		if (!(c->p.flags & RCP_EP_ACCEPT) || (h.dst_epoch && h.dst_epoch != c->p.epoch)) {
			c->st.stale_frames++;
			return;
		}
		if (np < 0 && c->io.send_to &&
		    !(src && srclen <= COOKIE_SRC_MAX && cookie_echoed(c, src, srclen, &h, now))) {
			/* No state until the sender proves it receives at its
			 * address; a challenge is never answered with one. */
			if (src && srclen <= COOKIE_SRC_MAX && !(h.type == RCPW_PING && h.arg))
				send_challenge(c, -1, src, srclen, c->p.epoch, h.src_epoch,
				               cookie_of(c, src, srclen, h.src_epoch,
				                         now >> COOKIE_SLOT_SHIFT));
			c->st.stale_frames++;
			return;
		}
		if (c->naccepted && now >= c->sweep_at)
			chans_sweep(c, now);
		if (np < 0) {
			int rc = c->io.peer_add ? c->io.peer_add(c->io.ctx, src, srclen, &np)
			                        : RCP_EINVAL;
			/* A full peer table: a half-open channel makes room. */
			if (rc && c->io.peer_add && c->naccepted && chans_evict(c, now))
				rc = c->io.peer_add(c->io.ctx, src, srclen, &np);
			if (rc) {
				c->st.stale_frames++;
				return;
			}
		}
		if (chan_open(c, np, now, 1, &ch)) {
			c->st.stale_frames++;
			return;
		}
		ch->accepted = 1;
		if (!c->naccepted++)
			c->sweep_at = now + (c->p.peer_timeout / 4 ? c->p.peer_timeout / 4 : 1);
		c->st.chans_accepted++;
	}
	if (ch->failed == RCP_ECLOSED)
		return;
	if (h.dst_epoch && h.dst_epoch != ch->my_epoch) {
		/* Meant for an earlier incarnation of us or an earlier
		 * conversation of this channel (CHANNELS). */
		c->st.stale_frames++;
		return;
	}
	if (RCPI_UNLIKELY(h.src_epoch == ch->gone_epoch)) {
		/* A straggler of the incarnation this channel left: taking it
		 * for a restart would reset the channel under the new one. */
		c->st.stale_frames++;
		return;
	}
	if (h.src_epoch != ch->peer_epoch) {
		if (ch->peer_epoch) {
			if (!h.dst_epoch || h.type != RCPW_ACK || !ch->chal || h.arg != ch->chal ||
			    h.src_epoch != ch->chal_epoch) {
				/* A new incarnation or conversation of the peer:
				 * a claim, never a reset by itself (a blind one
				 * anyone can forge; one naming our epoch may be a
				 * straggler of a conversation before).  Challenge
				 * it; only the echo of this challenge, which names
				 * our epoch, proves it. */
				c->st.restart_claims++;
				if (!(h.type == RCPW_PING && h.arg)) {
					/* One nonce per claimed epoch: the echo of
					 * any challenge sent to it proves it. */
					if (!ch->chal || ch->chal_epoch != h.src_epoch)
						ch->chal = chal_nonce(c, ch, h.src_epoch);
					ch->chal_epoch = h.src_epoch;
					send_challenge(c, ch->peer, NULL, 0, ch->my_epoch, h.src_epoch,
					               ch->chal);
				}
				return;
			}
			/* The peer restarted (proven): what was pending with
			 * the old incarnation is lost.  If frames of ours went
			 * out blind (dst_epoch 0), the new incarnation could
			 * take (or have taken) them for this conversation's:
			 * start a new one, and say so at once (a PING with
			 * the new epoch: the peer challenges it and starts
			 * afresh too, or it would keep addressing the old). */
			announce = ch->sent_blind && !(h.flags & RCPW_F_FRESH);
			chan_reset(ch, RCP_EPEER);
			if (announce)
				ch->my_epoch = conv_epoch(c);
			ch->chal = 0;
			ch->restarts++;
			ch->gone_epoch = ch->peer_epoch;
		}
		ch->peer_epoch = h.src_epoch;
		ch->named = 0;
		ch->failed = 0;
		if (announce)
			send_ping(ch, now);
	}
	if (h.dst_epoch) {
		ch->named = 1;
	} else if (ch->named) {
		/* The peer has named us before: a blind frame of its epoch is
		 * a straggler sealed before it heard us (or, after a restart
		 * proven by a challenge, sealed for an earlier conversation
		 * of ours), never a frame of this one. */
		c->st.stale_frames++;
		return;
	}
	if (ch->failed)
		return;
	ch->last_heard = now;
	ch->unreachable = 0;
	chan_dirty(ch);
	if (process_ack_fields(ch, &h, now)) {
		bad(c); /* acks frames never sent: forged or broken */
		return;
	}
	switch (h.type) {
	case RCPW_ACK: process_sack(ch, &h, pl, now); break;
	case RCPW_PING:
		if (h.arg) {
			/* A challenge: echo it at once, then resend what the
			 * peer dropped while it did not know us. */
			ch->echo = h.arg;
			send_ack(ch, now);
			chan_resend_all(ch, now);
		} else {
			ch->ack_now = 1;
		}
		break;
	default:
		if (RCPI_UNLIKELY(ch->accepted))
			chan_claim(ch); /* a message may move: the user may get CH */
		if (!ch->failed)
			process_reliable(ch, &h, pl);
	}
}

/* ---- timers and flushing ----------------------------------------------------- */

static int take_completed(rcpc_core *c)
{
	int n = c->completed;
	c->completed = 0;
	return n;
}

static void chan_flush(rcp_chan *ch, uint64_t now)
{
	chan_pump(ch, now);
	if (ch->failed)
		return;
	if (ch->ack_now) {
		send_ack(ch, now);
		ch->ack_due = 0;
	} else if (ch->ack_pending && !ch->ack_due) {
		ch->ack_due = now + ch->core->p.ack_delay;
	}
}

int rcpc_flush(rcpc_core *c, uint64_t now)
{
	struct list todo;
	/* Take the list first: what chan_flush touches again (an ack the nic
	 * refused) waits for the next flush instead of looping here. */
	list_take(&todo, &c->dirty);
	while (!list_empty(&todo)) {
		rcp_chan *ch = container_of(todo.next, rcp_chan, dlink);
		list_del(&ch->dlink);
		chan_flush(ch, now);
	}
	if (c->io.flush)
		c->io.flush(c->io.ctx);
	return take_completed(c);
}

/* Frames taken in order since the last ack went, or an ack asked for. */
static int ack_owed(const rcp_chan *ch)
{
	return ch->acked_upto != ch->rx_next || ch->ack_pending;
}

int rcpc_timers(rcpc_core *c, uint64_t now)
{
	struct list *p, *t;

	c->retry = 0;   /* what is still refused below sets it again */
	c->soon_at = 0; /* chan_flush below arms what is left */
	if (c->naccepted && now >= c->sweep_at)
		chans_sweep(c, now);

	list_for_each_safe(p, t, &c->chans)
	{
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || chan_idle(ch))
			continue;
		/* Retransmission timeout on the oldest frame out. */
		if (ch->tx_una != ch->tx_next) {
			struct slot *s = slot_of(ch, ch->tx_una);
			uint64_t base = s->sent_at > ch->rto_base ? s->sent_at : ch->rto_base;
			if (s->sent_at && now >= base + ch->rto) {
				ch->core->st.timeouts++;
				ch->ssthresh =
				    ch->cwnd / 2 > 2 * CWND_ONE ? ch->cwnd / 2 : 2 * CWND_ONE;
				ch->cwnd = ch->ssthresh;
				ch->recover = ch->tx_next;
				for (uint32_t seq = ch->tx_una; rcpw_seq_lt(seq, ch->tx_next);
				     seq++) {
					struct slot *q = slot_of(ch, seq);
					if (!q->sacked && q->sent_at && now >= q->sent_at + ch->rto)
						if (slot_send(ch, q, now))
							break;
				}
				if (ch->backoff < 12)
					ch->backoff++;
				update_rto(ch);
			}
		}
		/* A hole's reordering window ran out: chan_flush below resends. */
		/* Tail-loss probe. */
		if (!ch->failed && ch->tlp_at && now >= ch->tlp_at && ch->tx_una != ch->tx_next) {
			uint32_t seq = ch->tx_next - 1;
			struct slot *q = slot_of(ch, seq);
			ch->tlp_at = 0;
			while (q->sacked && seq != ch->tx_una) {
				seq--;
				q = slot_of(ch, seq);
			}
			if (!q->sacked && q->sent_at) {
				ch->tlp_probes++; /* the re-arm in slot_send waits longer */
				slot_send(ch, q, now);
			}
		}
		/* Liveness. */
		if (!ch->failed && chan_has_work(ch)) {
			if (now > ch->last_heard + c->p.peer_timeout) {
				chan_fail(ch, RCP_EPEER);
				continue;
			}
			if (now > ch->last_heard + c->p.peer_timeout / 4 &&
			    now >= ch->last_ping + c->p.peer_timeout / 8)
				send_ping(ch, now);
		}
		if (ch->ack_due && now >= ch->ack_due) {
			ch->ack_due = 0;
			if (ack_owed(ch))
				ch->ack_now = 1;
		}
		list_del(&ch->dlink);
		chan_flush(ch, now);
	}
	if (c->io.flush)
		c->io.flush(c->io.ctx);
	return take_completed(c);
}

int rcpc_ack_owed(rcpc_core *c, uint64_t now)
{
	struct list *p;
	int sent = 0, cleared = 0;

	for (p = c->chans.next; p != &c->chans; p = p->next) {
		rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || !ch->ack_due)
			continue;
		ch->ack_due = 0;
		cleared = 1;
		if (ack_owed(ch)) {
			send_ack(ch, now);
			sent = 1;
		}
	}
	if (sent && c->io.flush)
		c->io.flush(c->io.ctx);
	return cleared;
}

uint64_t rcpc_deadline(const rcpc_core *c)
{
	uint64_t d = c->naccepted ? c->sweep_at : UINT64_MAX;
	const struct list *p;

	for (p = c->chans.next; p != &c->chans; p = p->next) {
		const rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || chan_idle(ch))
			continue;
		if (ch->tx_una != ch->tx_next) {
			const struct slot *s = &ch->slots[ch->tx_una & (ch->nslots - 1)];
			uint64_t base = s->sent_at > ch->rto_base ? s->sent_at : ch->rto_base;
			if (s->sent_at && base + ch->rto < d)
				d = base + ch->rto;
			if (!s->sent_at || ch->unsent)
				d = 0; /* frames the nic refused: retry soon */
		}
		if (ch->ack_due && ch->ack_due < d)
			d = ch->ack_due;
		if (ch->rack_at && ch->rack_at < d)
			d = ch->rack_at;
		if (ch->tlp_at && ch->tx_una != ch->tx_next && ch->tlp_at < d)
			d = ch->tlp_at;
		if (ch->ack_now)
			d = 0;
		if (chan_has_work(ch)) {
			uint64_t ping = ch->last_heard + c->p.peer_timeout / 4;
			if (ch->last_ping + c->p.peer_timeout / 8 > ping)
				ping = ch->last_ping + c->p.peer_timeout / 8;
			if (ping < d)
				d = ping;
			if (ch->last_heard + c->p.peer_timeout + 1 < d)
				d = ch->last_heard + c->p.peer_timeout + 1;
		}
	}
	return d;
}

uint64_t rcpc_deadline_soon(const rcpc_core *c, uint64_t now)
{
	uint64_t d = c->retry ? 0 : now + c->timer_floor;
	return c->soon_at && c->soon_at < d ? c->soon_at : d;
}

/* ---- the API --------------------------------------------------------------------- */

int rcpc_core_new(const struct rcpc_params *p, const struct rcpc_io *io, void *owner,
                  rcpc_core **out)
{
	rcpc_core *c;

	if (!p || !io || !io->send || !out || p->mtu <= RCPW_HLEN || !p->rx_frames || !p->epoch)
		return RCP_EINVAL;
	c = calloc(1, sizeof *c);
	if (!c)
		return RCP_ENOMEM;
	c->p = *p;
	if (c->p.inline_max > INLINE_CAP)
		c->p.inline_max = INLINE_CAP;
	c->io = *io;
	c->owner = owner;
	c->payload_max = p->mtu - RCPW_HLEN;
	c->timer_floor = TIMER_MIN_NS;
	if (c->p.ack_delay < c->timer_floor)
		c->timer_floor = c->p.ack_delay;
	if (c->p.rto_min < c->timer_floor)
		c->timer_floor = c->p.rto_min;
	if (c->p.peer_timeout / 8 < c->timer_floor)
		c->timer_floor = c->p.peer_timeout / 8;
	list_init(&c->chans);
	list_init(&c->dirty);
	c->cbtail = &c->cbq;
	list_init(&c->posted);
	list_init(&c->posted_any);
	list_init(&c->unexp);
	list_init(&c->free_unexp);
	{
		/* CREDITS: the grant fits both bounds, one frame buffer and
		 * one record per message; never below what senders assume. */
		size_t per = c->payload_max + sizeof(struct unexp);
		size_t n;
		if (!c->p.credits)
			c->p.credits = 64;
		if (!c->p.unexp_bytes)
			c->p.unexp_bytes = 4u << 20;
		n = c->p.unexp_bytes / per;
		if (n > c->p.credits)
			n = c->p.credits;
		if (n > CREDITS_CAP)
			n = CREDITS_CAP;
		c->credits_eff = n < CREDITS_INIT ? CREDITS_INIT : (uint32_t)n;
	}
	*out = c;
	return 0;
}

void *rcpc_core_owner(const rcpc_core *c)
{
	return c->owner;
}

void rcpc_core_stats(const rcpc_core *c, struct rcp_ep_stats *st)
{
	*st = c->st;
}

static void chan_free(rcp_chan *ch)
{
	rcpc_core *c = ch->core;
	if (ch->accepted) {
		ch->accepted = 0;
		c->naccepted--;
	}
	list_del(&ch->link);
	list_del(&ch->dlink);
	if (ch->peer >= 0 && ch->peer < c->npeers)
		c->by_peer[ch->peer] = NULL;
	free(ch->slots);
	free(ch->ctlq);
	free(ch);
}

void rcpc_core_shutdown(rcpc_core *c)
{
	struct list *p, *t;

	list_for_each_safe(p, t, &c->chans)
	{
		rcp_chan *ch = container_of(p, rcp_chan, link);
		chan_reset(ch, RCP_ECLOSED);
	}
	fail_list(&c->posted, RCP_ECLOSED);
}

void rcpc_core_free(rcpc_core *c)
{
	struct list *p, *t;

	if (!c)
		return;
	rcpc_core_shutdown(c);
	list_for_each_safe(p, t, &c->unexp)
	{
		struct unexp *u = container_of(p, struct unexp, link);
		free(u->data);
		free(u);
	}
	list_for_each_safe(p, t, &c->free_unexp)
	{
		free(container_of(p, struct unexp, link));
	}
	list_for_each_safe(p, t, &c->chans)
	{
		chan_free(container_of(p, rcp_chan, link));
	}
	for (int i = 0; i < c->nfree_bufs; i++)
		free(c->free_bufs[i]);
	free(c->free_bufs);
	for (int i = 0; i < c->nslabs; i++)
		free(c->req_slabs[i]);
	free(c->req_slabs);
	free(c->by_peer);
	free(c);
}

int rcpc_chan_open(rcpc_core *c, int peer, uint64_t now, rcp_chan **out)
{
	return chan_open(c, peer, now, 0, out);
}

/* LAZY: no send ring yet (an accepted channel: chan_claim makes it). */
static int chan_open(rcpc_core *c, int peer, uint64_t now, int lazy, rcp_chan **out)
{
	rcp_chan *ch;
	uint32_t n = 1;

	if (peer < 0)
		return RCP_EINVAL;
	if (peer < c->npeers && c->by_peer[peer]) {
		*out = c->by_peer[peer];
		chan_claim(*out); /* connected to by the user */
		return 0;
	}
	if (rcpi_grow_zeroed((void **)&c->by_peer, &c->npeers, sizeof *c->by_peer, peer))
		return RCP_ENOMEM;
	ch = calloc(1, sizeof *ch);
	if (!ch)
		return RCP_ENOMEM;
	while (n < c->p.rx_frames && n < TXW_MAX)
		n *= 2;
	if (n < 8)
		n = 8;
	ch->nslots = n;
	ch->slots = lazy ? NULL : calloc(n, sizeof *ch->slots);
	if (!lazy && !ch->slots) {
		free(ch);
		return RCP_ENOMEM;
	}
	ch->core = c;
	ch->peer = peer;
	list_init(&ch->dlink);
	list_init(&ch->posted);
	list_init(&ch->startq);
	list_init(&ch->streamq);
	list_init(&ch->busyq);
	list_init(&ch->rndv);
	ch->peer_wnd = c->p.rx_frames; /* until the peer says otherwise */
	ch->cwnd = 32 * CWND_ONE;
	ch->ssthresh = UINT32_MAX;
	ch->rto = c->p.rto_init;
	ch->last_heard = now;
	chan_reset(ch, RCP_EPEER); /* sets sequence numbers, credits */
	/* An accepted channel answers with the epoch its cookie named; one
	 * the user opens may follow an earlier conversation with this peer
	 * (closed, reopened): a new epoch (CHANNELS). */
	ch->my_epoch = lazy ? c->p.epoch : conv_epoch(c);
	list_add_tail(&c->chans, &ch->link);
	c->by_peer[peer] = ch;
	*out = ch;
	return 0;
}

void rcp_chan_set_user(rcp_chan *ch, void *user)
{
	if (ch)
		ch->user = user;
}

void *rcp_chan_get_user(const rcp_chan *ch)
{
	return ch ? ch->user : NULL;
}

rcp_chan *rcpc_chan_by_peer(rcpc_core *c, int peer)
{
	rcp_chan *ch = peer >= 0 && peer < c->npeers ? c->by_peer[peer] : NULL;
	if (ch)
		chan_claim(ch); /* the caller holds it now: never reclaimed */
	return ch;
}

rcpc_core *rcpc_chan_core(const rcp_chan *ch)
{
	return ch->core;
}

int rcpc_chan_peer(const rcp_chan *ch)
{
	return ch->peer;
}

unsigned rcpc_chan_restarts(const rcp_chan *ch)
{
	return ch->restarts;
}

uint32_t rcpc_chan_peer_epoch(const rcp_chan *ch)
{
	return ch->peer_epoch;
}

void rcpc_chan_ban_epoch(rcp_chan *ch, uint32_t epoch)
{
	ch->gone_epoch = epoch;
}

void rcpc_chan_close(rcp_chan *ch, uint64_t now)
{
	rcpc_core *c = ch->core;
	struct list *p, *t;
	int peer = ch->peer;

	(void)now;
	chan_reset(ch, RCP_ECLOSED);
	list_for_each_safe(p, t, &c->unexp)
	{
		struct unexp *u = container_of(p, struct unexp, link);
		if (u->ch == ch) {
			unexp_release(c, u);
			if (u->data)
				buf_put(c, u->data);
			unexp_put(c, u);
		}
	}
	chan_free(ch);
	if (c->io.peer_remove)
		c->io.peer_remove(c->io.ctx, peer);
}

static int isend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, int sync, uint64_t now,
                 rcp_req **req)
{
	rcpc_core *c;
	rcp_req *r;

	if (!ch || !req || tag == RCP_ANY_TAG || (!buf && len))
		return RCP_EINVAL;
	if (ch->failed)
		return ch->failed;
	c = ch->core;
	r = req_alloc(c);
	if (!r)
		return RCP_ENOMEM;
	chan_touch(ch, now);
	r->kind = REQ_SEND;
	r->chan = ch;
	r->tag = tag;
	r->buf = (unsigned char *)(uintptr_t)buf;
	r->len = r->total = len;
	r->msg = ch->tx_msg_next++;
	r->state = S_QUEUED;
	r->sync = (uint8_t)sync;
	*req = r;
	/* Start at once if the window allows: latency matters more than
	 * batching for a lone message.  Nothing queued ahead of it (resends,
	 * control frames, earlier starts) and room in the window: straight to
	 * send_start, not round chan_pump (a small message's common case). */
	if (!chan_resend_due(ch) && !ch->ctl_count && list_empty(&ch->startq) &&
	    ch->tx_next - ch->tx_una < window(ch) && send_can_start(ch, r)) {
		/* A message streamed on a READY has only its first frame out:
		 * the pump sends the rest now, as far as the window allows,
		 * not when the first ack comes back. */
		if (!send_start(ch, r, now) && r->state == S_STREAM)
			chan_pump(ch, now);
	} else {
		list_add_tail(&ch->startq, &r->link);
		chan_dirty(ch);
		chan_pump(ch, now);
	}
	if (c->io.flush)
		c->io.flush(c->io.ctx);
	return 0;
}

int rcpc_isend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now, rcp_req **req)
{
	return isend(ch, tag, buf, len, 0, now, req);
}

int rcpc_issend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now,
                rcp_req **req)
{
	return isend(ch, tag, buf, len, 1, now, req);
}

int rcpc_irecv(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len, uint64_t now,
               rcp_req **req)
{
	struct list *p;
	rcp_req *r;

	if (!c || !req || (!buf && len) || (ch && ch->core != c))
		return RCP_EINVAL;
	if (ch && ch->failed)
		return ch->failed;
	c->now = now;
	r = req_alloc(c);
	if (!r)
		return RCP_ENOMEM;
	r->kind = REQ_RECV;
	r->chan = ch;
	r->tag = tag;
	r->buf = buf;
	r->len = len;
	*req = r;
	/* Unexpected messages first, in arrival order. */
	for (p = c->unexp.next; p != &c->unexp; p = p->next) {
		struct unexp *u = container_of(p, struct unexp, link);
		if ((ch && u->ch != ch) || !tag_match(tag, u->tag))
			continue;
		if (unexp_release(c, u))
			credit_return(u->ch);
		r->src = u->ch;
		r->msg = u->msg;
		r->tag = u->tag;
		r->total = u->total;
		if (!u->is_rts) {
			if (u->total)
				memcpy(r->buf, u->data, u->total < len ? u->total : len);
			if (u->data)
				buf_put(c, u->data);
			complete(r, u->total > len ? RCP_ETRUNC : 0);
			unexp_put(c, u);
			return 0;
		}
		chan_touch(u->ch, now);
		/* A matched RTS: r is not posted; rts_matched expects it
		 * "unposted" — keep the bookkeeping consistent. */
		r->chan = NULL;
		list_init(&r->link);
		{
			rcp_chan *src = u->ch;
			int rma = u->rma;
			uint32_t msg = u->msg;
			uint64_t t = u->tag;
			size_t total = u->total;
			unsigned char rkey[RKEY_MAX];
			uint32_t rkl = u->rkeylen;
			memcpy(rkey, u->rkey, rkl);
			unexp_put(c, u);
			r->state = R_POSTED;
			rts_matched(src, r, msg, t, total, rma, rkey, rkl);
			r->chan = ch;
			chan_pump(src, now);
			if (c->io.flush)
				c->io.flush(c->io.ctx);
		}
		return 0;
	}
	if (ch)
		chan_touch(ch, now);
	r->state = R_POSTED;
	list_add_tail(&c->posted, &r->link);
	r->pseq = ++c->post_seq;
	list_add_tail(ch ? &ch->posted : &c->posted_any, &r->clink);
	if (ch) {
		ch->posted_specific++;
		/* Only a receive larger than a frame can be promised by READY;
		 * skip the scan for the common small one. */
		if (len > c->payload_max || ch->posted_specific > 1)
			try_ready(ch);
		/* Waiting behind messages it holds (DEMAND). */
		if (ch->unexp_count && r->state == R_POSTED)
			credit_demand(ch);
		if (ch->ctl_count) {
			chan_pump(ch, now);
			if (c->io.flush)
				c->io.flush(c->io.ctx);
		}
	} else if (c->st.unexp_count) {
		/* Any channel may hold what keeps the awaited message back. */
		for (p = c->unexp.next; p != &c->unexp; p = p->next)
			credit_demand(container_of(p, struct unexp, link)->ch);
	}
	return 0;
}

int rcpc_mcast(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t len, uint64_t now,
               rcp_req **req)
{
	rcpc_core *c;
	rcp_req *pa;

	if (!chans || n <= 0 || !req || tag == RCP_ANY_TAG || (!buf && len))
		return RCP_EINVAL;
	for (int i = 0; i < n; i++)
		if (!chans[i] || chans[i]->core != chans[0]->core)
			return RCP_EINVAL;
	c = chans[0]->core;
	pa = req_alloc(c);
	if (!pa)
		return RCP_ENOMEM;
	pa->kind = REQ_MCAST;
	pa->tag = tag;
	pa->total = len;
	pa->children = n + 1; /* +1 holds completion until all are issued */
	pa->state = S_QUEUED;
	for (int i = 0; i < n; i++) {
		rcp_req *k;
		int rc = rcpc_isend(chans[i], tag, buf, len, now, &k);
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
			req_free(k);
			pa->children--;
			continue;
		}
		k->parent = pa;
		k->internal = 1;
	}
	if (--pa->children == 0) {
		int e = pa->error;
		pa->error = 0;
		complete(pa, e);
	}
	*req = pa;
	return 0;
}

static void req_status(const rcp_req *r, struct rcp_status *st)
{
	st->error = r->error;
	st->chan = r->kind == REQ_RECV ? r->src : r->chan;
	st->tag = r->tag;
	st->len = r->total;
}

int rcpc_req_done(rcp_req *r, struct rcp_status *st)
{
	if (r->state != Q_DONE || r->cb)
		return 0; /* with a callback: the library's, released after it */
	if (st)
		req_status(r, st);
	req_free(r);
	return 1;
}

/* CALLBACKS.  A request with a callback goes, when complete() finishes
 * it, on the core's completion list: intrusive (cb_next), in completion
 * order, no allocation.  The core never runs a callback (it stays pure);
 * the endpoint takes the whole list after the core's work and runs it
 * outside (rcp/endpoint.c, run_callbacks), then releases each request. */
void rcpc_req_set_cb(rcp_req *r, rcp_req_cb cb, void *user)
{
	rcpc_core *c = r->core;
	if (r->state == Q_DONE && !r->cb) {
		/* Finished before it had a callback: queue it now. */
		r->cb_next = NULL;
		*c->cbtail = r;
		c->cbtail = &r->cb_next;
	}
	r->cb = cb;
	r->cb_user = user;
}

rcp_req *rcpc_cb_take(rcpc_core *c)
{
	rcp_req *l = c->cbq;
	c->cbq = NULL;
	c->cbtail = &c->cbq;
	return l;
}

rcp_req *const *rcpc_cb_head(const rcpc_core *c)
{
	return &c->cbq;
}

rcp_req *rcpc_req_cb_get(const rcp_req *r, rcp_req_cb *cb, void **user, struct rcp_status *st)
{
	*cb = r->cb;
	*user = r->cb_user;
	req_status(r, st);
	return r->cb_next;
}

void rcpc_req_release(rcp_req *r)
{
	req_free(r);
}

int rcpc_req_has_cb(const rcp_req *r)
{
	return r->cb != NULL;
}

rcpc_core *rcpc_req_core(const rcp_req *r)
{
	return r->core;
}

int rcpc_cancel(rcp_req *r, uint64_t now)
{
	(void)now;
	if (r->state == Q_DONE)
		return 0;
	if (r->kind == REQ_SEND && r->state == S_QUEUED && !r->parent) {
		list_del(&r->link);
		/* Ids are assigned at isend and the peer expects them without
		 * gaps: renumber the unsent messages queued behind it. */
		{
			rcp_chan *ch = r->chan;
			struct list *p;
			for (p = ch->startq.next; p != &ch->startq; p = p->next) {
				rcp_req *q = container_of(p, rcp_req, link);
				if (rcpw_seq_lt(r->msg, q->msg))
					q->msg--;
			}
			ch->tx_msg_next--;
		}
		complete(r, RCP_ECANCELED);
		return 0;
	}
	if (r->kind == REQ_RECV && r->state == R_POSTED) {
		recv_unpost(r);
		complete(r, RCP_ECANCELED);
		return 0;
	}
	return RCP_EBUSY;
}

int rcpc_probe(rcpc_core *c, rcp_chan *ch, uint64_t tag, struct rcp_status *st)
{
	struct list *p;
	for (p = c->unexp.next; p != &c->unexp; p = p->next) {
		struct unexp *u = container_of(p, struct unexp, link);
		if ((ch && u->ch != ch) || !tag_match(tag, u->tag))
			continue;
		if (st) {
			st->error = 0;
			st->chan = u->ch;
			st->tag = u->tag;
			st->len = u->total;
		}
		return 1;
	}
	return 0;
}

static int list_len(const struct list *l)
{
	int n = 0;
	for (const struct list *p = l->next; p != l; p = p->next)
		n++;
	return n;
}

int rcpc_chan_debug(const rcp_chan *ch, char *buf, size_t len)
{
	const rcpc_core *c = ch->core;
	return snprintf(
	    buf, len,
	    "peer %d failed %d tx una %u next %u cwnd %u/%u peer_wnd %u rto %llu "
	    "backoff %d unsent %u sack %d/%u | msgs next %u start %u | startq %d "
	    "streamq %d busyq %d ctl %u ready %d(%u) | rx next %u gaps %u msg %u "
	    "rndv %d reserved %d posted %d unexp %d credits %u/%u given %u",
	    ch->peer, ch->failed, ch->tx_una, ch->tx_next, ch->cwnd / CWND_ONE, window(ch),
	    ch->peer_wnd, (unsigned long long)ch->rto, ch->backoff, ch->unsent, ch->have_sack,
	    ch->highest_sacked, ch->tx_msg_next, ch->tx_msg_start, list_len(&ch->startq),
	    list_len(&ch->streamq), list_len(&ch->busyq), ch->ctl_count, ch->ready_valid,
	    ch->ready.msg, ch->rx_next, ch->rx_gaps, ch->rx_msg_next, list_len(&ch->rndv),
	    ch->reserved ? (int)ch->reserved->msg : -1, list_len(&c->posted), list_len(&c->unexp),
	    ch->credits_used, ch->credits_granted, ch->credits_given);
}

int rcpc_core_busy(const rcpc_core *c)
{
	const struct list *p;
	for (p = c->chans.next; p != &c->chans; p = p->next) {
		const rcp_chan *ch = container_of(p, rcp_chan, link);
		if (ch->failed || ch->unreachable)
			continue;
		if (ch->tx_una != ch->tx_next || !list_empty(&ch->startq) ||
		    !list_empty(&ch->streamq) || !list_empty(&ch->busyq) || ch->ctl_count ||
		    ch->ack_pending || ch->ack_now)
			return 1;
	}
	return 0;
}

/* CLOSE.  A receiver that closes as soon as it has what it waited for
 * leaves the sender without its last ack if that ack was lost: the
 * sender resends into silence and its send fails with RCP_EPEER although
 * the message arrived (issue 18).  As TCP's TIME_WAIT, closing keeps
 * answering (duplicates are re-acked at once) until the peer has been
 * quiet for time_wait: a sender still missing our ack resends within its
 * RTO, which doubles per expiry from rto_min, so 50 ms covers about seven
 * losses in a row at LAN round trips.  Not on a nic that loses nothing
 * (time_wait 0), nor to a peer the nic refuses (gone: an ack owed to it
 * can never go, and waiting for it held every close for the whole
 * linger).  The endpoint bounds the linger (RCP_LINGER_MS, never past
 * the peer timeout). */
int rcpc_core_linger(const rcpc_core *c, uint64_t now)
{
	const struct list *p;
	for (p = c->chans.next; p != &c->chans; p = p->next) {
		const rcp_chan *ch = container_of(p, rcp_chan, link);
		/* The nic refuses frames to a peer that is gone (shm: its
		 * segment): acks owed to it and TIME_WAIT are moot. */
		int gone = ch->nic_err && ch->nic_err != RCP_EAGAIN;
		if (ch->failed)
			continue;
		if (ch->tx_una != ch->tx_next || !list_empty(&ch->startq) ||
		    !list_empty(&ch->streamq) || !list_empty(&ch->busyq) || ch->ctl_count)
			return 1;
		if (!gone && (ch->ack_pending || ch->ack_now ||
		              (ch->rx_next != 1 && now < ch->last_heard + c->p.time_wait)))
			return 1;
	}
	return 0;
}

void rcpc_chan_window_stats(const rcp_chan *ch, uint32_t *max_inflight, uint32_t *peer_wnd)
{
	*max_inflight = ch->max_inflight;
	*peer_wnd = ch->peer_wnd;
}
