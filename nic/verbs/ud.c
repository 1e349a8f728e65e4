/*
 * nic/verbs/ud.c — frames on an Unreliable Datagram queue pair.
 *
 * One UD QP per endpoint, as eRPC and UCX's ud transport do: any peer is
 * reachable with an address handle and a QPN, nothing is set up per peer
 * on the wire, and RCP's own protocol supplies what UD lacks (order,
 * reliability).  A frame is one datagram of at most the port's active
 * path MTU (256 B to 4 KiB), with no header of ours: the completion names
 * the sender (source QPN + SLID, or the GRH's source GID on RoCE).
 *
 * ---- Memory ----------------------------------------------------------------
 *
 * One registered area of RQ + VB_SQ slots of `stride` bytes (stride =
 * 64 + MTU, rounded up to 64).  A receive slot is posted at offset 24:
 * the 40 bytes the HCA writes first (the GRH, or on InfiniBand without
 * one, bytes it leaves undefined) fill [24, 64) and the payload starts
 * 64-byte aligned at 64, where frames are handed up in place.
 *
 * ---- Receive ---------------------------------------------------------------
 *
 * recv() takes completions from a backlog of up to VB_BURST polled at once
 * (ibv_poll_cq in a batch: one pass over the CQ's cache lines); pending()
 * and arm() fill the same backlog, so looking never loses a completion.
 * Slots come back through release() onto a repost list, posted as one
 * chain of WRs when VB_REPOST have gathered or the QP holds fewer than
 * half its receives: one doorbell per batch instead of per frame.  A
 * datagram that finds no posted receive is dropped by the HCA, silently
 * (UD has no RNR retry): the window (rx_frames) is kept well below RQ.
 *
 * ---- Send ----------------------------------------------------------------
 *
 * WR number s uses send slot s % VB_SQ.  Frames up to the device's
 * max_inline_data are sent inline: the HCA's doorbell write carries the
 * bytes, gathered straight from the caller's iov (no copy of ours, no
 * lkey, the buffer free at return); larger ones are gathered into the
 * slot.  One WR in VB_SIGNAL asks for a completion (selective signalling:
 * a completion costs the HCA a DMA write and us a poll) and its wr_id
 * says how many WRs are done, since a QP completes in order.  VB_SQ is a
 * multiple of VB_SIGNAL, so a full send queue always holds signalled WRs
 * whose completions free it: at most VB_SIGNAL - 1 unsignalled WRs trail
 * the last signalled one.  With RCP_NIC_MORE WRs are chained and posted
 * with one ibv_post_send (one doorbell) at the end of the burst.
 *
 * ---- Errors ----------------------------------------------------------------
 *
 * A UD QP reports no remote failures (a lost datagram is just lost); an
 * error completion means a local fault (protection, length, a QP moved to
 * the error state), after which every queued WR flushes.  The endpoint
 * then restarts its QP: RESET (queues emptied), INIT, RTR, RTS, receives
 * posted again; frames in flight are lost, which RCP repairs.  Its QPN
 * and peers stay the same.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "nic/verbs/verbs_int.h"

static inline uint8_t *slot_ptr(const struct verbs_nic *v, uint32_t slot)
{
	return v->area + (size_t)slot * v->stride;
}

int rcpi_vb_qp_up(struct verbs_nic *v)
{
	struct ibv_qp_attr a;
	int rc;

	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = v->pkey_index;
	a.port_num = v->port;
	a.qkey = VB_QKEY;
	rc = v->api->modify_qp(v->qp, &a,
	                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (!rc) {
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_RTR;
		rc = v->api->modify_qp(v->qp, &a, IBV_QP_STATE);
	}
	if (!rc) {
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		rc = v->api->modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	if (rc) {
		rcpi_warn("verbs: %s: moving the UD QP to RTS: %s", v->dev, strerror(rc));
		return RCP_ESYS;
	}
	return 0;
}

/* Posts the repost list as chains of up to VB_BURST receives. */
static int rq_post(struct verbs_nic *v)
{
	struct ibv_recv_wr wr[VB_BURST], *bad;
	struct ibv_sge sge[VB_BURST];

	while (v->nrepost) {
		int n = v->nrepost < VB_BURST ? (int)v->nrepost : VB_BURST, rc;
		for (int i = 0; i < n; i++) {
			uint32_t s = v->repost[v->nrepost - 1 - (uint32_t)i];
			sge[i].addr = (uintptr_t)(slot_ptr(v, s) + VB_RXPAD);
			sge[i].length = VB_GRH + v->mtu;
			sge[i].lkey = v->mr->lkey;
			wr[i].wr_id = s;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		}
		bad = NULL;
		rc = ibv_post_recv(v->qp, wr, &bad);
		if (rc) {
			/* WRs before BAD went in; the rest stay on the list. */
			int done = bad ? (int)(bad - wr) : 0;
			v->nrepost -= (uint32_t)done;
			v->rq_posted += (uint32_t)done;
			rcpi_debug("verbs: %s: posting receives: %s", v->dev, strerror(rc));
			return RCP_ESYS;
		}
		v->nrepost -= (uint32_t)n;
		v->rq_posted += (uint32_t)n;
	}
	return 0;
}

