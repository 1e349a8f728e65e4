/*
 * nic/verbs/verbs_int.h — between the verbs backend's files.
 *
 *   verbs.c  open/close, the ops table, sleeping        (uses ud.c, addr.c)
 *   ud.c     the UD queue pair: send, receive, repost   (uses addr.c)
 *   addr.c   address strings and blobs, peers, AHs      (uses api.c)
 *   api.c    the libibverbs control calls as a table
 *   umad.c   the subnet through libibumad (standalone)
 */
#ifndef RCP_NIC_VERBS_INT_H
#define RCP_NIC_VERBS_INT_H

#include <stdint.h>

#include "nic/nic_int.h"
#include "nic/verbs/api.h"

#define VB_GRH     40u  /* a UD receive starts with room for the GRH */
#define VB_RXPAD   24u  /* slot offset of the posted buffer: payload 64-aligned */
#define VB_BURST   64   /* completions polled, WRs chained per post */
#define VB_SIGNAL  32   /* one send in VB_SIGNAL is signalled */
#define VB_SQ      512  /* send queue entries (a multiple of VB_SIGNAL) */
#define VB_RQ_DEF  1024 /* receive queue entries by default */
#define VB_RQ_MIN  64
#define VB_RQ_MAX  16384
#define VB_REPOST  16 /* receives reposted per batch */
#define VB_PEERS   4096
#define VB_BLOB    24u         /* id, flags, LID, QPN, GID: see addr.c */
#define VB_QKEY    0x52435000u /* "RCP\0": high bit clear (not a controlled key) */
#define VB_MAX_SGE 4

/* Blob flags. */
enum { VB_F_GID = 1u << 0 };

/* A destination: where a UD send goes. */
struct vb_dest {
	uint32_t qpn;
	uint16_t lid;
	uint8_t has_gid;
	uint8_t gid[16];
};

struct vb_peer {
	struct vb_dest d;
	struct ibv_ah *ah;
	uint8_t used;
};

struct verbs_nic {
	struct rcp_nic base; /* first: the dispatcher casts */
	const struct rcpi_verbs_api *api;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *mr; /* the receive slots and the send slots, one area */
	uint8_t *area;
	size_t area_len;

	char dev[64];
	uint8_t port;
	int gid_index;   /* -1: none (IB without GRH) */
	uint8_t roce;    /* Ethernet link layer: every AH needs a GRH */
	uint8_t gid[16]; /* ours at gid_index */
	uint16_t lid;
	uint16_t pkey_index;
	uint8_t sl;
	uint32_t mtu; /* payload bytes: the port's active MTU or less */
	uint32_t inline_max;
	uint32_t max_sge;

	/* receive: RQ slots of `stride` bytes; the buffer posted at slot +
	 * VB_RXPAD, so the GRH fills [24, 64) and the payload starts at 64 */
	uint32_t rq, stride;
	uint32_t rq_posted; /* receives the QP holds */
	uint32_t *repost;   /* slots waiting to go back */
	uint32_t nrepost;
	struct ibv_wc wc[VB_BURST]; /* polled, not yet handed up */
	int nwc, wcpos;
	uint32_t held[VB_BURST]; /* the burst in the caller's hands */
	int nheld, released;
	uint8_t srcblob[VB_BURST][VB_BLOB];

	/* send: VB_SQ slots of stride bytes after the receive slots; WR
	 * number s uses slot s % VB_SQ.  Signalled WRs carry s in wr_id. */
	uint64_t sq_next; /* WRs posted (and chained) so far */
	uint64_t sq_done; /* WRs known complete */
	struct ibv_send_wr chain[VB_BURST];
	struct ibv_sge sge[VB_BURST][VB_MAX_SGE];
	int nchain;
	uint8_t broken; /* a fatal completion: restart the QP */

	uint32_t events;  /* completion events read, not yet acknowledged */
	uint64_t err_cqe; /* error completions seen (for tests and logs) */
	uint64_t restarts;

	struct vb_peer *peers;
	struct {
		struct ibv_ah *ah;
		uint64_t seq; /* destroy once sq_done reaches it */
	} * dead;
	int ndead, dead_cap;
	int npeers;
	int last_peer;
};

static inline struct verbs_nic *vb_of(rcp_nic *nic)
{
	return (struct verbs_nic *)nic;
}
static inline const struct verbs_nic *vb_ofc(const rcp_nic *nic)
{
	return (const struct verbs_nic *)nic;
}

/* addr.c */
int rcpi_vb_parse_local(const char *rest, char *dev, size_t devlen, uint8_t *port, int *gidx);
int rcpi_vb_addr_str(const rcp_nic *nic, char *buf, size_t len);
int rcpi_vb_addr_blob(const rcp_nic *nic, void *buf, size_t *len);
int rcpi_vb_blob_dest(const void *blob, size_t len, struct vb_dest *d);
void rcpi_vb_dest_blob(const struct vb_dest *d, uint8_t *blob);
int rcpi_vb_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer);
int rcpi_vb_peer_add_str(rcp_nic *nic, const char *addr, int *peer);
int rcpi_vb_peer_remove(rcp_nic *nic, int peer);
int rcpi_vb_peer_find(struct verbs_nic *v, uint32_t qpn, uint16_t lid, const uint8_t *gid);
struct ibv_ah *rcpi_vb_ah(struct verbs_nic *v, const struct vb_dest *d);
int rcpi_vb_ah_retire(struct verbs_nic *v, struct ibv_ah *ah);
void rcpi_vb_ah_reap(struct verbs_nic *v, int all);
void rcpi_vb_peers_free(struct verbs_nic *v); /* after the QP is destroyed */

/* ud.c */
int rcpi_vb_qp_up(struct verbs_nic *v);
int rcpi_vb_rq_fill(struct verbs_nic *v);
int rcpi_vb_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                 unsigned flags);
int rcpi_vb_flush(rcp_nic *nic);
int rcpi_vb_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen);
int rcpi_vb_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max);
void rcpi_vb_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n);
int rcpi_vb_pending(rcp_nic *nic);
int rcpi_vb_restart(struct verbs_nic *v);

#endif
