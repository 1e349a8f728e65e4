/*
 * tests/verbs_mock.c — a model of InfiniBand HCAs, in process, for tests.
 *
 * How it plugs in.  libibverbs' data path (ibv_post_send, ibv_post_recv,
 * ibv_poll_cq, ibv_req_notify_cq) is static inlines calling through
 * ctx->ops: the contexts this model makes carry its own functions there,
 * so the backend's data path runs unchanged, compiled against the real
 * headers and linked with the real library.  The control path goes
 * through nic/verbs/api.h's table, which mock_install() points here
 * (UCX's contrib/ibmock and Firedancer's fd_ibverbs_mock take the same
 * two routes).
 *
 * What it models, as the InfiniBand spec and real HCAs behave:
 *   - UD QPs with the state machine RESET -> INIT -> RTR -> RTS (and ERR);
 *     INIT requires the P_Key index, port and Q_Key (IBV_QP_* mask);
 *     sends are accepted in RTS only;
 *   - a send queue of max_send_wr slots, freed only when a signalled
 *     completion at or after the WR is polled (selective signalling:
 *     a backend that never signals fills it and gets ENOMEM);
 *   - a receive queue of max_recv_wr; a datagram finding it empty is
 *     dropped silently (UD has no RNR retry), as is one to an unknown
 *     QPN, LID, GID or Q_Key;
 *   - the 40 bytes before the payload: on InfiniBand (no GRH) filled
 *     with 0xA5 garbage, on RoCE v2 an IPv4 header in the last 20 bytes;
 *   - inline sends up to max_inline (EINVAL past it), lkeys checked
 *     against registered regions (a bad one: a LOC_PROT_ERR completion
 *     and the QP in ERR), receive buffers shorter than GRH + payload
 *     (LOC_LEN_ERR, QP in ERR), everything posted to a QP in ERR
 *     completing with WR_FLUSH_ERR;
 *   - CQs of fixed depth: a completion finding its CQ full is counted
 *     (cq_overflow; on hardware the CQ goes to error, an async event);
 *   - completion channels as pipes: req_notify_cq arms once, the next
 *     completion writes a byte, ibv_get_cq_event reads it.
 *   - memory regions with their access flags, lkeys and distinct rkeys;
 *     RC queue pairs and RDMA READ/WRITE are tests/verbs_mock_rc.c's;
 *   - SEND_WITH_IMM: the immediate and IBV_WC_WITH_IMM in the completion.
 *   - multicast: an SA (join/leave by MGID, MLIDs from 0xC001), QPs
 *     attached to groups, a send to QPN 0xFFFFFF reaching every attached
 *     QP of the MLID and MGID, the sender's HCA included
 *     (tests/verbs_mock_mc.c).
 *   - between processes: tests/verbs_mock_wire.c (UD sends only).
 * Not modelled: timing, several ports, the async event fd.
 * Single-threaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "tests/verbs_mock_int.h"

struct mock_config mock_cfg;
struct mock_faults mock_flt;
struct mock_stats mock_st;
static struct mock_dev devs[MOCK_MAXDEV];
static struct ibv_device *devlist[MOCK_MAXDEV + 1];
struct mock_qp *mock_qps[MOCK_MAXQP];
struct ibv_mr *mock_mrs[MOCK_MAXMR];
int mock_mr_access[MOCK_MAXMR];
static int live;
static uint64_t rng;
const struct mock_wire_hooks *mock_wire;

/* A completion channel: the pipe's read end RFD, its write end in
 * ch.refcnt's place (the field is the library's own bookkeeping, unused
 * here); ch.fd is RFD, or with the wire an epoll set of RFD and the wire's
 * socket (a datagram arriving wakes a sleeper). */
struct mock_ch {
	struct ibv_comp_channel ch; /* first */
	int rfd;
};

static double mock_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / (double)(1ull << 53);
}

uint16_t mock_dev_lid(const struct mock_dev *d)
{
	return mock_cfg.roce ? 0 : (uint16_t)(d->index + 1);
}

