/*
 * perf/bulk_bw.c — rcp-bulk-bw: bulk pull and push bandwidth between two
 * processes on this host, next to memcpy of the same sizes.
 *
 *   rcp-bulk-bw [--transport shm|udp] [--emulate] [--segs N] [--pipeline CHUNK:DEPTH]
 *               [--sizes 64k,1m,4m,16m] [--iters N] [--csv]
 *
 * The child owns a READWRITE handle over SIZE bytes (in N equal segments),
 * progresses its bulk context until told to stop; the parent pulls and
 * pushes the whole handle ITERS times per size into one local buffer and
 * reports bytes / wall time (one transfer at a time, each waited for).  The
 * first transfer of each size is a warm-up (page faults) and not counted.
 * Every transfer's status is checked: any failure exits non-zero.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rcp/bulk.h>
#include <rcp/rcp.h>

#include "size_arg.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_ep(const char *transport, int accept, rcp_ep **ep, rcp_bulk_ctx **ctx)
{
	char addr[64];
	struct rcp_ep_config ec = {0};
	if (!strcmp(transport, "shm"))
		snprintf(addr, sizeof addr, "shm:bulkbw-%d", (int)getpid());
	else
		snprintf(addr, sizeof addr, "udp:");
	ec.flags = (accept ? RCP_EP_ACCEPT : 0) | RCP_EP_SPIN;
	if (rcp_ep_open(addr, &ec, ep))
		return -1;
	return rcp_bulk_ctx_open(*ep, ctx) ? -1 : 0;
}

static int xchg(rcp_ep *ep, int rfd, int wfd, rcp_chan **ch)
{
	char me[RCP_NIC_ADDRSTR_MAX] = {0}, peer[RCP_NIC_ADDRSTR_MAX];
	if (rcp_ep_addr(ep, me, sizeof me) || write(wfd, me, sizeof me) != (ssize_t)sizeof me ||
	    read(rfd, peer, sizeof peer) != (ssize_t)sizeof peer)
		return -1;
	return rcp_connect(ep, peer, ch);
}

static rcp_bulk *make(rcp_bulk_ctx *ctx, char *buf, size_t size, int segs, unsigned perm)
{
	void *p[256];
	size_t l[256], per = size / (size_t)segs;
	rcp_bulk *h;
	for (int i = 0; i < segs; i++) {
		p[i] = buf + (size_t)i * per;
		l[i] = i == segs - 1 ? size - per * (size_t)(segs - 1) : per;
	}
	return rcp_bulk_create(ctx, segs, p, l, perm, &h) ? NULL : h;
}

int main(int argc, char **argv)
{
	const char *transport = "shm", *sizes = "64k,256k,1m,4m,16m";
	int emulate = 0, segs = 1, iters = 0, csv = 0, depth = 0;
	size_t chunk = 0, maxsize = 0, list[32];
	int nsizes = 0, p2c[2], c2p[2];
	pid_t child;
	static const struct option opts[] = {{"transport", 1, 0, 't'}, {"emulate", 0, 0, 'e'},
	                                     {"segs", 1, 0, 'n'},      {"pipeline", 1, 0, 'p'},
	                                     {"sizes", 1, 0, 's'},     {"iters", 1, 0, 'i'},
	                                     {"csv", 0, 0, 'c'},       {0, 0, 0, 0}};
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 't': transport = optarg; break;
		case 'e': emulate = 1; break;
		case 'n': segs = atoi(optarg); break;
		case 'p':
			chunk = size_arg(optarg);
			depth = strchr(optarg, ':') ? atoi(strchr(optarg, ':') + 1) : 4;
			break;
		case 's': sizes = optarg; break;
		case 'i': iters = atoi(optarg); break;
		case 'c': csv = 1; break;
		default:
			fprintf(stderr,
			        "usage: %s [--transport shm|udp] [--emulate] [--segs N] "
			        "[--pipeline CHUNK:DEPTH] [--sizes LIST] [--iters N] [--csv]\n",
			        argv[0]);
			return 2;
		}
	}
	if (segs < 1 || segs > 256)
		return 2;
	for (char *s = strdup(sizes), *t = strtok(s, ","); t && nsizes < 32;
	     t = strtok(NULL, ",")) {
		list[nsizes] = size_arg(t);
		if (list[nsizes] > maxsize)
			maxsize = list[nsizes];
		nsizes++;
	}
	if (emulate)
		setenv("RCP_BULK_RMA", "0", 1);
	if (pipe(p2c) || pipe(c2p))
		return 1;
	child = fork();
	if (child == 0) {
		rcp_ep *ep;
		rcp_bulk_ctx *ctx;
		rcp_chan *ch;
		rcp_bulk *h;
		rcp_req *rq;
		char *buf = malloc(maxsize), c;
		unsigned char ser[65536];
		size_t sl = sizeof ser;
		if (!buf || open_ep(transport, 1, &ep, &ctx) || xchg(ep, p2c[0], c2p[1], &ch))
			_exit(10);
		memset(buf, 0x5a, maxsize);
		h = make(ctx, buf, maxsize, segs, RCP_BULK_READWRITE);
		if (!h || rcp_bulk_serialize(h, ser, &sl) || rcp_send(ch, 1, ser, sl))
			_exit(11);
		if (rcp_irecv(ep, ch, 2, &c, 1, &rq))
			_exit(12);
		while (rcp_test(rq, NULL) == RCP_EAGAIN)
			if (rcp_bulk_progress(ctx) < 0)
				_exit(13);
		rcp_bulk_free(h);
		rcp_bulk_ctx_close(ctx);
		rcp_ep_close(ep);
		_exit(0);
	}
	{
		rcp_ep *ep;
		rcp_bulk_ctx *ctx;
		rcp_chan *ch;
		rcp_bulk *rh, *lh;
		unsigned char ser[65536];
		struct rcp_status st;
		char *buf = malloc(maxsize), *cpy = malloc(maxsize);
		int rc, failed = 0, wst;
		const char *mode = "";
		if (!buf || !cpy || open_ep(transport, 0, &ep, &ctx) ||
		    xchg(ep, c2p[0], p2c[1], &ch) || rcp_recv(ep, ch, 1, ser, sizeof ser, &st) ||
		    rcp_bulk_deserialize(ctx, ser, st.len, &rh))
			return 1;
		memset(buf, 1, maxsize);
		memset(cpy, 2, maxsize);
		lh = make(ctx, buf, maxsize, 1, RCP_BULK_READWRITE);
		if (!lh)
			return 1;
		if (csv)
			printf("transport,mode,op,size,segs,pipeline,bandwidth_MBps,GiBps,memcpy_"
			       "MBps\n");
		else
			printf("%-4s %-10s %-4s %10s %5s %10s %12s %8s %12s\n", "tr", "mode", "op",
			       "size", "segs", "pipeline", "MB/s", "GiB/s", "memcpy MB/s");
		for (int si = 0; si < nsizes; si++) {
			size_t size = list[si];
			int n = iters ? iters : (int)(((size_t)2 << 30) / size) + 3;
			double mc, t0;
			if (n > 20000)
				n = 20000;
			memcpy(cpy, buf, size);
			t0 = now_s();
			for (int i = 0; i < n; i++) {
				memcpy(i & 1 ? cpy : buf, i & 1 ? buf : cpy, size);
				__asm__ __volatile__("" ::: "memory");
			}
			mc = (double)size * n / (now_s() - t0) / 1e6;
			for (int dir = 0; dir < 2; dir++) {
				double t = 0, bw;
				for (int i = 0; i <= n; i++) {
					rcp_bulk_op *op;
					double s0 = now_s();
					int status = 1;
					if (chunk)
						rc = rcp_bulk_pipeline(ctx, ch, dir, rh, 0, lh, 0,
						                       size, chunk, depth, NULL,
						                       NULL, NULL, &op);
					else
						rc = rcp_bulk_transfer(ctx, ch, dir, rh, 0, lh, 0,
						                       size, NULL, NULL, &op);
					if (!rc)
						rc = rcp_bulk_wait(op, -1, &status);
					if (rc || status) {
						fprintf(stderr, "transfer failed: %s / %s\n",
						        rcp_strerror(rc), rcp_strerror(status));
						failed = 1;
						break;
					}
					if (i)
						t += now_s() - s0;
				}
				if (failed)
					break;
				bw = (double)size * n / t / 1e6;
				{
					struct rcp_bulk_stats bs;
					rcp_bulk_get_stats(ctx, &bs);
					mode = bs.rma_ops ? "one-sided" : "emulated";
				}
				if (csv)
					printf("%s,%s,%s,%zu,%d,%zu:%d,%.0f,%.2f,%.0f\n", transport,
					       mode, dir ? "push" : "pull", size, segs, chunk,
					       depth, bw, bw * 1e6 / (1 << 30), mc);
				else
					printf("%-4s %-10s %-4s %10zu %5d %7zu:%-2d %12.0f %8.2f "
					       "%12.0f\n",
					       transport, mode, dir ? "push" : "pull", size, segs,
					       chunk, depth, bw, bw * 1e6 / (1 << 30), mc);
				fflush(stdout);
			}
			if (failed)
				break;
		}
		rcp_send(ch, 2, "q", 1);
		waitpid(child, &wst, 0);
		rcp_bulk_free(lh);
		rcp_bulk_free(rh);
		rcp_bulk_ctx_close(ctx);
		rcp_ep_close(ep);
		return failed || !WIFEXITED(wst) || WEXITSTATUS(wst) ? 1 : 0;
	}
}
