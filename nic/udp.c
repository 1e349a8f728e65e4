/*
 * nic/udp.c — the udp backend: one RCP frame is one UDP datagram.
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
 *   udp_truesize).  The buffer is shared by all senders.
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
	uint8_t rx_dry;      /* the last receive call found the socket empty (udp_arm) */
	int64_t rcvtimeo_ns; /* SO_RCVTIMEO now set (0: none, sleeps forever) */
	int txn, txniov;
	unsigned char *rxbuf;
	size_t rcv_want, snd_want; /* socket buffers asked for (the lane gets the same) */

	/* the lane (see "Lane" above) */
	int lfd;           /* socket connected to peer lpeer, or -1 */
	int lpeer;         /* -1: no lane */
	int efd;           /* epoll set of fd and lfd: the fd callers wait on, made by udp_fd() */
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

/* ---- addresses --------------------------------------------------------- */

static socklen_t sa_len(const union udp_sa *sa)
{
	return sa->sa.sa_family == AF_INET6 ? sizeof sa->in6 : sizeof sa->in;
}

static int v6_needs_scope(const struct in6_addr *a)
{
	return IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_MC_LINKLOCAL(a);
}

static int sa_is_loopback(const union udp_sa *sa)
{
	if (sa->sa.sa_family == AF_INET)
		return (ntohl(sa->in.sin_addr.s_addr) >> 24) == 127;
	if (IN6_IS_ADDR_LOOPBACK(&sa->in6.sin6_addr))
		return 1;
	return IN6_IS_ADDR_V4MAPPED(&sa->in6.sin6_addr) && sa->in6.sin6_addr.s6_addr[12] == 127;
}

static int sa_is_unspecified(const union udp_sa *sa)
{
	if (sa->sa.sa_family == AF_INET)
		return sa->in.sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&sa->in6.sin6_addr);
}

static int sa_is_mcast(const union udp_sa *sa)
{
	return sa->sa.sa_family == AF_INET && IN_MULTICAST(ntohl(sa->in.sin_addr.s_addr));
}

static uint16_t sa_port(const union udp_sa *sa)
{
	return sa->sa.sa_family == AF_INET6 ? sa->in6.sin6_port : sa->in.sin_port;
}

static int sa_to_key(const union udp_sa *sa, struct udp_key *k)
{
	memset(k, 0, sizeof *k);
	if (sa->sa.sa_family == AF_INET) {
		k->addr[0] = sa->in.sin_addr.s_addr;
		k->port = sa->in.sin_port;
		k->fam = 4;
		return 0;
	}
	if (sa->sa.sa_family == AF_INET6) {
		memcpy(k->addr, &sa->in6.sin6_addr, 16);
		/* The kernel reports a scope id for link-local sources only;
		 * drop any other so a peer added as "[2001:db8::1%2]" still
		 * matches its frames. */
		if (v6_needs_scope(&sa->in6.sin6_addr))
			k->scope = sa->in6.sin6_scope_id;
		k->port = sa->in6.sin6_port;
		k->fam = 6;
		return 0;
	}
	return -1;
}

static uint32_t key_hash(const struct udp_key *k)
{
	uint64_t h;

	h = ((uint64_t)k->addr[0] << 32 | k->addr[1]) * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)k->addr[2] << 32 | k->addr[3]) * 0xc2b2ae3d27d4eb4full;
	h ^= ((uint64_t)k->scope << 32 | (uint64_t)k->port << 8 | k->fam) * 0x165667b19e3779f9ull;
	h ^= h >> 31;
	h *= 0xd6e8feb86659fd93ull;
	return (uint32_t)(h >> 32);
}

/* Writes SA's blob into B (UDP_BLOB_MAX bytes); returns its length, or 0
 * for an address of no family we know. */
static uint32_t sa_to_blob(const union udp_sa *sa, uint8_t *b)
{
	b[0] = RCPI_NIC_UDP;
	if (sa->sa.sa_family == AF_INET) {
		b[1] = 4;
		memcpy(b + 2, &sa->in.sin_port, 2);
		memcpy(b + 4, &sa->in.sin_addr, 4);
		return 8;
	}
	if (sa->sa.sa_family == AF_INET6) {
		uint32_t scope = sa->in6.sin6_scope_id;
		b[1] = 6;
		memcpy(b + 2, &sa->in6.sin6_port, 2);
		memcpy(b + 4, &sa->in6.sin6_addr, 16);
		if (!scope || !v6_needs_scope(&sa->in6.sin6_addr))
			return 20;
		scope = htonl(scope);
		memcpy(b + 20, &scope, 4);
		return 24;
	}
	return 0;
}

static int blob_to_sa(const uint8_t *b, size_t len, union udp_sa *sa)
{
	memset(sa, 0, sizeof *sa);
	if (len < 2 || b[0] != RCPI_NIC_UDP)
		return RCP_EADDR;
	if (b[1] == 4 && len == 8) {
		sa->in.sin_family = AF_INET;
		memcpy(&sa->in.sin_port, b + 2, 2);
		memcpy(&sa->in.sin_addr, b + 4, 4);
		return 0;
	}
	if (b[1] == 6 && (len == 20 || len == 24)) {
		sa->in6.sin6_family = AF_INET6;
		memcpy(&sa->in6.sin6_port, b + 2, 2);
		memcpy(&sa->in6.sin6_addr, b + 4, 16);
		if (len == 24) {
			uint32_t scope;
			memcpy(&scope, b + 20, 4);
			sa->in6.sin6_scope_id = ntohl(scope);
		}
		return 0;
	}
	return RCP_EADDR;
}

/* Host syntax, checked before getaddrinfo so that junk is refused locally
 * instead of becoming a DNS query.  *NUMERIC is set when HOST must be a
 * numeric address (bracketed IPv6, or only digits and dots: a real host
 * name never is). */
