/*
 * rcp/core.h — the RCP protocol core: no I/O, no clock, no randomness.
 *
 * The core takes frames and a timestamp in (rcpc_input, rcpc_timers) and
 * gives frames out through the `send` callback of struct rcpc_io, timer
 * deadlines out through rcpc_deadline(), and events out by completing
 * requests.  The I/O glue (rcp/endpoint.c) joins it to a nic endpoint and
 * the monotonic clock; the tests join it to a simulated lossy network on
 * virtual time (tests/sim.c), which makes every run reproducible.
 *
 * Every entry point takes `now` (ns, any monotonic origin).  The core
 * never calls back into the user except through rcpc_io: requests with a
 * completion callback are only listed (rcpc_cb_take), the glue runs them.
 * Nor does it move bytes by RMA: it queues transfer events, which the
 * glue performs and reports back (rcpc_rma_take, rcpc_rma_done).
 */
#ifndef RCP_CORE_H
#define RCP_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rcp/rcp.h>

typedef struct rcpc_core rcpc_core;

/* What the core asks of the world below it. */
struct rcpc_io {
	void *ctx;
	/* Sends one frame to PEER (nic semantics: RCP_NIC_MORE may batch;
	 * returns 0, RCP_EAGAIN (retry later), RCP_EPEER, other codes). */
	int (*send)(void *ctx, int peer, const struct iovec *iov, int iovcnt, unsigned flags);
	/* Pushes batched frames: called before an entry point returns if
	 * it sent any with RCP_NIC_MORE (and where an RMA transfer must
	 * start the peer at once).  May be NULL. */
	int (*flush)(void *ctx);
	/* Optional one-sided RMA (NULL if the nic has none): register a
	 * buffer and pack its key (synchronous).  A glue that sets mr_reg
	 * performs the core's transfer events (rcpc_rma_take below). */
	int (*mr_reg)(void *ctx, void *addr, size_t len, unsigned access, void **mr, void *rkey,
	              size_t *rkeylen);
	void (*mr_dereg)(void *ctx, void *mr);
	/* RCP_EP_ACCEPT: make a peer index for an unknown sender's address
	 * blob.  Returns 0 or a negative code (then the frame is dropped). */
	int (*peer_add)(void *ctx, const void *src, size_t srclen, int *peer);
	/* Channel closed: the glue may forget the nic peer. May be NULL. */
	void (*peer_remove)(void *ctx, int peer);
	/* Sends one frame to the address blob SRC of a sender that has no
	 * peer index, without making one (the cookie challenge of
	 * RCP_EP_ACCEPT, handshake.c HANDSHAKE).  May be NULL: then an unknown
	 * sender gets a channel at once, as before the handshake existed. */
	int (*send_to)(void *ctx, const void *src, size_t srclen, const void *frame, size_t len);
};

struct rcpc_params {
	uint32_t mtu;                        /* largest frame the nic takes, header included */
	uint32_t rx_frames;                  /* frames our nic holds per sender: our window */
	uint32_t session;                    /* per-job cookie */
	uint32_t epoch;                      /* this incarnation, nonzero, random per open */
	int crc;                             /* 1: checksum payloads and require it */
	unsigned flags;                      /* RCP_EP_ACCEPT */
	uint64_t peer_timeout;               /* ns of silence before RCP_EPEER */
	uint64_t rto_min, rto_max, rto_init; /* ns */
	uint64_t ack_delay;                  /* ns an ack may wait for a piggyback */
	uint32_t credits;                    /* unexpected messages per channel (0: 64) */
	size_t unexp_bytes;                  /* bytes they may hold per channel (0: 4 MiB) */
	uint32_t inline_max;                 /* eager sends up to this size complete at once */
	size_t send_buf;                     /* copies of larger eager sends (complete at once) */
	uint32_t rma_min;                    /* messages from this size use RMA when offered */
	uint8_t rma_fixed;                   /* rma_min set by the user: not raised when crowded */
	uint64_t rma_split;                  /* READY-first RMA from this size: both copy (0 off) */
	size_t reorder_bytes;                /* memory for out-of-order frames, per core */
	int reliable;                        /* the nic never loses frames: no loss probing */
	uint64_t time_wait;                  /* ns closing answers a peer heard that recently */
	uint64_t cookie_key[2];              /* secret of the accept cookies, random per open */
	uint8_t epoch_per_endpoint;          /* tests: the epoch rule before PER PEER (chan.c) */
};