/* ::ffff:10.0.0.(index+1), the RoCE v2 GID at index 1 (index 0: link-local, v1). */
void mock_dev_gid(const struct mock_dev *d, int index, union ibv_gid *g)
{
	memset(g, 0, sizeof *g);
	if (index == 0 || !mock_cfg.roce) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		g->raw[15] = (uint8_t)(d->index + 1);
		return;
	}
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 10;
	g->raw[15] = (uint8_t)(d->index + 1);
}

/* ---- data path: the context's ops ---------------------------------------- */

void mock_cq_push(struct mock_cq *cq, const struct ibv_wc *wc, struct mock_qp *qp, uint32_t covers)
{
	struct mock_cqe *e;

	if (cq->count == cq->cap) {
		mock_st.cq_overflow++;
		return;
	}
	e = &cq->q[(cq->head + cq->count++) % cq->cap];
	e->wc = *wc;
	e->qp = qp;
	e->covers = covers;
	if (wc->status == IBV_WC_WR_FLUSH_ERR)
		mock_st.flush_cqes++;
	else if (wc->status != IBV_WC_SUCCESS)
		mock_st.err_cqes++;
	if (cq->armed && cq->wfd >= 0) {
		cq->armed = 0;
		mock_st.events++;
		(void)!write(cq->wfd, "e", 1);
	}
}

static int mock_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct mock_cq *cq = (struct mock_cq *)ibcq;
	int got = 0;

	if (mock_wire)
		mock_wire->in();
	while (got < n && cq->count) {
		struct mock_cqe *e = &cq->q[cq->head];
		wc[got++] = e->wc;
		if (e->qp)
			e->qp->sq_used -= e->covers;
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	return got;
}

static int mock_req_notify(struct ibv_cq *ibcq, int solicited)
{
	(void)solicited;
	((struct mock_cq *)ibcq)->armed = 1;
	return 0;
}

/* Moves QP to ERR: every posted receive flushes. */
void mock_qp_error(struct mock_qp *q)
{
	q->qp.state = IBV_QPS_ERR;
	while (q->rq_count) {
		struct ibv_wc wc = {.wr_id = q->rq[q->rq_head].wr_id,
		                    .status = IBV_WC_WR_FLUSH_ERR,
		                    .opcode = IBV_WC_RECV,
		                    .qp_num = q->qp.qp_num};
		q->rq_head = (q->rq_head + 1) % q->rq_cap;
		q->rq_count--;
		mock_cq_push(q->rcq, &wc, NULL, 0);
	}
}

int mock_lkey_ok(uint32_t lkey, uint64_t addr, uint32_t len)
{
	for (size_t i = 0; i < sizeof mock_mrs / sizeof *mock_mrs; i++)
		if (mock_mrs[i] && mock_mrs[i]->lkey == lkey &&
		    addr >= (uintptr_t)mock_mrs[i]->addr &&
		    addr + len <= (uintptr_t)mock_mrs[i]->addr + mock_mrs[i]->length)
			return 1;
	return 0;
}

struct mock_qp *mock_find_qp(const struct ibv_ah_attr *a, uint32_t qpn)
{
	for (int i = 0; i < MOCK_MAXQP; i++) {
		struct mock_qp *q = mock_qps[i];
		union ibv_gid g;
		if (!q || q->qp.qp_num != qpn)
			continue;
		if (mock_cfg.roce) {
			mock_dev_gid(q->dev, 1, &g);
			if (!a->is_global || memcmp(g.raw, a->grh.dgid.raw, 16))
				continue;
		} else if (a->dlid != mock_dev_lid(q->dev)) {
			continue; /* QPNs are per HCA: the same number elsewhere */
		}
		return q;
	}
	return NULL;
}

