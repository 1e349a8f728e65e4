/*
 * nic/xdp/peers.c — the xdp backend's addresses and peer table (a MAC
 * per peer; xdp_int.h, "Peers").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic/xdp/xdp_int.h"

/* ---- addresses and peers ------------------------------------------------ */

int rcpi_xdp_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	const struct xdp_nic *x = xdp_ofc(nic);
	const uint8_t *m = x->mac;
	int n = snprintf(buf, len, "xdp:%s@%02x:%02x:%02x:%02x:%02x:%02x", x->link.ifname, m[0],
	                 m[1], m[2], m[3], m[4], m[5]);
	return n < 0 || (size_t)n >= len ? RCP_ERANGE : 0;
}

int rcpi_xdp_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	uint8_t *b = buf;

	if (*len < XDP_BLOB)
		return RCP_ERANGE;
	b[0] = RCPI_NIC_XDP;
	memcpy(b + 1, xdp_ofc(nic)->mac, 6);
	*len = XDP_BLOB;
	return 0;
}

int rcpi_xdp_peer_find(struct xdp_nic *x, const uint8_t *mac)
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
	int i = rcpi_xdp_peer_find(x, mac);

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

int rcpi_xdp_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	if (len != XDP_BLOB || ((const uint8_t *)blob)[0] != RCPI_NIC_XDP)
		return RCP_EADDR;
	return peer_insert(xdp_of(nic), (const uint8_t *)blob + 1, peer);
}

int rcpi_xdp_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
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
		rc = rcpi_xdp_neigh_mac(x->link.ifname, ip, mac);
	} else {
		rc = rcpi_xdp_parse_mac(at + 1, mac);
	}
	return rc ? rc : peer_insert(x, mac, peer);
}

int rcpi_xdp_peer_remove(rcp_nic *nic, int peer)
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
