/*
 * rcp-copy-ceiling — how fast can two processes on this host move a
 * message at all?  The ceiling under RCP's shm bandwidth, measured the way
 * rcp-pingpong measures RCP: a ping-pong between two processes pinned to
 * CPUs 0 and 1, message after message in alternating directions, median
 * round trip, bandwidth = size / (median / 2).  No protocol, no library:
 *
 *   memcpy  one process copies the message (no ping-pong; the reference)
 *   cma1    the receiver pulls the whole message with one
 *           process_vm_readv (what RCP does below RCP_RMA_SPLIT)
 *   cma2    split: the sender pushes the lower half with process_vm_writev
 *           while the receiver pulls the upper half (what RCP's split RMA
 *           transfers do from RCP_RMA_SPLIT)
 *   pipe2   copy-in/copy-out through a shared-memory pipeline of CHUNK-byte
 *           cells (the sender copies in while the receiver copies out)
 *
 * The only synchronisation is a shared counter per direction (the
 * RTS/READY/FIN of a real protocol, without their frames), so RCP's figure
 * over the best of these is the cost of the protocol.
 *
 *   rcp-copy-ceiling [--sizes LIST] [--iters N] [--chunk BYTES] [--cells N]
 *                    [--methods LIST] [--no-pin]
 *
 * Output: CSV  method,size,iters,rtt_median_us,bandwidth_MBps
 * (1 MB = 1e6 B; memcpy's "rtt" is two copies, so its bandwidth column is
 * comparable).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf/size_arg.h"
#include "perf/tcp_pingpong.h"
#include "perf/clock.h"

#define MAXCELLS 64
#define MAXLIST  32 /* sizes or methods on the command line */

enum method { M_MEMCPY, M_CMA1, M_CMA2, M_PIPE2, NMETHODS };
static const char *const method_names[NMETHODS] = {"memcpy", "cma1", "cma2", "pipe2"};

/* One cache line per counter: the two processes write different ones. */
struct ctl {
	_Alignas(64) atomic_ulong go[2];  /* transfers started, per direction */
	_Alignas(64) atomic_ulong fin[2]; /* halves finished, per direction */
	_Alignas(64) atomic_ulong full[2][MAXCELLS];
	_Alignas(64) atomic_int failed;
};

struct run {
	struct ctl *ctl;
	unsigned char *cells; /* [2][cells][chunk] */
	unsigned char *src, *dst;
	size_t chunk;
	int ncells;
	pid_t other;
	unsigned long ncma[2]; /* cma transfers so far, per direction */
};

static void spin_until(atomic_ulong *v, unsigned long want, atomic_int *failed)
{
	while (atomic_load_explicit(v, memory_order_acquire) < want)
		if (atomic_load_explicit(failed, memory_order_relaxed))
			_exit(1);
}

static int vm_copy(pid_t pid, void *local, void *remote, size_t n, int write)
{
	struct iovec l = {local, n}, r = {remote, n};
	ssize_t got = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
	                    : process_vm_readv(pid, &l, 1, &r, 1, 0);
	return got == (ssize_t)n ? 0 : -1;
}

/* One transfer of N bytes in direction DIR (0: process 0 sends), as side
 * ME of METHOD (not M_MEMCPY).  The sender's message is at SBUF, the
 * receiver's buffer is dst: both addresses are the same in both processes
 * (allocated before the fork). */
static int xfer(struct run *R, enum method method, int me, int dir, size_t n, unsigned char *sbuf)
{
	struct ctl *c = R->ctl;
	int sender = me == dir;
	if (method != M_PIPE2) {
		size_t h = method == M_CMA2 ? n / 2 : 0;
		unsigned long k = ++R->ncma[dir]; /* both sides count alike */
		if (sender) {
			atomic_store_explicit(&c->go[dir], k, memory_order_release);
			if (h && vm_copy(R->other, sbuf, R->dst, h, 1))
				return -1;
			atomic_fetch_add_explicit(&c->fin[dir], 1, memory_order_acq_rel);
		} else {
			spin_until(&c->go[dir], k, &c->failed);
			if (vm_copy(R->other, R->dst + h, sbuf + h, n - h, 0))
				return -1;
			atomic_fetch_add_explicit(&c->fin[dir], 1, memory_order_acq_rel);
		}
		/* Both halves done before either side goes on. */
		spin_until(&c->fin[dir], 2 * k, &c->failed);
		return 0;
	}
	/* pipe2: cell i of direction DIR is full while full[dir][i] is odd. */
	for (size_t off = 0, i = 0; off < n; off += R->chunk, i++) {
		size_t m = n - off < R->chunk ? n - off : R->chunk;
		int cell = (int)(i % (size_t)R->ncells);
		atomic_ulong *f = &c->full[dir][cell];
		unsigned char *p = R->cells + ((size_t)dir * R->ncells + cell) * R->chunk;
		unsigned long v;
		while (((v = atomic_load_explicit(f, memory_order_acquire)) & 1) ==
		       (sender ? 1u : 0u))
			if (atomic_load_explicit(&c->failed, memory_order_relaxed))
				_exit(1);
		if (sender)
			memcpy(p, sbuf + off, m);
		else
			memcpy(R->dst + off, p, m);
		atomic_store_explicit(f, v + 1, memory_order_release);
	}
	return 0;
}

/* Splits the comma-separated LIST into at most MAX items, each through
 * PARSE (-1: not valid); returns how many, or -1. */
