/*
 * nic/verbs/api.h — the libibverbs calls of the verbs backend, as a table.
 *
 * The data path (ibv_post_send, ibv_post_recv, ibv_poll_cq,
 * ibv_req_notify_cq) is static inlines in <infiniband/verbs.h> that call
 * through the context's ops (ctx->ops.post_send, ...): whoever made the
 * ibv_context decides what they do, so the backend calls them directly and
 * pays nothing for a model of the hardware.  The control path (open a
 * device, make a PD, CQ, QP, AH, register memory, read the port) is real
 * functions inside libibverbs that reach the provider through internal
 * tables a model cannot fill.  Those go through this table instead: the
 * backend never names them, rcpi_verbs_api points at the real ones
 * (nic/verbs/api.c), and a test (tests/verbs_mock.c) points it at a model
 * of an HCA whose contexts carry the model's data-path ops.  One table
 * rather than symbol interposition because interposition needs the test
 * to override exported names of a shared library the backend also links
 * (fragile under LTO, -Bsymbolic, static links), while a table is one
 * pointer, visible, and swapped before the first rcp_nic_open.
 */
#ifndef RCP_NIC_VERBS_API_H
#define RCP_NIC_VERBS_API_H

#include <infiniband/verbs.h>

struct rcpi_verbs_api {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	/* The GID's type (IBV_GID_TYPE_IB, _ROCE_V1, _ROCE_V2); nonzero if
	 * the entry is empty or cannot be read. */
	int (*query_gid_type)(struct ibv_context *ctx, uint8_t port, int index, uint32_t *type);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
	                            struct ibv_comp_channel *ch, int vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned n);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	int (*destroy_ah)(struct ibv_ah *ah);
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	/* The subnet administrator's side of multicast (umad.c's MADs in the
	 * real table): our port DEV/PORT joins group MGID (created with QKEY
	 * if new), *MLID gets its LID; leave takes the port out.  The SA
	 * counts a port once: nic/verbs/mcjoin.c counts endpoints.  Return 0
	 * or a negative RCP_E* code (umad.h). */
	int (*sa_join)(const char *dev, uint8_t port, const uint8_t mgid[16], uint32_t qkey,
	               uint16_t *mlid);
	int (*sa_leave)(const char *dev, uint8_t port, const uint8_t mgid[16]);
};

/* The table in use: the real libibverbs unless a test swapped it. */
extern const struct rcpi_verbs_api *rcpi_verbs_api;
extern const struct rcpi_verbs_api rcpi_verbs_api_real;

#endif
