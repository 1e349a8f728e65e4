/*
 * nic/udp/udp.c — the udp backend: the endpoint: open, close, peers, the ops table
 * (design notes: nic/udp/udp_int.h).
 */
#include "nic/udp/udp_int.h"

/* ---- endpoint ---------------------------------------------------------- */

static void udp_free(struct udp_nic *u)
{
	if (u->lfd >= 0)
		close(u->lfd);
	if (u->efd >= 0)
		close(u->efd);
	if (u->fd >= 0)
		close(u->fd);
	free(u->peers);
	free(u->hash);
	free(u->freel);
	free(u->rxbuf);
	free(u);
}

static int udp_open(const char *rest, const struct rcp_nic_config *cfg, rcp_nic **out)
{
	union udp_sa sa;
	struct udp_nic *u;
	socklen_t sl;
	int64_t env_mtu, want_gso;
	uint32_t auto_mtu, maxpay;
	size_t rcv_want, snd_want;
	int rc, one = 1, rcvbuf, sndbuf, v;
	struct in_addr ifaddr = {0};
	const char *at = strchr(rest, '@');

	if (at) { /* "GROUP:PORT@IFADDR" (see "Multicast") */
		char hp[UDP_HOST_MAX + 16];
		if ((size_t)(at - rest) >= sizeof hp || inet_pton(AF_INET, at + 1, &ifaddr) != 1)
			return RCP_EADDR;
		memcpy(hp, rest, (size_t)(at - rest));
		hp[at - rest] = '\0';
		rc = rcpi_udp_parse(hp, 1, AF_INET, &sa);
		if (!rc && !rcpi_udp_sa_is_mcast(&sa))
			rc = RCP_EADDR;
	} else {
		rc = rcpi_udp_parse(rest, 1, AF_UNSPEC, &sa);
	}
	if (rc)
		return rc;
	u = calloc(1, sizeof *u);
	if (!u)
		return RCP_ENOMEM;
	u->group = rcpi_udp_sa_is_mcast(&sa);
	u->ifaddr = ifaddr;
	u->fd = u->lfd = u->efd = -1;
	u->lpeer = -1;
	u->family = sa.sa.sa_family;
	u->rx_want = UDP_RXB;
	u->peers = calloc(UDP_MAX_PEERS, sizeof *u->peers);
	u->hash = calloc(UDP_HASH_SIZE, sizeof *u->hash);
	u->freel = calloc(UDP_MAX_PEERS, sizeof *u->freel);
	if (!u->peers || !u->hash || !u->freel) {
		rc = RCP_ENOMEM;
		goto fail;
	}

	/* A blocking socket, every call MSG_DONTWAIT but the receive that
	 * sleeps (rcpi_udp_recv_wait). */
	u->fd = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (u->fd < 0) {
		rc = errno == EAFNOSUPPORT ? RCP_EADDR : rcpi_errno_to_rcp(errno);
		rcpi_debug("udp: socket: %s", strerror(errno));
		goto fail;
	}

	/* Buffers before bind, so no datagram meets the default size. */
	rcv_want =
	    cfg && cfg->rx_bytes ? cfg->rx_bytes : rcpi_udp_env_size("RCP_UDP_RCVBUF", 4 << 20);
	snd_want = rcpi_udp_env_size("RCP_UDP_SNDBUF", 4 << 20);
	rcvbuf = rcpi_udp_set_buf(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, rcv_want);
	sndbuf = rcpi_udp_set_buf(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, snd_want);
	u->rcv_want = rcv_want;
	u->snd_want = snd_want;

	/* ICMP errors to the error queue, with the destination that failed. */
	if (u->family == AF_INET6)
		setsockopt(u->fd, SOL_IPV6, IPV6_RECVERR, &one, sizeof one);
	setsockopt(u->fd, SOL_IP, IP_RECVERR, &one, sizeof one); /* also v4-mapped */

	want_gso = rcpi_env_int("RCP_UDP_GSO", 1);
	if (want_gso) {
		socklen_t l = sizeof v;
		u->gso = !getsockopt(u->fd, SOL_UDP, UDP_SEGMENT, &v, &l);
		l = sizeof v;
		u->gro_ok = !getsockopt(u->fd, SOL_UDP, UDP_GRO, &v, &l);
	}

	if (u->group)
		setsockopt(u->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(u->fd, &sa.sa, rcpi_udp_sa_len(&sa))) {
		int err = errno;
		rc = err == EADDRINUSE                                              ? RCP_EADDRINUSE
		     : err == EACCES || err == EPERM                                ? RCP_EPERM
		     : err == EADDRNOTAVAIL || err == EINVAL || err == EAFNOSUPPORT ? RCP_EADDR
		                                                                    : RCP_ESYS;
		rcpi_debug("udp: bind: %s", strerror(err));
		goto fail;
	}
	sl = sizeof u->self;
	if (getsockname(u->fd, &u->self.sa, &sl)) {
		rc = RCP_ESYS;
		goto fail;
	}
	/* A sleeper pays a wake-up per frame: the lane's cheaper send does not
	 * make up for the ppoll its sleeps then need (see "Lane"). */
	u->lane_ok = rcpi_env_int("RCP_UDP_LANE", 1) != 0 &&
	             !(cfg && (cfg->flags & RCP_NIC_SLEEPER)) && !u->group;
	if (u->group) {
		struct ip_mreq mr = {.imr_multiaddr = sa.in.sin_addr, .imr_interface = ifaddr};
		if (setsockopt(u->fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof mr)) {
			rc = errno == ENODEV || errno == EADDRNOTAVAIL ? RCP_EADDR
			                                               : rcpi_errno_to_rcp(errno);
			rcpi_debug("udp: join: %s", strerror(errno));
			goto fail;
		}
	}

	/* MTU: detected, replaced by RCP_UDP_MTU, lowered by cfg->mtu.  A
	 * group endpoint's is its interface's. */
	maxpay = u->family == AF_INET ? 65507 : 65527;
	if (u->group) {
		union udp_sa ifsa = u->self;
		ifsa.in.sin_addr = ifaddr;
		u->loopback = (uint8_t)rcpi_udp_sa_is_loopback(&ifsa);
		auto_mtu = u->loopback ? UDP_LO_MTU : rcpi_udp_iface_mtu(u->fd, &ifsa) - 28;
		if (!u->loopback && auto_mtu > 65535)
			auto_mtu = UDP_FALLBACK_MTU;
	} else if ((u->loopback = (uint8_t)rcpi_udp_sa_is_loopback(&u->self)) != 0) {
		auto_mtu = UDP_LO_MTU;
	} else {
		uint32_t ifm = rcpi_udp_iface_mtu(u->fd, &u->self),
		         hdr = u->family == AF_INET ? 28 : 48;
		auto_mtu = ifm > hdr ? ifm - hdr : UDP_FALLBACK_MTU;
	}
	if (auto_mtu > maxpay)
		auto_mtu = maxpay;
	u->gso_seg_max = auto_mtu;
	u->mtu = auto_mtu;
	env_mtu = rcpi_env_int("RCP_UDP_MTU", 0);
	if (env_mtu > 0)
		u->mtu = env_mtu > maxpay ? maxpay : (uint32_t)env_mtu;
	if (cfg && cfg->mtu && cfg->mtu < u->mtu)
		u->mtu = cfg->mtu;

	/* Receive slots: exactly MTU bytes, so a longer datagram shows as
	 * MSG_TRUNC; 64 KiB when GRO may put several frames in one. */
	u->rxstride = u->gro_ok ? UDP_GRO_SLOT : ((size_t)u->mtu + 63) & ~(size_t)63;
	if (!u->rxstride)
		u->rxstride = 64;
	u->rxbuf = aligned_alloc(4096, (u->rxstride * UDP_RXB + 4095) & ~(size_t)4095);
	if (!u->rxbuf) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	for (int i = 0; i < UDP_RXB; i++) {
		struct msghdr *m = &u->rxmsg[i].msg_hdr;
		u->rxiov[i].iov_base = u->rxbuf + (size_t)i * u->rxstride;
		u->rxiov[i].iov_len = u->gro_ok ? u->rxstride : u->mtu;
		m->msg_name = &u->rxsrc[i];
		m->msg_namelen = sizeof u->rxsrc[i];
		m->msg_iov = &u->rxiov[i];
		m->msg_iovlen = 1;
		m->msg_control = u->gro_ok ? u->rxctl[i].buf : NULL;
		m->msg_controllen = u->gro_ok ? sizeof u->rxctl[i] : 0;
	}

	{
		uint64_t f = rcvbuf > 0 ? (uint64_t)rcvbuf / rcpi_udp_truesize(u->mtu) : 1;
		u->rx_frames = f < 1 ? 1 : f > UDP_RX_FRAMES_MAX ? UDP_RX_FRAMES_MAX : (uint32_t)f;
	}

	u->base.ops = &rcpi_nic_udp_ops;
	*out = &u->base;
	if (rcpi_log_level >= RCPI_LOG_INFO) {
		char name[RCP_NIC_ADDRSTR_MAX];
		rcpi_nic_udp_ops.addr_str(&u->base, name, sizeof name);
		rcpi_info("udp: %s mtu %u rx_frames %u rcvbuf %d (asked %zu) sndbuf %d (asked %zu) "
		          "gso %s gro %s",
		          name, u->mtu, u->rx_frames, rcvbuf, rcv_want, sndbuf, snd_want,
		          u->gso ? "on" : "off", u->gro_ok ? "when bursts come" : "off");
	}
	return 0;
fail:
	udp_free(u);
	return rc;
}

