/*
 * rcp/endpoint.c — joins the protocol core to a nic endpoint and the clock.
 *
 * This is the only file of rcp/ that does I/O or reads time.  Progress:
 * receive a burst of frames from the nic, feed each to the core (which
 * copies payloads straight from the nic's buffers into the user's, so the
 * frames can be released at once), let the core send acks and whatever its
 * windows allow, and fire its timers when their deadline has passed.
 *
 * Waiting: every wait runs the one policy of common/wait.c on the
 * endpoint's waiter, whose first source is the endpoint itself (ep_look,
 * ep_arm_src, ep_sleep below) and whose others were added with
 * rcp_ep_wait_add.  Before sleeping the endpoint sends the acks owed and
 * takes the core's next deadline; alone, it sleeps in rcp_nic_recv_wait,
 * which returns the frames it woke for.  RCP_EP_SPIN never sleeps (unless
 * the CPU is crowded); RCP_EP_SLEEP sleeps at once and lets timers run up
 * to sleep_slack late (see wake_at).  On VMs whose idle vCPUs halt, a
 * cross-CPU wake-up costs ~25 µs each way, so the spin phase is what makes
 * small round trips fast; the sleep phase keeps idle processes off the
 * CPU.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <rcp/rcp.h>

#include "common/rcp_common.h"
#include "common/wait.h"
#include "nic/nic_int.h"
#include "rcp/core.h"
#include "rcp/ep_int.h"
#include "rcp/wire.h"

#define BURST                 32
#define RELIABLE_ACK_DELAY_NS 1000000u /* see rcp_ep_open */

struct peer_name {
	char addr[RCP_NIC_ADDRSTR_MAX];
};

struct rcp_ep {
	rcp_nic *nic;
	rcpc_core *core;
	struct rcp_nic_info info;
	unsigned flags;
	struct rcpi_waiter waiter; /* every wait on this endpoint (common/wait.c) */
	uint64_t frames_in;        /* frames taken: a look that took some had news */
	uint64_t polls;            /* progress rounds: nic polls (rcp_ep_stats.nic_polls) */
	uint64_t look_polls;       /* polls, frames_in at the end of ep_look's last look */
	uint64_t look_frames;
	uint64_t sleep_slack_ns; /* RCP_EP_SLEEP: see wake_at() */
	unsigned idle_polls;
	int burst;
	uint64_t now_cache, now_tsc; /* see ep_now() */
	uint64_t last_rx_cycles;     /* cycles() when frames last arrived */
	uint64_t last_cycles;        /* cycles() at the last ep_now() */
	struct peer_name *names;
	int nnames;
	rcp_req *const *cbq; /* the core's completion list (rcpc_cb_head) */
	int cb_depth;        /* callbacks running (nested progress: > 1) */
	int closing;         /* rcp_ep_close runs the last callbacks */
	struct rcp_nic_frame frames[BURST];

	const unsigned *rmaq; /* the core's RMA transfers asked for (rcpc_rma_queued) */
	int rma_completed;    /* completions counted by transfers outside progress */
};

static uint64_t now_ns(void)
{
	return rcpi_now_ns();
}

/* A cheap timestamp for "did frames come back to back": the TSC on x86
 * (units do not matter much: BURST_GAP_CYCLES is ~1 us at 2-4 GHz). */
#define BURST_GAP_CYCLES 3000u
static inline uint64_t cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return rcpi_now_ns() * 3;
#endif
}

static inline __attribute__((always_inline)) int progress(rcp_ep *ep);
/* Inlined into progress (and ep_look): its own call, the arguments and
 * registers saved twice, cost ~20 instructions a frame (session 20). */
static inline __attribute__((always_inline)) int took(rcp_ep *ep, int n);
static int ep_look(void *arg);
static int ep_arm_src(void *arg, int64_t *timeout_ns);
static int ep_sleep(void *arg, int64_t timeout_ns);

/* ---- completion callbacks (rcp.h) ----
 *
 * The core lists the finished requests that carry a callback (core.c,
 * CALLBACKS); every progress takes the list after the core's work and runs
 * it here, outside the core, so a callback may post, cancel and close
 * channels (the core is between entry points).  The list taken is a local
 * chain: a callback that progresses again takes and runs only what
 * completed since, and the rest of the outer chain is not on the core's
 * list any more, so no callback runs twice.  A round runs until the list
 * is empty: requests posted from callbacks that complete at once run in
 * the same round (a user whose callbacks repost endlessly spins here). */
