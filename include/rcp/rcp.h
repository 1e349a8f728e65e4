/*
 * rcp/rcp.h — ordered, reliable, bidirectional channels between processes.
 *
 * An endpoint (rcp_ep) owns one nic endpoint and any number of channels,
 * one per peer endpoint.  Channels are static, as in Dong & Zheng's RCP:
 * each side records the peer's address locally (rcp_connect); there is no
 * connection exchange beyond the first frames.  An endpoint opened with
 * RCP_EP_ACCEPT also creates channels for unknown peers whose frames carry
 * the right session cookie (servers).
 *
 * Messages: any size (limited by memory), matched on the receive side by
 * (channel or any, tag or any) in the order they were sent on a channel.
 * Data is placed straight into the posted buffer.  Small messages go eagerly
 * with their sync; larger ones use the READY/request-to-send handshake (and
 * one-sided RMA where the nic offers it).
 *
 * Requests: isend/irecv return a request; rcp_test/rcp_wait/rcp_waitany
 * complete it and release it (like MPI): after a call that reports
 * completion, the request pointer is gone.  Or the request carries a
 * completion callback (rcp_isend_cb, ...; "completion callbacks" below),
 * which progress runs, and the library releases it.  Every request completes exactly
 * once, with a status: 0, RCP_ETRUNC (receive buffer too short: the
 * buffer holds the first bytes, status.len the real length), RCP_EPEER
 * (peer silent for RCP_PEER_TIMEOUT, or restarted), RCP_ECANCELED,
 * RCP_ECLOSED (endpoint closed), RCP_EPROTO (the peer broke the protocol:
 * its channel failed), RCP_ENOMEM (no memory for the message, or a
 * receive past the credits-on-demand bound), RCP_ENOENT (rcp_irecv_next:
 * a message of another tag came first), or the nic's code for an RMA
 * transfer of the message that failed.
 *
 * Threads: one thread per endpoint at a time (no locks inside); use
 * several endpoints for several threads.
 *
 * Progress: every call progresses the endpoint; a program that computes for
 * long stretches should call rcp_progress() or sleep on rcp_ep_fd().
 */
#ifndef RCP_RCP_H
#define RCP_RCP_H

#include <stddef.h>
#include <stdint.h>

#include <rcp/error.h>
#include <rcp/nic.h>
#include <rcp/wait.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rcp_ep rcp_ep;
typedef struct rcp_chan rcp_chan;
typedef struct rcp_req rcp_req;

/* Tags with top byte 0xFE are reserved for RCP's own layers (bulk/, rpc/). */
#define RCP_ANY_TAG  UINT64_MAX
#define RCP_ANY_CHAN ((rcp_chan *)0)

/* rcp_ep_config.flags */
enum {
	RCP_EP_ACCEPT = 1u << 0, /* create channels for unknown peers */
	RCP_EP_SPIN = 1u << 1,   /* waits never sleep (default: spin, then sleep) */
	RCP_EP_SLEEP = 1u << 2,  /* waits sleep at once (no spinning) */
};

/* rcp_ep_config.crc */
enum {
	RCP_CRC_DEFAULT = 0, /* RCP_CRC, else auto */
	RCP_CRC_ON = 1,
	RCP_CRC_OFF = 2,
	RCP_CRC_AUTO = -1, /* on where the nic does not check payloads */
};

/* Every field's zero means "the default", so `struct rcp_ep_config ec =
 * {0}` (or a NULL config) gives the same endpoint as the environment. */
struct rcp_ep_config {
	unsigned flags;
	/* Per-job session cookie; frames with another cookie are dropped.
	 * 0: RCP_SESSION, else a built-in default. */
	uint32_t session;
	/* Payload CRC32C: RCP_CRC_* (0: RCP_CRC, else auto).  Any other
	 * negative value means auto, any other positive one on. */
	int crc;
	/* Passed to rcp_nic_open (faults, sizes); may be NULL. */
	const struct rcp_nic_config *nic;
	/* Bounds on what a peer's unexpected messages hold per channel: how
	 * many (eager or RTS) and how many bytes; a sender past them waits.
	 * 0: RCP_CREDITS (64), RCP_UNEXP_BYTES (4 MiB). */
	uint32_t credits;
	size_t unexp_bytes;
};

