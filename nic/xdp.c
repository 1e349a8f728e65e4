/*
 * nic/xdp.c — the AF_XDP nic backend ("xdp:IFNAME[/QUEUE]").
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
 * nic/xdp_link.c: our own 15-instruction program steering EtherType
 * 0x88B5 to the socket of its RX queue and everything else to the kernel,
 * native or generic (RCP_XDP_MODE), one endpoint per interface (an flock),
 * a crashed endpoint's program detached by the next open.
 *
 * ---- The UMEM and the rings -------------------------------------------------
 *
 * One anonymous mapping of 2 x RING frames of 4 KiB: the lower half
 * receives, the upper half transmits.  (A chunk over 4 KiB would need the
 * UMEM in huge pages: the kernel refuses chunks over a page otherwise.)  RING is XDP_RING (2048), or
 * rcp_nic_config.rx_bytes / 4 KiB rounded up to a power of two in
 * [256, 16384].  The rings hold RING entries each, as many as each half
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
 *   busy-poll: not used.  SO_PREFER_BUSY_POLL + SO_BUSY_POLL (20 us) +
 *             SO_BUSY_POLL_BUDGET (64), with a recvfrom in every empty
 *             receive to drive it, measured no faster between two
 *             rcp-cluster hosts (bare 8 B frame, 3 interleaved rounds:
 *             generic 4.76-5.25 us without, 4.88-5.34 with; native
 *             5.98-6.02 without, 6.23-6.88 with): on veth in generic mode
 *             the socket has no NAPI context to poll (frames come from
 *             the per-CPU backlog), and in native mode the sender's CPU
 *             already runs the peer's NAPI inside its kick.  It is for
 *             drivers with NAPI per queue (docs/nic.md).
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
 * which up to XDP_BURST are in the caller's hands, so rx_frames is
 * (RING - XDP_BURST) / 2 / segs (segs: the buffers a frame of MTU bytes
 * takes, 3 at MTU 9000): one sender at a full window leaves half the
 * rings for the rest.
 *
 * ---- Sleeping -------------------------------------------------------------
 *
 * The wait fd is the socket itself: poll() reports POLLIN while the RX
 * ring is not empty and the kernel wakes it when it posts a frame.  arm()
 * only looks at the RX ring (RCP_EAGAIN if frames wait); recv_wait is the
 * dispatcher's arm/ppoll/recv.
 *
 * ---- Peers ------------------------------------------------------------------
 *
 * A peer is a MAC address on our link.  Address blob: [RCPI_NIC_XDP][MAC 6].
 * Strings: "xdp:IFNAME@aa:bb:cc:dd:ee:ff" (rcp_nic_addr_str gives ours) or
 * "xdp:IFNAME@A.B.C.D[:PORT]" (the port ignored), the MAC then taken from the kernel's neighbour
 * table (/proc/net/arp), resolved first if needed (nic/xdp_neigh.c).  In a peer string the
 * IFNAME is the peer's own and is not used: frames leave through this
 * endpoint's interface.  Frames addressed to another MAC (a bridge floods
 * unknown unicast) are counted in rx_dropped and dropped.  Peers are
 * found by a linear scan behind a one-entry cache: fine for the tens of
 * hosts of one link; a hash is the next step past that.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>

#include "nic/nic_int.h"
#include "nic/xdp_int.h"

#define XDP_FRAME    4096u
#define XDP_RING     2048u /* default entries per ring = frames per UMEM half */
#define XDP_RING_MIN 256u
#define XDP_RING_MAX 16384u
#define XDP_BURST    64
#define XDP_PEERS    1024
#define XDP_BLOB     7u /* id + MAC */
#define XDP_KICKS    64 /* kicks per flush before RCP_EAGAIN */
#define XDP_MINFRAME 60 /* what a link pads a short frame to (no FCS) */
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
	uint32_t segs;   /* RX buffers a frame of MTU bytes takes */
	int sg;          /* bound with XDP_USE_SG: frames span buffers */
	uint8_t *joined; /* XDP_BURST x XDP_BIG: multi-buffer frames, joined */
	uint8_t mac[6];
	uint32_t tx_queued; /* submitted since the last kick */
	/* free TX frame addresses */
	uint32_t ring; /* entries per ring = frames per UMEM half */
	uint64_t *txfree;
	uint32_t ntxfree;
	/* the burst in the caller's hands */
	uint64_t held[XDP_BURST];
	int nheld, released;
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