static void cb_drop(rcp_req *req, const struct rcp_status *st, void *user)
{
	(void)req;
	(void)st;
	(void)user;
}

static void run_callbacks(rcp_ep *ep)
{
	rcp_req *r;
	ep->cb_depth++;
	while ((r = rcpc_cb_take(ep->core))) {
		while (r) {
			struct rcp_status st;
			rcp_req_cb cb;
			void *user;
			rcp_req *next = rcpc_req_cb_get(r, &cb, &user, &st);
			cb(r, &st, user);
			rcpc_req_release(r);
			r = next;
		}
	}
	ep->cb_depth--;
}

static inline void callbacks(rcp_ep *ep)
{
	if (*ep->cbq)
		run_callbacks(ep);
}

/* ---- RMA transfers (rcp/rmaq.c, RMA EVENTS) ----
 *
 * The core asks for transfers as events; the endpoint performs each on
 * the nic at once (shm's RMA is a synchronous process_vm_readv/writev) and
 * gives the result back, then flushes what that lets the core send (the
 * FINs) and whatever starts because of it, until no event is left.  A nic
 * with asynchronous RMA would post here and give results back from its
 * completion poll instead: the core does not mind when.  Returns the
 * requests completed. */
static int rma_run(rcp_ep *ep, uint64_t now)
{
	int done = 0;
	do {
		struct rcpc_rma ev;
		while (rcpc_rma_take(ep->core, &ev)) {
			int rc = ev.write ? rcp_nic_put(ep->nic, ev.peer, ev.local, ev.len, ev.rkey,
			                                ev.rkeylen, ev.off)
			                  : rcp_nic_get(ep->nic, ev.peer, ev.local, ev.len, ev.rkey,
			                                ev.rkeylen, ev.off);
			rcpc_rma_done(ep->core, ev.token, rc, now);
		}
		done += rcpc_flush(ep->core, now);
	} while (*ep->rmaq);
	return done;
}

/* The time for stamping sends and receives posted by the user.  A clock
 * read costs ~27 ns here and a small message's whole budget is a few
 * hundred; right after progress() read the clock, reuse that reading
 * while the TSC says it is at most ~10 µs old (timers are >= 50 µs
 * apart, so the error does not matter).  Other CPUs read the clock. */
static uint64_t ep_now(rcp_ep *ep)
{
	uint64_t t = cycles(); /* an rdtsc costs ~18 ns here: one per call */
	ep->last_cycles = t;
#if defined(__x86_64__) || defined(__i386__)
	if (t - ep->now_tsc < 20000)
		return ep->now_cache;
	ep->now_tsc = t;
#endif
	return ep->now_cache = now_ns();
}

/* ---- the core's view of the world below ---- */

/* The core's frames go straight to the backend's ops: rcp_nic_send's
 * checks are for callers that may pass anything, and the core passes one
 * header (and one payload) it built itself, a peer index the nic gave it
 * and flags it knows (~50 instructions a frame, a tenth of an 8 B round
 * trip's core work, measured with perf/callgrind.sh). */
static int io_send(void *ctx, int peer, const struct iovec *iov, int iovcnt, unsigned flags)
{
	rcp_ep *ep = ctx;
	size_t total = iov[0].iov_len + (iovcnt > 1 ? iov[1].iov_len : 0);
	return ep->nic->ops->send(ep->nic, peer, iov, iovcnt, total, flags);
}

static int io_send_to(void *ctx, const void *src, size_t srclen, const void *frame, size_t len)
{
	rcp_ep *ep = ctx;
	return rcpi_nic_send_to(ep->nic, src, srclen, frame, len);
}

static int io_flush(void *ctx)
{
	rcp_ep *ep = ctx;
	return ep->nic->ops->flush(ep->nic);
}

static int io_mr_reg(void *ctx, void *addr, size_t len, unsigned access, void **mr, void *rkey,
                     size_t *rkeylen)
{
	rcp_ep *ep = ctx;
	rcp_nic_mr *m;
	int rc = rcp_nic_mr_reg(ep->nic, addr, len, access, &m);
	if (rc)
		return rc;
	rc = rcp_nic_mr_pack(m, rkey, rkeylen);
	if (rc) {
		rcp_nic_mr_dereg(m);
		return rc;
	}
	*mr = m;
	return 0;
}

static void io_mr_dereg(void *ctx, void *mr)
{
	(void)ctx;
	rcp_nic_mr_dereg(mr);
}