/* Fills P with the defaults (RCP_* environment is applied by the glue). */
void rcpc_params_default(struct rcpc_params *p);

/* Returns 0, RCP_EINVAL, RCP_ENOMEM. */
int rcpc_core_new(const struct rcpc_params *p, const struct rcpc_io *io, void *owner,
                  rcpc_core **out);
/* Completes all pending requests with RCP_ECLOSED (those with a callback
 * go on the completion list: the caller runs them before freeing), also
 * those whose RMA transfer the glue took and has not given back: it must
 * have stopped them (their tokens are stale from then on). */
void rcpc_core_shutdown(rcpc_core *c);
/* rcpc_core_shutdown, then frees everything (callbacks still listed are
 * dropped with their requests). */
void rcpc_core_free(rcpc_core *c);
void *rcpc_core_owner(const rcpc_core *c);
void rcpc_core_stats(const rcpc_core *c, struct rcp_ep_stats *st);

/* Channels are keyed by nic peer index. */
int rcpc_chan_open(rcpc_core *c, int peer, uint64_t now, rcp_chan **out);
rcp_chan *rcpc_chan_by_peer(rcpc_core *c, int peer);
rcpc_core *rcpc_chan_core(const rcp_chan *ch);
int rcpc_chan_peer(const rcp_chan *ch);
/* How often a new incarnation of the peer (a new src_epoch after another)
 * has been heard on CH. */
unsigned rcpc_chan_restarts(const rcp_chan *ch);
/* A request that the next reset of CH (restart, failure, close) completes
 * with its error (rcp_chan_watch).  Returns 0, RCP_EBUSY, RCP_ENOMEM. */
int rcpc_chan_watch(rcp_chan *ch, rcp_req **req);
/* The peer's incarnation as last heard on CH (0: none yet). */
uint32_t rcpc_chan_peer_epoch(const rcp_chan *ch);
/* Frames of incarnation EPOCH (an earlier holder of CH's address) are
 * stale on CH from now on (0: none). */
void rcpc_chan_ban_epoch(rcp_chan *ch, uint32_t epoch);
void rcpc_chan_close(rcp_chan *ch, uint64_t now);

/* Feeds one received frame.  PEER is the nic peer index or
 * RCP_NIC_PEER_NONE (then SRC/SRCLEN name the sender).  Never trusts the
 * frame: a bad one is counted and dropped. */
void rcpc_input(rcpc_core *c, int peer, const void *src, size_t srclen, const void *frame,
                size_t len, uint64_t now);
/* Sends acks and anything the window now allows on the channels that
 * changed since the last flush (core.c, FLUSH); call after a batch of
 * rcpc_input calls.  Returns the count of requests completed since the
 * last call. */
int rcpc_flush(rcpc_core *c, uint64_t now);
/* Fires due timers (retransmissions, delayed acks, keep-alives, peer
 * timeouts).  Returns like rcpc_flush. */
int rcpc_timers(rcpc_core *c, uint64_t now);
/* Sends now every ack that waits for its ack_delay (a caller about to
 * sleep: nothing it sends before it wakes could carry them).  Returns
 * nonzero if it cleared a delayed-ack timer (the deadline may be later). */
int rcpc_ack_owed(rcpc_core *c, uint64_t now);
/* The earliest time a timer is due (0: at once), or UINT64_MAX.  Exact
 * after any entry point: the top of a heap, whose keys are lower bounds
 * made exact at the top when read (timers.c, TIMERS), so callers take it
 * whenever they need it rather than keep a copy. */