int rcpi_vb_rq_fill(struct verbs_nic *v)
{
	v->nrepost = 0;
	for (uint32_t s = 0; s < v->rq; s++) {
		int held = 0;
		for (int i = v->released; i < v->nheld; i++)
			held |= v->held[i] == s;
		if (!held)
			v->repost[v->nrepost++] = s;
	}
	v->rq_posted = 0;
	return rq_post(v);
}

/* Batched: a chain once VB_REPOST slots wait, or at once when the QP runs
 * below half its receives. */
static inline void rq_maybe_post(struct verbs_nic *v)
{
	if (v->nrepost >= VB_REPOST || (v->nrepost && v->rq_posted < v->rq / 2))
		(void)rq_post(v);
}

static void cq_drain(struct verbs_nic *v, struct ibv_cq *cq)
{
	struct ibv_wc wc[VB_BURST];
	while (ibv_poll_cq(cq, VB_BURST, wc) > 0)
		;
}

int rcpi_vb_restart(struct verbs_nic *v)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RESET;
	if (v->api->modify_qp(v->qp, &a, IBV_QP_STATE)) {
		rcpi_warn("verbs: %s: resetting the UD QP failed", v->dev);
		return RCP_ESYS;
	}
	cq_drain(v, v->scq);
	cq_drain(v, v->rcq);
	v->nwc = v->wcpos = 0;
	v->sq_next -= (uint64_t)v->nchain;
	v->nchain = 0;
	v->sq_done = v->sq_next;
	rcpi_vb_ah_reap(v, 0);
	v->broken = 0;
	v->restarts++;
	rcpi_info("verbs: %s: UD QP restarted after an error completion", v->dev);
	if (rcpi_vb_qp_up(v))
		return RCP_ESYS;
	return rcpi_vb_rq_fill(v);
}

/* ---- send ----------------------------------------------------------------- */

