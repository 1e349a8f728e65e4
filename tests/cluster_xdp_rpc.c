/*
 * tests/cluster_xdp_rpc.c — RPC calls over an endpoint opened on
 * RCP_TRANSPORT's backend, between two hosts (tests/cluster_xdp.sh runs
 * it on two rcp-cluster hosts with RCP_TRANSPORT=xdp).
 *
 *   cluster_xdp_rpc serve IFNAME [N]     prints "ready ADDR", serves
 *                                        until N "quit" calls (default 1),
 *                                        from N clients on one socket
 *   cluster_xdp_rpc call IFNAME PEER     calls "echo" with 8 B .. 256 KiB
 *                                        of a seeded pattern, checks every
 *                                        answer byte for byte, then "quit"
 *
 * The local address is RCP_TRANSPORT ":" IFNAME (xdp:eth0; udp takes an
 * address instead: udp:198.18.0.1:).  The server answers "echo" with its
 * input; the client prints "ok N calls on BACKEND, R retransmits, B bad
 * frames" or why not and exits 1.  RCP_TEST_SEED seeds the pattern (printed on failure).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/nic.h>
#include <rcp/rcp.h>
#include <rcp/rpc.h>

static int bytes_proc(rcp_proc *p, void *data)
{
	return rcp_proc_bytes(p, data);
}

static int quit, quits = 1;

static void on_echo(rcp_rpc_handle *h, void *arg)
{
	struct rcp_bytes in;
	(void)arg;
	if (rcp_rpc_get_input(h, &in))
		rcp_rpc_respond(h, NULL, RCP_EPROTO);
	else
		rcp_rpc_respond(h, &in, 0);
}

/* The quit calls are answered together, once all QUITS have come: every
 * client's channel is live on the one socket at that moment, so an
 * answer sent to the wrong peer leaves a client without one. */
static rcp_rpc_handle *held[64];

static void on_quit(rcp_rpc_handle *h, void *arg)
{
	(void)arg;
	held[quit++] = h;
	if (quit == quits)
		for (int i = 0; i < quit; i++)
			rcp_rpc_respond(held[i], NULL, 0);
}

static int setup(const char *ifname, int accept, rcp_ep **ep, rcp_rpc **rpc, uint64_t ids[2])
{
	struct rcp_ep_config ec = {0};
	const char *t = getenv("RCP_TRANSPORT");
	char addr[128];
	int rc;

	snprintf(addr, sizeof addr, "%s:%s", t && *t ? t : "xdp", ifname);
	ec.flags = accept ? RCP_EP_ACCEPT : 0;
	rc = rcp_ep_open(addr, &ec, ep);
	if (rc) {
		fprintf(stderr, "cluster_xdp_rpc: rcp_ep_open(%s): %s\n", addr, rcp_strerror(rc));
		return 1;
	}
	if ((rc = rcp_rpc_create(*ep, NULL, rpc)) ||
	    (rc = rcp_rpc_register(*rpc, "echo", bytes_proc, bytes_proc, &ids[0])) ||
	    (rc = rcp_rpc_register(*rpc, "quit", NULL, NULL, &ids[1]))) {
		fprintf(stderr, "cluster_xdp_rpc: rpc setup: %s\n", rcp_strerror(rc));
		return 1;
	}
	return 0;
}

static int serve(const char *ifname)
{
	rcp_ep *ep;
	rcp_rpc *rpc;
	uint64_t ids[2];
	char addr[RCP_NIC_ADDRSTR_MAX];

	if (setup(ifname, 1, &ep, &rpc, ids) || rcp_rpc_set_handler(rpc, ids[0], on_echo, NULL) ||
	    rcp_rpc_set_handler(rpc, ids[1], on_quit, NULL) || rcp_ep_addr(ep, addr, sizeof addr))
		return 1;
	printf("ready %s\n", addr);
	fflush(stdout);
	while (quit < quits) {
		int rc = rcp_rpc_loop(rpc, 60000000000ll);
		if (rc < 0) {
			fprintf(stderr, "cluster_xdp_rpc: serve: %s\n", rcp_strerror(rc));
			return 1;
		}
	}
	/* the quit answer may need resending: keep progressing a little */
	for (int i = 0; i < 1000; i++)
		rcp_rpc_progress(rpc);
	rcp_rpc_destroy(rpc);
	rcp_ep_close(ep);
	return 0;
}

static int call(const char *ifname, const char *peer)
{
	static const size_t sizes[] = {8, 1000, 1500, 16000, 20000, 65536, 262144};
	const char *s = getenv("RCP_TEST_SEED");
	unsigned seed = s ? (unsigned)strtoul(s, NULL, 0) : 1;
	rcp_ep *ep;
	rcp_rpc *rpc;
	rcp_chan *ch;
	uint64_t ids[2];
	unsigned char *buf = malloc(262144);
	int rc, calls = 0;

	if (!buf || setup(ifname, 0, &ep, &rpc, ids))
		return 1;
	rc = rcp_connect(ep, peer, &ch);
	if (rc) {
		fprintf(stderr, "cluster_xdp_rpc: rcp_connect(%s): %s\n", peer, rcp_strerror(rc));
		return 1;
	}
	srand(seed);
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			struct rcp_bytes in = {buf, sizes[i]}, out = {0};
			rcp_rpc_req *rq;
			for (size_t j = 0; j < sizes[i]; j++)
				buf[j] = (unsigned char)rand();
			rc = rcp_rpc_forward(rpc, ch, ids[0], &in, &out, 20000000000ll, NULL, NULL,
			                     &rq);
			if (!rc)
				rc = rcp_rpc_wait(rq, -1);
			if (rc || out.len != sizes[i] || memcmp(out.data, buf, sizes[i])) {
				fprintf(stderr,
				        "cluster_xdp_rpc: echo of %zu B (round %d, seed %u): %s, "
				        "%zu B back\n",
				        sizes[i], round, seed,
				        rc ? rcp_strerror(rc) : "wrong bytes", out.len);
				return 1;
			}
			rcp_rpc_req_free(rq);
			calls++;
		}
	{
		rcp_rpc_req *rq;
		rc = rcp_rpc_forward(rpc, ch, ids[1], NULL, NULL, 20000000000ll, NULL, NULL, &rq);
		if (!rc)
			rc = rcp_rpc_wait(rq, -1);
		if (rc) {
			fprintf(stderr, "cluster_xdp_rpc: quit: %s\n", rcp_strerror(rc));
			return 1;
		}
		rcp_rpc_req_free(rq);
	}
	{
		struct rcp_nic_info ni;
		struct rcp_ep_stats es;
		rcp_nic_query(rcp_ep_nic(ep), &ni);
		rcp_ep_get_stats(ep, &es);
		printf("ok %d calls on %s, %llu retransmits, %llu bad frames\n", calls, ni.backend,
		       (unsigned long long)es.retransmits, (unsigned long long)es.bad_frames);
	}
	rcp_rpc_destroy(rpc);
	rcp_ep_close(ep);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "serve")) {
		quits = argc == 4 ? atoi(argv[3]) : 1;
		return quits < 1 || quits > 64 ? 2 : serve(argv[2]);
	}
	if (argc == 4 && !strcmp(argv[1], "call"))
		return call(argv[2], argv[3]);
	fprintf(stderr, "usage: cluster_xdp_rpc serve IFNAME [N] | call IFNAME PEER\n");
	return 2;
}
