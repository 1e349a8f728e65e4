/*
 * rcp/chan.h — what the files of the protocol core share: the channel,
 * request and core structures, the helpers every layer uses, and the
 * internal (rcpi_) functions each file offers to the files above it.
 * Private to rcp/: nothing here is exported (include/rcp/ has the API,
 * rcp/core.h the core's entry points).  The files and their layering are
 * described in rcp/core.c (LAYERS) and docs/core.md.  A design section
 * named in capitals, as (CREDITS), is the head comment of the file that
 * holds it: CHANNELS chan.c, HANDSHAKE handshake.c, RELIABILITY and WINDOW
 * send.c, RECEIVING recv.c, MESSAGES, CREDITS and DEMAND msg.c, TIMERS
 * timers.c, EXPRESS express.c, COMPLETION req.c, RMA EVENTS rmaq.c,
 * TRANSFERS DONE rma.c, FLUSH, CLOSE and LAYERS core.c.
 *
 * INVARIANTS.  tx_una <= tx_next <= tx_una + nslots; slot(s) in use iff
 * tx_una <= s < tx_next; a send request completes only when no slot
 * points at it; rx_next - 1 is the last frame processed in order; bits are
 * set only for rx_next < s < rx_next + RXW; every request completes exactly
 * once (rcpi_complete() asserts it).
 */
#ifndef RCP_CHAN_H
#define RCP_CHAN_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/core.h"
#include "rcp/heap.h"
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

#define COOKIE_SLOT_SHIFT 33 /* time slots of 2^33 ns (8.6 s): a cookie lives 1-2 */
#define COOKIE_SRC_MAX    64 /* address blob bytes a cookie covers */

/* A small helper on the path of every small message, which gcc's -O2
 * heuristics left a call (perf/callgrind.sh: the call, its saves and
 * restores cost more than the body). */
#define RCPI_HOT_INLINE inline __attribute__((always_inline))
/* The rcpi_ functions on that path (slot_new, slot_send, xmit, complete,
 * req_alloc, process_reliable, chan_flush, admit, rcpw_parse, ...) are
 * defined `inline`: still external definitions (this header declares them
 * without it, C11 6.7.4), but gcc -O2 then inlines them across files
 * under LTO up to its limit for functions declared inline, not only up
 * to the ~15 instructions it allows others: -100 instructions per 8 B
 * round trip for 2.4 KB of code.  rcpi_slot_new and rcpi_slot_send, above
 * that limit, are RCPI_HOT_INLINE (LTO inlines them across files too):
 * -130 for 7.6 KB. */

/* ---- lists ---- */

struct list {
	struct list *next, *prev;
};

