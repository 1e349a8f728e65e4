/*
 * nic/shm/seg.c — the shm backend: ownership of names and segments (create,
 * reclaim, sweep) and the liveness checks
 * (design notes: nic/shm/shm_int.h).
 *
 * ---- Ownership, liveness and failures ----------------------------------------
 *
 * The abstract socket name is the ownership lock: the kernel frees it when
 * its owner dies.  open() binds it first (EADDRINUSE: a live owner); then
 * creates the segment with O_EXCL (shm_open adds O_NOFOLLOW) and sets mode
 * 0600 whatever the umask; if one exists, its recorded owner must be dead
 * (pid gone, zombie, or pid reused: start time differs) and the stale
 * segment is flagged closed (for senders still mapping it) and replaced.
 * A live owner in another network namespace gives RCP_EADDRINUSE with a
 * hint.
 *
 * Names are shared by all users (abstract sockets have no permissions,
 * /dev/shm is world-writable), so another user can take ours first.  We
 * never trust what we did not create: open() refuses (RCP_EPERM, naming
 * the other uid) a segment at its name that is not a regular file of our
 * effective uid, leaving it untouched, and a doorbell name held by another
 * uid (asked of the kernel's socket table, sock_diag; without it the
 * result is the usual RCP_EADDRINUSE); a stale segment of ours whose mode
 * lets others write it is replaced without reading it.  A sender attaches
 * only to a regular file of its own euid with mode 0600 (else RCP_EPERM):
 * a segment another user planted would receive its frames and rkeys.  So
 * shm endpoints talk within one uid, as cross-memory attach needs anyway.
 * Squatted names fail cleanly; they cannot be recovered from (the name is
 * the address peers know): pick another.
 *
 * Segments of killed endpoints stay until their name is opened again,
 * and names carrying a pid never are: the first open in each process
 * sweeps segments of our uid whose owner (per the header) is dead, taking
 * each one's doorbell name as the lock while it checks (sweep_stale).
 *
 * Liveness checks (kill(pid,0) plus /proc/PID/stat state and start time)
 * cost system calls, so they run only on slow paths: a sender checks its
 * receiver when the ring is full (at most once per ms per peer) or when a
 * doorbell is refused; a receiver checks its senders from arm() at most
 * once a second, and a sender that finds no free slot checks the holders.
 * A receiver that closed sets `closed`, which senders test on every send
 * (same line as `sleeping`, which they read anyway): RCP_EPEER at once.
 * A process in another pid namespace cannot be checked and is assumed
 * alive (only an orderly close then frees its slot).
 */
#include "nic/shm/shm_int.h"

/* The uid of the process holding abstract unix name SA, from the kernel's
 * socket table (sock_diag, Linux >= 5.3); -1 if it cannot tell.  Slow path:
 * only when binding the doorbell failed. */
long rcpi_shm_db_holder_uid(const struct sockaddr_un *sa, socklen_t salen)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req;
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	size_t plen = (size_t)salen - offsetof(struct sockaddr_un, sun_path);
	long uid = -1;
	union {
		char b[16384];
		struct nlmsghdr align;
	} buf;
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);

	if (fd < 0)
		return -1;
	memset(&req, 0, sizeof req);
	req.nlh.nlmsg_len = sizeof req;
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.r.sdiag_family = AF_UNIX;
	req.r.udiag_states = ~0u;
	req.r.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID;
	if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&nl, sizeof nl) < 0)
		goto out;
	for (;;) {
		ssize_t n = recv(fd, buf.b, sizeof buf.b, 0);
		struct nlmsghdr *h = &buf.align;
		int len = (int)n;
		if (n <= 0)
			goto out;
		for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			struct unix_diag_msg *m = NLMSG_DATA(h);
			struct rtattr *a = (struct rtattr *)(m + 1);
			int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m)), named = 0;
			long u = -1;
			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
				goto out;
			for (; RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				if (a->rta_type == UNIX_DIAG_NAME && RTA_PAYLOAD(a) == plen &&
				    !memcmp(RTA_DATA(a), sa->sun_path, plen))
					named = 1;
				else if (a->rta_type == UNIX_DIAG_UID &&
				         RTA_PAYLOAD(a) >= sizeof(uid_t))
					u = (long)*(const uid_t *)RTA_DATA(a);
			}
			if (named && u >= 0) {
				uid = u;
				goto out;
			}
		}
	}
