/*
 * rcp-pvm-mcast-bench — one PVM task sends SIZE bytes to N tasks, one on
 * each of the hosts named, over and over; each task answers every message
 * with 4 bytes.  Time per message (median over ITERS, after 3 warm-up
 * rounds) and the aggregate delivered bandwidth N * SIZE / median: what
 * issue 20's "pmcast of 1 MiB to 4 hosts vs 4 unicasts vs stock
 * pvm_mcast" compares (perf/pmcast_bench.sh runs the three on a cluster).
 *
 *   rcp-pvm-mcast-bench MODE SIZE ITERS HOST...
 *
 * MODE: multicast   pvm_pmcast, IP multicast on (PVMRCP_MCAST=1)
 *       unicast     pvm_pmcast with multicast off (PVMRCP_MCAST=0): one
 *                   RCP unicast per host on udp
 *       stock       pvm_initsend(PvmDataRaw), pvm_pkbyte, pvm_mcast with
 *                   libpvmrcp a pass-through (PVMRCP=0): stock PVM
 * The mode is set in the environment before the first PVM call, exported
 * to the children (same binary, found on pvmd's ep= path), so the three
 * come from one binary.  Receivers use pvm_precv and check the length and
 * the first and last bytes of every message.  Output, one CSV line:
 *   mode,hosts,bytes,iters,median_us,min_us,agg_MBps,route,group_frames
 * route: pvm_rcp_mcast_route of the first task after the run; group_frames:
 * frames the sender sent to the multicast group (0 without multicast).
 * Waits spin (RCP_WAIT=spin unless set).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rcp/pvmrcp.h>
#include "perf/clock.h"

#define TAG_DATA 11
#define TAG_ACK  12
#define TAG_QUIT 13
#define MAXHOSTS 64

static int child(const char *mode, int size)
{
	char *buf = malloc((size_t)size + 1);
	int parent = pvm_parent(), ack = 1, atid, atag, alen;
	if (!buf)
		return 1;
	for (;;) {
		int rc = pvm_precv(parent, -1, buf, size, PVM_BYTE, &atid, &atag, &alen);
		if (rc < 0 || atag == TAG_QUIT)
			break;
		if (alen != size || (size && (buf[0] != (char)atag || buf[size - 1] != 'z'))) {
			fprintf(stderr, "%s: bad message: len %d tag %d\n", mode, alen, atag);
			ack = -1;
		}
		pvm_psend(parent, TAG_ACK, &ack, 1, PVM_INT);
	}
	free(buf);
	pvm_exit();
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode;
	int size, iters, n, tids[MAXHOSTS];
	double *t;
	char *buf;
	unsigned long long frames = 0;

	if (argc < 5) {
		fprintf(stderr, "usage: %s multicast|unicast|stock SIZE ITERS HOST...\n", argv[0]);
		return 2;
	}
	mode = argv[1];
	size = atoi(argv[2]);
	iters = atoi(argv[3]);
	n = argc - 4;
	if (size < 1 || iters < 1 || n > MAXHOSTS)
		return 2;
	if (!strcmp(mode, "stock"))
		setenv("PVMRCP", "0", 1);
	else
		setenv("PVMRCP_MCAST", strcmp(mode, "multicast") ? "0" : "1", 1);
	setenv("RCP_WAIT", getenv("RCP_WAIT") ? getenv("RCP_WAIT") : "spin", 1);
	if (pvm_parent() > 0)
		return child(mode, size);

	setenv("PVM_EXPORT", "PVMRCP:PVMRCP_MCAST:RCP_WAIT", 1);
	pvm_setopt(PvmRoute, PvmRouteDirect);
	for (int i = 0; i < n; i++) {
		if (pvm_spawn(argv[0], argv + 1, PvmTaskHost, argv[4 + i], 1, &tids[i]) != 1) {
			fprintf(stderr, "spawn on %s failed (%d)\n", argv[4 + i], tids[i]);
			pvm_exit();
			return 1;
		}
	}
	buf = malloc((size_t)size);
	t = calloc((size_t)iters, sizeof *t);
	if (!buf || !t)
		return 1;
	memset(buf, 'z', (size_t)size);
	for (int k = -3; k < iters; k++) {
		double t0 = now_us();
		int ack;
		buf[0] = TAG_DATA;
		if (!strcmp(mode, "stock")) {
			pvm_initsend(PvmDataRaw);
			pvm_pkbyte(buf, size, 1);
			if (pvm_mcast(tids, n, TAG_DATA) < 0)
				return 1;
		} else if (pvm_pmcast(tids, n, TAG_DATA, buf, size, PVM_BYTE) < 0) {
			return 1;
		}
		for (int i = 0; i < n; i++) {
			int atid, atag, alen;
			if (pvm_precv(-1, TAG_ACK, &ack, 1, PVM_INT, &atid, &atag, &alen) < 0 ||
			    ack != 1) {
				fprintf(stderr, "%s: a receiver failed\n", mode);
				return 1;
			}
		}
		if (k >= 0)
			t[k] = now_us() - t0;
	}
	for (int i = 0; i < n; i++)
		pvm_psend(tids[i], TAG_QUIT, buf, 0, PVM_BYTE);
	qsort(t, (size_t)iters, sizeof *t, cmpd);
	if (strcmp(mode, "stock"))
		pvm_rcp_mcast_stats(&frames, NULL, NULL);
	printf("%s,%d,%d,%d,%.1f,%.1f,%.1f,%s,%llu\n", mode, n, size, iters, t[iters / 2], t[0],
	       (double)n * size / t[iters / 2],
	       strcmp(mode, "stock") ? pvm_rcp_mcast_route(tids[0]) : "stock", frames);
	free(buf);
	free(t);
	pvm_exit();
	return 0;
}