static inline void list_init(struct list *l)
{
	l->next = l->prev = l;
}
static inline int list_empty(const struct list *l)
{
	return l->next == l;
}
static inline void list_add_tail(struct list *l, struct list *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}
static inline void list_del(struct list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
/* Moves every node of FROM to the empty list TO; FROM is left empty. */
static inline void list_take(struct list *to, struct list *from)
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

/* ---- structures ---- */

enum req_kind { REQ_SEND = 1, REQ_RECV, REQ_MCAST, REQ_WATCH };

enum req_state {
	/* send */
	S_QUEUED = 1, /* in startq: first frame not yet sent */
	S_RTS,        /* RTS out, waiting for READY or FIN (busyq) */
	S_STREAM,     /* streaming DATA (streamq while bytes are left) */
	S_WAITACK,    /* all frames out, waiting for acks (busyq) */
	S_RMA,        /* put into a READY promise asked for, FIN FIRST not out (busyq; rma.c) */
	/* recv */
	R_POSTED, /* in ch->posted (or ch->direct) or core->posted_any */
	R_READY,  /* in ch->posted and ch->reserved: READY sent */
	R_FILL,   /* matched to a message, bytes arriving (ch->rndv) */
	R_RMA,    /* matched, its bytes move by RMA: our get, a split's halves (ch->rndv) */
	/* all */
	Q_DONE,
};

struct rcp_req {
	struct list link;
	rcpc_core *core;
	rcp_chan *chan; /* NULL: any channel (recv) */
	uint8_t kind, state, internal, reserved_rma;
	uint8_t sync;    /* send: complete on ack only (rcpc_issend) */
	uint8_t own_buf; /* send: buf is the library's copy, freed with the request */
	uint8_t rma;     /* RMA_BUSY, RMA_PEER (rmaq.c, RMA EVENTS) */
	uint8_t sent;    /* lives on core->free_sent (isend.c, SENT REQUESTS) */
	int error;       /* done: its status; before, the first error of its RMA transfer */
	uint64_t tag;
	unsigned char *buf; /* send: const in spirit */
	size_t len;         /* buffer length */
	size_t total;       /* message length */
	size_t next_off;    /* send: next byte to frame */
	size_t got;         /* recv: bytes accounted (streamed or eager data only) */
	uint32_t msg;
	uint32_t frames_out; /* send: slots still pointing at this request */
	void *mr;            /* RMA registration of buf */
	rcp_req *parent;     /* mcast child -> parent */
	int children;        /* mcast: children not yet done */
	rcp_chan *src;       /* recv: channel the message came from */
	rcp_req *pool_next;
	rcp_req_cb cb; /* set: completion goes on core->cbq (req.c, CALLBACKS) */
	void *cb_user;
	rcp_req *cb_next;  /* core->cbq */
	struct list clink; /* posted recv: chan->posted, core->posted_any, or none (direct) */
	uint64_t pseq;     /* posted recv: posting order across both */
	/* gather send (rcp_isendv; start.c, GATHER SENDS): its segments, none
	 * empty (a copy, own_buf set), else NULL; gv_i the one holding byte
	 * gv_base + 0 .. of the message where the last frame was cut */
	struct rcp_iov *gv;
	uint32_t gv_cnt, gv_i;
	size_t gv_base;
};

/* SLOT STORAGE.  A slot is taken per frame, round robin by sequence
 * number (slot_of), and a small message's bytes are copied into it.
 * Until session 21 each slot held INLINE_CAP bytes in itself, ~2.1 KiB a
 * slot: an 8 B ping-pong then wrote a new 2.1 KiB stride each message,
 * 128 slots (xdp's window of 80) cycling 273 KiB and ~67 pages per end,
 * and that footprint showed in the kernel's path on the same CPU (the
 * xdp kick, docs/nic.md).  Now a payload of up to SLOT_SMALL bytes lives
 * in the slot (192 B a slot, the ring 24 KiB) and a bigger one in the
 * slot's own INLINE_CAP bytes of ch->inl, touched only when used.  Not a
 * LIFO free list of hot buffers: a backend may keep pointers into a
 * frame sent with RCP_NIC_MORE until its flush (the udp nic does), and an
 * ack processed in that burst would free the slot and a new send reuse
 * the buffer before the batched resend went out; round robin by sequence
 * number keeps a freed slot's bytes intact for nslots more frames. */
#define SLOT_SMALL 80u

struct slot {
	struct rcpw_hdr hdr; /* wire order, as sent (CRC included) */
	rcp_req *req;        /* DATA frames of a non-inline send */
	uint64_t sent_at;    /* 0: never went out (nic said EAGAIN) */
	uint32_t seq;
	uint32_t plen;                /* payload bytes */
	const unsigned char *payload; /* user buffer, inl or own */
	unsigned char *own;           /* pool buffer holding a copied send */
	uint8_t in_use, sacked, nsent;
	uint8_t ackreq;                /* flagged ACKREQ: the peer acks it at once */
	uint8_t hlen;                  /* header bytes sent: RCPW_HLEN, or RCPW_CHLEN (compact) */
	unsigned char sml[SLOT_SMALL]; /* a copied payload of up to SLOT_SMALL bytes */
};
_Static_assert(sizeof(struct slot) <= 192, "a slot stays three cache lines (SLOT STORAGE)");

struct ctl {
	uint8_t type;
	uint16_t flags;
	uint32_t msg;
	uint64_t tag, arg;
	uint8_t rkeylen;
	unsigned char rkey[RKEY_MAX];
};

/* An RMA transfer the core asked for (rmaq.c, RMA EVENTS). */
struct rma_op {
	struct list link;  /* rmaq.queue (asked), .held (taken by the glue) or .free */
	uint32_t idx, gen; /* its token is idx | gen << 32; gen moves on when it is freed */
	uint8_t state;     /* OP_FREE, OP_QUEUED, OP_HELD */
	uint8_t kind;      /* RMA_READY_PUT ...: what its completion does (rma.c) */
	uint16_t fin;      /* flags of the FIN it ends with */
	int err;           /* ch gone: the error its request completes with */
	rcp_req *r;
	rcp_chan *ch; /* NULL once the channel failed or closed with the op held */
	struct rcpc_rma ev;
};

/* The core's RMA transfers (rmaq.c).  Zeroed until the first is asked for. */
struct rmaq {
	struct rma_op **tab; /* by token index */
	uint32_t n, cap;     /* ops allocated, room in tab */
	unsigned queued;     /* in queue: what rcpc_rma_queued points at */
	struct list queue, held, free;
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
	struct list link;        /* core->chans */
	struct list dlink;       /* core->dirty while on it, else empty */
	struct list tlink;       /* core->retime while on it, else empty (TIMERS) */
	struct rcpi_tnode tnode; /* in core->theap while a timer is armed */
	uint64_t ord;            /* order of opening: rcpc_timers serves in it */
	uint8_t tdue;            /* on rcpc_timers' list of channels to serve */
	rcpc_core *core;
	int peer;
	void *user;
	uint32_t peer_epoch;
	unsigned restarts;   /* new peer incarnations seen (rcp_chan_restarts) */
	rcp_req *watch;      /* rcp_chan_watch's: the next rcpi_chan_reset completes it */
	uint32_t gone_epoch; /* the incarnation before: its stragglers are stale */
	uint32_t my_epoch;   /* our epoch on this channel: of this conversation (CHANNELS) */
	int sent_blind;      /* a frame of this conversation went out with dst_epoch 0 */
	int rx_taken;        /* a reliable frame was taken since the last reset */
	int named;     /* peer_epoch has named one of our epochs: its blind frames are stale */
	uint64_t chal; /* our last restart challenge: only its echo proves one */
	uint32_t chal_epoch; /* the incarnation it went to */
	int failed;          /* error every new operation gets, or 0 */
	struct list posted;  /* receives posted for this channel (rcpc_core.posted_any) */
	/* The DIRECT receive: a receive of one frame or less posted for this
	 * channel when no other receive could take its messages (none posted
	 * for it, none for any channel with its tag: core.c any_could_take),
	 * kept here instead of in `posted`:
	 * the common "one receive for the next message" is matched without a
	 * list (msg.c match_posted).  It is the earliest posted receive that
	 * could take this channel's next message; never promised by READY. */
	rcp_req *direct;
	/* The NEXT receive (rcpc_irecv_next): posted for this channel's next
	 * message only; a message start held unexpected on the channel while
	 * it is posted (another tag came first) completes it with RCP_ENOENT
	 * (msg.c, rcpi_next_miss).  At most one, of one frame or less: never
	 * promised by READY. */
	rcp_req *next_rx;
	int accepted;    /* made for an unknown sender, unseen by the user (HANDSHAKE) */
	uint64_t echo;   /* the peer's last challenge: our ACKs echo it (HANDSHAKE) */
	int unreachable; /* ICMP says so, and nothing heard since: close won't linger */

	/* send side */
	uint32_t tx_next, tx_una, nslots;
	struct slot *slots;
	unsigned char *inl; /* nslots x INLINE_CAP: copied payloads over SLOT_SMALL */
	uint32_t cwnd, ssthresh, peer_wnd, recover, highest_sacked, unsent, max_inflight;
	uint32_t sacked_out; /* frames in [tx_una, tx_next) selectively acked (window) */
	int have_sack;
	uint64_t srtt, rttvar, rto;
	uint64_t min_rtt;             /* least RTT sample (0: none yet): RACK's reordering window */
	uint64_t rack_xmit, rack_rtt; /* newest frame delivered: when sent, its RTT (RACK) */
	uint64_t rto_base;            /* last time the cumulative ack advanced */
	uint64_t rack_at;             /* when a hole below the highest sack turns lost */
	uint64_t tlp_at;              /* tail-loss probe due (0: none armed) */
	int tlp_probes;   /* probes since the last new frame: each waits twice as long */
	int wnd_told;     /* a full header (it carries wnd) was acked: compact ones may go */
	uint64_t last_tx; /* last time a new reliable frame went out */
	int backoff;
	uint32_t tx_msg_next;  /* next message id to assign */
	uint32_t tx_msg_start; /* next message id whose first frame goes out */
	struct list startq, streamq, busyq;
	rcp_req *rma_start; /* a send put into a READY promise: later starts wait for it (rma.c) */
	uint32_t rma_fallbacks; /* messages that fell back to frames (rma.c, FALLBACK) */
	uint8_t rma_off;        /* RMA_FALLBACK_MAX of them: no more RMA on this channel */
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
	uint8_t unplain;          /* a part of the express word may be set (PLAIN) */
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
	uint32_t small_max;   /* min(inline_max, payload_max): SMALL SENDS (isend.c) */
	struct list chans;
	struct list dirty; /* channels rcpi_chan_flush() must look at (FLUSH) */
	/* Posted receives (R_POSTED / R_READY) are by channel (rcp_chan.direct
	 * and .posted) or for any channel (here), with a posting number:
	 * matching a message looks at two list heads, never past the receives
	 * other channels wait on. */
	struct list posted_any;
	uint64_t post_seq;
	struct list unexp; /* unexpected messages, in arrival order */
	rcp_chan **by_peer;
	int npeers;
	rcp_req *free_reqs;
	rcp_req *free_sent;     /* finished small sends' requests (isend.c, SENT REQUESTS) */
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
	int crowded; /* the CPU is crowded (rcpc_set_crowded): RMA from RMA_MIN_CROWDED */
	rcp_req *cbq, **cbtail; /* finished requests with a callback (req.c, CALLBACKS) */
	struct list retime;     /* channels whose timer key may be stale (TIMERS) */
	struct rcpi_heap theap; /* channels by earliest deadline (TIMERS) */
	rcp_chan **tdue;        /* rcpc_timers' channels to serve (room for all) */
	int tdue_cap;
	int nchans;
	uint64_t chan_ord; /* channels opened: rcp_chan.ord */
	uint64_t now;      /* of the entry point running (for deep callees) */
	/* The next slot_send rings the nic at once (no RCP_NIC_MORE): set by
	 * isend around the start of a one-frame message, whose frame is
	 * the only one it sends; the flush after it then has nothing to do
	 * (a lone small send skips the nic's batch bookkeeping). */
	uint8_t xmit_now;
	uint8_t batched;   /* a frame went with RCP_NIC_MORE since the last core_push */
	int naccepted;     /* channels with ch->accepted set */
	uint64_t sweep_at; /* next look for half-open channels to reclaim */
	uint32_t convs;    /* conversations begun: conv_epoch's counter */
	/* A conversation of this endpoint ended with a peer no longer told
	 * apart (a nic without cookie challenges, or more than ENDED_MAX
	 * peers kept): from then on every channel the user opens takes a
	 * conversation epoch (CHANNELS, chan.c rcpi_conv_end). */
	uint8_t conv_ended;
	/* By nic peer index: a conversation with that peer ended (closed,
	 * failed, restarted), so a channel the user opens to it takes a
	 * conversation epoch; such a peer is kept in the nic's table (not
	 * peer_remove'd), so its index keeps naming its address. */
	uint8_t *ended;
	int nended;    /* entries of ended[] */
	int nretained; /* peers with ended[] set, <= ENDED_MAX */
	struct rcp_ep_stats st;
	int demand_warned; /* credit_demand's warning was given */
	struct rmaq rmaq;  /* RMA transfers asked for and taken (rmaq.c) */
};

/* ---- req.c: requests, completion, pools ---- */
void rcpi_copy_large(void *d, const void *s, size_t n);
void rcpi_complete(rcp_req *r, int error);
void rcpi_complete_recv(rcp_req *r, size_t n);
rcp_req *rcpi_req_alloc(rcpc_core *c);
void rcpi_req_free(rcp_req *r);
struct unexp *rcpi_unexp_get(rcpc_core *c);
void rcpi_unexp_put(rcpc_core *c, struct unexp *u);
unsigned char *rcpi_buf_get(rcpc_core *c);
void rcpi_buf_put(rcpc_core *c, unsigned char *b);
void rcpi_unexp_hold(rcpc_core *c, struct unexp *u);
int rcpi_unexp_release(rcpc_core *c, struct unexp *u);
void rcpi_fail_list(struct list *l, int error);
int rcpi_take_completed(rcpc_core *c);

/* ---- rmaq.c: RMA transfers as events, their tokens ---- */
/* rcp_req.rma: BUSY, PEER (rmaq.c); FRAMES, RESEND: the message falls back
 * to frames (rma.c, FALLBACK). */
enum { RMA_BUSY = 1, RMA_PEER = 2, RMA_FRAMES = 4, RMA_RESEND = 8 };
enum { OP_FREE, OP_QUEUED, OP_HELD };                                  /* rma_op.state */
enum { RMA_READY_PUT = 1, RMA_SPLIT_PUT, RMA_RTS_GET, RMA_SPLIT_GET }; /* rma_op.kind */
int rcpi_rma_post(rcp_chan *ch, rcp_req *r, uint8_t kind, uint16_t fin, int write, void *local,
                  size_t len, const void *rkey, uint32_t rkeylen, uint64_t off);
struct rma_op *rcpi_rma_claim(rcpc_core *c, uint64_t token);
void rcpi_rma_release(rcpc_core *c, struct rma_op *op);
void rcpi_rma_chan_reset(rcp_chan *ch, int error);
void rcpi_rma_shutdown(rcpc_core *c);
void rcpi_rma_free(rcpc_core *c);

/* ---- epoch.c: conversation epochs, challenges, cookies ---- */
uint32_t rcpi_conv_epoch(rcpc_core *c);
/* A conversation with PEER ended (chan.c, CHANNELS). */
void rcpi_conv_end(rcpc_core *c, int peer);
int rcpi_peer_ended(const rcpc_core *c, int peer);
uint64_t rcpi_chal_nonce(rcpc_core *c, rcp_chan *ch, uint32_t epoch);
uint64_t rcpi_cookie_of(const rcpc_core *c, const void *src, size_t srclen, uint32_t epoch,
                        uint64_t slot);
int rcpi_cookie_echoed(const rcpc_core *c, const void *src, size_t srclen, const struct rcpw_hdr *h,
                       uint64_t now);

/* ---- chan.c: a channel's life ---- */
void rcpi_chan_reset(rcp_chan *ch, int error);
void rcpi_chan_fail(rcp_chan *ch, int error);
void rcpi_chan_claim(rcp_chan *ch);
void rcpi_chan_free(rcp_chan *ch);
int rcpi_chan_open(rcpc_core *c, int peer, uint64_t now, int lazy, rcp_chan **out);

/* ---- send.c: frames out, the send ring, loss recovery, acks in ---- */
void rcpi_hdr_fill(rcp_chan *ch, struct rcpw_hdr *h, uint8_t type, uint16_t flags, uint32_t seq,
                   uint32_t msg, uint64_t tag, uint64_t arg, uint32_t len);
void rcpi_hdr_seal(const rcpc_core *c, struct rcpw_hdr *h, const void *payload, uint32_t len);
int rcpi_xmit(rcp_chan *ch, const void *hdr, uint32_t hlen, const void *payload, uint32_t plen,
              unsigned more);
int rcpi_slot_send(rcp_chan *ch, struct slot *s, uint64_t now);
/* Checks IOVCNT segments of IOV (start.c, GATHER SENDS): *V a malloc'd
 * copy of those with data (*N of them, *TOTAL bytes).  0, RCP_EINVAL,
 * RCP_ENOMEM. */
int rcpi_gv_make(const struct rcp_iov *iov, int iovcnt, struct rcp_iov **v, uint32_t *n,
                 size_t *total);
struct slot *rcpi_slot_new(rcp_chan *ch, rcp_req *req, uint8_t type, uint16_t flags, uint32_t msg,
                           uint64_t tag, uint64_t arg, const void *payload, uint32_t plen,
                           int copy);
int rcpi_ctl_push(rcp_chan *ch, const struct ctl *k);
int rcpi_chan_resend_due(const rcp_chan *ch);
int rcpi_chan_retransmit(rcp_chan *ch, uint64_t now);
void rcpi_send_ping(rcp_chan *ch, uint64_t now);
void rcpi_update_rto(rcp_chan *ch);
int rcpi_process_ack_fields(rcp_chan *ch, const struct rcpw_hdr *h, uint64_t now);
void rcpi_process_sack(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl,
                       uint64_t now);
void rcpi_chan_resend_all(rcp_chan *ch, uint64_t now);
void rcpi_loss_timers(rcp_chan *ch, uint64_t now);

/* ---- msg.c: messages, matching, credits ---- */
void rcpi_recv_unpost(rcp_req *r);
rcp_req *rcpi_match_posted(rcpc_core *c, rcp_chan *ch, uint64_t tag);
void rcpi_next_miss(rcp_chan *ch);
void rcpi_credit_return(rcp_chan *ch);
void rcpi_credit_demand(rcp_chan *ch);
void rcpi_rts_matched(rcp_chan *ch, rcp_req *r, uint32_t msg, uint64_t tag, size_t total, int rma,
                      const unsigned char *rkey, uint32_t rkeylen);
void rcpi_try_ready(rcp_chan *ch);

/* ---- start.c: the pump, a message's first frame ---- */
int rcpi_send_can_start(rcp_chan *ch, const rcp_req *r);
int rcpi_send_start(rcp_chan *ch, rcp_req *r, uint64_t now);
void rcpi_chan_pump(rcp_chan *ch, uint64_t now);
uint64_t rcpi_rma_min(const rcpc_core *c);

/* ---- fallback.c: a message whose RMA failed, by frames (FALLBACK) ---- */
void rcpi_fell_back(rcp_chan *ch);
void rcpi_frames_ask(rcp_chan *ch, rcp_req *r, int peer_done);
void rcpi_frames_send(rcp_chan *ch, rcp_req *r);
int rcpi_data_place(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl);
void rcpi_process_inorder(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl);

/* ---- recv.c: the receive window, reordering, acks out ---- */
void rcpi_send_ack(rcp_chan *ch, uint64_t now);
void rcpi_process_reliable(rcp_chan *ch, const struct rcpw_hdr *h, const unsigned char *pl);

/* ---- handshake.c: admission, challenges, reclaim ---- */
rcp_chan *rcpi_admit(rcpc_core *c, int peer, const void *src, size_t srclen,
                     const struct rcpw_hdr *h, uint64_t now);
void rcpi_chans_sweep(rcpc_core *c, uint64_t now);

/* ---- express.c: the plain frame of a small exchange (EXPRESS) ---- */
rcp_chan *rcpi_input_express(rcpc_core *c, int peer, const void *frame, size_t len, uint64_t now);
struct slot *rcpi_slot_express(rcp_chan *ch, uint32_t msg, uint64_t tag, const void *buf,
                               uint32_t len);
/* A whole small message of CH may go under rcpi_slot_express's header: the
 * peer has our window (wnd_told: compact headers may go) and is named (not
 * blind), no CRC, and the host is little-endian (the wire's order). */
static inline int rcpi_slot_express_ok(const rcp_chan *ch)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return ch->wnd_told && ch->peer_epoch && !ch->core->p.crc;
#else
	(void)ch;
	return 0;
#endif
}

