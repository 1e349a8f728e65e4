/*
 * nic/nic_int.h — what a nic backend implements.
 *
 * Each backend lives in one file or folder (nic/shm/, nic/udp/, nic/faults.c, ...)
 * and exports one `const struct rcpi_nic_ops` table.  nic/nic.c holds the
 * table of built backends and the public entry points, which check
 * arguments that need no backend knowledge and then call through the ops.
 * A backend that is not built is simply absent from that table.
 *
 * A backend's endpoint struct embeds `struct rcp_nic` as its FIRST member,
 * so a `rcp_nic *` can be cast to the backend's type.
 */
#ifndef RCP_NIC_INT_H
#define RCP_NIC_INT_H

#include <rcp/nic.h>

#include "common/rcp_common.h"

/* First byte of every address blob: which backend it belongs to. */
enum rcpi_nic_id {
	RCPI_NIC_SHM = 1,
	RCPI_NIC_UDP = 2,
	RCPI_NIC_XDP = 3,   /* AF_XDP backend (nic/xdp/) */
	RCPI_NIC_VERBS = 4, /* rdma-core backend (nic/verbs/) */
};

struct rcpi_nic_ops {
	const char *name; /* address prefix before ':' */
	uint8_t id;       /* enum rcpi_nic_id */

	/* REST is the address after "name:".  Must fill nic->ops. */
	int (*open)(const char *rest, const struct rcp_nic_config *cfg, rcp_nic **out);
	void (*close)(rcp_nic *nic);
	void (*query)(const rcp_nic *nic, struct rcp_nic_info *info);
	int (*addr_str)(const rcp_nic *nic, char *buf, size_t len);
	int (*addr_blob)(const rcp_nic *nic, void *buf, size_t *len);
	/* BLOB[0] == id has been checked. */
	int (*peer_add)(rcp_nic *nic, const void *blob, size_t len, int *peer);
	/* ADDR is the whole string ("udp:1.2.3.4:5"); a backend refuses
	 * another backend's prefix with RCP_EADDR. */
	int (*peer_add_str)(rcp_nic *nic, const char *rest, int *peer);
	int (*peer_remove)(rcp_nic *nic, int peer);
	int (*send)(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
	            unsigned flags);
	int (*flush)(rcp_nic *nic);
	int (*recv)(rcp_nic *nic, struct rcp_nic_frame *frames, int max);
	void (*release)(rcp_nic *nic, struct rcp_nic_frame *frames, int n);
	int (*fd)(const rcp_nic *nic);
	int (*arm)(rcp_nic *nic);
	/* Cheap check used while spinning: nonzero if frames may be waiting. */
	int (*pending)(rcp_nic *nic);
	/* Optional: recv() that sleeps up to about TIMEOUT_NS (<0: forever)
	 * when nothing is there (NULL: arm, poll the fd, receive). */
	int (*recv_wait)(rcp_nic *nic, struct rcp_nic_frame *frames, int max, int64_t timeout_ns);
	/* Optional (NULL: RCP_ENOTSUP). */
	int (*mr_reg)(rcp_nic *nic, void *addr, size_t len, unsigned access, rcp_nic_mr **out);
	int (*mr_dereg)(rcp_nic_mr *mr);
	int (*mr_pack)(const rcp_nic_mr *mr, void *rkey, size_t *len);
	int (*get)(rcp_nic *nic, int peer, void *local, size_t len, const void *rkey,
	           size_t rkeylen, uint64_t offset);
	int (*put)(rcp_nic *nic, int peer, const void *local, size_t len, const void *rkey,
	           size_t rkeylen, uint64_t offset);
	/* Optional: sends one FRAME to the address BLOB (BLOB[0] == id
	 * checked) without making a peer of it, at once, best effort: the
	 * cookie challenge of an accepting endpoint (rcp/handshake.c HANDSHAKE),
	 * which must keep no state for an unknown sender. */
	int (*send_to)(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen);
};

/* The part of every endpoint the dispatcher owns. */
struct rcp_nic {
	const struct rcpi_nic_ops *ops;
	struct rcp_nic_stats stats; /* backends update the counters */
	int64_t spin_ns;            /* default spin before sleeping */
};

/* A registration; backends embed it first in their own struct. */
struct rcp_nic_mr {
	rcp_nic *nic;
};

/* NIC's send_to (above), for rcp/endpoint.c; RCP_ENOTSUP where the
 * backend has none. */
int rcpi_nic_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen);
int rcpi_nic_has_send_to(const rcp_nic *nic);

extern const struct rcpi_nic_ops rcpi_nic_shm_ops;
extern const struct rcpi_nic_ops rcpi_nic_udp_ops;
extern const struct rcpi_nic_ops rcpi_nic_xdp_ops;   /* HAVE_XDP only */
extern const struct rcpi_nic_ops rcpi_nic_verbs_ops; /* HAVE_VERBS only */

/* A wrapper endpoint (faults, auth) starts with this; nic/wrap.c's ops
 * forward what the wrapper leaves as it is to INNER. */
struct rcpi_nic_wrap {
	struct rcp_nic base; /* first: the dispatcher casts */
	rcp_nic *inner;
};
int rcpi_wrap_addr_str(const rcp_nic *nic, char *buf, size_t len);
int rcpi_wrap_addr_blob(const rcp_nic *nic, void *buf, size_t *len);
int rcpi_wrap_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer);
int rcpi_wrap_peer_add_str(rcp_nic *nic, const char *addr, int *peer);
int rcpi_wrap_fd(const rcp_nic *nic);
int rcpi_wrap_mr_reg(rcp_nic *nic, void *addr, size_t len, unsigned access, rcp_nic_mr **out);
int rcpi_wrap_get(rcp_nic *nic, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                  uint64_t offset);
int rcpi_wrap_put(rcp_nic *nic, int peer, const void *local, size_t len, const void *rkey,
                  size_t rkeylen, uint64_t offset);

/* Wraps INNER in the fault injector configured by SPEC.  On success the
 * wrapper owns INNER.  Returns 0, RCP_EINVAL (bad spec), RCP_ENOMEM. */
int rcpi_nic_faults_wrap(rcp_nic *inner, const char *spec, rcp_nic **out);

/* Wraps INNER so that every frame carries a MAC under the job key derived
 * from KEY (nic/auth.c).  On success the wrapper owns INNER.  Returns 0,
 * RCP_EINVAL, RCP_ENOMEM, RCP_ESYS, RCP_ENOTSUP (built without libsodium). */
int rcpi_nic_auth_wrap(rcp_nic *inner, const char *key, rcp_nic **out);

/* Parses a fault spec without opening anything (for tools and tests).
 * Returns 0 or RCP_EINVAL. */
struct rcpi_faults_spec {
	double drop, dup, reorder, corrupt, delay;
	uint64_t delay_ns;
	uint64_t seed;
};
int rcpi_faults_parse(const char *spec, struct rcpi_faults_spec *out);

/* Total bytes of an iovec, or -1 if any length is absurd. */
static inline int64_t rcpi_iov_total(const struct iovec *iov, int iovcnt)
{
	uint64_t t = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (1ull << 40) || (!iov[i].iov_base && iov[i].iov_len))
			return -1;
		t += iov[i].iov_len;
	}
	return (int64_t)t;
}

#endif