out:
	close(fd);
	return uid;
}

/* Creates (or reclaims) the segment.  Returns an fd or a negative RCP code. */
int rcpi_shm_seg_create(struct shm_nic *nic, const char *path)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct shm_seg *old;
		struct stat st;
		/* shm_open adds O_NOFOLLOW: a symlink planted at the name
		 * fails rather than being followed. */
		int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600), rc;
		if (fd >= 0) {
			/* 0600 whatever the umask: peers check it. */
			if (fchmod(fd, 0600) < 0) {
				rc = errno_rc(errno);
				close(fd);
				shm_unlink(path);
				return rc;
			}
			return fd;
		}
		if (errno != EEXIST)
			return errno_rc(errno);
		/* We hold the doorbell name, so the owner of this segment is
		 * dead, alive in another network namespace, or another user
		 * who created the name first. */
		fd = shm_open(path, O_RDWR, 0);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			if (errno == EACCES || errno == EPERM || errno == ELOOP) {
				/* Another user's file, or a symlink: say whose. */
				char full[PATH_MAX];
				int e = errno;
				snprintf(full, sizeof full, "%s%s", rcpi_shm_dir(), path);
				if (lstat(full, &st) == 0 && seg_trusted(&st, nic->name, path))
					return RCP_EPERM;
				errno = e;
			}
			return errno_rc(errno);
		}
		if (fstat(fd, &st) < 0) {
			close(fd);
			return RCP_ESYS;
		}
		if (st.st_uid != geteuid() || !S_ISREG(st.st_mode)) {
			/* Not ours: never read, flag or remove it. */
			seg_trusted(&st, nic->name, path);
			close(fd);
			return RCP_EPERM;
		}
		if (st.st_mode & 077) {
			/* Ours, but others may have written it: its header
			 * proves nothing.  No live owner holds the doorbell
			 * name, so replace it. */
			rcpi_warn("shm:%s: %s%s had mode %03o; replacing it", nic->name,
			          rcpi_shm_dir(), path, (unsigned)(st.st_mode & 0777));
		} else if ((uint64_t)st.st_size >= SEG_HDR_BYTES) {
			old = mmap(NULL, SEG_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (old != MAP_FAILED) {
				int live = atomic_load(&old->magic) == SHM_MAGIC &&
				           rcpi_proc_alive(old->owner_pid, old->owner_start,
				                           old->owner_pidns, nic->pidns);
				if (live) {
					rcpi_warn(
					    "shm:%s: %s%s is owned by live pid %d (in another "
					    "network namespace?); remove it if it is stale",
					    nic->name, rcpi_shm_dir(), path, (int)old->owner_pid);
					munmap(old, SEG_HDR_BYTES);
					close(fd);
					return RCP_EADDRINUSE;
				}
				/* Senders still mapping it must fail, not wait. */
				atomic_store(&old->closed, 1);
				munmap(old, SEG_HDR_BYTES);
			}
		}
		close(fd);
		rcpi_info("shm:%s: reclaiming stale segment %s", nic->name, path);
		if (shm_unlink(path) < 0 && errno != ENOENT)
			return errno_rc(errno);
	}
	return RCP_EADDRINUSE;
}

/* 1 if DIR/FILE is a segment of ours (regular, our uid, mode 0600) whose
 * header names a dead owner of our pid namespace. */
static int seg_dead(int dfd, const char *file, uint32_t pidns, pid_t *owner)
{
	int fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), dead = 0;
	struct shm_seg *h;
	struct stat st;

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 077) && (uint64_t)st.st_size >= SEG_HDR_BYTES) {
		h = mmap(NULL, SEG_HDR_BYTES, PROT_READ, MAP_SHARED, fd, 0);
		if (h != MAP_FAILED) {
			dead =
			    atomic_load_explicit(&h->magic, memory_order_acquire) == SHM_MAGIC &&
			    h->owner_pidns == pidns &&
			    !rcpi_proc_alive(h->owner_pid, h->owner_start, h->owner_pidns, pidns);
			*owner = h->owner_pid;
			munmap(h, SEG_HDR_BYTES);
		}
	}
	close(fd);
	return dead;
}

