/*
 * nic/verbs/verbs.c — the InfiniBand/RoCE nic backend ("verbs:DEV:PORT[:GIDX]").
 *
 * Built when libibverbs, librdmacm and libibumad are found (configure);
 * absent from nic/nic.c's table otherwise.  Datagrams travel on one UD
 * queue pair per endpoint (ud.c); addresses, peers and address handles
 * are addr.c's; every control call goes through nic/verbs/api.h's table
 * so that tests can run the backend on a model of an HCA.
 *
 * Opening: the device by name, the port's state (ACTIVE, else
 * RCP_ENODEV with the state in the message), its link layer (Ethernet:
 * RoCE, every AH global), LID and active MTU, the GID at the index given
 * or, on RoCE, the first RoCE v2 GID (IPv4-mapped preferred: that is the
 * one routable over UDP/IPv4).  The device's limits cap the queues: the
 * receive queue holds RQ = rx_bytes / MTU (VB_RQ_DEF by default, within
 * [VB_RQ_MIN, VB_RQ_MAX] and max_qp_wr), the send queue VB_SQ.
 *
 * Sleeping: the receive CQ reports to a completion channel whose fd
 * (non-blocking) is rcp_nic_fd.  arm() reads and counts the events that
 * woke us (acknowledged in one ibv_ack_cq_events call: it takes a mutex),
 * asks for the next with ibv_req_notify_cq, then polls once more: a
 * completion that landed before the request raises no event, and the poll
 * sees it (RCP_EAGAIN: do not sleep).  The send CQ is never armed: it is
 * reaped when sending.
 *
 * Capabilities: the link's CRCs (ICRC, VCRC or the Ethernet FCS) check
 * the bytes (RCP_NIC_CAP_CHECKED); UD neither retries nor promises order
 * across paths, so not RELIABLE or ORDERED.  RMA (RCP_NIC_CAP_RMA) is
 * RDMA READ/WRITE on RC queue pairs, one pair per peer connected in the
 * background from the moment it is added (rc.c), on memory registered
 * through mr.c.  On InfiniBand, multicast (RCP_NIC_CAP_MCAST): a group is
 * a peer ("verbs:mcast:MGID", addr.c) and a group endpoint
 * ("verbs:mcast:MGID@DEV:PORT") is one whose UD QP is attached to it, so
 * rcp/mcastnet.c's reliable multicast runs as over IP multicast.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic/verbs/verbs_int.h"

static const char *port_state_name(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_DOWN: return "DOWN";
	case IBV_PORT_INIT: return "INIT (no subnet manager has configured it)";
	case IBV_PORT_ARMED: return "ARMED";
	case IBV_PORT_ACTIVE: return "ACTIVE";
	default: return "not present";
	}
}

/* Opens device DEV; RCP_ENODEV with a message saying what is there. */
static int dev_open(struct verbs_nic *v)
{
	const struct rcpi_verbs_api *api = v->api;
	struct ibv_device **list;
	char names[256] = "";
	int n = 0, rc = RCP_ENODEV;

	list = api->get_device_list(&n);
	if (!list || n <= 0) {
		rcpi_warn("verbs: no RDMA device here (ibv_get_device_list lists none: no "
		          "InfiniBand/RoCE adapter, or no kernel driver such as rdma_rxe or "
		          "siw loaded)");
		if (list)
			api->free_device_list(list);
		return RCP_ENODEV;
	}
	for (int i = 0; i < n; i++) {
		const char *name = api->get_device_name(list[i]);
		if (name && !strcmp(name, v->dev)) {
			v->ctx = api->open_device(list[i]);
			rc = v->ctx ? 0 : RCP_EPERM;
			if (!v->ctx)
				rcpi_warn("verbs: cannot open device %s (permissions of "
				          "/dev/infiniband/uverbs*?)",
				          v->dev);
			break;
		}
		if (name && strlen(names) + strlen(name) + 3 < sizeof names) {
			if (*names)
				strcat(names, ", ");
			strcat(names, name);
		}
	}
	if (rc == RCP_ENODEV)
		rcpi_warn("verbs: no RDMA device \"%s\" here (there are: %s)", v->dev, names);
	api->free_device_list(list);
	return rc;
}