/* ---- timers.c: the timer heap, firing, flushing a channel ---- */
void rcpi_chan_flush(rcp_chan *ch, uint64_t now);

/* ---- helpers ---- */

/* Copies N bytes (no overlap).  Up to 64 inline: words, the last one
 * overlapping the one before it rather than a byte loop for the tail
 * (an 8 B message: one load and one store, not a loop). */
static inline void copy_bytes(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n > 64) {
		rcpi_copy_large(d, s, n);
		return;
	}
	if (n >= 8) {
		uint64_t v;
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&v, s + i, 8);
			memcpy(d + i, &v, 8);
		}
		memcpy(&v, s + n - 8, 8);
		memcpy(d + n - 8, &v, 8);
		return;
	}
	if (n >= 4) {
		uint32_t x, y;
		memcpy(&x, s, 4);
		memcpy(&y, s + n - 4, 4);
		memcpy(d, &x, 4);
		memcpy(d + n - 4, &y, 4);
		return;
	}
	while (n--)
		*d++ = *s++;
}

/* The nic moves bytes by RMA: the glue performs the core's transfer
 * events (rmaq.c).  Registering is how the core knows. */
static inline int rma_ok(const rcpc_core *c)
{
	return c->io.mr_reg != NULL;
}

/* ... and on CH, which has not fallen back too often (rma.c, FALLBACK). */
static inline int rma_ok_ch(const rcp_chan *ch)
{
	return ch->core->io.mr_reg != NULL && !ch->rma_off;
}

