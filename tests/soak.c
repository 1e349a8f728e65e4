/*
 * tests/soak.c — both directions at once, random sizes and tags, receives
 * posted late, faults on the link; every byte and the order checked.
 *
 *   tests/soak                      the suite's short runs (a few seconds)
 *   tests/soak --transport udp --faults drop=0.05,dup=0.02,reorder=0.05,corrupt=0.01 \
 *              --seconds 3600 --seed 7        one long run by hand
 *
 * Two endpoints in one process, each with a static channel to the other,
 * driven by one loop (no threads, no sleeps: the loop progresses both
 * endpoints on every turn, whether or not they have requests out).
 * Each direction sends a schedule of messages drawn from the seed: a tag
 * in 0..3 and a size (60% up to 256 B, 30% up to 64 KiB, 10% up to
 * --max-size).  Message i of direction d holds test_fill(seq = d<<40 | i).
 * The receiver knows the schedule, so for each tag it posts receives for
 * that tag's next messages in order and checks that the k-th receive of a
 * tag got the k-th message of that tag, with the right length and bytes:
 * RCP keeps per-channel send order among messages a receive can match.
 * Receives are posted late on purpose (each loop posts at most one, with
 * probability 1/4, at most 8 outstanding, only for messages already
 * sent: a receive may still beat its message's arrival), so messages arrive
 * unexpected and the credits must hold the sender back without losing
 * anything.  Sends stay outstanding up to 16 per direction.
 *
 * Pass: every message of both directions received and checked, every send
 * completed without error.  A run in which nothing completes for
 * --stall-s seconds (default 20) fails as a hang, naming the seed, with
 * both endpoints' counters: a guard against hanging forever, not a timing
 * check.  The closing line counts runs: "soak: N passed, N failed".
 */
#include <getopt.h>
#include <limits.h>
#include <time.h>

#include <rcp/rcp.h>

#include "testutil.h"

#define SENDS_MAX 16
#define RECVS_MAX 8
#define NTAGS     4

struct run {
	const char *transport;
	const char *faults; /* "" none */
	unsigned flags;     /* rcp_ep_config.flags */
	long messages;      /* per direction; 0: until --seconds */
	double seconds;
	size_t max_size;
	uint64_t seed;
};

/* One direction: what the sender has sent, what the receiver has got. */
struct dir {
	int d;
	rcp_ep *rx_ep;
	rcp_chan *tx;  /* sender's channel */
	rcp_chan *rx;  /* receiver's channel from the sender */
	uint64_t rng;  /* the schedule: reproducible from the seed */
	uint64_t post; /* when receives are posted (depends on timing) */
	long n;        /* messages in the schedule so far */
	long cap;
	uint8_t *tag;
	uint32_t *size;
	long sent, sends_done, received;
	long next_post[NTAGS]; /* per tag: next schedule index to post for */
	struct {
		rcp_req *req;
		unsigned char *buf;
	} s[SENDS_MAX], r[RECVS_MAX];
	long r_idx[RECVS_MAX];
	uint64_t bytes;
};

static uint64_t seq_of(int d, long i)
{
	return ((uint64_t)d << 40) | (uint64_t)i;
}

/* Extends the schedule to at least N messages. */
static void schedule(struct dir *x, const struct run *ru, long n)
{
	while (x->n < n) {
		uint64_t r = test_rand(&x->rng);
		size_t sz;
		if (x->n == x->cap) {
			x->cap = x->cap ? 2 * x->cap : 1024;
			x->tag = realloc(x->tag, (size_t)x->cap);
			x->size = realloc(x->size, (size_t)x->cap * sizeof *x->size);
			if (!x->tag || !x->size)
				abort();
		}
		switch ((r >> 8) % 10) {
		case 0:
			sz = 65537 + (r >> 16) % (ru->max_size > 65537 ? ru->max_size - 65536 : 1);
			break;
		case 1:
		case 2:
		case 3: sz = 257 + (r >> 16) % (65536 - 256); break;
		default: sz = (r >> 16) % 257; break;
		}
		if (sz > ru->max_size)
			sz = ru->max_size;
		x->tag[x->n] = (uint8_t)(r % NTAGS);
		x->size[x->n] = (uint32_t)sz;
		x->n++;
	}
}

