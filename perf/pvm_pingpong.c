/*
 * rcp-pvm-pingpong — pvm_psend/pvm_precv ping-pong between two PVM tasks:
 * round trip (median, p5, p99) and bandwidth = size / (median / 2), for the
 * configuration given on the command line.  perf/pvm_bench.sh runs it for
 * stock PVM (default route through pvmd, and PvmRouteDirect) and for the
 * relinked path (RCP, spinning and sleeping) in one VM and prints the
 * ratios.
 *
 *   rcp-pvm-pingpong LABEL rcp|stock default|direct spin|sleep [iters [psend|raw|xdr|inplace [maxsize]]]
 *
 * maxsize: only the sizes up to it (e.g. 8 for perf/callgrind_pvm.sh).
 * raw/xdr/inplace: packed messages instead (pvm_initsend(PvmDataRaw or
 * PvmDataDefault), pvm_pkint of the size, pvm_pkbyte of the data,
 * pvm_send; pvm_recv, pvm_upkint, pvm_upkbyte), both ways.
 *
 * The binary is linked with libpvmrcp; "stock" sets PVMRCP=0 in both tasks
 * (before their first PVM call), which makes libpvmrcp a pass-through, so
 * stock and relinked figures come from the same binary.  The parent spawns
 * one copy of itself (found on pvmd's ep= path) with the same arguments.
 * PVMPP_HOST=NAME spawns the child on host NAME (PvmTaskHost).
 * Each size is warmed up; buffers are allocated and touched once; every
 * echo's length and first/last bytes are checked.  Output: CSV lines
 *   label,bytes,iters,rtt_median_us,rtt_p5_us,rtt_p99_us,MBps
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PP_STOCK
#include <pvm3.h> /* rcp-pvm-pingpong-stock: for LD_PRELOAD=libpvmrcp.so */
#else
#include <rcp/pvmrcp.h>
#endif

#include "perf/clock.h"

#define MAXSZ    (4 << 20)
#define TAG_PING 1
#define TAG_QUIT 2

static void configure(char **argv)
{
	if (!strcmp(argv[2], "stock"))
		setenv("PVMRCP", "0", 1);
	setenv("RCP_WAIT", argv[4], 1);
}

static int enc = -1; /* packed: PvmDataRaw, PvmDataDefault, PvmDataInPlace; -1: psend */

/* Packed: sends S bytes of BUF to TID with TAG; 0 or <0. */
static int pk_send(int tid, int tag, const char *buf, int s)
{
	if (pvm_initsend(enc) < 0 || pvm_pkint(&s, 1, 1) || pvm_pkbyte((char *)buf, s, 1))
		return -1;
	return pvm_send(tid, tag);
}

/* Packed: receives from TID (tag -1) into BUF; *TAG, *LEN; 0 or <0. */
static int pk_recv(int tid, char *buf, int *tag, int *len)
{
	int b = pvm_recv(tid, -1), nb, src;
	if (b < 0 || pvm_bufinfo(b, &nb, tag, &src) < 0)
		return -1;
	*len = 0;
	if (*tag == TAG_QUIT)
		return 0;
	if (pvm_upkint(len, 1, 1) || *len < 0 || *len > MAXSZ || pvm_upkbyte(buf, *len, 1))
		return -1;
	return 0;
}

static int child(void)
{
	int parent = pvm_parent(), atid, atag, alen;
	char *buf = malloc(MAXSZ);
	memset(buf, 0, MAXSZ);
	while (enc >= 0) {
		if (pk_recv(parent, buf, &atag, &alen) < 0)
			return 1;
		if (atag == TAG_QUIT)
			return 0;
		if (pk_send(parent, TAG_PING, buf, alen) < 0)
			return 1;
	}
	for (;;) {
		if (pvm_precv(parent, -1, buf, MAXSZ, PVM_BYTE, &atid, &atag, &alen) < 0)
			return 1;
		if (atag == TAG_QUIT)
			return 0;
		if (pvm_psend(parent, TAG_PING, buf, alen, PVM_BYTE) < 0)
			return 1;
	}
}