/* ---- interface facts -------------------------------------------------- */

static int iface_facts(struct xdp_nic *x)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (s < 0)
		return RCP_ESYS;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, x->link.ifname, strlen(x->link.ifname));
	if (ioctl(s, SIOCGIFHWADDR, &ifr) || ifr.ifr_hwaddr.sa_family != 1 /* ARPHRD_ETHER */) {
		rcpi_warn("xdp: %s is not an Ethernet interface", x->link.ifname);
		rc = RCP_EADDR;
	} else {
		memcpy(x->mac, ifr.ifr_hwaddr.sa_data, 6);
		x->mtu = ioctl(s, SIOCGIFMTU, &ifr) ? 1500 : (uint32_t)ifr.ifr_mtu;
	}
	close(s);
	return rc;
}

/* ---- open / close ------------------------------------------------------ */

static int parse_local(const char *rest, char *ifname, uint32_t *queue)
{
	const char *slash = strchr(rest, '/');
	size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
	char *end;
	unsigned long q = 0;

	if (!n || n >= IF_NAMESIZE || memchr(rest, '@', n) || memchr(rest, ':', n))
		return RCP_EADDR;
	if (slash) {
		errno = 0;
		q = strtoul(slash + 1, &end, 10);
		if (!slash[1] || *end || errno || q > 1024)
			return RCP_EADDR;
	}
	memcpy(ifname, rest, n);
	ifname[n] = 0;
	*queue = (uint32_t)q;
	return 0;
}

static void xdp_free(struct xdp_nic *x)
{
	struct xdp_statistics xs;
	socklen_t xl = sizeof xs;

	/* What the kernel dropped on its side of the rings (our stats
	 * count only what we refused): for RCP_LOG=info. */
	if (x->fd >= 0 && !getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &xs, &xl) &&
	    (xs.rx_dropped || xs.rx_ring_full || xs.rx_fill_ring_empty_descs))
		rcpi_info("xdp: %s: the kernel dropped %llu frame(s), RX ring full %llu, "
		          "fill ring empty %llu",
		          x->link.ifname, (unsigned long long)xs.rx_dropped,
		          (unsigned long long)xs.rx_ring_full,
		          (unsigned long long)xs.rx_fill_ring_empty_descs);
	rcpi_xdp_link_detach(&x->link);
	if (x->xsk)
		xsk_socket__delete(x->xsk);
	if (x->umem)
		xsk_umem__delete(x->umem);
	if (x->area && x->area != MAP_FAILED)
		munmap(x->area, (size_t)2 * x->ring * XDP_FRAME);
	rcpi_xdp_link_close(&x->link); /* last: the interface is free again */
	free(x->peers);
	free(x->txfree);
	free(x->joined);
	free(x);
}

/* The UMEM over x->area and the socket on it: 0, or -errno with neither
 * left (so that the caller may try again with other flags) and *STEP
 * naming what failed. */
static int sock_make(struct xdp_nic *x, const struct xsk_umem_config *ucfg,
                     const struct xsk_socket_config *scfg, const char **step)
{
	int rc = xsk_umem__create(&x->umem, x->area, (uint64_t)2 * x->ring * XDP_FRAME, &x->fill,
	                          &x->comp, ucfg);
	if (rc) {
		x->umem = NULL;
		*step = "registering the UMEM";
		return rc;
	}
	/* EBUSY with the lock held: the queue still holds the buffer pool of
	 * a socket closed an instant ago (this process's or a dead one's),
	 * which the kernel frees from a work queue after close.  That has no
	 * completion to wait on: retry for up to half a second. */
	for (int i = 0; i < 500; i++) {
		rc = xsk_socket__create(&x->xsk, x->link.ifname, x->queue, x->umem, &x->rx, &x->tx,
		                        scfg);
		if (rc != -EBUSY)
			break;
		usleep(1000);
	}
	if (rc) {
		x->xsk = NULL;
		xsk_umem__delete(x->umem);
		x->umem = NULL;
		*step = "creating the AF_XDP socket";
		return rc;
	}
	return 0;
}

