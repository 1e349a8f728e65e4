/*
 * nic/shm/rma.c — the shm backend: memory registration and RMA (cross-memory
 * attach)
 * (design notes: nic/shm/shm_int.h).
 *
 * ---- RMA -------------------------------------------------------------------
 *
 * As an HCA checks an rkey against its memory-region table, get/put check
 * against the OWNER's record, never against what the peer sent.  The owner
 * keeps one entry per registration in its segment: {key, base, len,
 * access}, key a fresh random 64-bit value (the entry's generation: never
 * reused, 0 while the entry is free).  An rkey is only {pid, table index,
 * key}; offsets come with each call.  get/put check the pid against the
 * peer, read the entry (a seqlock, see Memory ordering: an entry rewritten
 * under us reads as a key mismatch), require the same key, the access bit,
 * and [offset, offset+len) inside the entry's length (overflow-safe), then
 * copy at base + offset with process_vm_readv/writev, looping over partial
 * transfers.  So an edited key cannot reach past the region, into another
 * one, or write a read-only one, and a deregistered region's key is dead
 * (RCP_EACCES).  The table lies on pages of its own that peers map
 * read-only: a stray store of a peer cannot grant access.  (A hostile
 * process of the same uid could map it writable, but such a process may
 * also ptrace the owner: the check is against forged or stale keys, as on
 * the emulated paths, not against the owner's own user.)  What the check
 * cannot cover: an owner that deregisters while a peer's copy is under way
 * (the copy may still land, as on an HCA).  CMA needs ptrace permission
 * over the peer (same uid and Yama ptrace_scope 0, or CAP_SYS_PTRACE):
 * EPERM is reported as RCP_EPERM with a hint.
 */
#include "nic/shm/shm_int.h"

#ifdef HAVE_PROCESS_VM_READV

static uint64_t random64(void)
{
	static _Atomic uint64_t ctr;
	uint64_t z;
	if (getrandom(&z, sizeof z, GRND_NONBLOCK) == (ssize_t)sizeof z && z)
		return z;
	/* Fallback: splitmix64 of time, pid and a counter. */
	z = rcpi_now_ns() ^ ((uint64_t)getpid() << 32) ^
	    atomic_fetch_add(&ctr, 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 1;
}

/* What a peer gets: which entry of whose table, and the entry's random
 * key (its generation).  No address, length or access: those are read from
 * the owner's table on every access, so editing a key cannot widen it. */
struct shm_rkey {
	uint8_t id, version, pad[2];
	uint32_t index;
	int32_t pid;
	uint32_t pad2;
	uint64_t key;
};
_Static_assert(sizeof(struct shm_rkey) == RKEY_BYTES, "rkey size");
_Static_assert(RKEY_BYTES <= RCP_NIC_RKEY_MAX, "rkey too large");

int rcpi_shm_mr_reg(rcp_nic *base, void *addr, size_t len, unsigned access, rcp_nic_mr **out)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	struct shm_mr *m;
	uint32_t i, idx = NMRS;

	for (i = 0; i < NMRS; i++) {
		uint32_t j = (nic->mr_hint + i) % NMRS;
		if (!(nic->mr_used[j / 64] & (1ull << (j % 64)))) {
			idx = j;
			break;
		}
	}
	if (idx == NMRS) {
		rcpi_warn("shm %s: all %u registrations in use", nic->name, NMRS);
		return RCP_ENOMEM;
	}
	m = calloc(1, sizeof *m);
	if (!m)
		return RCP_ENOMEM;
	m->base.nic = base;
	m->addr = addr;
	m->len = len;
	m->access = access;
	m->index = idx;
	m->key = random64();
	nic->mr_used[idx / 64] |= 1ull << (idx % 64);
	nic->mr_hint = (idx + 1) % NMRS;
	/* The entry's key is 0 (free) while we write the region; the fence
	 * orders these stores after the 0 stored when it was last freed (see
	 * RMA: peers read the entry like a seqlock). */
	{
		struct shm_mrent *e = &nic->mrs[idx];
		atomic_thread_fence(memory_order_release);
		atomic_store_explicit(&e->base, (uint64_t)(uintptr_t)addr, memory_order_relaxed);
		atomic_store_explicit(&e->len, (uint64_t)len, memory_order_relaxed);
		atomic_store_explicit(&e->access, access, memory_order_relaxed);
		/* Peers check the region under this key on every transfer. */
		atomic_store_explicit(&e->key, m->key, memory_order_release);
	}
	m->next = nic->mr_list;
	if (m->next)
		m->next->prev = m;
	nic->mr_list = m;
	*out = &m->base;
	return 0;
}

int rcpi_shm_mr_dereg(rcp_nic_mr *base)
{
	struct shm_mr *m = (struct shm_mr *)base;
	struct shm_nic *nic = (struct shm_nic *)base->nic;

	/* From now on peers get RCP_EACCES for this key. */
	atomic_store_explicit(&nic->mrs[m->index].key, 0, memory_order_release);
	nic->mr_used[m->index / 64] &= ~(1ull << (m->index % 64));
	if (m->prev)
		m->prev->next = m->next;
	else
		nic->mr_list = m->next;
	if (m->next)
		m->next->prev = m->prev;
	free(m);
	return 0;
}

