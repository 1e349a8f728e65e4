/*
 * nic/shm/shm_int.h — the shared-memory nic backend ("shm:NAME").
 *
 * Frames between processes on one host travel through lock-free
 * single-producer/single-consumer rings in POSIX shared memory; bulk data
 * moves with one copy by cross-memory attach (process_vm_readv/writev).
 *
 * Files: seg.c (ownership of names and segments, stale-segment sweep,
 * liveness checks), slots.c (the receiver's slot table), doorbell.c (the
 * doorbell, arming, waiting), peers.c (the send side: attaching to a peer,
 * claiming a slot), ring.c (the ring protocol: send, receive, release),
 * rma.c (registrations and RMA), shm.c (the endpoint and its ops table);
 * each file's own design notes head it.  This header holds their shared
 * state: the on-memory ABI, the process-local structures and the small
 * helpers, with the notes on the segment layout, the slots and the limits.
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
#ifndef RCP_NIC_SHM_INT_H
#define RCP_NIC_SHM_INT_H

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

static inline int name_ok(const char *s, size_t n)
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

static inline void seg_path(char *buf, size_t size, const char *name, size_t n)
{
	snprintf(buf, size, "/rcp-%.*s", (int)n, name);
}

static inline socklen_t db_addr(struct sockaddr_un *sa, const char *name, size_t n)
{
	int k;
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	/* sun_path[0] == 0: abstract namespace, freed by the kernel when the
	 * last socket bound to it closes, e.g. when its owner dies. */
	k = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "rcp-shm-%.*s", (int)n, name);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
}

static inline uint64_t align_up(uint64_t v)
{
	return (v + RINGS_ALIGN - 1) & ~(uint64_t)(RINGS_ALIGN - 1);
}

/* A segment is ours to trust only if it is a regular file of our
 * effective uid that nobody else may open (common/shmseg.c).  Returns 0 or
 * RCP_EPERM, logging why with "shm:WHO". */
static inline int seg_trusted(const struct stat *st, const char *who, const char *path)
{
	char w[96];
	snprintf(w, sizeof w, "shm:%s", who);
	return rcpi_shm_trusted(st, w, path);
}

static inline void layout(uint32_t nslots, uint32_t ncells, uint32_t nmrs, struct shm_layout *l)
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

static inline struct shm_mrent *seg_mrs(struct shm_seg *seg, const struct shm_layout *l)
{
	return (struct shm_mrent *)(void *)((unsigned char *)seg + l->mrs_off);
}

static inline unsigned char *seg_ring(struct shm_seg *seg, const struct shm_layout *l, uint32_t i)
{
	return (unsigned char *)seg + l->rings_off + (uint64_t)i * l->ring_bytes;
}

static inline int errno_rc(int e)
{
	switch (e) {
	case ENOSPC:
	case ENOMEM: return RCP_ENOMEM;
	case EACCES:
	case EPERM: return RCP_EPERM;
	default: return RCP_ESYS;
	}
}

/* ---- between the files (each file calls only those listed before it) ---- */

/* seg.c */
long rcpi_shm_db_holder_uid(const struct sockaddr_un *sa, socklen_t salen);
int rcpi_shm_seg_create(struct shm_nic *nic, const char *path);
void rcpi_shm_sweep_stale(struct shm_nic *nic);
int rcpi_shm_peer_check(struct shm_nic *nic, struct shm_peer *p);
int rcpi_shm_reap_dead(struct shm_seg *seg, uint32_t nslots, uint32_t my_pidns);

/* slots.c */
int32_t rcpi_shm_peer_by_name(struct shm_nic *nic, const char *name, size_t n);
void rcpi_shm_ring_broken(struct shm_nic *nic, struct shm_ring *r, uint64_t pos, uint64_t h,
                          const char *why);
void rcpi_shm_reset_drained(struct shm_nic *nic);
void rcpi_shm_scan(struct shm_nic *nic);

/* doorbell.c */
void rcpi_shm_db_ring(struct shm_nic *nic, struct shm_peer *p);
void rcpi_shm_db_flush(struct shm_nic *nic);
void rcpi_shm_disarm(struct shm_nic *nic);
int rcpi_shm_flush(rcp_nic *base);
int rcpi_shm_fd(const rcp_nic *base);
int rcpi_shm_pending(rcp_nic *base);
int rcpi_shm_arm(rcp_nic *base);

/* peers.c */
void rcpi_shm_peer_disconnect(struct shm_nic *nic, struct shm_peer *p, int release);
int rcpi_shm_peer_add(rcp_nic *base, const void *blob, size_t len, int *peer);
int rcpi_shm_peer_add_str(rcp_nic *base, const char *addr, int *peer);
int rcpi_shm_peer_remove(rcp_nic *base, int peer);

/* ring.c */
int rcpi_shm_send(rcp_nic *base, int peer, const struct iovec *iov, int iovcnt, size_t total,
                  unsigned flags);
int rcpi_shm_recv(rcp_nic *base, struct rcp_nic_frame *fr, int max);
void rcpi_shm_release(rcp_nic *base, struct rcp_nic_frame *fr, int n);

#ifdef HAVE_PROCESS_VM_READV
/* rma.c */
int rcpi_shm_mr_reg(rcp_nic *base, void *addr, size_t len, unsigned access, rcp_nic_mr **out);
int rcpi_shm_mr_dereg(rcp_nic_mr *base);
int rcpi_shm_mr_pack(const rcp_nic_mr *base, void *rkey, size_t *len);
int rcpi_shm_get(rcp_nic *base, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                 uint64_t offset);
int rcpi_shm_put(rcp_nic *base, int peer, const void *local, size_t len, const void *rkey,
                 size_t rkeylen, uint64_t offset);
#endif

#endif /* RCP_NIC_SHM_INT_H */