struct rcp_status {
	int error;      /* 0 or RCP_E* */
	rcp_chan *chan; /* channel the message came from / went to */
	uint64_t tag;
	size_t len; /* bytes of the whole message (may exceed the buffer) */
};

struct rcp_ep_stats {
	uint64_t msgs_sent, msgs_recv, bytes_sent, bytes_recv;
	uint64_t frames_sent, frames_recv, retransmits, timeouts;
	uint64_t dup_frames, bad_frames, stale_frames, ooo_frames;
	uint64_t acks_sent, unexpected_msgs, rndv_msgs, rma_msgs, credit_stalls;
	uint64_t unexpected_held_peak; /* most eager messages buffered at once */
	/* Unexpected messages (eager and RTS) held now, the bytes they hold
	 * (records and buffers), and the most of each at once.  Per channel
	 * they stay under the credits (docs/protocol.md, Messages). */
	uint64_t unexp_count, unexp_bytes, unexp_count_peak, unexp_bytes_peak;
	/* Credits granted past the bound because a receive waited on a
	 * channel whose credits were all held (docs/protocol.md, Messages),
	 * and receives failed with RCP_ENOMEM when that would pass the hard
	 * bound. */
	uint64_t demand_credits, demand_fails;
	/* Handshake (docs/protocol.md, "Channels and epochs"): challenges
	 * sent (accept cookies and restart checks), channels accepted after
	 * a cookie echo, accepted channels reclaimed half-open, restarts
	 * claimed but not (yet) proven. */
	uint64_t challenges_sent, chans_accepted, chans_reclaimed, restart_claims;
	/* RMA transfer results given back for no transfer outstanding (a
	 * token twice, or after the core shut down): ignored (rcp/rmaq.c). */
	uint64_t rma_stale;
	/* Messages whose RMA transfer could not be done and that moved by
	 * frames instead, counted on each side (rcp/fallback.c); rma_msgs
	 * counts them too (it counts messages that started by RMA). */
	uint64_t rma_fallbacks;
	/* Round-trip samples taken from acks (RFC 6298 estimate).  None on
	 * a nic that never loses frames (RCP_NIC_CAP_RELIABLE, shm): there
	 * the RTO stays at its floor and nothing else needs the estimate. */
	uint64_t rtt_samples;
	/* Loss recovery (rcp/send.c): tail-loss probes sent, and frames
	 * resent because a frame sent after them arrived (RACK); timeouts
	 * above counts the retransmission timeouts. */
	uint64_t tlp_probes, rack_resends;
	/* Looks at the nic for frames (progress rounds; a sleep's blocking
	 * receive is not one).  A wait looks once per round of its waiter
	 * (docs/waiting.md, one poll per look): tests count these per
	 * message, never time them. */
	uint64_t nic_polls;
	/* Frames taken by the express input (rcp/express.c): the plain frame
	 * of a small exchange, in one pass; frames_recv counts them too. */
	uint64_t express_in;
	/* Of those, the frames whose ack freed our one plain slot out in the
	 * same pass (rcp/express.c, EXPRESS ACKS: a nic that loses nothing). */
	uint64_t express_acks;
	/* Loss recovery's view of the path (rcp/send.c; issue 20, session
	 * 20).  Sums, to diff like the counters: every RTT sample (ns; over
	 * rtt_samples, the mean), the frames in the network (sent, not
	 * acked nor selectively acked) at each sample, and each RACK
	 * resend's wait, the frame's age when resent (ns; over
	 * rack_resends, the mean).  Gauges, of the channel that took the
	 * last sample, as they stood then: srtt, rttvar and the least
	 * sample (ns), and the congestion window (frames). */
	uint64_t rtt_sum_ns, pipe_sum, rack_wait_ns;
	uint64_t srtt_ns, rttvar_ns, min_rtt_ns, cwnd_frames;
};

