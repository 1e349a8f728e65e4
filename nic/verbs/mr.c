/*
 * nic/verbs/mr.c — memory registrations of the verbs backend: the regions
 * peers may read or write (rcp_nic_mr_reg), their packed keys, and a cache
 * of the local registrations RDMA READ/WRITE need for the caller's buffers.
 *
 * ---- Peers' regions --------------------------------------------------------
 *
 * rcp_nic_mr_reg is one ibv_reg_mr with exactly the remote access asked
 * for (REMOTE_READ, REMOTE_WRITE; LOCAL_WRITE, which REMOTE_WRITE needs),
 * never cached: rcp_nic_mr_dereg must revoke the key at once (nic.h;
 * bulk/regcache.c relies on it), and only ibv_dereg_mr does that on the
 * HCA.  A region still registered at close is deregistered there.
 *
 * Packed key (VB_RKEY = 24 bytes, big endian), what a peer sends us:
 *   0 RCPI_NIC_VERBS   1 access (RCP_NIC_ACCESS_*)   2 zero (2)
 *   4 rkey (4)         8 address (8)                 16 length (8)
 * The key comes from the wire: rcpi_vb_key_parse refuses any other length,
 * backend, unknown bit, a zero rkey or a region that wraps the address
 * space; rc.c then checks the op's offset and length against it and the
 * access bit (RCP_EACCES, counted) before a work request is posted.  The
 * HCA checks again (the rkey, the bounds, the access of the region and of
 * the QP): what we check is what a peer can forge; what it checks is what
 * we cannot (a key that was valid and is revoked).
 *
 * ---- The cache of local registrations --------------------------------------
 *
 * An RDMA READ lands in, and a WRITE sources from, the caller's buffer,
 * which the HCA must know by an lkey.  Registering costs a system call
 * and page pinning (tens of microseconds for a few pages, more for MiBs),
 * the same buffers come back (a receive buffer reused, a send buffer
 * resent), so registrations are kept: up to VB_REGS of them and
 * VB_REG_MAX bytes, each a page-aligned [lo, hi).  A lookup is a scan for
 * an entry containing the range (64 entries: a few dozen nanoseconds,
 * nothing next to an RDMA round trip; an interval tree is the step when
 * the bound grows).  A miss registers the pages and evicts the least
 * recently used entries past the bounds; a range larger than the whole
 * bound is registered for the one transfer and dropped after it
 * (*temp).  Ops are synchronous (nic.h), so no entry is in use between
 * calls and any may be evicted.
 *
 * Invalidation.  A cached registration pins pages: if the buffer is freed
 * and its addresses mapped again, the entry names the old pages and a
 * transfer would silently move the wrong bytes.  Every cache has this
 * hazard (UCX and libfabric hook munmap/free or use userfaultfd for it).
 * Here: every cached range is watched by memwatch.c (a userfaultfd's
 * UNMAP, REMOVE and REMAP events), and before each lookup the ranges
 * unmapped since the last one drop the entries they overlap (since
 * session 20).  Where memory cannot be watched the range is registered
 * for the one transfer, never cached.  Deregistering a peers' region
 * (rcp_nic_mr_dereg) also drops every cached entry overlapping it, and so
 * does close.
 */
#include <stdlib.h>
#include <string.h>

#include "nic/verbs/verbs_int.h"

struct vb_mr {
	struct rcp_nic_mr base; /* first: nic.c casts */
	struct ibv_mr *mr;
	unsigned access;
	struct vb_mr *next, *prev;
};

static void put64(uint8_t *b, uint64_t x)
{
	for (int i = 7; i >= 0; i--, x >>= 8)
		b[i] = (uint8_t)x;
}

static uint64_t get64(const uint8_t *b)
{
	uint64_t x = 0;
	for (int i = 0; i < 8; i++)
		x = x << 8 | b[i];
	return x;
}

