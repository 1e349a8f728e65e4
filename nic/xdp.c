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
 * receives, the upper half transmits.  RING is XDP_RING (2048), or
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
 *   need_wakeup (XDP_USE_NEED_WAKEUP): a kick is made only when the TX
 *             ring asks for one (always in copy mode), and release() pokes
 *             the kernel with recvfrom only when the fill ring asks
 *             (zero-copy drivers that stopped polling it).
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
 * (RING - XDP_BURST) / 2: one sender at a full window leaves half the
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
 * table (/proc/net/arp), resolved first if needed.  In a peer string the
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
	uint8_t mac[6];
	uint32_t tx_queued; /* submitted since the last kick */
	/* free TX frame addresses */
	uint32_t ring; /* entries per ring = frames per UMEM half */
	uint64_t *txfree;
	uint32_t ntxfree;
	/* the burst in the caller's hands */
	uint64_t held[XDP_BURST];
	int nheld, released;
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
	free(x);
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
	rc = xsk_umem__create(&x->umem, x->area, (uint64_t)2 * x->ring * XDP_FRAME, &x->fill,
	                      &x->comp, &ucfg);
	if (rc) {
		x->umem = NULL;
		rc = rcpi_xdp_err("registering the UMEM", rc);
		goto fail;
	}
	/* EBUSY with the lock held: the queue still holds the buffer pool of
	 * a socket closed an instant ago (this process's or a dead one's),
	 * which the kernel frees from a work queue after close.  That has no
	 * completion to wait on: retry for up to half a second. */
	for (int i = 0; i < 500; i++) {
		rc = xsk_socket__create(&x->xsk, x->link.ifname, x->queue, x->umem, &x->rx, &x->tx,
		                        &scfg);
		if (rc != -EBUSY)
			break;
		usleep(1000);
	}
	if (rc) {
		x->xsk = NULL;
		rc = rcpi_xdp_err("creating the AF_XDP socket", rc);
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

	/* Payload limit: the link's MTU less our length word, and what a
	 * frame of the UMEM holds past the kernel's headroom. */
	maxpay = XDP_FRAME - XDP_PACKET_HEADROOM - XDP_HDR;
	x->mtu = x->mtu > 2 ? x->mtu - 2 : 0;
	if (x->mtu > maxpay)
		x->mtu = maxpay;
	if (cfg && cfg->mtu && cfg->mtu < x->mtu)
		x->mtu = cfg->mtu;
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
	info->rx_frames = (xdp_ofc(nic)->ring - XDP_BURST) / 2;
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

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char tail;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
	           &tail) != 6 ||
	    strlen(s) != 17)
		return RCP_EADDR;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return 0;
}

/* The MAC of IP in the neighbour table, 0 or RCP_ENOENT. */
static int arp_lookup(const char *ip, const char *ifname, uint8_t mac[6])
{
	char line[256], a[64], hw[64], dev[64];
	unsigned type, flags;
	int rc = RCP_ENOENT;
	FILE *f = fopen("/proc/thread-self/net/arp", "re");

	if (!f)
		return RCP_ENOENT;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%63s 0x%x 0x%x %63s %*s %63s", a, &type, &flags, hw, dev) == 5 &&
		    !strcmp(a, ip) && !strcmp(dev, ifname) && (flags & 2 /* ATF_COM */) &&
		    !parse_mac(hw, mac)) {
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* The MAC of IPv4 address IP on our link: from the neighbour table, after
 * provoking the kernel's ARP with a datagram to the discard port if the
 * entry is missing (waits up to about a second for the answer). */
static int neigh_mac(const struct xdp_nic *x, const char *ip, uint8_t mac[6])
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9)};
	int s;

	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return RCP_EADDR;
	if (!arp_lookup(ip, x->link.ifname, mac))
		return 0;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return RCP_ESYS;
	setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, x->link.ifname,
	           (socklen_t)strlen(x->link.ifname));
	for (int i = 0; i < 1000; i++) {
		if (i % 200 == 0)
			(void)!sendto(s, "", 0, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof sa);
		if (!arp_lookup(ip, x->link.ifname, mac)) {
			close(s);
			return 0;
		}
		usleep(1000); /* the kernel's ARP has no completion to wait on */
	}
	close(s);
	rcpi_warn("xdp: no neighbour entry for %s on %s", ip, x->link.ifname);
	return RCP_EPEER;
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
		rc = neigh_mac(x, ip, mac);
	} else {
		rc = parse_mac(at + 1, mac);
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

/* Claims a TX frame and a TX descriptor; 0 or RCP_EAGAIN. */
static int tx_claim(struct xdp_nic *x, uint64_t *addr, uint32_t *idx)
{
	if (!x->ntxfree) {
		comp_reap(x);
		if (!x->ntxfree) {
			tx_kick(x);
			if (!x->ntxfree)
				goto full;
		}
	}
	if (xsk_ring_prod__reserve(&x->tx, 1, idx) != 1) {
		tx_kick(x);
		if (xsk_ring_prod__reserve(&x->tx, 1, idx) != 1)
			goto full;
	}
	*addr = x->txfree[--x->ntxfree];
	return 0;
full:
	x->base.stats.tx_eagain++;
	return RCP_EAGAIN;
}

static void tx_post(struct xdp_nic *x, uint64_t addr, uint32_t idx, size_t plen)
{
	struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, idx);

	d->addr = addr;
	d->len = (uint32_t)(XDP_HDR + plen);
	xsk_ring_prod__submit(&x->tx, 1);
	x->tx_queued++;
	x->base.stats.tx_frames++;
	x->base.stats.tx_bytes += plen;
}

