/*
 * nic/shm.c — the shared-memory nic backend ("shm:NAME").
 *
 * Frames between processes on one host travel through lock-free
 * single-producer/single-consumer rings in POSIX shared memory; bulk data
 * moves with one copy by cross-memory attach (process_vm_readv/writev).
 *
 * ---- Segment layout ---------------------------------------------------
 *
 * Every endpoint owns one segment "/rcp-NAME" (RCP_SHM_DIR, normally
 * /dev/shm).  It is the endpoint's RECEIVE side: other endpoints write into
 * it, the owner only reads frames and advances consumer indices.
 *
 *   offset 0      struct shm_seg (512 B)
 *                   line 0  constants: magic (written last), version,
 *                           geometry, owner pid + start time + pid ns
 *                   line 2  sleeping, closed   (receiver -> senders)
 *                   line 4  events             (senders -> receiver)
 *   512           nslots x struct shm_slot (256 B each)
 *                   line 0  state word (kind|gen|pid), sender identity
 *                   line 1  prod: producer index   (sender writes)
 *                   line 2  cons: consumer index   (receiver writes)
 *   mrs_off       nmrs x 32 B registrations {key, base, len, access}
 *                 (RMA), 64 KiB aligned at both ends: peers map it
 *                 read-only
 *   rings_off     nslots rings, ring_cells x 64 B each, 64 KiB aligned
 *
 * Lines written by different sides never share a 128-byte pair, so the
 * adjacent-line prefetcher does not couple them.  Everything is
 * sparse: tmpfs pages exist only for rings in use (a sender fallocates its
 * ring when it claims a slot; the receiver punches it out on reset), so 64
 * slots x 1 MiB rings cost 64 MiB of address space, not of memory.
 *
 * Address blob: [RCPI_NIC_SHM][NAME bytes], 2..41 bytes.
 *
 * ---- Slots: who sends into which ring -----------------------------------
 *
 * The state word of a slot packs kind (2 bits), generation (30 bits) and
 * the claimant's pid (32 bits), so every transition is one CAS and a stale
 * CAS from an earlier generation fails (no ABA):
 *
 *   FREE(g) --sender CAS--> CLAIMING(g,pid) --sender CAS--> ACTIVE(g,pid)
 *   ACTIVE(g,pid) --sender close, or anyone who sees pid dead--> CLOSED(g,pid)
 *   CLAIMING(g,pid) --anyone who sees pid dead--> CLOSED(g,pid)
 *   CLOSED(g) --receiver, once the ring is drained--> FREE(g+1)
 *
 * Only the receiver resets a ring (consumer index, first header, memory),
 * and only once it holds none of that ring's frames, so a sender can leave
 * at any time, even by crashing, and the frames it published before are
 * still delivered.  After every ACTIVE/CLOSED transition the sender bumps
 * `events`; the receiver compares it with the value it last saw (one load
 * of a line that rarely changes) and rescans the slot table only then.
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
 *
 * A receiver never trusts ring contents: a bad check field, WRAP at cell
 * 0, a length above the MTU or a frame crossing the ring end marks the
 * ring broken (logged, counted in rx_dropped); it is no longer read and is
 * reset when its sender leaves.  All reads stay inside the mapping.
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
 *
 * ---- Limits ------------------------------------------------------------------
 *
 * One thread per endpoint at a time (as for every backend).  An endpoint
 * inherited across fork() belongs to the parent: closing it in the child
 * only unmaps it, and the child must not use it.  While a forked child
 * lives it also holds the doorbell socket, so the name stays taken after
 * the parent dies.  Segments are created mode 0600 (same user only).
 * The sweep reads RCP_SHM_DIR (default /dev/shm), which must be where
 * shm_open puts segments.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "nic/nic_int.h"

/* ---- constants ------------------------------------------------------------ */

#define SHM_MAGIC   0x31304d4853504352ull /* "RCPSHM01" little-endian */
#define SHM_VERSION 2u                    /* 2: registration table entries hold the region */

#define CELL       64u /* ring cell, one cache line */
#define CELL_SHIFT 6
#define FRAME_HDR  8u /* header word before each payload */

#define HDR_VALID       (1ull << 63)
#define HDR_WRAP        (1ull << 32)
#define HDR_CHECK_SHIFT 40
#define HDR_CHECK_MASK  0x7fffffull