/* ---- endpoints ---- */

/* Opens an endpoint on a nic address ("shm:NAME", "udp:", ...).
 * Returns 0, RCP_EINVAL, RCP_ENOMEM, or any rcp_nic_open code. */
int rcp_ep_open(const char *nic_addr, const struct rcp_ep_config *cfg, rcp_ep **out);
/* Lingers until every frame sent is acknowledged and, on nics that lose
 * frames, until peers have been quiet for RCP_TIME_WAIT_MS (50: a peer
 * whose last frame's ack was lost resends, and is answered), at most
 * RCP_LINGER_MS (default 2000) and the peer timeout; then fails every
 * pending request with RCP_ECLOSED, runs the completion callbacks due
 * and frees everything.  NULL accepted; refused (a warning, nothing
 * closed) from inside a completion callback of EP. */
void rcp_ep_close(rcp_ep *ep);
/* The endpoint's nic address as a string.  Returns 0, RCP_EINVAL, RCP_ERANGE. */
int rcp_ep_addr(const rcp_ep *ep, char *buf, size_t len);
/* The nic endpoint underneath (for queries; do not send on it). */
rcp_nic *rcp_ep_nic(rcp_ep *ep);
/* Fd to poll for readability before calling rcp_progress(); valid for the
 * endpoint's lifetime.  Call rcp_ep_arm() first; see rcp_nic_arm().
 * Returns the fd, or RCP_EINVAL (NULL EP). */
int rcp_ep_fd(const rcp_ep *ep);
/* Returns 0 if the caller may sleep on the fd now, RCP_EAGAIN if there is
 * work to progress first, RCP_EINVAL (NULL EP).  Sends the acks the
 * endpoint owes first: nothing it sends before the caller wakes could
 * carry them. */
int rcp_ep_arm(rcp_ep *ep);
/* How long a sleeper on rcp_ep_fd() may sleep before rcp_progress() must
 * run for the protocol's timers (retransmission, acks, liveness): ns, 0 if
 * due now, -1 if no timer is pending.  An RCP_EP_SLEEP endpoint asks for
 * at least RCP_SLEEP_SLACK_US (its loss-recovery timers may run that late;
 * docs/waiting.md).  Returns RCP_EINVAL for NULL. */
int64_t rcp_ep_timeout_ns(const rcp_ep *ep);
/* Drives the protocol: receives frames, fires timers, sends what is due,
 * then runs the completion callbacks due.  Returns the number of requests
 * completed (>= 0), RCP_EINVAL (NULL EP) or the nic's receive error
 * (rcp_nic_recv: RCP_ESYS). */
int rcp_progress(rcp_ep *ep);

/* ---- waiting (include/rcp/wait.h; the policy: docs/waiting.md) ----
 * Every wait on EP (rcp_wait, rcp_waitany, rcp_ep_wait, and the layers'
 * waits on it) spins and sleeps on the endpoint and on every source added
 * here: a layer's queue, another endpoint, a user's fd. */

/* Adds wait source SRC (copied) to EP's waits: its id (> 0), or RCP_EINVAL
 * (NULL) / RCP_ENOMEM. */
int rcp_ep_wait_add(rcp_ep *ep, const struct rcp_wait_src *src);
/* Adds endpoint OTHER as a wait source of EP (its frames are taken, its
 * timers run, its fd wakes EP's sleeps): its id, or RCP_EINVAL (NULL, or
 * OTHER == EP) / RCP_ENOMEM.  Remove it before closing OTHER. */
int rcp_ep_wait_add_ep(rcp_ep *ep, rcp_ep *other);
/* Removes source ID: 0, RCP_EINVAL (no such id on EP), RCP_EBUSY (called
 * from inside a wait on EP). */
