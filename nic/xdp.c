/*
 * nic/xdp.c — the AF_XDP nic backend ("xdp:IFNAME[/QUEUE]").
 *
 * User space owns the interface's rings, as the paper's RCP owned
 * Myrinet's: frames land in a memory area of ours (the UMEM) and we drive
 * the fill, RX, TX and completion rings ourselves, past the socket stack.
 * Built when libxdp and libbpf are found (configure); absent otherwise.
 *
 * ---- Frames on the wire -------------------------------------------------
 *
 *   0   destination MAC (6)
 *   6   source MAC (6)
 *   12  EtherType 0x88B5 (IEEE 802 "local experimental 1", big endian)
 *   14  payload length (2, big endian)
 *   16  payload
 *
 * An EtherType of our own is the cheapest marker to steer on (one 16-bit
 * compare, no IP header to walk) and needs no address or port plan: RCP
 * frames are plain Ethernet frames on one link (a veth pair, a bridge, a
 * switch), not routed.  The length word is there because a link pads
 * short frames to 60 bytes: without it an 8-byte payload would arrive as
 * 44.  The link's FCS (or, on veth, memory) checks the bytes, hence
 * RCP_NIC_CAP_CHECKED; frames are not ordered across RX queues or
 * retried, so neither ORDERED nor RELIABLE.
 *
 * ---- The XDP program ----------------------------------------------------
 *
 * Fifteen BPF instructions assembled here and loaded at open (no BPF
 * object file, so no clang at build time): a frame with our EtherType goes
 * to the socket of its RX queue through an XSKMAP (bpf_redirect_map with
 * XDP_PASS as the miss action, so a queue without a socket passes it on);
 * everything else, ARP, IP, ssh, goes to the kernel untouched.  It runs in
 * native (driver) mode where the driver has it and in generic (skb) mode
 * otherwise (RCP_XDP_MODE=native|generic|auto: on veth both measure
 * alike); the socket binds in copy mode unless the driver offers zero
 * copy.  One endpoint owns an interface (one program per interface).
 *
 * Ownership and crashes.  A program outlives its process if nobody
 * detaches it, and a stale one would keep stealing our EtherType.  So an
 * endpoint holds an flock on /run/rcp-xdp-NETNS-IFINDEX.lock (NETNS: the
 * inode of our network namespace; /tmp when /run is not writable) for its
 * whole life; the kernel drops it when the process dies however it dies.
 * open() takes the lock without waiting: held means a live endpoint owns
 * the interface (RCP_EADDRINUSE); free, an attached program named
 * "rcp_xdp" is a crashed endpoint's and is detached before ours goes on;
 * any other program is somebody else's and we refuse (RCP_EADDRINUSE,
 * naming it).  close() detaches with XDP_FLAGS_REPLACE against our own
 * program fd, so it never removes a program it did not attach.
 *
 * ---- The UMEM and the rings -------------------------------------------------
 *
 * One anonymous mapping of 2 x RING frames of 4 KiB: the lower half
 * receives, the upper half transmits.  RING is XDP_RING (2048), or
 * rcp_nic_config.rx_bytes / 4 KiB rounded up to a power of two in
 * [256, 16384].  The rings hold RING entries each, as many as each half
 * has frames, so the fill ring always has room for every RX frame we give
 * back and the TX ring for every TX frame.
 *
 *   receive:  the kernel takes a frame address from the fill ring, copies
 *             (or DMAs) the frame into it and posts it on the RX ring;
 *             recv() peeks up to XDP_BURST descriptors, releases the RX
 *             ring entries at once (the frames stay ours) and hands the
 *             payloads up in place; release() gives the burst back to
 *             the fill ring with one reserve/submit.  Frames refused
 *             (not ours, malformed) go back at once.
 *   send:     a free TX frame from a stack of them (refilled in batches
 *             from the completion ring when empty), header and payload
 *             gathered into it, one TX descriptor submitted.  In copy mode
 *             the kernel transmits only when kicked (sendto): send()
 *             without RCP_NIC_MORE and flush() kick; with MORE frames
 *             wait on the ring and go out with one kick.  A kick moves a
 *             bounded batch per call, so flush kicks until the kernel's
 *             consumer index reaches ours.
 *   need_wakeup (XDP_USE_NEED_WAKEUP): a kick is made only when the TX
 *             ring asks for one (always in copy mode), and release() pokes
 *             the kernel with recvfrom only when the fill ring asks
 *             (zero-copy drivers that stopped polling it).
 *
 * Memory ordering: the xsk ring helpers of libxdp are the protocol: a
 * producer writes descriptors, then publishes its index with a release
 * store; a consumer loads the other side's index with acquire before it
 * reads descriptors.  pending() is one acquire load of the RX producer
 * index against our cached consumer index (we release RX entries as soon
 * as we peek them, so the two agree).
 *
 * The window.  A frame arriving when the fill ring is empty is dropped by
 * the kernel, silently (an unpaced burst of 10,000 frames into a veth
 * delivered 4,095).  The fill ring and RX ring hold RING frames, of
 * which up to XDP_BURST are in the caller's hands, so rx_frames is
 * (RING - XDP_BURST) / 2: one sender at a full window leaves half the
 * rings for the rest.
 *
 * ---- Sleeping -------------------------------------------------------------
 *
 * The wait fd is the socket itself: poll() reports POLLIN while the RX
 * ring is not empty and the kernel wakes it when it posts a frame.  arm()
 * only looks at the RX ring (RCP_EAGAIN if frames wait); recv_wait is the
 * dispatcher's arm/ppoll/recv.
 *
 * ---- Peers ------------------------------------------------------------------
 *
 * A peer is a MAC address on our link.  Address blob: [RCPI_NIC_XDP][MAC 6].
 * Strings: "xdp:IFNAME@aa:bb:cc:dd:ee:ff" (rcp_nic_addr_str gives ours) or
 * "xdp:IFNAME@A.B.C.D[:PORT]" (the port ignored), the MAC then taken from the kernel's neighbour
 * table (/proc/net/arp), resolved first if needed.  In a peer string the
 * IFNAME is the peer's own and is not used: frames leave through this
 * endpoint's interface.  Frames addressed to another MAC (a bridge floods
 * unknown unicast) are counted in rx_dropped and dropped.  Peers are
 * found by a linear scan behind a one-entry cache: fine for the tens of
 * hosts of one link; a hash is the next step past that.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>

#include "nic/nic_int.h"

#define XDP_ETHERTYPE 0x88B5u
#define XDP_HDR       16u /* Ethernet header + payload length */
#define XDP_FRAME     4096u
#define XDP_RING      2048u /* default entries per ring = frames per UMEM half */
#define XDP_RING_MIN  256u
#define XDP_RING_MAX  16384u
#define XDP_BURST     64
#define XDP_PEERS     1024
#define XDP_BLOB      7u /* id + MAC */
#define XDP_PROG_NAME "rcp_xdp"
#define XDP_KICKS     64 /* kicks per flush before RCP_EAGAIN */

