/*
 * rcp/nic.h — the one interface between RCP and network hardware.
 *
 * A nic endpoint offers unreliable datagrams ("frames") between endpoints
 * of the same backend, a file descriptor to sleep on, and, where the
 * backend can, memory registration and one-sided RMA.  Everything above
 * (rcp/, bulk/, rpc/) uses only this header.
 *
 * Backends (one file each under nic/, one ops table each):
 *   shm:NAME         same host, lock-free rings in POSIX shared memory;
 *                    RMA by cross-memory attach (process_vm_readv/writev)
 *   udp:HOST:PORT    any IP network, unprivileged; "udp:" picks a free port
 *                    on 127.0.0.1, "udp:HOST:" a free port on HOST
 *   xdp:IFNAME[/Q]   AF_XDP on an Ethernet link (root; built with libxdp):
 *                    peers xdp:IFNAME@MAC or @IPv4 on the same link
 *   verbs:DEV:PORT[:GIDX]  InfiniBand/RoCE UD queue pairs (built with
 *                    rdma-core): peers verbs:DEV:PORT@QPN/LID or @QPN/GID;
 *                    RCP_ENODEV when there is no such device or port
 *   faults           not an address: a wrapper over any backend, enabled by
 *                    rcp_nic_config.faults or RCP_FAULTS (see docs/nic.md)
 *
 * Frames may be lost, duplicated or reordered by some backends (see the
 * capability flags); no backend truncates a frame silently: a frame is
 * delivered whole or not at all.
 *
 * Threading: an endpoint is used by one thread at a time.  Different
 * endpoints are independent.
 */
#ifndef RCP_NIC_H
#define RCP_NIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rcp/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rcp_nic rcp_nic;
typedef struct rcp_nic_mr rcp_nic_mr;

/* Largest binary address blob of any backend, in bytes. */
#define RCP_NIC_ADDR_MAX 64
/* Longest address string, including the terminating NUL. */
#define RCP_NIC_ADDRSTR_MAX 128
/* Largest packed remote key of any backend, in bytes. */
#define RCP_NIC_RKEY_MAX 64

/* Peer index meaning "the sender of this frame is not a known peer". */
#define RCP_NIC_PEER_NONE (-1)

/* Capability flags (rcp_nic_info.caps). */
enum {
	RCP_NIC_CAP_ORDERED = 1u << 0,   /* frames between a pair arrive in order */
	RCP_NIC_CAP_RELIABLE = 1u << 1,  /* frames are never lost or duplicated */
	RCP_NIC_CAP_CHECKED = 1u << 2,   /* payload corruption is detected below */
	RCP_NIC_CAP_RMA = 1u << 3,       /* rcp_nic_get/put work */
	RCP_NIC_CAP_SAME_HOST = 1u << 4, /* peers are on this host only */
	/* Every peer is a process of this host and of our effective uid, so
	 * a POSIX shared-memory segment one side creates (mode 0600) the
	 * other can map: loads and stores into it are one-sided, crossing
	 * no frame.  Remote fetch (rpc/rfp.c) runs only where this is set.
	 * Wrappers pass it through (docs/nic.md, "Capabilities"). */
	RCP_NIC_CAP_SHARED_SEG = 1u << 5,
	/* IP multicast: the endpoint may add a group address as a peer (one
	 * send reaches every member, unreliably), and rcp_nic_open takes a
	 * group endpoint that joins the group on an interface
	 * ("udp:GROUP:PORT@IFADDR", udp over IPv4; docs/nic.md).  Reliable
	 * multicast over it: include/rcp/mcastnet.h.  Wrappers pass it. */
	RCP_NIC_CAP_MCAST = 1u << 6,
};

/* Flags for rcp_nic_send(). */
enum {
	/* More frames follow: the backend may batch this frame and keep
	 * pointers into the iov data (not the iov array) until the next
	 * rcp_nic_send() without this flag or rcp_nic_flush(). */
	RCP_NIC_MORE = 1u << 0,
};

/* Flags for rcp_nic_config.flags. */
enum {
	/* The caller sleeps in every wait (rcp_nic_recv_wait) rather than
	 * spinning first: a backend may then trade spinning speed for
	 * cheaper sleeps (udp: no lane, see docs/nic.md). */
	RCP_NIC_SLEEPER = 1u << 0,
};

/* Access flags for rcp_nic_mr_reg(). */
enum {
	RCP_NIC_ACCESS_READ = 1u << 0,  /* peers may rcp_nic_get() from it */
	RCP_NIC_ACCESS_WRITE = 1u << 1, /* peers may rcp_nic_put() into it */
};