/* Next index >= FROM in the schedule with tag T (extending it). */
static long next_with_tag(struct dir *x, const struct run *ru, long from, int t)
{
	for (long i = from;; i++) {
		schedule(x, ru, i + 1);
		if (x->tag[i] == t)
			return i;
	}
}

static int fail_run(const struct run *ru, rcp_ep *a, rcp_ep *b, const char *fmt, long v1, long v2)
{
	struct rcp_ep_stats sa, sb;
	rcp_ep_get_stats(a, &sa);
	rcp_ep_get_stats(b, &sb);
	printf("FAIL: soak %s faults=\"%s\" flags=%u seed=%llu: ", ru->transport, ru->faults,
	       ru->flags, (unsigned long long)ru->seed);
	printf(fmt, v1, v2);
	printf("\n  a: sent %llu recv %llu frames %llu/%llu retx %llu timeouts %llu bad %llu\n"
	       "  b: sent %llu recv %llu frames %llu/%llu retx %llu timeouts %llu bad %llu\n",
	       (unsigned long long)sa.msgs_sent, (unsigned long long)sa.msgs_recv,
	       (unsigned long long)sa.frames_sent, (unsigned long long)sa.frames_recv,
	       (unsigned long long)sa.retransmits, (unsigned long long)sa.timeouts,
	       (unsigned long long)sa.bad_frames, (unsigned long long)sb.msgs_sent,
	       (unsigned long long)sb.msgs_recv, (unsigned long long)sb.frames_sent,
	       (unsigned long long)sb.frames_recv, (unsigned long long)sb.retransmits,
	       (unsigned long long)sb.timeouts, (unsigned long long)sb.bad_frames);
	return 1;
}

static int open_ep(const struct run *ru, int who, rcp_ep **ep)
{
	char addr[64];
	struct rcp_nic_config nc = {.faults = ru->faults};
	struct rcp_ep_config ec = {.flags = ru->flags, .crc = -1, .nic = &nc};
	if (!strcmp(ru->transport, "shm"))
		snprintf(addr, sizeof addr, "shm:soak-%d-%d", (int)getpid(), who);
	else
		snprintf(addr, sizeof addr, "%s:", ru->transport);
	return rcp_ep_open(addr, &ec, ep);
}

/* One step of direction X: complete what is done, start what may start.
 * Returns 1 if anything completed, 0 if not, -1 on a failure (printed). */
