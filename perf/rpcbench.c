/*
 * rcp-rpcbench — rpc/ and bulk/ performance: empty-RPC round trip, RPC
 * rate per number of calls in flight, the cost of 4 KiB arguments, bulk
 * pull and push bandwidth, server-reply vs remote fetch.
 *
 * A client and a server, each with one rcp_ep, one rpc context and one
 * bulk context.  Without --listen/--connect the tool forks the server
 * itself (a pipe carries its address, nothing else).
 *
 * What is measured (client side, monotonic clock):
 *   rpc   calls "bench.noop" (input: a byte array of SIZE bytes, output:
 *         nothing), keeping INFLIGHT calls outstanding: each completion
 *         callback forwards the next call.  rate_ops = successful calls /
 *         elapsed; latency_us = mean time in flight (INFLIGHT / rate).  For
 *         INFLIGHT 1 latency_us is the median round trip of single calls.
 *   pull  calls "bench.bulk" with a handle over SIZE client bytes; the
 *   push  server pulls them into (or pushes them from) its own buffer with
 *         rcp_bulk_transfer, then answers.  bandwidth = SIZE / median
 *         call time (includes the call, as Mercury's hg_bw_read/write).
 * Each point is warmed up, then runs about --target-ms.  Only successful
 * calls count; any failed call, wrong byte count or error ends the run
 * with a message and exit status 1.
 *
 * --spin / --sleep: both ends never sleep / sleep at once when idle
 * (default: spin then sleep).  --mode fetch: the client uses remote fetch
 * (RFP) where the server offers it (shm); rows say which mode ran.
 *
 * --waits (session 21): each side prints to stderr what its waits did (the
 * client per rate row, over the timed part; the server at its end) (rcp_ep_wait_stats: looks, yields, sleeps, crowded verdicts)
 * and its context switches (getrusage: voluntary = slept, involuntary =
 * preempted or yielded to another task), so that a slow run can be told
 * apart: two spinners on 2 CPUs lose to any third task, and a wait that
 * finds its CPU crowded sleeps (common/wait.c, CROWDED), even with --spin.
 *
 * Output: a table, or with --csv a header then rows
 *   transport,mode,op,size,inflight,rate_ops,latency_us,bandwidth_MBps
 * (1 MB = 1e6 bytes).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rcp/bulk.h>
#include <rcp/rpc.h>

#include "size_arg.h"

struct opts {
	const char *transport, *mode, *listen, *connect, *bulk;
	int inflight[16], ninflight;
	size_t sizes[64];
	int nsizes;
	size_t args[8];
	int nargs;
	int spin, sleep_, csv, target_ms, waits;
};

static struct opts O;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "rcp-rpcbench: %s: %s\n", what, rcp_strerror(rc));
	exit(1);
}

/* ---- calls ---- */

struct noop_in {
	struct rcp_bytes data;
};
RCP_PROC_DEFINE(proc_noop_in, struct noop_in, rcp_proc_bytes(p, &v->data))

struct bulk_in {
	rcp_bulk *h;
	uint64_t len;
	uint32_t dir;
};
RCP_PROC_DEFINE(proc_bulk_in, struct bulk_in, rcp_proc_bulk(p, &v->h); rcp_proc_u64(p, &v->len);
                rcp_proc_u32(p, &v->dir))
RCP_PROC_DEFINE(proc_u64, uint64_t, rcp_proc_u64(p, v))

static uint64_t id_noop, id_empty, id_bulk, id_quit;

static void reg(rcp_rpc *rpc)
{
	int rc = rcp_rpc_register(rpc, "bench.noop", proc_noop_in, NULL, &id_noop);
	if (!rc)
		rc = rcp_rpc_register(rpc, "bench.empty", NULL, NULL, &id_empty);
	if (!rc)
		rc = rcp_rpc_register(rpc, "bench.bulk", proc_bulk_in, proc_u64, &id_bulk);
	if (!rc)
		rc = rcp_rpc_register(rpc, "bench.quit", NULL, NULL, &id_quit);
	if (rc)
		die("register", rc);
}

static unsigned ep_flags(int server)
{
	unsigned f = server ? RCP_EP_ACCEPT : 0;
	if (O.spin)
		f |= RCP_EP_SPIN;
	if (O.sleep_)
		f |= RCP_EP_SLEEP;
	return f;
}