struct xdp_peer {
	uint8_t mac[6];
	uint8_t used;
};

struct xdp_nic {
	struct rcp_nic base; /* first: the dispatcher casts */
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	void *area;
	int fd;      /* the socket */
	int prog_fd; /* our program, -1 until attached */
	int map_fd;  /* its XSKMAP */
	int lock_fd; /* flock: the interface is ours */
	int ns_fd;   /* our network namespace, for the detach at close */
	char lock_path[128];
	int ifindex;
	uint32_t attach_flags; /* XDP_FLAGS_DRV_MODE or _SKB_MODE */
	uint32_t queue;
	uint32_t mtu;
	char ifname[IF_NAMESIZE];
	uint8_t mac[6];
	uint32_t tx_queued; /* submitted since the last kick */
	/* free TX frame addresses */
	uint32_t ring; /* entries per ring = frames per UMEM half */
	uint64_t *txfree;
	uint32_t ntxfree;
	/* the burst in the caller's hands */
	uint64_t held[XDP_BURST];
	int nheld, released;
	uint8_t srcblob[XDP_BURST][XDP_BLOB];
	struct xdp_peer *peers;
	int npeers; /* highest used index + 1 */
	int last_peer;
};

static inline struct xdp_nic *xdp_of(rcp_nic *nic)
{
	return (struct xdp_nic *)nic;
}

static inline const struct xdp_nic *xdp_ofc(const rcp_nic *nic)
{
	return (const struct xdp_nic *)nic;
}

/* ---- the program ------------------------------------------------------- */

#define INSN(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

static int prog_load(int map_fd)
{
	const struct bpf_insn insns[] = {
	    /* 0 */ INSN(BPF_LDX | BPF_W | BPF_MEM, 2, 1, offsetof(struct xdp_md, data), 0),
	    /* 1 */ INSN(BPF_LDX | BPF_W | BPF_MEM, 3, 1, offsetof(struct xdp_md, data_end), 0),
	    /* 2 */ INSN(BPF_ALU64 | BPF_MOV | BPF_X, 4, 2, 0, 0),
	    /* 3 */ INSN(BPF_ALU64 | BPF_ADD | BPF_K, 4, 0, 0, XDP_HDR),
	    /* 4 */ INSN(BPF_JMP | BPF_JGT | BPF_X, 4, 3, 8, 0), /* short: pass */
	    /* 5 */ INSN(BPF_LDX | BPF_H | BPF_MEM, 4, 2, 12, 0),
	    /* 6 */ INSN(BPF_JMP | BPF_JNE | BPF_K, 4, 0, 6, htons(XDP_ETHERTYPE)),
	    /* 7 */ INSN(BPF_LDX | BPF_W | BPF_MEM, 2, 1, offsetof(struct xdp_md, rx_queue_index), 0),
	    /* 8 */ INSN(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
	    /* 9 */ INSN(0, 0, 0, 0, 0),
	    /* 10 */ INSN(BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, XDP_PASS), /* miss action */
	    /* 11 */ INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map),
	    /* 12 */ INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	    /* 13 */ INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, XDP_PASS),
	    /* 14 */ INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	return bpf_prog_load(BPF_PROG_TYPE_XDP, XDP_PROG_NAME, "Dual BSD/GPL", insns,
	                     sizeof insns / sizeof insns[0], NULL);
}