/* Takes the send CQ's completions: how far the send queue is done. */
static int scq_reap(struct verbs_nic *v)
{
	struct ibv_wc wc[VB_BURST];
	int n;

	while ((n = ibv_poll_cq(v->scq, VB_BURST, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (RCPI_UNLIKELY(wc[i].status != IBV_WC_SUCCESS)) {
				v->err_cqe++;
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					rcpi_warn("verbs: %s: send completion: %s", v->dev,
					          ibv_wc_status_str(wc[i].status));
				v->broken = 1;
			}
			if (wc[i].wr_id + 1 > v->sq_done)
				v->sq_done = wc[i].wr_id + 1;
		}
	}
	if (n < 0)
		return RCP_ESYS;
	if (v->ndead)
		rcpi_vb_ah_reap(v, 0);
	return 0;
}

/* Posts the chain with one ibv_post_send. */
static int chain_post(struct verbs_nic *v)
{
	struct ibv_send_wr *bad = NULL;
	int rc;

	if (!v->nchain)
		return 0;
	rc = ibv_post_send(v->qp, v->chain, &bad);
	if (RCPI_UNLIKELY(rc)) {
		/* The WRs from BAD on were not posted: they are the tail, so
		 * their numbers are given back and the frames dropped (UD may
		 * lose them; RCP repairs). */
		int done = bad ? (int)(bad - v->chain) : 0;
		v->sq_next -= (uint64_t)(v->nchain - done);
		v->nchain = 0;
		v->base.stats.tx_eagain++;
		rcpi_debug("verbs: %s: ibv_post_send: %s", v->dev, strerror(rc));
		if (rc == ENOMEM)
			return RCP_EAGAIN;
		v->broken = 1;
		return RCP_ESYS;
	}
	v->nchain = 0;
	return 0;
}

/* Room for one more WR: 0 or RCP_EAGAIN. */
static int sq_room(struct verbs_nic *v)
{
	if (RCPI_LIKELY(v->sq_next - v->sq_done < VB_SQ && v->nchain < VB_BURST))
		return 0;
	if (v->nchain == VB_BURST || v->sq_next - v->sq_done >= VB_SQ) {
		int rc = chain_post(v);
		if (rc == RCP_ESYS)
			return rc;
	}
	if (scq_reap(v))
		return RCP_ESYS;
	if (v->sq_next - v->sq_done < VB_SQ)
		return 0;
	v->base.stats.tx_eagain++;
	return RCP_EAGAIN;
}

/* Appends one send WR to the chain; SIGNAL forces a completion. */
static void chain_add(struct verbs_nic *v, struct ibv_ah *ah, uint32_t qpn, const struct iovec *iov,
                      int iovcnt, size_t total, int signal)
{
	uint64_t seq = v->sq_next++;
	struct ibv_send_wr *w = &v->chain[v->nchain];
	struct ibv_sge *sg = v->sge[v->nchain];
	int nsge = 0, nz = 0;

	for (int i = 0; i < iovcnt; i++)
		nz += iov[i].iov_len != 0;
	memset(w, 0, sizeof *w);
	if (total <= v->inline_max && nz <= (int)v->max_sge) {
		/* Inline: the HCA copies from these addresses at post. */
		for (int i = 0; i < iovcnt; i++) {
			if (!iov[i].iov_len)
				continue;
			sg[nsge].addr = (uintptr_t)iov[i].iov_base;
			sg[nsge].length = (uint32_t)iov[i].iov_len;
			sg[nsge].lkey = 0;
			nsge++;
		}
		w->send_flags = IBV_SEND_INLINE;
	} else {
		uint8_t *p = slot_ptr(v, v->rq + (uint32_t)(seq % VB_SQ)), *q = p;
		for (int i = 0; i < iovcnt; i++) {
			if (!iov[i].iov_len)
				continue;
			memcpy(q, iov[i].iov_base, iov[i].iov_len);
			q += iov[i].iov_len;
		}
		sg[0].addr = (uintptr_t)p;
		sg[0].length = (uint32_t)total;
		sg[0].lkey = v->mr->lkey;
		nsge = total ? 1 : 0;
	}
	if (signal || seq % VB_SIGNAL == VB_SIGNAL - 1)
		w->send_flags |= IBV_SEND_SIGNALED;
	w->wr_id = seq;
	w->sg_list = sg;
	w->num_sge = nsge;
	w->opcode = IBV_WR_SEND;
	w->wr.ud.ah = ah;
	w->wr.ud.remote_qpn = qpn;
	w->wr.ud.remote_qkey = VB_QKEY;
	if (v->nchain)
		v->chain[v->nchain - 1].next = w;
	v->nchain++;
	v->base.stats.tx_frames++;
	v->base.stats.tx_bytes += total;
}

int rcpi_vb_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                 unsigned flags)
{
	struct verbs_nic *v = vb_of(nic);
	struct vb_peer *p;
	int rc;

	if (RCPI_UNLIKELY(peer >= v->npeers || !v->peers[peer].used))
		return RCP_EINVAL;
	if (RCPI_UNLIKELY(total > v->mtu))
		return RCP_EMSGSIZE;
	if (RCPI_UNLIKELY(v->broken) && rcpi_vb_restart(v))
		return RCP_ESYS;
	rc = sq_room(v);
	if (rc)
		return rc;
	p = &v->peers[peer];
	chain_add(v, p->ah, p->d.qpn, iov, iovcnt, total, 0);
	if ((flags & RCP_NIC_MORE) && v->nchain < VB_BURST)
		return 0;
	rc = chain_post(v);
	return rc == RCP_EAGAIN ? 0 : rc; /* EAGAIN: the frames were dropped, as UD may */
}