static int io_peer_add(void *ctx, const void *src, size_t srclen, int *peer)
{
	rcp_ep *ep = ctx;
	return rcp_nic_peer_add(ep->nic, src, srclen, peer);
}

static void io_peer_remove(void *ctx, int peer)
{
	rcp_ep *ep = ctx;
	rcp_nic_peer_remove(ep->nic, peer);
	if (peer < ep->nnames)
		ep->names[peer].addr[0] = 0;
}

/* ---- endpoints ---- */

static uint32_t random_epoch(void)
{
	uint32_t e = 0;
	if (getrandom(&e, sizeof e, GRND_NONBLOCK) != (ssize_t)sizeof e)
		e = (uint32_t)(now_ns() ^ ((uint64_t)getpid() << 16));
	return e ? e : 1;
}

static uint32_t session_from_env(void)
{
	const char *s = rcpi_env_str("RCP_SESSION");
	uint32_t h = 2166136261u; /* FNV-1a of the string */
	if (!s)
		return 0;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h ? h : 1;
}

int rcp_ep_open(const char *nic_addr, const struct rcp_ep_config *cfg, rcp_ep **out)
{
	struct rcpc_params p;
	struct rcpc_io io = {0};
	rcp_ep *ep;
	int64_t ack_us;
	int rc, crc;

	if (!nic_addr || !out)
		return RCP_EINVAL;
	*out = NULL;
	ep = calloc(1, sizeof *ep);
	if (!ep)
		return RCP_ENOMEM;
	ep->flags = cfg ? cfg->flags : 0;
	{
		int mode;
		int64_t spin;
		rcpi_wait_policy(&mode, &spin); /* RCP_WAIT forces it */
		if (mode == RCPI_WAIT_SPIN)
			ep->flags = (ep->flags & ~RCP_EP_SLEEP) | RCP_EP_SPIN;
		else if (mode == RCPI_WAIT_SLEEP)
			ep->flags = (ep->flags & ~RCP_EP_SPIN) | RCP_EP_SLEEP;
	}
	{
		/* The nic learns that every wait sleeps: it may then make
		 * sleeps cheaper at spinning's expense (udp: no lane). */
		struct rcp_nic_config nc = {0};
		if (cfg && cfg->nic)
			nc = *cfg->nic;
		if ((ep->flags & RCP_EP_SLEEP) && !(ep->flags & RCP_EP_SPIN))
			nc.flags |= RCP_NIC_SLEEPER;
		rc = rcp_nic_open(nic_addr, &nc, &ep->nic);
	}
	if (rc) {
		free(ep);
		return rc;
	}
	rcp_nic_query(ep->nic, &ep->info);
	ep->sleep_slack_ns = (uint64_t)rcpi_env_int("RCP_SLEEP_SLACK_US", 5000) * 1000u;

	rcpc_params_default(&p);
	p.mtu = ep->info.mtu;
	p.rx_frames = ep->info.rx_frames;
	p.epoch = random_epoch();
	if (getrandom(p.cookie_key, sizeof p.cookie_key, GRND_NONBLOCK) !=
	    (ssize_t)sizeof p.cookie_key) {
		/* No entropy yet (early boot): weaker, never fatal. */
		p.cookie_key[0] = now_ns() ^ ((uint64_t)p.epoch << 32);
		p.cookie_key[1] = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uintptr_t)ep;
	}
	p.flags = ep->flags;
	{
		uint32_t sess = cfg && cfg->session ? cfg->session : session_from_env();
		if (sess)
			p.session = sess; /* else the built-in default */
	}
	/* Zero is the default, as for every config field: a zeroed config
	 * must not turn the CRC off (RCP_CRC_OFF does that). */
	crc = cfg ? cfg->crc : RCP_CRC_DEFAULT;
	if (crc == RCP_CRC_DEFAULT) {
		const char *e = rcpi_env_str("RCP_CRC");
		crc = !e || !strcmp(e, "auto") ? RCP_CRC_AUTO : atoi(e) ? RCP_CRC_ON : RCP_CRC_OFF;
	}
	p.crc = crc < 0 ? !(ep->info.caps & RCP_NIC_CAP_CHECKED) : crc != RCP_CRC_OFF;
	p.peer_timeout = (uint64_t)rcpi_env_int("RCP_PEER_TIMEOUT", 5000) * 1000000ull;
	p.rto_min = (uint64_t)rcpi_env_int("RCP_RTO_MIN_US", (int64_t)(p.rto_min / 1000)) * 1000;
	ack_us = rcpi_env_int("RCP_ACK_DELAY_US", -1); /* unset: the default, per nic below */
	if (ack_us >= 0)
		p.ack_delay = (uint64_t)ack_us * 1000;
	p.credits =
	    cfg && cfg->credits ? cfg->credits : (uint32_t)rcpi_env_int("RCP_CREDITS", p.credits);
	p.unexp_bytes = cfg && cfg->unexp_bytes
	                    ? cfg->unexp_bytes
	                    : (size_t)rcpi_env_int("RCP_UNEXP_BYTES", (int64_t)p.unexp_bytes);
	{
		int64_t sb = rcpi_env_int("RCP_SEND_BUF", (int64_t)p.send_buf);
		p.send_buf = sb > 0 ? (size_t)sb : 0;
	}
	{
		/* Set by the user: where RMA starts stays there, crowded CPU
		 * or not (start.c, rcpi_rma_min). */
		int64_t rm = rcpi_env_int("RCP_RMA_MIN", -1);
		if (rm >= 0) {
			p.rma_min = (uint32_t)rm;
			p.rma_fixed = 1;
		}
	}
	p.rma_split = (uint64_t)rcpi_env_int("RCP_RMA_SPLIT", (int64_t)p.rma_split);
	if ((ep->info.caps & RCP_NIC_CAP_RELIABLE) &&
	    ((ep->info.caps & RCP_NIC_CAP_CHECKED) || !p.crc)) {
		/* Nothing is lost below us (shm): a "loss" could only be a peer
		 * that stalled, which resending does not help.  Keep the RTO as
		 * a safety net only, and no tail-loss probes.  A nic that
		 * delivers corrupted frames (the faults wrapper) loses them
		 * after all once our CRC drops them: not reliable then. */
		p.reliable = 1;
		if (p.rto_min < 50000000)
			p.rto_min = 50000000;
		p.time_wait = 0; /* no ack is lost: closing need not wait for resends */
		/* A delayed ack frees slots and returns credits, nothing else
		 * here: a stream is acked every ACK_EVERY frames anyway, and
		 * a sleep sends what is owed first (before_sleep).  Holding it
		 * 1 ms (well under the 50 ms RTO) rather than 50 us lets a
		 * reply carry it whatever the server's think time, and leaves
		 * the channel's timer key (TIMERS, LAZY KEYS) early for that
		 * long instead of recomputing it every 50 us (under callgrind,
		 * ~50x slower, that was every round trip: 76 instructions of an
		 * 8 B round trip, perf/callgrind.sh; session 19). */
		if (ack_us < 0)
			p.ack_delay = RELIABLE_ACK_DELAY_NS;
	}
	p.time_wait = (uint64_t)rcpi_env_int("RCP_TIME_WAIT_MS", (int64_t)(p.time_wait / 1000000)) *
	              1000000ull;
	p.epoch_per_endpoint = rcpi_env_int("RCP_TEST_EPOCH_PER_ENDPOINT", 0) != 0;

	io.ctx = ep;
	io.send = io_send;
	io.flush = io_flush;
	io.peer_add = io_peer_add;
	io.peer_remove = io_peer_remove;
	if (rcpi_nic_has_send_to(ep->nic))
		io.send_to = io_send_to;
	if (ep->info.caps & RCP_NIC_CAP_RMA) {
		io.mr_reg = io_mr_reg;
		io.mr_dereg = io_mr_dereg;
	}
	rc = rcpc_core_new(&p, &io, ep, &ep->core);
	if (rc) {
		rcp_nic_close(ep->nic);
		free(ep);
		return rc;
	}
	ep->burst = 1;
	ep->cbq = rcpc_cb_head(ep->core);
	ep->rmaq = rcpc_rma_queued(ep->core);
	{
		struct rcp_wait_src self = {
		    .fd = rcp_nic_fd(ep->nic), .progress = ep_look, .arm = ep_arm_src, .arg = ep};
		int mode = (ep->flags & RCP_EP_SPIN)    ? RCPI_WAIT_SPIN
		           : (ep->flags & RCP_EP_SLEEP) ? RCPI_WAIT_SLEEP
		                                        : RCPI_WAIT_DEFAULT;
		if (rcpi_waiter_init(&ep->waiter, mode, -1, &self)) {
			rcpc_core_free(ep->core);
			rcp_nic_close(ep->nic);
			free(ep);
			return RCP_ENOMEM;
		}
		ep->waiter.sleep_alone = ep_sleep;
		if (ep->info.solo_ns) /* the nic's own time alone */
			ep->waiter.solo_ns = ep->info.solo_ns;
	}
	*out = ep;
	return 0;
}