/* The GID index to use on RoCE when none was given. */
static int roce_gid(struct verbs_nic *v, int tbl_len)
{
	int first_v2 = -1;

	for (int i = 0; i < tbl_len; i++) {
		union ibv_gid g;
		uint32_t type;
		static const uint8_t zero[16];
		if (v->api->query_gid_type(v->ctx, v->port, i, &type) ||
		    v->api->query_gid(v->ctx, v->port, i, &g) || !memcmp(g.raw, zero, 16))
			continue;
		if (type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (g.raw[10] == 0xff && g.raw[11] == 0xff && !memcmp(g.raw, zero, 10))
			return i; /* IPv4-mapped */
		if (first_v2 < 0)
			first_v2 = i;
	}
	return first_v2 >= 0 ? first_v2 : 0;
}

static int port_setup(struct verbs_nic *v, const struct rcp_nic_config *cfg)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid g;

	if (v->api->query_device(v->ctx, &da)) {
		rcpi_warn("verbs: %s: ibv_query_device failed", v->dev);
		return RCP_ESYS;
	}
	if (v->port > da.phys_port_cnt) {
		rcpi_warn("verbs: %s has %u port(s), no port %u", v->dev, da.phys_port_cnt,
		          v->port);
		return RCP_ENODEV;
	}
	memset(&pa, 0, sizeof pa);
	if (v->api->query_port(v->ctx, v->port, &pa)) {
		rcpi_warn("verbs: %s: ibv_query_port(%u) failed", v->dev, v->port);
		return RCP_ESYS;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		rcpi_warn("verbs: %s port %u is %s, not ACTIVE", v->dev, v->port,
		          port_state_name(pa.state));
		return RCP_ENODEV;
	}
	v->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	v->lid = pa.lid;
	v->sl = 0;
	v->pkey_index = 0;
	v->mtu = pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096
	             ? 128u << pa.active_mtu
	             : 256u;
	if (cfg && cfg->mtu && cfg->mtu < v->mtu)
		v->mtu = cfg->mtu;
	if (v->roce && v->gid_index < 0)
		v->gid_index = roce_gid(v, pa.gid_tbl_len);
	if (v->gid_index >= 0) {
		if (v->gid_index >= pa.gid_tbl_len ||
		    v->api->query_gid(v->ctx, v->port, v->gid_index, &g)) {
			rcpi_warn("verbs: %s port %u: no GID at index %d", v->dev, v->port,
			          v->gid_index);
			return RCP_EADDR;
		}
		memcpy(v->gid, g.raw, 16);
	}
	if (!v->roce && (!v->lid || v->lid >= 0xc000)) {
		rcpi_warn("verbs: %s port %u has no LID yet (no subnet manager?)", v->dev, v->port);
		return RCP_ENODEV;
	}
	v->rq = VB_RQ_DEF;
	if (cfg && cfg->rx_bytes) {
		size_t want = cfg->rx_bytes / v->mtu;
		v->rq = want < VB_RQ_MIN   ? VB_RQ_MIN
		        : want > VB_RQ_MAX ? VB_RQ_MAX
		                           : (uint32_t)want;
	}
	if ((int)v->rq > da.max_qp_wr)
		v->rq = (uint32_t)da.max_qp_wr;
	if ((int)v->rq > da.max_cqe)
		v->rq = (uint32_t)da.max_cqe;
	if (da.max_qp_wr < VB_SQ || da.max_cqe < VB_SQ || v->rq < VB_RQ_MIN) {
		rcpi_warn("verbs: %s: queues too small (max_qp_wr %d, max_cqe %d)", v->dev,
		          da.max_qp_wr, da.max_cqe);
		return RCP_ENOTSUP;
	}
	v->max_sge = da.max_sge < VB_MAX_SGE ? (uint32_t)da.max_sge : VB_MAX_SGE;
	v->path_mtu = pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096 ? pa.active_mtu
	                                                                            : IBV_MTU_256;
	/* RDMA READs in flight per RC QP, each way: the device's bound, at
	 * most 16; 0 (a device without READ) leaves only WRITE working. */
	v->rd_atom = (uint8_t)(da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom
	                                                                  : da.max_qp_init_rd_atom);
	if (v->rd_atom > 16)
		v->rd_atom = 16;
	return 0;
}

