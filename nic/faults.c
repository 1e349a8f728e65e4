/*
 * nic/faults.c — a fault-injecting wrapper around any nic endpoint.
 *
 * rcp_nic_open() wraps an endpoint here when rcp_nic_config.faults or
 * RCP_FAULTS holds a spec such as
 *
 *     drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,delay=0.01,delay_us=200,seed=7
 *
 * Keys may come in any order and any subset; rates are probabilities in
 * [0,1] applied to each frame independently.  Spaces around items are
 * ignored; an empty item (",,", trailing comma), a key given twice, an
 * unknown key, a malformed number or a value out of range makes the whole
 * spec invalid (RCP_EINVAL), with a warning that quotes the offending item:
 * a fault spec that silently does less than asked would make a test pass
 * for the wrong reason.  delay_us is 0..60000000 (default 100), seed any
 * 64-bit number, decimal or 0x-hex (default 1).
 *
 * What the faults do.  All of them act on the SEND side, on frames given
 * to rcp_nic_send(); RMA (get/put) is synchronous and checked by contract
 * and is passed through untouched, as is everything on the receive side.
 *   drop     the frame is not sent.  The backend never sees it, so a
 *            dropped send to a vanished peer returns 0, not RCP_EPEER, as
 *            on a real network; the next frame that gets through reports
 *            the error.
 *   dup      the frame is sent twice (back to back when the backend has
 *            room; otherwise the second copy is queued, see "held" below).
 *   corrupt  1-3 distinct bits, anywhere in the frame, are flipped in a
 *            copy; the caller's memory is never written.  A duplicate of
 *            a corrupted frame carries the same damage (damage happens
 *            "on the link" before the copy).  Empty frames cannot be
 *            corrupted and are not counted.
 *   reorder  the frame is held back and sent right after the next frame
 *            to the same destination that is not itself held back, so a
 *            run of k reorder decisions is overtaken by one frame.  If
 *            nothing follows, the frame goes out at the next flush, recv,
 *            pending or arm call: held frames are never lost.
 *   delay    the frame is held for delay_us and goes out at the first
 *            send/flush/recv/pending/arm call after that.  Delay beats
 *            reorder when a frame draws both.
 * Drop beats everything.  The wrapper's capabilities drop ORDERED when
 * reorder, delay or dup > 0 (a queued duplicate may arrive late), RELIABLE
 * when drop or dup > 0, CHECKED when corrupt > 0.
 *
 * Determinism.  Decisions come from xoshiro256** seeded (via splitmix64)
 * by `seed` alone.  Every frame the wrapper ACCEPTS (send returns 0)
 * consumes exactly nine draws, whatever is decided, so the decisions for
 * the k-th accepted frame -- dropped? duplicated? corrupted, and which
 * bits? chosen for reorder/delay? -- depend only on (seed, k, frame
 * length).  A send that fails (RCP_EAGAIN from the backend, RCP_EPEER...)
 * rewinds the generator, so a caller that retries after backpressure gets
 * the very same decisions: the pattern does not depend on timing or on
 * how full the backend was.  What is NOT reproducible:
 *   - when a delayed frame goes out (it depends on the clock, the only
 *     timing-dependent fault), hence the arrival order around it;
 *   - whether a reorder/delay decision can be honoured: the held pool is
 *     bounded, and when it is full the frame is sent at once without that
 *     fault (its other faults still apply); how full it is depends on
 *     delay timing;
 *   - where a frame the backend refused (EAGAIN) while held ends up in
 *     the stream, and whether a duplicate the backend refused survives
 *     (it is held if the pool has room, else lost and not counted);
 *   - whether a reorder decision is visible: a held frame released by
 *     flush/recv with nothing after it was not overtaken.
 * With delay=0 and a backend that never says EAGAIN, the same sequence of
 * send/flush/recv calls gives a bit-identical stream of frames.  Two
 * endpoints given the same seed (e.g. both through RCP_FAULTS) make the
 * same decisions for their k-th frames; give them different seeds in
 * cfg->faults if that correlation matters.
 *
 * Held frames (reorder, delay, a duplicate the backend refused) live in a
 * pool of MTU-sized slots allocated at wrap time: no allocation per frame.
 * The pool holds POOL_BYTES worth of MTU frames, clamped to
 * [POOL_MIN, POOL_MAX] slots; the untouched part of a large slab costs
 * only address space.  Held copies are handed to the backend WITHOUT
 * RCP_NIC_MORE, so the backend has finished with the slot when send
 * returns and the slot can be reused at once; frames passed straight
 * through keep the caller's iov and flags, so batching still works for
 * them.  Because a frame the wrapper drops or holds never reaches the
 * backend, a caller's send without RCP_NIC_MORE would not end the
 * backend's batch; the wrapper then calls the backend's flush itself, so
 * the caller may reuse its buffers exactly as the contract says.
 *
 * A held frame goes to the backend when it is due; if the backend says
 * RCP_EAGAIN it stays held and is retried at the next call; any other
 * error discards it (the peer is gone: a real network would lose it too).
 * There is no timer: a delayed frame leaves only when the endpoint is
 * used.  So that a process that only waits still emits it, pending()
 * releases due frames, and arm() refuses to let the caller sleep
 * (RCP_EAGAIN) while frames are held; rcp_nic_wait() then returns early
 * and the caller polls until the delay has passed -- a bounded busy wait
 * of at most delay_us, accepted for a testing tool.  close() sends what is
 * still held, due or not (best effort, bounded), then closes the backend.
 *
 * Statistics.  rcp_nic_get_stats() reads nic->stats directly, so every
 * operation ends by copying the backend's counters into the wrapper's and
 * adding the wrapper's own f_* counters (summed, so wrappers may nest).
 * tx_* therefore count what reached the backend, duplicates included.
 * The f_* counters count faults that took effect: f_dropped frames
 * dropped, f_duplicated extra copies handed to the backend, f_corrupted
 * corrupted frames handed to the backend, f_reordered held frames that a
 * later frame to the same destination really overtook, f_delayed delayed
 * frames handed to the backend.
 *
 * Capabilities.  The wrapper clears ORDERED, RELIABLE and CHECKED as its
 * faults require and passes the rest through.  RMA and SHARED_SEG stay:
 * the faults model a link that loses and mangles frames, and a one-sided
 * copy or a load from a shared segment crosses no link (RMA is forwarded
 * unfaulted, below).  So remote fetch runs under this wrapper: its attach,
 * its results sent as messages and the liveness watch are frames and are
 * faulted; its slots are memory and are not.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic/nic_int.h"

#define POOL_BYTES   (4u << 20)
#define POOL_MIN     16u
#define POOL_MAX     256u
#define DELAY_US_MAX 60000000ull

/* Held frame states. */
enum {
	H_READY,   /* send at the next opportunity */
	H_DELAY,   /* send once due_ns has passed */
	H_REORDER, /* send after a newer frame to the same peer, or at flush */
};

