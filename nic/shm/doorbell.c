/*
 * nic/shm/doorbell.c — the shm backend: the doorbell, arming and waiting
 * (design notes: nic/shm/shm_int.h).
 *
 * ---- The doorbell (the wait fd) --------------------------------------------
 *
 * Each endpoint owns a non-blocking AF_UNIX datagram socket bound in the
 * abstract namespace as "\0rcp-shm-NAME"; it is the fd rcp_nic_fd() gives.
 * It is a Dekker handshake between the receiver's `sleeping` flag and the
 * sender's header word:
 *
 *   receiver arm():  drain socket; sleeping = 1 (seq_cst);
 *                    re-check every ring (seq_cst loads);
 *                    anything there -> sleeping = 0, RCP_EAGAIN
 *   sender send():   publish header (seq_cst store);
 *                    if sleeping (seq_cst load) and exchange(sleeping,0)
 *                    returned 1 -> sendto() one byte
 *
 * In the single total order of seq_cst operations either the sender's load
 * comes after the receiver's store (the sender rings) or the receiver's
 * re-check comes after the sender's publish (the receiver sees the frame):
 * no lost wake-up.  The exchange makes exactly one of many senders ring.
 * Frames sent with RCP_NIC_MORE defer that check to the next send without
 * it or rcp_nic_flush() (one fence for the whole batch).  recv() touches
 * the socket only if the endpoint was armed, so the spinning path makes no
 * system calls.  A stale byte can at worst cause one spurious wake-up; arm()
 * drains before it sets the flag, so an armed, quiet endpoint's fd is not
 * readable.  stats.wakeups counts doorbells a sender rang.
 */
#include "nic/shm/shm_int.h"

/* Empties the doorbell socket.  Slow path: armed endpoints only. */
static void db_drain(struct shm_nic *nic)
{
	char buf[64];
	for (int i = 0; i < 1024; i++)
		if (recv(nic->dbfd, buf, sizeof buf, MSG_DONTWAIT) < 0)
			break;
}

/* Rings P's doorbell if its receiver sleeps.  The caller has ordered its
 * header stores before this (seq_cst store or fence). */
void rcpi_shm_db_ring(struct shm_nic *nic, struct shm_peer *p)
{
	if (!atomic_load_explicit(&p->seg->sleeping, memory_order_seq_cst))
		return;
	/* Only the sender that flips 1 -> 0 rings: one byte per sleep. */
	if (!atomic_exchange_explicit(&p->seg->sleeping, 0, memory_order_relaxed))
		return;
	if (sendto(nic->dbfd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&p->db,
	           p->dblen) == 1) {
		nic->base.stats.wakeups++;
		return;
	}
	/* EAGAIN: its queue is full, so it is awake anyway.  ECONNREFUSED:
	 * nobody holds the name any more; is the receiver gone? */
	if (errno == ECONNREFUSED || errno == ENOENT) {
		p->last_check_ns = 0;
		rcpi_shm_peer_check(nic, p);
	} else if (errno != EAGAIN) {
		rcpi_debug("shm: doorbell to %s: %s", p->name, strerror(errno));
	}
}

/* Doorbell checks deferred by RCP_NIC_MORE. */
void rcpi_shm_db_flush(struct shm_nic *nic)
{
	uint32_t n = nic->ndirty;
	/* Nothing published since the last check: no fence (callers flush
	 * after every batch, most often with nothing to ring). */
	if (!n)
		return;
	nic->ndirty = 0;
	atomic_thread_fence(memory_order_seq_cst);
	for (uint32_t i = 0; i < n; i++) {
		struct shm_peer *p = &nic->peers[nic->dirty[i]];
		p->dirty = 0;
		if (p->used && !p->gone)
			rcpi_shm_db_ring(nic, p);
	}
}

int rcpi_shm_flush(rcp_nic *base)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	if (nic->ndirty)
		rcpi_shm_db_flush(nic);
	return 0;
}

/* Receiver-side periodic work: senders that died.  Slow path. */
static void maybe_reap(struct shm_nic *nic)
{
	uint64_t now = rcpi_now_ns();
	if (now - nic->last_reap_ns < RECEIVER_CHECK_NS)
		return;
	nic->last_reap_ns = now;
	if (rcpi_shm_reap_dead(nic->seg, nic->nslots, nic->pidns))
		rcpi_shm_scan(nic);
}

void rcpi_shm_disarm(struct shm_nic *nic)
{
	nic->armed = 0;
	atomic_store_explicit(&nic->seg->sleeping, 0, memory_order_relaxed);
	db_drain(nic);
}

int rcpi_shm_fd(const rcp_nic *base)
{
	return ((const struct shm_nic *)base)->dbfd;
}

/* Nonzero if a frame or a slot event is waiting.  No system calls. */
int rcpi_shm_pending(rcp_nic *base)
{
	struct shm_nic *nic = (struct shm_nic *)base;

	if (atomic_load_explicit(&nic->seg->events, memory_order_relaxed) != nic->events_seen)
		return 1;
	for (uint32_t i = 0; i < nic->nact; i++) {
		struct shm_ring *r = &nic->rings[nic->act[i]];
		if (r->state != R_BROKEN &&
		    atomic_load_explicit(cell_word(r->cells, r->cons & nic->mask),
		                         memory_order_relaxed))
			return 1;
	}
	return 0;
}

int rcpi_shm_arm(rcp_nic *base)
{
	struct shm_nic *nic = (struct shm_nic *)base;

	maybe_reap(nic);
	/* Slot changes are handled here, not reported as "frames may be
	 * waiting": a new sender with nothing sent yet must not keep the
	 * receiver from sleeping. */
	if (atomic_load_explicit(&nic->seg->events, memory_order_relaxed) != nic->events_seen)
		rcpi_shm_scan(nic);
	if (nic->need_reset)
		rcpi_shm_reset_drained(nic);
	/* A byte left from an earlier wake-up must not make the fd readable. */
	db_drain(nic);
	nic->armed = 1;
	atomic_store_explicit(&nic->seg->sleeping, 1, memory_order_seq_cst);
	/* The re-check half of the handshake (seq_cst loads). */
	if (atomic_load_explicit(&nic->seg->events, memory_order_seq_cst) != nic->events_seen)
		goto busy;
	for (uint32_t i = 0; i < nic->nact; i++) {
		struct shm_ring *r = &nic->rings[nic->act[i]];
		if (r->state != R_BROKEN &&
		    atomic_load_explicit(cell_word(r->cells, r->cons & nic->mask),
		                         memory_order_seq_cst))
			goto busy;
	}
	return 0;
busy:
	atomic_store_explicit(&nic->seg->sleeping, 0, memory_order_relaxed);
	return RCP_EAGAIN;
}