int rcpi_vb_mr_reg(rcp_nic *nic, void *addr, size_t len, unsigned access, rcp_nic_mr **out)
{
	struct verbs_nic *v = vb_of(nic);
	struct vb_mr *m = calloc(1, sizeof *m);
	int ia = IBV_ACCESS_LOCAL_WRITE;

	if (!m)
		return RCP_ENOMEM;
	if (access & RCP_NIC_ACCESS_READ)
		ia |= IBV_ACCESS_REMOTE_READ;
	if (access & RCP_NIC_ACCESS_WRITE)
		ia |= IBV_ACCESS_REMOTE_WRITE;
	m->mr = v->api->reg_mr(v->pd, addr, len, ia);
	if (!m->mr) {
		rcpi_warn("verbs: %s: registering %zu bytes failed (RLIMIT_MEMLOCK?)", v->dev, len);
		free(m);
		return RCP_ENOMEM;
	}
	m->base.nic = nic;
	m->access = access;
	m->next = v->mrs;
	if (v->mrs)
		v->mrs->prev = m;
	v->mrs = m;
	*out = &m->base;
	return 0;
}

int rcpi_vb_mr_dereg(rcp_nic_mr *mr)
{
	struct vb_mr *m = (struct vb_mr *)mr;
	struct verbs_nic *v = vb_of(mr->nic);
	uintptr_t lo = (uintptr_t)m->mr->addr;

	rcpi_vb_reg_invalidate(v, lo, lo + m->mr->length);
	v->api->dereg_mr(m->mr); /* the rkey is dead from here on */
	if (m->prev)
		m->prev->next = m->next;
	else
		v->mrs = m->next;
	if (m->next)
		m->next->prev = m->prev;
	free(m);
	return 0;
}

int rcpi_vb_mr_pack(const rcp_nic_mr *mr, void *rkey, size_t *len)
{
	const struct vb_mr *m = (const struct vb_mr *)mr;
	uint8_t *b = rkey;

	if (*len < VB_RKEY)
		return RCP_ERANGE;
	memset(b, 0, VB_RKEY);
	b[0] = RCPI_NIC_VERBS;
	b[1] = (uint8_t)m->access;
	b[4] = (uint8_t)(m->mr->rkey >> 24);
	b[5] = (uint8_t)(m->mr->rkey >> 16);
	b[6] = (uint8_t)(m->mr->rkey >> 8);
	b[7] = (uint8_t)m->mr->rkey;
	put64(b + 8, (uintptr_t)m->mr->addr);
	put64(b + 16, m->mr->length);
	*len = VB_RKEY;
	return 0;
}

