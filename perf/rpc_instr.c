/*
 * rcp-rpc-instr — instructions per empty RPC under callgrind, the
 * deterministic counterpart of rcp-rpcbench's rate (issue 19's Mercury
 * comparison; perf/rpc_instr.sh runs it).
 *
 *   rcp-rpc-instr reply|fetch N [INFLIGHT]
 *
 * A client and a server context (rpc + bulk, as rcp-rpcbench opens them) on
 * two shm endpoints in this process; the client keeps INFLIGHT (default 16)
 * calls of "bench.empty" outstanding, each completion callback forwarding
 * the next, and the loop progresses the server then the client.  N/10 + 100
 * warm-up calls, then N calls counted with callgrind's collection toggled
 * on (run valgrind with --collect-atstart=no), so set-up and tear-down are
 * left out.  Both sides are in one thread: the count is the work of one
 * call on both ends (client forward + completion, server handler +
 * response), the nic frames included, and no waiting.  Outside valgrind the
 * toggles are no-ops.  Prints one line
 *   MODE calls=N loops=L rfp=R batched=B msgs=M frames=F acks=A
 * L: progress rounds (both contexts) while counting; R: calls that went by
 * remote fetch; B: requests sent several to a message; M, F, A: the
 * client endpoint's messages, frames and acks sent (session 20).  Any failed call exits 1.
 *
 * STEADY STATE.  Run natively, this program settles into one batch of
 * INFLIGHT requests and one of responses a round (rpc/batch.c): frames
 * come back to back, the endpoint polls in bursts.  Under callgrind time
 * runs ~50x slower, the endpoint's burst rule (a cycle gap,
 * rcp/endpoint.c) keeps polls to one frame, and calls started one by one
 * outside progress stayed one to a message for the whole run.  So one
 * call starts the run and its completion forwards all INFLIGHT inside a
 * progress round, as one batch; from then on each round completes a batch:
 * the count is the work of a call in full batches.  rcp-rpcbench's two
 * processes need not batch as well (it prints its calls per message).
 * Since session 19 a client sends its calls in RCP_RPC_SPLIT (default 2)
 * batches (rpc/batch.c, HALVES), so the steady state is two messages of
 * INFLIGHT/2 each way: rcp's per-message work counts twice, and the
 * overlap it buys between two CPUs cannot show in one thread
 * (RCP_RPC_SPLIT=1 counts the one-batch figure).
 *
 * SIDE (session 20).  With SIDE=server in the environment only the
 * server context's progress rounds are counted, with SIDE=client only the
 * client's (its completion callbacks, which forward the next calls,
 * included): in rcp-rpcbench the two sides run on two CPUs, so the rate
 * follows the costlier side, not the sum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rcp/bulk.h>
#include <rcp/rpc.h>

#include "perf/instr.h"

struct side {
	rcp_ep *ep;
	rcp_bulk_ctx *bulk;
	rcp_rpc *rpc;
};

static uint64_t id_empty;
static rcp_chan *ch;
static struct side C, S;
static long done_calls, failed;
static int stopping, inflight = 16, primed;

static void die(const char *what, int rc)
{
	fprintf(stderr, "rcp-rpc-instr: %s: %s\n", what, rcp_strerror(rc));
	exit(1);
}

static void open_side(const char *addr, unsigned epf, unsigned rpcf, struct side *s)
{
	struct rcp_nic_config nc = {.faults = "", .key = ""};
	struct rcp_ep_config ec = {.nic = &nc, .flags = epf | RCP_EP_SPIN, .crc = -1};
	struct rcp_rpc_config rc = {.flags = rpcf | RCP_RPC_SPIN};
	int r = rcp_ep_open(addr, &ec, &s->ep);
	if (r)
		die(addr, r);
	if ((r = rcp_bulk_ctx_open(s->ep, &s->bulk)))
		die("bulk ctx", r);
	rc.bulk = s->bulk;
	if ((r = rcp_rpc_create(s->ep, &rc, &s->rpc)))
		die("rpc ctx", r);
	if ((r = rcp_rpc_register(s->rpc, "bench.empty", NULL, NULL, &id_empty)))
		die("register", r);
}

static void h_empty(rcp_rpc_handle *h, void *arg)
{
	(void)arg;
	rcp_rpc_respond(h, NULL, 0);
}

static void cb(rcp_rpc_req *req, int status, void *out, void *arg);

static void start_one(void)
{
	int rc = rcp_rpc_forward(C.rpc, ch, id_empty, NULL, NULL, -1, cb, NULL, NULL);
	if (rc)
		die("forward", rc);
}

static void cb(rcp_rpc_req *req, int status, void *out, void *arg)
{
	(void)req, (void)out, (void)arg;
	if (status) {
		fprintf(stderr, "rcp-rpc-instr: call failed: %s\n", rcp_strerror(status));
		failed++;
		return;
	}
	done_calls++;
	if (stopping)
		return;
	/* The first completion forwards all INFLIGHT calls inside a progress
	 * round: they leave as one batch, the steady state rcp-rpcbench's two
	 * processes reach (STEADY STATE above). */
	for (int i = primed ? 1 : inflight; i > 0; i--)
		start_one();
	primed = 1;
}