static int step(struct dir *x, const struct run *ru, long limit, rcp_ep *a, rcp_ep *b)
{
	struct rcp_status st;
	int moved = 0;

	for (int k = 0; k < SENDS_MAX; k++) {
		if (!x->s[k].req)
			continue;
		int rc = rcp_test(x->s[k].req, &st);
		if (rc == RCP_EAGAIN)
			continue;
		if (rc || st.error)
			return -fail_run(ru, a, b, "send failed: %ld (dir %ld)", rc ? rc : st.error,
			                 x->d);
		free(x->s[k].buf);
		x->s[k].buf = NULL;
		x->s[k].req = NULL;
		x->sends_done++;
		moved = 1;
	}
	for (int k = 0; k < SENDS_MAX && x->sent < limit; k++) {
		if (x->s[k].req)
			continue;
		schedule(x, ru, x->sent + 1);
		size_t sz = x->size[x->sent];
		x->s[k].buf = malloc(sz ? sz : 1);
		if (!x->s[k].buf)
			abort();
		test_fill(x->s[k].buf, sz, seq_of(x->d, x->sent));
		int rc = rcp_isend(x->tx, x->tag[x->sent], x->s[k].buf, sz, &x->s[k].req);
		if (rc)
			return -fail_run(ru, a, b, "isend: %ld at %ld", rc, x->sent);
		x->sent++;
	}
	for (int k = 0; k < RECVS_MAX; k++) {
		if (!x->r[k].req)
			continue;
		int rc = rcp_test(x->r[k].req, &st);
		if (rc == RCP_EAGAIN)
			continue;
		long i = x->r_idx[k];
		if (rc || st.error)
			return -fail_run(ru, a, b, "receive of %ld failed: %ld", i,
			                 rc ? rc : st.error);
		if (st.len != x->size[i] || st.tag != x->tag[i])
			return -fail_run(ru, a, b, "message %ld: wrong length/tag (len %ld)", i,
			                 (long)st.len);
		long bad = test_check(x->r[k].buf, st.len, seq_of(x->d, i));
		if (bad >= 0)
			return -fail_run(ru, a, b, "message %ld: byte %ld wrong (order or data)", i,
			                 bad);
		x->bytes += st.len;
		free(x->r[k].buf);
		x->r[k].buf = NULL;
		x->r[k].req = NULL;
		x->received++;
		moved = 1;
	}
	/* Late receives: at most one new one per step, one step in four. */
	if ((test_rand(&x->post) & 3) == 0) {
		int t = (int)(test_rand(&x->post) % NTAGS);
		long i = next_with_tag(x, ru, x->next_post[t], t);
		/* Only for messages already sent (they may still be on the
		 * way): a receive held for a message the sender cannot start
		 * yet, because its sends wait for other receives, would
		 * deadlock the test, not the protocol. */
		for (int k = 0; k < RECVS_MAX && i < limit && i < x->sent; k++) {
			if (x->r[k].req)
				continue;
			size_t sz = x->size[i];
			x->r[k].buf = malloc(sz ? sz : 1);
			if (!x->r[k].buf)
				abort();
			int rc =
			    rcp_irecv(x->rx_ep, x->rx, (uint64_t)t, x->r[k].buf, sz, &x->r[k].req);
			if (rc)
				return -fail_run(ru, a, b, "irecv: %ld at %ld", rc, i);
			x->r_idx[k] = i;
			x->next_post[t] = i + 1;
			break;
		}
	}
	return moved;
}

static void dir_free(struct dir *x)
{
	for (int k = 0; k < SENDS_MAX; k++)
		free(x->s[k].buf);
	for (int k = 0; k < RECVS_MAX; k++)
		free(x->r[k].buf);
	free(x->tag);
	free(x->size);
}