#define NAME_MAX_LEN  40
#define SEG_HDR_BYTES 512u
#define SLOT_BYTES    256u
#define RINGS_ALIGN   65536u /* page-aligned for any page size up to 64 KiB */
#define RING_MIN      4096ull
#define RING_MAX      (1ull << 30)
#define SLOTS_MAX     4096u  /* fits the 12 slot bits of a frame token */
#define NMRS          16384u /* registration table entries (32 B each) */
#define MRENT_BYTES   32u

/* Cells whose first word the producer keeps zeroed ahead of itself. */
#define ZERO_AHEAD 32u

#define TOKEN_SLOT_BITS 12
#define TOKEN_SLOT_MASK ((1u << TOKEN_SLOT_BITS) - 1)

/* Slot state word. */
#define ST_FREE     0u
#define ST_CLAIMING 1u
#define ST_ACTIVE   2u
#define ST_CLOSED   3u
#define ST_KIND(s)  ((uint32_t)(s)&3u)
#define ST_GEN(s)   (((uint32_t)(s) >> 2) & 0x3fffffffu)
#define ST_PID(s)   ((pid_t)(uint32_t)((s) >> 32))

/* Rate limits of the liveness checks (slow paths only). */
#define SENDER_CHECK_NS   1000000ull    /* receiver checked by a sender */
#define RECEIVER_CHECK_NS 1000000000ull /* senders checked by a receiver */

/* Bound on waiting for a segment being created to become valid. */
#define CONNECT_WAIT_NS 100000000ull

#define RKEY_BYTES   24u
#define RKEY_VERSION 2u /* 2: no base/length/access in the key (see RMA) */

/* ---- shared structures (the on-memory ABI; bump SHM_VERSION on change) ---- */

struct shm_seg {
	/* Line 0: written by the creator, then read-only.  `magic` is stored
	 * last (release) so a sender that sees it sees the rest. */
	_Atomic uint64_t magic;
	uint32_t version;
	uint32_t nslots;
	uint32_t ring_cells;
	uint32_t mtu;
	uint32_t nmrs;
	int32_t owner_pid;
	uint64_t owner_start; /* /proc start time: guards against pid reuse */
	uint32_t owner_pidns; /* pid namespace inode (0: unknown) */
	uint32_t cell_bytes;
	uint64_t seg_bytes;
	/* Line 2: receiver -> senders.  Read by senders after every publish,
	 * written by the receiver only when it arms or closes. */
	_Alignas(128) _Atomic uint32_t sleeping;
	_Atomic uint32_t closed;
	/* Line 4: senders -> receiver: bumped on every slot state change. */
	_Alignas(128) _Atomic uint32_t events;
};

struct shm_slot {
	/* Line 0: claim state and the sender's identity (written while
	 * CLAIMING, read by the receiver after it acquires ACTIVE). */
	_Atomic uint64_t state;
	uint64_t sender_start;
	uint32_t sender_pidns;
	uint8_t namelen;
	char name[NAME_MAX_LEN + 3];
	/* Line 1: producer index, written by the sender (informational).
	 * Lines 0-1 are the sender's, 2-3 the receiver's: 128-byte pairs,
	 * as the adjacent-line prefetcher fetches them. */
	_Alignas(64) _Atomic uint64_t prod;
	/* Line 2: consumer index, written by the receiver on release. */
	_Alignas(128) _Atomic uint64_t cons;
	char pad_[120];
};

/* One registration in the owner's table (see RMA).  `key` is 0 while the
 * entry is free or being rewritten: the seqlock's "odd" value. */
struct shm_mrent {
	_Atomic uint64_t key;
	_Atomic uint64_t base, len, access;
};

_Static_assert(sizeof(struct shm_seg) <= SEG_HDR_BYTES, "segment header too large");
_Static_assert(sizeof(struct shm_mrent) == MRENT_BYTES, "registration entry size");
_Static_assert(sizeof(struct shm_slot) == SLOT_BYTES, "slot descriptor size");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free");
_Static_assert(sizeof(uintptr_t) >= 8, "frame tokens need 64 bits");

struct shm_layout {
	uint64_t slots_off, mrs_off, rings_off, ring_bytes, seg_bytes;
};

/* ---- process-local structures ----------------------------------------------- */

/* Receiver's view of one slot. */
enum { R_IDLE, R_ACTIVE, R_CLOSING, R_BROKEN };