/* Where a split RMA transfer of TOTAL bytes divides: the sender puts
 * [0, split), the receiver gets [split, total).  Both sides compute it. */
static inline uint64_t split_at(uint64_t total)
{
	return (total / 2) & ~(uint64_t)4095;
}

static inline int tag_match(uint64_t want, uint64_t tag)
{
	return want == RCP_ANY_TAG || want == tag;
}

static inline struct slot *slot_of(rcp_chan *ch, uint32_t seq)
{
	return &ch->slots[seq & (ch->nslots - 1)];
}

/* Where slot S of CH keeps a copied payload of LEN (<= INLINE_CAP) bytes
 * (SLOT STORAGE). */
static inline unsigned char *slot_inl(rcp_chan *ch, struct slot *s, size_t len)
{
	return len <= SLOT_SMALL ? s->sml : ch->inl + (size_t)(s - ch->slots) * INLINE_CAP;
}

static inline int rx_bit(const rcp_chan *ch, uint32_t seq)
{
	uint32_t i = seq & (RXW - 1);
	return (int)((ch->rx_bits[i / 64] >> (i % 64)) & 1);
}

static inline void rx_set(rcp_chan *ch, uint32_t seq, int v)
{
	uint32_t i = seq & (RXW - 1);
	if (v) {
		ch->rx_bits[i / 64] |= 1ull << (i % 64);
		ch->rx_gaps++;
		ch->unplain = 1; /* (PLAIN) */
	} else {
		ch->rx_bits[i / 64] &= ~(1ull << (i % 64));
		ch->rx_gaps--;
	}
}