/* What to count when a held frame's first copy reaches the backend. */
enum {
	HF_CORRUPT = 1u << 0,
	HF_DELAY = 1u << 1,
	HF_REORDERED = 1u << 2,
};

struct held {
	struct held *next;   /* in hold order, or in the free list */
	unsigned char *data; /* MTU bytes in the slab */
	uint64_t seq;        /* accept index of the frame */
	uint64_t due_ns;     /* H_DELAY */
	uint32_t len;
	int peer;
	uint8_t state;
	uint8_t copies;     /* copies still to send */
	uint8_t first_sent; /* the remaining copies are duplicates */
	uint8_t flags;      /* HF_* */
};

struct fault_counts {
	uint64_t dropped, duplicated, reordered, corrupted, delayed;
};

struct faults_nic {
	struct rcpi_nic_wrap w; /* first: base, inner (nic/wrap.c) */
	struct rcpi_faults_spec spec;
	uint64_t rng[4];
	uint64_t seq; /* frames accepted so far */
	uint32_t mtu;
	uint32_t caps;
	bool inner_batched; /* the backend may hold pointers to caller data */
	bool marked;        /* mark_overtaken() freed a frame during a pass */
	unsigned n_delay;   /* slots in H_DELAY */
	unsigned n_reorder; /* slots in H_REORDER */
	struct held *head, **tailp, *free;
	struct held *slots;
	unsigned char *slab;
	unsigned char *scratch; /* corrupted copy of a pass-through frame */
	struct fault_counts fc;
	char name[32]; /* "faults+udp" */
};