int rcpi_vb_key_parse(const void *rkey, size_t rkeylen, struct vb_key *k)
{
	const uint8_t *b = rkey;

	if (rkeylen != VB_RKEY || b[0] != RCPI_NIC_VERBS ||
	    (b[1] & ~(RCP_NIC_ACCESS_READ | RCP_NIC_ACCESS_WRITE)) || b[2] || b[3])
		return RCP_EACCES;
	k->access = b[1];
	k->rkey = (uint32_t)b[4] << 24 | (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
	k->addr = get64(b + 8);
	k->len = get64(b + 16);
	if (!k->rkey || k->addr + k->len < k->addr)
		return RCP_EACCES;
	return 0;
}

/* ---- the cache ------------------------------------------------------------- */

static void reg_drop(struct verbs_nic *v, int i)
{
	v->api->dereg_mr(v->regs[i].mr);
	v->reg_bytes -= v->regs[i].hi - v->regs[i].lo;
	v->regs[i] = v->regs[--v->nregs];
}

static void reg_evict_lru(struct verbs_nic *v)
{
	int lru = 0;

	for (int i = 1; i < v->nregs; i++)
		if (v->regs[i].used < v->regs[lru].used)
			lru = i;
	reg_drop(v, lru);
	v->rs.reg_evicted++;
}

/* A registration for one transfer, deregistered after it (rc.c). */
static struct ibv_mr *reg_once(struct verbs_nic *v, uintptr_t lo, uintptr_t hi, int *temp)
{
	*temp = 1;
	return v->api->reg_mr(v->pd, (void *)lo, hi - lo, IBV_ACCESS_LOCAL_WRITE);
}

/* Once per endpoint: -1 where no memory can be watched (nothing cached). */
static int watch_start(struct verbs_nic *v)
{
	if (!v->watch) {
		v->watch = rcpi_vb_watch_open(&v->watch_seq) ? -1 : 1;
		if (v->watch < 0)
			rcpi_warn(
			    "verbs: %s: no userfaultfd (seccomp, or vm.unprivileged_userfaultfd "
			    "on a kernel before 5.11): local buffers registered per transfer",
			    v->dev);
	}
	if (v->watch < 0)
		v->rs.reg_unwatched++;
	return v->watch;
}

/* Drops the entries over memory unmapped since the last lookup. */
static void watch_apply(struct verbs_nic *v)
{
	uintptr_t r[16][2];
	int n;

	while ((n = rcpi_vb_watch_take(&v->watch_seq, r, 16)) != 0) {
		uint64_t before = v->rs.reg_invalidated;
		if (n < 0) { /* fell behind the ring: all of it */
			rcpi_vb_reg_invalidate(v, 0, UINTPTR_MAX);
		} else {
			for (int i = 0; i < n; i++)
				rcpi_vb_reg_invalidate(v, r[i][0], r[i][1]);
		}
		v->rs.reg_unmapped += v->rs.reg_invalidated - before;
		v->rs.reg_invalidated = before;
	}
}

struct ibv_mr *rcpi_vb_reg_find(struct verbs_nic *v, const void *p, size_t len, int *temp)
{
	uintptr_t a = (uintptr_t)p, lo = a & ~(uintptr_t)4095,
	          hi = (a + len + 4095) & ~(uintptr_t)4095;
	struct ibv_mr *mr;

	*temp = 0;
	if (RCPI_UNLIKELY(v->watch <= 0) && watch_start(v) < 0)
		return reg_once(v, lo, hi, temp);
	watch_apply(v);
	for (int i = 0; i < v->nregs; i++) {
		if (v->regs[i].lo <= a && a + len <= v->regs[i].hi) {
			v->regs[i].used = ++v->reg_tick;
			v->rs.reg_hits++;
			return v->regs[i].mr;
		}
	}
	v->rs.reg_misses++;
	if (hi - lo > VB_REG_MAX)
		return reg_once(v, lo, hi, temp);
	if (rcpi_vb_watch_add(lo, hi)) { /* not watchable (a file mapping): not cached */
		v->rs.reg_unwatched++;
		return reg_once(v, lo, hi, temp);
	}
	while (v->nregs && (v->nregs == VB_REGS || v->reg_bytes + (hi - lo) > VB_REG_MAX))
		reg_evict_lru(v);
	mr = v->api->reg_mr(v->pd, (void *)lo, hi - lo, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return NULL;
	v->regs[v->nregs].lo = lo;
	v->regs[v->nregs].hi = hi;
	v->regs[v->nregs].mr = mr;
	v->regs[v->nregs].used = ++v->reg_tick;
	v->nregs++;
	v->reg_bytes += hi - lo;
	return mr;
}

void rcpi_vb_reg_invalidate(struct verbs_nic *v, uintptr_t lo, uintptr_t hi)
{
	for (int i = 0; i < v->nregs;) {
		if (v->regs[i].lo < hi && lo < v->regs[i].hi) {
			reg_drop(v, i); /* moves the last entry to I */
			v->rs.reg_invalidated++;
		} else {
			i++;
		}
	}
}

void rcpi_vb_mr_free_all(struct verbs_nic *v)
{
	while (v->nregs)
		reg_drop(v, v->nregs - 1);
	if (v->watch > 0)
		rcpi_vb_watch_close();
	v->watch = 0;
	while (v->mrs) {
		struct vb_mr *m = v->mrs;
		v->mrs = m->next;
		v->api->dereg_mr(m->mr);
		free(m);
	}
}
