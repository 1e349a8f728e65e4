/*
 * rcp-instr-pvm — (c) of perf/callgrind.sh: relinked pvm_psend/pvm_precv
 * of 8 B between two PVM tasks over RCP, for callgrind to count.
 *
 *   rcp-instr-pvm N FLAGFILE       (the parent, run under valgrind)
 *
 * The parent spawns one copy of itself through pvmd (not under valgrind:
 * only the parent is counted) and ping-pongs N/10 + 10 warm-up and N
 * counted round trips.  Both tasks run with RCP_WAIT=spin.
 *
 * The waiting left out.  The parent's count covers its pvm_psend and its
 * pvm_precv and nothing between them: collection is toggled on around
 * each call (CALLGRIND_TOGGLE_COLLECT, --collect-atstart=no).  So that
 * pvm_precv never waits, the child, after its pvm_psend of the echo has
 * returned (the frame is then in the parent's shm ring), stores the round
 * trip's number into a shared page (FLAGFILE, mapped by both); the parent
 * spins on that page with collection off and only then calls pvm_precv,
 * which finds the echo at its first look.  The count is one side's send
 * and receive; a round trip costs both sides the same (each task does one
 * psend and one precv), so perf/callgrind.sh reports twice the count as
 * the round trip, comparable with rcp-instr's two-endpoint figures.
 *
 * Prints  pvm rt=N transport=shm  (the channel's transport as libpvmrcp
 * reports it: anything but shm means the figures are not RCP's, exit 1).
 * Every echo is checked.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rcp/pvmrcp.h>

#include "perf/instr.h"

#define TAG_PING 1
#define TAG_QUIT 2

static _Atomic long *map_flag(const char *path, int create)
{
	int fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0600);
	void *p;
	if (fd < 0)
		return NULL;
	if (create && ftruncate(fd, 4096)) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static int child(const char *flagfile)
{
	int parent = pvm_parent(), atid, atag, alen;
	char buf[64];
	_Atomic long *flag = map_flag(flagfile, 0);
	if (!flag)
		return 1;
	for (long i = 1;; i++) {
		if (pvm_precv(parent, -1, buf, sizeof buf, PVM_BYTE, &atid, &atag, &alen) < 0)
			return 1;
		if (atag == TAG_QUIT)
			return 0;
		if (pvm_psend(parent, TAG_PING, buf, alen, PVM_BYTE) < 0)
			return 1;
		atomic_store_explicit(flag, i, memory_order_release);
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0, k = 0;
	int ctid, atid, atag, alen, rc = 0;
	char buf[8] = {0}, rbuf[64];
	_Atomic long *flag;
	const char *tr;

	if (argc != 3 || n < 1) {
		fprintf(stderr, "usage: %s ROUND_TRIPS FLAGFILE\n", argv[0]);
		return 2;
	}
	setenv("RCP_WAIT", "spin", 1);
	if (pvm_mytid() < 0)
		return 1;
	if (pvm_parent() > 0) {
		rc = child(argv[2]);
		pvm_exit();
		return rc;
	}
	flag = map_flag(argv[2], 1);
	if (!flag) {
		perror(argv[2]);
		pvm_exit();
		return 1;
	}
	{
		char *av[3] = {argv[1], argv[2], NULL};
		if (pvm_spawn("rcp-instr-pvm", av, PvmTaskDefault, "", 1, &ctid) != 1) {
			fprintf(stderr, "rcp-instr-pvm: spawn failed: %d\n", ctid);
			pvm_exit();
			return 1;
		}
	}
	for (long i = -(n / 10) - 10; i < n; i++) {
		memcpy(buf, &i, sizeof buf < sizeof i ? sizeof buf : sizeof i);
		if (i >= 0)
			INSTR_TOGGLE();
		rc = pvm_psend(ctid, TAG_PING, buf, sizeof buf, PVM_BYTE);
		if (i >= 0)
			INSTR_TOGGLE();
		if (rc)
			break;
		k++;
		/* The echo is in our ring once the child says so (not counted). */
		while (atomic_load_explicit(flag, memory_order_acquire) != k)
			;
		if (i >= 0)
			INSTR_TOGGLE();
		rc = pvm_precv(ctid, TAG_PING, rbuf, sizeof rbuf, PVM_BYTE, &atid, &atag, &alen);
		if (i >= 0)
			INSTR_TOGGLE();
		if (rc || alen != (int)sizeof buf || memcmp(rbuf, buf, sizeof buf)) {
			fprintf(stderr, "rcp-instr-pvm: bad echo (rc %d, len %d)\n", rc, alen);
			rc = 1;
			break;
		}
	}
	tr = pvm_rcp_transport(ctid);
	if (!rc) {
		printf("pvm rt=%ld transport=%s\n", n, tr);
		if (strcmp(tr, "shm")) {
			fprintf(stderr, "rcp-instr-pvm: the channel is %s, not RCP over shm\n", tr);
			rc = 1;
		}
	}
	pvm_psend(ctid, TAG_QUIT, buf, 1, PVM_BYTE);
	pvm_exit();
	return rc ? 1 : 0;
}