struct shm_ring {
	uint64_t cons;         /* consumer index (authoritative copy) */
	unsigned char *cells;  /* ring memory */
	struct shm_slot *slot; /* descriptor in our segment */
	int32_t peer;          /* our peer index for the sender, or NONE */
	uint32_t gen;
	uint8_t state;  /* R_* */
	uint8_t closed; /* slot reached CLOSED: drain, then reset */
	uint8_t bloblen;
	unsigned char blob[1 + NAME_MAX_LEN]; /* sender's address */
};

/* Sender's view of one destination.  The first line holds what send()
 * touches. */
struct shm_peer {
	unsigned char *cells;  /* our ring in the peer's segment */
	struct shm_seg *seg;   /* the peer's segment header */
	struct shm_slot *slot; /* our slot there */
	uint64_t prod;         /* producer index */
	uint64_t cons_cache;   /* last consumer index read */
	uint64_t zfront;       /* first words of [prod, zfront) are 0 */
	uint32_t ncells, mtu;  /* ring size; min(peer's MTU, ours) */
	uint8_t used, gone, dirty;
	/* cold */
	void *map;
	size_t map_len;
	uint32_t slotidx, gen;
	pid_t pid;
	uint64_t start;
	uint32_t pidns;
	uint32_t nmrs;
	const struct shm_mrent *mrs; /* the peer's registration table (mapped read-only) */
	uint64_t last_check_ns;
	struct sockaddr_un db;
	socklen_t dblen;
	uint8_t namelen;
	char name[NAME_MAX_LEN + 1];
};

struct shm_mr {
	rcp_nic_mr base;
	struct shm_mr *prev, *next;
	void *addr;
	size_t len;
	unsigned access;
	uint32_t index;
	uint64_t key;
};

struct shm_nic {
	rcp_nic base;
	/* receive side (hot) */
	struct shm_seg *seg;
	struct shm_ring *rings; /* nslots */
	uint16_t *act;          /* slots being polled, nact of them */
	uint32_t nact, rr;
	uint32_t events_seen;
	uint32_t nslots, ncells, mask, mtu;
	uint8_t armed;
	uint8_t need_reset; /* a closing ring went empty */
	/* send side */
	struct shm_peer *peers;
	uint32_t npeers, cap;
	uint32_t *dirty; /* peers with a deferred doorbell check (MORE) */
	uint32_t ndirty;
	/* cold */
	size_t seg_bytes;
	int dbfd;
	pid_t pid;
	uint64_t start;
	uint32_t pidns;
	uint64_t last_reap_ns;
	struct shm_mrent *mrs; /* our registration table (in the segment) */
	uint64_t *mr_used;     /* bitmap of table entries in use */
	uint32_t mr_hint;
	struct shm_mr *mr_list;
	int warned_eperm;
	uint8_t namelen;
	char name[NAME_MAX_LEN + 1];
	unsigned char blob[1 + NAME_MAX_LEN];
};

/* ---- small helpers ------------------------------------------------------------ */

static inline uint64_t st_make(uint32_t kind, uint32_t gen, pid_t pid)
{
	return (uint64_t)(uint32_t)pid << 32 | (uint64_t)(gen & 0x3fffffffu) << 2 | kind;
}

static inline uint32_t cells_for(uint64_t len)
{
	return (uint32_t)((FRAME_HDR + len + CELL - 1) >> CELL_SHIFT);
}

static inline uint64_t hdr_check(uint64_t pos)
{
	return (pos & HDR_CHECK_MASK) << HDR_CHECK_SHIFT;
}

static inline _Atomic uint64_t *cell_word(unsigned char *cells, uint64_t off)
{
	return (_Atomic uint64_t *)(void *)(cells + (off << CELL_SHIFT));
}

static int name_ok(const char *s, size_t n)
{
	if (n < 1 || n > NAME_MAX_LEN)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static void seg_path(char *buf, size_t size, const char *name, size_t n)
{
	snprintf(buf, size, "/rcp-%.*s", (int)n, name);
}

static socklen_t db_addr(struct sockaddr_un *sa, const char *name, size_t n)
{
	int k;
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	/* sun_path[0] == 0: abstract namespace, freed by the kernel when the
	 * last socket bound to it closes, e.g. when its owner dies. */
	k = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "rcp-shm-%.*s", (int)n, name);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
}

static uint64_t align_up(uint64_t v)
{
	return (v + RINGS_ALIGN - 1) & ~(uint64_t)(RINGS_ALIGN - 1);
}

