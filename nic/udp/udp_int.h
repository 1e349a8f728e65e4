/*
 * nic/udp/udp_int.h — the udp backend: one RCP frame is one UDP datagram.
 *
 * Files: addr.c (addresses, MTU and buffer sizing), peers.c (the peer
 * table, the lane, the error queue), tx.c (transmit), rx.c (receive and
 * waiting), udp.c (the endpoint and its ops); this header holds their
 * shared state and the design notes below.
 *
 * The portable backend: any IP network, no privileges, one non-blocking
 * UDP socket per endpoint.  Everything here is about paying as few system
 * calls and copies per frame as the socket API allows, and about never
 * losing a frame silently on our side of the socket.
 *
 * Addressing
 *   "udp:HOST:PORT", "udp:[V6]:PORT", "udp:HOST:" (any free port) and
 *   "udp:" (127.0.0.1, any free port).  HOST is a numeric IPv4 address, a
 *   bracketed numeric IPv6 address (with an optional %scope), or a host
 *   name resolved with getaddrinfo (an IPv4 result is preferred when a
 *   name has both, because "udp:" is IPv4).  The syntax is checked before
 *   getaddrinfo is called, so junk never turns into a DNS query.  An
 *   endpoint talks to peers of its own address family only.
 *   addr_str gives "udp:IP:PORT" / "udp:[IP]:PORT" with the real bound
 *   port.  The blob is compact: byte 0 RCPI_NIC_UDP, byte 1 the family
 *   (4 or 6: our own codes, not the OS's AF_* values), bytes 2-3 the port
 *   in network order, then the 4 or 16 address bytes, then, for a
 *   link-local IPv6 address only, the 4-byte scope id (big-endian):
 *   8, 20 or 24 bytes.  An endpoint bound to a wildcard address (0.0.0.0
 *   or ::) reports that address, which peers refuse: bind to the address
 *   peers should use.
 *
 * Multicast (RCP_NIC_CAP_MCAST, IPv4 only)
 *   "udp:GROUP:PORT@IFADDR" with GROUP in 224.0.0.0/4 opens a group
 *   endpoint: a socket bound to GROUP:PORT with SO_REUSEADDR (every member
 *   on a host binds the same port: the kernel gives each a copy) that
 *   joins GROUP on the interface holding IFADDR (IP_ADD_MEMBERSHIP; the
 *   interface must be named: a namespace's only route may be its LAN's, so
 *   the kernel's pick for 224/4 may be none).  Closing it leaves the group.
 *   It receives the group's datagrams (their source is the sender's own
 *   unicast endpoint) and has no lane.  Sending to the group: any IPv4
 *   endpoint adds "udp:GROUP:PORT" as a peer; that sets IP_MULTICAST_IF to
 *   the endpoint's own address (the group's datagrams leave by the
 *   endpoint's interface, as its unicasts), TTL 1 (one LAN) and LOOP on
 *   (members on the sender's host get a copy), and gives that peer no lane
 *   and no path-MTU probe.  One send to it is one datagram on the wire
 *   whatever the number of members: reliability is rcp/mcastnet.c's.
 *
 * Peers
 *   A table of up to UDP_MAX_PEERS sockaddrs, indexed by the peer index,
 *   and an open-addressing (linear probing, load <= 1/2, backward-shift
 *   deletion, so no tombstones) hash from (family, address, port, scope)
 *   to the index.  Every received datagram's source goes through the hash
 *   once, so mapping a frame to its peer is O(1) whatever the table size.
 *   Adding an address already present returns its index; a full table
 *   gives RCP_EAGAIN; removed indexes are reused (LIFO).  Both arrays are
 *   allocated at full size at open: calloc'd memory that is never touched
 *   costs no RSS, and nothing ever moves, so no rehashing.
 *
 * Sending and batching
 *   A frame sent without RCP_NIC_MORE while nothing is queued goes out at
 *   once with one sendmsg() gathering straight from the caller's iovec:
 *   the latency path does no copying and no bookkeeping.  Frames sent with
 *   RCP_NIC_MORE are queued (up to UDP_TXQ frames, their iovecs copied
 *   into a pool of UDP_TXIOV entries, the data itself referenced, never
 *   copied); the next send without MORE, or rcp_nic_flush(), pushes the
 *   whole queue with one sendmmsg().  A send that finds the queue full
 *   flushes it first.
 *   GSO: with UDP_SEGMENT (RCP_UDP_GSO=1, the default, where offered), a run
 *   of consecutive queued frames to the same peer, all of one size except
 *   a shorter last one, becomes ONE message carrying a UDP_SEGMENT cmsg:
 *   the kernel cuts it into the same datagrams on the wire, but builds
 *   and routes one skb instead of N.  The run's iovecs are already
 *   consecutive in the pool, so the message simply points at them: the
 *   kernel gathers the run itself and no staging copy is needed (the
 *   kernel copies the payload once either way).  Should a GSO message be
 *   refused (no checksum offload on the route, EIO/EINVAL), GSO is turned
 *   off for the endpoint and the frames go out one datagram each.
 *   Back-pressure: EAGAIN/ENOBUFS from the kernel leave the frames queued
 *   (stats.tx_eagain counts kernel push-backs).  Nothing loops inside:
 *   one attempt per call, repeated only while it makes progress.
 *   Return values: send() returning 0 means the frame was sent or queued;
 *   RCP_EAGAIN means THIS frame was not taken (the caller resends it;
 *   frames queued before it stay queued, so order is kept); any other
 *   error means this frame was dropped.  The data of queued frames is
 *   referenced until the queue is empty, i.e. until a flush, or a send
 *   without MORE, returns something other than RCP_EAGAIN.
 *
 * Receiving
 *   UDP_RXB pre-allocated slots, filled by one receive call; frames are
 *   handed out in place from the slots (zero copy) and stay valid until
 *   the next recv (the contract: release before the next recv).  A slot
 *   is rewritten only by the receive that follows the hand-out of every
 *   frame held, so frames not yet handed out (a burst larger than MAX, or
 *   frames stashed by pending()) survive across recv calls.  Each slot
 *   also keeps its sender's blob, so frame.src stays valid until release.
 *   The receive call follows the caller's MAX: recvmmsg for up to MAX
 *   datagrams, or, when the caller takes one frame at a time (ping-pong),
 *   plain recvfrom, which skips the msghdr/iovec import (measured: a
 *   recvmmsg(64) round trip is ~0.3 us slower than recv on a 4 us round
 *   trip, recvfrom ~0.1 us).  pending() uses the MAX of the last recv.
 *   A datagram longer than the slot comes back with MSG_TRUNC and is
 *   dropped and counted (stats.rx_dropped), never delivered cut; frames
 *   longer than the MTU (a peer with a larger one) are dropped and counted
 *   too, so a frame handed out is never longer than info.mtu.
 *   GRO: with UDP_GRO the kernel may hand one buffer holding several
 *   datagrams of one size from one sender (on loopback a GSO send arrives
 *   unsplit), the size in a cmsg; the buffer is split into frames here.
 *   GRO is worth 2x-7x in frames/s for bursts of equal frames, but costs
 *   ~0.13 us per datagram received (measured), so it is turned on only
 *   when a receive burst shows a run of equal datagrams from one sender,
 *   and never turned off again (a buffer coalesced before it went off
 *   would be read without its segment size).  When GRO may be turned on
 *   (RCP_UDP_GSO=1 and the kernel offers it) slots are 64 KiB from the
 *   start: 4 MiB of address space, of which only touched pages cost.
 *
 * Error attribution
 *   IP_RECVERR/IPV6_RECVERR are on, so ICMP errors (port unreachable:
 *   ECONNREFUSED, which is what a peer whose process died produces on
 *   loopback; host/net unreachable) are queued on the socket's error
 *   queue with the ORIGINAL DESTINATION as msg_name.  Draining the queue
 *   (MSG_ERRQUEUE) looks the destination up in the peer hash and marks
 *   that peer: its next send returns RCP_EPEER once (edge-triggered like
 *   a socket error: a peer that comes back on the same port works again,
 *   as the protocol's "either side may arrive first" needs).  A datagram
 *   from a marked peer clears the mark (it is there after all: the ICMP
 *   was for an earlier holder of its port, racing the new bind), and the
 *   queue is drained before a new peer entry is made, so an error about
 *   an address's earlier holder is never blamed on its new one.  The core
 *   takes that RCP_EPEER as a hint (the frame is lost), never as a verdict:
 *   anyone can forge an ICMP error (rcp/handshake.c, HANDSHAKE).
 *   The catch: with IP_RECVERR the kernel also sets the socket's pending
 *   error, which fails the NEXT sendmsg/recvmsg on the socket whatever its
 *   destination (checked: the datagram is then not sent).  So an
 *   ECONNREFUSED-like errno from a send or receive means "drain the error
 *   queue and retry"; the retry succeeds unless the drain marked the very
 *   peer being sent to.  The queue is also drained when the fd polls
 *   POLLERR in arm(), so error-queue skbs (charged to the receive buffer)
 *   never accumulate and a sleeping caller never spins on POLLERR.
 *
 * MTU
 *   RCP_UDP_MTU replaces the detected value; cfg->mtu may only lower it.
 *   Detected: UDP_LO_MTU when bound to a loopback address (the largest
 *   UDP payload, 65507, rounded down for headroom); otherwise the MTU of
 *   the interface holding the bound address (the smallest of the up,
 *   non-loopback interfaces for a wildcard bind) minus 28 (IPv4) or 48
 *   (IPv6) bytes of headers; 1472 if that fails.  A connected probe socket
 *   would report the route to ITSELF (lo) for a local address, so the
 *   interface is read with getifaddrs + SIOCGIFMTU instead; peer_add of a
 *   non-loopback peer then uses a connected probe + IP_MTU to warn when
 *   the path to that peer is narrower than the MTU.
 *   rx_frames: the socket buffer the kernel really granted divided by the
 *   kernel's per-datagram charge (truesize: measured on 6.x loopback, see
 *   rcpi_udp_truesize).  The buffer is shared by all senders.
 *
 * Lane
 *   A UDP send on an unconnected socket looks the route up every time; on
 *   a connected one the route is cached.  Measured here (two processes,
 *   56 B ping-pong on loopback, 8 alternating rounds, medians): sendto on
 *   unconnected sockets 7.3-7.7 us round trip, send on connected ones
 *   6.3-6.9, on a lane as below 6.8-7.0.  But a connected socket
 *   takes datagrams from its peer only, and an endpoint must take them
 *   from anyone (the protocol's "either side may arrive first", servers).
 *   So the endpoint's first peer gets a lane: a second socket bound to our
 *   own address and port and connected to that peer.  The kernel hands a
 *   datagram to the socket that matches it best, so the peer's datagrams
 *   come to the lane and everybody else's to the main socket; small lone
 *   frames to the peer go out through the lane without an address
 *   (batches and GSO still go through the main socket: a batch pays one
 *   route lookup for many frames).  Binding a second socket to our port
 *   needs SO_REUSEADDR on both; it is set only while the lane binds, so
 *   any other bind to our port still fails with EADDRINUSE.  Removing the
 *   lane's peer closes the lane; the next peer added gets a new one.
 *   Receiving then takes two sockets: each fill looks at the lane, and at
 *   the main socket every UDP_MAIN_EVERY-th fill or, for UDP_MAIN_HOT
 *   fills after it delivered, every fill; the two take turns at going
 *   first, so neither starves the other.  Frames are mapped to peers by
 *   their source address whichever socket they come from (a datagram may
 *   reach the lane before it is connected, or the main socket from the
 *   lane's peer before the lane existed: both harmless).
 *   Sleeping with a lane needs ppoll on both sockets and then a receive,
 *   where one socket sleeps in the receive call itself (see Waiting):
 *   measured, a sleeping 8 B ping-pong was 1.16-1.22x the kernel socket
 *   with a lane and 1.09-1.10x without.  So an endpoint that sleeps in
 *   every wait (RCP_NIC_SLEEPER, set by RCP_EP_SLEEP endpoints) has no
 *   lane; RCP_UDP_LANE=0 turns lanes off for everybody.
 *   The wait fd must be one fd for the endpoint's lifetime and a lane may
 *   come after it is handed out, so with lanes possible it is an epoll set
 *   made on the first rcp_nic_fd() call.  The sockets are in the set only
 *   from arm() (the contract: arm before sleeping on the fd) to the next
 *   receive: a socket in an epoll set costs every datagram delivered to it
 *   a call into the set (~0.3 us per datagram measured here, spinning or
 *   not), which would eat the lane's gain.
 *
 * Waiting
 *   The fd is the socket (or, with lanes possible, the epoll set above).
 *   pending() (called while spinning) does one
 *   non-blocking receive and STASHES what it gets for the next recv():
 *   UDP needs a system call to look anyway, and this way the spin loop's
 *   last call is the receive itself.  arm() returns RCP_EAGAIN if frames
 *   are stashed, else polls the socket once without blocking (POLLIN:
 *   RCP_EAGAIN; POLLERR: drain the error queue and look again).
 *   recv_wait() sleeps in the receive call itself, one system call per
 *   wake-up where arm + ppoll + receive make three: the socket is
 *   blocking and every other call passes MSG_DONTWAIT.  The sleep is
 *   bounded by SO_RCVTIMEO, which the kernel keeps in ticks (rounding a
 *   sleep up by up to one), so sleeps under 1 ms go through ppoll; the
 *   option is re-set only when the one in force would sleep past the
 *   timeout or wake before half of it (steady waits set it once).  With a
 *   lane every sleep is ppoll on both sockets, then a receive.
 *   Time alone (rcp_nic_info.solo_ns): a waiter spins alone 5 us past its
 *   last event, then offers the CPU (sched_yield) at each look
 *   (common/wait.c).  An 8 B round trip between two rcp-cluster hosts is
 *   11-14 us (veth, bridge and nft on the sender's CPU, each way), so every
 *   one of them yielded, ~2.6 sched_yield per round trip counted with
 *   perf stat (session 21), each a system call while the answer may be
 *   landing.  An endpoint not bound to loopback therefore asks for
 *   UDP_SOLO_NS (50 us, as xdp): a LAN's round trip is longer still, and
 *   an answer later than that is not coming soon.  On loopback (5-7 us)
 *   the library's 5 us stays: there the peer may share our CPU.
 *
 * Invariants
 *   - rx_slot <= rx_n; slots [rx_slot, rx_n) hold frames not yet handed
 *     out (rx_off bytes of slot rx_slot already handed out); slot headers
 *     [0, rx_n) are reset before the next receive, the others are intact.
 *   - outstanding > 0 (frames handed out, not released) forbids a
 *     receive from pending(); recv() ends the previous burst.
 *   - queue entries are in send order, their iovecs consecutive and in
 *     the same order in the pool; a frame the caller is sending without
 *     MORE is always the last entry.
 *   - lfd >= 0 <=> lpeer >= 0, and then peers[lpeer].used; the sockets
 *     are in efd iff watching.
 *   - hash entries hold index+1 (0 is empty); peers[i].used <=> i is in
 *     the hash.
 *
 * Threading: none; one thread per endpoint (nic.h).
 */
