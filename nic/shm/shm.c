/*
 * nic/shm/shm.c — the shm backend: the endpoint (open, close, query,
 * addresses) and its ops table
 * (design notes: nic/shm/shm_int.h).
 */
#include "nic/shm/shm_int.h"

static int shm_open_ep(const char *rest, const struct rcp_nic_config *cfg, rcp_nic **out)
{
	struct shm_nic *nic;
	struct shm_layout l;
	struct sockaddr_un sa;
	socklen_t salen;
	char path[64];
	size_t n = strlen(rest);
	uint64_t ring, mtu, maxc;
	int64_t slots;
	int fd = -1, rc;
	char st;

	if (!name_ok(rest, n))
		return RCP_EADDR;

	/* Geometry: ring a power of two of cells; the MTU lowered until two
	 * MTU frames (plus the cell after them) fit. */
	if (cfg && cfg->rx_bytes) {
		ring = cfg->rx_bytes;
	} else {
		int64_t e = rcpi_env_int("RCP_SHM_RING", 1 << 20);
		ring = e > 0 ? (uint64_t)e : 1 << 20;
	}
	if (ring < RING_MIN)
		ring = RING_MIN;
	if (ring > RING_MAX)
		ring = RING_MAX;
	ring = 1ull << (64 - __builtin_clzll(ring - 1));
	if (cfg && cfg->mtu) {
		mtu = cfg->mtu;
	} else {
		int64_t e = rcpi_env_int("RCP_SHM_MTU", 16384);
		mtu = e > 0 ? (uint64_t)e : 16384;
	}
	maxc = (ring / CELL - 1) / 2;
	if (cells_for(mtu) > maxc) {
		rcpi_info("shm:%s: mtu %llu lowered to %llu to fit a %llu-byte ring", rest,
		          (unsigned long long)mtu, (unsigned long long)(maxc * CELL - FRAME_HDR),
		          (unsigned long long)ring);
		mtu = maxc * CELL - FRAME_HDR;
	}
	slots = rcpi_env_int("RCP_SHM_PEERS", 64);
	if (slots < 1)
		slots = 1;
	if (slots > SLOTS_MAX)
		slots = SLOTS_MAX;

	nic = calloc(1, sizeof *nic);
	if (!nic)
		return RCP_ENOMEM;
	nic->dbfd = -1;
	nic->nslots = (uint32_t)slots;
	nic->ncells = (uint32_t)(ring / CELL);
	nic->mask = nic->ncells - 1;
	nic->mtu = (uint32_t)mtu;
	nic->namelen = (uint8_t)n;
	memcpy(nic->name, rest, n);
	nic->blob[0] = RCPI_NIC_SHM;
	memcpy(nic->blob + 1, rest, n);
	nic->pid = getpid();
	nic->pidns = rcpi_self_pidns();
	if (rcpi_proc_stat(nic->pid, &st, &nic->start) < 0)
		nic->start = 0;
	nic->base.ops = &rcpi_nic_shm_ops;
	nic->rings = calloc(nic->nslots, sizeof *nic->rings);
	nic->act = calloc(nic->nslots, sizeof *nic->act);
	nic->mr_used = calloc(NMRS / 64, sizeof *nic->mr_used);
	if (!nic->rings || !nic->act || !nic->mr_used) {
		rc = RCP_ENOMEM;
		goto fail;
	}

	/* 1. The doorbell name is the ownership lock. */
	nic->dbfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (nic->dbfd < 0) {
		rc = errno_rc(errno);
		goto fail;
	}
	salen = db_addr(&sa, rest, n);
	if (bind(nic->dbfd, (struct sockaddr *)&sa, salen) < 0) {
		long uid;
		rc = errno == EADDRINUSE ? RCP_EADDRINUSE : errno_rc(errno);
		/* Abstract names have no permissions: another user may have
		 * bound ours first.  Say so rather than "in use". */
		if (rc == RCP_EADDRINUSE && (uid = rcpi_shm_db_holder_uid(&sa, salen)) >= 0 &&
		    uid != (long)geteuid()) {
			rcpi_err("shm:%s: the doorbell name @rcp-shm-%s is held by uid %ld, not "
			         "us (uid %u): another user took the name first; pick another",
			         rest, rest, uid, (unsigned)geteuid());
			rc = RCP_EPERM;
		}
		goto fail;
	}

	/* 2. The segment. */
	layout(nic->nslots, nic->ncells, NMRS, &l);
	nic->seg_bytes = (size_t)l.seg_bytes;
	seg_path(path, sizeof path, rest, n);
	fd = rcpi_shm_seg_create(nic, path);
	if (fd < 0) {
		rc = fd;
		fd = -1;
		goto fail;
	}
	/* Sparse: only the header and slot table get memory now. */
	if (ftruncate(fd, (off_t)l.seg_bytes) < 0) {
		rc = errno_rc(errno);
		goto fail_unlink;
	}
	rc = fallocate(fd, 0, 0, (off_t)(l.slots_off + (uint64_t)nic->nslots * SLOT_BYTES));
	if (rc < 0 && errno != EOPNOTSUPP) {
		rcpi_err("shm:%s: cannot allocate %s: %s", rest, path, strerror(errno));
		rc = errno_rc(errno);
		goto fail_unlink;
	}
	nic->seg = mmap(NULL, nic->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (nic->seg == MAP_FAILED) {
		nic->seg = NULL;
		rc = errno_rc(errno);
		goto fail_unlink;
	}
	close(fd);
	fd = -1;

	nic->seg->version = SHM_VERSION;
	nic->seg->nslots = nic->nslots;
	nic->seg->ring_cells = nic->ncells;
	nic->seg->mtu = nic->mtu;
	nic->seg->nmrs = NMRS;
	nic->seg->owner_pid = (int32_t)nic->pid;
	nic->seg->owner_start = nic->start;
	nic->seg->owner_pidns = nic->pidns;
	nic->seg->cell_bytes = CELL;
	nic->seg->seg_bytes = l.seg_bytes;
	for (uint32_t i = 0; i < nic->nslots; i++) {
		nic->rings[i].slot = seg_slot(nic->seg, i);
		nic->rings[i].cells = seg_ring(nic->seg, &l, i);
		nic->rings[i].peer = RCP_NIC_PEER_NONE;
	}
	nic->mrs = seg_mrs(nic->seg, &l);
	atomic_store_explicit(&nic->seg->magic, SHM_MAGIC, memory_order_release);

	rcpi_debug("shm:%s: open, %u slots x %llu B rings, mtu %u", rest, nic->nslots,
	           (unsigned long long)l.ring_bytes, nic->mtu);
	rcpi_shm_sweep_stale(nic);
	*out = &nic->base;
	return 0;

fail_unlink:
	shm_unlink(path);
fail:
	if (fd >= 0)
		close(fd);
	if (nic->seg)
		munmap(nic->seg, nic->seg_bytes);
	nic->seg = NULL;
	if (nic->dbfd >= 0)
		close(nic->dbfd);
	free(nic->rings);
	free(nic->act);
	free(nic->mr_used);
	free(nic);
	return rc;
}

static void shm_close(rcp_nic *base)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	/* An endpoint inherited over fork() belongs to the parent: the child
	 * only drops its mappings. */
	int owner = getpid() == nic->pid;
	char path[64];

	if (owner && nic->seg) {
		/* Senders fail with RCP_EPEER from now on. */
		atomic_store_explicit(&nic->seg->closed, 1, memory_order_seq_cst);
		/* Unlink before the doorbell name is freed: whoever binds the
		 * name next finds the segment gone. */
		seg_path(path, sizeof path, nic->name, nic->namelen);
		shm_unlink(path);
	}
	if (owner && nic->ndirty)
		rcpi_shm_db_flush(nic);
	for (uint32_t i = 0; i < nic->npeers; i++)
		if (nic->peers[i].used)
			rcpi_shm_peer_disconnect(nic, &nic->peers[i], owner);
	while (nic->mr_list) {
		struct shm_mr *m = nic->mr_list;
		nic->mr_list = m->next;
		free(m);
	}
	if (nic->seg)
		munmap(nic->seg, nic->seg_bytes);
	if (nic->dbfd >= 0)
		close(nic->dbfd);
	free(nic->peers);
	free(nic->dirty);
	free(nic->rings);
	free(nic->act);
	free(nic->mr_used);
	free(nic);
}