static int xdp_open(const char *rest, const struct rcp_nic_config *cfg, rcp_nic **out)
{
	struct xsk_umem_config ucfg = {
	    .frame_size = XDP_FRAME,
	    .frame_headroom = 0,
	};
	struct xsk_socket_config scfg = {
	    .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
	    .bind_flags = XDP_USE_NEED_WAKEUP,
	};
	struct xdp_nic *x;
	const char *step = "";
	uint32_t idx, maxpay;
	int rc;

	x = calloc(1, sizeof *x);
	if (!x)
		return RCP_ENOMEM;
	x->fd = -1;
	x->last_peer = -1;
	rcpi_xdp_link_init(&x->link);
	rc = parse_local(rest, x->link.ifname, &x->queue);
	if (rc)
		goto fail;
	x->link.ifindex = (int)if_nametoindex(x->link.ifname);
	if (!x->link.ifindex) {
		rcpi_warn("xdp: no interface \"%s\" here", x->link.ifname);
		rc = RCP_EADDR;
		goto fail;
	}
	/* Ring size: rx_bytes of receive frames (a power of two in
	 * [XDP_RING_MIN, XDP_RING_MAX]), XDP_RING by default. */
	x->ring = XDP_RING;
	if (cfg && cfg->rx_bytes) {
		size_t want = cfg->rx_bytes / XDP_FRAME;
		x->ring = XDP_RING_MIN;
		while (x->ring < want && x->ring < XDP_RING_MAX)
			x->ring *= 2;
	}
	ucfg.fill_size = ucfg.comp_size = scfg.rx_size = scfg.tx_size = x->ring;
	x->peers = calloc(XDP_PEERS, sizeof *x->peers);
	x->txfree = calloc(x->ring, sizeof *x->txfree);
	if (!x->peers || !x->txfree) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	rc = iface_facts(x);
	if (!rc)
		rc = rcpi_xdp_link_own(&x->link);
	if (rc)
		goto fail;

	x->area = mmap(NULL, (size_t)2 * x->ring * XDP_FRAME, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (x->area == MAP_FAILED) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	/* A link whose frames outgrow one RX buffer (MTU 9000): multi-buffer
	 * (the kernel's XDP_USE_SG, 6.6+).  Where the kernel refuses it,
	 * again without, and frames stop at one buffer. */
	if (x->mtu + ETH_HLEN > XDP_RXROOM) {
		scfg.bind_flags |= XDP_USE_SG;
		rc = sock_make(x, &ucfg, &scfg, &step);
		if (rc) {
			rcpi_info("xdp: %s: no multi-buffer here (%s): frames stop at %u bytes",
			          x->link.ifname, strerror(-rc), XDP_RXROOM);
			scfg.bind_flags &= ~(uint32_t)XDP_USE_SG;
		} else {
			x->sg = 1;
		}
	}
	if (!x->sg)
		rc = sock_make(x, &ucfg, &scfg, &step);
	if (rc) {
		rc = rcpi_xdp_err(step, rc);
		goto fail;
	}
	x->fd = xsk_socket__fd(x->xsk);

	/* Every RX frame onto the fill ring; every TX frame onto the stack. */
	if (xsk_ring_prod__reserve(&x->fill, x->ring, &idx) != x->ring) {
		rc = RCP_ESYS;
		goto fail;
	}
	for (uint32_t i = 0; i < x->ring; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) = (uint64_t)i * XDP_FRAME;
	xsk_ring_prod__submit(&x->fill, x->ring);
	for (uint32_t i = 0; i < x->ring; i++)
		x->txfree[i] = (uint64_t)(x->ring + i) * XDP_FRAME;
	x->ntxfree = x->ring;

	rc = rcpi_xdp_link_attach(&x->link, x->xsk);
	if (rc)
		goto fail;

	/* Payload limit: the link's MTU less our length word, and what one
	 * RX buffer holds past the kernel's headroom (XDP_SEGS of them with
	 * multi-buffer). */
	maxpay = (x->sg ? XDP_BIG : XDP_RXROOM) - XDP_HDR;
	x->mtu = x->mtu > 2 ? x->mtu - 2 : 0;
	if (x->mtu > maxpay)
		x->mtu = maxpay;
	if (cfg && cfg->mtu && cfg->mtu < x->mtu)
		x->mtu = cfg->mtu;
	x->segs = (XDP_HDR + x->mtu + XDP_RXROOM - 1) / XDP_RXROOM;
	if (x->segs > 1 && !(x->joined = malloc((size_t)XDP_BURST * XDP_BIG))) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	rcpi_debug("xdp: %s queue %u: %s mode, mtu %u", x->link.ifname, x->queue,
	           x->link.attach_flags == XDP_FLAGS_DRV_MODE ? "native" : "generic", x->mtu);
	*out = &x->base;
	return 0;
fail:
	xdp_free(x);
	return rc;
}

static void xdp_close(rcp_nic *nic)
{
	xdp_free(xdp_of(nic));
}

static void xdp_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	info->backend = "xdp";
	info->mtu = xdp_ofc(nic)->mtu;
	/* A frame of MTU bytes takes segs RX buffers and ring entries. */
	info->rx_frames = (xdp_ofc(nic)->ring - XDP_BURST) / 2 / xdp_ofc(nic)->segs;
	info->caps = RCP_NIC_CAP_CHECKED;
}

