/*
 * nic/udp/peers.c — the udp backend: the peer table, the lane and the error queue
 * (design notes: nic/udp/udp_int.h).
 */
#include "nic/udp/udp_int.h"

/* ---- peer table -------------------------------------------------------- */

#define HASH_MASK (UDP_HASH_SIZE - 1)

static int peer_find(const struct udp_nic *u, const struct udp_key *k, uint32_t h)
{
	for (uint32_t i = h & HASH_MASK;; i = (i + 1) & HASH_MASK) {
		uint32_t e = u->hash[i];
		const struct udp_peer *p;
		if (!e)
			return RCP_NIC_PEER_NONE;
		p = &u->peers[e - 1];
		if (p->hash == h && !memcmp(&p->key, k, sizeof *k))
			return (int)(e - 1);
	}
}

int rcpi_udp_peer_of_sa(const struct udp_nic *u, const union udp_sa *sa)
{
	struct udp_key k;

	if (rcpi_udp_sa_to_key(sa, &k))
		return RCP_NIC_PEER_NONE;
	return peer_find(u, &k, rcpi_udp_key_hash(&k));
}

/* Backward-shift deletion: entries after the hole that may live in it
 * move up, so lookups never need tombstones. */
void rcpi_udp_hash_remove(struct udp_nic *u, int idx)
{
	uint32_t i = u->peers[idx].hash & HASH_MASK, j;

	while (u->hash[i] != (uint32_t)idx + 1)
		i = (i + 1) & HASH_MASK;
	for (;;) {
		u->hash[i] = 0;
		for (j = i;;) {
			uint32_t e, home;
			j = (j + 1) & HASH_MASK;
			e = u->hash[j];
			if (!e)
				return;
			home = u->peers[e - 1].hash & HASH_MASK;
			/* Stays if its home lies cyclically in (i, j]. */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			u->hash[i] = e;
			i = j;
			break;
		}
	}
}

/* Puts the sockets in the epoll set callers sleep on (ON), or takes them
 * out.  Only while a caller may sleep (from arm() to the next receive):
 * a socket in an epoll set costs every datagram delivered to it a call
 * into the set (~0.3 us measured here), spinning or not. */
void rcpi_udp_watch(struct udp_nic *u, int on)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int op = on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL;

	if (u->efd < 0 || u->watching == on)
		return;
	ev.data.fd = u->fd;
	epoll_ctl(u->efd, op, u->fd, &ev);
	if (u->lfd >= 0) {
		ev.data.fd = u->lfd;
		epoll_ctl(u->efd, op, u->lfd, &ev);
	}
	u->watching = (uint8_t)on;
}

/* Opens the lane to peer IDX: a second socket bound to our own address
 * and port, connected to the peer (see "Lane").  Binding to a port in use
 * needs SO_REUSEADDR on both sockets; it is on only while the lane binds,
 * so any other bind to our port still fails with EADDRINUSE.  A lane that
 * cannot be had is simply not there: every peer works through the main
 * socket. */
static void lane_open(struct udp_nic *u, int idx)
{
	const union udp_sa *sa = &u->peers[idx].sa;
	struct epoll_event ev = {.events = EPOLLIN};
	int one = 1, zero = 0, ok, s, err = 0;

	s = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (s < 0)
		return;
	rcpi_udp_set_buf(s, SO_RCVBUFFORCE, SO_RCVBUF, u->rcv_want);
	rcpi_udp_set_buf(s, SO_SNDBUFFORCE, SO_SNDBUF, u->snd_want);
	if (u->family == AF_INET6)
		setsockopt(s, SOL_IPV6, IPV6_RECVERR, &one, sizeof one);
	setsockopt(s, SOL_IP, IP_RECVERR, &one, sizeof one);
	if (u->gro)
		setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
	ok = !setsockopt(u->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) &&
	     !setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) &&
	     !bind(s, &u->self.sa, rcpi_udp_sa_len(&u->self));
	if (!ok)
		err = errno; /* before the calls below overwrite it */
	setsockopt(u->fd, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof zero);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof zero);
	/* Between bind and connect the lane may take a datagram from anyone:
	 * harmless, a frame is mapped to its peer by its source wherever it
	 * comes in. */
	ok = ok && !connect(s, &sa->sa, rcpi_udp_sa_len(sa));
	ev.data.fd = s;
	if (!ok || (u->watching && epoll_ctl(u->efd, EPOLL_CTL_ADD, s, &ev))) {
		rcpi_debug("udp: no lane to peer %d: %s", idx, strerror(err ? err : errno));
		close(s);
		return;
	}
	u->lfd = s;
	u->lpeer = idx;
	u->rx_turn = 0;
	u->main_hot = UDP_MAIN_HOT; /* frames sent before it may still come there */
}

void rcpi_udp_lane_close(struct udp_nic *u)
{
	close(u->lfd); /* also leaves the epoll set */
	u->lfd = u->lpeer = -1;
}