static int wait_until(rcp_ep *ep, int (*done)(void *), void *arg, int64_t timeout_ns)
{
	return rcpi_waiter_wait(&ep->waiter, done, arg, timeout_ns);
}

static int linger_done(void *arg)
{
	rcp_ep *ep = arg;
	return !rcpc_core_linger(ep->core, now_ns());
}

void rcp_ep_close(rcp_ep *ep)
{
	if (!ep)
		return;
	if (ep->cb_depth) {
		rcpi_warn("rcp_ep_close from a completion callback: refused (close after it)");
		return;
	}
	/* Linger: a send that completed at once (inline) may still be in
	 * flight, peers may be owed acks, and a peer that missed our last ack
	 * may still resend (core.c, CLOSE).  Progress until none of that is
	 * left, at most RCP_LINGER_MS and never past the peer timeout (a peer
	 * silent that long has failed its channels anyway).  Waits sleep
	 * between frames; slices of 5 ms notice the quiet end of TIME_WAIT,
	 * which no protocol timer marks. */
	{
		uint64_t now = now_ns(), until;
		int64_t ms = rcpi_env_int("RCP_LINGER_MS", 2000);
		int64_t pt = rcpi_env_int("RCP_PEER_TIMEOUT", 5000);
		if (ms > pt)
			ms = pt;
		until = now + (uint64_t)(ms > 0 ? ms : 0) * 1000000ull;
		while (!linger_done(ep) && (now = now_ns()) < until) {
			uint64_t left = until - now;
			int rc = wait_until(ep, linger_done, ep,
			                    (int64_t)(left < 5000000 ? left : 5000000));
			if (rc < 0 && rc != RCP_ETIMEDOUT)
				break;
		}
		rcpc_flush(ep->core, now_ns());
	}
	/* What is still pending fails with RCP_ECLOSED; its callbacks run
	 * now, and posts from them are refused (ep->closing). */
	ep->closing = 1;
	rcpc_core_shutdown(ep->core);
	run_callbacks(ep);
	rcpc_core_free(ep->core);
	rcp_nic_close(ep->nic);
	rcpi_waiter_fini(&ep->waiter);
	free(ep->names);
	free(ep);
}

