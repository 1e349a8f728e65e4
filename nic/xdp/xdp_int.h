/*
 * nic/xdp/xdp_int.h — the AF_XDP nic backend ("xdp:IFNAME[/QUEUE]"): its
 * shared state and design notes.
 *
 * Files, each calling only those after it: xdp.c (the endpoint: open,
 * close, query, the ops table), rx.c (receive, release, waiting), tx.c
 * (send, kicks, completions), peers.c (addresses and the peer table),
 * link.c (our XDP program on an interface and who owns it), neigh.c
 * (peer strings to MACs).
 *
 * User space owns the interface's rings, as the paper's RCP owned
 * Myrinet's: frames land in a memory area of ours (the UMEM) and we drive
 * the fill, RX, TX and completion rings ourselves, past the socket stack.
 * Built when libxdp and libbpf are found (configure); absent otherwise.
 *
 * ---- Frames on the wire -------------------------------------------------
 *
 *   0   destination MAC (6)
 *   6   source MAC (6)
 *   12  EtherType 0x88B5 (IEEE 802 "local experimental 1", big endian)
 *   14  payload length (2, big endian)
 *   16  payload
 *
 * An EtherType of our own is the cheapest marker to steer on (one 16-bit
 * compare, no IP header to walk) and needs no address or port plan: RCP
 * frames are plain Ethernet frames on one link (a veth pair, a bridge, a
 * switch), not routed.  The length word is there because a link pads
 * short frames to 60 bytes: without it an 8-byte payload would arrive as
 * 44.  A received frame is refused (counted in rx_dropped, its buffer
 * back to the fill ring at once) unless every field holds: our EtherType,
 * our MAC as destination, a unicast source, and a length word that fits
 * the frame and, for frames over 60 bytes, that matches it exactly.  The link's FCS (or, on veth, memory) checks the bytes, hence
 * RCP_NIC_CAP_CHECKED; frames are not ordered across RX queues or
 * retried, so neither ORDERED nor RELIABLE.
 *
 * ---- The XDP program and who owns the interface -------------------------
 *
 * link.c: our own 15-instruction program steering EtherType
 * 0x88B5 to the socket of its RX queue and everything else to the kernel,
 * native or generic (RCP_XDP_MODE), one endpoint per interface (an flock),
 * a crashed endpoint's program detached by the next open.
 *
 * ---- The UMEM and the rings -------------------------------------------------
 *
 * One anonymous mapping of 2 x RING frames of 4 KiB: the lower half
 * receives, the upper half transmits.  (A chunk over 4 KiB would need the
 * UMEM in huge pages: the kernel refuses chunks over a page otherwise.)  RING is
 * rcp_nic_config.rx_bytes / 4 KiB, or by default what a window of
 * XDP_WINDOW frames of the link's MTU needs (below), rounded up to a
 * power of two in [256, 16384]: 256 at MTU 1500, 1024 at 9000.  The rings hold RING entries each, as many as each half
 * has frames, so the fill ring always has room for every RX frame we give
 * back and the TX ring for every TX frame.
 *
 *   receive:  the kernel takes a frame address from the fill ring, copies
 *             (or DMAs) the frame into it and posts it on the RX ring;
 *             recv() peeks up to XDP_BURST descriptors, releases the RX
 *             ring entries at once (the frames stay ours) and hands the
 *             payloads up in place; release() gives the burst back to
 *             the fill ring with one reserve/submit.  Frames refused
 *             (not ours, malformed) go back at once.
 *   send:     a free TX frame from a stack of them (refilled in batches
 *             from the completion ring when empty), header and payload
 *             gathered into it, one TX descriptor submitted.  In copy mode
 *             the kernel transmits only when kicked (sendto): send()
 *             without RCP_NIC_MORE and flush() kick; with MORE frames
 *             wait on the ring and go out with one kick.  A kick moves a
 *             bounded batch per call, so flush kicks until the kernel's
 *             consumer index reaches ours.
 *   frames over one buffer (a link MTU over 3,826 B: jumbo frames):
 *             the socket binds with XDP_USE_SG (kernel 6.6+; without
 *             it, again without, and the MTU stops at 3,824 B).  The
 *             kernel then posts a frame as a chain of RX descriptors,
 *             all but the last marked XDP_PKT_CONTD, all published
 *             together; recv() joins a chain into a buffer of its own
 *             (joined[], one per burst slot) and gives the chain's
 *             buffers back at once, so the in-place hand-up is for
 *             one-buffer frames only: a copy of 9 KB costs less than
 *             the system call that carried it.  A chain cut by the
 *             peek's end is left for the next call, one longer than a
 *             burst (not ours: the kernel splits at most 17 ways) is
 *             dropped to its end (rx_skip), one of more than XDP_SEGS
 *             buffers or whose header fails the checks is dropped.
 *             Sending, a frame over 4 KiB is gathered over several TX
 *             frames and submitted as one chain.
 *   need_wakeup (XDP_USE_NEED_WAKEUP): a kick is made only when the TX
 *             ring asks for one (always in copy mode), and release() pokes
 *             the kernel with recvfrom only when the fill ring asks
 *             (zero-copy drivers that stopped polling it).
 *   busy-poll: opt-in (RCP_XDP_BUSY_POLL=us, default 0: off; session
 *             21).  On: the open sets SO_PREFER_BUSY_POLL 1, SO_BUSY_POLL
 *             us and SO_BUSY_POLL_BUDGET 64 on the socket, and recv()
 *             on an empty RX ring calls recvfrom(MSG_DONTWAIT), which
 *             runs the queue's NAPI poll in our context (counted in
 *             busy_polls; rcp_nic_info.busy_poll_us says it is on).  An
 *             option the kernel refuses (EPERM: a value above
 *             net.core.busy_poll without CAP_NET_ADMIN) leaves busy-poll
 *             off, the options already set undone, the reason logged,
 *             and the open succeeds: it is a speed knob, not a need.
 *             Why off by default: measured no faster between two
 *             rcp-cluster hosts (session 19-20, bare 8 B frame, 3
 *             interleaved rounds: generic 4.76-5.25 us without,
 *             4.88-5.34 with; native 5.98-6.02 without, 6.23-6.88
 *             with): on veth in generic mode the socket has no NAPI
 *             context to poll (frames come from the per-CPU backlog),
 *             and in native mode the sender's CPU already runs the
 *             peer's NAPI inside its kick, so the recvfrom is a system
 *             call per empty look for nothing.  It is for drivers with
 *             NAPI per queue (docs/nic.md).
 *
 * Memory ordering: the xsk ring helpers of libxdp are the protocol: a
 * producer writes descriptors, then publishes its index with a release
 * store; a consumer loads the other side's index with acquire before it
 * reads descriptors.  pending() is one acquire load of the RX producer
 * index against our cached consumer index (we release RX entries as soon
 * as we peek them, so the two agree).
 *
 * The window.  A frame arriving when the fill ring is empty is dropped by
 * the kernel, silently (an unpaced burst of 10,000 frames into a veth
 * delivered 4,095).  The fill ring and RX ring hold RING frames, of
 * which up to XDP_BURST are in the caller's hands and up to XDP_STASH
 * released but not yet given back (rx.c), so rx_frames is
 * (RING - XDP_BURST - XDP_STASH) / 2 / segs (segs: the buffers a frame of MTU bytes
 * takes, 3 at MTU 9000): one sender at a full window leaves half the
 * rings for the rest.
 *
 * Why the default window is XDP_WINDOW (80 frames, 120 KB at MTU 1500)
 * and not the 976 of 2048-entry rings (sessions 17-19): a small window
 * is faster here.  RCP's send ring had one slot of ~2.1 KiB per frame of
 * window (192 B since session 21: rcp/chan.h, SLOT STORAGE) and each
 * message takes the next; the RX half of the UMEM is
 * used round robin, a page a frame.  At 976 that is 2.2 MiB of slots and
 * 8 MiB of RX buffers cycled per end, a cold line and page or more per
 * message, and the cost shows inside the kick: the kernel's path (skb,
 * bridge, the peer's generic XDP, the copy) then misses where it hit.
 * Measured (TSC around the kick's sendto, session 20, docs/results.md
 * "Session 20 (xdp4 lane)"): the bare frame's kick barely moves with the
 * ring; RCP's is 1,300-2,200 cycles cheaper at 256 entries, its 8 B round
 * trip 0.5-1.5 us faster and its 4 MiB transfer ~15% faster.  80 frames
 * is still ~40x the bandwidth-delay product of a 25 Gbit/s link at 20 us;
 * rx_bytes asks for more.
 *
 * ---- Sleeping -------------------------------------------------------------
 *
 * The wait fd is the socket itself: poll() reports POLLIN while the RX
 * ring is not empty and the kernel wakes it when it posts a frame.  arm()
 * only looks at the RX ring (RCP_EAGAIN if frames wait); recv_wait is the
 * dispatcher's arm/ppoll/recv.
 *
 * Time alone (rcp_nic_info.solo_ns, XDP_SOLO_NS).  A waiter spins alone
 * 5 us past its last event, then offers the CPU at each look
 * (common/wait.c): right for shm, whose answer from a task on another CPU
 * comes within a microsecond.  Here a round trip between two hosts is
 * itself about 5 us spinning (each kick ~3 us in copy mode: the skb, the
 * bridge, the peer's generic XDP and the copy, on the sender's CPU), so
 * every round trip slower than the median yielded (1,800-11,000
 * sched_yield a run per end under load, session 19).  50 us is ten round
 * trips: an answer that late is not coming soon, and yielding is right
 * again.  Measured in docs/results.md "Session 20 (xdp4 lane)".
 *
 * ---- Peers ------------------------------------------------------------------
 *
 * A peer is a MAC address on our link.  Address blob: [RCPI_NIC_XDP][MAC 6].
 * Strings: "xdp:IFNAME@aa:bb:cc:dd:ee:ff" (rcp_nic_addr_str gives ours) or
 * "xdp:IFNAME@A.B.C.D[:PORT]" (the port ignored), the MAC then taken from the kernel's neighbour
 * table (/proc/net/arp), resolved first if needed (neigh.c).  In a peer string the
 * IFNAME is the peer's own and is not used: frames leave through this
 * endpoint's interface.  Frames addressed to another MAC (a bridge floods
 * unknown unicast) are counted in rx_dropped and dropped.  Peers are
 * found by a linear scan behind a one-entry cache: fine for the tens of
 * hosts of one link; a hash is the next step past that.
 */