/* Removes segments that killed endpoints of our uid left behind: a name
 * is reclaimed when it is opened again, but names that carry a pid (most
 * do) never are.  A segment goes if it is a regular file of ours, mode
 * 0600, whose header names a dead owner of our pid namespace, and it still
 * is once we hold its doorbell name (the name is the lock, see Ownership:
 * no live endpoint of this network namespace has it, and none can take it
 * and re-create the segment while we look).  Only names that look stale
 * are locked, for a few system calls: an open of such a name at that very
 * moment fails with RCP_EADDRINUSE.  Runs at the first open in each
 * process (a forked child sweeps again): a restarted job cleans up after
 * the one that was killed.  Slow path: a directory scan. */
void rcpi_shm_sweep_stale(struct shm_nic *nic)
{
	static _Atomic pid_t swept;
	pid_t me = getpid(), owner = 0;
	struct dirent *e;
	DIR *d;

	if (atomic_exchange(&swept, me) == me || !nic->pidns)
		return;
	d = opendir(rcpi_shm_dir());
	if (!d)
		return;
	while ((e = readdir(d))) {
		const char *name = e->d_name + 4;
		size_t n = strlen(e->d_name) >= 4 ? strlen(name) : 0;
		struct sockaddr_un sa;
		int lock;

		if (strncmp(e->d_name, "rcp-", 4) || !name_ok(name, n) ||
		    (n == nic->namelen && !memcmp(name, nic->name, n)) ||
		    !seg_dead(dirfd(d), e->d_name, nic->pidns, &owner))
			continue;
		lock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (lock < 0)
			break;
		if (bind(lock, (struct sockaddr *)&sa, db_addr(&sa, name, n)) == 0 &&
		    seg_dead(dirfd(d), e->d_name, nic->pidns, &owner) &&
		    unlinkat(dirfd(d), e->d_name, 0) == 0)
			rcpi_info("shm:%s: removed %s/%s (its owner, pid %d, is gone)", nic->name,
			          rcpi_shm_dir(), e->d_name, (int)owner);
		close(lock);
	}
	closedir(d);
}

/* Slow-path health check of P's receiver.  Returns 0 or RCP_EPEER (and
 * marks P gone). */
int rcpi_shm_peer_check(struct shm_nic *nic, struct shm_peer *p)
{
	uint64_t now = rcpi_now_ns(), v;

	if (p->gone)
		return RCP_EPEER;
	if (atomic_load_explicit(&p->seg->closed, memory_order_acquire))
		goto gone;
	if (p->last_check_ns && now - p->last_check_ns < SENDER_CHECK_NS)
		return 0;
	p->last_check_ns = now;
	if (!rcpi_proc_alive(p->pid, p->start, p->pidns, nic->pidns))
		goto gone;
	/* Our slot must still be ours (a receiver that wrongly thought us
	 * dead has revoked it). */
	v = atomic_load_explicit(&p->slot->state, memory_order_acquire);
	if (v != st_make(ST_ACTIVE, p->gen, nic->pid)) {
		rcpi_warn("shm %s: slot at %s was revoked", nic->name, p->name);
		goto gone;
	}
	return 0;
gone:
	if (!p->gone)
		rcpi_info("shm %s: peer %s is gone", nic->name, p->name);
	p->gone = 1;
	return RCP_EPEER;
}

/* Marks slots whose holder has died as CLOSED.  Returns how many. */
int rcpi_shm_reap_dead(struct shm_seg *seg, uint32_t nslots, uint32_t my_pidns)
{
	int n = 0;
	for (uint32_t si = 0; si < nslots; si++) {
		struct shm_slot *s = seg_slot(seg, si);
		uint64_t v = atomic_load_explicit(&s->state, memory_order_acquire);
		uint32_t k = ST_KIND(v);
		if (k != ST_CLAIMING && k != ST_ACTIVE)
			continue;
		/* While CLAIMING, start/pidns may be unwritten (0: unknown). */
		if (rcpi_proc_alive(ST_PID(v), s->sender_start, s->sender_pidns, my_pidns))
			continue;
		if (atomic_compare_exchange_strong_explicit(
		        &s->state, &v, st_make(ST_CLOSED, ST_GEN(v), ST_PID(v)),
		        memory_order_acq_rel, memory_order_relaxed)) {
			rcpi_info("shm: slot %u: sender pid %d is gone", si, (int)ST_PID(v));
			n++;
		}
	}
	if (n)
		atomic_fetch_add_explicit(&seg->events, 1, memory_order_release);
	return n;
}