/* ---- addresses and peers ------------------------------------------------ */

static int xdp_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	const struct xdp_nic *x = xdp_ofc(nic);
	const uint8_t *m = x->mac;
	int n = snprintf(buf, len, "xdp:%s@%02x:%02x:%02x:%02x:%02x:%02x", x->link.ifname, m[0],
	                 m[1], m[2], m[3], m[4], m[5]);
	return n < 0 || (size_t)n >= len ? RCP_ERANGE : 0;
}

static int xdp_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	uint8_t *b = buf;

	if (*len < XDP_BLOB)
		return RCP_ERANGE;
	b[0] = RCPI_NIC_XDP;
	memcpy(b + 1, xdp_ofc(nic)->mac, 6);
	*len = XDP_BLOB;
	return 0;
}

static int peer_find(struct xdp_nic *x, const uint8_t *mac)
{
	if (x->last_peer >= 0 && !memcmp(x->peers[x->last_peer].mac, mac, 6))
		return x->last_peer;
	for (int i = 0; i < x->npeers; i++)
		if (x->peers[i].used && !memcmp(x->peers[i].mac, mac, 6))
			return x->last_peer = i;
	return RCP_NIC_PEER_NONE;
}

static int peer_insert(struct xdp_nic *x, const uint8_t *mac, int *peer)
{
	int i = peer_find(x, mac);

	if (mac[0] & 1)
		return RCP_EADDR; /* multicast/broadcast: not an endpoint */
	if (i >= 0) {
		*peer = i;
		return 0;
	}
	for (i = 0; i < XDP_PEERS && x->peers[i].used; i++)
		;
	if (i == XDP_PEERS)
		return RCP_EAGAIN;
	memcpy(x->peers[i].mac, mac, 6);
	x->peers[i].used = 1;
	if (i >= x->npeers)
		x->npeers = i + 1;
	*peer = i;
	return 0;
}

static int xdp_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	if (len != XDP_BLOB || ((const uint8_t *)blob)[0] != RCPI_NIC_XDP)
		return RCP_EADDR;
	return peer_insert(xdp_of(nic), (const uint8_t *)blob + 1, peer);
}

static int xdp_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	struct xdp_nic *x = xdp_of(nic);
	const char *at;
	uint8_t mac[6];
	int rc;

	if (strncmp(addr, "xdp:", 4))
		return RCP_EADDR;
	at = strchr(addr + 4, '@');
	if (!at || (size_t)(at - addr - 4) >= IF_NAMESIZE)
		return RCP_EADDR;
	if (strchr(at + 1, '.')) {
		/* An IPv4 address, maybe with a :PORT, which frames of ours
		 * have no use for (accepted so udp-style strings work). */
		char ip[INET_ADDRSTRLEN];
		size_t n = strcspn(at + 1, ":");
		if (n >= sizeof ip)
			return RCP_EADDR;
		memcpy(ip, at + 1, n);
		ip[n] = 0;
		rc = rcpi_xdp_neigh_mac(x->link.ifname, ip, mac);
	} else {
		rc = rcpi_xdp_parse_mac(at + 1, mac);
	}
	return rc ? rc : peer_insert(x, mac, peer);
}

