/*
 * examples/kvstore — a small in-memory key-value service over rpc/:
 * 16-byte keys, 32-byte values, "kv.put" and "kv.get", usable in
 * server-reply and remote-fetch mode (--mode fetch: the client places
 * requests in the server's shared segment and fetches results; shm only,
 * else it falls back to reply), with a load generator.
 *
 * usage: kvstore [--transport shm|udp] [--mode reply|fetch] [--ops N]
 *                [--keys N] [--inflight N]
 * Forks the server; the client first puts every key, then runs N random
 * gets and puts with INFLIGHT calls outstanding, checks every value it
 * gets against what it last put, and prints the rate.  Exit 0 when every
 * call succeeded and every value matched.  The server dies with the client
 * (PR_SET_PDEATHSIG), and a client that fails kills and reaps it: no run
 * leaves a process behind.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rcp/rpc.h>

struct kv_key {
	unsigned char k[16];
};
struct kv_val {
	unsigned char v[32];
};
struct kv_put {
	struct kv_key key;
	struct kv_val val;
};
RCP_PROC_DEFINE(proc_key, struct kv_key, rcp_proc_raw(p, v->k, 16))
RCP_PROC_DEFINE(proc_val, struct kv_val, rcp_proc_raw(p, v->v, 32))
RCP_PROC_DEFINE(proc_put, struct kv_put, rcp_proc_struct(p, proc_key, &v->key);
                rcp_proc_struct(p, proc_val, &v->val))

/* ---- server: open addressing table ---- */

struct slot {
	struct kv_key key;
	struct kv_val val;
	int used;
};
static struct slot *table;
static size_t tcap;
static int quit;

static size_t hash(const struct kv_key *k)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < 16; i++)
		h = (h ^ k->k[i]) * 0x100000001b3ull;
	return (size_t)h;
}

static struct slot *lookup(const struct kv_key *k, int create)
{
	for (size_t i = hash(k) & (tcap - 1), n = 0; n < tcap; i = (i + 1) & (tcap - 1), n++) {
		if (!table[i].used) {
			if (!create)
				return NULL;
			table[i].used = 1;
			table[i].key = *k;
			return &table[i];
		}
		if (!memcmp(table[i].key.k, k->k, 16))
			return &table[i];
	}
	return NULL;
}

static void h_put(rcp_rpc_handle *h, void *arg)
{
	struct kv_put in;
	struct slot *s;
	int rc = rcp_rpc_get_input(h, &in);
	(void)arg;
	if (!rc) {
		s = lookup(&in.key, 1);
		if (s)
			s->val = in.val;
		else
			rc = RCP_ENOMEM;
	}
	rcp_rpc_respond(h, NULL, rc);
}

static void h_get(rcp_rpc_handle *h, void *arg)
{
	struct kv_key k;
	struct slot *s;
	int rc = rcp_rpc_get_input(h, &k);
	(void)arg;
	if (rc) {
		rcp_rpc_respond(h, NULL, rc);
		return;
	}
	s = lookup(&k, 0);
	if (s)
		rcp_rpc_respond(h, &s->val, 0);
	else
		rcp_rpc_respond(h, NULL, RCP_ENOENT);
}

static void h_quit(rcp_rpc_handle *h, void *arg)
{
	(void)arg;
	rcp_rpc_respond(h, NULL, 0);
	quit = 1;
}

static uint64_t id_put, id_get, id_quit;

static int setup(rcp_ep *ep, unsigned flags, rcp_rpc **rpc)
{
	struct rcp_rpc_config c = {0};
	int rc;
	c.flags = flags;
	if ((rc = rcp_rpc_create(ep, &c, rpc)) ||
	    (rc = rcp_rpc_register(*rpc, "kv.put", proc_put, NULL, &id_put)) ||
	    (rc = rcp_rpc_register(*rpc, "kv.get", proc_key, proc_val, &id_get)))
		return rc;
	return rcp_rpc_register(*rpc, "kv.quit", NULL, NULL, &id_quit);
}

/* ---- client: load generator ---- */

static struct kv_val *truth;
static int nkeys;

static void mk_key(int i, struct kv_key *k)
{
	memset(k, 0, sizeof *k);
	snprintf((char *)k->k, 16, "key-%011d", i);
}

struct op {
	int key, is_get;
	struct kv_put put;
	struct kv_val got;
};

static int outstanding, failures;
static long done_ops;

static void cb(rcp_rpc_req *req, int status, void *out, void *arg)
{
	struct op *o = arg;
	(void)req;
	(void)out;
	outstanding--;
	if (status) {
		fprintf(stderr, "kvstore: call failed: %s\n", rcp_strerror(status));
		failures++;
	} else if (o->is_get && memcmp(o->got.v, truth[o->key].v, 32)) {
		fprintf(stderr, "kvstore: key %d: wrong value\n", o->key);
		failures++;
	}
	done_ops++;
	free(o);
}

/* The client: loads the server at ADDR from CADDR.  Returns the number of
 * failed calls or wrong values, or -1 if it could not run. */