/* A segment is ours to trust only if it is a regular file of our
 * effective uid that nobody else may open (common/shmseg.c).  Returns 0 or
 * RCP_EPERM, logging why with "shm:WHO". */
static int seg_trusted(const struct stat *st, const char *who, const char *path)
{
	char w[96];
	snprintf(w, sizeof w, "shm:%s", who);
	return rcpi_shm_trusted(st, w, path);
}

/* The uid of the process holding abstract unix name SA, from the kernel's
 * socket table (sock_diag, Linux >= 5.3); -1 if it cannot tell.  Slow path:
 * only when binding the doorbell failed. */
static long db_holder_uid(const struct sockaddr_un *sa, socklen_t salen)
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

static void layout(uint32_t nslots, uint32_t ncells, uint32_t nmrs, struct shm_layout *l)
{
	l->slots_off = SEG_HDR_BYTES;
	/* The table has whole pages of its own: peers map it read-only. */
	l->mrs_off = align_up(l->slots_off + (uint64_t)nslots * SLOT_BYTES);
	l->rings_off = align_up(l->mrs_off + (uint64_t)nmrs * MRENT_BYTES);
	l->ring_bytes = (uint64_t)ncells * CELL;
	l->seg_bytes = l->rings_off + (uint64_t)nslots * l->ring_bytes;
}

static inline struct shm_slot *seg_slot(struct shm_seg *seg, uint32_t i)
{
	return (struct shm_slot *)(void *)((unsigned char *)seg + SEG_HDR_BYTES +
	                                   (size_t)i * SLOT_BYTES);
}

static struct shm_mrent *seg_mrs(struct shm_seg *seg, const struct shm_layout *l)
{
	return (struct shm_mrent *)(void *)((unsigned char *)seg + l->mrs_off);
}

static unsigned char *seg_ring(struct shm_seg *seg, const struct shm_layout *l, uint32_t i)
{
	return (unsigned char *)seg + l->rings_off + (uint64_t)i * l->ring_bytes;
}

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

static int errno_rc(int e)
{
	switch (e) {
	case ENOSPC:
	case ENOMEM: return RCP_ENOMEM;
	case EACCES:
	case EPERM: return RCP_EPERM;
	default: return RCP_ESYS;
	}
}

/* ---- the doorbell ----------------------------------------------------------------- */

/* Empties the doorbell socket.  Slow path: armed endpoints only. */
static void db_drain(struct shm_nic *nic)
{
	char buf[64];
	for (int i = 0; i < 1024; i++)
		if (recv(nic->dbfd, buf, sizeof buf, MSG_DONTWAIT) < 0)
			break;
}

static int peer_check(struct shm_nic *nic, struct shm_peer *p);

/* Rings P's doorbell if its receiver sleeps.  The caller has ordered its
 * header stores before this (seq_cst store or fence). */
static void db_ring(struct shm_nic *nic, struct shm_peer *p)
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
		peer_check(nic, p);
	} else if (errno != EAGAIN) {
		rcpi_debug("shm: doorbell to %s: %s", p->name, strerror(errno));
	}
}

/* Doorbell checks deferred by RCP_NIC_MORE. */
static void db_flush(struct shm_nic *nic)
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
			db_ring(nic, p);
	}
}

/* ---- receive side: slot table scan, ring reset, liveness --------------------------- */

/* Returns the peer index whose name is NAME, or RCP_NIC_PEER_NONE. */
static int32_t peer_by_name(struct shm_nic *nic, const char *name, size_t n)
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

static void ring_broken(struct shm_nic *nic, struct shm_ring *r, uint64_t pos, uint64_t h,
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
		r->peer = peer_by_name(nic, s->name, n);
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
static void reset_drained(struct shm_nic *nic)
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
static void scan(struct shm_nic *nic)
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
	reset_drained(nic);
}

/* Marks slots whose holder has died as CLOSED.  Returns how many. */
static int reap_dead(struct shm_seg *seg, uint32_t nslots, uint32_t my_pidns)
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

/* ---- endpoints ------------------------------------------------------------------ */

