/*
 * rpc/rfp.c — remote fetch (RFP, after Su et al., Jakiro, EuroSys'17):
 * the segment, attach, and the slot hooks client.c, server.c, complete.c
 * and rpc.c call.  It calls none of them: rfp_poll.c (above them, called
 * by rpc.c) fetches results and takes requests; the attach rpc's forward
 * and handler are client.c's and server.c's; rfp.h holds the layout and
 * state the two files share.
 *
 * Server-reply costs the server an outbound send per call.  In remote
 * fetch the client writes the request into the server's memory and reads
 * the result back from it, so the server only polls and computes.  Here
 * that is real on shm: a server offering RFP creates a POSIX shared-memory
 * segment (shm_open) that its clients map read/write; a client's stores
 * into it and loads from it are one-sided (the server runs no code for
 * them), with no system call per call.  A server offers it only where its
 * nic says every peer can map such a segment (RCP_NIC_CAP_SHARED_SEG: the
 * shm nic, also under the faults and job-key wrappers, which pass the bit
 * through; see docs/nic.md).  The choice is by capability, never by the
 * backend's name, which wrappers change ("faults+shm").  On other nics
 * (udp) the server does not offer it and clients stay in server-reply.
 *
 * SETTINGS.  RCP_RFP_* are read once, in rfp_init (rcp_rpc_create), into
 * rpc->rfpc: the poll loop reads no environment.
 *
 * ATTACH.  A client context with RCP_RPC_FETCH calls the built-in rpc
 * "rcp.rfp.attach" (server-reply) on its first call to a server; the
 * answer names the segment and the client's area (index), or says no (not
 * shm, server sleeping, no room).  Calls go by server-reply meanwhile.
 *
 * SEGMENT.  Per client: a doorbell line (ring head, written by the client),
 * a ring of slot numbers (SLOTS entries), and SLOTS slots; a slot is a
 * state word, the request length, the result length, then REQ_MAX bytes of
 * request (rpc header + input) and RESP_MAX (= RCP_RFP_FS_MAX) of result.
 *
 * SLOT STATES (one atomic word; C11 acquire/release):
 *   FREE  -> REQ      client stored the request (fetch mode)
 *   FREE  -> REQ_R    client stored the request, wants a reply message
 *   REQ   -> BUSY     server took it                     (server CAS)
 *   REQ_R -> BUSY_R   server took it                     (server CAS)
 *   REQ   -> REQ_R    client switched to reply           (client CAS)
 *   BUSY  -> BUSY_R   client switched to reply           (client CAS)
 *   BUSY  -> DONE     server stored the result           (server CAS)
 *   BUSY_R-> REPLIED  server sent the result as a message
 *   DONE/REPLIED -> FREE  client is finished with the slot
 * The server's respond is a CAS BUSY -> DONE: if the client switched the
 * slot to reply meanwhile the CAS fails and the server sends a message
 * instead — the recheck that makes a switch unable to deadlock: whichever
 * CAS wins, exactly one of "result in the slot" and "result by message"
 * happens, and the client waits for both while a switch is possible.
 *
 * MODE PER (server, rpc id).  A fetch is one look at the slot's state;
 * the client looks every RCP_RFP_FETCH_NS.  A call whose result was not
 * there after T = RCP_RFP_RETRY fetches is slow; after N = 2 slow calls in
 * a row the (server, id) switches to server-reply (the slow call itself is
 * switched too).  Replies carry the server's processing time; when it falls
 * below T fetch intervals / 2 the id switches back to fetch.
 *
 * FETCH SIZE.  A result is read as header + FS bytes, and the rest (second
 * read) only if larger; FS follows the largest result of the last calls,
 * within [RCP_RFP_FS_MIN, RCP_RFP_FS_MAX].  Larger results go by message.
 *
 * TRUST.  Both sides treat the segment as wire input: slot numbers from
 * the ring, lengths and headers are checked before use; a bad entry is
 * counted and dropped.  The server runs RFP only while spinning (its
 * clients' stores ring no doorbell fd): a server in RCP_RPC_SLEEP mode
 * says no at attach.
 *
 * OWNERSHIP.  Segment names live in /dev/shm, which every user may write,
 * so another user can create the name first, or make a segment others may
 * write; its contents would then be theirs to read and forge.  As for the
 * shm nic (common/shmseg.c): the server creates its segment with O_EXCL
 * and O_NOFOLLOW and sets mode 0600 whatever the umask; a file already at
 * its name that is not a regular file of our euid is refused and left
 * untouched (logged naming the owner uid; the server then offers no RFP,
 * its clients stay in server-reply), one of ours was left by an exited
 * process that had our pid and is replaced.  A client maps the segment the
 * attach answer names only if the name is an RFP name and the file is a
 * regular file of its own euid, mode 0600 or stricter, at least as large
 * as the geometry it was told (a shorter file would fault on access); else
 * it logs the owner and mode and stays in server-reply for that server.
 * Either side counts a refused segment in stats.rfp_refused.  So RFP
 * works between processes of one uid, as the shm nic does.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpc/rfp.h"

/* ---- attach rpc ---- */

