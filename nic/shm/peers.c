/*
 * nic/shm/peers.c — the shm backend: peers (the send side): attaching to a
 * peer's segment, claiming a slot, leaving
 * (design notes: nic/shm/shm_int.h).
 */
#include "nic/shm/shm_int.h"

/* Claims a free slot in the mapped segment of P.  Returns 0, RCP_EAGAIN
 * (all taken) or RCP_ENOMEM. */
static int peer_claim(struct shm_nic *nic, struct shm_peer *p, int fd, const struct shm_layout *l)
{
	uint32_t ns = p->seg->nslots;

	for (uint32_t k = 0; k < ns; k++) {
		/* Start at a pid-dependent slot: concurrent claimants rarely
		 * collide on the same CAS. */
		uint32_t si = (uint32_t)(k + (uint32_t)nic->pid) % ns;
		struct shm_slot *s = seg_slot(p->seg, si);
		uint64_t v = atomic_load_explicit(&s->state, memory_order_acquire);
		uint64_t claim;
		unsigned char *cells;

		if (ST_KIND(v) != ST_FREE)
			continue;
		claim = st_make(ST_CLAIMING, ST_GEN(v), nic->pid);
		if (!atomic_compare_exchange_strong_explicit(
		        &s->state, &v, claim, memory_order_acq_rel, memory_order_relaxed))
			continue;
		s->sender_start = nic->start;
		s->sender_pidns = nic->pidns;
		memset(s->name, 0, sizeof s->name);
		memcpy(s->name, nic->name, nic->namelen);
		s->namelen = nic->namelen;
		cells = seg_ring(p->seg, l, si);
		/* Reserve the ring's memory now: a full tmpfs must give an
		 * error here, not SIGBUS in the middle of a send. */
		if (fallocate(fd, 0, (off_t)(l->rings_off + (uint64_t)si * l->ring_bytes),
		              (off_t)l->ring_bytes) < 0 &&
		    errno != EOPNOTSUPP) {
			int e = errno;
			rcpi_err("shm %s: cannot allocate a ring at %s: %s", nic->name, p->name,
			         strerror(e));
			/* Undo the claim (unless someone reaped it meanwhile). */
			atomic_compare_exchange_strong_explicit(
			    &s->state, &claim, v, memory_order_acq_rel, memory_order_relaxed);
			return errno_rc(e);
		}
#ifdef MADV_POPULATE_WRITE
		/* Prefault our mapping of the ring: no page faults on the
		 * first lap. */
		madvise(cells, (size_t)l->ring_bytes, MADV_POPULATE_WRITE);
#endif
		p->slotidx = si;
		p->gen = ST_GEN(v);
		p->slot = s;
		p->cells = cells;
		p->prod = atomic_load_explicit(&s->cons, memory_order_relaxed);
		p->cons_cache = p->prod;
		p->zfront = p->prod + 1; /* the receiver's reset zeroed this one */
		/* CAS, not store: if someone wrongly reaped us while CLAIMING,
		 * leave the slot to the receiver and try the next one. */
		if (!atomic_compare_exchange_strong_explicit(
		        &s->state, &claim, st_make(ST_ACTIVE, ST_GEN(v), nic->pid),
		        memory_order_acq_rel, memory_order_relaxed))
			continue;
		atomic_fetch_add_explicit(&p->seg->events, 1, memory_order_release);
		return 0;
	}
	/* All taken.  Mark the slots of dead holders closed and wake the
	 * receiver so it resets them; the caller retries (RCP_EAGAIN). */
	if (rcpi_shm_reap_dead(p->seg, ns, nic->pidns)) {
		atomic_thread_fence(memory_order_seq_cst);
		rcpi_shm_db_ring(nic, p);
	}
	return RCP_EAGAIN;
}