static int host_ok(const char *host, int bracketed, int *numeric)
{
	size_t n = strlen(host), label = 0;

	if (!n || n > UDP_HOST_MAX)
		return 0;
	if (bracketed) {
		const char *pct = strchr(host, '%');
		size_t alen = pct ? (size_t)(pct - host) : n;
		*numeric = 1;
		if (!alen || strspn(host, "0123456789abcdefABCDEF:.") != alen ||
		    !memchr(host, ':', alen))
			return 0;
		if (pct && (!pct[1] || strspn(pct + 1, "abcdefghijklmnopqrstuvwxyz"
		                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
		                           strlen(pct + 1)))
			return 0;
		return 1;
	}
	*numeric = strspn(host, "0123456789.") == n;
	if (*numeric)
		return 1;
	/* RFC 1123 names: labels of 1-63 letters, digits, '-' (and '_',
	 * seen in the wild), not starting or ending with '-'. */
	for (size_t i = 0; i <= n; i++) {
		char c = host[i];
		if (c == '.' || !c) {
			if (!label || host[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return 0;
		if (c == '-' && !label)
			return 0;
		if (++label > 63)
			return 0;
	}
	return 1;
}

/* Parses REST ("HOST:PORT", "[V6]:PORT", "HOST:", or "" when PASSIVE, i.e.
 * for binding) into SA.  FAMILY restricts the result (AF_UNSPEC: either,
 * IPv4 preferred).  Peers (PASSIVE == 0) need a port and a host. */
static int udp_parse(const char *rest, int passive, int family, union udp_sa *sa)
{
	char host[UDP_HOST_MAX + 1], portstr[8];
	const char *h, *hend, *port;
	struct addrinfo hints, *res = NULL, *ai, *pick = NULL;
	int bracketed = 0, numeric = 0, rc;
	unsigned long pv = 0;
	size_t hl, pl;

	memset(sa, 0, sizeof *sa);
	if (!*rest) {
		if (!passive || family == AF_INET6)
			return RCP_EADDR;
		sa->in.sin_family = AF_INET;
		sa->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return 0;
	}
	if (*rest == '[') {
		h = rest + 1;
		hend = strchr(h, ']');
		if (!hend || hend[1] != ':' || family == AF_INET)
			return RCP_EADDR;
		port = hend + 2;
		bracketed = 1;
	} else {
		h = rest;
		hend = strrchr(rest, ':');
		/* No port separator, or an IPv6 address without brackets. */
		if (!hend || memchr(h, ':', (size_t)(hend - h)))
			return RCP_EADDR;
		port = hend + 1;
	}
	hl = (size_t)(hend - h);
	if (!hl || hl > UDP_HOST_MAX)
		return RCP_EADDR;
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (!host_ok(host, bracketed, &numeric))
		return RCP_EADDR;

	pl = strlen(port);
	if (!pl) {
		if (!passive)
			return RCP_EADDR;
	} else {
		if (pl > 5 || strspn(port, "0123456789") != pl)
			return RCP_EADDR;
		pv = strtoul(port, NULL, 10);
		if (pv > 65535 || (!passive && !pv))
			return RCP_EADDR;
	}
	snprintf(portstr, sizeof portstr, "%lu", pv);

	memset(&hints, 0, sizeof hints);
	hints.ai_family = bracketed ? AF_INET6 : family;
	hints.ai_socktype = SOCK_DGRAM;
	hints.ai_protocol = IPPROTO_UDP;
	hints.ai_flags = AI_NUMERICSERV | (numeric ? AI_NUMERICHOST : 0);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc) {
		if (rc == EAI_MEMORY)
			return RCP_ENOMEM;
		if (!numeric)
			rcpi_debug("udp: cannot resolve %s: %s", host, gai_strerror(rc));
		return RCP_EADDR;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof sa->in) {
			pick = ai;
			break;
		}
		if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof sa->in6 && !pick)
			pick = ai;
	}
	if (!pick) {
		freeaddrinfo(res);
		return RCP_EADDR;
	}
	memcpy(sa, pick->ai_addr, pick->ai_family == AF_INET ? sizeof sa->in : sizeof sa->in6);
	freeaddrinfo(res);
	if (!passive && sa_is_unspecified(sa))
		return RCP_EADDR;
	return 0;
}

/* ---- MTU and buffer sizing --------------------------------------------- */

/* MTU of the interface holding SELF's address (the smallest up, non-
 * loopback interface for a wildcard address), or 0 if unknown. */
static uint32_t iface_mtu(int fd, const union udp_sa *self)
{
	struct ifaddrs *list, *i;
	uint32_t best = 0;
	int wild = sa_is_unspecified(self);

	if (getifaddrs(&list))
		return 0;
	for (i = list; i; i = i->ifa_next) {
		struct ifreq ifr;
		union udp_sa a;

		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) ||
		    i->ifa_addr->sa_family != self->sa.sa_family)
			continue;
		memcpy(&a, i->ifa_addr, sa_len(self));
		if (wild ? (i->ifa_flags & IFF_LOOPBACK) != 0
		         : (self->sa.sa_family == AF_INET
		                ? a.in.sin_addr.s_addr != self->in.sin_addr.s_addr
		                : memcmp(&a.in6.sin6_addr, &self->in6.sin6_addr, 16) != 0))
			continue;
		memset(&ifr, 0, sizeof ifr);
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", i->ifa_name);
		if (ioctl(fd, SIOCGIFMTU, &ifr) || ifr.ifr_mtu <= 0)
			continue;
		if (!best || (uint32_t)ifr.ifr_mtu < best)
			best = (uint32_t)ifr.ifr_mtu;
		if (!wild)
			break;
	}
	freeifaddrs(list);
	return best;
}

/* The kernel's charge against the receive buffer for one datagram of LEN
 * bytes (skb truesize).  Model fitted to Linux 6.x loopback: linear skbs
 * from kmalloc power-of-two buckets below 16 KiB, page fragments above.
 * Measured (payload: bytes charged): 8: 832, 1472: 2304, 9000: 16644,
 * 16384: 17332, 65000: 67650; the model is never below those. */
static uint64_t udp_truesize(uint32_t len)
{
	uint64_t lin = (uint64_t)len + 448, b = 64;

	if (lin <= 16384) {
		while (b < lin)
			b <<= 1;
		return b + 320;
	}
	return (((uint64_t)len + 4095) & ~4095ull) + 2650;
}

/* Sets a socket buffer: the FORCE option first (root may exceed
 * net.core.[rw]mem_max), the plain one if that is refused.  Returns the
 * size the kernel really granted. */
static int set_buf(int fd, int force, int plain, size_t want)
{
	int v = want > INT_MAX / 2 ? INT_MAX / 2 : (int)want, got = 0;
	socklen_t l = sizeof got;

	if (v > 0 && setsockopt(fd, SOL_SOCKET, force, &v, sizeof v))
		setsockopt(fd, SOL_SOCKET, plain, &v, sizeof v);
	if (getsockopt(fd, SOL_SOCKET, plain, &got, &l))
		got = 0;
	return got;
}

/* A size from the environment; 0 or less: leave the kernel's default. */
static size_t env_size(const char *name, int64_t def)
{
	int64_t v = rcpi_env_int(name, def);
	return v > 0 ? (size_t)v : 0;
}

/* Warns once per peer when the path to it is narrower than our MTU, which
 * would mean IP fragmentation (or loss where fragments are filtered).  A
 * connected UDP socket sends nothing: connect only looks up the route. */
static void check_path_mtu(struct udp_nic *u, struct udp_peer *p)
{
	int s, m = 0, hdr = u->family == AF_INET ? 28 : 48;
	socklen_t l = sizeof m;

	if (u->loopback || sa_is_loopback(&p->sa) || p->warned)
		return;
	s = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	if (!connect(s, &p->sa.sa, sa_len(&p->sa)) &&
	    !getsockopt(s, u->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
	                u->family == AF_INET ? IP_MTU : IPV6_MTU, &m, &l) &&
	    m > hdr && (uint32_t)(m - hdr) < u->mtu) {
		char ip[INET6_ADDRSTRLEN] = "?";
		inet_ntop(u->family,
		          u->family == AF_INET ? (const void *)&p->sa.in.sin_addr
		                               : (const void *)&p->sa.in6.sin6_addr,
		          ip, sizeof ip);
		rcpi_warn("udp: path MTU to %s allows %d-byte frames, mtu is %u: larger "
		          "frames will be fragmented (set RCP_UDP_MTU)",
		          ip, m - hdr, u->mtu);
		p->warned = 1;
	}
	close(s);
}

/* ---- peer table -------------------------------------------------------- */

#define HASH_MASK (UDP_HASH_SIZE - 1)

static int peer_find(const struct udp_nic *u, const struct udp_key *k, uint32_t h)
{
	for (uint32_t i = h & HASH_MASK;; i = (i + 1) & HASH_MASK) {
		uint32_t e = u->hash[i];
		const struct udp_peer *p;
		if (!e)
			return RCP_NIC_PEER_NONE;
		p = &u->peers[e - 1];
		if (p->hash == h && !memcmp(&p->key, k, sizeof *k))
			return (int)(e - 1);
	}
}

static int peer_of_sa(const struct udp_nic *u, const union udp_sa *sa)
{
	struct udp_key k;

	if (sa_to_key(sa, &k))
		return RCP_NIC_PEER_NONE;
	return peer_find(u, &k, key_hash(&k));
}

/* Backward-shift deletion: entries after the hole that may live in it
 * move up, so lookups never need tombstones. */
static void hash_remove(struct udp_nic *u, int idx)
{
	uint32_t i = u->peers[idx].hash & HASH_MASK, j;

	while (u->hash[i] != (uint32_t)idx + 1)
		i = (i + 1) & HASH_MASK;
	for (;;) {
		u->hash[i] = 0;
		for (j = i;;) {
			uint32_t e, home;
			j = (j + 1) & HASH_MASK;
			e = u->hash[j];
			if (!e)
				return;
			home = u->peers[e - 1].hash & HASH_MASK;
			/* Stays if its home lies cyclically in (i, j]. */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			u->hash[i] = e;
			i = j;
			break;
		}
	}
}

/* Puts the sockets in the epoll set callers sleep on (ON), or takes them
 * out.  Only while a caller may sleep (from arm() to the next receive):
 * a socket in an epoll set costs every datagram delivered to it a call
 * into the set (~0.3 us measured here), spinning or not. */
static void watch(struct udp_nic *u, int on)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int op = on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL;

	if (u->efd < 0 || u->watching == on)
		return;
	ev.data.fd = u->fd;
	epoll_ctl(u->efd, op, u->fd, &ev);
	if (u->lfd >= 0) {
		ev.data.fd = u->lfd;
		epoll_ctl(u->efd, op, u->lfd, &ev);
	}
	u->watching = (uint8_t)on;
}