/* PLAIN (session 20, chan2).  The express paths (express.c, isend.c
 * send_small) leave a channel to the general path while any part of its
 * "unusual" state is set: failed, accepted (HANDSHAKE), frames held past a
 * gap, a receive promised by READY, frames the nic refused, selective
 * acks, RTO backoff, control frames queued, a send put into a READY
 * promise.  Read field by field, that was ~10 loads and branches per
 * frame and per send, in the common case all zero.  The express word is
 * one byte, ch->unplain, with one rule: every place that makes a part
 * nonzero sets it (rx_set, rcpi_chan_fail, rcpi_admit, msg.c's promise,
 * send.c's refusal, sack, backoff and control queue, start.c's READY
 * put; a new channel starts with it set).  Nothing clears it where a part
 * goes back to zero: chan_plain() does, the first time it finds every
 * part zero.  So unplain == 0 means every part is zero, whatever order
 * the parts change in, and a part set where the rule was forgotten shows
 * as chan_parts_quiet() false under a clear word (tests/test_rcp_small.c
 * t_plain_word checks that on every event of a lossy, reordering run).
 * A set word costs only the exact look it replaced: the callers then
 * test their own fields as before, so what is taken express is
 * unchanged. */
static inline int chan_parts_quiet(const rcp_chan *ch)
{
	return !(ch->failed | ch->accepted | ch->have_sack | ch->backoff) &&
	       !(ch->rx_gaps | ch->unsent | ch->ctl_count) && !ch->reserved && !ch->rma_start;
}