static int xdp_peer_remove(rcp_nic *nic, int peer)
{
	struct xdp_nic *x = xdp_of(nic);

	if (peer >= x->npeers || !x->peers[peer].used)
		return RCP_EINVAL;
	x->peers[peer].used = 0;
	if (x->last_peer == peer)
		x->last_peer = -1;
	while (x->npeers && !x->peers[x->npeers - 1].used)
		x->npeers--;
	return 0;
}

/* ---- send ------------------------------------------------------------ */

/* Completed TX frames back onto the free stack, in one batch. */
static void comp_reap(struct xdp_nic *x)
{
	uint32_t idx, n = xsk_ring_cons__peek(&x->comp, x->ring, &idx);

	for (uint32_t i = 0; i < n; i++)
		x->txfree[x->ntxfree++] = *xsk_ring_cons__comp_addr(&x->comp, idx + i);
	if (n)
		xsk_ring_cons__release(&x->comp, n);
}

/* Descriptors submitted that the kernel has not taken yet. */
static uint32_t tx_outstanding(const struct xdp_nic *x)
{
	return *x->tx.producer - __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE);
}

/* Kicks the kernel until it has taken every TX descriptor (copy mode sends
 * a bounded batch per call).  Returns 0, RCP_EAGAIN (still some: the
 * device is busy) or RCP_ESYS. */
static int tx_kick(struct xdp_nic *x)
{
	for (int k = 0; k < XDP_KICKS && tx_outstanding(x); k++) {
		if (!xsk_ring_prod__needs_wakeup(&x->tx))
			return 0; /* the driver polls the ring itself */
		if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN &&
		    errno != EBUSY && errno != ENOBUFS && errno != EINTR) {
			rcpi_debug("xdp: kick: %s", strerror(errno));
			return RCP_ESYS;
		}
	}
	x->tx_queued = 0;
	comp_reap(x);
	return tx_outstanding(x) ? RCP_EAGAIN : 0;
}

static void frame_head(const struct xdp_nic *x, uint8_t *p, const uint8_t *dst, size_t plen)
{
	memcpy(p, dst, 6);
	memcpy(p + 6, x->mac, 6);
	p[12] = XDP_ETHERTYPE >> 8;
	p[13] = XDP_ETHERTYPE & 0xff;
	p[14] = (uint8_t)(plen >> 8);
	p[15] = (uint8_t)plen;
}

/* Claims K TX frames and K TX descriptors; 0 or RCP_EAGAIN. */
static int tx_claim(struct xdp_nic *x, uint32_t k, uint64_t *addr, uint32_t *idx)
{
	if (x->ntxfree < k) {
		comp_reap(x);
		if (x->ntxfree < k) {
			tx_kick(x);
			if (x->ntxfree < k)
				goto full;
		}
	}
	if (xsk_ring_prod__reserve(&x->tx, k, idx) != k) {
		tx_kick(x);
		if (xsk_ring_prod__reserve(&x->tx, k, idx) != k)
			goto full;
	}
	for (uint32_t i = 0; i < k; i++)
		addr[i] = x->txfree[--x->ntxfree];
	return 0;
full:
	x->base.stats.tx_eagain++;
	return RCP_EAGAIN;
}

/* Copies LEN bytes of SRC into the claimed TX frames ADDR[] at byte *OFF
 * of the frame they make together (XDP_FRAME bytes each), advancing *OFF. */
static void tx_put(const struct xdp_nic *x, const uint64_t *addr, uint32_t *off, const void *src,
                   size_t len)
{
	const uint8_t *p = src;

	while (len) {
		uint32_t in = *off % XDP_FRAME;
		size_t n = XDP_FRAME - in < len ? XDP_FRAME - in : len;
		memcpy((uint8_t *)xsk_umem__get_data(x->area, addr[*off / XDP_FRAME]) + in, p, n);
		p += n;
		len -= n;
		*off += (uint32_t)n;
	}
}