#ifndef RCP_NIC_UDP_INT_H
#define RCP_NIC_UDP_INT_H

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/errqueue.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nic/nic_int.h"

#define UDP_MAX_PEERS     4096  /* peer table size */
#define UDP_HASH_SIZE     8192  /* >= 2 * UDP_MAX_PEERS, power of two */
#define UDP_TXQ           64    /* frames batched with RCP_NIC_MORE */
#define UDP_TXIOV         256   /* iovecs those frames may use in all */
#define UDP_IOV_MAX       1024  /* UIO_MAXIOV: most iovecs one frame may have */
#define UDP_RXB           64    /* receive slots: datagrams per recvmmsg */
#define UDP_GRO_SLOT      65536 /* slot size when GRO may coalesce */
#define UDP_GSO_MAXSEG    64    /* UDP_MAX_SEGMENTS on older kernels */
#define UDP_GSO_MAXBYTES  65000 /* payload of one GSO message (< 65507) */
#define UDP_LO_MTU        65000 /* default MTU on loopback */
#define UDP_FALLBACK_MTU  1472
#define UDP_HOST_MAX      253 /* longest DNS name */
#define UDP_BLOB_MAX      24
#define UDP_RETRIES       2 /* drain-and-retry rounds for a stale socket error */
#define UDP_RX_FRAMES_MAX 4096
#define UDP_GRO_RUN       4   /* same-size datagrams in a burst that turn GRO on */
#define UDP_SMALL_FRAME   256 /* frames up to this are gathered and sent by sendto */
#define UDP_MAIN_EVERY    4   /* with a lane: idle fills per look at the main socket */
#define UDP_MAIN_HOT      8   /* fills that look at it after it delivered */

