/*
 * nic/shm/ring.c — the shm backend: the ring (sending and receiving frames)
 * (design notes: nic/shm/shm_int.h).
 *
 * ---- The ring protocol ----------------------------------------------------
 *
 * A ring is an array of ring_cells (a power of two) 64-byte cells.  Indices
 * are absolute 64-bit cell counts (never wrap in practice); the cell is
 * index & (ring_cells - 1).  A frame occupies ceil((8 + len) / 64) whole
 * cells: an 8-byte header word, then the payload, so the payload is
 * contiguous and handed to the receiver in place (zero copy).
 *
 *   header word: bit 63 VALID | bits 40..62 check | bit 32 WRAP | bits 0..31 len
 *
 * `check` is the low 23 bits of the header's own cell index; it costs
 * nothing and makes a misbehaving sender's garbage look wrong rather than
 * like a frame.  A frame that does not fit before the end of the ring is
 * preceded by a WRAP header at the current index and placed at cell 0.
 *
 * The consumer never writes to cells (only a reset does).  It polls ONE
 * word: the header at its consumer index; zero means "nothing yet".  The
 * cells ahead hold whatever the last lap left, payload bytes included,
 * which could look like anything, so the producer keeps a zero frontier:
 *
 *   INVARIANT: the first word of every cell in [prod, zfront) is 0,
 *              prod < zfront <= cons + ring_cells   (zfront: sender-private)
 *
 * To publish a frame at index P of C cells (next = P + C) the producer
 *   (1) copies the payload;
 *   (2) if zfront <= next, stores 0 into the first word of `next` (rare:
 *       only when the ring was nearly full at the previous send);
 *   (3) stores the header at P with release semantics;
 *   (4) zeroes first words from zfront up to min(next + ZERO_AHEAD,
 *       cons + ring_cells) and moves zfront there.
 * A consumer that acquires header P also sees the zero at `next`: it was
 * stored before (3), in (2) or in step (4) of an earlier send.  Step (4)
 * comes after the publish on purpose: stores commit in program order (x86
 * TSO), and a zero store just before the header would make the header wait
 * for one more cache-line transfer (the line after P is usually shared
 * with the polling consumer, e.g. by adjacent-line prefetch).  Measured
 * here: 8-byte round trip 0.45 -> 0.34 us.  The zeroed lines are also
 * owned by the producer by the time it writes frames into them.
 *
 * Step (2) needs one cell beyond the frame, so a ring never holds more
 * than ring_cells - 1 cells; the free-space test is
 *
 *   prod + skip + C + 1 - cons <= ring_cells     (skip: cells lost to WRAP)
 *
 * The sender caches `cons` and re-reads the shared value (acquire) only
 * when the cached one says "full", so in steady state the consumer-index
 * line is not touched by the sender at all.  The receiver releases frames
 * by storing `cons` with release semantics after it has finished reading
 * them, which is what lets the sender reuse those cells.
 *
 * The producer index `prod` in shared memory is informational (tools,
 * diagnostics); the receiver never needs it.
 *
 * rx_frames (the window RCP may use) is (ring_cells - M) / M with M the
 * cells of an MTU frame: W frames use at most W*M cells, plus at most M-1
 * wasted by one WRAP, plus the cell after the last frame.
 *
 * ---- Memory ordering -------------------------------------------------------
 *
 *   payload, zero stores ((2) of this send, (4) of earlier ones)
 *     --release-->  header store  (then this send's (4) stores)
 *   header load (acquire)  -->  payload reads  --release-->  cons store
 *   cons load (acquire, only when full)  -->  overwriting those cells
 *   slot state: CAS/stores release, loads acquire; events: release/acquire
 *   registration entry (a seqlock whose "odd" value is key 0):
 *     owner:  key = 0 (dereg) ... fence(release), base/len/access,
 *             key = K (release)
 *     peer:   key == K (acquire), base/len/access, fence(acquire),
 *             key == K again
 *
 * A receiver never trusts ring contents: a bad check field, WRAP at cell
 * 0, a length above the MTU or a frame crossing the ring end marks the
 * ring broken (logged, counted in rx_dropped); it is no longer read and is
 * reset when its sender leaves.  All reads stay inside the mapping.
 */
#include "nic/shm/shm_int.h"

/* Slow path of send: the ring looked full with the cached consumer index. */
static int send_full(struct shm_nic *nic, struct shm_peer *p, uint64_t need)
{
	p->cons_cache = atomic_load_explicit(&p->slot->cons, memory_order_acquire);
	if (p->prod + need - p->cons_cache <= p->ncells)
		return 0;
	nic->base.stats.tx_eagain++;
	/* Frames batched with RCP_NIC_MORE must not wait for a flush the
	 * caller may never make while it retries: a sleeping receiver would
	 * never drain them. */
	if (nic->ndirty)
		rcpi_shm_db_flush(nic);
	/* A receiver that died never drains: this is where we notice. */
	return rcpi_shm_peer_check(nic, p) ? RCP_EPEER : RCP_EAGAIN;
}