static int queues_make(struct verbs_nic *v)
{
	const struct rcpi_verbs_api *api = v->api;
	struct ibv_qp_init_attr qa;
	int fl;

	v->pd = api->alloc_pd(v->ctx);
	v->ch = v->pd ? api->create_comp_channel(v->ctx) : NULL;
	if (!v->ch)
		goto fail;
	fl = fcntl(v->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(v->ch->fd, F_SETFL, fl | O_NONBLOCK))
		goto fail;
	v->rcq = api->create_cq(v->ctx, (int)v->rq, v, v->ch, 0);
	v->scq = v->rcq ? api->create_cq(v->ctx, VB_SQ, v, NULL, 0) : NULL;
	if (!v->scq)
		goto fail;

	v->stride = (VB_RXPAD + VB_GRH + v->mtu + 63) & ~63u;
	v->area_len = (size_t)(v->rq + VB_SQ) * v->stride;
	if (posix_memalign((void **)&v->area, 4096, v->area_len))
		return RCP_ENOMEM;
	memset(v->area, 0, v->area_len);
	v->mr = api->reg_mr(v->pd, v->area, v->area_len, IBV_ACCESS_LOCAL_WRITE);
	if (!v->mr) {
		rcpi_warn("verbs: %s: registering %zu bytes failed (RLIMIT_MEMLOCK?)", v->dev,
		          v->area_len);
		return RCP_ENOMEM;
	}

	memset(&qa, 0, sizeof qa);
	qa.send_cq = v->scq;
	qa.recv_cq = v->rcq;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 0;
	qa.cap.max_send_wr = VB_SQ;
	qa.cap.max_recv_wr = v->rq;
	qa.cap.max_send_sge = v->max_sge;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 256; /* asked for; the device says what it gives */
	v->qp = api->create_qp(v->pd, &qa);
	if (!v->qp) {
		qa.cap.max_inline_data = 0;
		v->qp = api->create_qp(v->pd, &qa);
	}
	if (!v->qp)
		goto fail;
	v->inline_max = qa.cap.max_inline_data;
	return 0;
fail:
	rcpi_warn("verbs: %s: making the protection domain, CQs or UD QP failed", v->dev);
	return RCP_ESYS;
}

/* A group endpoint's QP joins the group (the SA gives the MLID) and is
 * attached to it: from then on the HCA hands it the group's datagrams.
 * RoCE has no SA; its multicast (an IGMP join, rdma_cm's) is not built. */
static int group_attach(struct verbs_nic *v)
{
	union ibv_gid g;
	int rc;

	v->group = 0;
	if (v->roce) {
		rcpi_warn("verbs: %s: multicast on RoCE is not built", v->dev);
		return RCP_ENOTSUP;
	}
	rc = rcpi_vb_mc_join(v, v->mgid, &v->mlid);
	if (rc) {
		rcpi_warn("verbs: %s port %u: joining the multicast group failed (%d)", v->dev,
		          v->port, rc);
		return rc == RCP_ENOMEM ? rc : RCP_EPEER;
	}
	v->group = 1;
	memcpy(g.raw, v->mgid, 16);
	rc = v->api->attach_mcast(v->qp, &g, v->mlid);
	if (rc) {
		rcpi_warn("verbs: %s: ibv_attach_mcast: %s", v->dev, strerror(rc));
		return RCP_ESYS;
	}
	v->attached = 1;
	return 0;
}

static void vb_free(struct verbs_nic *v)
{
	const struct rcpi_verbs_api *api = v->api;

	if (v->attached) {
		union ibv_gid g;
		memcpy(g.raw, v->mgid, 16);
		api->detach_mcast(v->qp, &g, v->mlid);
	}
	if (v->group == 1)
		rcpi_vb_mc_leave(v, v->mgid);
	if (v->qp)
		api->destroy_qp(v->qp);
	rcpi_vb_rc_free(v);     /* RC QPs and their CQ */
	rcpi_vb_mr_free_all(v); /* before the PD */
	rcpi_vb_peers_free(v);  /* AHs after the QP that used them */
	if (v->mr)
		api->dereg_mr(v->mr);
	if (v->events && v->rcq)
		api->ack_cq_events(v->rcq, v->events);
	if (v->scq)
		api->destroy_cq(v->scq);
	if (v->rcq)
		api->destroy_cq(v->rcq);
	if (v->ch)
		api->destroy_comp_channel(v->ch);
	if (v->pd)
		api->dealloc_pd(v->pd);
	if (v->ctx)
		api->close_device(v->ctx);
	free(v->area);
	free(v->repost);
	free(v->wc);
	free(v);
}

static int vb_open(const char *rest, const struct rcp_nic_config *cfg, rcp_nic **out)
{
	struct verbs_nic *v = calloc(1, sizeof *v);
	int rc;

	if (!v)
		return RCP_ENOMEM;
	v->api = rcpi_verbs_api;
	v->last_peer = -1;
	if (!strncmp(rest, "mcast:", 6)) {
		/* A group endpoint: "mcast:MGID@DEV:PORT[:GIDX]". */
		rc = rcpi_vb_parse_group(rest, v->mgid, &rest);
		if (rc || !rest) {
			free(v);
			return RCP_EADDR;
		}
		v->group = 2; /* 2: to join; 1: joined (vb_free leaves) */
	}
	rc = rcpi_vb_parse_local(rest, v->dev, sizeof v->dev, &v->port, &v->gid_index);
	if (!rc)
		rc = dev_open(v);
	if (!rc)
		rc = port_setup(v, cfg);
	if (!rc)
		rc = queues_make(v);
	if (rc)
		goto fail;
	v->repost = calloc(v->rq, sizeof *v->repost);
	v->wc = calloc(v->rq, sizeof *v->wc);
	v->peers = calloc(VB_PEERS, sizeof *v->peers);
	if (!v->repost || !v->wc || !v->peers) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	rc = rcpi_vb_qp_up(v);
	if (!rc)
		rc = rcpi_vb_rq_fill(v);
	if (!rc && v->group)
		rc = group_attach(v);
	if (rc)
		goto fail;
	rcpi_debug("verbs: %s port %u: %s, QPN 0x%x, LID %u, mtu %u, inline %u, RQ %u", v->dev,
	           v->port, v->roce ? "RoCE" : "InfiniBand", v->qp->qp_num, v->lid, v->mtu,
	           v->inline_max, v->rq);
	*out = &v->base;
	return 0;
fail:
	vb_free(v);
	return rc;
}