/* errno of a failed privileged step -> RCP code, with the reason logged. */
static int priv_err(const char *what, int err)
{
	if (err < 0)
		err = -err;
	if (err == EPERM || err == EACCES) {
		rcpi_warn("xdp: %s: %s (needs CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF: run as root)",
		          what, strerror(err));
		return RCP_EPERM;
	}
	if (err == EBUSY || err == EEXIST) {
		rcpi_warn("xdp: %s: %s", what, strerror(err));
		return RCP_EADDRINUSE;
	}
	if (err == ENOMEM)
		return RCP_ENOMEM;
	rcpi_warn("xdp: %s: %s (no AF_XDP/XDP support here?)", what, strerror(err));
	return RCP_ENOTSUP;
}

/* The lock that says "a live endpoint owns this interface" (see the top). */
static int lock_take(struct xdp_nic *x)
{
	struct stat st;
	char path[128];
	const char *dir = access("/run", W_OK) == 0 ? "/run" : "/tmp";

	if (stat("/proc/thread-self/ns/net", &st))
		st.st_ino = 0;
	snprintf(path, sizeof path, "%s/rcp-xdp-%lu-%d.lock", dir, (unsigned long)st.st_ino,
	         x->ifindex);
	/* close() unlinks the file while it holds the lock, so a lock taken
	 * on a file that is no longer at PATH is no lock: take it again. */
	for (;;) {
		struct stat a, b;
		x->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (x->lock_fd < 0)
			return priv_err("lock file", errno);
		if (flock(x->lock_fd, LOCK_EX | LOCK_NB)) {
			rcpi_warn("xdp: %s is in use by another endpoint (%s held)", x->ifname,
			          path);
			return RCP_EADDRINUSE;
		}
		if (!fstat(x->lock_fd, &a) && !stat(path, &b) && a.st_ino == b.st_ino)
			break;
		close(x->lock_fd);
	}
	snprintf(x->lock_path, sizeof x->lock_path, "%s", path);
	return 0;
}

/* With the lock held: detach a crashed endpoint's program, refuse a
 * foreign one. */
static int stale_clean(struct xdp_nic *x)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	const uint32_t modes[2] = {XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};

	if (bpf_xdp_query(x->ifindex, 0, &q))
		return 0; /* nothing to learn; attach will tell */
	for (int i = 0; i < 2; i++) {
		uint32_t id = i ? q.skb_prog_id : q.drv_prog_id;
		struct bpf_prog_info info;
		uint32_t ilen = sizeof info;
		int fd, ours, rc;

		if (!id)
			continue;
		fd = bpf_prog_get_fd_by_id(id);
		if (fd < 0)
			continue; /* gone meanwhile */
		memset(&info, 0, sizeof info);
		ours = !bpf_obj_get_info_by_fd(fd, &info, &ilen) &&
		       !strcmp(info.name, XDP_PROG_NAME);
		if (!ours) {
			close(fd);
			rcpi_warn("xdp: %s has another XDP program attached (id %u, \"%s\"); "
			          "not replacing it",
			          x->ifname, id, info.name);
			return RCP_EADDRINUSE;
		}
		{
			LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = fd);
			rc = bpf_xdp_attach(x->ifindex, -1, XDP_FLAGS_REPLACE | modes[i], &o);
		}
		close(fd);
		if (rc)
			return priv_err("detaching a stale rcp program", rc);
		rcpi_info("xdp: %s: removed the program of an endpoint that died (id %u)",
		          x->ifname, id);
	}
	return 0;
}

static int prog_attach(struct xdp_nic *x)
{
	const char *mode = rcpi_env_str("RCP_XDP_MODE");
	int rc;

	x->map_fd = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "rcp_xsks", 4, 4, 64, NULL);
	if (x->map_fd < 0)
		return priv_err("creating the XSKMAP", errno);
	rc = xsk_socket__update_xskmap(x->xsk, x->map_fd);
	if (rc)
		return priv_err("adding the socket to the XSKMAP", rc);
	x->prog_fd = prog_load(x->map_fd);
	if (x->prog_fd < 0) {
		x->prog_fd = -1;
		return priv_err("loading the XDP program", errno);
	}
	/* Native where the driver has it, generic otherwise (RCP_XDP_MODE). */
	x->attach_flags = XDP_FLAGS_DRV_MODE;
	if (mode && !strcmp(mode, "generic"))
		x->attach_flags = XDP_FLAGS_SKB_MODE;
	else if (mode && strcmp(mode, "native") && strcmp(mode, "auto"))
		rcpi_warn("xdp: RCP_XDP_MODE=%s is not native, generic or auto: auto", mode);
	rc = bpf_xdp_attach(x->ifindex, x->prog_fd, XDP_FLAGS_UPDATE_IF_NOEXIST | x->attach_flags,
	                    NULL);
	if (rc && rc != -EBUSY && rc != -EEXIST && rc != -EPERM &&
	    x->attach_flags == XDP_FLAGS_DRV_MODE && !(mode && !strcmp(mode, "native"))) {
		x->attach_flags = XDP_FLAGS_SKB_MODE;
		rc = bpf_xdp_attach(x->ifindex, x->prog_fd,
		                    XDP_FLAGS_UPDATE_IF_NOEXIST | x->attach_flags, NULL);
	}
	if (rc) {
		x->attach_flags = 0;
		return priv_err("attaching the XDP program", rc);
	}
	return 0;
}