int rcp_ep_addr(const rcp_ep *ep, char *buf, size_t len)
{
	if (!ep)
		return RCP_EINVAL;
	return rcp_nic_addr_str(ep->nic, buf, len);
}

rcp_nic *rcp_ep_nic(rcp_ep *ep)
{
	return ep ? ep->nic : NULL;
}

int rcp_ep_fd(const rcp_ep *ep)
{
	return ep ? rcp_nic_fd(ep->nic) : RCP_EINVAL;
}

int rcp_ep_get_stats(const rcp_ep *ep, struct rcp_ep_stats *st)
{
	if (!ep || !st)
		return RCP_EINVAL;
	rcpc_core_stats(ep->core, st);
	st->nic_polls = ep->polls;
	return 0;
}

/* One round of progress; returns requests completed or a negative code. */
static inline __attribute__((always_inline)) int progress(rcp_ep *ep)
{
	int n;

	ep->polls++;
	/* Idle polls ask for one frame (udp: recvfrom, not a 32-slot
	 * recvmmsg, ~0.5 us cheaper per poll); once frames flow, bursts. */
	n = ep->nic->ops->recv(ep->nic, ep->frames, ep->burst); /* as rcp_nic_recv, unchecked */
	if (n < 0)
		return n;
	/* An idle poll reads the clock only now and then: timers are tens of
	 * microseconds apart, a clock read costs ~27 ns here. */
	if (!n && !rcpc_due(ep->core, 0) && (++ep->idle_polls & 31)) {
		ep->burst = 1;
		callbacks(ep); /* e.g. sends posted since that completed at once */
		return 0;
	}
	return took(ep, n);
}

/* After a receive that got N frames (maybe 0): feed them to the core, let
 * it answer, fire due timers.  Returns the requests completed. */