static void vb_close(rcp_nic *nic)
{
	vb_free(vb_of(nic));
}

static void vb_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	const struct verbs_nic *v = vb_ofc(nic);

	info->backend = "verbs";
	info->mtu = v->mtu;
	/* Receives the QP holds at the least: RQ less a burst in the
	 * caller's hands and a repost batch; half of it per sender. */
	info->rx_frames = (v->rq - VB_BURST - VB_REPOST) / 2;
	info->caps = RCP_NIC_CAP_CHECKED | RCP_NIC_CAP_RMA | (v->roce ? 0 : RCP_NIC_CAP_MCAST);
}

static int vb_fd(const rcp_nic *nic)
{
	return vb_ofc(nic)->ch->fd;
}

/* Frames waiting?  Control datagrams (a peer's RC handshake, rc.c) are
 * answered here rather than reported: they are no frame, and a caller told
 * RCP_EAGAIN for one would find nothing to receive (test_nic's t_wait_fd
 * over the model caught it, session 20). */
static int frames_pending(rcp_nic *nic)
{
	struct verbs_nic *v = vb_of(nic);

	if (rcpi_vb_pending(nic) && v->nctl)
		rcpi_vb_rc_ctl(v);
	return rcpi_vb_pending(nic);
}

static int vb_arm(rcp_nic *nic)
{
	struct verbs_nic *v = vb_of(nic);
	struct ibv_cq *cq;
	void *cqctx;

	while (!v->api->get_cq_event(v->ch, &cq, &cqctx))
		v->events++;
	if (v->events >= 64) {
		v->api->ack_cq_events(v->rcq, v->events);
		v->events = 0;
	}
	if (frames_pending(nic))
		return RCP_EAGAIN;
	if (ibv_req_notify_cq(v->rcq, 0))
		return RCP_ESYS;
	return frames_pending(nic) ? RCP_EAGAIN : 0;
}

static int vb_peer_remove(rcp_nic *nic, int peer)
{
	struct verbs_nic *v = vb_of(nic);

	if (peer >= v->npeers || !v->peers[peer].used)
		return RCP_EINVAL;
	rcpi_vb_rc_drop(v, peer);
	return rcpi_vb_peer_remove(nic, peer);
}

/* Frames, then the control datagrams they came with (rc.c): a REQ is
 * answered within the receive that finds it. */
static int vb_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max)
{
	struct verbs_nic *v = vb_of(nic);
	int n = rcpi_vb_recv(nic, frames, max);

	if (RCPI_UNLIKELY(v->nctl))
		rcpi_vb_rc_ctl(v);
	if (RCPI_UNLIKELY(v->rc_waiting))
		rcpi_vb_rc_timers(v);
	return n;
}

const struct rcpi_nic_ops rcpi_nic_verbs_ops = {
    .name = "verbs",
    .id = RCPI_NIC_VERBS,
    .open = vb_open,
    .close = vb_close,
    .query = vb_query,
    .addr_str = rcpi_vb_addr_str,
    .addr_blob = rcpi_vb_addr_blob,
    .peer_add = rcpi_vb_rc_peer_add,
    .peer_add_str = rcpi_vb_rc_peer_add_str,
    .peer_remove = vb_peer_remove,
    .send = rcpi_vb_send,
    .flush = rcpi_vb_flush,
    .recv = vb_recv,
    .release = rcpi_vb_release,
    .fd = vb_fd,
    .arm = vb_arm,
    .pending = rcpi_vb_pending,
    .send_to = rcpi_vb_send_to,
    /* recv_wait: the dispatcher's arm/ppoll/recv. */
    .mr_reg = rcpi_vb_mr_reg,
    .mr_dereg = rcpi_vb_mr_dereg,
    .mr_pack = rcpi_vb_mr_pack,
    .get = rcpi_vb_get,
    .put = rcpi_vb_put,
};
