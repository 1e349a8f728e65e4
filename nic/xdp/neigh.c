/*
 * nic/xdp/neigh.c — the xdp backend's peer strings: a MAC address, or an
 * IPv4 address whose MAC the kernel's neighbour table (ARP) knows.
 * peers.c keeps the peers; this file only finds their MACs.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nic/nic_int.h"
#include "nic/xdp/xdp_int.h"

int rcpi_xdp_parse_mac(const char *s, uint8_t mac[6])
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
		    !rcpi_xdp_parse_mac(hw, mac)) {
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
int rcpi_xdp_neigh_mac(const char *ifname, const char *ip, uint8_t mac[6])
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9)};
	int s;

	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return RCP_EADDR;
	if (!arp_lookup(ip, ifname, mac))
		return 0;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return RCP_ESYS;
	setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)strlen(ifname));
	for (int i = 0; i < 1000; i++) {
		if (i % 200 == 0)
			(void)!sendto(s, "", 0, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof sa);
		if (!arp_lookup(ip, ifname, mac)) {
			close(s);
			return 0;
		}
		usleep(1000); /* the kernel's ARP has no completion to wait on */
	}
	close(s);
	rcpi_warn("xdp: no neighbour entry for %s on %s", ip, ifname);
	return RCP_EPEER;
}