int rcpi_vb_flush(rcp_nic *nic)
{
	struct verbs_nic *v = vb_of(nic);
	int rc = chain_post(v);

	if (v->sq_next - v->sq_done >= VB_SQ / 2)
		(void)scq_reap(v);
	return rc == RCP_EAGAIN ? 0 : rc;
}

/* One control datagram (rc.c) to PEER: SEND_WITH_IMM, VB_CTL_LEN bytes
 * at B, posted at once.  Returns 0, RCP_EAGAIN or RCP_ESYS. */
int rcpi_vb_send_ctl(struct verbs_nic *v, int peer, const uint8_t *b)
{
	struct iovec iov = {(void *)(uintptr_t)b, VB_CTL_LEN};
	struct vb_peer *p = &v->peers[peer];
	int rc = sq_room(v);

	if (rc)
		return rc;
	chain_add(v, p->ah, p->d.qpn, &iov, 1, VB_CTL_LEN, 0);
	v->chain[v->nchain - 1].opcode = IBV_WR_SEND_WITH_IMM;
	v->chain[v->nchain - 1].imm_data = htonl(VB_CTL_IMM);
	v->base.stats.tx_frames--; /* not one of the caller's frames */
	v->base.stats.tx_bytes -= VB_CTL_LEN;
	v->rs.ctl_sent++;
	return chain_post(v);
}

int rcpi_vb_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen)
{
	struct verbs_nic *v = vb_of(nic);
	struct iovec iov = {(void *)(uintptr_t)frame, flen};
	struct vb_dest d;
	struct ibv_ah *ah;
	int rc = rcpi_vb_blob_dest(blob, len, &d);

	if (rc)
		return rc;
	if (d.has_gid != v->roce)
		return RCP_EADDR;
	if (flen > v->mtu)
		return RCP_EMSGSIZE;
	rc = sq_room(v);
	if (rc)
		return rc;
	ah = rcpi_vb_ah(v, &d);
	if (!ah)
		return RCP_EPEER;
	/* Signalled, so its AH retires soon after (addr.c). */
	chain_add(v, ah, d.qpn, &iov, 1, flen, 1);
	rc = chain_post(v);
	if (rcpi_vb_ah_retire(v, ah)) {
		rcpi_vb_ah_reap(v, 0);
		return RCP_ENOMEM; /* not reached in practice: the list grows by 8 */
	}
	return rc == RCP_EAGAIN ? 0 : rc;
}

/* ---- receive ----------------------------------------------------------- */

/* The sender's GID from the 40 bytes before the payload: an IPv6 GRH, or
 * (RoCE v2 over IPv4) an IPv4 header in the last 20, as a mapped GID. */
static void grh_sgid(const uint8_t *grh, uint8_t *gid)
{
	if ((grh[0] >> 4) == 6) {
		memcpy(gid, grh + 8, 16);
	} else {
		memset(gid, 0, 10);
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, grh + 20 + 12, 4);
	}
}

static void give_back(struct verbs_nic *v, uint32_t slot)
{
	v->repost[v->nrepost++] = slot;
}