static int soak(const struct run *ru, double stall_s)
{
	rcp_ep *ep[2] = {NULL, NULL};
	rcp_chan *ch[2];
	struct dir dirs[2];
	char addr[2][128];
	uint64_t t0 = 0, last = 0;
	long limit = ru->messages ? ru->messages : LONG_MAX;
	int rc = 0;

	for (int i = 0; i < 2; i++) {
		if (open_ep(ru, i, &ep[i]) || rcp_ep_addr(ep[i], addr[i], sizeof addr[i])) {
			printf("FAIL: soak: cannot open %s endpoints\n", ru->transport);
			return 1;
		}
	}
	if (rcp_connect(ep[0], addr[1], &ch[0]) || rcp_connect(ep[1], addr[0], &ch[1])) {
		printf("FAIL: soak: connect\n");
		return 1;
	}
	memset(dirs, 0, sizeof dirs);
	for (int d = 0; d < 2; d++) {
		dirs[d].d = d;
		dirs[d].tx = ch[d];
		dirs[d].rx = ch[1 - d];
		dirs[d].rx_ep = ep[1 - d];
		dirs[d].rng = ru->seed * 2 + (uint64_t)d;
		dirs[d].post = ~dirs[d].rng;
	}
	{
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t0 = last = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	int moved_since = 0;
	for (uint64_t loop = 0;; loop++) {
		int moved = 0;
		/* Both, always: an endpoint with no request outstanding must
		 * still answer its peer (acks, retransmissions), as one that
		 * waits on anything would. */
		(void)rcp_progress(ep[0]);
		(void)rcp_progress(ep[1]);
		for (int d = 0; d < 2; d++) {
			int m = step(&dirs[d], ru, limit, ep[0], ep[1]);
			if (m < 0) {
				rc = 1;
				goto out;
			}
			moved |= m;
		}
		if (dirs[0].received == limit && dirs[1].received == limit &&
		    dirs[0].sends_done == limit && dirs[1].sends_done == limit)
			break;
		moved_since |= moved;
		if (loop & 1023)
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		if (moved_since)
			last = now;
		moved_since = 0;
		if (!ru->messages && now - t0 > (uint64_t)(ru->seconds * 1e9)) {
			limit = dirs[0].sent > dirs[1].sent ? dirs[0].sent : dirs[1].sent;
			if (limit == 0)
				break;
		}
		if (now - last > (uint64_t)(stall_s * 1e9)) {
			rc = fail_run(ru, ep[0], ep[1], "stalled: %ld and %ld received",
			              dirs[0].received, dirs[1].received);
			goto out;
		}
	}
	{
		struct rcp_ep_stats sa, sb;
		rcp_ep_get_stats(ep[0], &sa);
		rcp_ep_get_stats(ep[1], &sb);
		printf("ok: soak %s faults=\"%s\" flags=%u seed=%llu: %ld+%ld messages, %llu bytes "
		       "checked; retransmits %llu, unexpected %llu, credit stalls %llu\n",
		       ru->transport, ru->faults, ru->flags, (unsigned long long)ru->seed,
		       dirs[0].received, dirs[1].received,
		       (unsigned long long)(dirs[0].bytes + dirs[1].bytes),
		       (unsigned long long)(sa.retransmits + sb.retransmits),
		       (unsigned long long)(sa.unexpected_msgs + sb.unexpected_msgs),
		       (unsigned long long)(sa.credit_stalls + sb.credit_stalls));
	}
out:
	rcp_ep_close(ep[0]);
	rcp_ep_close(ep[1]);
	dir_free(&dirs[0]);
	dir_free(&dirs[1]);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"transport", required_argument, NULL, 't'},
	    {"faults", required_argument, NULL, 'f'},
	    {"messages", required_argument, NULL, 'n'},
	    {"seconds", required_argument, NULL, 's'},
	    {"max-size", required_argument, NULL, 'm'},
	    {"seed", required_argument, NULL, 'r'},
	    {"sleep", no_argument, NULL, 'z'},
	    {"stall-s", required_argument, NULL, 'x'},
	    {NULL, 0, NULL, 0},
	};
	struct run one = {"udp", "", 0, 0, 0, 1 << 20, 1};
	double stall_s = 20;
	int custom = 0, opt, failed = 0, passed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		custom = 1;
		switch (opt) {
		case 't': one.transport = optarg; break;
		case 'f': one.faults = optarg; break;
		case 'n': one.messages = atol(optarg); break;
		case 's': one.seconds = atof(optarg); break;
		case 'm': one.max_size = strtoull(optarg, NULL, 0); break;
		case 'r': one.seed = strtoull(optarg, NULL, 0); break;
		case 'z': one.flags |= RCP_EP_SLEEP; break;
		case 'x': stall_s = atof(optarg); break;
		default:
			fprintf(stderr, "usage: soak [--transport shm|udp] [--faults SPEC] "
			                "[--messages N | --seconds S] [--max-size B] [--seed N] "
			                "[--sleep] [--stall-s S]\n");
			return 2;
		}
	}
	if (custom) {
		if (!one.messages && one.seconds <= 0)
			one.messages = 2000;
		failed = soak(&one, stall_s);
		passed = !failed;
	} else {
		/* The suite's short runs; RCP_TEST_SEED changes every seed. */
		uint64_t s = test_seed(1);
		const struct run runs[] = {
		    {"shm", "", 0, 3000, 0, 1 << 20, s},
		    {"udp", "", 0, 2000, 0, 256 << 10, s + 1},
		    {"udp", "drop=0.05,dup=0.02,reorder=0.05,corrupt=0.01,seed=5", 0, 1500, 0,
		     256 << 10, s + 2},
		    {"shm", "drop=0.05,dup=0.02,reorder=0.05,corrupt=0.01,seed=6", RCP_EP_SLEEP,
		     1500, 0, 256 << 10, s + 3},
		};
		for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
			if (soak(&runs[i], stall_s))
				failed++;
			else
				passed++;
		}
	}
	printf("soak: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