/* ---- random numbers: xoshiro256**, seeded through splitmix64 ---------- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* True with probability P: 53 random bits against P, so p=0 never and
 * p=1 always fires. */
static bool rng_chance(uint64_t s[4], double p)
{
	return (double)(rng_next(s) >> 11) * 0x1.0p-53 < p;
}

struct decision {
	bool drop, dup, reorder, corrupt, delay;
	uint64_t bits[4]; /* how many bits to flip, and where */
};

/* Always the same number of draws, whatever is decided, so that frame k's
 * decisions depend on k alone (see the top of the file). */
static void decide(struct faults_nic *f, struct decision *d)
{
	d->drop = rng_chance(f->rng, f->spec.drop);
	d->dup = rng_chance(f->rng, f->spec.dup);
	d->reorder = rng_chance(f->rng, f->spec.reorder);
	d->corrupt = rng_chance(f->rng, f->spec.corrupt);
	d->delay = rng_chance(f->rng, f->spec.delay);
	for (int i = 0; i < 4; i++)
		d->bits[i] = rng_next(f->rng);
}

/* Flips 1-3 DISTINCT bits of P[0..LEN): flipping one bit twice would undo
 * it and deliver an intact frame counted as corrupted. */
static void corrupt_bits(unsigned char *p, size_t len, const uint64_t r[4])
{
	uint64_t nbits = (uint64_t)len * 8, pos[3];
	int n = 1 + (int)(r[0] % 3);

	for (int i = 0; i < n; i++) {
		uint64_t b = r[1 + i] % nbits;
		for (int j = 0; j < i; j++) {
			if (pos[j] == b) {
				b = (b + 1) % nbits;
				j = -1; /* recheck against all: nbits >= 8 > n */
			}
		}
		pos[i] = b;
		p[b >> 3] ^= (unsigned char)(1u << (b & 7));
	}
}

static void gather(unsigned char *dst, const struct iovec *iov, int iovcnt)
{
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}

/* ---- statistics ------------------------------------------------------- */

static void sync_stats(struct faults_nic *f)
{
	struct rcp_nic_stats s = f->w.inner->stats;

	s.f_dropped += f->fc.dropped;
	s.f_duplicated += f->fc.duplicated;
	s.f_reordered += f->fc.reordered;
	s.f_corrupted += f->fc.corrupted;
	s.f_delayed += f->fc.delayed;
	f->w.base.stats = s;
}

/* ---- the held pool ---------------------------------------------------- */

static struct held *slot_get(struct faults_nic *f)
{
	struct held *h = f->free;
	if (h)
		f->free = h->next;
	return h;
}

static void set_state(struct faults_nic *f, struct held *h, uint8_t state)
{
	if (h->state == H_DELAY)
		f->n_delay--;
	else if (h->state == H_REORDER)
		f->n_reorder--;
	h->state = state;
	if (state == H_DELAY)
		f->n_delay++;
	else if (state == H_REORDER)
		f->n_reorder++;
}

/* Appends H (filled in except for state) to the hold queue. */
static void hold(struct faults_nic *f, struct held *h, uint8_t state)
{
	h->state = H_READY;
	set_state(f, h, state);
	h->next = NULL;
	*f->tailp = h;
	f->tailp = &h->next;
}

/* Removes *PP == H from the hold queue and frees its slot. */
static void unhold(struct faults_nic *f, struct held **pp, struct held *h)
{
	set_state(f, h, H_READY);
	*pp = h->next;
	if (!h->next)
		f->tailp = pp;
	h->next = f->free;
	f->free = h;
}

