/*
 * nic/udp/tx.c — the udp backend: transmit
 * (design notes: nic/udp/udp_int.h).
 */
#include "nic/udp/udp_int.h"

/* ---- transmit ---------------------------------------------------------- */

void rcpi_udp_tx_count(struct udp_nic *u, uint32_t frames, uint64_t bytes)
{
	u->base.stats.tx_frames += frames;
	u->base.stats.tx_bytes += bytes;
}

/* Copies the N pieces of IOV into DST, which holds them all; returns the
 * bytes copied.  Small frames go out flat by sendto (send_one, send_lone). */
static size_t gather(unsigned char *dst, const struct iovec *iov, size_t n)
{
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(dst + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return off;
}

/* One frame straight from the caller's iovec: the latency path. */
static int send_one(struct udp_nic *u, int peer, const struct iovec *iov, int iovcnt, size_t total)
{
	struct udp_peer *p = &u->peers[peer];
	struct msghdr m;
	unsigned char small[UDP_SMALL_FRAME];
	const void *flat = NULL;
	int tries = 0, err, rc, fd = u->fd;

	/* A small frame (header + a few bytes: ping-pong, acks, RPC) goes
	 * gathered by sendto: the kernel then imports one user range instead
	 * of a msghdr and an iovec array, ~0.1 us per send measured here. */
	if (iovcnt == 1) {
		flat = iov[0].iov_base;
	} else if (total <= sizeof small) {
		gather(small, iov, (size_t)iovcnt);
		flat = small;
	}
	memset(&m, 0, sizeof m);
	if (peer == u->lpeer) {
		fd = u->lfd; /* connected: no address, the route is cached */
	} else {
		m.msg_name = &p->sa;
		m.msg_namelen = rcpi_udp_sa_len(&p->sa);
	}
	m.msg_iov = (struct iovec *)iov;
	m.msg_iovlen = (size_t)iovcnt;
	for (;;) {
		ssize_t r = flat ? sendto(fd, flat, total, MSG_DONTWAIT,
		                          (struct sockaddr *)m.msg_name, m.msg_namelen)
		                 : sendmsg(fd, &m, MSG_DONTWAIT);
		if (RCPI_LIKELY(r >= 0)) {
			rcpi_udp_tx_count(u, 1, total);
			return 0;
		}
		err = errno;
		if (err == EINTR)
			continue;
		if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
			u->base.stats.tx_eagain++;
			return RCP_EAGAIN;
		}
		if (rcpi_udp_is_async_err(err) && tries++ < UDP_RETRIES) {
			/* Most likely an ICMP error left for an earlier datagram. */
			rcpi_udp_drain_errq(u);
			if (p->err) {
				rc = p->err;
				p->err = 0;
				return rc;
			}
			continue;
		}
		if (err == ECONNREFUSED) {
			/* Can only be a pending socket error: try again later. */
			u->base.stats.tx_eagain++;
			return RCP_EAGAIN;
		}
		rc = rcpi_errno_to_rcp(err);
		rcpi_debug("udp: send to peer %d: %s", peer, strerror(err));
		return rc == RCP_ENOMEM || rc == RCP_EAGAIN ? RCP_ESYS : rc;
	}
}

/* Builds messages for queue entries [HEAD, txn): a run of same-size frames
 * to one peer becomes one GSO message.  Returns the number of messages. */