/* Maps the segment of endpoint NAME and claims a ring in it. */
static int peer_connect(struct shm_nic *nic, struct shm_peer *p, const char *name, size_t n)
{
	struct shm_layout l;
	struct shm_seg *h = MAP_FAILED;
	struct stat st;
	char path[64];
	uint64_t deadline = 0;
	int fd, rc;

	seg_path(path, sizeof path, name, n);
	fd = shm_open(path, O_RDWR, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			return RCP_EPEER;
		rcpi_warn("shm %s: cannot open %s: %s", nic->name, path, strerror(errno));
		return errno_rc(errno);
	}
	/* The creator may be between shm_open and storing `magic`: wait for
	 * it, boundedly (a creator that died there leaves junk). */
	for (;;) {
		if (fstat(fd, &st) < 0) {
			rc = RCP_ESYS;
			goto out;
		}
		/* Only our own user's endpoints: a segment another user
		 * created under this name would get our frames and keys. */
		if ((rc = seg_trusted(&st, nic->name, path)))
			goto out;
		if ((uint64_t)st.st_size >= SEG_HDR_BYTES) {
			h = mmap(NULL, SEG_HDR_BYTES, PROT_READ, MAP_SHARED, fd, 0);
			if (h == MAP_FAILED) {
				rc = errno_rc(errno);
				goto out;
			}
			if (atomic_load_explicit(&h->magic, memory_order_acquire) == SHM_MAGIC)
				break;
			munmap(h, SEG_HDR_BYTES);
			h = MAP_FAILED;
		}
		if (!deadline)
			deadline = rcpi_now_ns() + CONNECT_WAIT_NS;
		else if (rcpi_now_ns() > deadline) {
			rcpi_warn("shm %s: %s never became ready", nic->name, path);
			rc = RCP_EPEER;
			goto out;
		}
		sched_yield();
	}
	/* Never trust the geometry: a mismatch must not make us map or write
	 * out of bounds. */
	rc = RCP_EPEER;
	if (h->version != SHM_VERSION || h->cell_bytes != CELL) {
		rcpi_warn("shm %s: %s has version %u (we speak %u)", nic->name, path, h->version,
		          SHM_VERSION);
		goto out;
	}
	if (h->nslots < 1 || h->nslots > SLOTS_MAX || h->ring_cells < RING_MIN / CELL ||
	    h->ring_cells > RING_MAX / CELL || (h->ring_cells & (h->ring_cells - 1)) ||
	    h->mtu < 1 || cells_for(h->mtu) > (h->ring_cells - 1) / 2 || h->nmrs > (1u << 20)) {
		rcpi_warn("shm %s: %s has a bad header", nic->name, path);
		goto out;
	}
	layout(h->nslots, h->ring_cells, h->nmrs, &l);
	if (h->seg_bytes != l.seg_bytes || (uint64_t)st.st_size < l.seg_bytes) {
		rcpi_warn("shm %s: %s has a bad size", nic->name, path);
		goto out;
	}
	if (atomic_load(&h->closed) ||
	    !rcpi_proc_alive(h->owner_pid, h->owner_start, h->owner_pidns, nic->pidns)) {
		rcpi_debug("shm %s: %s is stale", nic->name, path);
		goto out;
	}
	p->pid = h->owner_pid;
	p->start = h->owner_start;
	p->pidns = h->owner_pidns;
	p->ncells = h->ring_cells;
	p->mtu = h->mtu < nic->mtu ? h->mtu : nic->mtu;
	p->nmrs = h->nmrs;
	munmap(h, SEG_HDR_BYTES);
	h = MAP_FAILED;

	p->map_len = (size_t)l.seg_bytes;
	p->map = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p->map == MAP_FAILED) {
		p->map = NULL;
		rc = errno_rc(errno);
		goto out;
	}
	p->seg = p->map;
	p->mrs = seg_mrs(p->seg, &l);
	/* We only ever read the owner's registrations: a stray store of ours
	 * must not be able to grant access (see RMA). */
	if (mprotect((unsigned char *)p->map + l.mrs_off, (size_t)(l.rings_off - l.mrs_off),
	             PROT_READ) < 0)
		rcpi_debug("shm %s: mprotect of %s's table: %s", nic->name, path, strerror(errno));
	p->namelen = (uint8_t)n;
	memcpy(p->name, name, n);
	p->name[n] = 0;
	p->dblen = db_addr(&p->db, name, n);
	rc = peer_claim(nic, p, fd, &l);
	if (rc) {
		munmap(p->map, p->map_len);
		p->map = NULL;
		p->seg = NULL;
		p->mrs = NULL;
		goto out;
	}
	p->gone = 0; /* `dirty` stays: the index may still be in the list */
	p->last_check_ns = 0;
	rcpi_debug("shm %s: connected to %s, slot %u", nic->name, p->name, p->slotidx);
out:
	if (h != MAP_FAILED)
		munmap(h, SEG_HDR_BYTES);
	close(fd);
	return rc;
}