/* Submits the K descriptors of one frame of LEN bytes (header included):
 * all but the last marked XDP_PKT_CONTD, the kernel's multi-buffer
 * chain (only with x->sg: without it K is 1). */
static void tx_post(struct xdp_nic *x, const uint64_t *addr, uint32_t k, uint32_t idx, uint32_t len,
                    size_t plen)
{
	for (uint32_t i = 0; i < k; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, idx + i);
		d->addr = addr[i];
		d->len = i + 1 < k ? XDP_FRAME : len - i * XDP_FRAME;
		d->options = i + 1 < k ? XDP_PKT_CONTD : 0;
	}
	xsk_ring_prod__submit(&x->tx, k);
	x->tx_queued++;
	x->base.stats.tx_frames++;
	x->base.stats.tx_bytes += plen;
}

/* TX frames a frame of PLEN payload bytes takes. */
static inline uint32_t tx_segs(size_t plen)
{
	return (uint32_t)(XDP_HDR + plen + XDP_FRAME - 1) / XDP_FRAME;
}

static int xdp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                    unsigned flags)
{
	struct xdp_nic *x = xdp_of(nic);
	uint64_t addr[XDP_SEGS];
	uint32_t idx, k, off = XDP_HDR;
	int rc;

	if (RCPI_UNLIKELY(peer >= x->npeers || !x->peers[peer].used))
		return RCP_EINVAL;
	if (RCPI_UNLIKELY(total > x->mtu))
		return RCP_EMSGSIZE;
	k = tx_segs(total);
	rc = tx_claim(x, k, addr, &idx);
	if (rc)
		return rc;
	frame_head(x, xsk_umem__get_data(x->area, addr[0]), x->peers[peer].mac, total);
	if (RCPI_LIKELY(k == 1)) {
		uint8_t *p = (uint8_t *)xsk_umem__get_data(x->area, addr[0]) + XDP_HDR;
		for (int i = 0; i < iovcnt; i++) {
			if (!iov[i].iov_len)
				continue; /* the base may be NULL */
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
	} else {
		for (int i = 0; i < iovcnt; i++)
			if (iov[i].iov_len)
				tx_put(x, addr, &off, iov[i].iov_base, iov[i].iov_len);
	}
	tx_post(x, addr, k, idx, (uint32_t)(XDP_HDR + total), total);
	if (flags & RCP_NIC_MORE)
		return 0;
	rc = tx_kick(x);
	return rc == RCP_EAGAIN ? 0 : rc; /* submitted: the next kick takes it */
}

static int xdp_flush(rcp_nic *nic)
{
	struct xdp_nic *x = xdp_of(nic);
	return x->tx_queued || tx_outstanding(x) ? tx_kick(x) : 0;
}

static int xdp_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen)
{
	struct xdp_nic *x = xdp_of(nic);
	const uint8_t *mac = (const uint8_t *)blob + 1;
	uint64_t addr[XDP_SEGS];
	uint32_t idx, k, off = XDP_HDR;
	int rc;

	if (len != XDP_BLOB || (mac[0] & 1))
		return RCP_EADDR;
	if (flen > x->mtu)
		return RCP_EMSGSIZE;
	k = tx_segs(flen);
	rc = tx_claim(x, k, addr, &idx);
	if (rc)
		return rc;
	frame_head(x, xsk_umem__get_data(x->area, addr[0]), mac, flen);
	tx_put(x, addr, &off, frame, flen);
	tx_post(x, addr, k, idx, (uint32_t)(XDP_HDR + flen), flen);
	rc = tx_kick(x);
	return rc == RCP_EAGAIN ? 0 : rc;
}

/* ---- receive ------------------------------------------------------------ */

/* RX frames back to the kernel: one reservation for all N but the
 * XDP_NOBUF entries (the fill ring has room for every RX frame, so it
 * cannot fail). */