int rcp_ep_wait_remove(rcp_ep *ep, int id);
/* Waits until DONE(ARG) > 0 (returns 0) or < 0 (returns that value),
 * progressing EP and its sources, or TIMEOUT_NS passes (RCP_ETIMEDOUT;
 * < 0: forever).  DONE is asked before every look.  Also returns a
 * progress error (RCP_ESYS, ...) or RCP_EINVAL (NULL EP or DONE). */
int rcp_ep_wait(rcp_ep *ep, int (*done)(void *), void *arg, int64_t timeout_ns);
/* What EP's waits did (counted since open or the last reset); RESET
 * zeroes the counts after copying them (ST may be NULL).  0 or
 * RCP_EINVAL. */
int rcp_ep_wait_stats(rcp_ep *ep, struct rcp_wait_stats *st, int reset);
/* Copies EP's counters into ST.  0, or RCP_EINVAL (EP or ST NULL). */
int rcp_ep_get_stats(const rcp_ep *ep, struct rcp_ep_stats *st);

/* ---- channels ---- */

/* Records a channel to the endpoint at ADDR (nic address string).
 * Connecting twice to the same address returns the same channel.
 * Returns 0, RCP_EINVAL, RCP_ENOMEM, or an rcp_nic_peer_add code:
 * RCP_EADDR, RCP_EPEER (shm: no such endpoint), RCP_EPERM (shm: another
 * user's segment), RCP_EAGAIN (the nic's peer table is full). */
int rcp_connect(rcp_ep *ep, const char *addr, rcp_chan **out);
/* Closes a channel: pending requests on it complete with RCP_ECLOSED. */
void rcp_chan_close(rcp_chan *ch);
/* The peer's address string.  Returns 0, RCP_EINVAL, RCP_ERANGE (BUF too
 * short), RCP_ENOENT (an accepted peer, known only by its address blob). */
int rcp_chan_peer_addr(const rcp_chan *ch, char *buf, size_t len);
/* Sets/gets a user pointer on the channel. */
void rcp_chan_set_user(rcp_chan *ch, void *user);
void *rcp_chan_get_user(const rcp_chan *ch);
/* The channel to the peer at nic address ADDR if it exists, else NULL. */
rcp_chan *rcp_chan_find(rcp_ep *ep, const char *addr);
/* The nic peer index of CH on rcp_ep_nic() of its endpoint (for one-sided
 * rcp_nic_get/put to the channel's peer).  Returns >= 0, or RCP_EINVAL. */
int rcp_chan_nic_peer(const rcp_chan *ch);
/* The endpoint CH belongs to; NULL for NULL. */
rcp_ep *rcp_chan_ep(const rcp_chan *ch);
/* How many times a new incarnation of the process at CH's address (a
 * restart, or another process given the same address) has been heard on
 * CH; each one failed what was pending with RCP_EPEER.  A channel is keyed
 * by address only: a user who knows which process it talks to (pvm-glue,
 * by task id) notes this count, and if it has not moved when another
 * process turns out to own the address, the channel still speaks to the
 * old one and must be closed and connected again.  0 for NULL. */
unsigned rcp_chan_restarts(const rcp_chan *ch);
/* 1 once CH has taken a frame from its peer (a channel just made by
 * rcp_connect has not), else 0; 0 for NULL. */
int rcp_chan_heard(const rcp_chan *ch);
/* Closes *CH and connects again to its address: a fresh channel to
 * whatever process holds the address now.  Frames of the incarnation *CH
 * spoke to that are still on their way are dropped as stale on the new
 * channel (without that, the first of them would be taken as the peer,
 * and the real one's first frame then as a restart).  Returns 0 (*CH is
 * the new channel), RCP_EINVAL, RCP_ENOENT (an accepted channel: no
 * address string), or an rcp_connect code (*CH is then NULL). */
int rcp_chan_reconnect(rcp_chan **ch);

/* ---- messages ---- */