int rcpi_udp_peer_insert(struct udp_nic *u, const union udp_sa *sa, int *out)
{
	struct udp_key k;
	struct udp_peer *p;
	uint32_t h, i;
	int idx;

	if (sa->sa.sa_family != u->family || !rcpi_udp_sa_port(sa) ||
	    rcpi_udp_sa_is_unspecified(sa) || rcpi_udp_sa_to_key(sa, &k))
		return RCP_EADDR;
	h = rcpi_udp_key_hash(&k);
	idx = peer_find(u, &k, h);
	if (idx >= 0) {
		*out = idx;
		return 0;
	}
	if (u->npeers == UDP_MAX_PEERS)
		return RCP_EAGAIN;
	/* Errors queued so far belong to earlier holders of addresses (this
	 * one's, maybe: a new process on a dead one's port): read them while
	 * no entry can take the blame. */
	rcpi_udp_drain_errq(u);
	idx = u->nfree ? u->freel[--u->nfree] : u->hiwater++;
	p = &u->peers[idx];
	memset(p, 0, sizeof *p);
	memcpy(&p->sa, sa, rcpi_udp_sa_len(sa));
	p->key = k;
	p->hash = h;
	p->used = 1;
	for (i = h & HASH_MASK; u->hash[i]; i = (i + 1) & HASH_MASK)
		;
	u->hash[i] = (uint32_t)idx + 1;
	u->npeers++;
	if (rcpi_udp_sa_is_mcast(sa)) {
		/* A group (see "Multicast"): out by our own interface, one LAN. */
		unsigned char ttl = 1, loop = 1;
		if (!u->mcast_tx &&
		    (setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_IF, &u->self.in.sin_addr,
		                sizeof u->self.in.sin_addr) ||
		     setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) ||
		     setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop)))
			rcpi_debug("udp: multicast options: %s", strerror(errno));
		u->mcast_tx = 1;
		*out = idx;
		return 0;
	}
	rcpi_udp_check_path_mtu(u, p);
	if (u->lane_ok && u->lfd < 0)
		lane_open(u, idx);
	*out = idx;
	return 0;
}

/* ---- error queue ------------------------------------------------------- */

/* Errors the kernel reports asynchronously through the socket (from ICMP):
 * they may belong to an earlier datagram to another peer. */
int rcpi_udp_is_async_err(int err)
{
	switch (err) {
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENONET:
	case EPROTO: return 1;
	default: return 0;
	}
}

static void note_error(struct udp_nic *u, const union udp_sa *dst,
                       const struct sock_extended_err *ee)
{
	int idx = rcpi_udp_peer_of_sa(u, dst);
	struct udp_peer *p = idx >= 0 ? &u->peers[idx] : NULL;

	switch (ee->ee_errno) {
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENONET:
	case EACCES:
	case EPERM:
		if (p)
			p->err = RCP_EPEER;
		if (rcpi_log_level >= RCPI_LOG_DEBUG) {
			char ip[INET6_ADDRSTRLEN] = "?";
			inet_ntop(dst->sa.sa_family,
			          dst->sa.sa_family == AF_INET ? (const void *)&dst->in.sin_addr
			                                       : (const void *)&dst->in6.sin6_addr,
			          ip, sizeof ip);
			rcpi_debug("udp: %s port %u (peer %d): %s", ip,
			           ntohs(rcpi_udp_sa_port(dst)), idx, strerror((int)ee->ee_errno));
		}
		break;
	case EMSGSIZE:
		if (p && !p->warned) {
			rcpi_warn("udp: peer %d: path MTU %u is below the frame size; set "
			          "RCP_UDP_MTU",
			          idx, ee->ee_info);
			p->warned = 1;
		}
		break;
	default:
		rcpi_debug("udp: peer %d: error %s ignored", idx, strerror((int)ee->ee_errno));
		break;
	}
}

/* Reads every queued error, marking the peers they name, and clears the
 * socket's pending error.  The pending error goes first: an ICMP landing
 * during the loop then leaves a pending error behind (and a later drain),
 * never an entry in the queue that nothing reports but POLLERR. */
void rcpi_udp_drain_fd(struct udp_nic *u, int fd)
{
	int e;
	socklen_t el = sizeof e;

	getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
	for (int n = 0; n < 4096; n++) {
		union udp_sa dst;
		union {
			struct cmsghdr align;
			char buf[512];
		} ctl;
		struct msghdr m;
		struct cmsghdr *c;

		memset(&m, 0, sizeof m);
		memset(&dst, 0, sizeof dst);
		m.msg_name = &dst;
		m.msg_namelen = sizeof dst;
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof ctl.buf;
		if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			struct sock_extended_err ee;
			if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
			      (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) ||
			    c->cmsg_len < CMSG_LEN(sizeof ee))
				continue;
			memcpy(&ee, CMSG_DATA(c), sizeof ee);
			note_error(u, &dst, &ee);
		}
	}
}

/* Both sockets: an error a call reported may have come to either. */
void rcpi_udp_drain_errq(struct udp_nic *u)
{
	rcpi_udp_drain_fd(u, u->fd);
	if (u->lfd >= 0)
		rcpi_udp_drain_fd(u, u->lfd);
}
