/*
 * nic/shm/slots.c — the shm backend: the receiver's slot table (scan, ring
 * activation and reset)
 * (design notes: nic/shm/shm_int.h).
 */
#include "nic/shm/shm_int.h"

/* Returns the peer index whose name is NAME, or RCP_NIC_PEER_NONE. */
int32_t rcpi_shm_peer_by_name(struct shm_nic *nic, const char *name, size_t n)
{
	for (uint32_t i = 0; i < nic->npeers; i++) {
		struct shm_peer *p = &nic->peers[i];
		if (p->used && p->namelen == n && !memcmp(p->name, name, n))
			return (int32_t)i;
	}
	return RCP_NIC_PEER_NONE;
}

static void act_remove(struct shm_nic *nic, uint32_t si)
{
	for (uint32_t i = 0; i < nic->nact; i++) {
		if (nic->act[i] == si) {
			memmove(&nic->act[i], &nic->act[i + 1],
			        (nic->nact - i - 1) * sizeof *nic->act);
			nic->nact--;
			break;
		}
	}
	if (nic->rr >= nic->nact)
		nic->rr = 0;
}

/* Returns slot SI to FREE with the next generation.  The sender has left
 * (CLOSED) and we hold none of the ring's frames. */
static void ring_reset(struct shm_nic *nic, uint32_t si)
{
	struct shm_ring *r = &nic->rings[si];
	struct shm_slot *s = r->slot;
	uint64_t v = atomic_load_explicit(&s->state, memory_order_acquire);

	if (r->state != R_IDLE)
		act_remove(nic, si);
	/* Give the memory back (reads as zeros afterwards); the next sender
	 * fallocates it again.  Harmless if it fails: the zero frontier
	 * invariant only needs the first header to be 0. */
	madvise(r->cells, (size_t)nic->ncells * CELL, MADV_REMOVE);
	atomic_store_explicit(cell_word(r->cells, 0), 0, memory_order_relaxed);
	atomic_store_explicit(&s->cons, 0, memory_order_relaxed);
	atomic_store_explicit(&s->prod, 0, memory_order_relaxed);
	s->sender_start = 0;
	s->sender_pidns = 0;
	s->namelen = 0;
	memset(s->name, 0, sizeof s->name);
	r->state = R_IDLE;
	r->closed = 0;
	r->cons = 0;
	r->peer = RCP_NIC_PEER_NONE;
	/* Release: a sender that acquires FREE(g+1) sees the reset ring. */
	atomic_store_explicit(&s->state, st_make(ST_FREE, ST_GEN(v) + 1, 0), memory_order_release);
	rcpi_debug("shm %s: slot %u freed (gen %u)", nic->name, si, ST_GEN(v) + 1);
}

void rcpi_shm_ring_broken(struct shm_nic *nic, struct shm_ring *r, uint64_t pos, uint64_t h,
                          const char *why)
{
	rcpi_err("shm %s: ring from %.*s is corrupt at cell %llu (header %#llx: %s); "
	         "ignoring that sender",
	         nic->name, (int)r->bloblen - 1, (const char *)r->blob + 1, (unsigned long long)pos,
	         (unsigned long long)h, why);
	r->state = R_BROKEN;
	nic->base.stats.rx_dropped++;
}

/* Starts polling slot SI, whose state word is V (ACTIVE or CLOSED). */
static void ring_activate(struct shm_nic *nic, uint32_t si, uint64_t v)
{
	struct shm_ring *r = &nic->rings[si];
	struct shm_slot *s = r->slot;
	size_t n = s->namelen;

	r->gen = ST_GEN(v);
	r->closed = ST_KIND(v) == ST_CLOSED;
	r->cons = atomic_load_explicit(&s->cons, memory_order_relaxed);
	r->blob[0] = RCPI_NIC_SHM;
	if (n > NAME_MAX_LEN || !name_ok(s->name, n)) {
		/* Claimant died while CLAIMING, or a foreign writer. */
		r->bloblen = 1;
		r->peer = RCP_NIC_PEER_NONE;
		r->state = R_BROKEN;
	} else {
		/* Copied once: the sender cannot change what frames say later. */
		memcpy(r->blob + 1, s->name, n);
		r->bloblen = (uint8_t)(1 + n);
		r->peer = rcpi_shm_peer_by_name(nic, s->name, n);
		r->state = r->closed ? R_CLOSING : R_ACTIVE;
	}
	nic->act[nic->nact++] = (uint16_t)si;
#ifdef MADV_POPULATE_READ
	/* Map the ring now rather than fault page by page on the first lap. */
	if (r->state != R_BROKEN)
		madvise(r->cells, (size_t)nic->ncells * CELL, MADV_POPULATE_READ);
#endif
	rcpi_debug("shm %s: slot %u active, sender %.*s pid %d", nic->name, si, (int)r->bloblen - 1,
	           (const char *)r->blob + 1, (int)ST_PID(v));
}

/* Frees rings whose sender left and that hold no frames any more. */
void rcpi_shm_reset_drained(struct shm_nic *nic)
{
	nic->need_reset = 0;
	for (uint32_t i = 0; i < nic->nact;) {
		uint32_t si = nic->act[i];
		struct shm_ring *r = &nic->rings[si];
		if (r->closed && (r->state == R_BROKEN ||
		                  !atomic_load_explicit(cell_word(r->cells, r->cons & nic->mask),
		                                        memory_order_acquire))) {
			ring_reset(nic, si); /* removes act[i] */
			continue;
		}
		i++;
	}
}

/* Brings the local ring table up to date with the slot states.  Slow
 * path: runs when `events` moved. */
void rcpi_shm_scan(struct shm_nic *nic)
{
	nic->events_seen = atomic_load_explicit(&nic->seg->events, memory_order_acquire);
	for (uint32_t si = 0; si < nic->nslots; si++) {
		struct shm_ring *r = &nic->rings[si];
		uint64_t v = atomic_load_explicit(&r->slot->state, memory_order_acquire);
		uint32_t k = ST_KIND(v);

		if (r->state == R_IDLE) {
			if (k == ST_ACTIVE || k == ST_CLOSED)
				ring_activate(nic, si, v);
		} else if (!r->closed && (k != ST_ACTIVE || ST_GEN(v) != r->gen)) {
			/* Sender left (orderly or marked dead): drain, then reset. */
			r->closed = 1;
			if (r->state == R_ACTIVE)
				r->state = R_CLOSING;
		}
	}
	rcpi_shm_reset_drained(nic);
}