/* Copies N bytes of a frame into its cells.  A small frame (an RCP
 * header of 48 bytes, an 8 B payload) in 8-byte words, the last one
 * overlapping the one before, inline: libc's memcpy for each segment, its
 * call and size dispatch, was a third of the send of an 8 B message
 * (perf/callgrind.sh, session 20: -46 instructions per frame). */
static inline void copy_in(unsigned char *d, const void *src, size_t n)
{
	typedef struct {
		uint64_t a, b;
	} w16;
	const unsigned char *s = src;
	w16 v;
	uint64_t x;

	if (n >= 16 && n <= 64) {
		for (size_t i = 0; i + 16 < n; i += 16) {
			memcpy(&v, s + i, 16);
			memcpy(d + i, &v, 16);
		}
		memcpy(&v, s + n - 16, 16);
		memcpy(d + n - 16, &v, 16);
	} else if (n >= 8 && n < 16) {
		memcpy(&x, s, 8);
		memcpy(d, &x, 8);
		memcpy(&x, s + n - 8, 8);
		memcpy(d + n - 8, &x, 8);
	} else {
		memcpy(d, s, n);
	}
}

/* Moves the zero frontier up to ZERO_AHEAD cells past NEXT, within free
 * space.  Runs after the publish, so these stores commit after the header
 * (TSO keeps stores in order) and stay off the receiver's critical path;
 * they are visible before any later header, which is all that matters. */
static inline void zero_ahead(struct shm_peer *p, uint64_t next)
{
	uint64_t lim = next + ZERO_AHEAD, room = p->cons_cache + p->ncells;
	uint32_t mask = p->ncells - 1;

	if (lim > room)
		lim = room; /* cells from cons + ncells on are still in use */
	for (uint64_t z = p->zfront; z < lim; z++)
		atomic_store_explicit(cell_word(p->cells, z & mask), 0, memory_order_relaxed);
	if (lim > p->zfront)
		p->zfront = lim;
}

int rcpi_shm_send(rcp_nic *base, int peer, const struct iovec *iov, int iovcnt, size_t total,
                  unsigned flags)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	struct shm_peer *p;
	uint64_t pos, off, skip, need, next, h;
	uint32_t cells, mask;
	unsigned char *d;
	_Atomic uint64_t *hw;

	if (RCPI_UNLIKELY((uint32_t)peer >= nic->npeers || !nic->peers[peer].used))
		return RCP_EINVAL;
	p = &nic->peers[peer];
	if (RCPI_UNLIKELY(p->gone || atomic_load_explicit(&p->seg->closed, memory_order_relaxed)))
		return rcpi_shm_peer_check(nic, p);
	if (RCPI_UNLIKELY(total > p->mtu))
		return RCP_EMSGSIZE;

	mask = p->ncells - 1;
	cells = cells_for(total);
	pos = p->prod;
	off = pos & mask;
	/* A frame never straddles the ring end: WRAP and start at cell 0. */
	skip = off + cells > p->ncells ? p->ncells - off : 0;
	need = skip + cells + 1; /* +1: `next` must be a free, zero cell */
	if (RCPI_UNLIKELY(pos + need - p->cons_cache > p->ncells)) {
		int rc = send_full(nic, p, need);
		if (rc)
			return rc;
	}

	next = pos + skip + cells; /* where the next frame's header goes */
	d = p->cells + (((pos + skip) & mask) << CELL_SHIFT);
	h = FRAME_HDR;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len) {
			copy_in(d + h, iov[i].iov_base, iov[i].iov_len);
			h += iov[i].iov_len;
		}
	}
	/* Zero-ahead: the next header must read 0 before this one is
	 * published.  Normally the zero frontier is already past it and this
	 * store (which would have to commit before the header, costing a
	 * cache-line transfer on the critical path) is skipped. */
	if (RCPI_UNLIKELY(p->zfront <= next)) {
		atomic_store_explicit(cell_word(p->cells, next & mask), 0, memory_order_relaxed);
		p->zfront = next + 1;
	}
	h = HDR_VALID | hdr_check(pos + skip) | total;
	hw = (_Atomic uint64_t *)(void *)d;
	if (skip) {
		/* The frame at cell 0 first, then the WRAP the receiver polls. */
		atomic_store_explicit(hw, h, memory_order_release);
		h = HDR_VALID | hdr_check(pos) | HDR_WRAP;
		hw = cell_word(p->cells, off);
	}
	p->prod = next;
	nic->base.stats.tx_frames++;
	nic->base.stats.tx_bytes += total;
	if (flags & RCP_NIC_MORE) {
		atomic_store_explicit(hw, h, memory_order_release);
		if (!p->dirty) {
			p->dirty = 1;
			nic->dirty[nic->ndirty++] = (uint32_t)peer;
		}
	} else {
		/* seq_cst: the publish is ordered before reading `sleeping`
		 * (the doorbell handshake); on x86 this is one xchg. */
		atomic_store_explicit(hw, h, memory_order_seq_cst);
		if (RCPI_UNLIKELY(nic->ndirty))
			rcpi_shm_db_flush(nic);
		rcpi_shm_db_ring(nic, p);
	}
	atomic_store_explicit(&p->slot->prod, next, memory_order_relaxed);
	zero_ahead(p, next);
	return 0;
}