static void fill_give(struct xdp_nic *x, const uint64_t *addrs, int n)
{
	uint32_t idx, m = 0, j = 0;

	for (int i = 0; i < n; i++)
		m += addrs[i] != XDP_NOBUF;
	if (!m || xsk_ring_prod__reserve(&x->fill, m, &idx) != m)
		return;
	for (int i = 0; i < n; i++)
		if (addrs[i] != XDP_NOBUF)
			*xsk_ring_prod__fill_addr(&x->fill, idx + j++) = addrs[i];
	xsk_ring_prod__submit(&x->fill, m);
	if (xsk_ring_prod__needs_wakeup(&x->fill))
		(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

/* Every field of a frame of FLEN bytes whose first FIRST bytes are at P:
 * our EtherType, our MAC, a unicast sender, a length word within the
 * frame and, past the 60 bytes a link may pad to, exactly the frame.
 * The payload length, or -1: drop it. */
static int frame_check(const struct xdp_nic *x, const uint8_t *p, uint32_t first, uint32_t flen)
{
	uint32_t plen;

	if (first < XDP_HDR || p[12] != XDP_ETHERTYPE >> 8 || p[13] != (XDP_ETHERTYPE & 0xff) ||
	    memcmp(p, x->mac, 6) || (p[6] & 1))
		return -1;
	plen = (uint32_t)p[14] << 8 | p[15];
	if (XDP_HDR + plen > flen || (flen > XDP_MINFRAME && XDP_HDR + plen != flen))
		return -1;
	return (int)plen;
}

/* A multi-buffer frame: the K descriptors from IDX joined into OUT
 * (XDP_BIG bytes), payload only.  Its payload length, or -1 (more
 * descriptors or bytes than a frame of ours has, or not ours). */
static int chain_join(struct xdp_nic *x, uint32_t idx, uint32_t k, uint8_t *out)
{
	const struct xdp_desc *d0 = xsk_ring_cons__rx_desc(&x->rx, idx);
	uint32_t flen = 0, at = 0;
	int plen;

	if (k > XDP_SEGS)
		return -1;
	for (uint32_t i = 0; i < k; i++)
		flen += xsk_ring_cons__rx_desc(&x->rx, idx + i)->len;
	if (flen > XDP_BIG)
		return -1;
	plen = frame_check(x, xsk_umem__get_data(x->area, d0->addr), d0->len, flen);
	if (plen < 0)
		return -1;
	/* plen is flen - XDP_HDR exactly (flen > 60): every byte is payload. */
	for (uint32_t i = 0; i < k; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, idx + i);
		uint32_t skip = i ? 0 : XDP_HDR;
		memcpy(out + at, (const uint8_t *)xsk_umem__get_data(x->area, d->addr) + skip,
		       d->len - skip);
		at += d->len - skip;
	}
	return plen;
}

/* Descriptors from I (of N peeked at IDX) up to the end of the frame
 * that starts there: 0 if its chain goes on past N. */
static uint32_t chain_len(const struct xdp_nic *x, uint32_t idx, uint32_t i, uint32_t n)
{
	for (uint32_t k = 1; i + k <= n; k++)
		if (!(xsk_ring_cons__rx_desc(&x->rx, idx + i + k - 1)->options & XDP_PKT_CONTD))
			return k;
	return 0;
}

static int xdp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max)
{
	struct xdp_nic *x = xdp_of(nic);
	uint64_t back[XDP_BURST];
	uint32_t idx, n, i = 0;
	int got = 0, nback = 0;

	/* Frames the caller did not release go back now. */
	if (x->nheld > x->released)
		fill_give(x, x->held + x->released, x->nheld - x->released);
	x->nheld = x->released = 0;

	/* With multi-buffer a frame takes up to XDP_SEGS descriptors: look
	 * at a whole burst of them, whatever MAX. */
	n = x->sg ? XDP_BURST : (uint32_t)(max < XDP_BURST ? max : XDP_BURST);
	n = xsk_ring_cons__peek(&x->rx, n, &idx);
	if (!n) {
		if (xsk_ring_prod__needs_wakeup(&x->fill))
			(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		return 0;
	}
	while (i < n && got < max) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, idx + i);
		const uint8_t *p = xsk_umem__get_data(x->area, d->addr); /* the header */
		const uint8_t *data = p + XDP_HDR;
		uint64_t base = xsk_umem__extract_addr(d->addr);
		uint32_t k = 1;
		int plen;

		if (RCPI_UNLIKELY(x->rx_skip || (d->options & XDP_PKT_CONTD))) {
			/* The kernel posts a frame's descriptors together: a
			 * chain cut by N is whole next time, unless it is longer
			 * than a burst (then not ours: dropped to its end). */
			k = chain_len(x, idx, i, n);
			if (!k && i)
				break;
			if (!k || x->rx_skip) {
				if (!x->rx_skip)
					x->base.stats.rx_dropped++;
				x->rx_skip = !k;
				k = k ? k : n - i;
				for (uint32_t j = 0; j < k; j++)
					back[nback++] = xsk_umem__extract_addr(
					    xsk_ring_cons__rx_desc(&x->rx, idx + i + j)->addr);
				i += k;
				continue;
			}
			data = x->joined + (size_t)got * XDP_BIG;
			plen = chain_join(x, idx + i, k, x->joined + (size_t)got * XDP_BIG);
			for (uint32_t j = 0; j < k; j++)
				back[nback++] = xsk_umem__extract_addr(
				    xsk_ring_cons__rx_desc(&x->rx, idx + i + j)->addr);
			i += k;
			if (plen < 0) {
				x->base.stats.rx_dropped++;
				continue;
			}
			base = XDP_NOBUF; /* its buffers go back below, after p is read */
		} else {
			i++;
			plen = frame_check(x, p, d->len, d->len);
			if (plen < 0) {
				x->base.stats.rx_dropped++;
				back[nback++] = base;
				continue;
			}
		}
		x->srcblob[got][0] = RCPI_NIC_XDP;
		memcpy(x->srcblob[got] + 1, p + 6, 6);
		fr[got].data = data;
		fr[got].len = (uint32_t)plen;
		fr[got].peer = peer_find(x, p + 6);
		fr[got].src = x->srcblob[got];
		fr[got].srclen = XDP_BLOB;
		fr[got].reserved = 0;
		fr[got].token = (uintptr_t)base;
		x->held[got] = base;
		x->base.stats.rx_frames++;
		x->base.stats.rx_bytes += (uint32_t)plen;
		got++;
	}
	xsk_ring_cons__cancel(&x->rx, n - i); /* the rest next time */
	xsk_ring_cons__release(&x->rx, i);
	x->nheld = got;
	fill_give(x, back, nback);
	return got;
}