static int client(const char *transport, const char *mode, long ops, int inflight, const char *addr,
                  const char *caddr)
{
	uint64_t seed = 42;
	rcp_ep *ep;
	rcp_rpc *rpc;
	rcp_chan *ch;
	struct timespec t0, t1;
	struct rcp_rpc_stats rs;
	long started = 0;
	int rc;
	if ((rc = rcp_ep_open(caddr, NULL, &ep)) ||
	    (rc = setup(ep, !strcmp(mode, "fetch") ? RCP_RPC_FETCH : 0, &rpc)) ||
	    (rc = rcp_connect(ep, addr, &ch))) {
		fprintf(stderr, "kvstore: setup: %s\n", rcp_strerror(rc));
		return -1;
	}
	truth = calloc((size_t)nkeys, sizeof *truth);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Put every key once, then a random mix (1 put in 4). */
	for (long i = 0; i < nkeys + ops; i++) {
		struct op *o = calloc(1, sizeof *o);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		o->key = i < nkeys ? (int)i : (int)((seed >> 33) % (uint64_t)nkeys);
		o->is_get = i >= nkeys && ((seed >> 20) & 3);
		mk_key(o->key, &o->put.key);
		if (!o->is_get) {
			for (int b = 0; b < 32; b++)
				o->put.val.v[b] = (unsigned char)(i * 7 + b);
			/* Sequential per key: wait for in-flight calls on
			 * this key to settle before changing the truth. */
			while (outstanding)
				if (rcp_rpc_loop(rpc, -1) < 0)
					return -1;
			truth[o->key] = o->put.val;
		}
		while (outstanding >= inflight)
			if (rcp_rpc_loop(rpc, -1) < 0)
				return -1;
		rc = rcp_rpc_forward(rpc, ch, o->is_get ? id_get : id_put,
		                     o->is_get ? (void *)&o->put.key : (void *)&o->put,
		                     o->is_get ? &o->got : NULL, -1, cb, o, NULL);
		if (rc) {
			fprintf(stderr, "kvstore: forward: %s\n", rcp_strerror(rc));
			return -1;
		}
		outstanding++;
		started++;
	}
	while (outstanding)
		if (rcp_rpc_loop(rpc, -1) < 0)
			return -1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	rcp_rpc_get_stats(rpc, &rs);
	{
		double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		printf("kvstore: %s %s: %ld ops (%d keys), %.0f ops/s, %d failures, "
		       "%llu by remote fetch\n",
		       transport, mode, done_ops, nkeys, (double)started / s, failures,
		       (unsigned long long)rs.rfp_calls);
	}
	{
		rcp_rpc_req *rq;
		rc = rcp_rpc_forward(rpc, ch, id_quit, NULL, NULL, -1, NULL, NULL, &rq);
		if (!rc)
			rc = rcp_rpc_wait(rq, -1);
		if (rc)
			failures++;
		else
			rcp_rpc_req_free(rq);
	}
	rcp_rpc_destroy(rpc);
	rcp_ep_close(ep);
	return failures;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"transport", 1, 0, 't'}, {"mode", 1, 0, 'm'},
	                                   {"ops", 1, 0, 'n'},       {"keys", 1, 0, 'k'},
	                                   {"inflight", 1, 0, 'i'},  {0, 0, 0, 0}};
	const char *transport = "shm", *mode = "reply";
	long ops = 200000;
	int inflight = 16, c, fd[2], st;
	char saddr[64], caddr[64], addr[RCP_NIC_ADDRSTR_MAX];
	pid_t pid;

	nkeys = 1000;
	while ((c = getopt_long(argc, argv, "t:m:n:k:i:", lo, NULL)) != -1) {
		switch (c) {
		case 't': transport = optarg; break;
		case 'm': mode = optarg; break;
		case 'n': ops = atol(optarg); break;
		case 'k': nkeys = atoi(optarg); break;
		case 'i': inflight = atoi(optarg); break;
		default: fprintf(stderr, "usage: see the comment at the top\n"); return 2;
		}
	}
	if (nkeys < 1 || inflight < 1 || ops < 0)
		return 2;
	if (!strcmp(transport, "shm")) {
		snprintf(saddr, sizeof saddr, "shm:kv-%d-s", (int)getpid());
		snprintf(caddr, sizeof caddr, "shm:kv-%d-c", (int)getpid());
	} else {
		snprintf(saddr, sizeof saddr, "udp:");
		snprintf(caddr, sizeof caddr, "udp:");
	}
	if (pipe(fd))
		return 1;
	{
		pid_t parent = getpid();
		pid = fork();
		if (pid < 0)
			return 1;
		/* The server must not outlive the client, however that ends
		 * (the parent may die before prctl: check it afterwards). */
		if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
			_exit(5);
	}
	if (pid == 0) {
		rcp_ep *ep;
		rcp_rpc *rpc;
		struct rcp_ep_config ec = {0};
		close(fd[0]);
		for (tcap = 16; tcap < (size_t)nkeys * 2; tcap *= 2)
			;
		table = calloc(tcap, sizeof *table);
		ec.flags = RCP_EP_ACCEPT;
		if (rcp_ep_open(saddr, &ec, &ep) || setup(ep, 0, &rpc))
			_exit(3);
		rcp_rpc_set_handler(rpc, id_put, h_put, NULL);
		rcp_rpc_set_handler(rpc, id_get, h_get, NULL);
		rcp_rpc_set_handler(rpc, id_quit, h_quit, NULL);
		memset(addr, 0, sizeof addr);
		rcp_ep_addr(ep, addr, sizeof addr);
		if (write(fd[1], addr, sizeof addr) != (ssize_t)sizeof addr)
			_exit(3);
		while (!quit)
			if (rcp_rpc_loop(rpc, -1) < 0)
				_exit(4);
		rcp_rpc_destroy(rpc);
		rcp_ep_close(ep);
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], addr, sizeof addr) != (ssize_t)sizeof addr)
		failures = -1; /* the server failed to start; reap it */
	else
		failures = client(transport, mode, ops, inflight, addr, caddr);
	if (failures)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	return !failures && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