static inline __attribute__((always_inline)) int took(rcp_ep *ep, int n)
{
	int done = 0;
	uint64_t now = ep_now(ep);

	/* Bursts only while frames come back to back (a stream); a lone
	 * frame (ping-pong, RPC) keeps polls single: the next frame is most
	 * likely the answer, and the cheaper poll sees it sooner. */
	if (n) {
		uint64_t t = ep->last_cycles;
		ep->burst = n > 1 || t - ep->last_rx_cycles < BURST_GAP_CYCLES ? BURST : 1;
		ep->last_rx_cycles = t;
		ep->frames_in += (unsigned)n;
	} else {
		ep->burst = 1;
	}
	for (int i = 0; i < n; i++) {
		const struct rcp_nic_frame *f = &ep->frames[i];
		rcpc_input(ep->core, f->peer, f->src, f->srclen, f->data, f->len, now);
	}
	if (n) {
		ep->nic->ops->release(ep->nic, ep->frames, n);
		/* Transfers the frames asked for go first: their FINs leave
		 * with the acks in one flush (rma_run ends with it). */
		done += RCPI_UNLIKELY(*ep->rmaq) ? rma_run(ep, now) : rcpc_flush(ep->core, now);
	}
	/* The deadline is the top of the core's timer heap: no walk. */
	if (rcpc_due(ep->core, now))
		done += rcpc_timers(ep->core, now);
	/* Transfers the flush or the timers asked for. */
	if (RCPI_UNLIKELY(*ep->rmaq))
		done += rma_run(ep, now);
	if (RCPI_UNLIKELY(ep->rma_completed)) {
		done += ep->rma_completed;
		ep->rma_completed = 0;
	}
	callbacks(ep);
	return done;
}

int rcp_progress(rcp_ep *ep)
{
	if (!ep)
		return RCP_EINVAL;
	return progress(ep);
}

/* When to wake for timer deadline D (> NOW).  Sleeping at once, the
 * timers left are loss recovery (RTO, tail-loss probe: tens of
 * microseconds) and keep-alives.  A short sleep costs two clock-event
 * reprogrammings, ~2.5 us per sleep on a VM, as much as the rest of the
 * wait; so a sleeping endpoint lets them run up to sleep_slack late. */
static uint64_t wake_at(const rcp_ep *ep, uint64_t d, uint64_t now)
{
	if ((ep->flags & RCP_EP_SLEEP) && d - now < ep->sleep_slack_ns)
		return now + ep->sleep_slack_ns;
	return d;
}

int64_t rcp_ep_timeout_ns(const rcp_ep *ep)
{
	uint64_t now, d;
	if (!ep)
		return RCP_EINVAL;
	d = rcpc_deadline(ep->core);
	if (d == UINT64_MAX)
		return -1;
	now = now_ns();
	return d > now ? (int64_t)(wake_at(ep, d, now) - now) : 0;
}

/* Before a sleep: sends the acks owed (nothing we send before we wake
 * could carry them, and the peer would wait for them), takes the exact
 * deadline and fires timers already due here rather than send the caller
 * round the progress loop (idle polls look at the clock only now and
 * then).  Returns RCP_EAGAIN when timers ran or are due (requests may
 * have completed: look before sleeping), else 0 with the deadline > NOW. */
static int before_sleep(rcp_ep *ep, uint64_t now)
{
	if (*ep->cbq) {
		run_callbacks(ep); /* queued outside progress (a post, a cancel) */
		return RCP_EAGAIN;
	}
	rcpc_ack_owed(ep->core, now);
	if (rcpc_deadline(ep->core) <= now) {
		int n = rcpc_timers(ep->core, now);
		if (*ep->rmaq)
			n += rma_run(ep, now); /* transfers the timers asked for */
		if (n > 0 || rcpc_deadline(ep->core) <= now)
			return RCP_EAGAIN;
	}
	return 0;
}

int rcp_ep_arm(rcp_ep *ep)
{
	uint64_t now;
	int rc;
	if (!ep)
		return RCP_EINVAL;
	now = now_ns();
	rc = before_sleep(ep, now);
	return rc ? rc : rcp_nic_arm(ep->nic);
}

/* ---- the endpoint as a wait source (common/wait.c) ---- */

/* One look: news if frames came or requests completed.
 *
 * ONE POLL PER LOOK.  A wait asks its DONE first in every round, and a
 * DONE often progresses this endpoint itself: relinked PVM's precv tests
 * the receive it posted (rcp_test) or probes its channel (rcp_probe).
 * Polling again right after it finds the ring as it just was and only
 * makes the round longer (until session 19 every look of a blocked precv
 * polled twice).  So when the endpoint progressed since this source's
 * last look, that progress was this look's poll: news if it took frames.
 * Every round still polls at least once (DONE's progress, or this one),
 * except at worst the first of a wait after the caller progressed
 * between waits; a round whose DONE does not progress (rcp_wait's)
 * polls here as before.  rcp_ep_stats.nic_polls counts the polls
 * (tests/test_rcp_api.c, t_one_poll_per_look). */
