/*
 * tests/verbs_mock_rc.c — the HCA model's Reliable Connected queue pairs:
 * their state machine, and RDMA READ/WRITE executed at post time against
 * the registered regions of the QP at the other end.
 *
 * What it checks, as the InfiniBand spec and real HCAs do:
 *   - INIT needs the P_Key index, port and access flags; RTR the path
 *     (AV), path MTU, destination QPN, receive PSN, responder resources
 *     and RNR timer; RTS the send PSN, timeout, retry counts and
 *     initiator depth (the attribute masks rdma-core's providers check);
 *   - a WR reaches the QP its RTR named, on the HCA its path names, which
 *     must be in RTR or RTS, connected back to the sender's QP, and
 *     expecting the sender's PSN (a QP connected to the wrong peer, or
 *     never connected: RETRY_EXC_ERR, as the missing ACKs end in);
 *   - the remote key: a region registered on the responder's PD with that
 *     rkey, containing [remote_addr, +len), with REMOTE_WRITE or
 *     REMOTE_READ, on a QP whose INIT granted the same; else
 *     REM_ACCESS_ERR at the requester, and both QPs go to ERR;
 *   - the local buffer's lkey and range (LOC_PROT_ERR);
 *   - errors always complete (signalled or not) and leave the QP in ERR,
 *     where every later WR flushes.
 * PSNs advance by one per WR (real HCAs count packets: the same check,
 * coarser).  Not modelled: timing, retries, RNR (no SENDs on RC here),
 * atomics, more than one WR in flight mattering (each completes at post).
 */
#include <errno.h>
#include <string.h>

#include "tests/verbs_mock_int.h"

#define RC_INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RC_RTR_MASK                                                                                \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |            \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RC_RTS_MASK                                                                                \
	(IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |     \
	 IBV_QP_MAX_QP_RD_ATOMIC)

int mock_rc_modify(struct mock_qp *q, struct ibv_qp_attr *a, int mask)
{
	enum ibv_qp_state from = q->qp.state;

	switch (a->qp_state) {
	case IBV_QPS_RESET: break;
	case IBV_QPS_INIT:
		if ((from != IBV_QPS_RESET && from != IBV_QPS_INIT) ||
		    (mask & RC_INIT_MASK) != RC_INIT_MASK || a->port_num != 1)
			return EINVAL;
		q->access = a->qp_access_flags;
		break;
	case IBV_QPS_RTR:
		if (mock_flt.rc_down)
			return EINVAL; /* mock_faults.rc_down */
		if (from != IBV_QPS_INIT || (mask & RC_RTR_MASK) != RC_RTR_MASK ||
		    a->ah_attr.port_num != 1 || (mock_cfg.roce && !a->ah_attr.is_global) ||
		    a->path_mtu < IBV_MTU_256 || a->path_mtu > mock_cfg.active_mtu)
			return EINVAL;
		q->path = a->ah_attr;
		q->dest_qpn = a->dest_qp_num;
		q->rq_psn = a->rq_psn;
		break;
	case IBV_QPS_RTS:
		if (from != IBV_QPS_RTR || (mask & RC_RTS_MASK) != RC_RTS_MASK)
			return EINVAL;
		q->sq_psn = a->sq_psn;
		break;
	case IBV_QPS_ERR: q->qp.state = IBV_QPS_ERR; return 0;
	default: return EINVAL;
	}
	q->qp.state = a->qp_state;
	return 0;
}

/* Is Q's peer (its RTR path) the HCA of S? */
static int names(const struct mock_qp *q, const struct mock_qp *s)
{
	union ibv_gid g;

	if (q->dest_qpn != s->qp.qp_num)
		return 0;
	if (!mock_cfg.roce)
		return q->path.dlid == mock_dev_lid(s->dev);
	mock_dev_gid(s->dev, 1, &g);
	return q->path.is_global && !memcmp(q->path.grh.dgid.raw, g.raw, 16);
}

/* The responder's region for RKEY covering [ADDR, +LEN) with ACCESS. */
static int rkey_ok(const struct mock_qp *d, uint32_t rkey, uint64_t addr, uint32_t len, int access)
{
	if (!(d->access & access))
		return 0;
	for (int i = 0; i < MOCK_MAXMR; i++) {
		const struct ibv_mr *mr = mock_mrs[i];
		if (mr && mr->rkey == rkey && mr->pd == d->qp.pd &&
		    (mock_mr_access[i] & access) == access && addr >= (uintptr_t)mr->addr &&
		    addr <= (uintptr_t)mr->addr + mr->length &&
		    len <= (uintptr_t)mr->addr + mr->length - addr)
			return 1;
	}
	return 0;
}

static enum ibv_wc_status exec(struct mock_qp *q, const struct ibv_send_wr *wr)
{
	const struct ibv_sge *sg = wr->sg_list;
	int write = wr->opcode == IBV_WR_RDMA_WRITE;
	struct mock_qp *d;

	if ((!write && wr->opcode != IBV_WR_RDMA_READ) || wr->num_sge != 1)
		return IBV_WC_LOC_QP_OP_ERR;
	if (!mock_lkey_ok(sg->lkey, sg->addr, sg->length))
		return IBV_WC_LOC_PROT_ERR;
	if (mock_flt.rdma_err > 0) {
		mock_flt.rdma_err--;
		return IBV_WC_RETRY_EXC_ERR; /* mock_faults.rdma_err */
	}
	d = mock_find_qp(&q->path, q->dest_qpn);
	if (!d || d->qp.qp_type != IBV_QPT_RC ||
	    (d->qp.state != IBV_QPS_RTR && d->qp.state != IBV_QPS_RTS) || !names(d, q) ||
	    d->rq_psn != q->sq_psn)
		return IBV_WC_RETRY_EXC_ERR; /* nobody ACKs: the retries run out */
	if (!rkey_ok(d, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, sg->length,
	             write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ)) {
		mock_qp_error(d); /* the responder's QP fails too */
		return IBV_WC_REM_ACCESS_ERR;
	}
	if (write)
		memcpy((void *)(uintptr_t)wr->wr.rdma.remote_addr, (void *)(uintptr_t)sg->addr,
		       sg->length);
	else
		memcpy((void *)(uintptr_t)sg->addr, (void *)(uintptr_t)wr->wr.rdma.remote_addr,
		       sg->length);
	q->sq_psn = (q->sq_psn + 1) & 0xffffff;
	d->rq_psn = (d->rq_psn + 1) & 0xffffff;
	if (write)
		mock_st.rdma_writes++;
	else
		mock_st.rdma_reads++;
	mock_st.rdma_bytes += sg->length;
	return IBV_WC_SUCCESS;
}

void mock_rc_exec(struct mock_qp *q, const struct ibv_send_wr *wr)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof wc);
	wc.wr_id = wr->wr_id;
	wc.qp_num = q->qp.qp_num;
	wc.opcode = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
	wc.status = q->qp.state == IBV_QPS_ERR ? IBV_WC_WR_FLUSH_ERR : exec(q, wr);
	if (wc.status == IBV_WC_SUCCESS) {
		wc.byte_len = wr->sg_list[0].length;
		if (!(wr->send_flags & IBV_SEND_SIGNALED) && !q->sig_all)
			return;
	} else if (wc.status != IBV_WC_WR_FLUSH_ERR) {
		q->qp.state = IBV_QPS_ERR;
	}
	mock_cq_push(q->scq, &wc, NULL, 0);
}