/* A frame newer than SEQ has gone to PEER: frames held for reordering
 * towards PEER have now been overtaken and may go. */
static void mark_overtaken(struct faults_nic *f, int peer, uint64_t seq)
{
	for (struct held *h = f->head; h && f->n_reorder; h = h->next) {
		if (h->state == H_REORDER && h->peer == peer && h->seq < seq) {
			set_state(f, h, H_READY);
			h->flags |= HF_REORDERED;
			f->marked = true;
		}
	}
}

/* ---- sending ---------------------------------------------------------- */

static int inner_send(struct faults_nic *f, int peer, const struct iovec *iov, int iovcnt,
                      size_t total, unsigned flags)
{
	int rc = f->w.inner->ops->send(f->w.inner, peer, iov, iovcnt, total, flags);
	if (!rc)
		f->inner_batched = (flags & RCP_NIC_MORE) != 0;
	return rc;
}

/* Sends H's remaining copies.  Returns 0 when all went out, RCP_EAGAIN
 * (keep H, retry later) or another error (H is to be discarded). */
static int emit(struct faults_nic *f, struct held *h)
{
	struct iovec v = {.iov_base = h->data, .iov_len = h->len};
	int rc;

	while (h->copies) {
		/* Never RCP_NIC_MORE: the slot must be free when we return. */
		rc = inner_send(f, h->peer, &v, 1, h->len, 0);
		if (rc) {
			if (rc != RCP_EAGAIN)
				rcpi_debug("faults: held frame to peer %d discarded: %s", h->peer,
				           rcp_strerror(rc));
			return rc;
		}
		h->copies--;
		if (h->first_sent) {
			f->fc.duplicated++;
			continue;
		}
		h->first_sent = 1;
		f->fc.corrupted += (h->flags & HF_CORRUPT) != 0;
		f->fc.delayed += (h->flags & HF_DELAY) != 0;
		f->fc.reordered += (h->flags & HF_REORDERED) != 0;
		/* Any copies left are duplicates: they go as soon as possible. */
		set_state(f, h, H_READY);
		if (f->n_reorder)
			mark_overtaken(f, h->peer, h->seq);
	}
	return 0;
}

/* How far progress() goes. */
enum {
	P_DUE,      /* ready frames and delayed frames whose time has come */
	P_PROGRESS, /* and frames held for reordering (flush/recv/wait) */
	P_ALL,      /* everything, due or not (close, peer removal) */
};

/* Sends held frames allowed by MODE (only those to PEER if PEER >= 0), in
 * hold order.  Stops at the first RCP_EAGAIN and returns it, so that the
 * frames behind keep their order; returns 0 otherwise. */
static int progress(struct faults_nic *f, int mode, int peer)
{
	uint64_t now = 0;
	struct held **pp, *h;
	bool go;
	int rc;

	if (!f->head)
		return 0;
	if (f->n_delay && mode != P_ALL)
		now = rcpi_now_ns();
	do {
		f->marked = false;
		for (pp = &f->head; (h = *pp);) {
			switch (h->state) {
			case H_DELAY: go = mode == P_ALL || now >= h->due_ns; break;
			case H_REORDER: go = mode >= P_PROGRESS; break;
			default: go = true; break;
			}
			if (!go || (peer >= 0 && h->peer != peer)) {
				pp = &h->next;
				continue;
			}
			rc = emit(f, h);
			if (rc == RCP_EAGAIN)
				return rc;
			unhold(f, pp, h);
		}
		/* A frame sent late in the pass may have overtaken one already
		 * passed over: go round again. */
	} while (f->marked);
	return 0;
}

/* The caller sent without RCP_NIC_MORE but nothing reached the backend
 * without it: end the backend's batch so the caller may reuse its data. */
static void end_batch(struct faults_nic *f)
{
	if (f->inner_batched && f->w.inner->ops->flush(f->w.inner) == 0)
		f->inner_batched = false;
}