/* Detaches our program.  The interface index means something only in
 * the namespace the endpoint was opened in, and a thread may have moved
 * since (setns is per thread): detach from there. */
static void prog_detach(struct xdp_nic *x)
{
	struct stat now, ours;
	int back = -1, rc;

	if (!x->attach_flags)
		return;
	if (x->ns_fd >= 0 && !fstat(x->ns_fd, &ours) && !stat("/proc/thread-self/ns/net", &now) &&
	    now.st_ino != ours.st_ino) {
		back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (back < 0 || setns(x->ns_fd, CLONE_NEWNET)) {
			rcpi_warn("xdp: %s: cannot return to its namespace to detach", x->ifname);
			if (back >= 0)
				close(back);
			return;
		}
	}
	{
		LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = x->prog_fd);
		rc = bpf_xdp_attach(x->ifindex, -1, XDP_FLAGS_REPLACE | x->attach_flags, &o);
	}
	if (rc)
		rcpi_warn("xdp: %s: detaching our program: %s", x->ifname, strerror(-rc));
	x->attach_flags = 0;
	if (back >= 0) {
		if (setns(back, CLONE_NEWNET))
			rcpi_warn("xdp: cannot return to the caller's namespace");
		close(back);
	}
}

/* ---- interface facts -------------------------------------------------- */

static int iface_facts(struct xdp_nic *x)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (s < 0)
		return RCP_ESYS;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, x->ifname, strlen(x->ifname));
	if (ioctl(s, SIOCGIFHWADDR, &ifr) || ifr.ifr_hwaddr.sa_family != 1 /* ARPHRD_ETHER */) {
		rcpi_warn("xdp: %s is not an Ethernet interface", x->ifname);
		rc = RCP_EADDR;
	} else {
		memcpy(x->mac, ifr.ifr_hwaddr.sa_data, 6);
		x->mtu = ioctl(s, SIOCGIFMTU, &ifr) ? 1500 : (uint32_t)ifr.ifr_mtu;
	}
	close(s);
	return rc;
}

/* ---- open / close ------------------------------------------------------ */

static int parse_local(const char *rest, char *ifname, uint32_t *queue)
{
	const char *slash = strchr(rest, '/');
	size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
	char *end;
	unsigned long q = 0;

	if (!n || n >= IF_NAMESIZE || memchr(rest, '@', n) || memchr(rest, ':', n))
		return RCP_EADDR;
	if (slash) {
		errno = 0;
		q = strtoul(slash + 1, &end, 10);
		if (!slash[1] || *end || errno || q > 1024)
			return RCP_EADDR;
	}
	memcpy(ifname, rest, n);
	ifname[n] = 0;
	*queue = (uint32_t)q;
	return 0;
}

static void xdp_free(struct xdp_nic *x)
{
	struct xdp_statistics xs;
	socklen_t xl = sizeof xs;

	/* What the kernel dropped on its side of the rings (our stats
	 * count only what we refused): for RCP_LOG=info. */
	if (x->fd >= 0 && !getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &xs, &xl) &&
	    (xs.rx_dropped || xs.rx_ring_full || xs.rx_fill_ring_empty_descs))
		rcpi_info("xdp: %s: the kernel dropped %llu frame(s), RX ring full %llu, "
		          "fill ring empty %llu",
		          x->ifname, (unsigned long long)xs.rx_dropped,
		          (unsigned long long)xs.rx_ring_full,
		          (unsigned long long)xs.rx_fill_ring_empty_descs);
	prog_detach(x);
	if (x->xsk)
		xsk_socket__delete(x->xsk);
	if (x->umem)
		xsk_umem__delete(x->umem);
	if (x->area && x->area != MAP_FAILED)
		munmap(x->area, (size_t)2 * x->ring * XDP_FRAME);
	if (x->prog_fd >= 0)
		close(x->prog_fd);
	if (x->map_fd >= 0)
		close(x->map_fd);
	if (x->ns_fd >= 0)
		close(x->ns_fd);
	if (x->lock_fd >= 0) {
		/* Last: the interface is free again. */
		if (x->lock_path[0])
			unlink(x->lock_path);
		close(x->lock_fd);
	}
	free(x->peers);
	free(x->txfree);
	free(x);
}

