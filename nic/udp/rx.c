/*
 * nic/udp/rx.c — the udp backend: receive and waiting
 * (design notes: nic/udp/udp_int.h).
 */
#include "nic/udp/udp_int.h"

/* ---- receive ----------------------------------------------------------- */

static void gro_consider(struct udp_nic *u, int n);

/* One receive call on socket FD into the slots: recvmmsg for up to rx_want
 * datagrams; for one, recvfrom (recvmsg once GRO is on: the segment size
 * comes in a cmsg).  See "Receiving" at the top for the measured costs.
 * SLEEP: the first call may sleep (SO_RCVTIMEO bounds it; a signal ends
 * it).  Returns datagrams received, 0 or RCP_ESYS. */
static int rx_fill_fd(struct udp_nic *u, int fd, int sleep)
{
	int tries = 0, n, dontwait = sleep ? 0 : MSG_DONTWAIT;

	for (;;) {
		if (u->rx_want == 1 && !u->gro) {
			/* recvfrom skips the msghdr and iovec import: ~0.1 us
			 * per round trip; MSG_TRUNC makes it return the real
			 * length so truncation is still seen. */
			struct msghdr *m = &u->rxmsg[0].msg_hdr;
			socklen_t al = sizeof u->rxsrc[0];
			ssize_t r = recvfrom(fd, u->rxiov[0].iov_base, u->rxiov[0].iov_len,
			                     dontwait | MSG_TRUNC, &u->rxsrc[0].sa, &al);
			n = r < 0 ? -1 : 1;
			if (r >= 0) {
				m->msg_namelen = al;
				m->msg_controllen = 0;
				m->msg_flags = (size_t)r > u->rxiov[0].iov_len ? MSG_TRUNC : 0;
				u->rxmsg[0].msg_len = (unsigned)r;
			}
		} else if (u->rx_want == 1) {
			ssize_t r = recvmsg(fd, &u->rxmsg[0].msg_hdr, dontwait);
			n = r < 0 ? -1 : 1;
			if (r >= 0)
				u->rxmsg[0].msg_len = (unsigned)r;
		} else {
			n = recvmmsg(fd, u->rxmsg, (unsigned)u->rx_want,
			             dontwait ? dontwait : MSG_WAITFORONE, NULL);
		}
		/* Only the first call may sleep: one wake-up per wait. */
		dontwait = MSG_DONTWAIT;
		if (n > 0) {
			u->rx_n = n;
			if (n >= UDP_GRO_RUN && !u->gro && u->gro_ok)
				gro_consider(u, n);
			return n;
		}
		if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINTR) {
			if (sleep)
				return 0; /* a signal ended the sleep: back to the caller */
			continue;
		}
		if (rcpi_udp_is_async_err(errno) && tries++ < UDP_RETRIES) {
			/* A pending ICMP error, reported on the next call
			 * whatever it is: attribute it and look again. */
			rcpi_udp_drain_errq(u);
			continue;
		}
		rcpi_warn("udp: receive: %s", strerror(errno));
		return RCP_ESYS;
	}
}

/* One fill of the slots.  Without a lane: the socket (SLEEP as in
 * rx_fill_fd).  With one: the lane every time, the main socket every
 * UDP_MAIN_EVERY-th fill, or every fill while it is delivering
 * (main_hot); the two take turns at going first, so a busy one never
 * starves the other.  rx_dry is set only when every socket was looked at.
 * Precondition: every held frame has been handed out and none is
 * outstanding.  Returns datagrams received, 0 or RCP_ESYS. */