int main(int argc, char **argv)
{
	static const int sizes[] = {8, 64, 1024, 4096, 65536, 1 << 20, 4 << 20};
	int iters, ctid, atid, atag, alen, rc = 0, maxsz;
	char *buf, *rbuf;
	double *t;

	if (argc < 5) {
		fprintf(stderr,
		        "usage: %s LABEL rcp|stock default|direct spin|sleep [iters "
		        "[psend|raw|xdr|inplace "
		        "[maxsize]]]\n",
		        argv[0]);
		return 2;
	}
	configure(argv);
	iters = argc > 5 ? atoi(argv[5]) : 2000;
	maxsz = argc > 7 ? atoi(argv[7]) : MAXSZ;
	if (argc > 6 && strcmp(argv[6], "psend"))
		enc = !strcmp(argv[6], "raw")       ? PvmDataRaw
		      : !strcmp(argv[6], "inplace") ? PvmDataInPlace
		                                    : PvmDataDefault;
	if (pvm_mytid() < 0)
		return 1;
	if (!strcmp(argv[3], "direct"))
		pvm_setopt(PvmRoute, PvmRouteDirect);
	if (pvm_parent() > 0) {
		rc = child();
		pvm_exit();
		return rc;
	}
	{
		char *av[7] = {
		    argv[1], argv[2], argv[3], argv[4], "0", argc > 6 ? argv[6] : "psend", NULL};
		/* PVMPP_HOST: the child on that host (perf/xdp_bench.sh: across hosts) */
		char *where = getenv("PVMPP_HOST");
		const char *self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
		if (pvm_spawn((char *)self, av, where ? PvmTaskHost : PvmTaskDefault,
		              where ? where : "", 1, &ctid) != 1) {
			fprintf(stderr, "spawn failed: %d\n", ctid);
			pvm_exit();
			return 1;
		}
	}
	buf = malloc(MAXSZ);
	rbuf = malloc(MAXSZ);
	t = malloc(sizeof(double) * (size_t)iters);
	memset(buf, 0x5a, MAXSZ);
	memset(rbuf, 0, MAXSZ);
	for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		int s = sizes[k], n = s >= (1 << 20) ? iters / 20 : s >= 65536 ? iters / 4 : iters;
		if (s > maxsz)
			break;
		if (n < 20)
			n = 20;
		for (int i = -n / 10 - 5; i < n; i++) {
			double t0 = now_us();
			buf[0] = (char)i;
			buf[s - 1] = (char)(i + 1);
			if (enc >= 0 ? pk_send(ctid, TAG_PING, buf, s) ||
			                   pk_recv(ctid, rbuf, &atag, &alen)
			             : pvm_psend(ctid, TAG_PING, buf, s, PVM_BYTE) ||
			                   pvm_precv(ctid, TAG_PING, rbuf, MAXSZ, PVM_BYTE, &atid,
			                             &atag, &alen)) {
				fprintf(stderr, "psend/precv failed\n");
				rc = 1;
				goto out;
			}
			if (i >= 0)
				t[i] = now_us() - t0;
			if (alen != s || rbuf[0] != (char)i || rbuf[s - 1] != (char)(i + 1)) {
				fprintf(stderr, "bad echo at size %d\n", s);
				rc = 1;
				goto out;
			}
		}
		qsort(t, (size_t)n, sizeof *t, cmpd);
		printf("%s,%d,%d,%.3f,%.3f,%.3f,%.1f\n", argv[1], s, n, t[n / 2], t[n / 20],
		       t[(n * 99) / 100], s / (t[n / 2] / 2));
		fflush(stdout);
	}
out:
	pvm_psend(ctid, TAG_QUIT, buf, 1, PVM_BYTE);
	pvm_exit();
	return rc;
}
