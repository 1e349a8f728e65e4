/*
 * tests/fuzz_udp.c — libFuzzer target: what the udp backend and the
 * endpoint above it do with datagrams from anyone (nic/udp/ receive and
 * peer table, rcp/endpoint.c, the core).
 *
 * Each input gets a fresh accepting endpoint on udp:127.0.0.1 with one
 * receive posted; real datagrams are sent to it from four local sockets
 * (four senders the endpoint does not know), and it is progressed.
 * Input: records of a control byte, a 16-bit length (little-endian) and
 * that many bytes.  Control: bits 0-1, the sending socket; bit 2, the
 * bytes are an address blob for rcp_nic_peer_add/remove instead of a
 * datagram (no name resolution: a blob is numeric); bit 3, progress
 * now (else every 32 records: one receive call takes a burst).  The seeds are frames recorded on the simulator (tests/fuzz_seed).
 * RCP_LINGER_MS=0, so closing an endpoint never waits.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rcp/nic.h>
#include <rcp/rcp.h>

#include "fuzz_guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

enum { NSOCK = 4 };
static int socks[NSOCK];
static char names[NSOCK][64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("RCP_LINGER_MS", "0", 1);
	for (int i = 0; i < NSOCK; i++) {
		struct sockaddr_in a = {0};
		socklen_t al = sizeof a;
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		socks[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		if (socks[i] < 0 || bind(socks[i], (struct sockaddr *)&a, sizeof a) ||
		    getsockname(socks[i], (struct sockaddr *)&a, &al)) {
			perror("fuzz_udp: socket");
			abort();
		}
		snprintf(names[i], sizeof names[i], "udp:127.0.0.1:%u", ntohs(a.sin_port));
	}
	return 0;
}

static void drain(void)
{
	unsigned char b[65536];
	for (int i = 0; i < NSOCK; i++)
		while (recv(socks[i], b, sizeof b, MSG_DONTWAIT) >= 0)
			;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char rbuf[65536];
	struct rcp_ep_config ec = {0};
	struct sockaddr_in to = {0};
	char addr[128];
	unsigned port;
	rcp_ep *ep;
	rcp_req *req;

	ec.flags = RCP_EP_ACCEPT;
	if (rcp_ep_open("udp:127.0.0.1:", &ec, &ep))
		return 0;
	if (rcp_ep_addr(ep, addr, sizeof addr) || sscanf(addr, "udp:127.0.0.1:%u", &port) != 1)
		__builtin_trap();
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons((uint16_t)port);
	(void)rcp_irecv(ep, NULL, RCP_ANY_TAG, rbuf, sizeof rbuf, &req);
	for (unsigned rec = 1; size >= 3; rec++) {
		unsigned ctl = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		if (ctl & 4) {
			unsigned char *blob = malloc(len ? len : 1);
			int peer;
			if (blob) {
				memcpy(blob, data, len);
				if (!rcp_nic_peer_add(rcp_ep_nic(ep), blob, len, &peer))
					(void)rcp_nic_peer_remove(rcp_ep_nic(ep), peer);
				free(blob);
			}
		} else if (!fuzz_ack_spins(rcp_chan_find(ep, names[ctl & 3]), data, len,
		                           0x52435031u)) {
			/* tests/fuzz_guard.h (the default session cookie). */
			(void)sendto(socks[ctl & 3], data, len, 0, (struct sockaddr *)&to,
			             sizeof to);
		}
		data += len;
		size -= len;
		if ((ctl & 8) || rec % 32 == 0)
			(void)rcp_progress(ep);
	}
	for (int i = 0; i < 4; i++)
		(void)rcp_progress(ep);
	rcp_ep_close(ep);
	drain();
	return 0;
}