static void shm_query(const rcp_nic *base, struct rcp_nic_info *info)
{
	const struct shm_nic *nic = (const struct shm_nic *)base;
	uint32_t m = cells_for(nic->mtu);

	info->backend = "shm";
	info->mtu = nic->mtu;
	info->rx_frames = (nic->ncells - m) / m;
	/* SHARED_SEG: our segment is 0600 and a sender attaches only to a
	 * segment of its own euid (see "Names are shared by all users"), so
	 * every peer can map a 0600 segment we create, and we its. */
	info->caps = RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_CHECKED |
	             RCP_NIC_CAP_SAME_HOST | RCP_NIC_CAP_SHARED_SEG;
#ifdef HAVE_PROCESS_VM_READV
	info->caps |= RCP_NIC_CAP_RMA;
#endif
}

static int shm_addr_str(const rcp_nic *base, char *buf, size_t len)
{
	const struct shm_nic *nic = (const struct shm_nic *)base;
	if (len < 4u + nic->namelen + 1u)
		return RCP_ERANGE;
	memcpy(buf, "shm:", 4);
	memcpy(buf + 4, nic->name, nic->namelen);
	buf[4 + nic->namelen] = 0;
	return 0;
}

static int shm_addr_blob(const rcp_nic *base, void *buf, size_t *len)
{
	const struct shm_nic *nic = (const struct shm_nic *)base;
	size_t need = 1u + nic->namelen;
	if (*len < need)
		return RCP_ERANGE;
	memcpy(buf, nic->blob, need);
	*len = need;
	return 0;
}

const struct rcpi_nic_ops rcpi_nic_shm_ops = {
    .name = "shm",
    .id = RCPI_NIC_SHM,
    .open = shm_open_ep,
    .close = shm_close,
    .query = shm_query,
    .addr_str = shm_addr_str,
    .addr_blob = shm_addr_blob,
    .peer_add = rcpi_shm_peer_add,
    .peer_add_str = rcpi_shm_peer_add_str,
    .peer_remove = rcpi_shm_peer_remove,
    .send = rcpi_shm_send,
    .flush = rcpi_shm_flush,
    .recv = rcpi_shm_recv,
    .release = rcpi_shm_release,
    .fd = rcpi_shm_fd,
    .arm = rcpi_shm_arm,
    .pending = rcpi_shm_pending,
#ifdef HAVE_PROCESS_VM_READV
    .mr_reg = rcpi_shm_mr_reg,
    .mr_dereg = rcpi_shm_mr_dereg,
    .mr_pack = rcpi_shm_mr_pack,
    .get = rcpi_shm_get,
    .put = rcpi_shm_put,
#endif
};