static int rx_fill(struct udp_nic *u, int sleep)
{
	int n, look_main, main_first, from_main;

	/* The kernel rewrote only the headers it filled last time. */
	for (int i = 0; i < u->rx_n; i++) {
		u->rxmsg[i].msg_hdr.msg_namelen = sizeof u->rxsrc[i];
		u->rxmsg[i].msg_hdr.msg_controllen = u->gro_ok ? sizeof u->rxctl[i] : 0;
	}
	u->rx_n = u->rx_slot = 0;
	u->rx_off = 0;
	u->rx_dry = 0;
	if (u->watching)
		rcpi_udp_watch(u, 0); /* awake: see rcpi_udp_watch() */
	if (u->lfd < 0) {
		n = rx_fill_fd(u, u->fd, sleep);
		u->rx_dry = n == 0;
		return n;
	}
	look_main = u->main_hot || ++u->main_skip >= UDP_MAIN_EVERY;
	main_first = look_main && u->rx_turn;
	n = rx_fill_fd(u, main_first ? u->fd : u->lfd, 0);
	from_main = main_first;
	if (look_main) {
		u->main_skip = 0;
		if (u->main_hot)
			u->main_hot--;
		if (!n) {
			n = rx_fill_fd(u, main_first ? u->lfd : u->fd, 0);
			from_main = !main_first;
		}
	}
	if (n > 0) {
		if (from_main)
			u->main_hot = UDP_MAIN_HOT;
		u->rx_turn = (uint8_t)!from_main;
	}
	u->rx_dry = n == 0 && look_main;
	return n;
}

static uint32_t rx_gro_size(struct msghdr *m)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof v);
			return v > 0 ? (uint32_t)v : 0;
		}
	}
	return 0;
}

/* Turns UDP_GRO on if the burst just received holds a run of equal-size
 * datagrams from one sender: what a GSO sender (or a NIC's GRO) produces,
 * and what GRO then hands over as one buffer: measured on loopback, 64 B
 * frames 2.2-3.3 M/s instead of 0.2-0.5 M/s, 1 KiB 6x, 8 KiB 2x.  Not on
 * from the start because a GRO socket pays ~0.13 us per datagram
 * received (measured), 3% of an 8-byte round trip per side; and never off
 * again, because a buffer coalesced before UDP_GRO went off would be read
 * without its segment size and handed out as one frame. */
static void gro_consider(struct udp_nic *u, int n)
{
	int run = 1, one = 1;

	for (int i = 1; i < n && run < UDP_GRO_RUN; i++) {
		const struct msghdr *a = &u->rxmsg[i - 1].msg_hdr, *b = &u->rxmsg[i].msg_hdr;
		if (u->rxmsg[i].msg_len == u->rxmsg[i - 1].msg_len &&
		    a->msg_namelen == b->msg_namelen &&
		    !memcmp(&u->rxsrc[i - 1], &u->rxsrc[i], b->msg_namelen))
			run++;
		else
			run = 1;
	}
	if (run < UDP_GRO_RUN)
		return;
	if (setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof one) ||
	    (u->lfd >= 0 && setsockopt(u->lfd, SOL_UDP, UDP_GRO, &one, sizeof one))) {
		/* (Were it on for the main socket only, the lane would stay
		 * without: both read their segment sizes the same way.) */
		u->gro_ok = 0;
		return;
	}
	u->gro = 1;
	rcpi_debug("udp: bursts of equal frames: UDP_GRO on");
}

/* Moves to the next slot. */
static inline void rx_next(struct udp_nic *u)
{
	u->rx_slot++;
	u->rx_off = 0;
}