/* a waiter's time alone off loopback, ns (see "Waiting") */
#define UDP_SOLO_NS 50000u

union udp_sa {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/* What identifies a peer; zero-padded so it can be compared with memcmp. */
struct udp_key {
	uint32_t addr[4]; /* IPv4: addr[0] only */
	uint32_t scope;   /* IPv6 link-local only, else 0 */
	uint16_t port;    /* network order */
	uint8_t fam;      /* 4 or 6 */
	uint8_t pad;
};

struct udp_peer {
	union udp_sa sa;
	struct udp_key key;
	uint32_t hash;
	int16_t err; /* RCP_EPEER to report on the next send, or 0 */
	uint8_t used;
	uint8_t warned; /* path-MTU warning given */
};

struct udp_txent {
	int32_t peer;
	uint32_t len;
	uint16_t iov_off, iovcnt;
};

union udp_ctl {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(int))];
};

struct udp_nic {
	struct rcp_nic base; /* first: see nic_int.h */
	int fd;
	int family;
	uint8_t loopback, gso;
	uint8_t gro_ok; /* UDP_GRO may be turned on (and slots are 64 KiB) */
	uint8_t gro;    /* UDP_GRO is on: coalesced buffers may arrive */
	uint32_t mtu, rx_frames, gso_seg_max;
	size_t rxstride;
	/* hot scalars together: the receive cursor and queue counters */
	int rx_n, rx_slot;
	int rx_want; /* datagrams per receive call: the caller's last MAX */
	uint32_t rx_off, rx_seg;
	uint32_t outstanding;
	uint8_t rx_dry;      /* the last receive call found the socket empty (rcpi_udp_arm) */
	int64_t rcvtimeo_ns; /* SO_RCVTIMEO now set (0: none, sleeps forever) */
	int txn, txniov;
	unsigned char *rxbuf;
	size_t rcv_want, snd_want; /* socket buffers asked for (the lane gets the same) */