struct rcp_nic_config {
	/* Fault-injection spec ("drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,
	 * delay=0.01,delay_us=200,seed=7").  NULL: use RCP_FAULTS if set;
	 * "" : no faults even if RCP_FAULTS is set. */
	const char *faults;
	/* Receive-side capacity hint in bytes (ring size, socket buffer);
	 * 0 = backend default (see docs/config.md). */
	size_t rx_bytes;
	/* Largest frame wanted, bytes; 0 = backend default; the backend may
	 * lower it (rcp_nic_info.mtu tells the truth). */
	uint32_t mtu;
	/* RCP_NIC_* config flags; 0 = none. */
	unsigned flags;
	/* Job key: every frame carries a MAC under a key derived from this
	 * string and frames without the right MAC are dropped (nic/auth.c).
	 * All endpoints of a job need the same string.  NULL: use
	 * RCP_SESSION_KEY if set; "" : no key even if it is set. */
	const char *key;
};

struct rcp_nic_info {
	const char *backend; /* "shm", "udp", "faults+udp", ... */
	uint32_t mtu;        /* largest frame rcp_nic_send() accepts, bytes */
	uint32_t rx_frames;  /* MTU-sized frames the receive side holds per
	                        sending peer: the window RCP may use */
	uint32_t caps;       /* RCP_NIC_CAP_* */
	/* A waiter on this nic spins alone this long past its last event
	 * before it offers the CPU (common/wait.c); 0: the library's 5 us.
	 * A nic whose own round trip is about that long asks for more. */
	uint32_t solo_ns;
	/* xdp: the socket busy-polls its NAPI this many us per empty
	 * receive (RCP_XDP_BUSY_POLL); 0: off, and on every other nic. */
	uint32_t busy_poll_us;
};

struct rcp_nic_stats {
	uint64_t tx_frames, tx_bytes, tx_eagain;
	uint64_t rx_frames, rx_bytes;
	uint64_t rx_dropped; /* malformed/oversized/unattributable input */
	uint64_t wakeups;    /* doorbells sent (shm), TX kicks made (xdp) */
	/* faults wrapper */
	uint64_t f_dropped, f_duplicated, f_reordered, f_corrupted, f_delayed;
	/* job key (auth wrapper): frames refused for a missing/wrong MAC */
	uint64_t a_rejected;
	/* xdp with busy-poll on: empty receives that drove the NAPI poll */
	uint64_t busy_polls;
};

/* A received frame.  Valid until rcp_nic_release(). */
struct rcp_nic_frame {
	const void *data;
	uint32_t len;
	int32_t peer;    /* peer index, or RCP_NIC_PEER_NONE */
	const void *src; /* sender's address blob (for rcp_nic_peer_add) */
	uint32_t srclen;
	uint32_t reserved;
	uintptr_t token; /* backend private */
};

/* ---- endpoints -------------------------------------------------------- */

/* Opens an endpoint at ADDR ("shm:NAME", "udp:HOST:PORT", "udp:").
 * CFG may be NULL for defaults.
 * Returns 0, RCP_EINVAL, RCP_EADDR (malformed), RCP_ENOENT (no such backend
 * built), RCP_ENODEV (verbs: no such device, or its port not ACTIVE),
 * RCP_EADDRINUSE, RCP_EPERM, RCP_ENOMEM, RCP_ESYS; RCP_EINVAL also for a
 * malformed RCP_FAULTS spec, RCP_ENOTSUP for RCP_SESSION_KEY in a build
 * without libsodium. */
int rcp_nic_open(const char *addr, const struct rcp_nic_config *cfg, rcp_nic **out);

/* Closes the endpoint, releasing all peers and registrations.  NULL is
 * accepted. */
void rcp_nic_close(rcp_nic *nic);

/* Fills INFO.  Returns 0 or RCP_EINVAL. */
int rcp_nic_query(const rcp_nic *nic, struct rcp_nic_info *info);

/* Copies the endpoint's statistics.  Returns 0 or RCP_EINVAL. */
int rcp_nic_get_stats(const rcp_nic *nic, struct rcp_nic_stats *st);

/* The endpoint's own address as a string (parsable by rcp_nic_peer_add_str)
 * or as a compact binary blob to send to a peer.  *LEN is in: buffer size,
 * out: bytes used.  Return 0, RCP_EINVAL or RCP_ERANGE (buffer too small). */
int rcp_nic_addr_str(const rcp_nic *nic, char *buf, size_t len);
int rcp_nic_addr_blob(const rcp_nic *nic, void *buf, size_t *len);

/* ---- peers ------------------------------------------------------------ */

/* Turns a peer's address (blob or string) into a destination index >= 0,
 * stored in *PEER.  Adding the same address twice returns the same index.
 * Returns 0, RCP_EINVAL, RCP_EADDR (malformed, or another backend's),
 * RCP_EPEER (shm: no such endpoint), RCP_EPERM (shm: the segment is not
 * our user's, mode 0600), RCP_ENOMEM, RCP_EAGAIN (peer table full). */
int rcp_nic_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer);
int rcp_nic_peer_add_str(rcp_nic *nic, const char *addr, int *peer);