/* Starts sending LEN bytes of BUF with TAG (< RCP_ANY_TAG) on CH.  BUF must
 * stay untouched until the request completes.  A message sent eagerly (it
 * fits one frame and the peer has room for it) may complete at once: RCP
 * keeps a copy of up to 2 KiB, and of larger ones while RCP_SEND_BUF
 * allows; else it completes when acknowledged.  Returns 0 (and *REQ), or
 * RCP_EINVAL (CH or REQ NULL, TAG RCP_ANY_TAG, BUF NULL with LEN > 0),
 * RCP_ENOMEM, RCP_ECLOSED (the endpoint is closing), or the error the
 * channel failed with (RCP_EPEER; RCP_EPROTO, RCP_ENOMEM). */
int rcp_isend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req **req);
/* One segment of a gathered message (rcp_isendv): LEN bytes at BASE. */
struct rcp_iov {
	const void *base;
	size_t len;
};
/* GATHER SEND.  Like rcp_isend, of the message that is the IOVCNT segments
 * of IOV one after the other (each LEN bytes at BASE; the receiver sees
 * one message of their total length and cannot tell).  The bytes are
 * read from the segments as frames go out, never copied whole: the
 * segments' memory must stay untouched until the request completes; the
 * IOV array itself is copied and may be reused when the call returns.
 * Zero-length segments are allowed (a NULL BASE with them too), IOVCNT 0
 * sends an empty message, and with one segment of data (after leaving
 * out the empty ones) it is exactly rcp_isend, at the same cost, RMA
 * included.  Several segments never move by RMA: they go by frames
 * (rcp/start.c, GATHER SENDS, says why).  Completes as rcp_isend does (a
 * message of one frame is copied into it and may complete at once), with
 * the same statuses, and rcp_cancel applies.  Returns 0 (and *REQ), or
 * RCP_EINVAL (CH or REQ NULL, TAG RCP_ANY_TAG, IOVCNT < 0, IOV NULL with
 * IOVCNT > 0, a segment with LEN > 0 and BASE NULL, a total past
 * SIZE_MAX), RCP_ENOMEM, RCP_ECLOSED, or the error the channel failed
 * with (as rcp_isend). */
int rcp_isendv(rcp_chan *ch, uint64_t tag, const struct rcp_iov *iov, int iovcnt, rcp_req **req);
/* Like rcp_isend, but the request completes only when the peer's RCP has
 * acknowledged the whole message (it is matched or buffered there), never
 * at once from a copy.  Acks are cumulative, so everything sent on CH
 * before it has then reached the peer too.  Same return codes. */
int rcp_issend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req **req);
/* Posts a receive into BUF (LEN bytes) for a message from CH (or
 * RCP_ANY_CHAN) with TAG (or RCP_ANY_TAG).  Returns 0 (and *REQ), or
 * RCP_EINVAL, RCP_ENOMEM, RCP_ECLOSED, or the error CH failed with (as
 * rcp_isend). */
int rcp_irecv(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, rcp_req **req);
/* Posts a receive for CH's next message only, taken if its tag is TAG:
 * if another message of CH starts first, it stays unexpected (for
 * rcp_probe and rcp_irecv) and the request completes with RCP_ENOENT.
 * For a layer that must see a channel's messages in order whatever their
 * tags and would otherwise probe before every receive (relinked
 * pvm_precv): posted ahead, the message lands in BUF unbuffered.  If CH
 * holds unexpected messages, the first decides at once: it is taken when
 * its tag is TAG, else RCP_ENOENT is returned and nothing posted.  One
 * at a time per channel; never promised to the sender (no READY: a
 * larger message comes by RTS).  Returns 0 (and *REQ), RCP_ENOENT,
 * RCP_EBUSY (one is posted on CH), RCP_EINVAL (CH is NULL or of another
 * endpoint), RCP_ENOMEM, RCP_ECLOSED, or the error CH failed with. */
int rcp_irecv_next(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, rcp_req **req);