	/* the lane (see "Lane" above) */
	int lfd;   /* socket connected to peer lpeer, or -1 */
	int lpeer; /* -1: no lane */
	int efd;   /* epoll set of fd and lfd: the fd callers wait on, made by rcpi_udp_fd() */
	uint8_t watching;  /* the sockets are in efd now: from arm() to the next receive */
	uint8_t lane_ok;   /* RCP_UDP_LANE */
	uint8_t rx_turn;   /* 1: the next fill tries the main socket first */
	uint8_t main_hot;  /* fills left that must look at the main socket */
	uint8_t main_skip; /* fills since the main socket was last looked at */
	uint8_t mcast_tx;  /* IP_MULTICAST_IF/TTL/LOOP are set (a group peer was added) */
	uint8_t group;     /* a group endpoint (see "Multicast"): joined at ifaddr */
	struct in_addr ifaddr;
	union udp_sa self;

	/* peers */
	struct udp_peer *peers; /* UDP_MAX_PEERS */
	uint32_t *hash;         /* UDP_HASH_SIZE: peer index + 1, 0 = empty */
	int32_t *freel;         /* removed indexes, reused first */
	int nfree, hiwater, npeers;

	/* transmit queue (RCP_NIC_MORE) */
	struct udp_txent txq[UDP_TXQ];
	struct iovec txiov[UDP_TXIOV];
	struct mmsghdr txmsg[UDP_TXQ];
	uint8_t txcnt[UDP_TXQ];  /* frames in each built message */
	uint32_t txlen[UDP_TXQ]; /* bytes in each built message */
	union udp_ctl txctl[UDP_TXQ];