/* The peer a completion comes from; its address into D. */
static int src_peer(struct verbs_nic *v, const struct ibv_wc *wc, const uint8_t *grh,
                    struct vb_dest *d)
{
	memset(d, 0, sizeof *d);
	d->qpn = wc->src_qp;
	if (v->roce) {
		d->has_gid = 1;
		grh_sgid(grh, d->gid);
		return rcpi_vb_peer_find(v, d->qpn, 0, d->gid);
	}
	d->lid = wc->slid;
	return rcpi_vb_peer_find(v, d->qpn, d->lid, NULL);
}

/* Takes the control datagrams (SEND_WITH_IMM, rc.c) out of the N
 * completions at WC, from I0 on, onto the control queue, their slots
 * straight back; returns how many completions are left, in order.  Out of
 * line: rare (take_ctl below is the test every completion pays). */
static __attribute__((noinline)) int take_ctl_slow(struct verbs_nic *v, struct ibv_wc *wc, int n,
                                                   int i0)
{
	int j = i0;

	for (int i = i0; i < n; i++) {
		uint32_t slot = (uint32_t)wc[i].wr_id;
		struct vb_dest d;
		int peer;

		if (RCPI_LIKELY(wc[i].status != IBV_WC_SUCCESS ||
		                !(wc[i].wc_flags & IBV_WC_WITH_IMM))) {
			if (j != i)
				wc[j] = wc[i];
			j++;
			continue;
		}
		v->rq_posted--;
		if (slot >= v->rq)
			continue;
		peer = src_peer(v, &wc[i], slot_ptr(v, slot) + VB_RXPAD, &d);
		if (ntohl(wc[i].imm_data) != VB_CTL_IMM || wc[i].byte_len != VB_GRH + VB_CTL_LEN ||
		    peer < 0 || v->nctl == VB_CTLQ) {
			/* From no peer of ours: connections are only for peers
			 * added (rc.c), which keeps the REQ for when it is. */
			v->rs.ctl_dropped++;
			if (peer < 0 && ntohl(wc[i].imm_data) == VB_CTL_IMM &&
			    wc[i].byte_len == VB_GRH + VB_CTL_LEN)
				rcpi_vb_rc_park(v, &d, slot_ptr(v, slot) + VB_RXPAD + VB_GRH);
		} else {
			v->ctl[v->nctl].peer = peer;
			memcpy(v->ctl[v->nctl].b, slot_ptr(v, slot) + VB_RXPAD + VB_GRH,
			       VB_CTL_LEN);
			v->nctl++;
		}
		give_back(v, slot);
	}
	if (j < n)
		(void)rq_post(v); /* rare: keep the RQ full rather than batch */
	return j;
}

/* RCP's frames are plain SENDs: one flag per completion tells.  (An error
 * completion's flags are undefined: the slow path looks at its status.) */
static inline int take_ctl(struct verbs_nic *v, struct ibv_wc *wc, int n)
{
	for (int i = 0; i < n; i++)
		if (RCPI_UNLIKELY(wc[i].wc_flags & IBV_WC_WITH_IMM))
			return take_ctl_slow(v, wc, n, i);
	return n;
}

static inline int backlog_fill(struct verbs_nic *v)
{
	int n;

	if (v->wcpos < v->nwc)
		return v->nwc - v->wcpos;
	n = ibv_poll_cq(v->rcq, VB_BURST, v->wc);
	v->wcpos = 0;
	v->nwc = n > 0 ? take_ctl(v, v->wc, n) : 0;
	return n < 0 ? n : v->nwc;
}

/* Polls the receive CQ while a caller waits for a control datagram (rc.c
 * connecting): frames are kept in the backlog, behind those already
 * there (it holds RQ completions: one per posted receive at most). */