int rcpi_shm_mr_pack(const rcp_nic_mr *base, void *rkey, size_t *len)
{
	const struct shm_mr *m = (const struct shm_mr *)base;
	const struct shm_nic *nic = (const struct shm_nic *)base->nic;
	struct shm_rkey k;

	if (*len < RKEY_BYTES)
		return RCP_ERANGE;
	memset(&k, 0, sizeof k);
	k.id = RCPI_NIC_SHM;
	k.version = RKEY_VERSION;
	k.index = m->index;
	k.pid = (int32_t)nic->pid;
	k.key = m->key;
	memcpy(rkey, &k, sizeof k);
	*len = RKEY_BYTES;
	return 0;
}

/* Validates an RMA request against the owner's table, as an HCA checks an
 * rkey against its memory-region table; fills *ADDR (where the access
 * starts in the owner) and *PP. */
static int rma_check(struct shm_nic *nic, int peer, size_t len, const void *rkey, size_t rkeylen,
                     uint64_t offset, unsigned need, uint64_t *addr, struct shm_peer **pp)
{
	const struct shm_mrent *e;
	struct shm_peer *p;
	struct shm_rkey k;
	uint64_t base, rlen, access;

	if ((uint32_t)peer >= nic->npeers || !nic->peers[peer].used)
		return RCP_EINVAL;
	p = &nic->peers[peer];
	if (p->gone || atomic_load_explicit(&p->seg->closed, memory_order_acquire))
		return rcpi_shm_peer_check(nic, p);
	if (rkeylen != RKEY_BYTES)
		return RCP_EINVAL;
	memcpy(&k, rkey, sizeof k);
	if (k.id != RCPI_NIC_SHM || k.version != RKEY_VERSION)
		return RCP_EINVAL;
	/* A key of another process, or an entry that does not exist. */
	if (k.pid != p->pid || k.index >= p->nmrs || !k.key)
		return RCP_EACCES;
	/* The entry as a seqlock: key, region, fence, key again.  A region
	 * read while the owner rewrote the entry (deregistered it, then
	 * registered another region there) fails the second load, since the
	 * owner zeroes the key before and stores a fresh one after. */
	e = &p->mrs[k.index];
	if (atomic_load_explicit(&e->key, memory_order_acquire) != k.key)
		return RCP_EACCES; /* deregistered, or never this key */
	base = atomic_load_explicit(&e->base, memory_order_relaxed);
	rlen = atomic_load_explicit(&e->len, memory_order_relaxed);
	access = atomic_load_explicit(&e->access, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->key, memory_order_relaxed) != k.key)
		return RCP_EACCES;
	if (!(access & need))
		return RCP_EACCES;
	if (offset > rlen || len > rlen - offset)
		return RCP_EACCES;
	*addr = base + offset;
	*pp = p;
	return 0;
}

static int rma(struct shm_nic *nic, int peer, void *local, size_t len, const void *rkey,
               size_t rkeylen, uint64_t offset, int write)
{
	struct shm_peer *p = NULL;
	uint64_t addr = 0;
	size_t done = 0;
	int rc;

	rc = rma_check(nic, peer, len, rkey, rkeylen, offset,
	               write ? RCP_NIC_ACCESS_WRITE : RCP_NIC_ACCESS_READ, &addr, &p);
	if (rc)
		return rc;
	while (done < len) {
		struct iovec l = {(char *)local + done, len - done};
		struct iovec r = {(void *)(uintptr_t)(addr + done), len - done};
		ssize_t n = write ? process_vm_writev(p->pid, &l, 1, &r, 1, 0)
		                  : process_vm_readv(p->pid, &l, 1, &r, 1, 0);
		if (n > 0) {
			done += (size_t)n; /* partial: continue where it stopped */
			continue;
		}
		if (n == 0) {
			rcpi_err("shm %s: %s made no progress", nic->name,
			         write ? "process_vm_writev" : "process_vm_readv");
			return RCP_ESYS;
		}
		switch (errno) {
		case EINTR: continue;
		case ESRCH: p->gone = 1; return RCP_EPEER;
		case EPERM:
			if (!nic->warned_eperm++)
				rcpi_err("shm %s: cross-memory attach to pid %d refused (EPERM): "
				         "needs ptrace permission over the peer: same user and "
				         "/proc/sys/kernel/yama/ptrace_scope = 0, or "
				         "CAP_SYS_PTRACE; containers may block it by seccomp",
				         nic->name, (int)p->pid);
			return RCP_EPERM;
		case EFAULT:
			/* The key said yes but the memory is not mapped (freed
			 * without deregistering?), or LOCAL is bad. */
			rcpi_warn("shm %s: RMA %s at %#llx+%zu faulted", nic->name,
			          write ? "put" : "get", (unsigned long long)addr, len);
			return RCP_EACCES;
		case ENOMEM: return RCP_ENOMEM;
		case EINVAL: return RCP_EINVAL;
		default: return RCP_ESYS;
		}
	}
	return 0;
}

int rcpi_shm_get(rcp_nic *base, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                 uint64_t offset)
{
	return rma((struct shm_nic *)base, peer, local, len, rkey, rkeylen, offset, 0);
}

int rcpi_shm_put(rcp_nic *base, int peer, const void *local, size_t len, const void *rkey,
                 size_t rkeylen, uint64_t offset)
{
	return rma((struct shm_nic *)base, peer, (void *)(uintptr_t)local, len, rkey, rkeylen,
	           offset, 1);
}

#endif /* HAVE_PROCESS_VM_READV */