#ifndef RCP_NIC_XDP_INT_H
#define RCP_NIC_XDP_INT_H

#include <net/if.h>
#include <stdint.h>
#include <sys/uio.h>

#include <xdp/xsk.h>

#include "nic/nic_int.h"

struct xsk_socket;

/* The frame format (above): our EtherType, and the header before
 * the payload (Ethernet header + 2-byte payload length). */
#define XDP_ETHERTYPE 0x88B5u
#define XDP_HDR       16u

/* An interface an endpoint owns, and the program attached to it. */
struct rcpi_xdp_link {
	char ifname[IF_NAMESIZE];
	int ifindex;
	int prog_fd;           /* our program, -1 until loaded */
	int map_fd;            /* its XSKMAP, -1 until made */
	int lock_fd;           /* flock: the interface is ours */
	int ns_fd;             /* our network namespace, for the detach */
	uint32_t attach_flags; /* XDP_FLAGS_DRV_MODE or _SKB_MODE; 0: not attached */
	char lock_path[128];
};

/* Sets the fds to -1 and remembers the caller's network namespace
 * (IFNAME and IFINDEX are the caller's to fill). */
void rcpi_xdp_link_init(struct rcpi_xdp_link *l);
/* Takes the interface: its lock (RCP_EADDRINUSE if a live endpoint holds
 * it), then detaches a crashed endpoint's program or refuses a foreign
 * one (RCP_EADDRINUSE).  Returns 0 or a negative RCP code. */