/* Hands out up to MAX frames; SLEEP: the first receive call may sleep. */
static int recv_frames(struct udp_nic *u, struct rcp_nic_frame *fr, int max, int sleep)
{
	uint64_t bytes = 0;
	int k = 0, looked = -1, rc;

	/* By contract the previous burst has been released. */
	u->outstanding = 0;
	u->rx_want = max < UDP_RXB ? max : UDP_RXB;
	for (int fills = 0; !k && fills < 4; fills++) {
		if (u->rx_slot >= u->rx_n) {
			rc = rx_fill(u, sleep && !fills);
			if (rc <= 0)
				return rc;
		}
		while (k < max && u->rx_slot < u->rx_n) {
			int s = u->rx_slot;
			struct msghdr *m = &u->rxmsg[s].msg_hdr;
			uint32_t len = u->rxmsg[s].msg_len, flen;

			if (u->rx_off == 0) {
				/* First look at this datagram (or GRO buffer). */
				if (RCPI_UNLIKELY(m->msg_flags & MSG_TRUNC)) {
					/* Longer than the slot: never deliver it cut. */
					u->base.stats.rx_dropped++;
					rx_next(u);
					continue;
				}
				u->rx_seg = m->msg_controllen ? rx_gro_size(m) : 0;
				u->rxbloblen[s] =
				    (uint8_t)rcpi_udp_sa_to_blob(&u->rxsrc[s], u->rxblob[s]);
			}
			flen =
			    u->rx_seg && len - u->rx_off > u->rx_seg ? u->rx_seg : len - u->rx_off;
			if (RCPI_UNLIKELY(flen > u->mtu)) {
				/* From a peer with a larger MTU (fits a GRO slot):
				 * frames handed out never exceed info.mtu. */
				u->base.stats.rx_dropped++;
				u->rx_off += flen;
				if (!u->rx_seg || u->rx_off >= len)
					rx_next(u);
				continue;
			}
			if (s != looked) {
				/* Per call, not per datagram: a peer added since the
				 * last call applies to the rest of a GRO buffer. */
				u->rxpeer[s] = rcpi_udp_peer_of_sa(u, &u->rxsrc[s]);
				looked = s;
				/* A peer that speaks is there: an error still
				 * pending for it came from an earlier holder
				 * of its address (ICMP raced the new bind). */
				if (u->rxpeer[s] >= 0 && RCPI_UNLIKELY(u->peers[u->rxpeer[s]].err))
					u->peers[u->rxpeer[s]].err = 0;
			}
			fr[k].data = u->rxbuf + (size_t)s * u->rxstride + u->rx_off;
			fr[k].len = flen;
			fr[k].peer = u->rxpeer[s];
			fr[k].src = u->rxblob[s];
			fr[k].srclen = u->rxbloblen[s];
			fr[k].reserved = 0;
			fr[k].token = (uintptr_t)s;
			k++;
			bytes += flen;
			u->rx_off += flen;
			if (!u->rx_seg || u->rx_off >= len)
				rx_next(u);
		}
	}
	u->outstanding = (uint32_t)k;
	u->base.stats.rx_frames += (uint64_t)k;
	u->base.stats.rx_bytes += bytes;
	return k;
}

int rcpi_udp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max)
{
	return recv_frames(udp_of(nic), fr, max, 0);
}

void rcpi_udp_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct udp_nic *u = udp_of(nic);
	(void)frames;
	/* Slots are recycled by the next recvmmsg, which happens only after
	 * every held frame was handed out; releasing just ends the loan. */
	u->outstanding = (uint32_t)n >= u->outstanding ? 0 : u->outstanding - (uint32_t)n;
}

/* ---- waiting ----------------------------------------------------------- */

/* Without lanes, the socket.  With them, an epoll set that holds both
 * sockets while a caller may sleep (see rcpi_udp_watch()), made on the first call:
 * the fd must stay the same for the endpoint's lifetime, and a lane may
 * come later.  (The nic is ours; const is the ops table's promise to
 * callers, who see nothing change.) */
int rcpi_udp_fd(const rcp_nic *nic)
{
	struct udp_nic *u = (struct udp_nic *)(uintptr_t)udp_ofc(nic);

	if (!u->lane_ok)
		return u->fd;
	if (u->efd < 0) {
		u->efd = epoll_create1(EPOLL_CLOEXEC);
		if (u->efd < 0) {
			/* No set, no lanes: the socket alone is the fd. */
			if (u->lfd >= 0)
				rcpi_udp_lane_close(u);
			u->lane_ok = 0;
			return u->fd;
		}
		/* A caller may arm() before it takes the fd: watch now. */
		rcpi_udp_watch(u, 1);
	}
	return u->efd;
}

/* ppoll on the sockets (the main one in PFD[0], the lane in PFD[1] if
 * there is one) for up to TIMEOUT_NS (<0: forever).  Returns ppoll's. */
static int sock_poll(const struct udp_nic *u, struct pollfd pfd[2], int64_t timeout_ns)
{
	struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
	pfd[0] = (struct pollfd){.fd = u->fd, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = u->lfd, .events = POLLIN}; /* -1: ppoll skips it */
	return ppoll(pfd, 2, timeout_ns < 0 ? NULL : &ts, NULL);
}