static void udp_close(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);

	/* One last non-blocking attempt for frames queued with MORE. */
	if (u->txn && rcpi_udp_txq_flush(u, 0, NULL) == RCP_EAGAIN)
		rcpi_debug("udp: close drops %d queued frame(s)", u->txn);
	udp_free(u);
}

static void udp_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	const struct udp_nic *u = udp_ofc(nic);

	info->backend = "udp";
	info->mtu = u->mtu;
	info->rx_frames = u->rx_frames;
	/* UDP checksums detect corruption; the kernel neither orders nor
	 * retransmits.  A loopback-bound endpoint reaches this host only. */
	info->caps = RCP_NIC_CAP_CHECKED | (u->loopback ? RCP_NIC_CAP_SAME_HOST : 0) |
	             (u->family == AF_INET ? RCP_NIC_CAP_MCAST : 0);
	/* Between hosts a round trip is itself longer than the library's
	 * 5 us alone (udp_int.h, "Waiting"); on loopback it is not. */
	info->solo_ns = u->loopback ? 0 : UDP_SOLO_NS;
}

static int udp_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	const struct udp_nic *u = udp_ofc(nic);
	char ip[INET6_ADDRSTRLEN];
	int n;

	if (u->family == AF_INET) {
		inet_ntop(AF_INET, &u->self.in.sin_addr, ip, sizeof ip);
		n = snprintf(buf, len, "udp:%s:%u", ip, ntohs(u->self.in.sin_port));
	} else {
		inet_ntop(AF_INET6, &u->self.in6.sin6_addr, ip, sizeof ip);
		if (u->self.in6.sin6_scope_id && rcpi_udp_v6_needs_scope(&u->self.in6.sin6_addr))
			n = snprintf(buf, len, "udp:[%s%%%u]:%u", ip, u->self.in6.sin6_scope_id,
			             ntohs(u->self.in6.sin6_port));
		else
			n = snprintf(buf, len, "udp:[%s]:%u", ip, ntohs(u->self.in6.sin6_port));
	}
	return n < 0 || (size_t)n >= len ? RCP_ERANGE : 0;
}

