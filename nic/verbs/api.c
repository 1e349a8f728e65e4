/*
 * nic/verbs/api.c — the real libibverbs behind nic/verbs/api.h's table.
 *
 * Thin wrappers where the library's name is a macro or an inline
 * (ibv_query_port, ibv_query_gid_ex), the functions themselves otherwise.
 *
 * The SA calls (sa_join, sa_leave) open a umad agent each time: joins
 * are rare (a group endpoint's open, a group peer's add).
 */
#include "config.h"

#include "nic/verbs/api.h"
#include "nic/verbs/umad.h"

#define MC_WAIT_MS 1000

/* One SA exchange: join (JOIN) or leave MGID from DEV/PORT. */
static int sa_do(const char *dev, uint8_t port, const uint8_t mgid[16], uint32_t qkey, int join,
                 uint16_t *mlid)
{
	struct rcpi_umad_sa *sa;
	struct rcpi_umad_mcgroup g;
	int rc = rcpi_umad_sa_open(dev, port, &sa);

	if (rc)
		return rc;
	if (join) {
		rc = rcpi_umad_mc_join(sa, mgid, qkey, &g, MC_WAIT_MS);
		if (!rc)
			*mlid = g.mlid;
	} else {
		rc = rcpi_umad_mc_leave(sa, mgid, MC_WAIT_MS);
	}
	rcpi_umad_sa_close(sa);
	return rc;
}

static int real_sa_join(const char *dev, uint8_t port, const uint8_t mgid[16], uint32_t qkey,
                        uint16_t *mlid)
{
	return sa_do(dev, port, mgid, qkey, 1, mlid);
}

static int real_sa_leave(const char *dev, uint8_t port, const uint8_t mgid[16])
{
	return sa_do(dev, port, mgid, 0, 0, NULL);
}

static int real_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

static int real_query_gid_type(struct ibv_context *ctx, uint8_t port, int index, uint32_t *type)
{
	struct ibv_gid_entry e;
	int rc = ibv_query_gid_ex(ctx, port, (uint32_t)index, &e, 0);

	if (!rc)
		*type = e.gid_type;
	return rc;
}

static int real_destroy_qp(struct ibv_qp *qp)
{
	return ibv_destroy_qp(qp);
}

const struct rcpi_verbs_api rcpi_verbs_api_real = {
    .get_device_list = ibv_get_device_list,
    .free_device_list = ibv_free_device_list,
    .get_device_name = ibv_get_device_name,
    .open_device = ibv_open_device,
    .close_device = ibv_close_device,
    .query_device = ibv_query_device,
    .query_port = real_query_port,
    .query_gid = ibv_query_gid,
    .query_gid_type = real_query_gid_type,
    .alloc_pd = ibv_alloc_pd,
    .dealloc_pd = ibv_dealloc_pd,
    .reg_mr = ibv_reg_mr,
    .dereg_mr = ibv_dereg_mr,
    .create_comp_channel = ibv_create_comp_channel,
    .destroy_comp_channel = ibv_destroy_comp_channel,
    .create_cq = ibv_create_cq,
    .destroy_cq = ibv_destroy_cq,
    .get_cq_event = ibv_get_cq_event,
    .ack_cq_events = ibv_ack_cq_events,
    .create_qp = ibv_create_qp,
    .modify_qp = ibv_modify_qp,
    .destroy_qp = real_destroy_qp,
    .create_ah = ibv_create_ah,
    .destroy_ah = ibv_destroy_ah,
    .attach_mcast = ibv_attach_mcast,
    .detach_mcast = ibv_detach_mcast,
    .sa_join = real_sa_join,
    .sa_leave = real_sa_leave,
};

const struct rcpi_verbs_api *rcpi_verbs_api = &rcpi_verbs_api_real;