static int fnic_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                     unsigned flags)
{
	struct faults_nic *f = (struct faults_nic *)nic;
	const struct iovec *siov = iov;
	int scnt = iovcnt, rc;
	unsigned sflags = flags;
	uint64_t saved[4], seq = f->seq;
	struct decision d;
	struct iovec one;
	struct held *h;
	bool corrupted = false;

	/* Checked here because held copies live in MTU-sized slots. */
	if (total > f->mtu)
		return RCP_EMSGSIZE;
	if (f->head)
		(void)progress(f, P_DUE, -1);

	memcpy(saved, f->rng, sizeof saved);
	decide(f, &d);

	if (d.drop) {
		f->fc.dropped++;
		goto accepted;
	}
	if ((d.delay || d.reorder) && (h = slot_get(f))) {
		gather(h->data, iov, iovcnt);
		h->len = (uint32_t)total;
		h->peer = peer;
		h->seq = seq;
		h->copies = d.dup ? 2 : 1;
		h->first_sent = 0;
		h->flags = d.delay ? HF_DELAY : 0;
		if (d.corrupt && total) {
			corrupt_bits(h->data, total, d.bits);
			h->flags |= HF_CORRUPT;
		}
		if (d.delay)
			h->due_ns = rcpi_now_ns() + f->spec.delay_ns;
		hold(f, h, d.delay ? H_DELAY : H_REORDER);
		goto accepted;
	}

	if (d.corrupt && total) {
		gather(f->scratch, iov, iovcnt);
		corrupt_bits(f->scratch, total, d.bits);
		one.iov_base = f->scratch;
		one.iov_len = total;
		siov = &one;
		scnt = 1;
		sflags = 0; /* the scratch buffer is reused by the next frame */
		corrupted = true;
	}
	rc = inner_send(f, peer, siov, scnt, total, sflags);
	if (rc) {
		/* Not accepted: the caller will retry, and must meet the same
		 * decisions whatever the backend's state was. */
		memcpy(f->rng, saved, sizeof saved);
		sync_stats(f);
		return rc;
	}
	f->fc.corrupted += corrupted;
	if (d.dup) {
		rc = inner_send(f, peer, siov, scnt, total, sflags);
		if (!rc) {
			f->fc.duplicated++;
		} else if (rc == RCP_EAGAIN && (h = slot_get(f))) {
			gather(h->data, siov, scnt);
			h->len = (uint32_t)total;
			h->peer = peer;
			h->seq = seq;
			h->copies = 1;
			h->first_sent = 1;
			h->flags = 0;
			hold(f, h, H_READY);
		}
		/* else the duplicate is lost, uncounted: the frame itself went. */
	}
	if (f->n_reorder) {
		f->marked = false;
		mark_overtaken(f, peer, seq);
		if (f->marked)
			(void)progress(f, P_DUE, -1);
	}
accepted:
	f->seq++;
	if (!(flags & RCP_NIC_MORE))
		end_batch(f);
	sync_stats(f);
	return 0;
}

static int fnic_flush(rcp_nic *nic)
{
	struct faults_nic *f = (struct faults_nic *)nic;
	int rc = progress(f, P_PROGRESS, -1), rc2;

	rc2 = f->w.inner->ops->flush(f->w.inner);
	if (!rc2)
		f->inner_batched = false;
	sync_stats(f);
	return rc2 ? rc2 : rc;
}

/* ---- receiving and waiting: forwarded, after releasing held frames ---- */

static int fnic_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max)
{
	struct faults_nic *f = (struct faults_nic *)nic;
	int n;

	if (f->head)
		(void)progress(f, P_PROGRESS, -1);
	n = f->w.inner->ops->recv(f->w.inner, frames, max);
	sync_stats(f);
	return n;
}

static void fnic_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct faults_nic *f = (struct faults_nic *)nic;

	f->w.inner->ops->release(f->w.inner, frames, n);
	sync_stats(f);
}

/* No timer wakes us for a held frame, so never let the caller sleep while
 * one is held: "frames may be waiting" makes it poll again. */