static int txq_build(struct udp_nic *u, int head)
{
	int m = 0;

	for (int i = head; i < u->txn; m++) {
		const struct udp_txent *e = &u->txq[i];
		struct udp_peer *p = &u->peers[e->peer];
		struct msghdr *h = &u->txmsg[m].msg_hdr;
		uint32_t total = e->len, iovs = e->iovcnt;
		int n = 1;

		h->msg_name = &p->sa;
		h->msg_namelen = rcpi_udp_sa_len(&p->sa);
		h->msg_iov = &u->txiov[e->iov_off];
		h->msg_control = NULL;
		h->msg_controllen = 0;
		h->msg_flags = 0;
		if (u->gso && e->len && e->len <= u->gso_seg_max) {
			while (i + n < u->txn && n < UDP_GSO_MAXSEG) {
				const struct udp_txent *f = &u->txq[i + n];
				if (f->peer != e->peer || !f->len || f->len > e->len ||
				    total + f->len > UDP_GSO_MAXBYTES)
					break;
				total += f->len;
				iovs += f->iovcnt;
				n++;
				if (f->len < e->len) /* a short segment ends the run */
					break;
			}
			if (n > 1) {
				struct cmsghdr *c = &u->txctl[m].align;
				uint16_t seg = (uint16_t)e->len;
				c->cmsg_level = SOL_UDP;
				c->cmsg_type = UDP_SEGMENT;
				c->cmsg_len = CMSG_LEN(sizeof seg);
				memcpy(CMSG_DATA(c), &seg, sizeof seg);
				h->msg_control = c;
				h->msg_controllen = CMSG_SPACE(sizeof seg);
			}
		}
		h->msg_iovlen = iovs;
		u->txcnt[m] = (uint8_t)n;
		u->txlen[m] = total;
		i += n;
	}
	return m;
}

/* Drops entries [0, head) and moves the rest (and their iovecs) down. */
static void txq_consume(struct udp_nic *u, int head)
{
	int off;

	if (!head)
		return;
	if (head >= u->txn) {
		u->txn = u->txniov = 0;
		return;
	}
	off = u->txq[head].iov_off;
	memmove(u->txq, u->txq + head, (size_t)(u->txn - head) * sizeof u->txq[0]);
	memmove(u->txiov, u->txiov + off, (size_t)(u->txniov - off) * sizeof u->txiov[0]);
	u->txn -= head;
	u->txniov -= off;
	for (int i = 0; i < u->txn; i++)
		u->txq[i].iov_off = (uint16_t)(u->txq[i].iov_off - off);
}

/* One queued message: a small lone frame (the ping-pong case: the core
 * queues with RCP_NIC_MORE, then flushes) goes gathered by sendto, as in
 * send_one; anything else by sendmsg. */
static ssize_t send_lone(struct udp_nic *u, int peer, const struct msghdr *h, size_t total)
{
	unsigned char small[UDP_SMALL_FRAME];
	size_t off;

	if (h->msg_controllen || total > sizeof small)
		return sendmsg(u->fd, h, MSG_DONTWAIT);
	off = gather(small, h->msg_iov, h->msg_iovlen);
	if (peer == u->lpeer)
		return send(u->lfd, small, off, MSG_DONTWAIT);
	return sendto(u->fd, small, off, MSG_DONTWAIT, (const struct sockaddr *)h->msg_name,
	              h->msg_namelen);
}

/* Pushes the queue out.  If CUR, the last entry is the frame the caller is
 * sending now; a drop of it is reported in *CUR_RC (other entries were
 * accepted earlier: their peer is marked, or the error is returned).
 * Returns 0 (queue empty), RCP_EAGAIN (frames remain) or a hard error for
 * some dropped frame. */