static unsigned rpc_flags(void)
{
	unsigned f = 0;
	if (O.spin)
		f |= RCP_RPC_SPIN;
	if (O.sleep_)
		f |= RCP_RPC_SLEEP;
	if (!strcmp(O.mode, "fetch"))
		f |= RCP_RPC_FETCH;
	return f;
}

struct ctx {
	rcp_ep *ep;
	rcp_bulk_ctx *bulk;
	rcp_rpc *rpc;
};

static void open_ctx(const char *addr, int server, struct ctx *c)
{
	struct rcp_ep_config ec = {0};
	struct rcp_rpc_config rc = {0};
	int r;
	ec.flags = ep_flags(server);
	ec.crc = -1;
	r = rcp_ep_open(addr, &ec, &c->ep);
	if (r)
		die(addr, r);
	r = rcp_bulk_ctx_open(c->ep, &c->bulk);
	if (r)
		die("bulk ctx", r);
	rc.flags = rpc_flags();
	rc.bulk = c->bulk;
	r = rcp_rpc_create(c->ep, &rc, &c->rpc);
	if (r)
		die("rpc ctx", r);
	reg(c->rpc);
}

/* --waits: this side's wait counters and context switches since *RU0 (or
 * its start), on stderr; the counters are reset (the client prints one
 * line per rate row, counted over the timed part only, the server one at
 * its end). */
static void print_waits(const char *side, struct ctx *c, struct rusage *ru0)
{
	struct rcp_wait_stats w = {0};
	struct rusage ru = {0};
	if (!O.waits)
		return;
	rcp_ep_wait_stats(c->ep, &w, 1);
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr,
	        "rcp-rpcbench: waits %s looks=%llu yields=%llu sleeps=%llu crowded=%llu "
	        "max_run=%llu csw_vol=%ld csw_invol=%ld\n",
	        side, w.looks, w.yields, w.sleeps, w.crowded, w.max_run,
	        ru.ru_nvcsw - (ru0 ? ru0->ru_nvcsw : 0), ru.ru_nivcsw - (ru0 ? ru0->ru_nivcsw : 0));
	if (ru0)
		*ru0 = ru;
}

static void close_ctx(struct ctx *c)
{
	rcp_rpc_destroy(c->rpc);
	rcp_bulk_ctx_close(c->bulk);
	rcp_ep_close(c->ep);
}

/* ---- server ---- */

struct server {
	struct ctx c;
	unsigned char *buf;
	rcp_bulk *local;
	size_t cap;
	int quit, failed;
};

static struct server S;

static void h_noop(rcp_rpc_handle *h, void *arg)
{
	struct noop_in in;
	(void)arg;
	rcp_rpc_respond(h, NULL, rcp_rpc_get_input(h, &in));
}

static void h_empty(rcp_rpc_handle *h, void *arg)
{
	(void)arg;
	rcp_rpc_respond(h, NULL, 0);
}

struct bulk_job {
	rcp_rpc_handle *h;
	rcp_bulk *remote;
	uint64_t len;
};

static void bulk_done(void *arg, int status)
{
	struct bulk_job *j = arg;
	uint64_t moved = status ? 0 : j->len;
	rcp_bulk_free(j->remote);
	if (status)
		S.failed++;
	rcp_rpc_respond(j->h, &moved, status);
	free(j);
}

static void h_bulk(rcp_rpc_handle *h, void *arg)
{
	struct bulk_in in = {0};
	struct bulk_job *j;
	int rc;
	(void)arg;
	rc = rcp_rpc_get_input(h, &in);
	if (rc || in.len > rcp_bulk_size(in.h) || in.len > S.cap) {
		rcp_bulk_free(in.h);
		rcp_rpc_respond(h, NULL, rc ? rc : RCP_ERANGE);
		return;
	}
	j = malloc(sizeof *j);
	j->h = h;
	j->remote = in.h;
	j->len = in.len;
	rc = rcp_bulk_transfer(S.c.bulk, rcp_rpc_handle_chan(h),
	                       in.dir ? RCP_BULK_PUSH : RCP_BULK_PULL, in.h, 0, S.local, 0, in.len,
	                       bulk_done, j, NULL);
	if (rc) {
		rcp_bulk_free(in.h);
		free(j);
		rcp_rpc_respond(h, NULL, rc);
	}
}