static int xdp_open(const char *rest, const struct rcp_nic_config *cfg, rcp_nic **out)
{
	struct xsk_umem_config ucfg = {
	    .frame_size = XDP_FRAME,
	    .frame_headroom = 0,
	};
	struct xsk_socket_config scfg = {
	    .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
	    .bind_flags = XDP_USE_NEED_WAKEUP,
	};
	struct xdp_nic *x;
	uint32_t idx, maxpay;
	int rc;

	x = calloc(1, sizeof *x);
	if (!x)
		return RCP_ENOMEM;
	x->fd = x->prog_fd = x->map_fd = x->lock_fd = -1;
	x->last_peer = -1;
	x->ns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	rc = parse_local(rest, x->ifname, &x->queue);
	if (rc)
		goto fail;
	x->ifindex = (int)if_nametoindex(x->ifname);
	if (!x->ifindex) {
		rcpi_warn("xdp: no interface \"%s\" here", x->ifname);
		rc = RCP_EADDR;
		goto fail;
	}
	/* Ring size: rx_bytes of receive frames (a power of two in
	 * [XDP_RING_MIN, XDP_RING_MAX]), XDP_RING by default. */
	x->ring = XDP_RING;
	if (cfg && cfg->rx_bytes) {
		size_t want = cfg->rx_bytes / XDP_FRAME;
		x->ring = XDP_RING_MIN;
		while (x->ring < want && x->ring < XDP_RING_MAX)
			x->ring *= 2;
	}
	ucfg.fill_size = ucfg.comp_size = scfg.rx_size = scfg.tx_size = x->ring;
	x->peers = calloc(XDP_PEERS, sizeof *x->peers);
	x->txfree = calloc(x->ring, sizeof *x->txfree);
	if (!x->peers || !x->txfree) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	rc = iface_facts(x);
	if (!rc)
		rc = lock_take(x);
	if (!rc)
		rc = stale_clean(x);
	if (rc)
		goto fail;

	x->area = mmap(NULL, (size_t)2 * x->ring * XDP_FRAME, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (x->area == MAP_FAILED) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	rc = xsk_umem__create(&x->umem, x->area, (uint64_t)2 * x->ring * XDP_FRAME, &x->fill,
	                      &x->comp, &ucfg);
	if (rc) {
		x->umem = NULL;
		rc = priv_err("registering the UMEM", rc);
		goto fail;
	}
	/* EBUSY with the lock held: the queue still holds the buffer pool of
	 * a socket closed an instant ago (this process's or a dead one's),
	 * which the kernel frees from a work queue after close.  That has no
	 * completion to wait on: retry for up to half a second. */
	for (int i = 0; i < 500; i++) {
		rc = xsk_socket__create(&x->xsk, x->ifname, x->queue, x->umem, &x->rx, &x->tx,
		                        &scfg);
		if (rc != -EBUSY)
			break;
		usleep(1000);
	}
	if (rc) {
		x->xsk = NULL;
		rc = priv_err("creating the AF_XDP socket", rc);
		goto fail;
	}
	x->fd = xsk_socket__fd(x->xsk);

	/* Every RX frame onto the fill ring; every TX frame onto the stack. */
	if (xsk_ring_prod__reserve(&x->fill, x->ring, &idx) != x->ring) {
		rc = RCP_ESYS;
		goto fail;
	}
	for (uint32_t i = 0; i < x->ring; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) = (uint64_t)i * XDP_FRAME;
	xsk_ring_prod__submit(&x->fill, x->ring);
	for (uint32_t i = 0; i < x->ring; i++)
		x->txfree[i] = (uint64_t)(x->ring + i) * XDP_FRAME;
	x->ntxfree = x->ring;

	rc = prog_attach(x);
	if (rc)
		goto fail;

	/* Payload limit: the link's MTU less our length word, and what a
	 * frame of the UMEM holds past the kernel's headroom. */
	maxpay = XDP_FRAME - XDP_PACKET_HEADROOM - XDP_HDR;
	x->mtu = x->mtu > 2 ? x->mtu - 2 : 0;
	if (x->mtu > maxpay)
		x->mtu = maxpay;
	if (cfg && cfg->mtu && cfg->mtu < x->mtu)
		x->mtu = cfg->mtu;
	rcpi_debug("xdp: %s queue %u: %s mode, mtu %u", x->ifname, x->queue,
	           x->attach_flags == XDP_FLAGS_DRV_MODE ? "native" : "generic", x->mtu);
	*out = &x->base;
	return 0;
fail:
	xdp_free(x);
	return rc;
}

static void xdp_close(rcp_nic *nic)
{
	xdp_free(xdp_of(nic));
}

static void xdp_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	info->backend = "xdp";
	info->mtu = xdp_ofc(nic)->mtu;
	info->rx_frames = (xdp_ofc(nic)->ring - XDP_BURST) / 2;
	info->caps = RCP_NIC_CAP_CHECKED;
}