/* Opens the lane to peer IDX: a second socket bound to our own address
 * and port, connected to the peer (see "Lane").  Binding to a port in use
 * needs SO_REUSEADDR on both sockets; it is on only while the lane binds,
 * so any other bind to our port still fails with EADDRINUSE.  A lane that
 * cannot be had is simply not there: every peer works through the main
 * socket. */
static void lane_open(struct udp_nic *u, int idx)
{
	const union udp_sa *sa = &u->peers[idx].sa;
	struct epoll_event ev = {.events = EPOLLIN};
	int one = 1, zero = 0, ok, s, err = 0;

	s = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (s < 0)
		return;
	set_buf(s, SO_RCVBUFFORCE, SO_RCVBUF, u->rcv_want);
	set_buf(s, SO_SNDBUFFORCE, SO_SNDBUF, u->snd_want);
	if (u->family == AF_INET6)
		setsockopt(s, SOL_IPV6, IPV6_RECVERR, &one, sizeof one);
	setsockopt(s, SOL_IP, IP_RECVERR, &one, sizeof one);
	if (u->gro)
		setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
	ok = !setsockopt(u->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) &&
	     !setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) &&
	     !bind(s, &u->self.sa, sa_len(&u->self));
	if (!ok)
		err = errno; /* before the calls below overwrite it */
	setsockopt(u->fd, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof zero);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof zero);
	/* Between bind and connect the lane may take a datagram from anyone:
	 * harmless, a frame is mapped to its peer by its source wherever it
	 * comes in. */
	ok = ok && !connect(s, &sa->sa, sa_len(sa));
	ev.data.fd = s;
	if (!ok || (u->watching && epoll_ctl(u->efd, EPOLL_CTL_ADD, s, &ev))) {
		rcpi_debug("udp: no lane to peer %d: %s", idx, strerror(err ? err : errno));
		close(s);
		return;
	}
	u->lfd = s;
	u->lpeer = idx;
	u->rx_turn = 0;
	u->main_hot = UDP_MAIN_HOT; /* frames sent before it may still come there */
}

static void lane_close(struct udp_nic *u)
{
	close(u->lfd); /* also leaves the epoll set */
	u->lfd = u->lpeer = -1;
}

static void drain_errq(struct udp_nic *u);

static int peer_insert(struct udp_nic *u, const union udp_sa *sa, int *out)
{
	struct udp_key k;
	struct udp_peer *p;
	uint32_t h, i;
	int idx;

	if (sa->sa.sa_family != u->family || !sa_port(sa) || sa_is_unspecified(sa) ||
	    sa_to_key(sa, &k))
		return RCP_EADDR;
	h = key_hash(&k);
	idx = peer_find(u, &k, h);
	if (idx >= 0) {
		*out = idx;
		return 0;
	}
	if (u->npeers == UDP_MAX_PEERS)
		return RCP_EAGAIN;
	/* Errors queued so far belong to earlier holders of addresses (this
	 * one's, maybe: a new process on a dead one's port): read them while
	 * no entry can take the blame. */
	drain_errq(u);
	idx = u->nfree ? u->freel[--u->nfree] : u->hiwater++;
	p = &u->peers[idx];
	memset(p, 0, sizeof *p);
	memcpy(&p->sa, sa, sa_len(sa));
	p->key = k;
	p->hash = h;
	p->used = 1;
	for (i = h & HASH_MASK; u->hash[i]; i = (i + 1) & HASH_MASK)
		;
	u->hash[i] = (uint32_t)idx + 1;
	u->npeers++;
	if (sa_is_mcast(sa)) {
		/* A group (see "Multicast"): out by our own interface, one LAN. */
		unsigned char ttl = 1, loop = 1;
		if (!u->mcast_tx &&
		    (setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_IF, &u->self.in.sin_addr,
		                sizeof u->self.in.sin_addr) ||
		     setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) ||
		     setsockopt(u->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop)))
			rcpi_debug("udp: multicast options: %s", strerror(errno));
		u->mcast_tx = 1;
		*out = idx;
		return 0;
	}
	check_path_mtu(u, p);
	if (u->lane_ok && u->lfd < 0)
		lane_open(u, idx);
	*out = idx;
	return 0;
}

/* ---- error queue ------------------------------------------------------- */

/* Errors the kernel reports asynchronously through the socket (from ICMP):
 * they may belong to an earlier datagram to another peer. */
static int is_async_err(int err)
{
	switch (err) {
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENONET:
	case EPROTO: return 1;
	default: return 0;
	}
}

static void note_error(struct udp_nic *u, const union udp_sa *dst,
                       const struct sock_extended_err *ee)
{
	int idx = peer_of_sa(u, dst);
	struct udp_peer *p = idx >= 0 ? &u->peers[idx] : NULL;

	switch (ee->ee_errno) {
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENONET:
	case EACCES:
	case EPERM:
		if (p)
			p->err = RCP_EPEER;
		if (rcpi_log_level >= RCPI_LOG_DEBUG) {
			char ip[INET6_ADDRSTRLEN] = "?";
			inet_ntop(dst->sa.sa_family,
			          dst->sa.sa_family == AF_INET ? (const void *)&dst->in.sin_addr
			                                       : (const void *)&dst->in6.sin6_addr,
			          ip, sizeof ip);
			rcpi_debug("udp: %s port %u (peer %d): %s", ip, ntohs(sa_port(dst)), idx,
			           strerror((int)ee->ee_errno));
		}
		break;
	case EMSGSIZE:
		if (p && !p->warned) {
			rcpi_warn("udp: peer %d: path MTU %u is below the frame size; set "
			          "RCP_UDP_MTU",
			          idx, ee->ee_info);
			p->warned = 1;
		}
		break;
	default:
		rcpi_debug("udp: peer %d: error %s ignored", idx, strerror((int)ee->ee_errno));
		break;
	}
}

/* Reads every queued error, marking the peers they name, and clears the
 * socket's pending error.  The pending error goes first: an ICMP landing
 * during the loop then leaves a pending error behind (and a later drain),
 * never an entry in the queue that nothing reports but POLLERR. */
static void drain_fd(struct udp_nic *u, int fd)
{
	int e;
	socklen_t el = sizeof e;

	getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
	for (int n = 0; n < 4096; n++) {
		union udp_sa dst;
		union {
			struct cmsghdr align;
			char buf[512];
		} ctl;
		struct msghdr m;
		struct cmsghdr *c;

		memset(&m, 0, sizeof m);
		memset(&dst, 0, sizeof dst);
		m.msg_name = &dst;
		m.msg_namelen = sizeof dst;
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof ctl.buf;
		if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			struct sock_extended_err ee;
			if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
			      (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) ||
			    c->cmsg_len < CMSG_LEN(sizeof ee))
				continue;
			memcpy(&ee, CMSG_DATA(c), sizeof ee);
			note_error(u, &dst, &ee);
		}
	}
}

/* Both sockets: an error a call reported may have come to either. */
static void drain_errq(struct udp_nic *u)
{
	drain_fd(u, u->fd);
	if (u->lfd >= 0)
		drain_fd(u, u->lfd);
}

/* ---- transmit ---------------------------------------------------------- */

static inline void tx_count(struct udp_nic *u, uint32_t frames, uint64_t bytes)
{
	u->base.stats.tx_frames += frames;
	u->base.stats.tx_bytes += bytes;
}

/* Copies the N pieces of IOV into DST, which holds them all; returns the
 * bytes copied.  Small frames go out flat by sendto (send_one, send_lone). */