static int udp_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	uint8_t b[UDP_BLOB_MAX];
	uint32_t n = rcpi_udp_sa_to_blob(&udp_ofc(nic)->self, b);

	if (*len < n)
		return RCP_ERANGE;
	memcpy(buf, b, n);
	*len = n;
	return 0;
}

static int udp_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	union udp_sa sa;
	int rc = rcpi_udp_blob_to_sa(blob, len, &sa);
	return rc ? rc : rcpi_udp_peer_insert(udp_of(nic), &sa, peer);
}

/* A frame to an address that is not a peer (an accepting endpoint's cookie
 * challenge to an unknown sender): one sendto from the main socket, no
 * peer entry, no queue.  Best effort: a refusal is the sender's loss (it
 * sends again).  An ICMP error about the address later finds no peer to
 * mark. */
static int udp_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen)
{
	struct udp_nic *u = udp_of(nic);
	union udp_sa sa;
	int rc = rcpi_udp_blob_to_sa(blob, len, &sa);

	if (rc)
		return rc;
	if (sa.sa.sa_family != u->self.sa.sa_family)
		return RCP_EADDR;
	if (flen > u->mtu)
		return RCP_EMSGSIZE;
	for (int tries = 0; tries < 2; tries++) {
		if (sendto(u->fd, frame, flen, MSG_DONTWAIT, &sa.sa, rcpi_udp_sa_len(&sa)) >= 0) {
			rcpi_udp_tx_count(u, 1, flen);
			return 0;
		}
		if (!rcpi_udp_is_async_err(errno))
			break;
		rcpi_udp_drain_errq(u); /* an earlier datagram's ICMP: drain, retry */
	}
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ? RCP_EAGAIN : RCP_ESYS;
}