/* One datagram from S to D (NULL: no such QP). */
void mock_deliver_to(struct mock_qp *s, struct mock_qp *d, const struct ibv_send_wr *wr,
                     const uint8_t *data, uint32_t len)
{
	struct ibv_wc wc;
	struct mock_rwr *r;
	uint8_t *buf;

	if (mock_flt.drop > 0 && mock_rand() < mock_flt.drop) {
		mock_st.dropped_wire++;
		return;
	}
	if (!d || d->qp.qp_type != IBV_QPT_UD || d->qkey != wr->wr.ud.remote_qkey ||
	    (d->qp.state != IBV_QPS_RTR && d->qp.state != IBV_QPS_RTS)) {
		mock_st.dropped_noqp++;
		return;
	}
	if (!d->rq_count) {
		mock_st.dropped_norecv++;
		return;
	}
	r = &d->rq[d->rq_head];
	d->rq_head = (d->rq_head + 1) % d->rq_cap;
	d->rq_count--;
	memset(&wc, 0, sizeof wc);
	wc.wr_id = r->wr_id;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = d->qp.qp_num;
	if (!mock_lkey_ok(r->lkey, r->addr, r->len)) {
		/* The region was deregistered under a posted receive (a QP
		 * kept alive, e.g. still attached to a group): the HCA checks
		 * the lkey when data lands, never writes freed memory. */
		wc.status = IBV_WC_LOC_PROT_ERR;
		mock_cq_push(d->rcq, &wc, NULL, 0);
		mock_qp_error(d);
		return;
	}
	if (mock_flt.recv_len_err > 0 || r->len < 40 + len) {
		if (mock_flt.recv_len_err > 0)
			mock_flt.recv_len_err--;
		wc.status = IBV_WC_LOC_LEN_ERR;
		mock_cq_push(d->rcq, &wc, NULL, 0);
		mock_qp_error(d);
		return;
	}
	buf = (uint8_t *)(uintptr_t)r->addr;
	memset(buf, 0xa5, 40);
	if (mock_cfg.roce) {
		union ibv_gid g;
		mock_dev_gid(s->dev, 1, &g);
		memset(buf, 0, 20);
		buf[20] = 0x45;                  /* IPv4, 20-byte header */
		memcpy(buf + 32, g.raw + 12, 4); /* source address */
		wc.wc_flags = IBV_WC_GRH;
	}
	memcpy(buf + 40, data, len);
	if (wr->wr.ud.remote_qpn == 0xffffff)
		wc.wc_flags |= IBV_WC_GRH; /* multicast always carries one */
	if (wr->opcode == IBV_WR_SEND_WITH_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = wr->imm_data;
	}
	wc.status = IBV_WC_SUCCESS;
	wc.byte_len = 40 + len;
	wc.src_qp = s->qp.qp_num;
	wc.slid = mock_dev_lid(s->dev);
	wc.pkey_index = 0;
	mock_cq_push(d->rcq, &wc, NULL, 0);
	mock_st.delivered++;
}

/* One datagram from S to the QP its WR names, or to a group's QPs. */
static void deliver(struct mock_qp *s, const struct ibv_send_wr *wr, const uint8_t *data,
                    uint32_t len)
{
	const struct mock_ah *ah = (const struct mock_ah *)wr->wr.ud.ah;

	if (wr->wr.ud.remote_qpn == 0xffffff)
		mock_mc_deliver(s, wr, &ah->attr, data, len);
	else if (mock_wire && mock_wire->out(s, wr, &ah->attr, data, len))
		return;
	else
		mock_deliver_to(s, mock_find_qp(&ah->attr, wr->wr.ud.remote_qpn), wr, data, len);
}