/* ---- addresses and peers ------------------------------------------------ */

static int xdp_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	const struct xdp_nic *x = xdp_ofc(nic);
	const uint8_t *m = x->mac;
	int n = snprintf(buf, len, "xdp:%s@%02x:%02x:%02x:%02x:%02x:%02x", x->ifname, m[0], m[1],
	                 m[2], m[3], m[4], m[5]);
	return n < 0 || (size_t)n >= len ? RCP_ERANGE : 0;
}

static int xdp_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	uint8_t *b = buf;

	if (*len < XDP_BLOB)
		return RCP_ERANGE;
	b[0] = RCPI_NIC_XDP;
	memcpy(b + 1, xdp_ofc(nic)->mac, 6);
	*len = XDP_BLOB;
	return 0;
}

static int peer_find(struct xdp_nic *x, const uint8_t *mac)
{
	if (x->last_peer >= 0 && !memcmp(x->peers[x->last_peer].mac, mac, 6))
		return x->last_peer;
	for (int i = 0; i < x->npeers; i++)
		if (x->peers[i].used && !memcmp(x->peers[i].mac, mac, 6))
			return x->last_peer = i;
	return RCP_NIC_PEER_NONE;
}

static int peer_insert(struct xdp_nic *x, const uint8_t *mac, int *peer)
{
	int i = peer_find(x, mac);

	if (mac[0] & 1)
		return RCP_EADDR; /* multicast/broadcast: not an endpoint */
	if (i >= 0) {
		*peer = i;
		return 0;
	}
	for (i = 0; i < XDP_PEERS && x->peers[i].used; i++)
		;
	if (i == XDP_PEERS)
		return RCP_EAGAIN;
	memcpy(x->peers[i].mac, mac, 6);
	x->peers[i].used = 1;
	if (i >= x->npeers)
		x->npeers = i + 1;
	*peer = i;
	return 0;
}

static int xdp_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	if (len != XDP_BLOB || ((const uint8_t *)blob)[0] != RCPI_NIC_XDP)
		return RCP_EADDR;
	return peer_insert(xdp_of(nic), (const uint8_t *)blob + 1, peer);
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char tail;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
	           &tail) != 6 ||
	    strlen(s) != 17)
		return RCP_EADDR;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return 0;
}

/* The MAC of IP in the neighbour table, 0 or RCP_ENOENT. */
static int arp_lookup(const char *ip, const char *ifname, uint8_t mac[6])
{
	char line[256], a[64], hw[64], dev[64];
	unsigned type, flags;
	int rc = RCP_ENOENT;
	FILE *f = fopen("/proc/thread-self/net/arp", "re");

	if (!f)
		return RCP_ENOENT;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%63s 0x%x 0x%x %63s %*s %63s", a, &type, &flags, hw, dev) == 5 &&
		    !strcmp(a, ip) && !strcmp(dev, ifname) && (flags & 2 /* ATF_COM */) &&
		    !parse_mac(hw, mac)) {
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* The MAC of IPv4 address IP on our link: from the neighbour table, after
 * provoking the kernel's ARP with a datagram to the discard port if the
 * entry is missing (waits up to about a second for the answer). */
static int neigh_mac(const struct xdp_nic *x, const char *ip, uint8_t mac[6])
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9)};
	int s;

	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return RCP_EADDR;
	if (!arp_lookup(ip, x->ifname, mac))
		return 0;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return RCP_ESYS;
	setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, x->ifname, (socklen_t)strlen(x->ifname));
	for (int i = 0; i < 1000; i++) {
		if (i % 200 == 0)
			(void)!sendto(s, "", 0, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof sa);
		if (!arp_lookup(ip, x->ifname, mac)) {
			close(s);
			return 0;
		}
		usleep(1000); /* the kernel's ARP has no completion to wait on */
	}
	close(s);
	rcpi_warn("xdp: no neighbour entry for %s on %s", ip, x->ifname);
	return RCP_EPEER;
}

static int xdp_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	struct xdp_nic *x = xdp_of(nic);
	const char *at;
	uint8_t mac[6];
	int rc;

	if (strncmp(addr, "xdp:", 4))
		return RCP_EADDR;
	at = strchr(addr + 4, '@');
	if (!at || (size_t)(at - addr - 4) >= IF_NAMESIZE)
		return RCP_EADDR;
	if (strchr(at + 1, '.')) {
		/* An IPv4 address, maybe with a :PORT, which frames of ours
		 * have no use for (accepted so udp-style strings work). */
		char ip[INET_ADDRSTRLEN];
		size_t n = strcspn(at + 1, ":");
		if (n >= sizeof ip)
			return RCP_EADDR;
		memcpy(ip, at + 1, n);
		ip[n] = 0;
		rc = neigh_mac(x, ip, mac);
	} else {
		rc = parse_mac(at + 1, mac);
	}
	return rc ? rc : peer_insert(x, mac, peer);
}