static int xdp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                    unsigned flags)
{
	struct xdp_nic *x = xdp_of(nic);
	uint64_t addr;
	uint32_t idx;
	uint8_t *p;
	int rc;

	if (RCPI_UNLIKELY(peer >= x->npeers || !x->peers[peer].used))
		return RCP_EINVAL;
	if (RCPI_UNLIKELY(total > x->mtu))
		return RCP_EMSGSIZE;
	rc = tx_claim(x, &addr, &idx);
	if (rc)
		return rc;
	p = xsk_umem__get_data(x->area, addr);
	frame_head(x, p, x->peers[peer].mac, total);
	p += XDP_HDR;
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue; /* the base may be NULL */
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	tx_post(x, addr, idx, total);
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
	uint64_t addr;
	uint32_t idx;
	uint8_t *p;
	int rc;

	if (len != XDP_BLOB || (mac[0] & 1))
		return RCP_EADDR;
	if (flen > x->mtu)
		return RCP_EMSGSIZE;
	rc = tx_claim(x, &addr, &idx);
	if (rc)
		return rc;
	p = xsk_umem__get_data(x->area, addr);
	frame_head(x, p, mac, flen);
	memcpy(p + XDP_HDR, frame, flen);
	tx_post(x, addr, idx, flen);
	rc = tx_kick(x);
	return rc == RCP_EAGAIN ? 0 : rc;
}

/* ---- receive ------------------------------------------------------------ */

/* RX frames back to the kernel: one reservation for all N (the fill ring
 * has room for every RX frame, so it cannot fail). */
static void fill_give(struct xdp_nic *x, const uint64_t *addrs, int n)
{
	uint32_t idx;

	if (n <= 0 || xsk_ring_prod__reserve(&x->fill, (uint32_t)n, &idx) != (uint32_t)n)
		return;
	for (int i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + (uint32_t)i) = addrs[i];
	xsk_ring_prod__submit(&x->fill, (uint32_t)n);
	if (xsk_ring_prod__needs_wakeup(&x->fill))
		(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

static int xdp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max)
{
	struct xdp_nic *x = xdp_of(nic);
	uint64_t bad[XDP_BURST];
	uint32_t idx, n;
	int got = 0, nbad = 0;

	/* Frames the caller did not release go back now. */
	if (x->nheld > x->released)
		fill_give(x, x->held + x->released, x->nheld - x->released);
	x->nheld = x->released = 0;

	n = xsk_ring_cons__peek(&x->rx, (uint32_t)(max < XDP_BURST ? max : XDP_BURST), &idx);
	if (!n) {
		if (xsk_ring_prod__needs_wakeup(&x->fill))
			(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, idx + i);
		const uint8_t *p = xsk_umem__get_data(x->area, d->addr);
		uint64_t base = xsk_umem__extract_addr(d->addr);
		uint32_t plen;

		/* Every field: our EtherType, our MAC, a unicast sender, a
		 * length word within the frame and, past the 60 bytes a link
		 * may pad to, exactly the frame. */
		plen = d->len >= XDP_HDR ? (uint32_t)p[14] << 8 | p[15] : 0;
		if (d->len < XDP_HDR || p[12] != XDP_ETHERTYPE >> 8 ||
		    p[13] != (XDP_ETHERTYPE & 0xff) || memcmp(p, x->mac, 6) || (p[6] & 1) ||
		    XDP_HDR + plen > d->len ||
		    (d->len > XDP_MINFRAME && XDP_HDR + plen != d->len)) {
			x->base.stats.rx_dropped++;
			bad[nbad++] = base;
			continue;
		}
		x->srcblob[got][0] = RCPI_NIC_XDP;
		memcpy(x->srcblob[got] + 1, p + 6, 6);
		fr[got].data = p + XDP_HDR;
		fr[got].len = plen;
		fr[got].peer = peer_find(x, p + 6);
		fr[got].src = x->srcblob[got];
		fr[got].srclen = XDP_BLOB;
		fr[got].reserved = 0;
		fr[got].token = (uintptr_t)base;
		x->held[got] = base;
		x->base.stats.rx_frames++;
		x->base.stats.rx_bytes += plen;
		got++;
	}
	xsk_ring_cons__release(&x->rx, n);
	x->nheld = got;
	fill_give(x, bad, nbad);
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