static int mock_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct mock_qp *q = (struct mock_qp *)ibqp;
	uint8_t data[8192];

	mock_st.post_send_calls++;
	for (; wr; wr = wr->next) {
		struct ibv_wc wc;
		uint32_t len = 0;
		int err = 0;

		if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) {
			*bad = wr;
			return EINVAL;
		}
		if (q->sq_used == q->sq_cap) {
			mock_st.sq_full++;
			*bad = wr;
			return ENOMEM;
		}
		if (q->qp.qp_type == IBV_QPT_RC) {
			if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) {
				*bad = wr;
				return EINVAL;
			}
			mock_rc_exec(q, wr);
			continue;
		}
		if ((wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) ||
		    wr->num_sge < 0 || wr->num_sge > 4) {
			*bad = wr;
			return EINVAL;
		}
		for (int i = 0; i < wr->num_sge; i++) {
			const struct ibv_sge *sg = &wr->sg_list[i];
			if (len + sg->length > sizeof data) {
				*bad = wr;
				return EINVAL;
			}
			if (!(wr->send_flags & IBV_SEND_INLINE) &&
			    !mock_lkey_ok(sg->lkey, sg->addr, sg->length))
				err = 1;
			memcpy(data + len, (void *)(uintptr_t)sg->addr, sg->length);
			len += sg->length;
		}
		if ((wr->send_flags & IBV_SEND_INLINE) && len > q->max_inline) {
			*bad = wr;
			return EINVAL;
		}
		q->sq_used++;
		if (q->sq_used > mock_st.max_sq_used)
			mock_st.max_sq_used = q->sq_used;
		q->unsignaled++;
		mock_st.sends++;
		mock_st.inline_sends += !!(wr->send_flags & IBV_SEND_INLINE);
		memset(&wc, 0, sizeof wc);
		wc.wr_id = wr->wr_id;
		wc.opcode = IBV_WC_SEND;
		wc.qp_num = q->qp.qp_num;
		if (q->qp.state == IBV_QPS_ERR) {
			wc.status = IBV_WC_WR_FLUSH_ERR; /* flushed: always completes */
		} else if (err || mock_flt.send_err > 0) {
			if (!err)
				mock_flt.send_err--;
			wc.status = IBV_WC_LOC_PROT_ERR;
		} else {
			deliver(q, wr, data, len);
			wc.status = IBV_WC_SUCCESS;
		}
		if (wc.status != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED) ||
		    q->sig_all) {
			mock_st.signaled++;
			mock_cq_push(q->scq, &wc, q, q->unsignaled);
			q->unsignaled = 0;
		}
		if (wc.status == IBV_WC_LOC_PROT_ERR)
			mock_qp_error(q);
	}
	return 0;
}

static int mock_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct mock_qp *q = (struct mock_qp *)ibqp;

	mock_st.post_recv_calls++;
	for (; wr; wr = wr->next) {
		struct mock_rwr *r;
		if (q->qp.state == IBV_QPS_RESET || wr->num_sge != 1 ||
		    !mock_lkey_ok(wr->sg_list[0].lkey, wr->sg_list[0].addr,
		                  wr->sg_list[0].length)) {
			*bad = wr;
			return EINVAL;
		}
		if (q->rq_count == q->rq_cap) {
			mock_st.rq_full++;
			*bad = wr;
			return ENOMEM;
		}
		r = &q->rq[(q->rq_head + q->rq_count++) % q->rq_cap];
		r->wr_id = wr->wr_id;
		r->addr = wr->sg_list[0].addr;
		r->len = wr->sg_list[0].length;
		r->lkey = wr->sg_list[0].lkey;
		if (q->qp.state == IBV_QPS_ERR)
			mock_qp_error(q);
	}
	return 0;
}

/* ---- control path: the api table ------------------------------------------ */

static struct ibv_device **m_get_device_list(int *num)
{
	*num = mock_cfg.ndev;
	return devlist;
}

static void m_free_device_list(struct ibv_device **list)
{
	(void)list;
}

static const char *m_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

static struct ibv_context *m_open_device(struct ibv_device *dev)
{
	struct mock_ctx *c = calloc(1, sizeof *c);

	c->dev = (struct mock_dev *)dev;
	c->ctx.device = dev;
	c->ctx.ops.poll_cq = mock_poll_cq;
	c->ctx.ops.req_notify_cq = mock_req_notify;
	c->ctx.ops.post_send = mock_post_send;
	c->ctx.ops.post_recv = mock_post_recv;
	c->ctx.cmd_fd = c->ctx.async_fd = -1;
	live++;
	return &c->ctx;
}

static int m_close_device(struct ibv_context *ctx)
{
	free(ctx);
	live--;
	return 0;
}

static int m_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	(void)ctx;
	memset(a, 0, sizeof *a);
	a->phys_port_cnt = 1;
	a->max_qp_wr = mock_cfg.max_qp_wr;
	a->max_cqe = 65536;
	a->max_sge = 4;
	a->max_qp = MOCK_MAXQP;
	a->max_qp_rd_atom = a->max_qp_init_rd_atom = 16;
	return 0;
}