uint64_t rcpc_deadline(rcpc_core *c);
/* Nonzero if a timer is due at NOW (rcpc_deadline() <= NOW), cheaper:
 * only keys not after NOW are made exact.  What a poll asks after every
 * frame taken in. */
int rcpc_due(rcpc_core *c, uint64_t now);

/* The glue's news that the CPU is crowded (more tasks runnable than
 * CPUs: every wake-up waits behind others): messages below
 * RMA_MIN_CROWDED then stream through the nic rather than move by RMA,
 * whose RTS/READY, pull and FIN cost a wake-up on each side (msg.c). */
void rcpc_set_crowded(rcpc_core *c, int crowded);

/* RMA transfers (rcp/rmaq.c, RMA EVENTS).  Where the protocol moves a
 * message by RMA the core queues an event and goes on; the glue takes each
 * (rcpc_rma_take), performs it on the nic, at once or later (a nic with
 * asynchronous RMA: when its completion comes), in any order, and gives
 * its result back exactly once (rcpc_rma_done), which lets the core send
 * the FIN the transfer ends with and complete the request.  Any entry
 * point may queue events; after each, the glue looks (*rcpc_rma_queued:
 * a load, no call).  The request an event belongs to does not complete
 * before its result is back: the nic may be using the buffer. */
struct rcpc_rma {
	uint64_t token; /* names the event in rcpc_rma_done */
	int peer;       /* nic peer index */
	int write;      /* 1: put LOCAL into the peer's region; 0: get from it into LOCAL */
	void *local;    /* LEN bytes here (read only for a put) */
	size_t len;
	uint64_t off;   /* where in the peer's region */
	size_t rkeylen; /* the peer's key to its region (a copy: the event's own) */
	unsigned char rkey[RCP_NIC_RKEY_MAX];
};
/* Takes the oldest event queued into EV: 1, or 0 if none is. */
int rcpc_rma_take(rcpc_core *c, struct rcpc_rma *ev);
/* The count of events queued and not taken (valid for the core's life). */
const unsigned *rcpc_rma_queued(const rcpc_core *c);
/* The transfer of TOKEN is over: STATUS 0 (all LEN bytes moved) or the
 * nic's negative code.  Returns 0, or RCP_ENOENT for a token that names
 * no event taken and not yet done (given back twice, made up, or taken
 * before rcpc_core_shutdown): counted in stats rma_stale, nothing else
 * happens.  What it makes the core send goes out at the next rcpc_flush;
 * what it completes is counted there. */
int rcpc_rma_done(rcpc_core *c, uint64_t token, int status, uint64_t now);

/* rcpc_issend: completes on the peer's ack only (rcp_issend). */
int rcpc_issend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now,
                rcp_req **req);
int rcpc_isend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now,
               rcp_req **req);
/* rcpc_isend (SYNC 0) or rcpc_issend (1) for the API (rcp/request.c),
 * which has checked CH and REQ: inlined into it whole (isend.c). */
int rcpc_isend_api(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, int sync, uint64_t now,
                   rcp_req **req);
/* rcp_isendv's gather send (rcp/start.c, GATHER SENDS), of any number of
 * segments (one too: by frames, never RMA; rcp_isendv sends one of data
 * by rcpc_isend); the same codes. */
int rcpc_isendv(rcp_chan *ch, uint64_t tag, const struct rcp_iov *iov, int iovcnt, uint64_t now,
                rcp_req **req);
/* A send of one frame's message that nobody waits for: BUF is free when
 * it returns 0 with *REQ NULL (sent, or copied: the request is the
 * library's, its completion goes to DROP).  *REQ non-NULL: no memory for
 * the copy, wait for it as for rcpc_isend's.  RCP_EMSGSIZE: longer than a
 * frame (nothing posted).  Else like rcpc_isend. */
int rcpc_isend_detached(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, uint64_t now,
                        rcp_req_cb drop, rcp_req **req);
int rcpc_irecv(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len, uint64_t now,
               rcp_req **req);
