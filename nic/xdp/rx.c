/*
 * nic/xdp/rx.c — the xdp backend's receive side: RX ring, fill ring, chains
 * of buffers, and the wait fd (xdp_int.h).
 */
#include <string.h>
#include <sys/socket.h>

#include "nic/xdp/xdp_int.h"

/* ---- receive ------------------------------------------------------------ */

/*
 * Returning RX buffers in batches.  In copy mode the kernel fills our RX
 * ring from the sending CPU (veth: inside the peer's kick), so the fill
 * ring's consumer index and the RX ring's producer index are written on
 * the other CPU.  Giving each buffer back as it is released cost, per
 * frame, a load of that consumer index (xsk_ring_prod__reserve refreshes
 * it when its cached room runs short, and the ring is nearly full: every
 * buffer is on it) and a store to our producer index, which the kernel
 * reads there: two cache lines crossing CPUs on top of the frame's own.
 * So released buffers wait on a stash of up to XDP_STASH and go back
 * XDP_STASH at a time, one reservation and one release store per batch;
 * the window (xdp_int.h) counts the stash as held.  The kernel still
 * finds RING - XDP_BURST - XDP_STASH buffers or more on the fill ring, so
 * holding a few back never starves it.  fill_flush() empties the stash.
 */
static void fill_flush(struct xdp_nic *x)
{
	uint32_t idx, m = (uint32_t)x->nstash;

	if (!m || xsk_ring_prod__reserve(&x->fill, m, &idx) != m)
		return; /* the fill ring has room for every RX buffer */
	for (uint32_t i = 0; i < m; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) = x->stash[i];
	xsk_ring_prod__submit(&x->fill, m);
	x->nstash = 0;
	if (xsk_ring_prod__needs_wakeup(&x->fill))
		(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

/* RX buffers ADDRS[N] (but the XDP_NOBUF entries) back to the kernel, by
 * way of the stash. */
static void fill_give(struct xdp_nic *x, const uint64_t *addrs, int n)
{
	for (int i = 0; i < n; i++) {
		if (addrs[i] == XDP_NOBUF)
			continue;
		if (x->nstash == XDP_STASH) {
			fill_flush(x);
			if (x->nstash == XDP_STASH)
				return; /* cannot happen (room for all); never overrun */
		}
		x->stash[x->nstash++] = addrs[i];
	}
	if (x->nstash == XDP_STASH)
		fill_flush(x);
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

int rcpi_xdp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max)
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
		/* Busy-poll on (xdp_int.h): the recvfrom runs the queue's
		 * NAPI poll here, and also serves the fill ring's wakeup. */
		if (x->busy_us) {
			(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
			x->base.stats.busy_polls++;
		} else if (xsk_ring_prod__needs_wakeup(&x->fill)) {
			(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		}
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
		fr[got].peer = rcpi_xdp_peer_find(x, p + 6);
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

void rcpi_xdp_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
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

int rcpi_xdp_fd(const rcp_nic *nic)
{
	return xdp_ofc(nic)->fd;
}

int rcpi_xdp_pending(rcp_nic *nic)
{
	struct xdp_nic *x = xdp_of(nic);
	return __atomic_load_n(x->rx.producer, __ATOMIC_ACQUIRE) != x->rx.cached_cons;
}

int rcpi_xdp_arm(rcp_nic *nic)
{
	return rcpi_xdp_pending(nic) ? RCP_EAGAIN : 0;
}