int rcpi_udp_txq_flush(struct udp_nic *u, int cur, int *cur_rc)
{
	int head = 0, tries = 0, ret = 0;

	while (head < u->txn) {
		int nmsg = txq_build(u, head), r, err, rc, p, drop;

		if (nmsg == 1)
			r = send_lone(u, u->txq[head].peer, &u->txmsg[0].msg_hdr, u->txlen[0]) >= 0
			        ? 1
			        : -1;
		else
			r = sendmmsg(u->fd, u->txmsg, (unsigned)nmsg, MSG_DONTWAIT);
		if (RCPI_LIKELY(r > 0)) {
			for (int i = 0; i < r; i++) {
				head += u->txcnt[i];
				rcpi_udp_tx_count(u, u->txcnt[i], u->txlen[i]);
			}
			tries = 0;
			continue;
		}
		err = r < 0 ? errno : EAGAIN;
		if (err == EINTR)
			continue;
		if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
			u->base.stats.tx_eagain++;
			ret = RCP_EAGAIN;
			break;
		}
		p = u->txq[head].peer;
		drop = u->txcnt[0];
		if (rcpi_udp_is_async_err(err) && tries++ < UDP_RETRIES) {
			rcpi_udp_drain_errq(u);
			if (!u->peers[p].err)
				continue;
			/* The head's own peer is gone: drop its frames. */
			rc = u->peers[p].err;
		} else if (err == ECONNREFUSED) {
			u->base.stats.tx_eagain++;
			ret = RCP_EAGAIN;
			break;
		} else if (u->txcnt[0] > 1 && (err == EIO || err == EINVAL || err == EOPNOTSUPP ||
		                               err == ENOPROTOOPT)) {
			rcpi_info("udp: UDP_SEGMENT refused (%s): GSO off", strerror(err));
			u->gso = 0;
			continue;
		} else {
			rc = rcpi_errno_to_rcp(err);
			if (rc == RCP_ENOMEM || rc == RCP_EAGAIN)
				rc = RCP_ESYS;
			if (rc == RCP_EPEER)
				u->peers[p].err = RCP_EPEER;
		}
		tries = 0;
		head += drop;
		if (cur && head >= u->txn) {
			/* The caller's frame is among those dropped. */
			*cur_rc = rc;
			if (rc == RCP_EPEER)
				u->peers[p].err = 0;
			if (drop == 1)
				continue;
		}
		rcpi_debug("udp: %d queued frame(s) to peer %d dropped: %s", drop, p,
		           rcp_strerror(rc));
		if (rc != RCP_EPEER && !ret)
			ret = rc;
	}
	txq_consume(u, head);
	return u->txn ? RCP_EAGAIN : ret;
}

int rcpi_udp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                  unsigned flags)
{
	struct udp_nic *u = udp_of(nic);
	struct udp_peer *p;
	struct udp_txent *e;
	int rc, cur_rc = 0;

	if (RCPI_UNLIKELY(peer >= UDP_MAX_PEERS || !u->peers[peer].used || iovcnt > UDP_IOV_MAX))
		return RCP_EINVAL;
	if (RCPI_UNLIKELY(total > u->mtu))
		return RCP_EMSGSIZE;
	p = &u->peers[peer];
	if (RCPI_UNLIKELY(p->err)) {
		rc = p->err;
		p->err = 0;
		return rc;
	}
	if (!(flags & RCP_NIC_MORE) && !u->txn)
		return send_one(u, peer, iov, iovcnt, total);
	if (RCPI_UNLIKELY(iovcnt > UDP_TXIOV)) {
		/* Too scattered to queue: send it alone, after the queue. */
		if (u->txn && rcpi_udp_txq_flush(u, 0, NULL) == RCP_EAGAIN)
			return RCP_EAGAIN;
		return send_one(u, peer, iov, iovcnt, total);
	}
	if (u->txn == UDP_TXQ || u->txniov + iovcnt > UDP_TXIOV) {
		rcpi_udp_txq_flush(u, 0, NULL);
		if (u->txn == UDP_TXQ || u->txniov + iovcnt > UDP_TXIOV)
			return RCP_EAGAIN;
	}
	e = &u->txq[u->txn++];
	e->peer = peer;
	e->len = (uint32_t)total;
	e->iov_off = (uint16_t)u->txniov;
	e->iovcnt = (uint16_t)iovcnt;
	memcpy(&u->txiov[u->txniov], iov, (size_t)iovcnt * sizeof *iov);
	u->txniov += iovcnt;
	if (flags & RCP_NIC_MORE)
		return 0;
	rcpi_udp_txq_flush(u, 1, &cur_rc);
	if (u->txn) {
		/* Our frame is the last entry and still queued: hand it back. */
		u->txn--;
		u->txniov -= iovcnt;
		return RCP_EAGAIN;
	}
	return cur_rc;
}

int rcpi_udp_flush(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);
	return u->txn ? rcpi_udp_txq_flush(u, 0, NULL) : 0;
}