/* Unmaps P; with RELEASE, hands its slot back to the receiver first. */
void rcpi_shm_peer_disconnect(struct shm_nic *nic, struct shm_peer *p, int release)
{
	if (!p->map)
		return;
	if (release) {
		uint64_t v = st_make(ST_ACTIVE, p->gen, nic->pid);
		/* Fails harmlessly if the slot was already marked CLOSED. */
		atomic_compare_exchange_strong_explicit(&p->slot->state, &v,
		                                        st_make(ST_CLOSED, p->gen, nic->pid),
		                                        memory_order_acq_rel, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->seg->events, 1, memory_order_seq_cst);
		/* A sleeping receiver learns now, and frees the slot. */
		if (!p->gone && !atomic_load(&p->seg->closed))
			rcpi_shm_db_ring(nic, p);
	}
	munmap(p->map, p->map_len);
	p->map = NULL;
	p->seg = NULL;
	p->slot = NULL;
	p->cells = NULL;
}

static int peer_add_name(struct shm_nic *nic, const char *name, size_t n, int *out)
{
	struct shm_peer *p;
	int32_t idx;
	uint32_t i;
	int rc;

	if (!name_ok(name, n))
		return RCP_EADDR;
	idx = rcpi_shm_peer_by_name(nic, name, n);
	if (idx >= 0) {
		p = &nic->peers[idx];
		if (!p->gone) {
			*out = idx;
			return 0;
		}
		/* The same address again after its endpoint went away: attach
		 * to whatever endpoint holds the name now, same index. */
		rcpi_shm_peer_disconnect(nic, p, 1);
		rc = peer_connect(nic, p, name, n);
		if (rc)
			return rc;
		*out = idx;
		return 0;
	}
	for (i = 0; i < nic->npeers; i++)
		if (!nic->peers[i].used)
			break;
	if (i == nic->npeers) {
		if (nic->npeers == nic->cap) {
			uint32_t cap = nic->cap ? nic->cap * 2 : 8;
			struct shm_peer *np;
			uint32_t *nd;
			if (cap > (1u << 20))
				return RCP_EAGAIN;
			np = realloc(nic->peers, cap * sizeof *np);
			if (!np)
				return RCP_ENOMEM;
			nic->peers = np;
			nd = realloc(nic->dirty, cap * sizeof *nd);
			if (!nd)
				return RCP_ENOMEM;
			nic->dirty = nd;
			nic->cap = cap;
		}
		memset(&nic->peers[i], 0, sizeof nic->peers[i]);
	}
	p = &nic->peers[i];
	rc = peer_connect(nic, p, name, n);
	if (rc) {
		memset(p, 0, sizeof *p);
		return rc;
	}
	p->used = 1;
	if (i == nic->npeers)
		nic->npeers++;
	/* Frames already arriving from that endpoint now carry the index. */
	for (uint32_t k = 0; k < nic->nact; k++) {
		struct shm_ring *r = &nic->rings[nic->act[k]];
		if (r->bloblen == n + 1 && !memcmp(r->blob + 1, name, n))
			r->peer = (int32_t)i;
	}
	*out = (int)i;
	return 0;
}

int rcpi_shm_peer_add(rcp_nic *base, const void *blob, size_t len, int *peer)
{
	/* nic.c checks the length; the backend byte is checked here too (the
	 * dispatcher does not, whatever nic_int.h says). */
	if (*(const uint8_t *)blob != RCPI_NIC_SHM)
		return RCP_EADDR;
	return peer_add_name((struct shm_nic *)base, (const char *)blob + 1, len - 1, peer);
}

int rcpi_shm_peer_add_str(rcp_nic *base, const char *addr, int *peer)
{
	if (strncmp(addr, "shm:", 4))
		return RCP_EADDR;
	return peer_add_name((struct shm_nic *)base, addr + 4, strlen(addr + 4), peer);
}

int rcpi_shm_peer_remove(rcp_nic *base, int peer)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	struct shm_peer *p;

	if ((uint32_t)peer >= nic->npeers || !nic->peers[peer].used)
		return RCP_EINVAL;
	p = &nic->peers[peer];
	if (p->dirty) {
		/* Its deferred doorbell check happens now, not never. */
		atomic_thread_fence(memory_order_seq_cst);
		rcpi_shm_db_ring(nic, p);
		for (uint32_t i = 0; i < nic->ndirty; i++) {
			if (nic->dirty[i] == (uint32_t)peer) {
				nic->dirty[i] = nic->dirty[--nic->ndirty];
				break;
			}
		}
	}
	rcpi_shm_peer_disconnect(nic, p, 1);
	for (uint32_t i = 0; i < nic->nslots; i++)
		if (nic->rings[i].peer == peer)
			nic->rings[i].peer = RCP_NIC_PEER_NONE;
	memset(p, 0, sizeof *p);
	while (nic->npeers && !nic->peers[nic->npeers - 1].used)
		nic->npeers--;
	return 0;
}
