/*
 * rcp-pvm-mcast — one PVM task sends SIZE bytes to N receivers on other
 * hosts and waits until each has confirmed: the aggregate bandwidth a
 * multicast delivers (perf/cluster_bench.sh, issue 20 item 4).
 *
 *   rcp-pvm-mcast LABEL rcp|stock pmcast|unicast|mcast SIZE ITERS HOST...
 *
 *   pmcast   pvm_pmcast(tids, N, ...) of SIZE bytes (libpvmrcp: one
 *            rcp_mcast per endpoint today; IP multicast when the udp nic
 *            offers it, issue 20 item 3)
 *   unicast  N pvm_psend, one per receiver
 *   mcast    pvm_initsend(PvmDataRaw), pvm_pkbyte, pvm_mcast: the packed
 *            multicast; with "stock" (PVMRCP=0 in every task: libpvmrcp a
 *            pass-through, as rcp-pvm-pingpong) it is stock PVM's, through
 *            the pvmds
 *
 * One receiver is spawned on each HOST (PvmTaskHost; the binary is found
 * on pvmd's ep= path).  A round: the master sends, each receiver takes the
 * whole message (precv, or recv + upkbyte), checks its first and last
 * bytes and answers 4 bytes; the round ends with the N-th answer.  ITERS
 * rounds after ITERS/10 + 2 unmeasured ones.  Waits spin (RCP_WAIT=spin)
 * unless RCP_WAIT is set.  Output, one CSV line:
 *   label,mode,bytes,receivers,iters,round_median_ms,aggregate_MBps
 * aggregate = N * SIZE / median round (MB/s, 1 MB = 1e6 B): the bytes
 * delivered per second; a sender whose link carries each byte once (IP
 * multicast) can deliver up to N times its link rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rcp/pvmrcp.h>
#include "perf/clock.h"

#define MAXN     16
#define TAG_DATA 1
#define TAG_ACK  2
#define TAG_QUIT 3

enum { M_PMCAST, M_UNICAST, M_MCAST };

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A receiver: takes messages of SIZE until TAG_QUIT, answers each. */
static int receiver(int mode, int size)
{
	char *buf = malloc((size_t)size);
	int parent = pvm_parent(), atid, atag, alen;
	int32_t ok;

	if (!buf)
		return 1;
	memset(buf, 0, (size_t)size);
	for (;;) {
		if (mode == M_MCAST) {
			int b = pvm_recv(parent, -1);
			if (b < 0 || pvm_bufinfo(b, &alen, &atag, &atid) < 0)
				return 1;
			if (atag == TAG_QUIT)
				return 0;
			if (pvm_upkbyte(buf, size, 1) < 0)
				return 1;
		} else {
			if (pvm_precv(parent, -1, buf, size, PVM_BYTE, &atid, &atag, &alen) < 0)
				return 1;
			if (atag == TAG_QUIT)
				return 0;
			if (alen != size)
				return 1;
		}
		ok = buf[0] == buf[size - 1];
		if (pvm_psend(parent, TAG_ACK, &ok, 1, PVM_INT) < 0)
			return 1;
	}
}

static int send_round(int mode, int *tids, int n, char *buf, int size)
{
	switch (mode) {
	case M_PMCAST: return pvm_pmcast(tids, n, TAG_DATA, buf, size, PVM_BYTE);
	case M_UNICAST:
		for (int k = 0; k < n; k++)
			if (pvm_psend(tids[k], TAG_DATA, buf, size, PVM_BYTE) < 0)
				return -1;
		return 0;
	default:
		if (pvm_initsend(PvmDataRaw) < 0 || pvm_pkbyte(buf, size, 1) < 0)
			return -1;
		return pvm_mcast(tids, n, TAG_DATA);
	}
}

int main(int argc, char **argv)
{
	int mode, size, iters, n, tids[MAXN], rc = 0;
	char *buf;
	double *t;

	if (argc < 6) {
		fprintf(stderr,
		        "usage: %s LABEL rcp|stock pmcast|unicast|mcast SIZE ITERS HOST...\n",
		        argv[0]);
		return 2;
	}
	if (!strcmp(argv[2], "stock"))
		setenv("PVMRCP", "0", 1);
	setenv("RCP_WAIT", "spin", 0);
	mode = !strcmp(argv[3], "pmcast")    ? M_PMCAST
	       : !strcmp(argv[3], "unicast") ? M_UNICAST
	                                     : M_MCAST;
	size = atoi(argv[4]);
	iters = atoi(argv[5]);
	if (size < 1 || iters < 1)
		return 2;
	if (pvm_mytid() < 0)
		return 1;
	if (pvm_parent() > 0) {
		rc = receiver(mode, size);
		pvm_exit();
		return rc;
	}
	n = argc - 6 < MAXN ? argc - 6 : MAXN;
	if (n < 1) {
		fprintf(stderr, "%s: no receiver host\n", argv[0]);
		pvm_exit();
		return 2;
	}
	{
		/* a receiver's argv: the same first four, no host */
		char *cav[6] = {argv[1], argv[2], argv[3], argv[4], "1", NULL};
		for (int k = 0; k < n; k++)
			if (pvm_spawn("rcp-pvm-mcast", cav, PvmTaskHost, argv[6 + k], 1,
			              &tids[k]) != 1) {
				fprintf(stderr, "spawn on %s failed: %d\n", argv[6 + k], tids[k]);
				pvm_exit();
				return 1;
			}
	}
	buf = malloc((size_t)size);
	t = malloc(sizeof *t * (size_t)iters);
	if (!buf || !t)
		return 1;
	memset(buf, 0x5a, (size_t)size);
	for (int i = -iters / 10 - 2; i < iters; i++) {
		double t0 = now_ms();
		if (send_round(mode, tids, n, buf, size) < 0) {
			fprintf(stderr, "send failed\n");
			rc = 1;
			break;
		}
		for (int k = 0; k < n; k++) {
			int32_t ok = 0;
			int atid, atag, alen;
			if (pvm_precv(-1, TAG_ACK, &ok, 1, PVM_INT, &atid, &atag, &alen) < 0 ||
			    !ok) {
				fprintf(stderr, "no good answer\n");
				rc = 1;
				break;
			}
		}
		if (rc)
			break;
		if (i >= 0)
			t[i] = now_ms() - t0;
	}
	if (!rc) {
		qsort(t, (size_t)iters, sizeof *t, cmpd);
		printf("%s,%s,%d,%d,%d,%.3f,%.1f\n", argv[1], argv[3], size, n, iters, t[iters / 2],
		       (double)n * size / (t[iters / 2] * 1e3));
		fflush(stdout);
	}
	for (int k = 0; k < n; k++) {
		if (mode == M_MCAST) {
			pvm_initsend(PvmDataRaw);
			pvm_send(tids[k], TAG_QUIT);
		} else {
			pvm_psend(tids[k], TAG_QUIT, buf, 1, PVM_BYTE);
		}
	}
	pvm_exit();
	return rc;
}
