/*
 * nic/verbs/rc.c — one-sided RMA on Reliable Connected queue pairs:
 * rcp_nic_get/put as RDMA READ/WRITE, the RC QPs they need per peer, and
 * the connection handshake that makes them, carried on the UD QP.
 *
 * ---- Connections -----------------------------------------------------------
 *
 * RDMA READ and WRITE exist only on connected QPs: each end's QP knows the
 * other's QPN, PSN and path.  Two QPs per pair of peers, one made by each
 * side: a peer's `out` QP carries our get/put towards it and grants no
 * remote access; its `in` QP is made when the peer asks and grants
 * REMOTE_READ|REMOTE_WRITE, so what the peer may touch is what our
 * regions' keys allow and nothing arrives on a QP we use ourselves.  One
 * QP per pair (UCX's rc transport) saves a QP but needs a tie-break when
 * both sides connect at once; two need none.
 *
 * The handshake is two control datagrams on the UD QP, sent as
 * SEND_WITH_IMM (immediate VB_CTL_IMM) so that ud.c tells them from RCP's
 * frames, which are plain SENDs, by one completion flag:
 *   REQ  our out QPN and PSN                     -> the peer makes its in QP,
 *                                                   RTR to us, RTS, and
 *   REP  its in QPN and PSN, and the REQ's QPN  <-  answers; our out QP goes
 *                                                   RTR to it, then RTS.
 * Layout (VB_CTL_LEN = 16 bytes, big endian): 0 type (1 REQ, 2 REP),
 * 1 version (1), 2 zero (2), 4 QPN, 8 PSN, 12 QPN answered (REP) or 0.
 *
 * When.  On demand (session 21): the out QP is made, and its REQ sent,
 * by the first get/put to the peer, not when the peer is added; a peer
 * that only exchanges datagrams never costs an RC QP (an HCA holds a
 * context per QP, and a process of N peers would otherwise hold 2N).
 * Until session 20 the QP was made at peer add so that it would be up by
 * the first transfer; now that first transfer finds it not up and falls
 * back (below), and the handshake completes in the background, in
 * rcp_nic_recv/pending/arm, while the fallback's frames go by.  A REQ
 * from a sender not yet added as a peer is dropped (the source QPN and
 * LID are the HCA's, but only peers get QPs); the sender resends it, at
 * once when it gets the peer's own REQ (then the peer knows it), and on a
 * timer (1 ms doubling to 64 ms, checked in recv while any connection is
 * waiting) for lost datagrams; after REQ_TRIES (~1 s) it stops, and a
 * transfer to that peer starts a new connection.  The dropped REQ is also
 * kept (the last VB_PARKED senders', rcpi_vb_rc_park) and answered when
 * its sender is added: a server adds a client when RCP's handshake
 * accepts its channel, after the client's first transfer sent the REQ, and
 * never sends one of its own that would bring it again.
 *
 * A get/put that finds the out QP not up takes what the UD QP holds (a
 * REP may be there) and, if it is still not up, answers RCP_ENOTSUP at
 * once: "not this way now", nothing moved.  It does not wait.  Until
 * session 18 it polled for up to 2 s when the peer knew us; but the REP
 * it waits for needs the peer's CPU, and in one thread driving both ends
 * (tests, any pair of endpoints progressed in turn) the peer is the
 * caller itself: the wait ran out whenever the peer had not yet taken our
 * REQ, and RCP's first large message failed with RCP_EPEER
 * (tests/test_verbs_rma t_bulk, 5 of 8 runs).  Nor does it queue the
 * transfer until the QP is up: nic.h's get/put are synchronous, and
 * holding a transfer back would move the wait into the caller.
 * Advertising RMA to a peer only once its QP is up was the other way; but
 * what RCP offers is a key to its own memory, which the peer uses through
 * the peer's QP: the side that can tell whether a transfer can start now
 * is the one about to start it, here.  So the callers fall back: RCP
 * moves that message by frames (rcp/fallback.c, FALLBACK), bulk/ by
 * messages; the handshake meanwhile completes in rcp_nic_recv, and later
 * transfers find the QP up.  A connection that never comes up costs each
 * transfer one look, and RCP stops asking on that channel after 8
 * fallbacks.
 *
 * A duplicate REQ (our REP lost) gets the same REP again; a REQ with a new
 * QPN (the peer's out QP failed and was remade) replaces the in QP.  A REP
 * answering no REQ of ours, or anything malformed, is counted
 * (ctl_dropped) and dropped.  On RoCE the source GID comes from an IP
 * header: anyone on the Ethernet can forge it, as for any IP traffic, and
 * the job key (nic/auth.c) covers RCP's frames, not these; a forged REQ
 * gets a QP whose access is bounded by our keys all the same.
 *
 * ---- Transfers ---------------------------------------------------------------
 *
 * A get/put checks the key from the wire first (mr.c, rcpi_vb_key_parse;
 * then offset + length inside the region, the access bit): a hostile key
 * is refused with RCP_EACCES and counted (rejected), no work request
 * posted.  The local buffer's lkey comes from mr.c's cache.  The transfer
 * is one signalled RDMA READ or WRITE per GiB, and the call polls the RC
 * CQ for its completion: nic.h's get/put are synchronous (rcp/endpoint.c
 * performs each RMA event at once and gives the result back).  A
 * completion always comes: an RC QP retries (timeout 14: ~67 ms, 7
 * times) and then completes with an error.  Errors: a remote access error
 * (a revoked key, bounds or access the HCA refused) is RCP_EACCES and
 * counted (remote_err), a peer that does not answer RCP_EPEER, anything
 * else RCP_ESYS; the QP is then in the error state, so it is destroyed and
 * a new one's REQ goes at once, for the next transfer.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "nic/verbs/verbs_int.h"

enum { CTL_REQ = 1, CTL_REP = 2, CTL_VERSION = 1 };

#define RC_CQE       64
#define RC_SQ        16
#define RC_CHUNK     (1ull << 30)
#define REQ_FIRST_NS 1000000ull
#define REQ_TRIES    20 /* 1+2+...+32 ms, then 64 ms apart: ~1 s */