int rcpi_vb_pump(struct verbs_nic *v)
{
	int n;

	if (v->wcpos == v->nwc) {
		v->wcpos = v->nwc = 0;
	} else if (v->wcpos) {
		memmove(v->wc, v->wc + v->wcpos, (size_t)(v->nwc - v->wcpos) * sizeof *v->wc);
		v->nwc -= v->wcpos;
		v->wcpos = 0;
	}
	if ((uint32_t)v->nwc >= v->rq)
		return 0;
	n = (int)(v->rq - (uint32_t)v->nwc) < VB_BURST ? (int)(v->rq - (uint32_t)v->nwc) : VB_BURST;
	n = ibv_poll_cq(v->rcq, n, v->wc + v->nwc);
	if (n < 0)
		return RCP_ESYS;
	v->nwc += take_ctl(v, v->wc + v->nwc, n);
	rq_maybe_post(v);
	return n;
}

int rcpi_vb_pending(rcp_nic *nic)
{
	struct verbs_nic *v = vb_of(nic);
	return backlog_fill(v) != 0 || v->nctl;
}

int rcpi_vb_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max)
{
	struct verbs_nic *v = vb_of(nic);
	int got = 0, n;

	/* Frames the caller did not release go back now. */
	for (int i = v->released; i < v->nheld; i++)
		give_back(v, v->held[i]);
	v->nheld = v->released = 0;
	if (RCPI_UNLIKELY(v->broken) && rcpi_vb_restart(v))
		return RCP_ESYS;
	rq_maybe_post(v);

	n = backlog_fill(v);
	if (n <= 0)
		return n < 0 ? RCP_ESYS : 0;
	if (max > VB_BURST)
		max = VB_BURST;
	while (got < max && v->wcpos < v->nwc) {
		const struct ibv_wc *wc = &v->wc[v->wcpos++];
		uint32_t slot = (uint32_t)wc->wr_id;
		const uint8_t *grh = slot_ptr(v, slot) + VB_RXPAD;
		struct vb_dest d;

		v->rq_posted--;
		if (RCPI_UNLIKELY(wc->status != IBV_WC_SUCCESS)) {
			/* Flushed by a QP in error, or a local fault: the slot
			 * goes back; the QP restarts at the next call. */
			v->err_cqe++;
			if (wc->status != IBV_WC_WR_FLUSH_ERR) {
				v->base.stats.rx_dropped++;
				rcpi_debug("verbs: %s: receive completion: %s", v->dev,
				           ibv_wc_status_str(wc->status));
			}
			v->broken = 1;
			give_back(v, slot);
			continue;
		}
		if (RCPI_UNLIKELY(wc->opcode != IBV_WC_RECV || wc->byte_len < VB_GRH ||
		                  wc->byte_len - VB_GRH > v->mtu || slot >= v->rq)) {
			v->base.stats.rx_dropped++;
			if (slot < v->rq)
				give_back(v, slot);
			continue;
		}
		fr[got].peer = src_peer(v, wc, grh, &d);
		rcpi_vb_dest_blob(&d, v->srcblob[got]);
		fr[got].data = grh + VB_GRH;
		fr[got].len = wc->byte_len - VB_GRH;
		fr[got].src = v->srcblob[got];
		fr[got].srclen = VB_BLOB;
		fr[got].reserved = 0;
		fr[got].token = slot;
		v->held[got] = slot;
		v->base.stats.rx_frames++;
		v->base.stats.rx_bytes += fr[got].len;
		got++;
	}
	v->nheld = got;
	if (RCPI_UNLIKELY(v->broken)) {
		/* At once: the frames in hand stay (rq_fill skips them). */
		if (rcpi_vb_restart(v))
			return got ? got : RCP_ESYS;
		return got;
	}
	rq_maybe_post(v);
	return got;
}

void rcpi_vb_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct verbs_nic *v = vb_of(nic);

	(void)frames; /* the burst is ours to know: held[] */
	if (n > v->nheld)
		n = v->nheld;
	for (int i = v->released; i < n; i++)
		give_back(v, v->held[i]);
	if (n > v->released)
		v->released = n;
	rq_maybe_post(v);
}
