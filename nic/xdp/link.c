/*
 * nic/xdp/link.c — the xdp backend's XDP program on an interface, and who
 * owns the interface (the other files of nic/xdp/ have the rings, frames and peers).
 *
 * Fifteen BPF instructions assembled here and loaded at open (no BPF
 * object file, so no clang at build time): a frame with our EtherType goes
 * to the socket of its RX queue through an XSKMAP (bpf_redirect_map with
 * XDP_PASS as the miss action, so a queue without a socket passes it on);
 * everything else, ARP, IP, ssh, goes to the kernel untouched.  It runs in
 * native (driver) mode where the driver has it and in generic (skb) mode
 * otherwise (RCP_XDP_MODE=native|generic|auto); the socket binds in copy
 * mode unless the driver offers zero copy.  Except on veth, where auto
 * means generic: veth's native mode first copies every skb into a page of
 * its own to make an xdp_buff (the skb a peer sends is not laid out for
 * XDP), then the socket copies it again into the UMEM; generic runs the
 * program on the skb itself, one copy.  Between two rcp-cluster hosts
 * (shared machine, spinning, 4 MiB RCP messages) generic moved 10-38%
 * more in each of 5 interleaved pairs and 8 B round trips were no slower
 * (docs/nic.md).  One endpoint owns an interface (one program per interface).
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
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>

#include "nic/nic_int.h"
#include "nic/xdp/xdp_int.h"

#define XDP_PROG_NAME "rcp_xdp" /* how the next open knows ours */

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
	    /* 7 */
	    INSN(BPF_LDX | BPF_W | BPF_MEM, 2, 1, offsetof(struct xdp_md, rx_queue_index), 0),
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
int rcpi_xdp_err(const char *what, int err)
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
static int lock_take(struct rcpi_xdp_link *l)
{
	struct stat st;
	char path[128];
	const char *dir = access("/run", W_OK) == 0 ? "/run" : "/tmp";

	if (stat("/proc/thread-self/ns/net", &st))
		st.st_ino = 0;
	snprintf(path, sizeof path, "%s/rcp-xdp-%lu-%d.lock", dir, (unsigned long)st.st_ino,
	         l->ifindex);
	/* close() unlinks the file while it holds the lock, so a lock taken
	 * on a file that is no longer at PATH is no lock: take it again. */
	for (;;) {
		struct stat a, b;
		l->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (l->lock_fd < 0)
			return rcpi_xdp_err("lock file", errno);
		if (flock(l->lock_fd, LOCK_EX | LOCK_NB)) {
			rcpi_warn("xdp: %s is in use by another endpoint (%s held)", l->ifname,
			          path);
			return RCP_EADDRINUSE;
		}
		if (!fstat(l->lock_fd, &a) && !stat(path, &b) && a.st_ino == b.st_ino)
			break;
		close(l->lock_fd);
	}
	snprintf(l->lock_path, sizeof l->lock_path, "%s", path);
	return 0;
}

/* With the lock held: detach a crashed endpoint's program, refuse a
 * foreign one. */
static int stale_clean(struct rcpi_xdp_link *l)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	const uint32_t modes[2] = {XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};

	if (bpf_xdp_query(l->ifindex, 0, &q))
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
		ours =
		    !bpf_obj_get_info_by_fd(fd, &info, &ilen) && !strcmp(info.name, XDP_PROG_NAME);
		if (!ours) {
			close(fd);
			rcpi_warn("xdp: %s has another XDP program attached (id %u, \"%s\"); "
			          "not replacing it",
			          l->ifname, id, info.name);
			return RCP_EADDRINUSE;
		}
		{
			LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = fd);
			rc = bpf_xdp_attach(l->ifindex, -1, XDP_FLAGS_REPLACE | modes[i], &o);
		}
		close(fd);
		if (rc)
			return rcpi_xdp_err("detaching a stale rcp program", rc);
		rcpi_info("xdp: %s: removed the program of an endpoint that died (id %u)",
		          l->ifname, id);
	}
	return 0;
}

/* 1 if IFNAME's driver is veth (ETHTOOL_GDRVINFO), else 0. */
static int is_veth(const char *ifname)
{
	struct ethtool_drvinfo di = {.cmd = ETHTOOL_GDRVINFO};
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), veth;

	if (s < 0)
		return 0;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
	ifr.ifr_data = (void *)&di;
	veth = !ioctl(s, SIOCETHTOOL, &ifr) && !strcmp(di.driver, "veth");
	close(s);
	return veth;
}