/* Creates (or reclaims) the segment.  Returns an fd or a negative RCP code. */
static int seg_create(struct shm_nic *nic, const char *path)
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
static void sweep_stale(struct shm_nic *nic)
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
		if (rc == RCP_EADDRINUSE && (uid = db_holder_uid(&sa, salen)) >= 0 &&
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
	fd = seg_create(nic, path);
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
	sweep_stale(nic);
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

static void peer_disconnect(struct shm_nic *nic, struct shm_peer *p, int release);

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
		db_flush(nic);
	for (uint32_t i = 0; i < nic->npeers; i++)
		if (nic->peers[i].used)
			peer_disconnect(nic, &nic->peers[i], owner);
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

/* ---- peers (send side) --------------------------------------------------------------- */

/* Slow-path health check of P's receiver.  Returns 0 or RCP_EPEER (and
 * marks P gone). */
static int peer_check(struct shm_nic *nic, struct shm_peer *p)
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
	if (reap_dead(p->seg, ns, nic->pidns)) {
		atomic_thread_fence(memory_order_seq_cst);
		db_ring(nic, p);
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
static void peer_disconnect(struct shm_nic *nic, struct shm_peer *p, int release)
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
			db_ring(nic, p);
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
	idx = peer_by_name(nic, name, n);
	if (idx >= 0) {
		p = &nic->peers[idx];
		if (!p->gone) {
			*out = idx;
			return 0;
		}
		/* The same address again after its endpoint went away: attach
		 * to whatever endpoint holds the name now, same index. */
		peer_disconnect(nic, p, 1);
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

static int shm_peer_add(rcp_nic *base, const void *blob, size_t len, int *peer)
{
	/* nic.c checks the length; the backend byte is checked here too (the
	 * dispatcher does not, whatever nic_int.h says). */
	if (*(const uint8_t *)blob != RCPI_NIC_SHM)
		return RCP_EADDR;
	return peer_add_name((struct shm_nic *)base, (const char *)blob + 1, len - 1, peer);
}

static int shm_peer_add_str(rcp_nic *base, const char *addr, int *peer)
{
	if (strncmp(addr, "shm:", 4))
		return RCP_EADDR;
	return peer_add_name((struct shm_nic *)base, addr + 4, strlen(addr + 4), peer);
}

static int shm_peer_remove(rcp_nic *base, int peer)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	struct shm_peer *p;

	if ((uint32_t)peer >= nic->npeers || !nic->peers[peer].used)
		return RCP_EINVAL;
	p = &nic->peers[peer];
	if (p->dirty) {
		/* Its deferred doorbell check happens now, not never. */
		atomic_thread_fence(memory_order_seq_cst);
		db_ring(nic, p);
		for (uint32_t i = 0; i < nic->ndirty; i++) {
			if (nic->dirty[i] == (uint32_t)peer) {
				nic->dirty[i] = nic->dirty[--nic->ndirty];
				break;
			}
		}
	}
	peer_disconnect(nic, p, 1);
	for (uint32_t i = 0; i < nic->nslots; i++)
		if (nic->rings[i].peer == peer)
			nic->rings[i].peer = RCP_NIC_PEER_NONE;
	memset(p, 0, sizeof *p);
	while (nic->npeers && !nic->peers[nic->npeers - 1].used)
		nic->npeers--;
	return 0;
}

/* ---- datagrams ------------------------------------------------------------------- */

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
		db_flush(nic);
	/* A receiver that died never drains: this is where we notice. */
	return peer_check(nic, p) ? RCP_EPEER : RCP_EAGAIN;
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

static int shm_send(rcp_nic *base, int peer, const struct iovec *iov, int iovcnt, size_t total,
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
		return peer_check(nic, p);
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
			memcpy(d + h, iov[i].iov_base, iov[i].iov_len);
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
			db_flush(nic);
		db_ring(nic, p);
	}
	atomic_store_explicit(&p->slot->prod, next, memory_order_relaxed);
	zero_ahead(p, next);
	return 0;
}

static int shm_flush(rcp_nic *base)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	if (nic->ndirty)
		db_flush(nic);
	return 0;
}

/* Receiver-side periodic work: senders that died.  Slow path. */
static void maybe_reap(struct shm_nic *nic)
{
	uint64_t now = rcpi_now_ns();
	if (now - nic->last_reap_ns < RECEIVER_CHECK_NS)
		return;
	nic->last_reap_ns = now;
	if (reap_dead(nic->seg, nic->nslots, nic->pidns))
		scan(nic);
}