/* The sockets' events now, or'ed (0: none; < 0: poll failed). */
static int poll_now(const struct udp_nic *u)
{
	struct pollfd pfd[2];
	int r = sock_poll(u, pfd, 0);
	return r > 0 ? pfd[0].revents | pfd[1].revents : r;
}

int rcpi_udp_arm(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);

	if (u->rx_slot < u->rx_n)
		return RCP_EAGAIN;
	/* The receive call just before (a wait's last poll) found the socket
	 * empty and reported no error: that is what poll() would tell, and
	 * whatever arrives since makes the fd readable (also an edge for
	 * EPOLLET).  One system call less per sleep. */
	if (u->rx_dry) {
		u->rx_dry = 0;
		rcpi_udp_watch(u, 1);
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		int ev = poll_now(u);
		if (ev < 0)
			return errno == EINTR || errno == ENOMEM ? RCP_EAGAIN : RCP_ESYS;
		if (!ev) {
			rcpi_udp_watch(u, 1);
			return 0;
		}
		if (ev & POLLIN)
			return RCP_EAGAIN;
		/* POLLERR only: an ICMP error.  Unhandled it would wake every
		 * poll at once; attribute it and look again. */
		rcpi_udp_drain_errq(u);
	}
	return RCP_EAGAIN;
}

/* Sleeps shorter than this use poll() (nanoseconds); longer ones sleep in
 * the receive call under SO_RCVTIMEO, which the kernel keeps in ticks. */
#define UDP_BLOCK_MIN_NS 1000000

/* Whether SO_RCVTIMEO CUR (ns, 0: none) serves a sleep of T (0: forever):
 * it must not sleep past T nor wake before half of it, so steady waits set
 * the option once. */
static int rcvtimeo_fits(int64_t cur, int64_t t)
{
	if (!cur || !t)
		return cur == t;
	return cur <= t && 2 * cur >= t;
}

/* A sleep in ppoll on the sockets (level-triggered: no arm() first), then
 * one receive, from the socket that woke it first.  With a lane (two
 * sockets) every sleep goes this way; without, sleeps too short for
 * SO_RCVTIMEO. */
static int sock_wait(struct udp_nic *u, struct rcp_nic_frame *fr, int max, int64_t timeout_ns)
{
	struct pollfd pfd[2];
	int n = sock_poll(u, pfd, timeout_ns);

	if (n < 0)
		return errno == EINTR ? 0 : RCP_ESYS;
	if (!n)
		return 0;
	for (int i = 0; i < 2; i++)
		if (pfd[i].revents & POLLERR)
			rcpi_udp_drain_fd(u, pfd[i].fd);
	if (u->lfd >= 0) {
		/* Look first where it woke us. */
		u->rx_turn = (pfd[0].revents & POLLIN) != 0;
		if (u->rx_turn)
			u->main_hot = UDP_MAIN_HOT;
	}
	return recv_frames(u, fr, max, 0);
}

int rcpi_udp_recv_wait(rcp_nic *nic, struct rcp_nic_frame *fr, int max, int64_t timeout_ns)
{
	struct udp_nic *u = udp_of(nic);
	int64_t t = timeout_ns < 0 ? 0 : timeout_ns;

	if (u->rx_slot < u->rx_n)
		return recv_frames(u, fr, max, 0);
	if (u->lfd >= 0 || (timeout_ns >= 0 && timeout_ns < UDP_BLOCK_MIN_NS))
		return sock_wait(u, fr, max, timeout_ns);
	if (!rcvtimeo_fits(u->rcvtimeo_ns, t)) {
		struct timeval tv = {(time_t)(t / 1000000000),
		                     (suseconds_t)(t % 1000000000 / 1000)};
		if (setsockopt(u->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))
			return sock_wait(u, fr, max, timeout_ns);
		u->rcvtimeo_ns = t;
	}
	return recv_frames(u, fr, max, 1);
}

int rcpi_udp_pending(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);

	if (u->rx_slot < u->rx_n)
		return 1;
	if (u->outstanding) {
		/* The caller still reads frames in the slots: look, don't take. */
		return poll_now(u) != 0;
	}
	/* Receive now and keep the frames for recv(): the system call this
	 * costs is the one recv() would make anyway. */
	return rx_fill(u, 0) != 0;
}