static size_t gather(unsigned char *dst, const struct iovec *iov, size_t n)
{
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(dst + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return off;
}

/* One frame straight from the caller's iovec: the latency path. */
static int send_one(struct udp_nic *u, int peer, const struct iovec *iov, int iovcnt, size_t total)
{
	struct udp_peer *p = &u->peers[peer];
	struct msghdr m;
	unsigned char small[UDP_SMALL_FRAME];
	const void *flat = NULL;
	int tries = 0, err, rc, fd = u->fd;

	/* A small frame (header + a few bytes: ping-pong, acks, RPC) goes
	 * gathered by sendto: the kernel then imports one user range instead
	 * of a msghdr and an iovec array, ~0.1 us per send measured here. */
	if (iovcnt == 1) {
		flat = iov[0].iov_base;
	} else if (total <= sizeof small) {
		gather(small, iov, (size_t)iovcnt);
		flat = small;
	}
	memset(&m, 0, sizeof m);
	if (peer == u->lpeer) {
		fd = u->lfd; /* connected: no address, the route is cached */
	} else {
		m.msg_name = &p->sa;
		m.msg_namelen = sa_len(&p->sa);
	}
	m.msg_iov = (struct iovec *)iov;
	m.msg_iovlen = (size_t)iovcnt;
	for (;;) {
		ssize_t r = flat ? sendto(fd, flat, total, MSG_DONTWAIT,
		                          (struct sockaddr *)m.msg_name, m.msg_namelen)
		                 : sendmsg(fd, &m, MSG_DONTWAIT);
		if (RCPI_LIKELY(r >= 0)) {
			tx_count(u, 1, total);
			return 0;
		}
		err = errno;
		if (err == EINTR)
			continue;
		if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
			u->base.stats.tx_eagain++;
			return RCP_EAGAIN;
		}
		if (is_async_err(err) && tries++ < UDP_RETRIES) {
			/* Most likely an ICMP error left for an earlier datagram. */
			drain_errq(u);
			if (p->err) {
				rc = p->err;
				p->err = 0;
				return rc;
			}
			continue;
		}
		if (err == ECONNREFUSED) {
			/* Can only be a pending socket error: try again later. */
			u->base.stats.tx_eagain++;
			return RCP_EAGAIN;
		}
		rc = rcpi_errno_to_rcp(err);
		rcpi_debug("udp: send to peer %d: %s", peer, strerror(err));
		return rc == RCP_ENOMEM || rc == RCP_EAGAIN ? RCP_ESYS : rc;
	}
}

/* Builds messages for queue entries [HEAD, txn): a run of same-size frames
 * to one peer becomes one GSO message.  Returns the number of messages. */
static int txq_build(struct udp_nic *u, int head)
{
	int m = 0;

	for (int i = head; i < u->txn; m++) {
		const struct udp_txent *e = &u->txq[i];
		struct udp_peer *p = &u->peers[e->peer];
		struct msghdr *h = &u->txmsg[m].msg_hdr;
		uint32_t total = e->len, iovs = e->iovcnt;
		int n = 1;

		h->msg_name = &p->sa;
		h->msg_namelen = sa_len(&p->sa);
		h->msg_iov = &u->txiov[e->iov_off];
		h->msg_control = NULL;
		h->msg_controllen = 0;
		h->msg_flags = 0;
		if (u->gso && e->len && e->len <= u->gso_seg_max) {
			while (i + n < u->txn && n < UDP_GSO_MAXSEG) {
				const struct udp_txent *f = &u->txq[i + n];
				if (f->peer != e->peer || !f->len || f->len > e->len ||
				    total + f->len > UDP_GSO_MAXBYTES)
					break;
				total += f->len;
				iovs += f->iovcnt;
				n++;
				if (f->len < e->len) /* a short segment ends the run */
					break;
			}
			if (n > 1) {
				struct cmsghdr *c = &u->txctl[m].align;
				uint16_t seg = (uint16_t)e->len;
				c->cmsg_level = SOL_UDP;
				c->cmsg_type = UDP_SEGMENT;
				c->cmsg_len = CMSG_LEN(sizeof seg);
				memcpy(CMSG_DATA(c), &seg, sizeof seg);
				h->msg_control = c;
				h->msg_controllen = CMSG_SPACE(sizeof seg);
			}
		}
		h->msg_iovlen = iovs;
		u->txcnt[m] = (uint8_t)n;
		u->txlen[m] = total;
		i += n;
	}
	return m;
}

/* Drops entries [0, head) and moves the rest (and their iovecs) down. */
static void txq_consume(struct udp_nic *u, int head)
{
	int off;

	if (!head)
		return;
	if (head >= u->txn) {
		u->txn = u->txniov = 0;
		return;
	}
	off = u->txq[head].iov_off;
	memmove(u->txq, u->txq + head, (size_t)(u->txn - head) * sizeof u->txq[0]);
	memmove(u->txiov, u->txiov + off, (size_t)(u->txniov - off) * sizeof u->txiov[0]);
	u->txn -= head;
	u->txniov -= off;
	for (int i = 0; i < u->txn; i++)
		u->txq[i].iov_off = (uint16_t)(u->txq[i].iov_off - off);
}

/* One queued message: a small lone frame (the ping-pong case: the core
 * queues with RCP_NIC_MORE, then flushes) goes gathered by sendto, as in
 * send_one; anything else by sendmsg. */
static ssize_t send_lone(struct udp_nic *u, int peer, const struct msghdr *h, size_t total)
{
	unsigned char small[UDP_SMALL_FRAME];
	size_t off;

	if (h->msg_controllen || total > sizeof small)
		return sendmsg(u->fd, h, MSG_DONTWAIT);
	off = gather(small, h->msg_iov, h->msg_iovlen);
	if (peer == u->lpeer)
		return send(u->lfd, small, off, MSG_DONTWAIT);
	return sendto(u->fd, small, off, MSG_DONTWAIT, (const struct sockaddr *)h->msg_name,
	              h->msg_namelen);
}

/* Pushes the queue out.  If CUR, the last entry is the frame the caller is
 * sending now; a drop of it is reported in *CUR_RC (other entries were
 * accepted earlier: their peer is marked, or the error is returned).
 * Returns 0 (queue empty), RCP_EAGAIN (frames remain) or a hard error for
 * some dropped frame. */
static int txq_flush(struct udp_nic *u, int cur, int *cur_rc)
{
	int head = 0, tries = 0, ret = 0;

	while (head < u->txn) {
		int nmsg = txq_build(u, head), r, err, rc, p, drop;

		if (nmsg == 1)
			r = send_lone(u, u->txq[head].peer, &u->txmsg[0].msg_hdr, u->txlen[0]) >= 0
			        ? 1
			        : -1;
		else
			r = sendmmsg(u->fd, u->txmsg, (unsigned)nmsg, MSG_DONTWAIT);
		if (RCPI_LIKELY(r > 0)) {
			for (int i = 0; i < r; i++) {
				head += u->txcnt[i];
				tx_count(u, u->txcnt[i], u->txlen[i]);
			}
			tries = 0;
			continue;
		}
		err = r < 0 ? errno : EAGAIN;
		if (err == EINTR)
			continue;
		if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
			u->base.stats.tx_eagain++;
			ret = RCP_EAGAIN;
			break;
		}
		p = u->txq[head].peer;
		drop = u->txcnt[0];
		if (is_async_err(err) && tries++ < UDP_RETRIES) {
			drain_errq(u);
			if (!u->peers[p].err)
				continue;
			/* The head's own peer is gone: drop its frames. */
			rc = u->peers[p].err;
		} else if (err == ECONNREFUSED) {
			u->base.stats.tx_eagain++;
			ret = RCP_EAGAIN;
			break;
		} else if (u->txcnt[0] > 1 && (err == EIO || err == EINVAL || err == EOPNOTSUPP ||
		                               err == ENOPROTOOPT)) {
			rcpi_info("udp: UDP_SEGMENT refused (%s): GSO off", strerror(err));
			u->gso = 0;
			continue;
		} else {
			rc = rcpi_errno_to_rcp(err);
			if (rc == RCP_ENOMEM || rc == RCP_EAGAIN)
				rc = RCP_ESYS;
			if (rc == RCP_EPEER)
				u->peers[p].err = RCP_EPEER;
		}
		tries = 0;
		head += drop;
		if (cur && head >= u->txn) {
			/* The caller's frame is among those dropped. */
			*cur_rc = rc;
			if (rc == RCP_EPEER)
				u->peers[p].err = 0;
			if (drop == 1)
				continue;
		}
		rcpi_debug("udp: %d queued frame(s) to peer %d dropped: %s", drop, p,
		           rcp_strerror(rc));
		if (rc != RCP_EPEER && !ret)
			ret = rc;
	}
	txq_consume(u, head);
	return u->txn ? RCP_EAGAIN : ret;
}