static int ep_look(void *arg)
{
	rcp_ep *ep = arg;
	uint64_t f = ep->look_frames;
	int rc = 0;
	if (ep->polls == ep->look_polls)
		rc = progress(ep);
	ep->look_polls = ep->polls;
	ep->look_frames = ep->frames_in;
	return rc < 0 ? rc : rc > 0 || ep->frames_in != f;
}

/* Before a sleep: acks, timers (before_sleep), the next deadline (the
 * sleep is shortened to it); then the nic is armed if ARM_NIC.  */
static int ep_arm(rcp_ep *ep, int64_t *timeout_ns, int arm_nic)
{
	uint64_t now = now_ns(), wake;
	if (before_sleep(ep, now))
		return RCP_EAGAIN;
	wake = wake_at(ep, rcpc_deadline(ep->core), now);
	if (wake != UINT64_MAX && (*timeout_ns < 0 || wake - now < (uint64_t)*timeout_ns))
		*timeout_ns = (int64_t)(wake - now);
	return arm_nic ? rcp_nic_arm(ep->nic) : 0;
}

/* The endpoint as its own waiter's first source: the nic is armed only
 * when others share the sleep (alone, ep_sleep's receive arms it). */
static int ep_arm_src(void *arg, int64_t *timeout_ns)
{
	rcp_ep *ep = arg;
	return ep_arm(ep, timeout_ns, ep->waiter.nsrc > 1);
}

/* Another endpoint's view of EP (rcp_ep_wait_add_ep): its nic is armed
 * always, since it never sleeps alone there.  It is looked at every
 * OTHER_EP_EVERY-th look of a spinning wait only: a udp endpoint's idle
 * look is a recvfrom (~0.3-0.5 µs), which on every look would double a
 * relinked PVM task's shm round trip when it also has a udp endpoint for
 * other hosts; its frames also wake a sleep at once (its fd). */
#define OTHER_EP_EVERY 8
static int ep_arm_other(void *arg, int64_t *timeout_ns)
{
	return ep_arm(arg, timeout_ns, 1);
}

/* Sleeps in the nic's receive, which returns the frames it woke for. */
static int ep_sleep(void *arg, int64_t timeout_ns)
{
	rcp_ep *ep = arg;
	int n = rcp_nic_recv_wait(ep->nic, ep->frames, ep->burst, timeout_ns);
	int rc;
	if (n < 0)
		return n;
	rc = took(ep, n);
	return rc < 0 ? rc : n > 0 || rc > 0;
}

int rcp_ep_wait_add(rcp_ep *ep, const struct rcp_wait_src *src)
{
	if (!ep || !src)
		return RCP_EINVAL;
	return rcpi_waiter_add(&ep->waiter, src);
}

int rcp_ep_wait_add_ep(rcp_ep *ep, rcp_ep *other)
{
	struct rcp_wait_src s = {0};
	if (!ep || !other || other == ep)
		return RCP_EINVAL;
	s.fd = rcp_nic_fd(other->nic);
	s.progress = ep_look;
	s.arm = ep_arm_other;
	s.arg = other;
	s.every = OTHER_EP_EVERY;
	return rcpi_waiter_add(&ep->waiter, &s);
}

int rcp_ep_wait_remove(rcp_ep *ep, int id)
{
	return ep ? rcpi_waiter_remove(&ep->waiter, id) : RCP_EINVAL;
}

int rcp_ep_wait(rcp_ep *ep, int (*done)(void *), void *arg, int64_t timeout_ns)
{
	if (!ep || !done)
		return RCP_EINVAL;
	return wait_until(ep, done, arg, timeout_ns);
}

int rcpi_ep_wait_mode(rcp_ep *ep, int mode, int (*done)(void *), void *arg, int64_t timeout_ns)
{
	int saved = ep->waiter.mode, rc;
	if (mode >= 0)
		ep->waiter.mode = mode;
	rc = rcpi_waiter_wait(&ep->waiter, done, arg, timeout_ns);
	ep->waiter.mode = saved;
	return rc;
}

int rcp_ep_wait_stats(rcp_ep *ep, struct rcp_wait_stats *st, int reset)
{
	if (!ep)
		return RCP_EINVAL;
	if (st)
		*st = ep->waiter.st;
	if (reset)
		memset(&ep->waiter.st, 0, sizeof ep->waiter.st);
	return 0;
}