static void ctl_pack(uint8_t *b, int type, uint32_t qpn, uint32_t psn, uint32_t echo)
{
	uint32_t w[3] = {htonl(qpn), htonl(psn), htonl(echo)};

	b[0] = (uint8_t)type;
	b[1] = CTL_VERSION;
	b[2] = b[3] = 0;
	memcpy(b + 4, w, 12);
}

static void rc_destroy(struct verbs_nic *v, struct vb_rc *rc)
{
	if (!rc)
		return;
	if (rc->qp)
		v->api->destroy_qp(rc->qp);
	free(rc);
}

/* A new RC QP in INIT; REMOTE: it grants the peer's RDMA READ/WRITE. */
static struct vb_rc *rc_new(struct verbs_nic *v, int remote)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	struct vb_rc *rc;

	if (!v->rc_cq)
		v->rc_cq = v->api->create_cq(v->ctx, RC_CQE, v, NULL, 0);
	rc = v->rc_cq ? calloc(1, sizeof *rc) : NULL;
	if (!rc)
		return NULL;
	memset(&qa, 0, sizeof qa);
	qa.send_cq = qa.recv_cq = v->rc_cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = RC_SQ;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	rc->qp = v->api->create_qp(v->pd, &qa);
	if (!rc->qp)
		goto fail;
	/* A PSN per QP, as rc_pingpong draws one: a late packet of an old
	 * connection does not fit the new one's sequence. */
	rc->psn = (rc->qp->qp_num * 0x9e3779b1u + (uint32_t)++v->rma_seq) & 0xffffff;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = v->pkey_index;
	a.port_num = v->port;
	a.qp_access_flags = remote ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE : 0;
	if (v->api->modify_qp(rc->qp, &a,
	                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		goto fail;
	v->rs.rc_made++;
	return rc;
fail:
	rcpi_warn("verbs: %s: making an RC queue pair failed", v->dev);
	rc_destroy(v, rc);
	return NULL;
}

/* RTR towards the peer's QP RQPN starting at RPSN, then RTS. */
static int rc_connect(struct verbs_nic *v, struct vb_rc *rc, const struct vb_dest *d, uint32_t rqpn,
                      uint32_t rpsn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = v->path_mtu;
	a.dest_qp_num = rqpn;
	a.rq_psn = rpsn;
	a.max_dest_rd_atomic = v->rd_atom;
	a.min_rnr_timer = 12;
	rcpi_vb_ah_attr(v, d, &a.ah_attr);
	if (v->api->modify_qp(rc->qp, &a,
	                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return RCP_ESYS;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = rc->psn;
	a.max_rd_atomic = v->rd_atom;
	if (v->api->modify_qp(rc->qp, &a,
	                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return RCP_ESYS;
	rc->rqpn = rqpn;
	rc->up = 1;
	return 0;
}

static void send_req(struct verbs_nic *v, int peer)
{
	struct vb_rc *out = v->peers[peer].out;
	uint8_t b[VB_CTL_LEN];
	unsigned shift = out->tries < 6 ? out->tries : 6;

	ctl_pack(b, CTL_REQ, out->qp->qp_num, out->psn, 0);
	(void)rcpi_vb_send_ctl(v, peer, b); /* lost or refused: the timer resends */
	out->tries++;
	out->next_ns = rcpi_now_ns() + (REQ_FIRST_NS << shift);
}

int rcpi_vb_rc_start(struct verbs_nic *v, int peer)
{
	struct vb_peer *p = &v->peers[peer];

	if (p->out)
		return 0;
	p->out = rc_new(v, 0);
	if (!p->out)
		return RCP_ESYS;
	v->rc_waiting++;
	send_req(v, peer);
	return 0;
}

void rcpi_vb_rc_drop(struct verbs_nic *v, int peer)
{
	struct vb_peer *p = &v->peers[peer];

	if (p->out && !p->out->up)
		v->rc_waiting--;
	rc_destroy(v, p->out);
	rc_destroy(v, p->in);
	p->out = p->in = NULL;
}

static void on_req(struct verbs_nic *v, int peer, uint32_t qpn, uint32_t psn)
{
	struct vb_peer *p = &v->peers[peer];
	uint8_t b[VB_CTL_LEN];

	if (!p->in || !p->in->up || p->in->rqpn != qpn) {
		rc_destroy(v, p->in);
		p->in = rc_new(v, 1);
		if (!p->in)
			return;
		if (rc_connect(v, p->in, &p->d, qpn, psn)) {
			rcpi_warn("verbs: %s: connecting an RC QP to QPN 0x%x failed", v->dev, qpn);
			rc_destroy(v, p->in);
			p->in = NULL;
			return;
		}
		v->rs.accepts++;
	}
	ctl_pack(b, CTL_REP, p->in->qp->qp_num, p->in->psn, qpn);
	(void)rcpi_vb_send_ctl(v, peer, b); /* lost: the peer's REQ comes again */
	if (p->out && !p->out->up)
		send_req(v, peer); /* the peer knows us now: ours need not wait */
}

static void on_rep(struct verbs_nic *v, int peer, uint32_t qpn, uint32_t psn, uint32_t echo)
{
	struct vb_rc *out = v->peers[peer].out;

	if (out && out->up && out->rqpn == qpn)
		return; /* a duplicate: our REQ went twice */
	if (!out || out->up || echo != out->qp->qp_num) {
		v->rs.ctl_dropped++;
		return;
	}
	if (rc_connect(v, out, &v->peers[peer].d, qpn, psn)) {
		rcpi_warn("verbs: %s: connecting an RC QP to QPN 0x%x failed", v->dev, qpn);
		return; /* not up: a transfer finds it so and fails */
	}
	v->rc_waiting--;
	v->rs.connects++;
}

void rcpi_vb_rc_ctl(struct verbs_nic *v)
{
	for (int i = 0; i < v->nctl; i++) {
		const uint8_t *b = v->ctl[i].b;
		int peer = v->ctl[i].peer;
		uint32_t w[3];

		memcpy(w, b + 4, 12);
		w[0] = ntohl(w[0]);
		w[1] = ntohl(w[1]);
		w[2] = ntohl(w[2]);
		if (b[1] != CTL_VERSION || b[2] || b[3] || w[0] < 2 || w[0] > 0xffffff ||
		    w[1] > 0xffffff || peer >= v->npeers || !v->peers[peer].used) {
			v->rs.ctl_dropped++;
			continue;
		}
		if (b[0] == CTL_REQ && !w[2])
			on_req(v, peer, w[0], w[1]);
		else if (b[0] == CTL_REP)
			on_rep(v, peer, w[0], w[1], w[2]);
		else
			v->rs.ctl_dropped++;
	}
	v->nctl = 0;
}

/* A REQ from SRC, no peer of ours (yet): kept, the latest per sender, in
 * VB_PARKED slots, the oldest replaced.  With connections made on demand
 * the side that accepts a channel may add its peer only after that peer's
 * first REQ came, and may never send a REQ of its own to bring it again:
 * without this the REQ's timer (1 ms and up) would be the only way. */
void rcpi_vb_rc_park(struct verbs_nic *v, const struct vb_dest *src, const uint8_t *b)
{
	int i;

	if (b[0] != CTL_REQ)
		return;
	for (i = 0; i < VB_PARKED; i++)
		if (v->park[i].used && v->park[i].src.qpn == src->qpn &&
		    v->park[i].src.lid == src->lid && !memcmp(v->park[i].src.gid, src->gid, 16))
			break;
	if (i == VB_PARKED) {
		i = v->park_next;
		v->park_next = (v->park_next + 1) % VB_PARKED;
	}
	v->park[i].src = *src;
	v->park[i].used = 1;
	memcpy(v->park[i].b, b, VB_CTL_LEN);
}

/* PEER just added: the REQ it sent before, if one was kept, is answered. */
static int added(rcp_nic *nic, int rc, const int *peer)
{
	struct verbs_nic *v = vb_of(nic);
	const struct vb_dest *d;

	if (rc)
		return rc;
	d = &v->peers[*peer].d;
	for (int i = 0; i < VB_PARKED; i++) {
		struct vb_parked *k = &v->park[i];
		if (!k->used || k->src.qpn != d->qpn || k->src.has_gid != d->has_gid ||
		    (d->has_gid ? memcmp(k->src.gid, d->gid, 16) : k->src.lid != d->lid))
			continue;
		k->used = 0;
		if (v->nctl == VB_CTLQ)
			continue; /* the sender's timer brings it again */
		v->ctl[v->nctl].peer = *peer;
		memcpy(v->ctl[v->nctl].b, k->b, VB_CTL_LEN);
		v->nctl++;
		v->rs.parked++;
		rcpi_vb_rc_ctl(v);
	}
	return 0;
}

int rcpi_vb_rc_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	return added(nic, rcpi_vb_peer_add(nic, blob, len, peer), peer);
}

int rcpi_vb_rc_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	return added(nic, rcpi_vb_peer_add_str(nic, addr, peer), peer);
}

void rcpi_vb_rc_timers(struct verbs_nic *v)
{
	uint64_t now = rcpi_now_ns();

	for (int i = 0; i < v->npeers; i++) {
		struct vb_rc *out = v->peers[i].out;
		if (!v->peers[i].used || !out || out->up || now < out->next_ns)
			continue;
		if (out->tries >= REQ_TRIES) {
			/* No answer for ~1 s: stop asking (and reading the clock
			 * in every receive); a transfer to the peer starts over. */
			rc_destroy(v, out);
			v->peers[i].out = NULL;
			v->rc_waiting--;
			v->rs.gave_up++;
			continue;
		}
		send_req(v, i);
	}
}

/* The out QP to PEER up: made if need be, never waited for (module
 * comment, "When"): what the UD QP already holds is taken once, and if the
 * QP is still not up, RCP_ENOTSUP at once. */
static int out_up(struct verbs_nic *v, int peer)
{
	int rc;

	if (!v->peers[peer].out && (rc = rcpi_vb_rc_start(v, peer)))
		return rc;
	if (!v->peers[peer].out->up) {
		if (rcpi_vb_pump(v) < 0)
			return RCP_ESYS;
		if (v->nctl)
			rcpi_vb_rc_ctl(v);
		rcpi_vb_rc_timers(v);
	}
	if (!v->peers[peer].out || !v->peers[peer].out->up) {
		v->rs.not_yet++;
		return RCP_ENOTSUP;
	}
	return 0;
}

/* Waits for the one signalled WR outstanding on the RC CQ. */
static int rc_wait(struct verbs_nic *v, uint64_t id)
{
	struct ibv_wc wc;
	int n;

	for (;;) {
		n = ibv_poll_cq(v->rc_cq, 1, &wc);
		if (n < 0)
			return RCP_ESYS;
		if (n && wc.wr_id == id)
			break;
	}
	switch (wc.status) {
	case IBV_WC_SUCCESS: return 0;
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR: v->rs.remote_err++; return RCP_EACCES;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR: return RCP_EPEER;
	default:
		rcpi_warn("verbs: %s: RDMA completion: %s", v->dev, ibv_wc_status_str(wc.status));
		return RCP_ESYS;
	}
}

static int rma(struct verbs_nic *v, int peer, void *local, size_t len, const void *rkey,
               size_t rkeylen, uint64_t off, int write)
{
	struct vb_key k;
	struct ibv_mr *mr;
	struct vb_peer *p;
	int temp = 0, rc;

	if (peer >= v->npeers || !v->peers[peer].used || v->peers[peer].d.mc)
		return RCP_EINVAL;
	if (rcpi_vb_key_parse(rkey, rkeylen, &k) || len > k.len || off > k.len - len ||
	    !(k.access & (write ? RCP_NIC_ACCESS_WRITE : RCP_NIC_ACCESS_READ))) {
		v->rs.rejected++;
		return RCP_EACCES;
	}
	if (!len)
		return 0;
	rc = out_up(v, peer);
	if (rc)
		return rc;
	mr = rcpi_vb_reg_find(v, local, len, &temp);
	if (!mr)
		return RCP_ENOMEM;
	p = &v->peers[peer];
	for (size_t done = 0; done < len && !rc;) {
		size_t n = len - done < RC_CHUNK ? len - done : RC_CHUNK;
		struct ibv_sge sge = {(uintptr_t)local + done, (uint32_t)n, mr->lkey};
		struct ibv_send_wr wr, *bad = NULL;

		memset(&wr, 0, sizeof wr);
		wr.wr_id = ++v->rma_seq;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = k.addr + off + done;
		wr.wr.rdma.rkey = k.rkey;
		rc = ibv_post_send(p->out->qp, &wr, &bad) ? RCP_ESYS : rc_wait(v, wr.wr_id);
		done += n;
	}
	if (temp)
		v->api->dereg_mr(mr);
	if (rc) {
		/* The QP is in the error state: the next transfer connects anew. */
		rc_destroy(v, p->out);
		p->out = NULL;
		(void)rcpi_vb_rc_start(v, peer);
		return rc;
	}
	if (write)
		v->rs.puts++;
	else
		v->rs.gets++;
	v->rs.rma_bytes += len;
	return 0;
}

int rcpi_vb_get(rcp_nic *nic, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                uint64_t offset)
{
	return rma(vb_of(nic), peer, local, len, rkey, rkeylen, offset, 0);
}

int rcpi_vb_put(rcp_nic *nic, int peer, const void *local, size_t len, const void *rkey,
                size_t rkeylen, uint64_t offset)
{
	return rma(vb_of(nic), peer, (void *)(uintptr_t)local, len, rkey, rkeylen, offset, 1);
}

void rcpi_vb_rc_free(struct verbs_nic *v)
{
	for (int i = 0; v->peers && i < v->npeers; i++)
		rcpi_vb_rc_drop(v, i);
	if (v->rc_cq)
		v->api->destroy_cq(v->rc_cq);
	v->rc_cq = NULL;
}

int rcpi_vb_rma_counters(const rcp_nic *nic, struct rcpi_vb_rma_stats *st)
{
	while (nic && nic->ops != &rcpi_nic_verbs_ops)
		nic = ((const struct rcpi_nic_wrap *)nic)->inner; /* faults, auth */
	if (!nic)
		return RCP_EINVAL;
	*st = vb_ofc(nic)->rs;
	return 0;
}