int rcpi_xdp_link_attach(struct rcpi_xdp_link *l, struct xsk_socket *xsk, uint32_t queue)
{
	const char *mode = rcpi_env_str("RCP_XDP_MODE");
	int rc;

	/* The map is indexed by RX queue: room for ours, whatever its number. */
	l->map_fd = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "rcp_xsks", 4, 4,
	                           queue < 64 ? 64 : queue + 1, NULL);
	if (l->map_fd < 0)
		return rcpi_xdp_err("creating the XSKMAP", errno);
	rc = xsk_socket__update_xskmap(xsk, l->map_fd);
	if (rc)
		return rcpi_xdp_err("adding the socket to the XSKMAP", rc);
	l->prog_fd = prog_load(l->map_fd);
	if (l->prog_fd < 0) {
		l->prog_fd = -1;
		return rcpi_xdp_err("loading the XDP program", errno);
	}
	/* Native where the driver has it, generic otherwise and on veth
	 * (RCP_XDP_MODE; the top of this file says why). */
	l->attach_flags = XDP_FLAGS_DRV_MODE;
	if (mode && strcmp(mode, "native") && strcmp(mode, "auto") && strcmp(mode, "generic"))
		rcpi_warn("xdp: RCP_XDP_MODE=%s is not native, generic or auto: auto", mode);
	if (mode && !strcmp(mode, "generic"))
		l->attach_flags = XDP_FLAGS_SKB_MODE;
	else if (!(mode && !strcmp(mode, "native")) && is_veth(l->ifname))
		l->attach_flags = XDP_FLAGS_SKB_MODE;
	rc = bpf_xdp_attach(l->ifindex, l->prog_fd, XDP_FLAGS_UPDATE_IF_NOEXIST | l->attach_flags,
	                    NULL);
	if (rc && rc != -EBUSY && rc != -EEXIST && rc != -EPERM &&
	    l->attach_flags == XDP_FLAGS_DRV_MODE && !(mode && !strcmp(mode, "native"))) {
		l->attach_flags = XDP_FLAGS_SKB_MODE;
		rc = bpf_xdp_attach(l->ifindex, l->prog_fd,
		                    XDP_FLAGS_UPDATE_IF_NOEXIST | l->attach_flags, NULL);
	}
	if (rc) {
		l->attach_flags = 0;
		return rcpi_xdp_err("attaching the XDP program", rc);
	}
	return 0;
}

/* Detaches our program.  The interface index means something only in
 * the namespace the endpoint was opened in, and a thread may have moved
 * since (setns is per thread): detach from there. */
void rcpi_xdp_link_detach(struct rcpi_xdp_link *l)
{
	struct stat now, ours;
	int back = -1, rc;

	if (!l->attach_flags)
		return;
	if (l->ns_fd >= 0 && !fstat(l->ns_fd, &ours) && !stat("/proc/thread-self/ns/net", &now) &&
	    now.st_ino != ours.st_ino) {
		back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (back < 0 || setns(l->ns_fd, CLONE_NEWNET)) {
			rcpi_warn("xdp: %s: cannot return to its namespace to detach", l->ifname);
			if (back >= 0)
				close(back);
			return;
		}
	}
	{
		LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = l->prog_fd);
		rc = bpf_xdp_attach(l->ifindex, -1, XDP_FLAGS_REPLACE | l->attach_flags, &o);
	}
	if (rc)
		rcpi_warn("xdp: %s: detaching our program: %s", l->ifname, strerror(-rc));
	l->attach_flags = 0;
	if (back >= 0) {
		if (setns(back, CLONE_NEWNET))
			rcpi_warn("xdp: cannot return to the caller's namespace");
		close(back);
	}
}

void rcpi_xdp_link_init(struct rcpi_xdp_link *l)
{
	l->prog_fd = l->map_fd = l->lock_fd = -1;
	l->attach_flags = 0;
	l->lock_path[0] = 0;
	l->ns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
}

int rcpi_xdp_link_own(struct rcpi_xdp_link *l)
{
	int rc = lock_take(l);
	return rc ? rc : stale_clean(l);
}

void rcpi_xdp_link_close(struct rcpi_xdp_link *l)
{
	if (l->prog_fd >= 0)
		close(l->prog_fd);
	if (l->map_fd >= 0)
		close(l->map_fd);
	if (l->ns_fd >= 0)
		close(l->ns_fd);
	l->prog_fd = l->map_fd = l->ns_fd = -1;
	if (l->lock_fd >= 0) {
		if (l->lock_path[0])
			unlink(l->lock_path);
		close(l->lock_fd);
		l->lock_fd = -1;
	}
}
