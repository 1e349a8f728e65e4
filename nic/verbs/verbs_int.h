/*
 * nic/verbs/verbs_int.h — between the verbs backend's files.
 *
 *   verbs.c  open/close, the ops table, sleeping        (uses rc.c, mr.c, ud.c, addr.c)
 *   rc.c     RC queue pairs per peer, RDMA READ/WRITE  (uses mr.c, ud.c, addr.c)
 *   mr.c     registrations: peers' regions, the cache   (uses memwatch.c, api.c)
 *   memwatch.c unmapped memory, for the cache (process-wide userfaultfd)
 *   ud.c     the UD queue pair: send, receive, repost   (uses addr.c)
 *   addr.c   address strings and blobs, peers, AHs      (uses mcjoin.c, api.c)
 *   mcjoin.c multicast joins counted per process       (uses api.c)
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

/* Control datagrams (rc.c) ride the UD QP as SEND_WITH_IMM with this
 * immediate; RCP's frames are plain SENDs, so nothing of ours prefixes them. */
#define VB_CTL_IMM 0x52435243u
#define VB_CTL_LEN 16u
#define VB_CTLQ    32
#define VB_PARKED  8              /* REQs kept from senders not yet peers (rc.c) */
#define VB_RKEY    24u            /* packed remote key: see mr.c */
#define VB_REGS    64             /* cached local registrations (mr.c) */
#define VB_REG_MAX (256ull << 20) /* bytes the cache may pin */

/* Blob flags. */
enum { VB_F_GID = 1u << 0, VB_F_MC = 1u << 1 };

#define VB_MC_QPN 0xffffffu /* a UD send to a multicast group */

/* A destination: where a UD send goes. */
struct vb_dest {
	uint32_t qpn;
	uint16_t lid;
	uint8_t has_gid;
	uint8_t mc; /* a multicast group: LID = MLID, GID = MGID */
	uint8_t gid[16];
};

/* One RC queue pair towards a peer (rc.c). */
struct vb_rc {
	struct ibv_qp *qp;
	uint32_t psn;     /* ours: the first PSN we send */
	uint32_t rqpn;    /* the peer's QP at the other end, once known */
	uint8_t up;       /* RTS and connected */
	uint32_t tries;   /* REQs sent (out) */
	uint64_t next_ns; /* when the next REQ goes (out, not up) */
};

struct vb_peer {
	struct vb_dest d;
	struct ibv_ah *ah;
	uint8_t used;
	uint8_t joined; /* a group added by string: its SA join is ours to leave */
	/* out: ours, for our get/put; in: made on the peer's REQ, for its
	 * get/put into our regions (rc.c, CONNECTIONS) */
	struct vb_rc *out, *in;
};

/* A control datagram taken off the UD QP, for rc.c. */
struct vb_ctl {
	int32_t peer;
	uint8_t b[VB_CTL_LEN];
};

/* A REQ from a sender not yet added as a peer, kept for when it is. */
struct vb_parked {
	struct vb_dest src;
	uint8_t used;
	uint8_t b[VB_CTL_LEN];
};

/* A cached local registration (mr.c). */
struct vb_reg {
	uintptr_t lo, hi;
	struct ibv_mr *mr;
	uint64_t used; /* LRU tick */
};

/* Counters of the RMA side, for tests and logs. */
struct rcpi_vb_rma_stats {
	uint64_t gets, puts, rma_bytes;
	uint64_t rejected;    /* hostile keys/offsets/lengths refused, no WR posted */
	uint64_t remote_err;  /* remote access errors the HCA reported */
	uint64_t ctl_dropped; /* malformed or unattributable control datagrams */
	uint64_t ctl_sent, connects, accepts;
	uint64_t gave_up; /* connections no answer came for (REQ_TRIES REQs) */
	uint64_t rc_made; /* RC QPs made, out and in (on demand since session 21) */
	uint64_t parked;  /* REQs kept from a sender not yet a peer, answered once it is */
	uint64_t not_yet; /* transfers refused at once (RCP_ENOTSUP): the out QP not up yet */
	uint64_t reg_hits, reg_misses, reg_evicted, reg_invalidated;
	uint64_t reg_unmapped;  /* entries dropped: their memory was unmapped (memwatch.c) */
	uint64_t reg_unwatched; /* registrations for one transfer: memory not watchable */
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
	struct ibv_wc *wc; /* polled, not yet handed up: RQ entries (rcpi_vb_pump) */
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