static int proc_attach_out(rcp_proc *p, void *data)
{
	struct attach_out *v = data;
	rcp_proc_string(p, &v->name);
	rcp_proc_u32(p, &v->ok);
	rcp_proc_u32(p, &v->cli);
	rcp_proc_u32(p, &v->slots);
	rcp_proc_u32(p, &v->resp_max);
	return rcp_proc_error(p);
}

static void geom_init(struct geom *g, uint32_t slots, uint32_t resp_max)
{
	size_t ring = (64 + 4 * (size_t)slots + 63) & ~(size_t)63;
	g->slots = slots;
	g->resp_max = resp_max;
	g->slot_size = (SLOT_HDR + REQ_MAX + resp_max + 63) & ~63u;
	g->cli_size = ring + (size_t)slots * g->slot_size;
}

void rfp_srv_attach(rcp_rpc *rpc, rcp_chan *ch, struct attach_out *o)
{
	struct rfp_srv *s = rpc->rfps;
	if (s && !(rpc->flags & RCP_RPC_SLEEP)) {
		int i;
		for (i = 0; i < s->ncli && s->chans[i] != ch; i++)
			;
		if (i == s->ncli && s->ncli < MAXCLI)
			s->chans[s->ncli++] = ch;
		if (i < s->ncli) {
			/* (re)attach: the client starts from a fresh area */
			memset(s->base + cli_off(&s->g, (uint32_t)i), 0, s->g.cli_size);
			s->tail[i] = 0;
			o->ok = 1;
			o->name = s->name;
			o->cli = (uint32_t)i;
			o->slots = s->g.slots;
			o->resp_max = s->g.resp_max;
		}
	}
}

/* An RCP_RFP_* integer within [LO, HI], else DEF. */
static int64_t env_in(const char *name, int64_t def, int64_t lo, int64_t hi)
{
	int64_t v = rcpi_env_int(name, def);
	return v < lo || v > hi ? def : v;
}

int rfp_init(rcp_rpc *rpc)
{
	struct rfp_cfg *k = &rpc->rfpc;
	k->slots = (uint32_t)env_in("RCP_RFP_SLOTS", 64, 1, 4096);
	k->fs_max = (uint32_t)env_in("RCP_RFP_FS_MAX", 1024, (int64_t)HDR_LEN + 8, 65536);
	k->fs_min = (uint32_t)env_in("RCP_RFP_FS_MIN", 256, 0, 65536);
	k->retry = (uint32_t)env_in("RCP_RFP_RETRY", 5, 0, 1 << 20);
	k->fetch_ns = (uint64_t)env_in("RCP_RFP_FETCH_NS", 1000, 0, 1000000000);
	return rcp_rpc_register(rpc, "rcp.rfp.attach", NULL, proc_attach_out, &rpc->rfp_attach_id);
}

/* A server killed before it could unlink its segment leaves the name in
 * RCP_SHM_DIR.  Names carry the creator's pid namespace and pid, so a new
 * server removes those of processes of its namespace that have exited
 * (clients that still map one keep their mapping).  Runs once per process. */
static void rfp_sweep(uint32_t my_ns)
{
	static _Atomic int done;
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (atomic_exchange(&done, 1) || !my_ns)
		return;
	d = opendir(rcpi_shm_dir());
	if (!d)
		return;
	while ((e = readdir(d))) {
		unsigned ns, n;
		int pid, end = 0;
		char name[sizeof e->d_name + 1];
		if (sscanf(e->d_name, "rcp-rfp-%u-%d-%u%n", &ns, &pid, &n, &end) != 3 ||
		    e->d_name[end] || ns != my_ns || pid == (int)getpid() ||
		    rcpi_proc_alive(pid, 0, ns, my_ns))
			continue;
		/* Only our own files (root could remove anyone's). */
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		snprintf(name, sizeof name, "/%s", e->d_name);
		if (!shm_unlink(name))
			rcpi_debug("rpc: removed %s (its server exited)", name);
	}
	closedir(d);
}