int rcpi_xdp_link_own(struct rcpi_xdp_link *l);
/* Makes the XSKMAP holding XSK (bound to RX queue QUEUE), loads the
 * program and attaches it (RCP_XDP_MODE).  Returns 0, RCP_EPERM,
 * RCP_ENOTSUP, RCP_EADDRINUSE, RCP_ENOMEM, with the reason logged. */
int rcpi_xdp_link_attach(struct rcpi_xdp_link *l, struct xsk_socket *xsk, uint32_t queue);
/* Detaches our program (only ours), from the namespace of the open. */
void rcpi_xdp_link_detach(struct rcpi_xdp_link *l);
/* Closes the fds and gives the interface up (the lock last). */
void rcpi_xdp_link_close(struct rcpi_xdp_link *l);
/* neigh.c: "aa:bb:cc:dd:ee:ff" -> MAC: 0 or RCP_EADDR. */
int rcpi_xdp_parse_mac(const char *s, uint8_t mac[6]);
/* The MAC of IPv4 address IP on IFNAME, from the neighbour table (the
 * kernel's ARP provoked if the entry is missing; waits up to about a
 * second).  0, RCP_EADDR (not an address), RCP_EPEER (no answer),
 * RCP_ESYS. */
int rcpi_xdp_neigh_mac(const char *ifname, const char *ip, uint8_t mac[6]);
/* errno (either sign) of a failed privileged step -> RCP code, logged. */
int rcpi_xdp_err(const char *what, int err);