/* Completes REQ if done: returns 0 and fills ST (may be NULL) and releases
 * the request, or RCP_EAGAIN if not done yet.  The operation's own error is
 * in ST->error (and also returned when nonzero).  RCP_EINVAL for a request
 * with a callback (so also rcp_wait and rcp_waitany). */
int rcp_test(rcp_req *req, struct rcp_status *st);
/* Waits up to TIMEOUT_NS (<0: forever) for REQ.  Returns like rcp_test
 * (never RCP_EAGAIN; RCP_EINVAL also for a NULL REQ), or RCP_ETIMEDOUT
 * (the request stays pending), or a progress error (RCP_ESYS). */
int rcp_wait(rcp_req *req, struct rcp_status *st, int64_t timeout_ns);
/* Waits for any of REQS[0..N) (NULL entries ignored); *IDX gets its index
 * and REQS[*IDX] is set to NULL.  Returns like rcp_wait; RCP_EINVAL also
 * for N <= 0, IDX NULL or no request in REQS. */
int rcp_waitany(rcp_req **reqs, int n, int *idx, struct rcp_status *st, int64_t timeout_ns);
/* Cancels a pending request; it then completes with RCP_ECANCELED (unless
 * it completed first).  A receive already being filled, or promised to a
 * peer by READY, cannot be canceled: RCP_EBUSY.  Returns 0, RCP_EBUSY,
 * RCP_EINVAL (NULL). */
int rcp_cancel(rcp_req *req);

/* ---- completion callbacks ----
 *
 * A request may carry a callback instead of being tested or waited for
 * (the shape of UCP's request callbacks and Mercury's NA_Trigger):
 *
 * - The callback runs exactly once per request, with its status (0 or
 *   the codes a request completes with, at the top of this file), from
 *   a call that progresses the endpoint (rcp_progress, rcp_test, rcp_wait,
 *   rcp_waitany, rcp_probe, rcp_send, rcp_recv, the layers' progress) after
 *   the protocol's own work, in completion order.  Never from inside the
 *   call that posts or cancels the request: a send that completes at once
 *   and a canceled request run their callbacks from the next progress.
 * - The request is the library's: rcp_test, rcp_wait and rcp_waitany refuse
 *   it (RCP_EINVAL).  Until its callback returns, the pointer may be given
 *   to rcp_cancel and rcp_req_set_cb; the library releases the request when
 *   the callback returns (ST and REQ are valid during the call only).
 * - A callback may post requests (with or without callbacks; one that
 *   completes meanwhile runs in the same round), cancel others, close
 *   channels, test and wait for plain requests and call rcp_progress: a
 *   nested progress runs the callbacks of requests completed since, never
 *   one twice.  It must not close its endpoint: rcp_ep_close called from a
 *   callback logs a warning and returns without closing.
 * - rcp_ep_close fails what is pending with RCP_ECLOSED and runs every
 *   callback still due before it frees the endpoint; requests posted from
 *   those callbacks fail at once with RCP_ECLOSED.
 */
typedef void (*rcp_req_cb)(rcp_req *req, const struct rcp_status *st, void *user);

/* rcp_isend, rcp_issend and rcp_irecv whose request carries callback CB
 * (non-NULL) with USER.  REQ may be NULL; else *REQ is valid until the
 * callback returns (for rcp_cancel).  Returns like the plain forms, and
 * RCP_EINVAL for a NULL CB; when the post fails no callback runs. */
int rcp_isend_cb(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req_cb cb, void *user,
                 rcp_req **req);
int rcp_issend_cb(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req_cb cb,
                  void *user, rcp_req **req);
/* Sends a message of at most one frame that nobody waits for: when it
 * returns 0 with *REQ NULL, BUF may be reused at once (the message went
 * out, or was queued with a copy of its own, which the library frees when
 * it is done; its fate is not reported).  Cheaper than copying it first:
 * most small sends complete inside the call.  *REQ non-NULL (no memory for
 * a copy): a plain request, to test or wait for before reusing BUF.
 * RCP_EMSGSIZE: longer than one frame (nothing sent); RCP_EINVAL (NULL CH
 * or REQ); RCP_ECLOSED; else like rcp_isend. */