/* Creates segment NAME, mode 0600 whatever the umask (clients check it).
 * The name carries our pid namespace, pid and a per-process counter, so a
 * file already there is ours, left by an exited process that had our pid
 * (replaced), or not ours: another user took the name first (refused with
 * RCP_EPERM and left untouched: never read, written or removed).  Returns
 * an fd or a negative RCP code. */
static int srv_create(const char *name)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		char path[PATH_MAX];
		struct stat st;
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600), rc;
		if (fd >= 0) {
			if (fchmod(fd, 0600) < 0) {
				rc = rcpi_errno_to_rcp(errno);
				close(fd);
				shm_unlink(name);
				return rc;
			}
			return fd;
		}
		if (errno != EEXIST)
			return rcpi_errno_to_rcp(errno);
		snprintf(path, sizeof path, "%s%s", rcpi_shm_dir(), name);
		if (lstat(path, &st) < 0) {
			if (errno == ENOENT)
				continue;
			return rcpi_errno_to_rcp(errno);
		}
		if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
			rcpi_shm_trusted(&st, "rpc", name); /* logs whose it is */
			return RCP_EPERM;
		}
		rcpi_info("rpc: replacing %s, left by an exited process with our pid", name);
		if (shm_unlink(name) < 0 && errno != ENOENT)
			return rcpi_errno_to_rcp(errno);
	}
	return RCP_EADDRINUSE;
}

void rfp_serve(rcp_rpc *rpc)
{
	struct rfp_srv *s;
	struct rcp_nic_info info;
	static _Atomic unsigned counter;
	int fd;
	if (rpc->rfps || (rpc->flags & (RCP_RPC_NO_RFP | RCP_RPC_SLEEP)))
		return;
	if (rcp_nic_query(rcp_ep_nic(rpc->ep), &info) || !(info.caps & RCP_NIC_CAP_SHARED_SEG))
		return; /* clients could not map our segment (udp) */
	s = calloc(1, sizeof *s);
	if (!s)
		return;
	geom_init(&s->g, rpc->rfpc.slots, rpc->rfpc.fs_max);
	{
		uint32_t ns = rcpi_self_pidns();
		rfp_sweep(ns);
		snprintf(s->name, sizeof s->name, "/rcp-rfp-%u-%d-%u", (unsigned)ns, (int)getpid(),
		         atomic_fetch_add(&counter, 1));
	}
	s->size = s->g.cli_size * MAXCLI;
	fd = srv_create(s->name);
	if (fd < 0) {
		if (fd == RCP_EPERM)
			rpc->st.rfp_refused++;
		free(s);
		return;
	}
	if (ftruncate(fd, (off_t)s->size) || (s->base = mmap(NULL, s->size, PROT_READ | PROT_WRITE,
	                                                     MAP_SHARED, fd, 0)) == MAP_FAILED) {
		close(fd);
		shm_unlink(s->name);
		free(s);
		return;
	}
	close(fd);
	rpc->rfps = s;
}

/* ---- client side ---- */

/* Opens the segment NAME that a server's attach answer gave, for SIZE
 * bytes: only an RFP name, a regular file of our euid, mode 0600 or
 * stricter, of at least SIZE bytes (see OWNERSHIP).  Returns an fd, or a
 * negative RCP code (refusals are counted and logged). */