static int xdp_peer_remove(rcp_nic *nic, int peer)
{
	struct xdp_nic *x = xdp_of(nic);

	if (peer >= x->npeers || !x->peers[peer].used)
		return RCP_EINVAL;
	x->peers[peer].used = 0;
	if (x->last_peer == peer)
		x->last_peer = -1;
	while (x->npeers && !x->peers[x->npeers - 1].used)
		x->npeers--;
	return 0;
}

/* ---- send ------------------------------------------------------------ */

/* Completed TX frames back onto the free stack, in one batch. */
static void comp_reap(struct xdp_nic *x)
{
	uint32_t idx, n = xsk_ring_cons__peek(&x->comp, x->ring, &idx);

	for (uint32_t i = 0; i < n; i++)
		x->txfree[x->ntxfree++] = *xsk_ring_cons__comp_addr(&x->comp, idx + i);
	if (n)
		xsk_ring_cons__release(&x->comp, n);
}

/* Descriptors submitted that the kernel has not taken yet. */
static uint32_t tx_outstanding(const struct xdp_nic *x)
{
	return *x->tx.producer - __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE);
}

/* Kicks the kernel until it has taken every TX descriptor (copy mode sends
 * a bounded batch per call).  Returns 0, RCP_EAGAIN (still some: the
 * device is busy) or RCP_ESYS. */
static int tx_kick(struct xdp_nic *x)
{
	for (int k = 0; k < XDP_KICKS && tx_outstanding(x); k++) {
		if (!xsk_ring_prod__needs_wakeup(&x->tx))
			return 0; /* the driver polls the ring itself */
		if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN &&
		    errno != EBUSY && errno != ENOBUFS && errno != EINTR) {
			rcpi_debug("xdp: kick: %s", strerror(errno));
			return RCP_ESYS;
		}
	}
	x->tx_queued = 0;
	comp_reap(x);
	return tx_outstanding(x) ? RCP_EAGAIN : 0;
}

static void frame_head(const struct xdp_nic *x, uint8_t *p, const uint8_t *dst, size_t plen)
{
	memcpy(p, dst, 6);
	memcpy(p + 6, x->mac, 6);
	p[12] = XDP_ETHERTYPE >> 8;
	p[13] = XDP_ETHERTYPE & 0xff;
	p[14] = (uint8_t)(plen >> 8);
	p[15] = (uint8_t)plen;
}

/* Claims a TX frame and a TX descriptor; 0 or RCP_EAGAIN. */
static int tx_claim(struct xdp_nic *x, uint64_t *addr, uint32_t *idx)
{
	if (!x->ntxfree) {
		comp_reap(x);
		if (!x->ntxfree) {
			tx_kick(x);
			if (!x->ntxfree)
				goto full;
		}
	}
	if (xsk_ring_prod__reserve(&x->tx, 1, idx) != 1) {
		tx_kick(x);
		if (xsk_ring_prod__reserve(&x->tx, 1, idx) != 1)
			goto full;
	}
	*addr = x->txfree[--x->ntxfree];
	return 0;
full:
	x->base.stats.tx_eagain++;
	return RCP_EAGAIN;
}

static void tx_post(struct xdp_nic *x, uint64_t addr, uint32_t idx, size_t plen)
{
	struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, idx);

	d->addr = addr;
	d->len = (uint32_t)(XDP_HDR + plen);
	xsk_ring_prod__submit(&x->tx, 1);
	x->tx_queued++;
	x->base.stats.tx_frames++;
	x->base.stats.tx_bytes += plen;
}

static int xdp_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                    unsigned flags)
{
	struct xdp_nic *x = xdp_of(nic);
	uint64_t addr;
	uint32_t idx;
	uint8_t *p;
	int rc;

	if (RCPI_UNLIKELY(peer >= x->npeers || !x->peers[peer].used))
		return RCP_EINVAL;
	if (RCPI_UNLIKELY(total > x->mtu))
		return RCP_EMSGSIZE;
	rc = tx_claim(x, &addr, &idx);
	if (rc)
		return rc;
	p = xsk_umem__get_data(x->area, addr);
	frame_head(x, p, x->peers[peer].mac, total);
	p += XDP_HDR;
	for (int i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue; /* the base may be NULL */
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	tx_post(x, addr, idx, total);
	if (flags & RCP_NIC_MORE)
		return 0;
	rc = tx_kick(x);
	return rc == RCP_EAGAIN ? 0 : rc; /* submitted: the next kick takes it */
}

static int xdp_flush(rcp_nic *nic)
{
	struct xdp_nic *x = xdp_of(nic);
	return x->tx_queued || tx_outstanding(x) ? tx_kick(x) : 0;
}

static int xdp_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame,
                       size_t flen)
{
	struct xdp_nic *x = xdp_of(nic);
	const uint8_t *mac = (const uint8_t *)blob + 1;
	uint64_t addr;
	uint32_t idx;
	uint8_t *p;
	int rc;

	if (len != XDP_BLOB || (mac[0] & 1))
		return RCP_EADDR;
	if (flen > x->mtu)
		return RCP_EMSGSIZE;
	rc = tx_claim(x, &addr, &idx);
	if (rc)
		return rc;
	p = xsk_umem__get_data(x->area, addr);
	frame_head(x, p, mac, flen);
	memcpy(p + XDP_HDR, frame, flen);
	tx_post(x, addr, idx, flen);
	rc = tx_kick(x);
	return rc == RCP_EAGAIN ? 0 : rc;
}