int rcp_isend_detached(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req **req);
int rcp_irecv_cb(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, rcp_req_cb cb,
                 void *user, rcp_req **req);
/* Gives REQ (pending, or complete but not yet tested: e.g. an rcp_mcast
 * request) callback CB with USER; from now on the request is the
 * library's, as above.  On a request that has a callback, replaces it if
 * it has not started.  CB NULL detaches REQ: the library releases it when
 * it completes and tells no one (for a user going away before a request it
 * cannot cancel; its buffers must then live until the endpoint closes).
 * Returns 0, RCP_EINVAL (REQ NULL). */
int rcp_req_set_cb(rcp_req *req, rcp_req_cb cb, void *user);
/* RESTART WATCH.  A request on CH that no message completes: the next
 * reset of CH does, with the error it fails CH's pending requests with.
 * RCP_EPEER: a new incarnation of the peer was proven (rcp_chan_restarts
 * has moved by the time CB runs or the request is tested) or CH failed
 * (peer timeout: the count has not moved); RCP_ECLOSED: CH was closed
 * (also by rcp_ep_close); RCP_ECANCELED: rcp_cancel.  Its status names CH
 * (tag and len 0; after RCP_ECLOSED CH may be freed: compare the pointer,
 * do not use it).  With CB (USER for it) the request is the library's,
 * and CB runs from the progress after the reset, like any completion
 * callback: a user learns of a restart without asking per call (pvm-glue:
 * lost sends).  Without CB, *REQ is tested or waited for.  One per
 * channel; watch again from CB to go on watching.  REQ may be NULL with a
 * CB.  Returns 0, RCP_EINVAL (NULL CH; no CB and no REQ), RCP_EBUSY (CH
 * is watched already), RCP_ECLOSED (the endpoint is closing),
 * RCP_ENOMEM; when it fails no callback runs. */
int rcp_chan_watch(rcp_chan *ch, rcp_req_cb cb, void *user, rcp_req **req);

/* Blocking forms (wait forever; fail on peer timeout): the codes of
 * rcp_isend / rcp_irecv, then of rcp_wait. */
int rcp_send(rcp_chan *ch, uint64_t tag, const void *buf, size_t len);
int rcp_recv(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, struct rcp_status *st);

/* Is a message matching (CH, TAG) waiting unreceived?  Returns 1 (ST
 * filled), 0 (no), RCP_EINVAL (NULL EP) or a progress error.  Progresses
 * once. */
int rcp_probe(rcp_ep *ep, rcp_chan *ch, uint64_t tag, struct rcp_status *st);

/* Sends one buffer to N channels without copying it per destination; one
 * request completes when every channel has it (status.error: the first
 * failure, if any).  Returns 0 (and *REQ), RCP_EINVAL, RCP_ENOMEM. */
int rcp_mcast(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t len, rcp_req **req);
/* rcp_mcast of a message given as IOVCNT segments (struct rcp_iov, as
 * rcp_isendv): each channel's send reads them where they lie, nothing is
 * copied; they must stay unchanged until the request completes.  Each
 * destination gets one message, the segments' bytes in order (empty ones
 * add nothing; none: an empty message).  Returns 0 (and *REQ),
 * RCP_EINVAL (NULL CHANS or REQ, N <= 0, a NULL channel or channels of
 * several endpoints, IOVCNT < 0, a NULL IOV with IOVCNT > 0, a segment
 * with a NULL base and a nonzero length, RCP_ANY_TAG), RCP_ENOMEM. */
int rcp_mcastv(rcp_chan **chans, int n, uint64_t tag, const struct rcp_iov *iov, int iovcnt,
               rcp_req **req);

#ifdef __cplusplus
}
#endif
#endif