static int cli_open(rcp_rpc *rpc, const char *name, size_t size)
{
	struct stat st;
	int fd, rc;
	if (strncmp(name, "/rcp-rfp-", 9) || strchr(name + 1, '/')) {
		rpc->st.bad_msgs++; /* not a segment name a server creates */
		return RCP_EPROTO;
	}
	fd = shm_open(name, O_RDWR | O_NOFOLLOW, 0);
	if (fd < 0) {
		char path[PATH_MAX];
		int e = errno;
		rc = rcpi_errno_to_rcp(e);
		snprintf(path, sizeof path, "%s%s", rcpi_shm_dir(), name);
		/* Another user's file we may not open, or a symlink: say whose. */
		if ((e == EACCES || e == ELOOP) && !lstat(path, &st) &&
		    rcpi_shm_trusted(&st, "rpc", name)) {
			rpc->st.rfp_refused++;
			return RCP_EPERM;
		}
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		close(fd);
		return RCP_ESYS;
	}
	rc = rcpi_shm_trusted(&st, "rpc", name);
	if (!rc && (uint64_t)st.st_size < size) {
		rcpi_err("rpc: %s%s has %llu bytes, the server said %zu; refusing it",
		         rcpi_shm_dir(), name, (unsigned long long)st.st_size, size);
		rc = RCP_EPROTO;
	}
	if (rc) {
		rpc->st.rfp_refused++;
		close(fd);
		return rc;
	}
	return fd;
}

int rfp_cli_attached(rcp_rpc *rpc, struct peer *p, int status, struct attach_out *o)
{
	struct rfp_cli *c;
	int fd, attached = 0;
	p->rfp_state = -1;
	if (status || !o->ok || !o->name || o->slots < 1 || o->slots > 4096 ||
	    o->resp_max < HDR_LEN + 8 || o->resp_max > 65536 || o->cli >= MAXCLI)
		goto out;
	c = calloc(1, sizeof *c);
	if (!c)
		goto out;
	geom_init(&c->g, o->slots, o->resp_max);
	c->cli = o->cli;
	c->size = c->g.cli_size * MAXCLI;
	fd = cli_open(rpc, o->name, c->size);
	if (fd < 0) {
		free(c);
		goto out;
	}
	c->base = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	c->free_slots = calloc(o->slots, sizeof *c->free_slots);
	c->owner = calloc(o->slots, sizeof *c->owner);
	c->zombie = calloc(o->slots, 1);
	c->msgwait = calloc(o->slots, 1);
	c->next_fetch = calloc(o->slots, sizeof *c->next_fetch);
	c->fetches = calloc(o->slots, sizeof *c->fetches);
	if (c->base == MAP_FAILED || !c->free_slots || !c->owner || !c->zombie || !c->msgwait ||
	    !c->next_fetch || !c->fetches) {
		if (c->base != MAP_FAILED)
			munmap(c->base, c->size);
		free(c->free_slots), free(c->owner), free(c->zombie), free(c->next_fetch),
		    free(c->fetches), free(c->msgwait), free(c);
		goto out;
	}
	for (uint32_t i = 0; i < o->slots; i++)
		c->free_slots[c->nfree++] = o->slots - 1 - i;
	c->fs = rpc->rfpc.fs_min < o->resp_max - HDR_LEN ? rpc->rfpc.fs_min : o->resp_max - HDR_LEN;
	p->rfp = c;
	p->rfp_state = 2;
	/* One response receive stays posted so rcp watches the server's
	 * liveness while calls wait in its segment. */
	p->watch = 1;
	attached = 1;
out:
	free(o);
	return attached;
}

int rfp_cli_submit(rcp_rpc *rpc, struct peer *p, struct rcp_rpc_req *r, uint64_t id,
                   const void *msg, size_t len, uint32_t *slotp)
{
	struct rfp_cli *c = p->rfp;
	struct idmode *m;
	uint32_t s;
	unsigned char *sl;
	int reply;
	if (!(rpc->flags & RCP_RPC_FETCH) || (rpc->flags & RCP_RPC_SLEEP) ||
	    id == rpc->rfp_attach_id)
		return 0;
	if (p->rfp_state == 0)
		return RFP_ATTACH;
	if (p->rfp_state != 2 || !c->nfree || len > REQ_MAX)
		return 0;
	m = idmode(c, id);
	if (!m)
		return 0;
	reply = m->reply;
	s = c->free_slots[--c->nfree];
	sl = slot_at(c->base, &c->g, c->cli, s);
	memcpy(sl + SLOT_HDR, msg, len);
	((struct slot *)(void *)sl)->req_len = (uint32_t)len;
	atomic_store_explicit(&((struct slot *)(void *)sl)->state, reply ? S_REQ_R : S_REQ,
	                      memory_order_release);
	atomic_store_explicit(ring_ent(c->base, &c->g, c->cli, c->head % c->g.slots), s,
	                      memory_order_relaxed);
	c->head++;
	atomic_store_explicit(ring_head(c->base, &c->g, c->cli), c->head, memory_order_release);
	c->owner[s] = r;
	c->fetches[s] = 0;
	c->next_fetch[s] = 0;
	c->msgwait[s] = (uint8_t)reply;
	c->npending++;
	if (reply) {
		/* The result comes as a message: keep a receive posted (the
		 * caller posts it). */
		p->expect++;
	}
	rpc->st.rfp_calls++;
	*slotp = s + 1;
	return reply ? RFP_SLOT_REPLY : RFP_SLOT;
}