	/* receive slots */
	struct mmsghdr rxmsg[UDP_RXB];
	struct iovec rxiov[UDP_RXB];
	union udp_sa rxsrc[UDP_RXB];
	union udp_ctl rxctl[UDP_RXB];
	int32_t rxpeer[UDP_RXB];
	uint8_t rxbloblen[UDP_RXB];
	uint8_t rxblob[UDP_RXB][UDP_BLOB_MAX];
};

static inline struct udp_nic *udp_of(rcp_nic *nic)
{
	return (struct udp_nic *)nic;
}

static inline const struct udp_nic *udp_ofc(const rcp_nic *nic)
{
	return (const struct udp_nic *)nic;
}

/* addr.c: addresses, MTU and buffer sizing */
socklen_t rcpi_udp_sa_len(const union udp_sa *sa);
int rcpi_udp_v6_needs_scope(const struct in6_addr *a);
int rcpi_udp_sa_is_loopback(const union udp_sa *sa);
int rcpi_udp_sa_is_unspecified(const union udp_sa *sa);
int rcpi_udp_sa_is_mcast(const union udp_sa *sa);
uint16_t rcpi_udp_sa_port(const union udp_sa *sa);
int rcpi_udp_sa_to_key(const union udp_sa *sa, struct udp_key *k);
uint32_t rcpi_udp_key_hash(const struct udp_key *k);
uint32_t rcpi_udp_sa_to_blob(const union udp_sa *sa, uint8_t *b);
int rcpi_udp_blob_to_sa(const uint8_t *b, size_t len, union udp_sa *sa);
int rcpi_udp_parse(const char *rest, int passive, int family, union udp_sa *sa);
uint32_t rcpi_udp_iface_mtu(int fd, const union udp_sa *self);
uint64_t rcpi_udp_truesize(uint32_t len);
int rcpi_udp_set_buf(int fd, int force, int plain, size_t want);
size_t rcpi_udp_env_size(const char *name, int64_t def);
void rcpi_udp_check_path_mtu(struct udp_nic *u, struct udp_peer *p);