/* Forgets a peer; its index may be reused.  Returns 0 or RCP_EINVAL. */
int rcp_nic_peer_remove(rcp_nic *nic, int peer);

/* ---- datagrams -------------------------------------------------------- */

/* Sends one frame gathered from IOV to PEER.  FLAGS: RCP_NIC_MORE.
 * Returns 0, RCP_EINVAL (bad peer/iov), RCP_EMSGSIZE (frame > mtu),
 * RCP_EAGAIN (no room now: poll and retry), RCP_EPEER (peer gone),
 * RCP_ESYS. */
int rcp_nic_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, unsigned flags);

/* Pushes out frames batched with RCP_NIC_MORE.  Returns 0, RCP_EAGAIN
 * (some frames still queued), RCP_ESYS or RCP_EINVAL (NULL). */
int rcp_nic_flush(rcp_nic *nic);

/* Receives up to MAX frames without blocking.  Returns the count (0 if
 * none) or a negative code (RCP_EINVAL, RCP_ESYS).  Frames stay valid,
 * in place in the backend's buffers, until rcp_nic_release(); they must
 * be released before the next rcp_nic_recv() on the same endpoint. */
int rcp_nic_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max);

/* Like rcp_nic_recv(), but when no frame is there it sleeps until one
 * arrives or about TIMEOUT_NS passes (<0: forever), then returns what came
 * (0 if nothing did, or a signal interrupted the sleep).  A sleep of a
 * millisecond or more may be rounded up to the kernel's tick: callers that
 * need a precise wake-up pass less, or use rcp_nic_arm() and the fd.  The
 * udp backend sleeps inside the receive call itself: one system call per
 * wake-up instead of a poll and a receive.  Returns the count, RCP_EINVAL
 * or RCP_ESYS. */
int rcp_nic_recv_wait(rcp_nic *nic, struct rcp_nic_frame *frames, int max, int64_t timeout_ns);

/* Returns frames to the backend.  Releasing N frames releases the first N
 * of the last burst. */
void rcp_nic_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n);

/* ---- sleeping --------------------------------------------------------- */

/* A file descriptor that becomes readable when frames may have arrived,
 * once the endpoint is armed.  Use with poll/epoll; never read it.
 * Returns the fd, or RCP_EINVAL (NULL). */
int rcp_nic_fd(const rcp_nic *nic);

/* Arms the wake-up: returns 0 if the caller may now sleep on the fd, or
 * RCP_EAGAIN if frames are already waiting (do not sleep: receive them),
 * RCP_EINVAL (NULL).  Any rcp_nic_recv() disarms. */
int rcp_nic_arm(rcp_nic *nic);

/* Waits until frames may be ready or TIMEOUT_NS passes (<0: forever),
 * by the one wait policy (docs/waiting.md): spins, then arms and sleeps
 * on the fd; SPIN_NS stands for RCP_SPIN_NS (<0: that default; 0: sleep
 * at once).  Returns 0 when frames may be ready,
 * RCP_ETIMEDOUT, RCP_ESYS, RCP_EINVAL (NULL). */
int rcp_nic_wait(rcp_nic *nic, int64_t timeout_ns, int64_t spin_ns);

/* ---- memory registration and RMA -------------------------------------- */

/* Registers [ADDR, ADDR+LEN) for peers' RMA with ACCESS flags.
 * Returns 0, RCP_EINVAL, RCP_ENOTSUP (no RCP_NIC_CAP_RMA), RCP_ENOMEM. */
int rcp_nic_mr_reg(rcp_nic *nic, void *addr, size_t len, unsigned access, rcp_nic_mr **out);
/* Deregisters; NULL accepted.  Returns 0 or RCP_EINVAL. */
int rcp_nic_mr_dereg(rcp_nic_mr *mr);
/* Packs a remote key a peer passes to rcp_nic_get/put.  *LEN in/out.
 * Returns 0, RCP_EINVAL, RCP_ERANGE. */
int rcp_nic_mr_pack(const rcp_nic_mr *mr, void *rkey, size_t *len);

/* Copies LEN bytes at OFFSET of the peer's region named by RKEY into LOCAL
 * (get), or from LOCAL into it (put).  Synchronous: on return the data has
 * moved.  Returns 0, RCP_EINVAL, RCP_ENOTSUP (no RMA; verbs: not to this
 * peer yet, use another path, docs/nic.md), RCP_EACCES (outside the
 * region or not permitted by the key), RCP_EPEER (peer gone), RCP_ESYS. */
int rcp_nic_get(rcp_nic *nic, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                uint64_t offset);
int rcp_nic_put(rcp_nic *nic, int peer, const void *local, size_t len, const void *rkey,
                size_t rkeylen, uint64_t offset);

/* Names of the backends built into this library, NULL-terminated. */
const char *const *rcp_nic_backends(void);

#ifdef __cplusplus
}
#endif
#endif