static void h_quit(rcp_rpc_handle *h, void *arg)
{
	(void)arg;
	rcp_rpc_respond(h, NULL, S.failed ? RCP_EPROTO : 0);
	S.quit = 1;
}

static int server_main(const char *addr, int wfd)
{
	char me[RCP_NIC_ADDRSTR_MAX] = {0};
	size_t maxsz = 0;
	for (int i = 0; i < O.nsizes; i++)
		if (O.sizes[i] > maxsz)
			maxsz = O.sizes[i];
	open_ctx(addr, 1, &S.c);
	S.cap = maxsz ? maxsz : 1;
	S.buf = aligned_alloc(4096, (S.cap + 4095) & ~(size_t)4095);
	memset(S.buf, 1, S.cap);
	{
		void *p[1] = {S.buf};
		size_t l[1] = {S.cap};
		int rc = rcp_bulk_create(S.c.bulk, 1, p, l, RCP_BULK_READWRITE, &S.local);
		if (rc)
			die("bulk create", rc);
	}
	rcp_rpc_set_handler(S.c.rpc, id_noop, h_noop, NULL);
	rcp_rpc_set_handler(S.c.rpc, id_empty, h_empty, NULL);
	rcp_rpc_set_handler(S.c.rpc, id_bulk, h_bulk, NULL);
	rcp_rpc_set_handler(S.c.rpc, id_quit, h_quit, NULL);
	rcp_ep_addr(S.c.ep, me, sizeof me);
	if (wfd >= 0) {
		if (write(wfd, me, sizeof me) != (ssize_t)sizeof me)
			return 1;
		close(wfd);
	} else {
		printf("listening on %s\n", me);
		fflush(stdout);
	}
	while (!S.quit) {
		int rc = rcp_rpc_loop(S.c.rpc, -1);
		if (rc < 0 && rc != RCP_ETIMEDOUT)
			die("server loop", rc);
	}
	rcp_bulk_free(S.local);
	print_waits("server", &S.c, NULL);
	close_ctx(&S.c);
	return S.failed ? 1 : 0;
}

/* ---- client ---- */

struct run {
	struct ctx *c;
	rcp_chan *ch;
	uint64_t id;
	struct noop_in in;
	uint64_t ok, started, stop_at;
	int outstanding, failed, stopping;
};

static void cb_rate(rcp_rpc_req *req, int status, void *out, void *arg);

static void start_one(struct run *r)
{
	int rc = rcp_rpc_forward(r->c->rpc, r->ch, r->id, r->id == id_empty ? NULL : &r->in, NULL,
	                         -1, cb_rate, r, NULL);
	if (rc)
		die("forward", rc);
	r->outstanding++;
	r->started++;
}

static void cb_rate(rcp_rpc_req *req, int status, void *out, void *arg)
{
	struct run *r = arg;
	(void)req;
	(void)out;
	r->outstanding--;
	if (status) {
		fprintf(stderr, "rcp-rpcbench: call failed: %s\n", rcp_strerror(status));
		r->failed++;
		return;
	}
	r->ok++;
	if (!r->stopping)
		start_one(r);
}