static int parse_list(const char *list, long *out, int max, long (*parse)(const char *))
{
	char *s = strdup(list), *f = s, *save = NULL, *t;
	int n = 0;
	for (; s && (t = strtok_r(f, ",", &save)); f = NULL) {
		if (n == max || (out[n] = parse(t)) < 0) {
			fprintf(stderr, "bad list item %s\n", t);
			n = -1;
			break;
		}
		n++;
	}
	free(s);
	return s ? n : -1;
}

static long parse_method(const char *m)
{
	for (int i = 0; i < NMETHODS; i++)
		if (!strcmp(m, method_names[i]))
			return i;
	return -1;
}

static long parse_size(const char *s)
{
	size_t n = size_arg(s);
	return n && n <= (size_t)LONG_MAX ? (long)n : -1;
}

/* ITERS timed round trips (after a warm-up) of N bytes by METHOD into T;
 * memcpy runs in process 0 only.  0, or 1 after saying what failed. */
static int measure(struct run *R, enum method method, int me, size_t n, int iters, double *t)
{
	for (int i = -(iters / 10 + 2); i < iters; i++) {
		uint64_t t0 = pp_now_ns();
		/* ping: 0 -> 1 from src, stamped at both ends (the split's two
		 * halves); pong: 1 echoes what it got, 0 checks it came back. */
		unsigned char mark = (unsigned char)(i * 7 + 1);
		if (method == M_MEMCPY) {
			memcpy(R->dst, R->src, n);
			memcpy(R->src, R->dst, n);
		} else {
			if (me == 0)
				R->src[0] = R->src[n - 1] = mark;
			if (xfer(R, method, me, 0, n, R->src) ||
			    xfer(R, method, me, 1, n, R->dst)) {
				fprintf(stderr, "%s: %s\n", method_names[method], strerror(errno));
				return 1;
			}
			if (me == 0 && (R->dst[0] != mark || R->dst[n - 1] != mark)) {
				fprintf(stderr, "%s: %zu B came back wrong\n", method_names[method],
				        n);
				return 1;
			}
		}
		if (i >= 0)
			t[i] = (double)(pp_now_ns() - t0) / 1e3;
	}
	return 0;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
	        "usage: %s [--sizes LIST] [--iters N] [--chunk BYTES] [--cells N]\n"
	        "          [--methods memcpy,cma1,cma2,pipe2] [--no-pin]\n",
	        argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"sizes", 1, 0, 's'}, {"iters", 1, 0, 'i'},   {"chunk", 1, 0, 'c'},
	    {"cells", 1, 0, 'n'}, {"methods", 1, 0, 'm'}, {"no-pin", 0, 0, 'P'},
	    {0, 0, 0, 0}};
	const char *sizes_s = "64k,256k,1M,4M", *methods_s = "memcpy,cma1,cma2,pipe2";
	long sizes[MAXLIST], methods[MAXLIST];
	int iters = 200, pin = 1, o, rc = 0, nsizes, nmethods;
	size_t maxsz = 0;
	double *t;
	struct run R = {.chunk = 65536, .ncells = 8};
	pid_t child;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': sizes_s = optarg; break;
		case 'i': iters = atoi(optarg); break;
		case 'c': R.chunk = size_arg(optarg); break;
		case 'n': R.ncells = atoi(optarg); break;
		case 'm': methods_s = optarg; break;
		case 'P': pin = 0; break;
		default: usage(argv[0]);
		}
	}
	nsizes = parse_list(sizes_s, sizes, MAXLIST, parse_size);
	nmethods = parse_list(methods_s, methods, MAXLIST, parse_method);
	if (iters < 4 || !R.chunk || R.ncells < 1 || R.ncells > MAXCELLS || nsizes < 1 ||
	    nmethods < 1)
		usage(argv[0]);
	for (int k = 0; k < nsizes; k++)
		if ((size_t)sizes[k] > maxsz)
			maxsz = (size_t)sizes[k];

	R.ctl =
	    mmap(NULL, sizeof *R.ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	R.cells = mmap(NULL, 2 * (size_t)R.ncells * R.chunk, PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	R.src = malloc(maxsz);
	R.dst = malloc(maxsz);
	t = malloc(sizeof(double) * (size_t)iters);
	if (R.ctl == MAP_FAILED || R.cells == MAP_FAILED || !R.src || !R.dst || !t) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	memset(R.src, 0x5a, maxsz);
	memset(R.dst, 0, maxsz);

	R.other = getpid();
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child)
		R.other = child;
	if (pin)
		pp_pin_cpu(child ? 0 : 1);

	if (child)
		printf("method,size,iters,rtt_median_us,bandwidth_MBps\n");
	for (int m = 0; m < nmethods && !rc; m++) {
		for (int k = 0; k < nsizes && !rc; k++) {
			size_t n = (size_t)sizes[k];
			if (methods[m] == M_MEMCPY && !child)
				continue; /* one process is enough */
			rc = measure(&R, (enum method)methods[m], child ? 0 : 1, n, iters, t);
			if (rc) {
				atomic_store(&R.ctl->failed, 1);
			} else if (child) {
				qsort(t, (size_t)iters, sizeof *t, cmpd);
				printf("%s,%zu,%d,%.3f,%.1f\n", method_names[methods[m]], n, iters,
				       t[iters / 2], (double)n / (t[iters / 2] / 2));
				fflush(stdout);
			}
		}
	}
	free(t);
	free(R.src);
	free(R.dst);
	if (child) {
		int status;
		if (waitpid(child, &status, 0) == child &&
		    (!WIFEXITED(status) || WEXITSTATUS(status)))
			rc = rc ? rc : 1;
	}
	return rc;
}