static int udp_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	struct udp_nic *u = udp_of(nic);
	union udp_sa sa;
	int rc;

	if (strncmp(addr, "udp:", 4))
		return RCP_EADDR;
	rc = rcpi_udp_parse(addr + 4, 0, u->family, &sa);
	return rc ? rc : rcpi_udp_peer_insert(u, &sa, peer);
}

static int udp_peer_remove(rcp_nic *nic, int peer)
{
	struct udp_nic *u = udp_of(nic);
	int w = 0, wi = 0, dropped = 0;

	if (peer >= UDP_MAX_PEERS || !u->peers[peer].used)
		return RCP_EINVAL;
	/* Queued frames name the peer by index: send them now, forget the
	 * rest, so a reused index never gets another peer's frames. */
	for (int i = 0; i < u->txn; i++) {
		if (u->txq[i].peer != peer)
			continue;
		rcpi_udp_txq_flush(u, 0, NULL);
		for (int r = 0; r < u->txn; r++) {
			struct udp_txent e = u->txq[r];
			if (e.peer == peer) {
				dropped++;
				continue;
			}
			memmove(&u->txiov[wi], &u->txiov[e.iov_off], e.iovcnt * sizeof u->txiov[0]);
			e.iov_off = (uint16_t)wi;
			wi += e.iovcnt;
			u->txq[w++] = e;
		}
		u->txn = w;
		u->txniov = wi;
		if (dropped)
			rcpi_debug("udp: peer %d removed with %d frame(s) unsent", peer, dropped);
		break;
	}
	if (peer == u->lpeer)
		rcpi_udp_lane_close(u); /* the next peer added gets it */
	rcpi_udp_hash_remove(u, peer);
	memset(&u->peers[peer], 0, sizeof u->peers[peer]);
	u->freel[u->nfree++] = peer;
	u->npeers--;
	return 0;
}

const struct rcpi_nic_ops rcpi_nic_udp_ops = {
    .name = "udp",
    .id = RCPI_NIC_UDP,
    .open = udp_open,
    .close = udp_close,
    .query = udp_query,
    .addr_str = udp_addr_str,
    .addr_blob = udp_addr_blob,
    .peer_add = udp_peer_add,
    .peer_add_str = udp_peer_add_str,
    .peer_remove = udp_peer_remove,
    .send = rcpi_udp_send,
    .flush = rcpi_udp_flush,
    .recv = rcpi_udp_recv,
    .release = rcpi_udp_release,
    .fd = rcpi_udp_fd,
    .arm = rcpi_udp_arm,
    .pending = rcpi_udp_pending,
    .recv_wait = rcpi_udp_recv_wait,
    .send_to = udp_send_to,
    /* No RMA: the dispatcher answers RCP_ENOTSUP. */
};