/* peers.c: the peer table, the lane and the error queue */
int rcpi_udp_peer_of_sa(const struct udp_nic *u, const union udp_sa *sa);
void rcpi_udp_hash_remove(struct udp_nic *u, int idx);
void rcpi_udp_watch(struct udp_nic *u, int on);
void rcpi_udp_lane_close(struct udp_nic *u);
int rcpi_udp_peer_insert(struct udp_nic *u, const union udp_sa *sa, int *out);
int rcpi_udp_is_async_err(int err);
void rcpi_udp_drain_fd(struct udp_nic *u, int fd);
void rcpi_udp_drain_errq(struct udp_nic *u);

/* tx.c: transmit */
void rcpi_udp_tx_count(struct udp_nic *u, uint32_t frames, uint64_t bytes);
int rcpi_udp_txq_flush(struct udp_nic *u, int cur, int *cur_rc);
int rcpi_udp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                  unsigned flags);
int rcpi_udp_flush(rcp_nic *nic);

/* rx.c: receive and waiting */
int rcpi_udp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max);
void rcpi_udp_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n);
int rcpi_udp_fd(const rcp_nic *nic);
int rcpi_udp_arm(rcp_nic *nic);
int rcpi_udp_recv_wait(rcp_nic *nic, struct rcp_nic_frame *fr, int max, int64_t timeout_ns);
int rcpi_udp_pending(rcp_nic *nic);

#endif