/* rcpc_irecv for the API (rcp/request.c), which has checked EP and REQ:
 * inlined into it whole (core.c). */
int rcpc_irecv_api(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len, uint64_t now,
                   rcp_req **req);
/* A receive of CH's next message if its tag is TAG (core.c, NEXT
 * RECEIVES).  Returns like rcpc_irecv, or RCP_EBUSY (one is posted on CH
 * already), RCP_ENOENT (CH's first unexpected message has another tag);
 * nothing posted then. */
int rcpc_irecv_next(rcpc_core *c, rcp_chan *ch, uint64_t tag, void *buf, size_t len, uint64_t now,
                    rcp_req **req);
int rcpc_mcast(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t len, uint64_t now,
               rcp_req **req);
/* rcpc_mcast of the gathered segments IOV (rcp_mcastv): each channel's
 * send is rcpc_isendv's; the same codes. */
int rcpc_mcastv(rcp_chan **chans, int n, uint64_t tag, const struct rcp_iov *iov, int iovcnt,
                uint64_t now, rcp_req **req);
/* 1 if REQ is complete (ST filled, REQ freed), 0 if not (always 0 for a
 * request with a callback: it is the library's). */
int rcpc_req_done(rcp_req *req, struct rcp_status *st);
/* rcpc_req_done for rcp_test: REQ's error (0, RCP_ETRUNC, ...) if it is
 * complete (ST filled if not NULL, REQ freed), RCP_EAGAIN if not or if it
 * has a callback (no request completes with RCP_EAGAIN). */
int rcpc_req_finish(rcp_req *req, struct rcp_status *st);
rcpc_core *rcpc_req_core(const rcp_req *req);
/* Completion callbacks (rcp_req_cb in rcp/rcp.h; req.c, CALLBACKS).
 * rcpc_req_set_cb gives REQ a callback (CB non-NULL): when it completes
 * (at once if it has), it goes on the core's completion list, which the
 * core never runs.  The glue takes the whole list (rcpc_cb_take, linked
 * by rcpc_req_cb_get's return), runs each callback and then releases the
 * request (rcpc_req_release).  rcpc_cb_head: the list head, for a check
 * without a call. */
void rcpc_req_set_cb(rcp_req *req, rcp_req_cb cb, void *user);
rcp_req *rcpc_cb_take(rcpc_core *c);
rcp_req *const *rcpc_cb_head(const rcpc_core *c);
rcp_req *rcpc_req_cb_get(const rcp_req *req, rcp_req_cb *cb, void **user, struct rcp_status *st);
void rcpc_req_release(rcp_req *req);
int rcpc_req_has_cb(const rcp_req *req);
int rcpc_cancel(rcp_req *req, uint64_t now);
int rcpc_probe(rcpc_core *c, rcp_chan *ch, uint64_t tag, struct rcp_status *st);

/* Nonzero while frames are unacknowledged, sends unfinished or acks owed
 * on a channel that has not failed. */
int rcpc_core_busy(const rcpc_core *c);
/* Nonzero while closing must go on progressing at NOW: the core is busy,
 * or a live channel heard its peer less than time_wait ago (the peer may
 * not have our last ack and may still resend: TIME_WAIT). */
int rcpc_core_linger(const rcpc_core *c, uint64_t now);

/* One line describing CH's state, for diagnostics.  Returns snprintf's. */
int rcpc_chan_debug(const rcp_chan *ch, char *buf, size_t len);

/* For tests: the channels whose timer key is later than their deadline,
 * or that have a deadline and are not in the heap, though they are not
 * marked to be keyed anew (timers.c, TIMERS, LAZY KEYS): 0, or an entry
 * point forgot to mark a channel it changed or lower its key.  Walks every
 * channel. */
int rcpc_timers_check(const rcpc_core *c);

/* For tests: the largest number of frames ever in flight on CH, and the
 * peer's advertised window. */
void rcpc_chan_window_stats(const rcp_chan *ch, uint32_t *max_inflight, uint32_t *peer_wnd);

#endif