static inline int chan_plain(rcp_chan *ch)
{
	if (RCPI_LIKELY(!ch->unplain))
		return 1;
	if (!chan_parts_quiet(ch))
		return 0;
	ch->unplain = 0;
	return 1;
}

static inline int chan_has_work(const rcp_chan *ch)
{
	/* (A receive posted for the channel first: the common "work" of a
	 * small exchange, whose sender has posted the reply's receive.) */
	return ch->posted_specific || ch->tx_una != ch->tx_next || !list_empty(&ch->startq) ||
	       !list_empty(&ch->streamq) || !list_empty(&ch->busyq) || !list_empty(&ch->rndv) ||
	       ch->ctl_count;
}

/* No control frame, message start or stream data waits to go out. */
static inline int chan_nothing_queued(const rcp_chan *ch)
{
	/* rma_start: a message start put into a READY promise, set aside
	 * while its transfer is out; the pump sends its FIN FIRST once the
	 * transfer is back (start.c, ready_put_out), so it counts as queued. */
	return !ch->ctl_count && list_empty(&ch->startq) && list_empty(&ch->streamq) &&
	       !ch->rma_start;
}

/* Nothing out, queued or owed: no timer can be armed, a flush does
 * nothing.  Such a channel is not in the timer heap (a master with many
 * peers mostly has idle ones: TIMERS). */