/* Reads up to MAX frames of ring SI starting at its consumer index. */
static inline int ring_read(struct shm_nic *nic, uint32_t si, struct rcp_nic_frame *fr, int max)
{
	struct shm_ring *r = &nic->rings[si];
	uint64_t pos = r->cons, off, h = 0;
	uint32_t len, cells;
	int n = 0;

	if (RCPI_UNLIKELY(r->state == R_BROKEN))
		return 0;
	while (n < max) {
		unsigned char *c;
		off = pos & nic->mask;
		c = r->cells + (off << CELL_SHIFT);
		h = atomic_load_explicit((_Atomic uint64_t *)(void *)c, memory_order_acquire);
		if (!h)
			break;
		if (RCPI_UNLIKELY((h & (HDR_VALID | (HDR_CHECK_MASK << HDR_CHECK_SHIFT))) !=
		                  (HDR_VALID | hdr_check(pos)))) {
			rcpi_shm_ring_broken(nic, r, pos, h, "bad check");
			break;
		}
		if (RCPI_UNLIKELY(h & HDR_WRAP)) {
			if (!off) {
				rcpi_shm_ring_broken(nic, r, pos, h, "wrap at cell 0");
				break;
			}
			pos += nic->ncells - off;
			continue;
		}
		len = (uint32_t)h;
		cells = cells_for(len);
		if (RCPI_UNLIKELY(len > nic->mtu || off + cells > nic->ncells)) {
			rcpi_shm_ring_broken(nic, r, pos, h, "bad length");
			break;
		}
		pos += cells;
		fr[n].data = c + FRAME_HDR;
		fr[n].len = len;
		fr[n].peer = r->peer;
		fr[n].src = r->blob;
		fr[n].srclen = r->bloblen;
		fr[n].reserved = 0;
		fr[n].token = (uintptr_t)(pos << TOKEN_SLOT_BITS | si);
		n++;
	}
	if (RCPI_UNLIKELY(r->closed && !n && !h))
		nic->need_reset = 1;
	return n;
}

int rcpi_shm_recv(rcp_nic *base, struct rcp_nic_frame *fr, int max)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	uint32_t nact, k;
	int n = 0;

	if (RCPI_UNLIKELY(nic->armed))
		rcpi_shm_disarm(nic);
	if (RCPI_UNLIKELY(atomic_load_explicit(&nic->seg->events, memory_order_relaxed) !=
	                  nic->events_seen))
		rcpi_shm_scan(nic);
	nact = nic->nact;
	if (nact == 1) {
		/* One sender (a pair, a client of one server): no turns to
		 * take (session 20: -10 instructions a poll). */
		n = ring_read(nic, nic->act[0], fr, max);
	} else {
		/* Round robin: each call starts one ring further, so no
		 * sender can starve another by keeping its ring full. */
		k = nic->rr;
		for (uint32_t left = nact; left && n < max; left--) {
			n += ring_read(nic, nic->act[k], fr + n, max - n);
			if (++k == nact)
				k = 0;
		}
		if (nact && ++nic->rr >= nact)
			nic->rr = 0;
	}
	if (RCPI_UNLIKELY(nic->need_reset))
		rcpi_shm_reset_drained(nic);
	return n;
}

void rcpi_shm_release(rcp_nic *base, struct rcp_nic_frame *fr, int n)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	struct shm_ring *r = NULL;
	uint64_t bytes = 0, cnt = 0;

	for (int i = 0; i < n; i++) {
		uint32_t si = (uint32_t)(fr[i].token & TOKEN_SLOT_MASK);
		uint64_t end = (uint64_t)fr[i].token >> TOKEN_SLOT_BITS;
		struct shm_ring *q;

		if (RCPI_UNLIKELY(si >= nic->nslots))
			continue;
		q = &nic->rings[si];
		/* Only forward, and by at most one ring: a stale or repeated
		 * release must not hand out cells still in use. */
		if (RCPI_UNLIKELY(end - q->cons - 1 >= nic->ncells))
			continue;
		if (q != r) {
			if (r)
				atomic_store_explicit(&r->slot->cons, r->cons,
				                      memory_order_release);
			r = q;
		}
		q->cons = end;
		bytes += fr[i].len;
		cnt++;
	}
	if (r)
		atomic_store_explicit(&r->slot->cons, r->cons, memory_order_release);
	nic->base.stats.rx_frames += cnt;
	nic->base.stats.rx_bytes += bytes;
	/* The last frames of a sender that left: free its slot now, so the
	 * next sender need not wait for our next recv. */
	if (RCPI_UNLIKELY(r && r->closed))
		rcpi_shm_reset_drained(nic);
}
