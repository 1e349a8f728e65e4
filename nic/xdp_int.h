/*
 * nic/xdp_int.h — between nic/xdp.c (rings, frames, peers) and
 * nic/xdp_link.c (our XDP program on an interface and who owns it) and
 * nic/xdp_neigh.c (peer strings to MACs).
 */
#ifndef RCP_NIC_XDP_INT_H
#define RCP_NIC_XDP_INT_H

#include <net/if.h>
#include <stdint.h>

struct xsk_socket;

/* The frame format (nic/xdp.c, top): our EtherType, and the header before
 * the payload (Ethernet header + 2-byte payload length). */
#define XDP_ETHERTYPE 0x88B5u
#define XDP_HDR       16u

/* An interface an endpoint owns, and the program attached to it. */
struct rcpi_xdp_link {
	char ifname[IF_NAMESIZE];
	int ifindex;
	int prog_fd;           /* our program, -1 until loaded */
	int map_fd;            /* its XSKMAP, -1 until made */
	int lock_fd;           /* flock: the interface is ours */
	int ns_fd;             /* our network namespace, for the detach */
	uint32_t attach_flags; /* XDP_FLAGS_DRV_MODE or _SKB_MODE; 0: not attached */
	char lock_path[128];
};

/* Sets the fds to -1 and remembers the caller's network namespace
 * (IFNAME and IFINDEX are the caller's to fill). */
void rcpi_xdp_link_init(struct rcpi_xdp_link *l);
/* Takes the interface: its lock (RCP_EADDRINUSE if a live endpoint holds
 * it), then detaches a crashed endpoint's program or refuses a foreign
 * one (RCP_EADDRINUSE).  Returns 0 or a negative RCP code. */
int rcpi_xdp_link_own(struct rcpi_xdp_link *l);
/* Makes the XSKMAP holding XSK, loads the program and attaches it
 * (RCP_XDP_MODE).  Returns 0, RCP_EPERM, RCP_ENOTSUP, RCP_EADDRINUSE,
 * RCP_ENOMEM, with the reason logged. */
int rcpi_xdp_link_attach(struct rcpi_xdp_link *l, struct xsk_socket *xsk);
/* Detaches our program (only ours), from the namespace of the open. */
void rcpi_xdp_link_detach(struct rcpi_xdp_link *l);
/* Closes the fds and gives the interface up (the lock last). */
void rcpi_xdp_link_close(struct rcpi_xdp_link *l);
/* nic/xdp_neigh.c: "aa:bb:cc:dd:ee:ff" -> MAC: 0 or RCP_EADDR. */
int rcpi_xdp_parse_mac(const char *s, uint8_t mac[6]);
/* The MAC of IPv4 address IP on IFNAME, from the neighbour table (the
 * kernel's ARP provoked if the entry is missing; waits up to about a
 * second).  0, RCP_EADDR (not an address), RCP_EPEER (no answer),
 * RCP_ESYS. */
int rcpi_xdp_neigh_mac(const char *ifname, const char *ip, uint8_t mac[6]);
/* errno (either sign) of a failed privileged step -> RCP code, logged. */
int rcpi_xdp_err(const char *what, int err);

#endif