static int fnic_arm(rcp_nic *nic)
{
	struct faults_nic *f = (struct faults_nic *)nic;
	int rc;

	if (f->head)
		(void)progress(f, P_PROGRESS, -1);
	rc = f->head ? RCP_EAGAIN : f->w.inner->ops->arm(f->w.inner);
	sync_stats(f);
	return rc;
}

/* Pending concerns receiving, but it is also what a waiting sender calls
 * over and over: emit due frames here so they do not wait for a send. */
static int fnic_pending(rcp_nic *nic)
{
	struct faults_nic *f = (struct faults_nic *)nic;
	int rc;

	if (f->head)
		(void)progress(f, P_PROGRESS, -1);
	rc = f->w.inner->ops->pending(f->w.inner);
	sync_stats(f);
	return rc;
}

/* ---- the rest: forwarded ---------------------------------------------- */

static void fnic_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	const struct faults_nic *f = (const struct faults_nic *)nic;

	f->w.inner->ops->query(f->w.inner, info);
	info->backend = f->name;
	info->caps = f->caps;
}

/* The index may be reused for another address at once, so frames held for
 * it must not linger: send them now (best effort), discard the rest. */
static int fnic_peer_remove(rcp_nic *nic, int peer)
{
	struct faults_nic *f = (struct faults_nic *)nic;
	struct held **pp, *h;
	int rc;

	(void)progress(f, P_ALL, peer);
	for (pp = &f->head; (h = *pp);) {
		if (h->peer == peer)
			unhold(f, pp, h);
		else
			pp = &h->next;
	}
	rc = f->w.inner->ops->peer_remove(f->w.inner, peer);
	sync_stats(f);
	return rc;
}

static int fnic_mr_dereg(rcp_nic_mr *mr)
{
	const struct rcpi_nic_ops *ops = mr->nic->ops;
	return ops->mr_dereg && ops->mr_dereg != fnic_mr_dereg ? ops->mr_dereg(mr) : RCP_EINVAL;
}

static int fnic_mr_pack(const rcp_nic_mr *mr, void *rkey, size_t *len)
{
	const struct rcpi_nic_ops *ops = mr->nic->ops;
	return ops->mr_pack && ops->mr_pack != fnic_mr_pack ? ops->mr_pack(mr, rkey, len)
	                                                    : RCP_EINVAL;
}

static void fnic_close(rcp_nic *nic)
{
	struct faults_nic *f = (struct faults_nic *)nic;
	uint64_t deadline = rcpi_now_ns() + 10000000; /* 10 ms of retrying */
	unsigned lost = 0;

	/* Best effort: a backend that stays full (nobody reading) cannot
	 * take them, and close must not hang. */
	while (progress(f, P_ALL, -1) == RCP_EAGAIN && rcpi_now_ns() < deadline) {
		(void)f->w.inner->ops->flush(f->w.inner);
		rcpi_cpu_relax();
	}
	for (struct held *h = f->head; h; h = h->next)
		lost++;
	if (lost)
		rcpi_debug("faults: %u held frames lost at close", lost);
	end_batch(f);
	f->w.inner->ops->close(f->w.inner);
	free(f->slots);
	free(f->slab);
	free(f->scratch);
	free(f);
}

static const struct rcpi_nic_ops faults_ops = {
    .name = "faults",
    .id = 0, /* not an address: never in the backend table */
    .open = NULL,
    .close = fnic_close,
    .query = fnic_query,
    .addr_str = rcpi_wrap_addr_str,
    .addr_blob = rcpi_wrap_addr_blob,
    .peer_add = rcpi_wrap_peer_add,
    .peer_add_str = rcpi_wrap_peer_add_str,
    .peer_remove = fnic_peer_remove,
    .send = fnic_send,
    .flush = fnic_flush,
    .recv = fnic_recv,
    .release = fnic_release,
    .fd = rcpi_wrap_fd,
    .arm = fnic_arm,
    .pending = fnic_pending,
    .mr_reg = rcpi_wrap_mr_reg,
    .mr_dereg = fnic_mr_dereg,
    .mr_pack = fnic_mr_pack,
    .get = rcpi_wrap_get,
    .put = rcpi_wrap_put,
};

