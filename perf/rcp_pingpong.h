/*
 * perf/rcp_pingpong.h — what the files of rcp-pingpong share: options, the
 * control protocol's messages, result rows, and the functions one file
 * offers another (prefixed rpp_).  The tool is described at the head of
 * perf/rcp_pingpong.c; its files call one way:
 *   rcp_pingpong.c (options, main) -> pp_run.c (the ways to run)
 *     -> pp_client.c, pp_server.c -> pp_proto.c (control, pattern, endpoints)
 */
#ifndef RCP_PERF_RCP_PINGPONG_H
#define RCP_PERF_RCP_PINGPONG_H

#include <stddef.h>
#include <stdint.h>

#include <rcp/rcp.h>

#include "perf/tcp_pingpong.h"

#define PROG      "rcp-pingpong"
#define MAX_SIZES 256

/* Data messages are tagged with their sequence number (< 2^62); control
 * messages with TAG_CTRL | kind. */
#define TAG_CTRL (1ull << 62)
enum ctrl_kind {
	C_HELLO = 1, /* client: flags CF_VERIFY */
	C_HELLO_ACK, /* server: its wait mode in a, CF_VERIFY if it verifies */
	C_SIZE,      /* client: a = message size */
	C_SIZE_ACK,  /* server: buffers ready, next receive posted */
	C_END,       /* client: a = data messages sent at this size */
	C_END_ACK,   /* server: a = messages echoed, b = its retransmissions */
	C_BYE,
	C_BYE_ACK,
	C_ERR, /* either side: text says what went wrong */
};
#define CF_VERIFY 1u

#define CTRL_MAGIC   0x52505050u /* "RPPP" */
#define CTRL_VERSION 1u
/* Control messages are padded to CTRL_LEN bytes.  Above the core's inline
 * limit (256 B) an eager send completes only once the peer acknowledged
 * it, so the server knows its BYE_ACK arrived before it closes.  Receive
 * buffers are never smaller than this, so a C_ERR sent instead of an echo
 * is never truncated. */
#define CTRL_LEN 512

struct ctrl {
	uint32_t magic, version, kind, flags;
	uint64_t a, b;
	char text[CTRL_LEN - 32];
};
_Static_assert(sizeof(struct ctrl) == CTRL_LEN, "control message size");

struct opts {
	const char *transport; /* "shm" or "udp" */
	size_t sizes[MAX_SIZES];
	int nsizes;
	long iters, warmup, timeout_ms;
	uint64_t target_ns;
	int verify, compare_tcp, csv, pin;
	int idle_chans; /* idle channels the client's endpoint also holds */
	enum pp_mode mode;
	int64_t spin_ns;
	const char *faults; /* NULL: nic default (RCP_FAULTS) */
	const char *listen, *connect, *local;
};

struct row {
	struct pp_result rcp, tcp;
	int have_tcp;
	uint64_t retx;
	double csw_per_rt; /* client's voluntary context switches per round trip */
};

static inline int64_t ms_ns(long ms)
{
	return (int64_t)ms * 1000000;
}

/* pp_proto.c */
unsigned rpp_ctrl_unpack(const void *buf, const struct rcp_status *st, struct ctrl *c);
int rpp_ctrl_send(rcp_chan *ch, unsigned kind, unsigned flags, uint64_t a, uint64_t b,
                  const char *text, int64_t timeout_ns);
int rpp_idle_wait(rcp_ep *ep, rcp_req *req, struct rcp_status *st, int64_t timeout_ns, int poll_ms);
uint64_t rpp_pat_seed(size_t size, uint64_t seq);
void rpp_pat_fill(unsigned char *p, size_t len, uint64_t seed);
long rpp_pat_check(const unsigned char *p, size_t len, uint64_t seed, unsigned *want,
                   unsigned *got);
unsigned char *rpp_buf_alloc(size_t len);
size_t rpp_cap_for(size_t size);
int rpp_open_ep(const struct opts *o, const char *addr, int accept, rcp_ep **ep);
int rpp_faults_on(const struct opts *o);
uint64_t rpp_ep_retransmits(const rcp_ep *ep);
void rpp_loss_stats(const rcp_ep *ep, const struct rcp_ep_stats *s0, const char *who, size_t size,
                    uint64_t msgs);

/* pp_server.c */
int rpp_serve(const struct opts *o, rcp_ep *ep, const char *who);

/* pp_client.c */
void rpp_print_header(const struct opts *o);
void rpp_print_row(const struct opts *o, size_t size, const struct row *r);
int rpp_run_client(const struct opts *o, rcp_ep *ep, const char *server, struct row *rows);

/* pp_run.c */
int rpp_run_listen(const struct opts *o);
int rpp_run_connect(const struct opts *o, struct row *rows);
int rpp_run_local(const struct opts *o, struct row *rows);
int rpp_run_tcp_remote(const struct opts *o, struct row *rows);
int rpp_run_tcp(const struct opts *o, struct row *rows);

#endif