static void xdp_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct xdp_nic *x = xdp_of(nic);

	(void)frames; /* the burst is ours to know: held[] */
	if (n > x->nheld)
		n = x->nheld;
	if (n > x->released) {
		fill_give(x, x->held + x->released, n - x->released);
		x->released = n;
	}
}

static int xdp_fd(const rcp_nic *nic)
{
	return xdp_ofc(nic)->fd;
}

static int xdp_pending(rcp_nic *nic)
{
	struct xdp_nic *x = xdp_of(nic);
	return __atomic_load_n(x->rx.producer, __ATOMIC_ACQUIRE) != x->rx.cached_cons;
}

static int xdp_arm(rcp_nic *nic)
{
	return xdp_pending(nic) ? RCP_EAGAIN : 0;
}

const struct rcpi_nic_ops rcpi_nic_xdp_ops = {
    .name = "xdp",
    .id = RCPI_NIC_XDP,
    .open = xdp_open,
    .close = xdp_close,
    .query = xdp_query,
    .addr_str = xdp_addr_str,
    .addr_blob = xdp_addr_blob,
    .peer_add = xdp_peer_add,
    .peer_add_str = xdp_peer_add_str,
    .peer_remove = xdp_peer_remove,
    .send = xdp_send,
    .flush = xdp_flush,
    .recv = xdp_recv,
    .release = xdp_release,
    .fd = xdp_fd,
    .arm = xdp_arm,
    .pending = xdp_pending,
    .send_to = xdp_send_to,
    /* recv_wait: the dispatcher's arm/ppoll/recv.  No RMA. */
};