/* ---- channels ---- */

static int name_peer(rcp_ep *ep, int peer, const char *addr)
{
	if (rcpi_grow_zeroed((void **)&ep->names, &ep->nnames, sizeof *ep->names, peer))
		return RCP_ENOMEM;
	snprintf(ep->names[peer].addr, sizeof ep->names[peer].addr, "%s", addr);
	return 0;
}

int rcp_connect(rcp_ep *ep, const char *addr, rcp_chan **out)
{
	int peer, rc;

	if (!ep || !addr || !out)
		return RCP_EINVAL;
	rc = rcp_nic_peer_add_str(ep->nic, addr, &peer);
	if (rc)
		return rc;
	rc = name_peer(ep, peer, addr);
	if (rc)
		return rc;
	return rcpc_chan_open(ep->core, peer, now_ns(), out);
}

rcp_chan *rcp_chan_find(rcp_ep *ep, const char *addr)
{
	if (!ep || !addr)
		return NULL;
	for (int i = 0; i < ep->nnames; i++)
		if (ep->names[i].addr[0] && !strcmp(ep->names[i].addr, addr))
			return rcpc_chan_by_peer(ep->core, i);
	return NULL;
}

void rcp_chan_close(rcp_chan *ch)
{
	if (ch)
		rcpc_chan_close(ch, now_ns());
}

int rcp_chan_peer_addr(const rcp_chan *ch, char *buf, size_t len)
{
	rcp_ep *ep;
	int peer;

	if (!ch || !buf || !len)
		return RCP_EINVAL;
	ep = rcpc_core_owner(rcpc_chan_core(ch));
	peer = rcpc_chan_peer(ch);
	if (peer >= ep->nnames || !ep->names[peer].addr[0])
		return RCP_ENOENT; /* an accepted peer known only by its blob */
	if (strlen(ep->names[peer].addr) >= len)
		return RCP_ERANGE;
	strcpy(buf, ep->names[peer].addr);
	return 0;
}

/* ---- for rcp/request.c (ep_int.h) ---- */

static rcp_ep *ep_of_chan(const rcp_chan *ch)
{
	return rcpc_core_owner(rcpc_chan_core(ch));
}

rcp_ep *rcpi_ep_of_chan(const rcp_chan *ch)
{
	return ep_of_chan(ch);
}

rcpc_core *rcpi_ep_core(const rcp_ep *ep)
{
	return ep->core;
}

int rcpi_ep_closing(const rcp_ep *ep)
{
	return ep->closing;
}

uint64_t rcpi_ep_now(rcp_ep *ep)
{
	return ep_now(ep);
}

/* rcp_test's progress (request.c): LTO takes the whole round into its
 * caller, one call less per look (session 20). */
inline __attribute__((always_inline)) int rcpi_ep_progress(rcp_ep *ep)
{
	return progress(ep);
}

void rcpi_ep_rma(rcp_ep *ep)
{
	if (RCPI_UNLIKELY(*ep->rmaq))
		ep->rma_completed += rma_run(ep, ep_now(ep));
}

void rcpi_ep_cb_drop(rcp_req *req, const struct rcp_status *st, void *user)
{
	cb_drop(req, st, user);
}

int rcp_chan_nic_peer(const rcp_chan *ch)
{
	return ch ? rcpc_chan_peer(ch) : RCP_EINVAL;
}

unsigned rcp_chan_restarts(const rcp_chan *ch)
{
	return ch ? rcpc_chan_restarts(ch) : 0;
}

int rcp_chan_heard(const rcp_chan *ch)
{
	return ch && rcpc_chan_peer_epoch(ch) != 0;
}

int rcp_chan_reconnect(rcp_chan **chp)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	uint32_t gone;
	rcp_ep *ep;
	int rc;

	if (!chp || !*chp)
		return RCP_EINVAL;
	ep = ep_of_chan(*chp);
	rc = rcp_chan_peer_addr(*chp, addr, sizeof addr);
	if (rc)
		return rc;
	gone = rcpc_chan_peer_epoch(*chp);
	rcp_chan_close(*chp);
	*chp = NULL;
	rc = rcp_connect(ep, addr, chp);
	if (!rc)
		rcpc_chan_ban_epoch(*chp, gone);
	return rc;
}

/* The endpoint CH belongs to, or NULL for NULL. */
rcp_ep *rcp_chan_ep(const rcp_chan *ch)
{
	return ch ? ep_of_chan(ch) : NULL;
}