int rcpi_nic_faults_wrap(rcp_nic *inner, const char *spec, rcp_nic **out)
{
	struct rcp_nic_info info;
	struct faults_nic *f;
	uint64_t sm;
	size_t slot_bytes;
	unsigned n;
	int rc;

	if (!inner || !spec || !out)
		return RCP_EINVAL;
	*out = NULL;
	f = calloc(1, sizeof *f);
	if (!f)
		return RCP_ENOMEM;
	rc = rcpi_faults_parse(spec, &f->spec);
	if (rc) {
		free(f);
		return rc;
	}

	memset(&info, 0, sizeof info);
	inner->ops->query(inner, &info);
	f->w.inner = inner;
	f->mtu = info.mtu;
	f->caps = info.caps; /* RMA and SHARED_SEG included: see Capabilities */
	if (f->spec.reorder > 0 || f->spec.delay > 0 || f->spec.dup > 0)
		f->caps &= ~(uint32_t)RCP_NIC_CAP_ORDERED;
	if (f->spec.drop > 0 || f->spec.dup > 0)
		f->caps &= ~(uint32_t)RCP_NIC_CAP_RELIABLE;
	if (f->spec.corrupt > 0)
		f->caps &= ~(uint32_t)RCP_NIC_CAP_CHECKED;
	snprintf(f->name, sizeof f->name, "faults+%s", info.backend ? info.backend : "?");

	slot_bytes = f->mtu ? f->mtu : 1;
	n = (unsigned)(POOL_BYTES / slot_bytes);
	n = n < POOL_MIN ? POOL_MIN : n > POOL_MAX ? POOL_MAX : n;
	f->slots = calloc(n, sizeof *f->slots);
	f->slab = malloc(n * slot_bytes);
	f->scratch = malloc(slot_bytes);
	if (!f->slots || !f->slab || !f->scratch) {
		free(f->slots);
		free(f->slab);
		free(f->scratch);
		free(f);
		return RCP_ENOMEM;
	}
	for (unsigned i = n; i-- > 0;) {
		f->slots[i].data = f->slab + i * slot_bytes;
		f->slots[i].next = f->free;
		f->free = &f->slots[i];
	}
	f->tailp = &f->head;

	sm = f->spec.seed;
	for (int i = 0; i < 4; i++)
		f->rng[i] = splitmix64(&sm);

	f->w.base.ops = &faults_ops;
	f->w.base.spin_ns = inner->spin_ns;
	sync_stats(f);
	rcpi_info("faults: %s drop=%g dup=%g reorder=%g corrupt=%g delay=%g delay_us=%llu "
	          "seed=%llu, %u held slots",
	          f->name, f->spec.drop, f->spec.dup, f->spec.reorder, f->spec.corrupt,
	          f->spec.delay, (unsigned long long)(f->spec.delay_ns / 1000),
	          (unsigned long long)f->spec.seed, n);
	*out = &f->w.base;
	return 0;
}

/* ---- the spec parser -------------------------------------------------- */

enum { K_RATE, K_USEC, K_SEED };

static const struct {
	const char *name;
	int kind;
} keys[] = {
    {"drop", K_RATE},  {"dup", K_RATE},      {"reorder", K_RATE}, {"corrupt", K_RATE},
    {"delay", K_RATE}, {"delay_us", K_USEC}, {"seed", K_SEED},
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool all_digits(const char *s, const char *set)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!strchr(set, *s))
			return false;
	return true;
}

/* Parses one "key=value" item, ITEM[0..LEN), into S.  SEEN tracks keys
 * already given. */