static int m_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a)
{
	struct mock_dev *d = ((struct mock_ctx *)ctx)->dev;

	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof *a);
	a->state = mock_cfg.state;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = mock_cfg.active_mtu;
	a->gid_tbl_len = 4;
	a->lid = mock_dev_lid(d);
	a->sm_lid = mock_cfg.roce ? 0 : 1;
	a->link_layer = mock_cfg.roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
	return 0;
}

static int m_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *g)
{
	if (port != 1 || index < 0 || index > 3)
		return EINVAL;
	if (index > 1) {
		memset(g, 0, sizeof *g); /* empty entries */
		return 0;
	}
	mock_dev_gid(((struct mock_ctx *)ctx)->dev, index, g);
	return 0;
}

static int m_query_gid_type(struct ibv_context *ctx, uint8_t port, int index, uint32_t *type)
{
	(void)ctx;
	if (port != 1 || index < 0 || index > 1)
		return EINVAL;
	*type = !mock_cfg.roce ? IBV_GID_TYPE_IB
	        : index        ? IBV_GID_TYPE_ROCE_V2
	                       : IBV_GID_TYPE_ROCE_V1;
	return 0;
}

static struct ibv_pd *m_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof *pd);
	pd->context = ctx;
	live++;
	return pd;
}

static int m_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	live--;
	return 0;
}

static struct ibv_mr *m_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	static uint32_t key = 0x1000;
	struct ibv_mr *mr;

	/* As verbs requires: remote write needs local write. */
	if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	for (size_t i = 0; i < sizeof mock_mrs / sizeof *mock_mrs; i++) {
		if (mock_mrs[i])
			continue;
		mr = calloc(1, sizeof *mr);
		mr->context = pd->context;
		mr->pd = pd;
		mr->addr = addr;
		mr->length = len;
		mr->lkey = key;
		mr->rkey = key++ ^ 0x5a000000u; /* distinct from the lkey, as on hardware */
		mock_mrs[i] = mr;
		mock_mr_access[i] = access;
		live++;
		return mr;
	}
	errno = ENOMEM;
	return NULL;
}

static int m_dereg_mr(struct ibv_mr *mr)
{
	for (size_t i = 0; i < sizeof mock_mrs / sizeof *mock_mrs; i++)
		if (mock_mrs[i] == mr)
			mock_mrs[i] = NULL;
	free(mr);
	live--;
	return 0;
}

static struct ibv_comp_channel *m_create_comp_channel(struct ibv_context *ctx)
{
	struct mock_ch *mc = calloc(1, sizeof *mc);
	struct ibv_comp_channel *ch = &mc->ch;
	int p[2];

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
		free(mc);
		return NULL;
	}
	ch->context = ctx;
	ch->fd = mc->rfd = p[0];
	ch->refcnt = p[1];
	if (mock_wire) {
		struct epoll_event ev = {.events = EPOLLIN};
		int ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, mock_wire->fd(), &ev)) {
			if (ep >= 0)
				close(ep);
			close(p[0]);
			close(p[1]);
			free(mc);
			return NULL;
		}
		ch->fd = ep;
	}
	live++;
	return ch;
}

static int m_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	struct mock_ch *mc = (struct mock_ch *)ch;

	if (ch->fd != mc->rfd)
		close(ch->fd);
	close(mc->rfd);
	close(ch->refcnt);
	free(mc);
	live--;
	return 0;
}

static struct ibv_cq *m_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                  struct ibv_comp_channel *ch, int vector)
{
	struct mock_cq *cq = calloc(1, sizeof *cq);

	(void)vector;
	cq->cq.context = ctx;
	cq->cq.channel = ch;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	cq->cap = cqe;
	cq->q = calloc((size_t)cqe, sizeof *cq->q);
	cq->wfd = ch ? ch->refcnt : -1;
	live++;
	return &cq->cq;
}

static int m_destroy_cq(struct ibv_cq *ibcq)
{
	struct mock_cq *cq = (struct mock_cq *)ibcq;
	for (int i = 0; i < MOCK_MAXQP; i++)
		if (mock_qps[i] && (mock_qps[i]->scq == cq || mock_qps[i]->rcq == cq))
			return EBUSY; /* as the kernel: a QP still uses it */
	free(cq->q);
	free(cq);
	live--;
	return 0;
}

