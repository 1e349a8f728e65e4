/*
 * rcp/mcastnet.h — reliable multicast of whole messages over IP multicast.
 *
 * A sender hands one message to a set of members; every frame of it goes
 * out ONCE, as one datagram to an IP multicast group (nic RCP_NIC_CAP_MCAST),
 * whatever the number of members.  Members acknowledge by unicast to the
 * sender (cumulative, with the ranges they miss); the sender repairs the
 * gaps by unicast to the member that lacks them, keeps at most a window of
 * frames beyond the slowest member's acknowledgement, and gives up on a
 * member silent for dead_ns (its status is then RCP_EPEER: the caller
 * sends it the message another way, e.g. a unicast rcp_isend).  The frames
 * and the rules: docs/protocol.md, "Network multicast".
 *
 * A member receives a message whole into a buffer of its own and holds it
 * until the application claims it by id (the sender passes the id to the
 * members by some ordered path, e.g. a small message on its RCP channel:
 * pvm-glue does so, which keeps pvm_pmcast in order with pvm_psend).
 *
 * Every endpoint is both a sender (one message at a time) and a member of
 * the group.  Frames are attributed by address and epoch (a random number
 * per endpoint): a restarted sender's frames start afresh, stale ones are
 * counted and dropped, as is anything malformed.
 *
 * Threads: one at a time per rcp_mcn.
 */
#ifndef RCP_MCASTNET_H
#define RCP_MCASTNET_H

#include <stddef.h>
#include <stdint.h>

#include <rcp/error.h>
#include <rcp/nic.h>
#include <rcp/wait.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rcp_mcn rcp_mcn;

struct rcp_mcn_config {
	/* The group, "udp:GROUP:PORT" (GROUP in 224.0.0.0/4), or on
	 * InfiniBand "verbs:mcast:MGID" (UADDR a verbs address).  Required. */
	const char *group;
	/* This member's name, as senders list it in rcp_mcn_send (pvm-glue:
	 * the task's RCP udp address).  Required. */
	const char *self_id;
	/* Who may share the group: endpoints with another scope string drop
	 * each other's frames as bad (two PVM virtual machines on one group:
	 * their task names may be the same).  NULL: "". */
	const char *scope;
	/* For both nic endpoints (faults, key, sizes); NULL: defaults. */
	const struct rcp_nic_config *nic;
	/* Frames beyond the slowest member's acknowledgement; 0: 256 (lowered
	 * to half of what the group endpoint's receive buffer holds). */
	uint32_t window;
	/* A member that lacks frames sent and whose acknowledgement has not
	 * moved for this long fails (status RCP_EPEER); 0: 1 s. */
	uint64_t dead_ns;
	/* No acknowledgement for this long: the sender polls the members;
	 * 0: 2 ms. */
	uint64_t rto_ns;
};

struct rcp_mcn_stats {
	/* sender */
	uint64_t msgs_sent;      /* messages done (every member acked or failed) */
	uint64_t data_sent;      /* data frames sent to the group (once each) */
	uint64_t repairs_sent;   /* data frames sent again, by unicast */
	uint64_t polls_sent;     /* acknowledgement requests to the group */
	uint64_t acks_recv;      /* acknowledgements taken */
	uint64_t members_failed; /* members given up on (RCP_EPEER) */
	/* member */
	uint64_t msgs_recv;  /* messages received whole */
	uint64_t bytes_recv; /* their bytes */
	uint64_t data_recv;  /* data frames taken (first copies) */
	uint64_t dup_recv;   /* data frames already held */
	uint64_t acks_sent;
	uint64_t foreign_recv; /* frames of messages for other members */
	uint64_t abandoned;    /* messages left incomplete (the sender moved on) */
	uint64_t unclaimed;    /* whole messages dropped unclaimed (held too many) */
	/* both */
	uint64_t bad_recv;   /* malformed or inconsistent frames dropped */
	uint64_t stale_recv; /* frames of an old message or epoch dropped */
};

/* Opens an endpoint: a unicast nic endpoint at UADDR ("udp:IFADDR:" or
 * "udp:IFADDR:PORT": it sends the data and carries the acknowledgements)
 * and a group endpoint joined on IFADDR's interface.  Returns 0,
 * RCP_EINVAL (NULL, no group or self_id), RCP_ENOTSUP (UADDR's nic has no
 * RCP_NIC_CAP_MCAST), RCP_ENOMEM, RCP_EADDR (UADDR's own address has no
 * port part), or an rcp_nic_open / rcp_nic_peer_add code (the group). */
int rcp_mcn_open(const char *uaddr, const struct rcp_mcn_config *cfg, rcp_mcn **out);
/* Closes M (NULL accepted): leaves the group, frees held messages; a
 * message being sent is abandoned. */
void rcp_mcn_close(rcp_mcn *m);

/* Starts multicasting LEN bytes of BUF (untouched until done) to the N
 * members named in MEMBERS (their self_id).  *ID gets the message's id.
 * Returns 0, RCP_EINVAL, RCP_EBUSY (a message is still being sent),
 * RCP_EMSGSIZE (LEN > 1 GiB), RCP_ENOMEM. */
int rcp_mcn_send(rcp_mcn *m, const char *const *members, int n, const void *buf, size_t len,
                 uint64_t *id);
/* The state of the message being sent: RCP_EAGAIN while in flight, else 0
 * with STATUS[i] (N entries, the members in rcp_mcn_send's order) 0 (has
 * it whole) or RCP_EPEER (failed: send it another way); M is then free
 * for the next message.  RCP_EINVAL: no message sent, or N differs. */
int rcp_mcn_send_status(rcp_mcn *m, int *status, int n);

/* Receives and sends what is due, fires timers.  Returns > 0 if something
 * happened, 0 if not, RCP_EINVAL, RCP_ESYS. */
int rcp_mcn_progress(rcp_mcn *m);
/* The nanoseconds until the next timer (-1: none), for sleepers. */
int64_t rcp_mcn_timeout_ns(const rcp_mcn *m);

/* Takes the whole message ID: *BUF (malloc'd: the caller frees it) and
 * *LEN.  Returns 0, RCP_ENOENT (not here whole: not yet, or never),
 * RCP_EINVAL. */
int rcp_mcn_claim(rcp_mcn *m, uint64_t id, void **buf, size_t *len);

/* A wait source for rcp_ep_wait_add (both fds, progress, timers).  0, or
 * RCP_EINVAL (M or SRC NULL). */
int rcp_mcn_wait_src(rcp_mcn *m, struct rcp_wait_src *src);

/* The unicast endpoint's address.  0, RCP_EINVAL, RCP_ERANGE. */
int rcp_mcn_addr(const rcp_mcn *m, char *buf, size_t len);
/* Copies M's counters into ST.  0, or RCP_EINVAL (M or ST NULL). */
int rcp_mcn_get_stats(const rcp_mcn *m, struct rcp_mcn_stats *st);

#ifdef __cplusplus
}
#endif
#endif