static int parse_item(const char *spec, const char *item, size_t len, struct rcpi_faults_spec *s,
                      unsigned *seen)
{
	const char *eq, *k = item, *ke, *v, *ve = item + len;
	char val[64], *end;
	size_t klen, vlen, i;

	while (k < ve && is_space(*k))
		k++;
	while (ve > k && is_space(ve[-1]))
		ve--;
	if (k == ve) {
		rcpi_warn("faults spec \"%s\": empty item (stray comma?)", spec);
		return RCP_EINVAL;
	}
	eq = memchr(k, '=', (size_t)(ve - k));
	if (!eq) {
		rcpi_warn("faults spec \"%s\": '%.*s' is not key=value", spec, (int)(ve - k), k);
		return RCP_EINVAL;
	}
	for (ke = eq; ke > k && is_space(ke[-1]);)
		ke--;
	for (v = eq + 1; v < ve && is_space(*v);)
		v++;
	klen = (size_t)(ke - k);
	vlen = (size_t)(ve - v);

	for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (strlen(keys[i].name) == klen && !memcmp(keys[i].name, k, klen))
			break;
	if (i == sizeof keys / sizeof keys[0]) {
		rcpi_warn("faults spec \"%s\": unknown key '%.*s' (known: drop dup reorder "
		          "corrupt delay delay_us seed)",
		          spec, (int)klen, k);
		return RCP_EINVAL;
	}
	if (*seen & (1u << i)) {
		rcpi_warn("faults spec \"%s\": '%.*s' given twice", spec, (int)klen, k);
		return RCP_EINVAL;
	}
	*seen |= 1u << i;
	if (!vlen || vlen >= sizeof val)
		goto bad_number;
	memcpy(val, v, vlen);
	val[vlen] = 0;

	errno = 0;
	switch (keys[i].kind) {
	case K_RATE: {
		double x = strtod(val, &end);
		if (end == val || *end)
			goto bad_number;
		/* Written so that NaN fails too. */
		if (!(x >= 0.0 && x <= 1.0)) {
			rcpi_warn("faults spec \"%s\": '%.*s' out of range (a rate is 0..1)", spec,
			          (int)(ve - k), k);
			return RCP_EINVAL;
		}
		switch (i) {
		case 0: s->drop = x; break;
		case 1: s->dup = x; break;
		case 2: s->reorder = x; break;
		case 3: s->corrupt = x; break;
		default: s->delay = x; break;
		}
		break;
	}
	case K_USEC: {
		unsigned long long x;
		if (!all_digits(val, "0123456789"))
			goto bad_number;
		x = strtoull(val, &end, 10);
		if (errno == ERANGE || x > DELAY_US_MAX) {
			rcpi_warn("faults spec \"%s\": '%.*s' out of range (0..%llu)", spec,
			          (int)(ve - k), k, DELAY_US_MAX);
			return RCP_EINVAL;
		}
		s->delay_ns = x * 1000;
		break;
	}
	default: {
		bool hex = val[0] == '0' && (val[1] == 'x' || val[1] == 'X');
		unsigned long long x;
		/* strtoull alone would take "-1" and octal "010". */
		if (!all_digits(val + (hex ? 2 : 0), hex ? "0123456789abcdefABCDEF" : "0123456789"))
			goto bad_number;
		x = strtoull(val, &end, hex ? 16 : 10);
		if (errno == ERANGE) {
			rcpi_warn("faults spec \"%s\": '%.*s' out of range (64 bits)", spec,
			          (int)(ve - k), k);
			return RCP_EINVAL;
		}
		s->seed = x;
		break;
	}
	}
	return 0;

bad_number:
	rcpi_warn("faults spec \"%s\": '%.*s' is not a valid number", spec, (int)(ve - k), k);
	return RCP_EINVAL;
}

int rcpi_faults_parse(const char *spec, struct rcpi_faults_spec *out)
{
	struct rcpi_faults_spec s = {.delay_ns = 100000, .seed = 1};
	const char *p, *comma;
	unsigned seen = 0;
	int rc;

	if (!spec || !out)
		return RCP_EINVAL;
	for (p = spec; is_space(*p); p++)
		;
	if (*p) {
		for (p = spec;; p = comma + 1) {
			comma = strchr(p, ',');
			rc =
			    parse_item(spec, p, comma ? (size_t)(comma - p) : strlen(p), &s, &seen);
			if (rc)
				return rc;
			if (!comma)
				break;
		}
	}
	*out = s;
	return 0;
}
