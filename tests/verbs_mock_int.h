/*
 * tests/verbs_mock_int.h — between the files of the HCA model:
 * tests/verbs_mock.c (devices, UD, the control path) and
 * tests/verbs_mock_rc.c (RC queue pairs, RDMA READ/WRITE, remote keys).
 */
#ifndef RCP_TESTS_VERBS_MOCK_INT_H
#define RCP_TESTS_VERBS_MOCK_INT_H

#include "tests/verbs_mock.h"

#define MOCK_MAXDEV 8
#define MOCK_MAXQP  256
#define MOCK_MAXMR  512

struct mock_dev {
	struct ibv_device dev;
	int index;
	uint32_t next_qpn; /* QPNs are per HCA, as on hardware */
};

struct mock_ctx {
	struct ibv_context ctx; /* first */
	struct mock_dev *dev;
};

struct mock_cqe {
	struct ibv_wc wc;
	struct mock_qp *qp; /* send completions: whose send queue */
	uint32_t covers;    /* send WRs this completion frees */
};

struct mock_cq {
	struct ibv_cq cq; /* first */
	struct mock_cqe *q;
	int cap, head, count, armed;
	int wfd; /* the channel pipe's write end, or -1 */
};

struct mock_rwr {
	uint64_t wr_id, addr;
	uint32_t len, lkey;
};

struct mock_qp {
	struct ibv_qp qp; /* first */
	struct mock_dev *dev;
	struct mock_cq *scq, *rcq;
	struct mock_rwr *rq;
	uint32_t rq_cap, rq_head, rq_count;
	uint32_t sq_cap, sq_used, unsignaled;
	uint32_t qkey, max_inline;
	int sig_all;
	/* RC: what INIT and RTR set */
	int access;              /* IBV_ACCESS_REMOTE_* granted to the peer */
	struct ibv_ah_attr path; /* the connected peer's address */
	uint32_t dest_qpn, rq_psn, sq_psn;
};

struct mock_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

extern struct mock_config mock_cfg;
extern struct mock_faults mock_flt;
extern struct mock_stats mock_st;
extern struct mock_qp *mock_qps[MOCK_MAXQP];
extern struct ibv_mr *mock_mrs[MOCK_MAXMR];
extern int mock_mr_access[MOCK_MAXMR]; /* IBV_ACCESS_* of mock_mrs[i] */

uint16_t mock_dev_lid(const struct mock_dev *d);
void mock_dev_gid(const struct mock_dev *d, int index, union ibv_gid *g);
void mock_cq_push(struct mock_cq *cq, const struct ibv_wc *wc, struct mock_qp *qp, uint32_t covers);
void mock_qp_error(struct mock_qp *q);
int mock_lkey_ok(uint32_t lkey, uint64_t addr, uint32_t len);
/* The QP numbered QPN on the HCA the address A names (LID, or GID on RoCE). */
struct mock_qp *mock_find_qp(const struct ibv_ah_attr *a, uint32_t qpn);

void mock_deliver_to(struct mock_qp *s, struct mock_qp *d, const struct ibv_send_wr *wr,
                     const uint8_t *data, uint32_t len);

/* verbs_mock.c: the HCA of index I; every HCA's next QPN from BASE on
 * (tests/verbs_mock_wire.c's child side). */
struct mock_dev *mock_dev_at(int i);
void mock_qpn_base(uint32_t base);

/* tests/verbs_mock_wire.c, once installed (NULL before): OUT takes a UD
 * send to a QP of the other process (1) or leaves it to the model (0); IN
 * delivers what arrived; FD is the socket a channel's fd must watch. */
struct mock_wire_hooks {
	int (*out)(struct mock_qp *s, const struct ibv_send_wr *wr, const struct ibv_ah_attr *a,
	           const uint8_t *data, uint32_t len);
	void (*in)(void);
	int (*fd)(void);
};
extern const struct mock_wire_hooks *mock_wire;

/* verbs_mock_mc.c */
void mock_mc_reset(void);
void mock_live_add(int n); /* verbs_mock.c: objects live */
void mock_mc_deliver(struct mock_qp *s, const struct ibv_send_wr *wr, const struct ibv_ah_attr *a,
                     const uint8_t *data, uint32_t len);
int mock_mc_attach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int mock_mc_detach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
/* Groups QP is still attached to (destroy_qp refuses it while nonzero). */
int mock_mc_attached(const struct mock_qp *qp);
int mock_mc_join(const char *dev, uint8_t port, const uint8_t mgid[16], uint32_t qkey,
                 uint16_t *mlid);
int mock_mc_leave(const char *dev, uint8_t port, const uint8_t mgid[16]);

/* verbs_mock_rc.c */
int mock_rc_modify(struct mock_qp *q, struct ibv_qp_attr *a, int mask);
/* One RC work request, executed at once; ERR: the QP's state made it fail. */
void mock_rc_exec(struct mock_qp *q, const struct ibv_send_wr *wr);

#endif