static int udp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                    unsigned flags)
{
	struct udp_nic *u = udp_of(nic);
	struct udp_peer *p;
	struct udp_txent *e;
	int rc, cur_rc = 0;

	if (RCPI_UNLIKELY(peer >= UDP_MAX_PEERS || !u->peers[peer].used || iovcnt > UDP_IOV_MAX))
		return RCP_EINVAL;
	if (RCPI_UNLIKELY(total > u->mtu))
		return RCP_EMSGSIZE;
	p = &u->peers[peer];
	if (RCPI_UNLIKELY(p->err)) {
		rc = p->err;
		p->err = 0;
		return rc;
	}
	if (!(flags & RCP_NIC_MORE) && !u->txn)
		return send_one(u, peer, iov, iovcnt, total);
	if (RCPI_UNLIKELY(iovcnt > UDP_TXIOV)) {
		/* Too scattered to queue: send it alone, after the queue. */
		if (u->txn && txq_flush(u, 0, NULL) == RCP_EAGAIN)
			return RCP_EAGAIN;
		return send_one(u, peer, iov, iovcnt, total);
	}
	if (u->txn == UDP_TXQ || u->txniov + iovcnt > UDP_TXIOV) {
		txq_flush(u, 0, NULL);
		if (u->txn == UDP_TXQ || u->txniov + iovcnt > UDP_TXIOV)
			return RCP_EAGAIN;
	}
	e = &u->txq[u->txn++];
	e->peer = peer;
	e->len = (uint32_t)total;
	e->iov_off = (uint16_t)u->txniov;
	e->iovcnt = (uint16_t)iovcnt;
	memcpy(&u->txiov[u->txniov], iov, (size_t)iovcnt * sizeof *iov);
	u->txniov += iovcnt;
	if (flags & RCP_NIC_MORE)
		return 0;
	txq_flush(u, 1, &cur_rc);
	if (u->txn) {
		/* Our frame is the last entry and still queued: hand it back. */
		u->txn--;
		u->txniov -= iovcnt;
		return RCP_EAGAIN;
	}
	return cur_rc;
}

static int udp_flush(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);
	return u->txn ? txq_flush(u, 0, NULL) : 0;
}

/* ---- receive ----------------------------------------------------------- */

static void gro_consider(struct udp_nic *u, int n);

/* One receive call on socket FD into the slots: recvmmsg for up to rx_want
 * datagrams; for one, recvfrom (recvmsg once GRO is on: the segment size
 * comes in a cmsg).  See "Receiving" at the top for the measured costs.
 * SLEEP: the first call may sleep (SO_RCVTIMEO bounds it; a signal ends
 * it).  Returns datagrams received, 0 or RCP_ESYS. */
static int rx_fill_fd(struct udp_nic *u, int fd, int sleep)
{
	int tries = 0, n, dontwait = sleep ? 0 : MSG_DONTWAIT;

	for (;;) {
		if (u->rx_want == 1 && !u->gro) {
			/* recvfrom skips the msghdr and iovec import: ~0.1 us
			 * per round trip; MSG_TRUNC makes it return the real
			 * length so truncation is still seen. */
			struct msghdr *m = &u->rxmsg[0].msg_hdr;
			socklen_t al = sizeof u->rxsrc[0];
			ssize_t r = recvfrom(fd, u->rxiov[0].iov_base, u->rxiov[0].iov_len,
			                     dontwait | MSG_TRUNC, &u->rxsrc[0].sa, &al);
			n = r < 0 ? -1 : 1;
			if (r >= 0) {
				m->msg_namelen = al;
				m->msg_controllen = 0;
				m->msg_flags = (size_t)r > u->rxiov[0].iov_len ? MSG_TRUNC : 0;
				u->rxmsg[0].msg_len = (unsigned)r;
			}
		} else if (u->rx_want == 1) {
			ssize_t r = recvmsg(fd, &u->rxmsg[0].msg_hdr, dontwait);
			n = r < 0 ? -1 : 1;
			if (r >= 0)
				u->rxmsg[0].msg_len = (unsigned)r;
		} else {
			n = recvmmsg(fd, u->rxmsg, (unsigned)u->rx_want,
			             dontwait ? dontwait : MSG_WAITFORONE, NULL);
		}
		/* Only the first call may sleep: one wake-up per wait. */
		dontwait = MSG_DONTWAIT;
		if (n > 0) {
			u->rx_n = n;
			if (n >= UDP_GRO_RUN && !u->gro && u->gro_ok)
				gro_consider(u, n);
			return n;
		}
		if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINTR) {
			if (sleep)
				return 0; /* a signal ended the sleep: back to the caller */
			continue;
		}
		if (is_async_err(errno) && tries++ < UDP_RETRIES) {
			/* A pending ICMP error, reported on the next call
			 * whatever it is: attribute it and look again. */
			drain_errq(u);
			continue;
		}
		rcpi_warn("udp: receive: %s", strerror(errno));
		return RCP_ESYS;
	}
}

/* One fill of the slots.  Without a lane: the socket (SLEEP as in
 * rx_fill_fd).  With one: the lane every time, the main socket every
 * UDP_MAIN_EVERY-th fill, or every fill while it is delivering
 * (main_hot); the two take turns at going first, so a busy one never
 * starves the other.  rx_dry is set only when every socket was looked at.
 * Precondition: every held frame has been handed out and none is
 * outstanding.  Returns datagrams received, 0 or RCP_ESYS. */
static int rx_fill(struct udp_nic *u, int sleep)
{
	int n, look_main, main_first, from_main;

	/* The kernel rewrote only the headers it filled last time. */
	for (int i = 0; i < u->rx_n; i++) {
		u->rxmsg[i].msg_hdr.msg_namelen = sizeof u->rxsrc[i];
		u->rxmsg[i].msg_hdr.msg_controllen = u->gro_ok ? sizeof u->rxctl[i] : 0;
	}
	u->rx_n = u->rx_slot = 0;
	u->rx_off = 0;
	u->rx_dry = 0;
	if (u->watching)
		watch(u, 0); /* awake: see watch() */
	if (u->lfd < 0) {
		n = rx_fill_fd(u, u->fd, sleep);
		u->rx_dry = n == 0;
		return n;
	}
	look_main = u->main_hot || ++u->main_skip >= UDP_MAIN_EVERY;
	main_first = look_main && u->rx_turn;
	n = rx_fill_fd(u, main_first ? u->fd : u->lfd, 0);
	from_main = main_first;
	if (look_main) {
		u->main_skip = 0;
		if (u->main_hot)
			u->main_hot--;
		if (!n) {
			n = rx_fill_fd(u, main_first ? u->lfd : u->fd, 0);
			from_main = !main_first;
		}
	}
	if (n > 0) {
		if (from_main)
			u->main_hot = UDP_MAIN_HOT;
		u->rx_turn = (uint8_t)!from_main;
	}
	u->rx_dry = n == 0 && look_main;
	return n;
}

static uint32_t rx_gro_size(struct msghdr *m)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof v);
			return v > 0 ? (uint32_t)v : 0;
		}
	}
	return 0;
}

/* Turns UDP_GRO on if the burst just received holds a run of equal-size
 * datagrams from one sender: what a GSO sender (or a NIC's GRO) produces,
 * and what GRO then hands over as one buffer: measured on loopback, 64 B
 * frames 2.2-3.3 M/s instead of 0.2-0.5 M/s, 1 KiB 6x, 8 KiB 2x.  Not on
 * from the start because a GRO socket pays ~0.13 us per datagram
 * received (measured), 3% of an 8-byte round trip per side; and never off
 * again, because a buffer coalesced before UDP_GRO went off would be read
 * without its segment size and handed out as one frame. */
static void gro_consider(struct udp_nic *u, int n)
{
	int run = 1, one = 1;

	for (int i = 1; i < n && run < UDP_GRO_RUN; i++) {
		const struct msghdr *a = &u->rxmsg[i - 1].msg_hdr, *b = &u->rxmsg[i].msg_hdr;
		if (u->rxmsg[i].msg_len == u->rxmsg[i - 1].msg_len &&
		    a->msg_namelen == b->msg_namelen &&
		    !memcmp(&u->rxsrc[i - 1], &u->rxsrc[i], b->msg_namelen))
			run++;
		else
			run = 1;
	}
	if (run < UDP_GRO_RUN)
		return;
	if (setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof one) ||
	    (u->lfd >= 0 && setsockopt(u->lfd, SOL_UDP, UDP_GRO, &one, sizeof one))) {
		/* (Were it on for the main socket only, the lane would stay
		 * without: both read their segment sizes the same way.) */
		u->gro_ok = 0;
		return;
	}
	u->gro = 1;
	rcpi_debug("udp: bursts of equal frames: UDP_GRO on");
}

