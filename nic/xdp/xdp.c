/*
 * nic/xdp/xdp.c — the xdp endpoint: interface facts, open, close, query, and
 * the ops table (xdp_int.h has the design).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/ethtool.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/sockios.h>
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

#include "nic/xdp/xdp_int.h"

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

/* RX queues of the interface (ETHTOOL_GCHANNELS: rx or combined
 * channels), or 0 where the driver does not say. */
static uint32_t rx_queues(const char *ifname)
{
	struct ethtool_channels ch = {.cmd = ETHTOOL_GCHANNELS};
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	uint32_t n = 0;

	if (s < 0)
		return 0;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
	ifr.ifr_data = (void *)&ch;
	if (!ioctl(s, SIOCETHTOOL, &ifr))
		n = ch.rx_count + ch.combined_count;
	close(s);
	return n;
}

/* ---- busy-poll (xdp_int.h: opt-in, and why off by default) ------------- */

/* Older headers lack the newer options (Linux 5.11). */
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif

/* Busy-poll options on X's socket where RCP_XDP_BUSY_POLL asks: busy_us
 * set if all three took, else 0 and the reason logged (never fatal). */
static void busy_setup(struct xdp_nic *x)
{
	static const struct {
		int opt;
		const char *name;
	} opts[] = {{SO_BUSY_POLL, "SO_BUSY_POLL"},
	            {SO_PREFER_BUSY_POLL, "SO_PREFER_BUSY_POLL"},
	            {SO_BUSY_POLL_BUDGET, "SO_BUSY_POLL_BUDGET"}};
	int64_t us = rcpi_env_int("RCP_XDP_BUSY_POLL", 0);

	x->busy_us = 0;
	if (us <= 0)
		return;
	if (us > 1000000) {
		rcpi_warn("xdp: RCP_XDP_BUSY_POLL=%lld us is over a second: busy-poll off",
		          (long long)us);
		return;
	}
	for (int i = 0; i < 3; i++) {
		int v = i == 0 ? (int)us : i == 1 ? 1 : XDP_BURST;
		int e;
		if (!setsockopt(x->fd, SOL_SOCKET, opts[i].opt, &v, sizeof v))
			continue;
		e = errno;
		/* EPERM: SO_BUSY_POLL above net.core.busy_poll (or the other
		 * two at all) without CAP_NET_ADMIN. */
		rcpi_warn("xdp: %s: %s %d refused (%s%s): busy-poll off", x->link.ifname,
		          opts[i].name, v, strerror(e), e == EPERM ? ", needs CAP_NET_ADMIN" : "");
		/* Undo what was set: off means off. */
		v = 0;
		for (int j = 0; j < i; j++)
			(void)!setsockopt(x->fd, SOL_SOCKET, opts[j].opt, &v, sizeof v);
		return;
	}
	x->busy_us = (uint32_t)us;
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
	x->peers = calloc(XDP_PEERS, sizeof *x->peers);
	if (!x->peers) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	rc = iface_facts(x);
	if (!rc) {
		/* A queue the interface lacks: the bind would say only EINVAL. */
		uint32_t nq = rx_queues(x->link.ifname);
		if (nq && x->queue >= nq) {
			rcpi_warn("xdp: %s has %u RX queue(s): no queue %u", x->link.ifname, nq,
			          x->queue);
			rc = RCP_EADDR;
		}
	}
	if (!rc)
		rc = rcpi_xdp_link_own(&x->link);
	if (rc)
		goto fail;
	/* Ring size (a power of two in [XDP_RING_MIN, XDP_RING_MAX]):
	 * rx_bytes of receive frames, or by default what a window of
	 * XDP_WINDOW frames of the link's MTU needs (xdp_int.h, "The
	 * window": why not more). */
	{
		size_t want =
		    cfg && cfg->rx_bytes
		        ? cfg->rx_bytes / XDP_FRAME
		        : XDP_BURST + XDP_STASH +
		              2u * XDP_WINDOW * ((XDP_HDR + x->mtu + XDP_RXROOM - 1) / XDP_RXROOM);
		x->ring = XDP_RING_MIN;
		while (x->ring < want && x->ring < XDP_RING_MAX)
			x->ring *= 2;
	}
	ucfg.fill_size = ucfg.comp_size = scfg.rx_size = scfg.tx_size = x->ring;
	x->txfree = calloc(x->ring, sizeof *x->txfree);
	if (!x->txfree) {
		rc = RCP_ENOMEM;
		goto fail;
	}

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
	busy_setup(x);

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

	rc = rcpi_xdp_link_attach(&x->link, x->xsk, x->queue);
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
	rcpi_debug("xdp: %s queue %u: %s mode, mtu %u, busy-poll %u us", x->link.ifname, x->queue,
	           x->link.attach_flags == XDP_FLAGS_DRV_MODE ? "native" : "generic", x->mtu,
	           x->busy_us);
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
	info->rx_frames = (xdp_ofc(nic)->ring - XDP_BURST - XDP_STASH) / 2 / xdp_ofc(nic)->segs;
	info->caps = RCP_NIC_CAP_CHECKED;
	info->solo_ns = XDP_SOLO_NS;
	info->busy_poll_us = xdp_ofc(nic)->busy_us;
}

const struct rcpi_nic_ops rcpi_nic_xdp_ops = {
    .name = "xdp",
    .id = RCPI_NIC_XDP,
    .open = xdp_open,
    .close = xdp_close,
    .query = xdp_query,
    .addr_str = rcpi_xdp_addr_str,
    .addr_blob = rcpi_xdp_addr_blob,
    .peer_add = rcpi_xdp_peer_add,
    .peer_add_str = rcpi_xdp_peer_add_str,
    .peer_remove = rcpi_xdp_peer_remove,
    .send = rcpi_xdp_send,
    .flush = rcpi_xdp_flush,
    .recv = rcpi_xdp_recv,
    .release = rcpi_xdp_release,
    .fd = rcpi_xdp_fd,
    .arm = rcpi_xdp_arm,
    .pending = rcpi_xdp_pending,
    .send_to = rcpi_xdp_send_to,
    /* recv_wait: the dispatcher's arm/ppoll/recv.  No RMA. */
};