static void disarm(struct shm_nic *nic)
{
	nic->armed = 0;
	atomic_store_explicit(&nic->seg->sleeping, 0, memory_order_relaxed);
	db_drain(nic);
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
			ring_broken(nic, r, pos, h, "bad check");
			break;
		}
		if (RCPI_UNLIKELY(h & HDR_WRAP)) {
			if (!off) {
				ring_broken(nic, r, pos, h, "wrap at cell 0");
				break;
			}
			pos += nic->ncells - off;
			continue;
		}
		len = (uint32_t)h;
		cells = cells_for(len);
		if (RCPI_UNLIKELY(len > nic->mtu || off + cells > nic->ncells)) {
			ring_broken(nic, r, pos, h, "bad length");
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

static int shm_recv(rcp_nic *base, struct rcp_nic_frame *fr, int max)
{
	struct shm_nic *nic = (struct shm_nic *)base;
	uint32_t nact, k;
	int n = 0;

	if (RCPI_UNLIKELY(nic->armed))
		disarm(nic);
	if (RCPI_UNLIKELY(atomic_load_explicit(&nic->seg->events, memory_order_relaxed) !=
	                  nic->events_seen))
		scan(nic);
	nact = nic->nact;
	/* Round robin: each call starts one ring further, so no sender can
	 * starve another by keeping its ring full. */
	k = nic->rr;
	for (uint32_t left = nact; left && n < max; left--) {
		n += ring_read(nic, nic->act[k], fr + n, max - n);
		if (++k == nact)
			k = 0;
	}
	if (nact && ++nic->rr >= nact)
		nic->rr = 0;
	if (RCPI_UNLIKELY(nic->need_reset))
		reset_drained(nic);
	return n;
}

static void shm_release(rcp_nic *base, struct rcp_nic_frame *fr, int n)
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
		reset_drained(nic);
}

static int shm_fd(const rcp_nic *base)
{
	return ((const struct shm_nic *)base)->dbfd;
}

/* Nonzero if a frame or a slot event is waiting.  No system calls. */
static int shm_pending(rcp_nic *base)
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

static int shm_arm(rcp_nic *base)
{
	struct shm_nic *nic = (struct shm_nic *)base;

	maybe_reap(nic);
	/* Slot changes are handled here, not reported as "frames may be
	 * waiting": a new sender with nothing sent yet must not keep the
	 * receiver from sleeping. */
	if (atomic_load_explicit(&nic->seg->events, memory_order_relaxed) != nic->events_seen)
		scan(nic);
	if (nic->need_reset)
		reset_drained(nic);
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

/* ---- memory registration and RMA -------------------------------------------------- */

#ifdef HAVE_PROCESS_VM_READV

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

static int shm_mr_reg(rcp_nic *base, void *addr, size_t len, unsigned access, rcp_nic_mr **out)
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

static int shm_mr_dereg(rcp_nic_mr *base)
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

static int shm_mr_pack(const rcp_nic_mr *base, void *rkey, size_t *len)
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
		return peer_check(nic, p);
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

static int shm_get(rcp_nic *base, int peer, void *local, size_t len, const void *rkey,
                   size_t rkeylen, uint64_t offset)
{
	return rma((struct shm_nic *)base, peer, local, len, rkey, rkeylen, offset, 0);
}

static int shm_put(rcp_nic *base, int peer, const void *local, size_t len, const void *rkey,
                   size_t rkeylen, uint64_t offset)
{
	return rma((struct shm_nic *)base, peer, (void *)(uintptr_t)local, len, rkey, rkeylen,
	           offset, 1);
}

#endif /* HAVE_PROCESS_VM_READV */

const struct rcpi_nic_ops rcpi_nic_shm_ops = {
    .name = "shm",
    .id = RCPI_NIC_SHM,
    .open = shm_open_ep,
    .close = shm_close,
    .query = shm_query,
    .addr_str = shm_addr_str,
    .addr_blob = shm_addr_blob,
    .peer_add = shm_peer_add,
    .peer_add_str = shm_peer_add_str,
    .peer_remove = shm_peer_remove,
    .send = shm_send,
    .flush = shm_flush,
    .recv = shm_recv,
    .release = shm_release,
    .fd = shm_fd,
    .arm = shm_arm,
    .pending = shm_pending,
#ifdef HAVE_PROCESS_VM_READV
    .mr_reg = shm_mr_reg,
    .mr_dereg = shm_mr_dereg,
    .mr_pack = shm_mr_pack,
    .get = shm_get,
    .put = shm_put,
#endif
};