/* ---- receive ------------------------------------------------------------ */

/* RX frames back to the kernel: one reservation for all N (the fill ring
 * has room for every RX frame, so it cannot fail). */
static void fill_give(struct xdp_nic *x, const uint64_t *addrs, int n)
{
	uint32_t idx;

	if (n <= 0 || xsk_ring_prod__reserve(&x->fill, (uint32_t)n, &idx) != (uint32_t)n)
		return;
	for (int i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + (uint32_t)i) = addrs[i];
	xsk_ring_prod__submit(&x->fill, (uint32_t)n);
	if (xsk_ring_prod__needs_wakeup(&x->fill))
		(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

static int xdp_recv(rcp_nic *nic, struct rcp_nic_frame *fr, int max)
{
	struct xdp_nic *x = xdp_of(nic);
	uint64_t bad[XDP_BURST];
	uint32_t idx, n;
	int got = 0, nbad = 0;

	/* Frames the caller did not release go back now. */
	if (x->nheld > x->released)
		fill_give(x, x->held + x->released, x->nheld - x->released);
	x->nheld = x->released = 0;

	n = xsk_ring_cons__peek(&x->rx, (uint32_t)(max < XDP_BURST ? max : XDP_BURST), &idx);
	if (!n) {
		if (xsk_ring_prod__needs_wakeup(&x->fill))
			(void)!recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, idx + i);
		const uint8_t *p = xsk_umem__get_data(x->area, d->addr);
		uint64_t base = xsk_umem__extract_addr(d->addr);
		uint32_t plen;

		plen = d->len >= XDP_HDR ? (uint32_t)p[14] << 8 | p[15] : 0;
		if (d->len < XDP_HDR || p[12] != XDP_ETHERTYPE >> 8 ||
		    p[13] != (XDP_ETHERTYPE & 0xff) || memcmp(p, x->mac, 6) ||
		    XDP_HDR + plen > d->len) {
			x->base.stats.rx_dropped++;
			bad[nbad++] = base;
			continue;
		}
		x->srcblob[got][0] = RCPI_NIC_XDP;
		memcpy(x->srcblob[got] + 1, p + 6, 6);
		fr[got].data = p + XDP_HDR;
		fr[got].len = plen;
		fr[got].peer = peer_find(x, p + 6);
		fr[got].src = x->srcblob[got];
		fr[got].srclen = XDP_BLOB;
		fr[got].reserved = 0;
		fr[got].token = (uintptr_t)base;
		x->held[got] = base;
		x->base.stats.rx_frames++;
		x->base.stats.rx_bytes += plen;
		got++;
	}
	xsk_ring_cons__release(&x->rx, n);
	x->nheld = got;
	fill_give(x, bad, nbad);
	return got;
}

static void xdp_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct xdp_nic *x = xdp_of(nic);

	(void)frames; /* the burst is ours to know: held[] */
	if (n > x->nheld)
		n = x->nheld;
	if (n > x->released) {
		fill_give(x, x->held + x->released, n - x->released);
		x->released = n;
	}
}

static int xdp_fd(const rcp_nic *nic)
{
	return xdp_ofc(nic)->fd;
}

static int xdp_pending(rcp_nic *nic)
{
	struct xdp_nic *x = xdp_of(nic);
	return __atomic_load_n(x->rx.producer, __ATOMIC_ACQUIRE) != x->rx.cached_cons;
}

static int xdp_arm(rcp_nic *nic)
{
	return xdp_pending(nic) ? RCP_EAGAIN : 0;
}

const struct rcpi_nic_ops rcpi_nic_xdp_ops = {
    .name = "xdp",
    .id = RCPI_NIC_XDP,
    .open = xdp_open,
    .close = xdp_close,
    .query = xdp_query,
    .addr_str = xdp_addr_str,
    .addr_blob = xdp_addr_blob,
    .peer_add = xdp_peer_add,
    .peer_add_str = xdp_peer_add_str,
    .peer_remove = xdp_peer_remove,
    .send = xdp_send,
    .flush = xdp_flush,
    .recv = xdp_recv,
    .release = xdp_release,
    .fd = xdp_fd,
    .arm = xdp_arm,
    .pending = xdp_pending,
    .send_to = xdp_send_to,
    /* recv_wait: the dispatcher's arm/ppoll/recv.  No RMA. */
};