#define XDP_FRAME    4096u
#define XDP_WINDOW   80u /* frames of window the default rings hold (above) */
#define XDP_RING_MIN 256u
#define XDP_RING_MAX 16384u
#define XDP_BURST    64
#define XDP_STASH    32 /* released RX buffers returned to the fill ring at a time (rx.c) */
#define XDP_PEERS    1024
#define XDP_BLOB     7u     /* id + MAC */
#define XDP_KICKS    64     /* kicks per flush before RCP_EAGAIN */
#define XDP_MINFRAME 60     /* what a link pads a short frame to (no FCS) */
#define XDP_SOLO_NS  50000u /* a waiter's time alone (above, "Sleeping") */
#define XDP_RXROOM   (XDP_FRAME - XDP_PACKET_HEADROOM) /* frame bytes per RX buffer */
#define XDP_SEGS     4                       /* buffers per frame at most (multi-buffer) */
#define XDP_BIG      (XDP_SEGS * XDP_RXROOM) /* a multi-buffer frame at most */
#define XDP_NOBUF    UINT64_MAX /* held[]: a frame copied out, its buffers given back */
/* The kernel's multi-buffer flags (6.6+), absent from older headers. */
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

struct xdp_peer {
	uint8_t mac[6];
	uint8_t used;
};

struct xdp_nic {
	struct rcp_nic base; /* first: the dispatcher casts */
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	void *area;
	int fd;                    /* the socket */
	struct rcpi_xdp_link link; /* program, interface, ownership */
	uint32_t queue;
	uint32_t mtu;
	uint32_t segs;    /* RX buffers a frame of MTU bytes takes */
	int sg;           /* bound with XDP_USE_SG: frames span buffers */
	uint32_t busy_us; /* busy-poll on (RCP_XDP_BUSY_POLL, us), or 0 (above) */
	uint8_t *joined;  /* XDP_BURST x XDP_BIG: multi-buffer frames, joined */
	uint8_t mac[6];
	uint32_t tx_queued; /* submitted since the last kick */
	/* free TX frame addresses */
	uint32_t ring; /* entries per ring = frames per UMEM half */
	uint64_t *txfree;
	uint32_t ntxfree;
	/* the burst in the caller's hands */
	uint64_t held[XDP_BURST];
	int nheld, released;
	uint64_t stash[XDP_STASH]; /* released, not yet on the fill ring */
	int nstash;
	int rx_skip; /* dropping the rest of a chain longer than a burst */
	uint8_t srcblob[XDP_BURST][XDP_BLOB];
	struct xdp_peer *peers;
	int npeers; /* highest used index + 1 */
	int last_peer;
};

static inline struct xdp_nic *xdp_of(rcp_nic *nic)
{
	return (struct xdp_nic *)nic;
}

static inline const struct xdp_nic *xdp_ofc(const rcp_nic *nic)
{
	return (const struct xdp_nic *)nic;
}

/* peers.c */
int rcpi_xdp_addr_str(const rcp_nic *nic, char *buf, size_t len);
int rcpi_xdp_addr_blob(const rcp_nic *nic, void *buf, size_t *len);
int rcpi_xdp_peer_find(struct xdp_nic *x, const uint8_t *mac);
int rcpi_xdp_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer);
int rcpi_xdp_peer_add_str(rcp_nic *nic, const char *addr, int *peer);
int rcpi_xdp_peer_remove(rcp_nic *nic, int peer);
/* tx.c */
int rcpi_xdp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                  unsigned flags);
int rcpi_xdp_flush(rcp_nic *nic);
int rcpi_xdp_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen);
/* rx.c */
int rcpi_xdp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max);
void rcpi_xdp_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n);
int rcpi_xdp_fd(const rcp_nic *nic);
int rcpi_xdp_pending(rcp_nic *nic);
int rcpi_xdp_arm(rcp_nic *nic);

#endif