/* Moves to the next slot. */
static inline void rx_next(struct udp_nic *u)
{
	u->rx_slot++;
	u->rx_off = 0;
}

/* Hands out up to MAX frames; SLEEP: the first receive call may sleep. */
static int recv_frames(struct udp_nic *u, struct rcp_nic_frame *fr, int max, int sleep)
{
	uint64_t bytes = 0;
	int k = 0, looked = -1, rc;

	/* By contract the previous burst has been released. */
	u->outstanding = 0;
	u->rx_want = max < UDP_RXB ? max : UDP_RXB;
	for (int fills = 0; !k && fills < 4; fills++) {
		if (u->rx_slot >= u->rx_n) {
			rc = rx_fill(u, sleep && !fills);
			if (rc <= 0)
				return rc;
		}
		while (k < max && u->rx_slot < u->rx_n) {
			int s = u->rx_slot;
			struct msghdr *m = &u->rxmsg[s].msg_hdr;
			uint32_t len = u->rxmsg[s].msg_len, flen;

			if (u->rx_off == 0) {
				/* First look at this datagram (or GRO buffer). */
				if (RCPI_UNLIKELY(m->msg_flags & MSG_TRUNC)) {
					/* Longer than the slot: never deliver it cut. */
					u->base.stats.rx_dropped++;
					rx_next(u);
					continue;
				}
				u->rx_seg = m->msg_controllen ? rx_gro_size(m) : 0;
				u->rxbloblen[s] = (uint8_t)sa_to_blob(&u->rxsrc[s], u->rxblob[s]);
			}
			flen =
			    u->rx_seg && len - u->rx_off > u->rx_seg ? u->rx_seg : len - u->rx_off;
			if (RCPI_UNLIKELY(flen > u->mtu)) {
				/* From a peer with a larger MTU (fits a GRO slot):
				 * frames handed out never exceed info.mtu. */
				u->base.stats.rx_dropped++;
				u->rx_off += flen;
				if (!u->rx_seg || u->rx_off >= len)
					rx_next(u);
				continue;
			}
			if (s != looked) {
				/* Per call, not per datagram: a peer added since the
				 * last call applies to the rest of a GRO buffer. */
				u->rxpeer[s] = peer_of_sa(u, &u->rxsrc[s]);
				looked = s;
				/* A peer that speaks is there: an error still
				 * pending for it came from an earlier holder
				 * of its address (ICMP raced the new bind). */
				if (u->rxpeer[s] >= 0 && RCPI_UNLIKELY(u->peers[u->rxpeer[s]].err))
					u->peers[u->rxpeer[s]].err = 0;
			}
			fr[k].data = u->rxbuf + (size_t)s * u->rxstride + u->rx_off;
			fr[k].len = flen;
			fr[k].peer = u->rxpeer[s];
			fr[k].src = u->rxblob[s];
			fr[k].srclen = u->rxbloblen[s];
			fr[k].reserved = 0;
			fr[k].token = (uintptr_t)s;
			k++;
			bytes += flen;
			u->rx_off += flen;
			if (!u->rx_seg || u->rx_off >= len)
				rx_next(u);
		}
	}
	u->outstanding = (uint32_t)k;
	u->base.stats.rx_frames += (uint64_t)k;
	u->base.stats.rx_bytes += bytes;
	return k;
}

static int udp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max)
{
	return recv_frames(udp_of(nic), fr, max, 0);
}

static void udp_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct udp_nic *u = udp_of(nic);
	(void)frames;
	/* Slots are recycled by the next recvmmsg, which happens only after
	 * every held frame was handed out; releasing just ends the loan. */
	u->outstanding = (uint32_t)n >= u->outstanding ? 0 : u->outstanding - (uint32_t)n;
}

/* ---- waiting ----------------------------------------------------------- */

/* Without lanes, the socket.  With them, an epoll set that holds both
 * sockets while a caller may sleep (see watch()), made on the first call:
 * the fd must stay the same for the endpoint's lifetime, and a lane may
 * come later.  (The nic is ours; const is the ops table's promise to
 * callers, who see nothing change.) */
static int udp_fd(const rcp_nic *nic)
{
	struct udp_nic *u = (struct udp_nic *)(uintptr_t)udp_ofc(nic);

	if (!u->lane_ok)
		return u->fd;
	if (u->efd < 0) {
		u->efd = epoll_create1(EPOLL_CLOEXEC);
		if (u->efd < 0) {
			/* No set, no lanes: the socket alone is the fd. */
			if (u->lfd >= 0)
				lane_close(u);
			u->lane_ok = 0;
			return u->fd;
		}
		/* A caller may arm() before it takes the fd: watch now. */
		watch(u, 1);
	}
	return u->efd;
}

/* ppoll on the sockets (the main one in PFD[0], the lane in PFD[1] if
 * there is one) for up to TIMEOUT_NS (<0: forever).  Returns ppoll's. */
static int sock_poll(const struct udp_nic *u, struct pollfd pfd[2], int64_t timeout_ns)
{
	struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
	pfd[0] = (struct pollfd){.fd = u->fd, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = u->lfd, .events = POLLIN}; /* -1: ppoll skips it */
	return ppoll(pfd, 2, timeout_ns < 0 ? NULL : &ts, NULL);
}

/* The sockets' events now, or'ed (0: none; < 0: poll failed). */
static int poll_now(const struct udp_nic *u)
{
	struct pollfd pfd[2];
	int r = sock_poll(u, pfd, 0);
	return r > 0 ? pfd[0].revents | pfd[1].revents : r;
}

static int udp_arm(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);

	if (u->rx_slot < u->rx_n)
		return RCP_EAGAIN;
	/* The receive call just before (a wait's last poll) found the socket
	 * empty and reported no error: that is what poll() would tell, and
	 * whatever arrives since makes the fd readable (also an edge for
	 * EPOLLET).  One system call less per sleep. */
	if (u->rx_dry) {
		u->rx_dry = 0;
		watch(u, 1);
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		int ev = poll_now(u);
		if (ev < 0)
			return errno == EINTR || errno == ENOMEM ? RCP_EAGAIN : RCP_ESYS;
		if (!ev) {
			watch(u, 1);
			return 0;
		}
		if (ev & POLLIN)
			return RCP_EAGAIN;
		/* POLLERR only: an ICMP error.  Unhandled it would wake every
		 * poll at once; attribute it and look again. */
		drain_errq(u);
	}
	return RCP_EAGAIN;
}

/* Sleeps shorter than this use poll() (nanoseconds); longer ones sleep in
 * the receive call under SO_RCVTIMEO, which the kernel keeps in ticks. */
#define UDP_BLOCK_MIN_NS 1000000

/* Whether SO_RCVTIMEO CUR (ns, 0: none) serves a sleep of T (0: forever):
 * it must not sleep past T nor wake before half of it, so steady waits set
 * the option once. */
static int rcvtimeo_fits(int64_t cur, int64_t t)
{
	if (!cur || !t)
		return cur == t;
	return cur <= t && 2 * cur >= t;
}

/* A sleep in ppoll on the sockets (level-triggered: no arm() first), then
 * one receive, from the socket that woke it first.  With a lane (two
 * sockets) every sleep goes this way; without, sleeps too short for
 * SO_RCVTIMEO. */
static int sock_wait(struct udp_nic *u, struct rcp_nic_frame *fr, int max, int64_t timeout_ns)
{
	struct pollfd pfd[2];
	int n = sock_poll(u, pfd, timeout_ns);

	if (n < 0)
		return errno == EINTR ? 0 : RCP_ESYS;
	if (!n)
		return 0;
	for (int i = 0; i < 2; i++)
		if (pfd[i].revents & POLLERR)
			drain_fd(u, pfd[i].fd);
	if (u->lfd >= 0) {
		/* Look first where it woke us. */
		u->rx_turn = (pfd[0].revents & POLLIN) != 0;
		if (u->rx_turn)
			u->main_hot = UDP_MAIN_HOT;
	}
	return recv_frames(u, fr, max, 0);
}

