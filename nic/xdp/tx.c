/*
 * nic/xdp/tx.c — the xdp backend's transmit side: TX frames, descriptors,
 * kicks and completions (xdp_int.h, "The UMEM and the rings").
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "nic/xdp/xdp_int.h"

/* ---- send ------------------------------------------------------------ */

/*
 * Per frame, copy mode pays one system call, the kick, and nothing else:
 *
 *   kicks     only where the kernel needs one: after a send without
 *             RCP_NIC_MORE, at flush, or when the TX ring or the free
 *             stack ran out; never while frames wait under MORE (a
 *             burst goes out with one kick, the kernel taking up to 32
 *             descriptors a call), and only while the TX ring's
 *             need_wakeup flag is up (always in copy mode; a zero-copy
 *             driver that polls the ring itself clears it).  Each
 *             sendto is counted in stats.wakeups (tests count kicks per
 *             frames sent).
 *   reaping   after every kick, one peek of the completion ring: the
 *             frame the kernel just finished goes back on top of the
 *             free stack and the next send takes it again, so a ping-pong
 *             writes one cache-hot TX buffer.  Reaping lazily (only when
 *             the stack ran dry) would save that peek, a load of a line
 *             the kicking CPU just wrote in the kernel, but send from
 *             each of the RING buffers in turn: 2048 pages, a cache and
 *             TLB miss a frame.
 *   receive   never a system call while spinning: the RX ring is peeked
 *             in memory (rx.c).
 *
 * Memory ordering: the kick's sendto is a full barrier between our
 * descriptor writes (published by xsk_ring_prod__submit's release store)
 * and the kernel's reads; the completion ring is read after an acquire
 * load of its producer index (xsk_ring_cons__peek), so a frame's address
 * is seen complete before it is reused.
 */

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
		x->base.stats.wakeups++;
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

int rcpi_xdp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
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

int rcpi_xdp_flush(rcp_nic *nic)
{
	struct xdp_nic *x = xdp_of(nic);
	return x->tx_queued || tx_outstanding(x) ? tx_kick(x) : 0;
}

int rcpi_xdp_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen)
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