static int m_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	char c;

	if (mock_wire)
		mock_wire->in(); /* an arrival on an armed CQ writes the pipe */
	if (read(((struct mock_ch *)ch)->rfd, &c, 1) != 1)
		return -1; /* errno EAGAIN: the fd is non-blocking */
	/* One CQ per channel in the backend: find it among the live QPs. */
	for (int i = 0; i < MOCK_MAXQP; i++) {
		if (mock_qps[i] && mock_qps[i]->rcq->cq.channel == ch) {
			*cq = &mock_qps[i]->rcq->cq;
			*cq_context = (*cq)->cq_context;
			return 0;
		}
	}
	return -1;
}

static void m_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	(void)cq;
	(void)n;
}

static struct ibv_qp *m_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct mock_qp *q;
	int slot;

	if ((a->qp_type != IBV_QPT_UD && a->qp_type != IBV_QPT_RC) ||
	    a->cap.max_send_wr > (uint32_t)mock_cfg.max_qp_wr ||
	    a->cap.max_recv_wr > (uint32_t)mock_cfg.max_qp_wr || a->cap.max_send_sge > 4 ||
	    a->cap.max_recv_sge > 4) {
		errno = EINVAL;
		return NULL;
	}
	for (slot = 0; slot < MOCK_MAXQP && mock_qps[slot]; slot++)
		;
	if (slot == MOCK_MAXQP)
		return NULL;
	q = calloc(1, sizeof *q);
	q->dev = ((struct mock_ctx *)pd->context)->dev;
	q->qp.context = pd->context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.qp_type = a->qp_type;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_num = q->dev->next_qpn++;
	q->sig_all = a->sq_sig_all;
	q->scq = (struct mock_cq *)a->send_cq;
	q->rcq = (struct mock_cq *)a->recv_cq;
	q->sq_cap = a->cap.max_send_wr;
	q->rq_cap = a->cap.max_recv_wr;
	q->rq = calloc(q->rq_cap, sizeof *q->rq);
	if (a->cap.max_inline_data > mock_cfg.max_inline)
		a->cap.max_inline_data = mock_cfg.max_inline;
	q->max_inline = a->cap.max_inline_data;
	mock_qps[slot] = q;
	mock_st.rc_qps += a->qp_type == IBV_QPT_RC;
	live++;
	return &q->qp;
}

static int m_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct mock_qp *q = (struct mock_qp *)ibqp;
	enum ibv_qp_state from = q->qp.state;

	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	if (q->qp.qp_type == IBV_QPT_RC)
		return mock_rc_modify(q, a, mask);
	switch (a->qp_state) {
	case IBV_QPS_RESET:
		q->rq_count = q->rq_head = 0;
		q->sq_used = q->unsignaled = 0;
		mock_st.resets++;
		break;
	case IBV_QPS_INIT:
		if (from != IBV_QPS_RESET && from != IBV_QPS_INIT)
			return EINVAL;
		if ((mask & (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) !=
		        (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) ||
		    a->port_num != 1)
			return EINVAL;
		q->qkey = a->qkey;
		break;
	case IBV_QPS_RTR:
		if (from != IBV_QPS_INIT)
			return EINVAL;
		break;
	case IBV_QPS_RTS:
		if (from != IBV_QPS_RTR || !(mask & IBV_QP_SQ_PSN))
			return EINVAL;
		break;
	case IBV_QPS_ERR: mock_qp_error(q); return 0;
	default: return EINVAL;
	}
	q->qp.state = a->qp_state;
	return 0;
}

static int m_destroy_qp(struct ibv_qp *ibqp)
{
	struct mock_qp *q = (struct mock_qp *)ibqp;
	if (mock_mc_attached(q))
		return EBUSY; /* verbs_mock_mc.c: detach first */
	for (int i = 0; i < MOCK_MAXQP; i++)
		if (mock_qps[i] == q)
			mock_qps[i] = NULL;
	free(q->rq);
	free(q);
	live--;
	return 0;
}