static int udp_recv_wait(rcp_nic *nic, struct rcp_nic_frame *fr, int max, int64_t timeout_ns)
{
	struct udp_nic *u = udp_of(nic);
	int64_t t = timeout_ns < 0 ? 0 : timeout_ns;

	if (u->rx_slot < u->rx_n)
		return recv_frames(u, fr, max, 0);
	if (u->lfd >= 0 || (timeout_ns >= 0 && timeout_ns < UDP_BLOCK_MIN_NS))
		return sock_wait(u, fr, max, timeout_ns);
	if (!rcvtimeo_fits(u->rcvtimeo_ns, t)) {
		struct timeval tv = {(time_t)(t / 1000000000),
		                     (suseconds_t)(t % 1000000000 / 1000)};
		if (setsockopt(u->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))
			return sock_wait(u, fr, max, timeout_ns);
		u->rcvtimeo_ns = t;
	}
	return recv_frames(u, fr, max, 1);
}

static int udp_pending(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);

	if (u->rx_slot < u->rx_n)
		return 1;
	if (u->outstanding) {
		/* The caller still reads frames in the slots: look, don't take. */
		return poll_now(u) != 0;
	}
	/* Receive now and keep the frames for recv(): the system call this
	 * costs is the one recv() would make anyway. */
	return rx_fill(u, 0) != 0;
}

/* ---- endpoint ---------------------------------------------------------- */

static void udp_free(struct udp_nic *u)
{
	if (u->lfd >= 0)
		close(u->lfd);
	if (u->efd >= 0)
		close(u->efd);
	if (u->fd >= 0)
		close(u->fd);
	free(u->peers);
	free(u->hash);
	free(u->freel);
	free(u->rxbuf);
	free(u);
}

static int udp_open(const char *rest, const struct rcp_nic_config *cfg, rcp_nic **out)
{
	union udp_sa sa;
	struct udp_nic *u;
	socklen_t sl;
	int64_t env_mtu, want_gso;
	uint32_t auto_mtu, maxpay;
	size_t rcv_want, snd_want;
	int rc, one = 1, rcvbuf, sndbuf, v;
	struct in_addr ifaddr = {0};
	const char *at = strchr(rest, '@');

	if (at) { /* "GROUP:PORT@IFADDR" (see "Multicast") */
		char hp[UDP_HOST_MAX + 16];
		if ((size_t)(at - rest) >= sizeof hp || inet_pton(AF_INET, at + 1, &ifaddr) != 1)
			return RCP_EADDR;
		memcpy(hp, rest, (size_t)(at - rest));
		hp[at - rest] = '\0';
		rc = udp_parse(hp, 1, AF_INET, &sa);
		if (!rc && !sa_is_mcast(&sa))
			rc = RCP_EADDR;
	} else {
		rc = udp_parse(rest, 1, AF_UNSPEC, &sa);
	}
	if (rc)
		return rc;
	u = calloc(1, sizeof *u);
	if (!u)
		return RCP_ENOMEM;
	u->group = sa_is_mcast(&sa);
	u->ifaddr = ifaddr;
	u->fd = u->lfd = u->efd = -1;
	u->lpeer = -1;
	u->family = sa.sa.sa_family;
	u->rx_want = UDP_RXB;
	u->peers = calloc(UDP_MAX_PEERS, sizeof *u->peers);
	u->hash = calloc(UDP_HASH_SIZE, sizeof *u->hash);
	u->freel = calloc(UDP_MAX_PEERS, sizeof *u->freel);
	if (!u->peers || !u->hash || !u->freel) {
		rc = RCP_ENOMEM;
		goto fail;
	}

	/* A blocking socket, every call MSG_DONTWAIT but the receive that
	 * sleeps (udp_recv_wait). */
	u->fd = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (u->fd < 0) {
		rc = errno == EAFNOSUPPORT ? RCP_EADDR : rcpi_errno_to_rcp(errno);
		rcpi_debug("udp: socket: %s", strerror(errno));
		goto fail;
	}

	/* Buffers before bind, so no datagram meets the default size. */
	rcv_want = cfg && cfg->rx_bytes ? cfg->rx_bytes : env_size("RCP_UDP_RCVBUF", 4 << 20);
	snd_want = env_size("RCP_UDP_SNDBUF", 4 << 20);
	rcvbuf = set_buf(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, rcv_want);
	sndbuf = set_buf(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, snd_want);
	u->rcv_want = rcv_want;
	u->snd_want = snd_want;

	/* ICMP errors to the error queue, with the destination that failed. */
	if (u->family == AF_INET6)
		setsockopt(u->fd, SOL_IPV6, IPV6_RECVERR, &one, sizeof one);
	setsockopt(u->fd, SOL_IP, IP_RECVERR, &one, sizeof one); /* also v4-mapped */

	want_gso = rcpi_env_int("RCP_UDP_GSO", 1);
	if (want_gso) {
		socklen_t l = sizeof v;
		u->gso = !getsockopt(u->fd, SOL_UDP, UDP_SEGMENT, &v, &l);
		l = sizeof v;
		u->gro_ok = !getsockopt(u->fd, SOL_UDP, UDP_GRO, &v, &l);
	}

	if (u->group)
		setsockopt(u->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(u->fd, &sa.sa, sa_len(&sa))) {
		int err = errno;
		rc = err == EADDRINUSE                                              ? RCP_EADDRINUSE
		     : err == EACCES || err == EPERM                                ? RCP_EPERM
		     : err == EADDRNOTAVAIL || err == EINVAL || err == EAFNOSUPPORT ? RCP_EADDR
		                                                                    : RCP_ESYS;
		rcpi_debug("udp: bind: %s", strerror(err));
		goto fail;
	}
	sl = sizeof u->self;
	if (getsockname(u->fd, &u->self.sa, &sl)) {
		rc = RCP_ESYS;
		goto fail;
	}
	/* A sleeper pays a wake-up per frame: the lane's cheaper send does not
	 * make up for the ppoll its sleeps then need (see "Lane"). */
	u->lane_ok = rcpi_env_int("RCP_UDP_LANE", 1) != 0 &&
	             !(cfg && (cfg->flags & RCP_NIC_SLEEPER)) && !u->group;
	if (u->group) {
		struct ip_mreq mr = {.imr_multiaddr = sa.in.sin_addr, .imr_interface = ifaddr};
		if (setsockopt(u->fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof mr)) {
			rc = errno == ENODEV || errno == EADDRNOTAVAIL ? RCP_EADDR
			                                               : rcpi_errno_to_rcp(errno);
			rcpi_debug("udp: join: %s", strerror(errno));
			goto fail;
		}
	}

	/* MTU: detected, replaced by RCP_UDP_MTU, lowered by cfg->mtu.  A
	 * group endpoint's is its interface's. */
	maxpay = u->family == AF_INET ? 65507 : 65527;
	if (u->group) {
		union udp_sa ifsa = u->self;
		ifsa.in.sin_addr = ifaddr;
		u->loopback = (uint8_t)sa_is_loopback(&ifsa);
		auto_mtu = u->loopback ? UDP_LO_MTU : iface_mtu(u->fd, &ifsa) - 28;
		if (!u->loopback && auto_mtu > 65535)
			auto_mtu = UDP_FALLBACK_MTU;
	} else if ((u->loopback = (uint8_t)sa_is_loopback(&u->self)) != 0) {
		auto_mtu = UDP_LO_MTU;
	} else {
		uint32_t ifm = iface_mtu(u->fd, &u->self), hdr = u->family == AF_INET ? 28 : 48;
		auto_mtu = ifm > hdr ? ifm - hdr : UDP_FALLBACK_MTU;
	}
	if (auto_mtu > maxpay)
		auto_mtu = maxpay;
	u->gso_seg_max = auto_mtu;
	u->mtu = auto_mtu;
	env_mtu = rcpi_env_int("RCP_UDP_MTU", 0);
	if (env_mtu > 0)
		u->mtu = env_mtu > maxpay ? maxpay : (uint32_t)env_mtu;
	if (cfg && cfg->mtu && cfg->mtu < u->mtu)
		u->mtu = cfg->mtu;

	/* Receive slots: exactly MTU bytes, so a longer datagram shows as
	 * MSG_TRUNC; 64 KiB when GRO may put several frames in one. */
	u->rxstride = u->gro_ok ? UDP_GRO_SLOT : ((size_t)u->mtu + 63) & ~(size_t)63;
	if (!u->rxstride)
		u->rxstride = 64;
	u->rxbuf = aligned_alloc(4096, (u->rxstride * UDP_RXB + 4095) & ~(size_t)4095);
	if (!u->rxbuf) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	for (int i = 0; i < UDP_RXB; i++) {
		struct msghdr *m = &u->rxmsg[i].msg_hdr;
		u->rxiov[i].iov_base = u->rxbuf + (size_t)i * u->rxstride;
		u->rxiov[i].iov_len = u->gro_ok ? u->rxstride : u->mtu;
		m->msg_name = &u->rxsrc[i];
		m->msg_namelen = sizeof u->rxsrc[i];
		m->msg_iov = &u->rxiov[i];
		m->msg_iovlen = 1;
		m->msg_control = u->gro_ok ? u->rxctl[i].buf : NULL;
		m->msg_controllen = u->gro_ok ? sizeof u->rxctl[i] : 0;
	}

	{
		uint64_t f = rcvbuf > 0 ? (uint64_t)rcvbuf / udp_truesize(u->mtu) : 1;
		u->rx_frames = f < 1 ? 1 : f > UDP_RX_FRAMES_MAX ? UDP_RX_FRAMES_MAX : (uint32_t)f;
	}

	u->base.ops = &rcpi_nic_udp_ops;
	*out = &u->base;
	if (rcpi_log_level >= RCPI_LOG_INFO) {
		char name[RCP_NIC_ADDRSTR_MAX];
		rcpi_nic_udp_ops.addr_str(&u->base, name, sizeof name);
		rcpi_info("udp: %s mtu %u rx_frames %u rcvbuf %d (asked %zu) sndbuf %d (asked %zu) "
		          "gso %s gro %s",
		          name, u->mtu, u->rx_frames, rcvbuf, rcv_want, sndbuf, snd_want,
		          u->gso ? "on" : "off", u->gro_ok ? "when bursts come" : "off");
	}
	return 0;
fail:
	udp_free(u);
	return rc;
}