void rfp_cli_abandon(rcp_rpc *rpc, struct peer *p, uint32_t slot)
{
	struct rfp_cli *c;
	uint32_t s, st;
	(void)rpc;
	if (!slot || !p || !(c = p->rfp) || slot > c->g.slots)
		return;
	s = slot - 1;
	if (!c->owner[s])
		return;
	c->owner[s] = NULL;
	c->npending--;
	st = atomic_load_explicit(
	    &((struct slot *)(void *)slot_at(c->base, &c->g, c->cli, s))->state,
	    memory_order_acquire);
	if (st == S_DONE || st == S_REPLIED) {
		slot_free(c, s);
	} else {
		c->zombie[s] = 1; /* the server still owns it: reclaim later */
		c->nzombie++;
	}
}

void rfp_cli_note_reply(rcp_rpc *rpc, struct rfp_cli *c, uint64_t id, uint64_t proc_ns)
{
	struct idmode *m;
	uint64_t fetch_ns = rpc->rfpc.fetch_ns, t = rpc->rfpc.retry;
	if (!c || !(m = idmode(c, id)) || !m->reply)
		return;
	if (proc_ns < t * fetch_ns / 2) {
		m->reply = 0;
		m->slow_run = 0;
		rpc->st.rfp_to_fetch++;
	}
}

/* ---- server side ---- */

int rfp_srv_respond(struct rfp_srv *s, uint32_t cli, uint32_t slot, const struct rpc_hdr *hd,
                    const void *payload, uint32_t len)
{
	unsigned char *sl;
	struct slot *h;
	uint32_t want = S_BUSY;
	if (!s || cli >= (uint32_t)s->ncli || slot >= s->g.slots)
		return 0;
	sl = slot_at(s->base, &s->g, cli, slot);
	h = (struct slot *)(void *)sl;
	if (HDR_LEN + len > s->g.resp_max)
		return 0; /* too large for the slot: message */
	if (atomic_load_explicit(&h->state, memory_order_acquire) != S_BUSY)
		return 0;
	memcpy(sl + SLOT_HDR + REQ_MAX, hd, HDR_LEN);
	if (len)
		memcpy(sl + SLOT_HDR + REQ_MAX + HDR_LEN, payload, len);
	h->resp_len = HDR_LEN + len;
	/* The recheck: only if the client did not switch meanwhile. */
	return atomic_compare_exchange_strong_explicit(&h->state, &want, S_DONE,
	                                               memory_order_release, memory_order_acquire);
}

void rfp_srv_replied(struct rfp_srv *s, uint32_t cli, uint32_t slot)
{
	struct slot *h;
	if (!s || cli >= (uint32_t)s->ncli || slot >= s->g.slots)
		return;
	h = (struct slot *)(void *)slot_at(s->base, &s->g, cli, slot);
	atomic_store_explicit(&h->state, S_REPLIED, memory_order_release);
}

int rfp_busy(const rcp_rpc *rpc)
{
	if (rpc->rfps && rpc->rfps->ncli)
		return 1;
	if (rpc->flags & RCP_RPC_FETCH)
		for (uint32_t i = 0; i < rpc->peercap; i++) {
			const struct peer *p = rpc->peers[i];
			if (p && p->rfp && p->rfp->npending)
				return 1;
		}
	return 0;
}

void rfp_peer_free(struct peer *p)
{
	struct rfp_cli *c = p->rfp;
	if (!c)
		return;
	munmap(c->base, c->size);
	free(c->free_slots), free(c->owner), free(c->zombie), free(c->next_fetch), free(c->fetches),
	    free(c->msgwait), free(c);
	p->rfp = NULL;
}

void rfp_fini(rcp_rpc *rpc)
{
	struct rfp_srv *s = rpc->rfps;
	if (!s)
		return;
	munmap(s->base, s->size);
	shm_unlink(s->name);
	free(s);
	rpc->rfps = NULL;
}