	/* a group endpoint ("verbs:mcast:MGID@DEV:PORT"): its QP attached */
	uint8_t group, attached;
	uint8_t mgid[16];
	uint16_t mlid;

	/* RC side (rc.c, mr.c) */
	struct ibv_cq *rc_cq;
	enum ibv_mtu path_mtu;
	uint8_t rd_atom;
	struct vb_ctl ctl[VB_CTLQ];
	int nctl;
	struct vb_parked park[VB_PARKED];
	int park_next;
	int rc_waiting; /* out connections not up yet */
	uint64_t rma_seq;
	struct vb_reg regs[VB_REGS];
	int nregs;
	uint64_t reg_tick;
	size_t reg_bytes;
	int watch;          /* memwatch.c: 1 open, -1 unavailable, 0 not tried */
	uint64_t watch_seq; /* ranges taken from it so far */
	struct vb_mr *mrs;  /* peers' regions, for close */
	struct rcpi_vb_rma_stats rs;
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
int rcpi_vb_parse_group(const char *rest, uint8_t *mgid, const char **local);
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

/* addr.c */
void rcpi_vb_ah_attr(const struct verbs_nic *v, const struct vb_dest *d, struct ibv_ah_attr *a);

/* mcjoin.c: 0 or a negative RCP_E* code (api.h's sa_join) */
int rcpi_vb_mc_join(struct verbs_nic *v, const uint8_t *mgid, uint16_t *mlid);
void rcpi_vb_mc_leave(struct verbs_nic *v, const uint8_t *mgid);

/* mr.c */
int rcpi_vb_mr_reg(rcp_nic *nic, void *addr, size_t len, unsigned access, rcp_nic_mr **out);
int rcpi_vb_mr_dereg(rcp_nic_mr *mr);
int rcpi_vb_mr_pack(const rcp_nic_mr *mr, void *rkey, size_t *len);
struct vb_key {
	uint64_t addr, len;
	uint32_t rkey;
	uint8_t access; /* RCP_NIC_ACCESS_* */
};
int rcpi_vb_key_parse(const void *rkey, size_t rkeylen, struct vb_key *k);
struct ibv_mr *rcpi_vb_reg_find(struct verbs_nic *v, const void *p, size_t len, int *temp);
void rcpi_vb_reg_invalidate(struct verbs_nic *v, uintptr_t lo, uintptr_t hi);
void rcpi_vb_mr_free_all(struct verbs_nic *v);

/* memwatch.c: ranges unmapped since *seq (a process-wide userfaultfd). */
int rcpi_vb_watch_open(uint64_t *seq);
void rcpi_vb_watch_close(void);
int rcpi_vb_watch_add(uintptr_t lo, uintptr_t hi);
int rcpi_vb_watch_take(uint64_t *seq, uintptr_t (*out)[2], int max);
uint64_t rcpi_vb_watch_events(void);

/* rc.c */
int rcpi_vb_rc_start(struct verbs_nic *v, int peer);
void rcpi_vb_rc_park(struct verbs_nic *v, const struct vb_dest *src, const uint8_t *b);
int rcpi_vb_rc_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer);
int rcpi_vb_rc_peer_add_str(rcp_nic *nic, const char *addr, int *peer);
void rcpi_vb_rc_drop(struct verbs_nic *v, int peer);
void rcpi_vb_rc_ctl(struct verbs_nic *v);
void rcpi_vb_rc_timers(struct verbs_nic *v);
int rcpi_vb_get(rcp_nic *nic, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                uint64_t offset);
int rcpi_vb_put(rcp_nic *nic, int peer, const void *local, size_t len, const void *rkey,
                size_t rkeylen, uint64_t offset);
void rcpi_vb_rc_free(struct verbs_nic *v);
/* NIC's counters, through wrappers (faults, auth); RCP_EINVAL if none is verbs. */
int rcpi_vb_rma_counters(const rcp_nic *nic, struct rcpi_vb_rma_stats *st);

/* ud.c */
int rcpi_vb_send_ctl(struct verbs_nic *v, int peer, const uint8_t *b);
int rcpi_vb_pump(struct verbs_nic *v);
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