static void udp_close(rcp_nic *nic)
{
	struct udp_nic *u = udp_of(nic);

	/* One last non-blocking attempt for frames queued with MORE. */
	if (u->txn && txq_flush(u, 0, NULL) == RCP_EAGAIN)
		rcpi_debug("udp: close drops %d queued frame(s)", u->txn);
	udp_free(u);
}

static void udp_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	const struct udp_nic *u = udp_ofc(nic);

	info->backend = "udp";
	info->mtu = u->mtu;
	info->rx_frames = u->rx_frames;
	/* UDP checksums detect corruption; the kernel neither orders nor
	 * retransmits.  A loopback-bound endpoint reaches this host only. */
	info->caps = RCP_NIC_CAP_CHECKED | (u->loopback ? RCP_NIC_CAP_SAME_HOST : 0) |
	             (u->family == AF_INET ? RCP_NIC_CAP_MCAST : 0);
}

static int udp_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	const struct udp_nic *u = udp_ofc(nic);
	char ip[INET6_ADDRSTRLEN];
	int n;

	if (u->family == AF_INET) {
		inet_ntop(AF_INET, &u->self.in.sin_addr, ip, sizeof ip);
		n = snprintf(buf, len, "udp:%s:%u", ip, ntohs(u->self.in.sin_port));
	} else {
		inet_ntop(AF_INET6, &u->self.in6.sin6_addr, ip, sizeof ip);
		if (u->self.in6.sin6_scope_id && v6_needs_scope(&u->self.in6.sin6_addr))
			n = snprintf(buf, len, "udp:[%s%%%u]:%u", ip, u->self.in6.sin6_scope_id,
			             ntohs(u->self.in6.sin6_port));
		else
			n = snprintf(buf, len, "udp:[%s]:%u", ip, ntohs(u->self.in6.sin6_port));
	}
	return n < 0 || (size_t)n >= len ? RCP_ERANGE : 0;
}

static int udp_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	uint8_t b[UDP_BLOB_MAX];
	uint32_t n = sa_to_blob(&udp_ofc(nic)->self, b);

	if (*len < n)
		return RCP_ERANGE;
	memcpy(buf, b, n);
	*len = n;
	return 0;
}

static int udp_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	union udp_sa sa;
	int rc = blob_to_sa(blob, len, &sa);
	return rc ? rc : peer_insert(udp_of(nic), &sa, peer);
}

/* A frame to an address that is not a peer (an accepting endpoint's cookie
 * challenge to an unknown sender): one sendto from the main socket, no
 * peer entry, no queue.  Best effort: a refusal is the sender's loss (it
 * sends again).  An ICMP error about the address later finds no peer to
 * mark. */
static int udp_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen)
{
	struct udp_nic *u = udp_of(nic);
	union udp_sa sa;
	int rc = blob_to_sa(blob, len, &sa);

	if (rc)
		return rc;
	if (sa.sa.sa_family != u->self.sa.sa_family)
		return RCP_EADDR;
	if (flen > u->mtu)
		return RCP_EMSGSIZE;
	for (int tries = 0; tries < 2; tries++) {
		if (sendto(u->fd, frame, flen, MSG_DONTWAIT, &sa.sa, sa_len(&sa)) >= 0) {
			tx_count(u, 1, flen);
			return 0;
		}
		if (!is_async_err(errno))
			break;
		drain_errq(u); /* an earlier datagram's ICMP: drain, retry */
	}
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ? RCP_EAGAIN : RCP_ESYS;
}

static int udp_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	struct udp_nic *u = udp_of(nic);
	union udp_sa sa;
	int rc;

	if (strncmp(addr, "udp:", 4))
		return RCP_EADDR;
	rc = udp_parse(addr + 4, 0, u->family, &sa);
	return rc ? rc : peer_insert(u, &sa, peer);
}

static int udp_peer_remove(rcp_nic *nic, int peer)
{
	struct udp_nic *u = udp_of(nic);
	int w = 0, wi = 0, dropped = 0;

	if (peer >= UDP_MAX_PEERS || !u->peers[peer].used)
		return RCP_EINVAL;
	/* Queued frames name the peer by index: send them now, forget the
	 * rest, so a reused index never gets another peer's frames. */
	for (int i = 0; i < u->txn; i++) {
		if (u->txq[i].peer != peer)
			continue;
		txq_flush(u, 0, NULL);
		for (int r = 0; r < u->txn; r++) {
			struct udp_txent e = u->txq[r];
			if (e.peer == peer) {
				dropped++;
				continue;
			}
			memmove(&u->txiov[wi], &u->txiov[e.iov_off], e.iovcnt * sizeof u->txiov[0]);
			e.iov_off = (uint16_t)wi;
			wi += e.iovcnt;
			u->txq[w++] = e;
		}
		u->txn = w;
		u->txniov = wi;
		if (dropped)
			rcpi_debug("udp: peer %d removed with %d frame(s) unsent", peer, dropped);
		break;
	}
	if (peer == u->lpeer)
		lane_close(u); /* the next peer added gets it */
	hash_remove(u, peer);
	memset(&u->peers[peer], 0, sizeof u->peers[peer]);
	u->freel[u->nfree++] = peer;
	u->npeers--;
	return 0;
}

const struct rcpi_nic_ops rcpi_nic_udp_ops = {
    .name = "udp",
    .id = RCPI_NIC_UDP,
    .open = udp_open,
    .close = udp_close,
    .query = udp_query,
    .addr_str = udp_addr_str,
    .addr_blob = udp_addr_blob,
    .peer_add = udp_peer_add,
    .peer_add_str = udp_peer_add_str,
    .peer_remove = udp_peer_remove,
    .send = udp_send,
    .flush = udp_flush,
    .recv = udp_recv,
    .release = udp_release,
    .fd = udp_fd,
    .arm = udp_arm,
    .pending = udp_pending,
    .recv_wait = udp_recv_wait,
    .send_to = udp_send_to,
    /* No RMA: the dispatcher answers RCP_ENOTSUP. */
};