static inline int chan_idle(const rcp_chan *ch)
{
	return !ch->ack_now && !ch->ack_pending && !ch->ack_due && !chan_has_work(ch);
}

/* CH's timers may have changed: its key in the timer heap is taken anew
 * before the deadline is next read (TIMERS). */
static inline void chan_retime(rcp_chan *ch)
{
	if (list_empty(&ch->tlink))
		list_add_tail(&ch->core->retime, &ch->tlink);
}

/* CH's earliest deadline may now be as early as AT, and no earlier than
 * its key or AT: the key is lowered to AT if it is later (TIMERS: a key is
 * a lower bound, never later than the channel's deadline).  The small
 * message paths say so instead of marking the channel (chan_retime),
 * which costs a recomputation of its deadline at the next read. */
static inline void chan_arm(rcp_chan *ch, uint64_t at)
{
	if (at < ch->tnode.at)
		rcpi_heap_set(&ch->core->theap, &ch->tnode, at);
}

/* Liveness of a channel with work (TIMERS): a silent peer is pinged after
 * peer_timeout/4 (then every peer_timeout/8), and fails it at peer_timeout. */
static inline uint64_t chan_live_at(const rcp_chan *ch)
{
	const struct rcpc_params *p = &ch->core->p;
	uint64_t at = ch->last_heard + p->peer_timeout / 4;
	if (ch->last_ping + p->peer_timeout / 8 > at)
		at = ch->last_ping + p->peer_timeout / 8;
	if (ch->last_heard + p->peer_timeout + 1 < at)
		at = ch->last_heard + p->peer_timeout + 1;
	return at;
}

/* CH takes on work (a send, a receive posted for it): silence while idle
 * is no failure, so liveness counts from now.  Its liveness deadline is
 * no earlier than the return value (a ping at last_heard + peer_timeout/4,
 * failure later: timers.c chan_deadline). */
static inline uint64_t chan_work_from(rcp_chan *ch, uint64_t now)
{
	if (ch->last_heard < now && !chan_has_work(ch))
		ch->last_heard = now;
	return ch->last_heard + ch->core->p.peer_timeout / 4;
}

/* Called before a channel takes on work: silence while idle is no failure. */
static inline void chan_touch(rcp_chan *ch, uint64_t now)
{
	chan_retime(ch);
	if (ch->last_heard < now && !chan_has_work(ch))
		ch->last_heard = now;
}

