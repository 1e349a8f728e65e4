/*
 * tests/verbs_mock.h — an in-process model of InfiniBand HCAs for the verbs
 * backend's tests (tests/verbs_mock.c explains the model).
 */
#ifndef RCP_TESTS_VERBS_MOCK_H
#define RCP_TESTS_VERBS_MOCK_H

#include <stdint.h>

#include "nic/verbs/api.h"

struct mock_config {
	int ndev;                  /* devices "mock0".."mockN-1", one port each;
	                            0: 2, <0: none */
	enum ibv_mtu active_mtu;   /* default IBV_MTU_2048 */
	uint32_t max_inline;       /* default 188 (a ConnectX's UD inline) */
	int roce;                  /* Ethernet link layer: RoCE v2 GIDs, no LIDs */
	enum ibv_port_state state; /* default ACTIVE */
	int max_qp_wr;             /* default 16384 */
};

struct mock_faults {
	double drop;      /* each datagram lost on the "wire" with this probability */
	int send_err;     /* the next N sends complete with IBV_WC_LOC_PROT_ERR */
	int recv_len_err; /* the next N receives complete with IBV_WC_LOC_LEN_ERR */
	int rdma_err;     /* the next N RDMA READ/WRITEs complete with
	                     IBV_WC_RETRY_EXC_ERR, nothing moved (a peer
	                     that does not answer on the RC QP) */
	int rc_down;      /* RC QPs never reach RTR: modify_qp refuses it (a
	                     path that cannot be set up; the QP never comes up) */
};

struct mock_stats {
	uint64_t post_send_calls, post_recv_calls, sends, inline_sends, signaled;
	uint64_t delivered;
	uint64_t dropped_wire;   /* mock_faults.drop */
	uint64_t dropped_norecv; /* no receive posted (UD: silent) */
	uint64_t dropped_noqp;   /* no QP with that QPN/LID/Q_Key */
	uint64_t sq_full;        /* post_send refused: send queue full (ENOMEM) */
	uint64_t rq_full;        /* post_recv refused: receive queue full */
	uint64_t cq_overflow;    /* a completion found its CQ full */
	uint64_t err_cqes, flush_cqes;
	uint64_t events;                              /* completion events raised */
	uint64_t resets;                              /* QPs moved to RESET */
	uint64_t rc_qps;                              /* RC QPs created (session 21) */
	uint64_t max_sq_used;                         /* deepest send queue seen */
	uint64_t rdma_writes, rdma_reads, rdma_bytes; /* RC work done (verbs_mock_rc.c) */
	uint64_t mc_sends;    /* datagrams sent to a group (verbs_mock_mc.c) */
	uint64_t mc_copies;   /* copies handed to attached QPs */
	uint64_t mc_members;  /* SA memberships now (port, MGID) */
	uint64_t mc_unrouted; /* group sends to no group (unknown MLID/MGID, no GRH) */
};

/* Installs the model as rcpi_verbs_api (CFG NULL: defaults). */
void mock_install(const struct mock_config *cfg);
/* Back to the real libibverbs; fails the test if objects are still live. */
void mock_uninstall(void);
struct mock_faults *mock_faults(void);
struct mock_stats *mock_stats(void);
/* Live objects of the model (contexts, PDs, CQs, QPs, MRs, AHs, channels). */
int mock_live(void);
/* Seeds the drop decisions (mock_faults.drop). */
void mock_seed(uint64_t seed);

/* tests/verbs_mock_wire.c: UD datagrams between the models of a parent and
 * the children it forks (call after mock_install, before fork): 0, or a
 * negative errno. */
struct mock_wire_stats {
	uint64_t out;  /* datagrams sent to the other process */
	uint64_t in;   /* datagrams taken off the wire */
	uint64_t full; /* lost: the socket buffer was full */
};
int mock_wire_install(void);
struct mock_wire_stats *mock_wire_stats(void);

#endif