static struct ibv_ah *m_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	struct mock_ah *ah;

	if (a->port_num != 1 || (mock_cfg.roce && !a->is_global)) {
		errno = EINVAL; /* RoCE: an AH without a GRH is refused */
		return NULL;
	}
	ah = calloc(1, sizeof *ah);
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *a;
	live++;
	return &ah->ah;
}

static int m_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	live--;
	return 0;
}

static const struct rcpi_verbs_api mock_api = {
    .get_device_list = m_get_device_list,
    .free_device_list = m_free_device_list,
    .get_device_name = m_get_device_name,
    .open_device = m_open_device,
    .close_device = m_close_device,
    .query_device = m_query_device,
    .query_port = m_query_port,
    .query_gid = m_query_gid,
    .query_gid_type = m_query_gid_type,
    .alloc_pd = m_alloc_pd,
    .dealloc_pd = m_dealloc_pd,
    .reg_mr = m_reg_mr,
    .dereg_mr = m_dereg_mr,
    .create_comp_channel = m_create_comp_channel,
    .destroy_comp_channel = m_destroy_comp_channel,
    .create_cq = m_create_cq,
    .destroy_cq = m_destroy_cq,
    .get_cq_event = m_get_cq_event,
    .ack_cq_events = m_ack_cq_events,
    .create_qp = m_create_qp,
    .modify_qp = m_modify_qp,
    .destroy_qp = m_destroy_qp,
    .create_ah = m_create_ah,
    .destroy_ah = m_destroy_ah,
    .attach_mcast = mock_mc_attach,
    .detach_mcast = mock_mc_detach,
    .sa_join = mock_mc_join,
    .sa_leave = mock_mc_leave,
};

void mock_install(const struct mock_config *c)
{
	memset(&mock_cfg, 0, sizeof mock_cfg);
	if (c)
		mock_cfg = *c;
	if (!mock_cfg.ndev)
		mock_cfg.ndev = 2;
	if (mock_cfg.ndev < 0)
		mock_cfg.ndev = 0;
	if (mock_cfg.ndev > MOCK_MAXDEV)
		mock_cfg.ndev = MOCK_MAXDEV;
	if (!mock_cfg.active_mtu)
		mock_cfg.active_mtu = IBV_MTU_2048;
	if (!mock_cfg.max_inline)
		mock_cfg.max_inline = 188;
	if (!mock_cfg.state)
		mock_cfg.state = IBV_PORT_ACTIVE;
	if (!mock_cfg.max_qp_wr)
		mock_cfg.max_qp_wr = 16384;
	memset(&mock_flt, 0, sizeof mock_flt);
	memset(&mock_st, 0, sizeof mock_st);
	memset(devs, 0, sizeof devs);
	/* A failed test may have left objects: forget them (leaked). */
	memset(mock_qps, 0, sizeof mock_qps);
	memset(mock_mrs, 0, sizeof mock_mrs);
	mock_mc_reset();
	live = 0;
	for (int i = 0; i < mock_cfg.ndev; i++) {
		devs[i].index = i;
		devs[i].next_qpn = 0x100;
		snprintf(devs[i].dev.name, sizeof devs[i].dev.name, "mock%d", i);
		devs[i].dev.node_type = IBV_NODE_CA;
		devs[i].dev.transport_type = IBV_TRANSPORT_IB;
		devlist[i] = &devs[i].dev;
	}
	devlist[mock_cfg.ndev] = NULL;
	rng = 0x9e3779b97f4a7c15ull;
	mock_wire = NULL;
	rcpi_verbs_api = &mock_api;
}

struct mock_dev *mock_dev_at(int i)
{
	return &devs[i >= 0 && i < MOCK_MAXDEV ? i : 0];
}

void mock_qpn_base(uint32_t base)
{
	for (int i = 0; i < MOCK_MAXDEV; i++)
		devs[i].next_qpn = base;
}

void mock_uninstall(void)
{
	rcpi_verbs_api = &rcpi_verbs_api_real;
}

struct mock_faults *mock_faults(void)
{
	return &mock_flt;
}

struct mock_stats *mock_stats(void)
{
	return &mock_st;
}

void mock_live_add(int n)
{
	live += n;
}

int mock_live(void)
{
	return live;
}

void mock_seed(uint64_t seed)
{
	rng = seed ? seed : 1;
}