/* An acked frame grows the window: a frame a round trip in slow start, a
 * frame a window past ssthresh (cwnd in CWND_ONE fixed point); at the
 * ring's size, as a small exchange soon is, it stays (send.c slot_acked,
 * express.c's ack). */
static inline void cwnd_grow(rcp_chan *ch)
{
	if (ch->cwnd < ch->nslots * CWND_ONE) {
		if (ch->cwnd < ch->ssthresh)
			ch->cwnd += CWND_ONE;
		else
			ch->cwnd += CWND_ONE * CWND_ONE / (ch->cwnd ? ch->cwnd : 1);
		if (ch->cwnd > ch->nslots * CWND_ONE)
			ch->cwnd = ch->nslots * CWND_ONE;
	}
}

/* How far past tx_una CH may send (send.c, WINDOW).  cwnd counts only the
 * frames still in the network: a frame the peer selectively acked has left
 * it (sacked_out).  Counted from tx_una as before, one lost frame held the
 * sender to cwnd frames past it until its resend was acked (RACK waits
 * srtt x 5/4, the resend a round trip more): at 10 Gbit/s with 5% loss the
 * window sat at LOSS_CWND_MIN and half the sending time was that wait
 * (docs/results.md, session 19).  The receiver's window and the ring still
 * bound every frame from tx_una on: those it must hold. */
static inline uint32_t window(const rcp_chan *ch)
{
	uint32_t w = ch->cwnd / CWND_ONE + ch->sacked_out;
	if (w > ch->peer_wnd)
		w = ch->peer_wnd;
	if (w > ch->nslots)
		w = ch->nslots;
	return w ? w : 1;
}

/* Puts CH on the dirty list: the next rcpc_flush() pumps it and looks at
 * its acks (FLUSH), and marks its timers (chan_retime).  Every change
 * rcpi_chan_flush() acts on that does not come from a frame of CH
 * (rcpc_input touches it) or from the timers (they flush the channels
 * they serve) calls this. */
static inline void chan_dirty(rcp_chan *ch)
{
	chan_retime(ch);
	if (list_empty(&ch->dlink))
		list_add_tail(&ch->core->dirty, &ch->dlink);
}

/* Pushes the frames batched with RCP_NIC_MORE (io.flush), if any went:
 * most entry points send nothing batched (a lone small send rings the
 * nic itself: xmit_now), and the call down to the nic is then saved. */
static inline void core_push(rcpc_core *c)
{
	if (c->batched) {
		c->batched = 0;
		if (c->io.flush)
			c->io.flush(c->io.ctx);
	}
}

static inline void bad(rcpc_core *c)
{
	c->st.bad_frames++;
}

/* Frees slot S of CH (acked, or the channel reset): a copied send gives
 * its buffer back to the pool. */
static inline void slot_free(rcp_chan *ch, struct slot *s)
{
	rcpc_core *c = ch->core;
	s->in_use = 0;
	if (s->own) {
		rcpi_buf_put(c, s->own);
		s->own = NULL;
		c->sendbuf_used -= c->payload_max;
	}
}

/* Claims the slot of CH's next sequence number for a reliable frame of
 * PLEN payload bytes sent for REQ: the state every new slot starts with
 * (send.c rcpi_slot_new; express.c rcpi_slot_express, which writes its
 * header straight).  The caller sets the payload and the header. */
static RCPI_HOT_INLINE struct slot *slot_claim(rcp_chan *ch, rcp_req *req, uint32_t plen,
                                               int ackreq)
{
	uint32_t seq = ch->tx_next++;
	struct slot *s = slot_of(ch, seq);
	uint32_t inflight = ch->tx_next - ch->tx_una;

	assert(!s->in_use);
	s->in_use = 1;
	s->sacked = 0;
	s->nsent = 0;
	s->sent_at = 1; /* becomes the real time in slot_send */
	s->seq = seq;
	s->req = req;
	s->plen = plen;
	s->ackreq = (uint8_t)(ackreq != 0);
	if (inflight > ch->max_inflight)
		ch->max_inflight = inflight;
	return s;
}

/* Takes receive R, just matched to a message of CH, off CH's posted
 * receives (core.c input_small, express.c): the channel's direct receive
 * in place, any other by rcpi_recv_unpost. */
static RCPI_HOT_INLINE void recv_take(rcp_chan *ch, rcp_req *r)
{
	if (r == ch->direct) {
		ch->direct = NULL;
		if (RCPI_UNLIKELY(ch->next_rx == r))
			ch->next_rx = NULL;
		ch->posted_specific--;
	} else {
		rcpi_recv_unpost(r);
	}
}

#endif