static void drive(struct run *r)
{
	while (r->outstanding) {
		int rc = rcp_rpc_loop(r->c->rpc, 30000000000ll);
		if (rc < 0)
			die("client loop", rc);
		if (r->failed)
			exit(1);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void row(const char *op, size_t size, int inflight, double rate, double lat_us, double bw)
{
	if (O.csv)
		printf("%s,%s,%s,%zu,%d,%.0f,%.3f,%.1f\n", O.transport, O.mode, op, size, inflight,
		       rate, lat_us, bw);
	else
		printf("%-5s %-5s %-5s %9zu %4d %12.0f %10.3f %10.1f\n", O.transport, O.mode, op,
		       size, inflight, rate, lat_us, bw);
	fflush(stdout);
}

/* Median round trip of single calls (inflight 1). */
static double rtt_median(struct ctx *c, rcp_chan *ch, uint64_t id, const void *in, int n)
{
	uint64_t *t = malloc((size_t)n * sizeof *t);
	double med;
	for (int i = 0; i < n; i++) {
		rcp_rpc_req *rq;
		uint64_t t0 = now_ns();
		int rc = rcp_rpc_forward(c->rpc, ch, id, in, NULL, -1, NULL, NULL, &rq);
		if (rc)
			die("forward", rc);
		rc = rcp_rpc_wait(rq, 30000000000ll);
		if (rc)
			die("call", rc);
		rcp_rpc_req_free(rq);
		t[i] = now_ns() - t0;
	}
	qsort(t, (size_t)n, sizeof *t, cmp_u64);
	med = (double)t[n / 2] / 1e3;
	free(t);
	return med;
}

static void bench_rpc(struct ctx *c, rcp_chan *ch, size_t size, int inflight)
{
	struct run r = {0};
	struct rcp_ep_stats es0, es1;
	struct rusage ru0 = {0};
	unsigned char *arg = calloc(1, size ? size : 1);
	uint64_t t0, t1, dur = (uint64_t)O.target_ms * 1000000ull;
	r.c = c;
	r.ch = ch;
	r.id = size ? id_noop : id_empty;
	r.in.data.data = arg;
	r.in.data.len = size;
	if (inflight == 1) {
		/* warm up, then the median of single calls */
		double med = rtt_median(c, ch, r.id, size ? &r.in : NULL, 2000);
		int n = (int)(dur / ((uint64_t)(med * 1e3) + 1));
		if (n < 1000)
			n = 1000;
		if (n > 2000000)
			n = 2000000;
		med = rtt_median(c, ch, r.id, size ? &r.in : NULL, n);
		row("rpc", size, 1, 1e6 / med, med, 0);
		free(arg);
		return;
	}
	/* warm-up round */
	for (int i = 0; i < inflight; i++)
		start_one(&r);
	r.stopping = 1;
	drive(&r);
	r.stopping = 0;
	r.ok = 0;
	rcp_ep_get_stats(c->ep, &es0);
	if (O.waits) {
		rcp_ep_wait_stats(c->ep, NULL, 1);
		getrusage(RUSAGE_SELF, &ru0);
	}
	t0 = now_ns();
	for (int i = 0; i < inflight; i++)
		start_one(&r);
	for (;;) {
		int rc = rcp_rpc_loop(c->rpc, 30000000000ll);
		if (rc < 0)
			die("client loop", rc);
		if (r.failed)
			exit(1);
		if (now_ns() - t0 >= dur)
			break;
	}
	r.stopping = 1;
	drive(&r);
	t1 = now_ns();
	{
		double rate = (double)r.ok / ((double)(t1 - t0) / 1e9);
		row("rpc", size, inflight, rate, inflight / rate * 1e6, 0);
		print_waits("client", c, &ru0);
		/* how well calls batch natively (rpc/batch.c): calls a message */
		rcp_ep_get_stats(c->ep, &es1);
		if (!O.csv && es1.msgs_sent > es0.msgs_sent)
			printf("  %.1f calls per client message\n",
			       (double)r.ok / (double)(es1.msgs_sent - es0.msgs_sent));
	}
	free(arg);
}

static void bench_bulk(struct ctx *c, rcp_chan *ch, int dir, size_t size)
{
	unsigned char *buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	rcp_bulk *h;
	struct bulk_in in;
	uint64_t dur = (uint64_t)O.target_ms * 1000000ull, start, *t;
	int n = 0, cap = 1 << 16;
	void *p[1] = {buf};
	size_t l[1] = {size};
	int rc;
	memset(buf, 2, size);
	rc = rcp_bulk_create(c->bulk, 1, p, l, dir ? RCP_BULK_WRITE_ONLY : RCP_BULK_READ_ONLY, &h);
	if (rc)
		die("bulk create", rc);
	in.h = h;
	in.len = size;
	in.dir = (uint32_t)dir;
	t = malloc((size_t)cap * sizeof *t);
	start = now_ns();
	for (int i = 0; n < cap; i++) {
		rcp_rpc_req *rq;
		uint64_t moved = 0, t0 = now_ns();
		rc = rcp_rpc_forward(c->rpc, ch, id_bulk, &in, &moved, -1, NULL, NULL, &rq);
		if (rc)
			die("forward", rc);
		rc = rcp_rpc_wait(rq, 30000000000ll);
		if (rc)
			die(dir ? "push" : "pull", rc);
		rcp_rpc_req_free(rq);
		if (moved != size) {
			fprintf(stderr, "rcp-rpcbench: moved %llu of %zu bytes\n",
			        (unsigned long long)moved, size);
			exit(1);
		}
		if (i >= 5)
			t[n++] = now_ns() - t0; /* 5 warm-up calls */
		if (n >= 20 && now_ns() - start >= dur)
			break;
	}
	qsort(t, (size_t)n, sizeof *t, cmp_u64);
	{
		double med = (double)t[n / 2];
		row(dir ? "push" : "pull", size, 1, 1e9 / med, med / 1e3, (double)size / med * 1e3);
	}
	free(t);
	rcp_bulk_free(h);
	free(buf);
}

static int client_main(const char *server_addr)
{
	struct ctx c;
	rcp_chan *ch;
	char me[64];
	int rc;
	if (!strcmp(O.transport, "shm"))
		snprintf(me, sizeof me, "shm:rpcb-%d-c", (int)getpid());
	else
		snprintf(me, sizeof me, "udp:");
	open_ctx(me, 0, &c);
	rc = rcp_connect(c.ep, server_addr, &ch);
	if (rc)
		die(server_addr, rc);
	if (!O.csv)
		printf("%-5s %-5s %-5s %9s %4s %12s %10s %10s\n", "trans", "mode", "op", "size",
		       "infl", "ops/s", "lat_us", "MB/s");
	else
		printf("transport,mode,op,size,inflight,rate_ops,latency_us,bandwidth_MBps\n");
	if (!O.bulk || strcmp(O.bulk, "only")) {
		for (int a = 0; a < O.nargs; a++)
			for (int i = 0; i < O.ninflight; i++)
				bench_rpc(&c, ch, O.args[a], O.inflight[i]);
	}
	if (O.bulk) {
		int dirs[2], nd = 0;
		if (!strcmp(O.bulk, "pull") || !strcmp(O.bulk, "both") || !strcmp(O.bulk, "only"))
			dirs[nd++] = RCP_BULK_PULL;
		if (!strcmp(O.bulk, "push") || !strcmp(O.bulk, "both") || !strcmp(O.bulk, "only"))
			dirs[nd++] = RCP_BULK_PUSH;
		for (int d = 0; d < nd; d++)
			for (int i = 0; i < O.nsizes; i++)
				bench_bulk(&c, ch, dirs[d], O.sizes[i]);
	}
	{
		rcp_rpc_req *rq;
		rc = rcp_rpc_forward(c.rpc, ch, id_quit, NULL, NULL, -1, NULL, NULL, &rq);
		if (!rc)
			rc = rcp_rpc_wait(rq, 30000000000ll);
		if (rc)
			die("quit", rc);
		rcp_rpc_req_free(rq);
	}
	{
		struct rcp_rpc_stats st;
		rcp_rpc_get_stats(c.rpc, &st);
		if (st.failed) {
			fprintf(stderr, "rcp-rpcbench: %llu calls failed\n",
			        (unsigned long long)st.failed);
			return 1;
		}
		if (!O.csv && st.rfp_calls)
			printf("remote fetch: %llu calls, %llu to reply, %llu back to fetch\n",
			       (unsigned long long)st.rfp_calls,
			       (unsigned long long)st.rfp_to_reply,
			       (unsigned long long)st.rfp_to_fetch);
	}
	close_ctx(&c);
	return 0;
}

/* ---- options ---- */

/* "4K:4M" (doubling from the first to the second) or "4K,64K,1M". */
static int parse_sizes(const char *s, size_t *out, int max)
{
	int n = 0;
	const char *colon = strchr(s, ':');
	if (colon) {
		size_t a = size_arg(s), b = size_arg(colon + 1);
		for (size_t x = a ? a : 1; x <= b && n < max; x *= 2)
			out[n++] = x;
		return n;
	}
	for (char *d = strdup(s), *t = strtok(d, ","); t && n < max; t = strtok(NULL, ","))
		out[n++] = size_arg(t);
	return n;
}

static const char usage_text[] =
    "usage: rcp-rpcbench [--transport shm|udp] [--mode reply|fetch] [--inflight 1,4,16,64]\n"
    "                    [--args 0,4K] [--bulk pull|push|both|only] [--sizes 4K:4M]\n"
    "                    [--spin|--sleep] [--target-ms N] [--csv]\n"
    "                    [--listen ADDR | --connect ADDR] [--waits]\n"
    "  --args      argument sizes of the rpc rows (bytes in one byte array; 0: no input)\n"
    "  --bulk      add bulk rows (only: bulk rows only); --sizes: their sizes\n"
    "  --listen    run only the server at ADDR; --connect: only the client\n"
    "  --waits     each side prints its wait counters and context switches on stderr\n"
    "Exit status: 0 ok, 1 any failure, 2 usage.\n";

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"transport", 1, 0, 't'}, {"mode", 1, 0, 'm'},   {"inflight", 1, 0, 'i'},
	    {"args", 1, 0, 'a'},      {"bulk", 1, 0, 'b'},   {"sizes", 1, 0, 's'},
	    {"spin", 0, 0, 'S'},      {"sleep", 0, 0, 'Z'},  {"csv", 0, 0, 'c'},
	    {"target-ms", 1, 0, 'T'}, {"listen", 1, 0, 'l'}, {"connect", 1, 0, 'C'},
	    {"help", 0, 0, 'h'},      {"waits", 0, 0, 'W'},  {0, 0, 0, 0},
	};
	int c;
	O.transport = "shm";
	O.mode = "reply";
	O.target_ms = 300;
	O.ninflight = 4;
	O.inflight[0] = 1, O.inflight[1] = 4, O.inflight[2] = 16, O.inflight[3] = 64;
	O.nargs = 2;
	O.args[0] = 0, O.args[1] = 4096;
	O.nsizes = parse_sizes("4K:4M", O.sizes, 64);
	while ((c = getopt_long(argc, argv, "t:m:i:a:b:s:SZcT:l:C:hW", lo, NULL)) != -1) {
		switch (c) {
		case 't': O.transport = optarg; break;
		case 'm': O.mode = optarg; break;
		case 'i': {
			size_t v[16];
			O.ninflight = parse_sizes(optarg, v, 16);
			for (int i = 0; i < O.ninflight; i++)
				O.inflight[i] = (int)v[i];
			break;
		}
		case 'a': O.nargs = parse_sizes(optarg, O.args, 8); break;
		case 'b': O.bulk = optarg; break;
		case 's': O.nsizes = parse_sizes(optarg, O.sizes, 64); break;
		case 'S': O.spin = 1; break;
		case 'Z': O.sleep_ = 1; break;
		case 'c': O.csv = 1; break;
		case 'T': O.target_ms = atoi(optarg); break;
		case 'l': O.listen = optarg; break;
		case 'C': O.connect = optarg; break;
		case 'h': fputs(usage_text, stdout); return 0;
		case 'W': O.waits = 1; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if ((strcmp(O.transport, "shm") && strcmp(O.transport, "udp")) ||
	    (strcmp(O.mode, "reply") && strcmp(O.mode, "fetch")) || (O.spin && O.sleep_) ||
	    O.ninflight < 1 || O.target_ms < 1 ||
	    (O.bulk && strcmp(O.bulk, "pull") && strcmp(O.bulk, "push") && strcmp(O.bulk, "both") &&
	     strcmp(O.bulk, "only"))) {
		fputs(usage_text, stderr);
		return 2;
	}
	for (int i = 0; i < O.ninflight; i++)
		if (O.inflight[i] < 1) {
			fputs(usage_text, stderr);
			return 2;
		}
	signal(SIGPIPE, SIG_IGN);
	if (O.listen)
		return server_main(O.listen, -1);
	if (O.connect)
		return client_main(O.connect);
	{
		int fd[2];
		pid_t pid;
		char addr[RCP_NIC_ADDRSTR_MAX], saddr[64];
		int st, rc;
		if (!strcmp(O.transport, "shm"))
			snprintf(saddr, sizeof saddr, "shm:rpcb-%d-s", (int)getpid());
		else
			snprintf(saddr, sizeof saddr, "udp:");
		if (pipe(fd))
			return 1;
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			close(fd[0]);
			_exit(server_main(saddr, fd[1]));
		}
		close(fd[1]);
		if (read(fd[0], addr, sizeof addr) != (ssize_t)sizeof addr) {
			fprintf(stderr, "rcp-rpcbench: server did not start\n");
			return 1;
		}
		rc = client_main(addr);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "rcp-rpcbench: server failed\n");
			return 1;
		}
		return rc;
	}
}