int main(int argc, char **argv)
{
	char sa[64], ca[64];
	long n = argc > 2 ? atol(argv[2]) : 0, loops = 0, warm;
	const char *side;
	int rc;
	struct rcp_rpc_stats st0, st1;
	struct rcp_ep_stats ce0, ce1;
	if (argc > 3)
		inflight = atoi(argv[3]);
	if (argc < 3 || n < 1 || inflight < 1 ||
	    (strcmp(argv[1], "reply") && strcmp(argv[1], "fetch"))) {
		fprintf(stderr, "usage: %s reply|fetch CALLS [INFLIGHT]\n", argv[0]);
		return 2;
	}
	snprintf(sa, sizeof sa, "shm:rpc-instr-%d-s", (int)getpid());
	snprintf(ca, sizeof ca, "shm:rpc-instr-%d-c", (int)getpid());
	open_side(sa, RCP_EP_ACCEPT, 0, &S);
	open_side(ca, 0, strcmp(argv[1], "fetch") ? 0 : RCP_RPC_FETCH, &C);
	if ((rc = rcp_rpc_set_handler(S.rpc, id_empty, h_empty, NULL)))
		die("handler", rc);
	if ((rc = rcp_connect(C.ep, sa, &ch)))
		die("connect", rc);
	warm = n / 10 + 100;
	start_one();
	while (done_calls < warm && !failed) {
		rcp_rpc_progress(S.rpc);
		rcp_rpc_progress(C.rpc);
	}
	rcp_rpc_get_stats(C.rpc, &st0);
	rcp_ep_get_stats(C.ep, &ce0);
	done_calls = 0;
	side = getenv("SIDE") ? getenv("SIDE") : "";
	if (!strcmp(side, "server") || !strcmp(side, "client")) {
		/* one side's progress counted (SIDE above) */
		int srv = !strcmp(side, "server");
		while (done_calls < n && !failed) {
			if (srv)
				INSTR_TOGGLE();
			rcp_rpc_progress(S.rpc);
			INSTR_TOGGLE();
			rcp_rpc_progress(C.rpc);
			if (!srv)
				INSTR_TOGGLE();
			loops++;
		}
	} else {
		INSTR_TOGGLE();
		while (done_calls < n && !failed) {
			rcp_rpc_progress(S.rpc);
			rcp_rpc_progress(C.rpc);
			loops++;
		}
		INSTR_TOGGLE();
	}
	rcp_rpc_get_stats(C.rpc, &st1);
	rcp_ep_get_stats(C.ep, &ce1);
	stopping = 1;
	while (!failed && st1.forwarded - (st1.completed_ok + st1.failed) > 0) {
		rcp_rpc_progress(S.rpc);
		rcp_rpc_progress(C.rpc);
		rcp_rpc_get_stats(C.rpc, &st1);
	}
	if (failed)
		return 1;
	printf("%s calls=%ld loops=%ld rfp=%llu batched=%llu msgs=%llu frames=%llu acks=%llu\n",
	       argv[1], n, loops, (unsigned long long)(st1.rfp_calls - st0.rfp_calls),
	       (unsigned long long)(st1.batched_out - st0.batched_out),
	       (unsigned long long)(ce1.msgs_sent - ce0.msgs_sent),
	       (unsigned long long)(ce1.frames_sent - ce0.frames_sent),
	       (unsigned long long)(ce1.acks_sent - ce0.acks_sent));
	rcp_rpc_destroy(C.rpc);
	rcp_bulk_ctx_close(C.bulk);
	rcp_ep_close(C.ep);
	rcp_rpc_destroy(S.rpc);
	rcp_bulk_ctx_close(S.bulk);
	rcp_ep_close(S.ep);
	return 0;
}
