/*
 * tests/test_faults.c — the fault-injecting nic wrapper (nic/faults.c).
 *
 * The wrapper is tested over a tiny in-process loopback backend defined
 * here ("loop": whatever is sent to peer 0..LB_PEERS-1 is queued in memory
 * and comes back from recv, tagged with the destination), so these tests
 * need neither shm nor udp and can look inside the backend: how many
 * frames it holds, whether a RCP_NIC_MORE batch is still open, how often
 * it said RCP_EAGAIN.  The loopback honours RCP_NIC_MORE the lazy way a
 * real backend may: it keeps pointers to the caller's data and copies
 * only when the batch ends, so a wrapper that hands it memory it then
 * reuses is caught by the content checks.  It can also be given a small
 * queue limit to produce backpressure.
 *
 * Frames carry their id seven times (majority vote recovers it from any
 * 1-3 flipped bits) followed by a pattern derived from the id, so the
 * receiver knows for every frame which one it is, whether it was
 * corrupted and by how many bits.  Everything is seeded: RCP_TEST_SEED
 * overrides the default, and every failure prints the seed.
 *
 * The last test goes through rcp_nic_open("udp:") with cfg->faults and is
 * skipped while the udp backend is not built.
 */
#include <stdbool.h>

#include <rcp/nic.h>

#include "nic/nic_int.h"
#include "testutil.h"

static uint64_t g_seed;

#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			char m_[2048];                                                             \
			snprintf(m_, sizeof m_, __VA_ARGS__);                                      \
			fail_msg("%s:%d: %s: %s [seed %llu; RCP_TEST_SEED=%llu reproduces]",       \
			         __FILE__, __LINE__, #c, m_, (unsigned long long)g_seed,           \
			         (unsigned long long)g_seed);                                      \
		}                                                                                  \
	} while (0)

/* ---- the loopback backend -------------------------------------------- */

#define LB_MTU   512
#define LB_CAP   8192 /* queued frames */
#define LB_PEERS 4
#define LB_BATCH 64 /* frames a MORE batch may keep by pointer */
#define LB_IOV   4

struct lb_slot {
	uint32_t len;
	int32_t dst;
	unsigned char data[LB_MTU];
};

struct lb_pend {
	int peer, iovcnt;
	size_t total;
	struct iovec iov[LB_IOV];
};

struct lb {
	struct rcp_nic base;
	struct lb_slot *q;
	unsigned head, count, out, limit;
	struct lb_pend pend[LB_BATCH];
	int npend;
	int fds[2];
	int removed;
	uint64_t eagains, committed;
};

static uint64_t g_lb_closed_committed; /* lb->committed at the last close */

static void lb_put(struct lb *lb, int peer, const struct iovec *iov, int iovcnt, size_t total)
{
	struct lb_slot *s = &lb->q[(lb->head + lb->count) % LB_CAP];
	unsigned char *d = s->data;

	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(d, iov[i].iov_base, iov[i].iov_len);
		d += iov[i].iov_len;
	}
	s->len = (uint32_t)total;
	s->dst = peer;
	lb->count++;
	lb->committed++;
}

static void lb_commit(struct lb *lb)
{
	for (int i = 0; i < lb->npend; i++)
		lb_put(lb, lb->pend[i].peer, lb->pend[i].iov, lb->pend[i].iovcnt,
		       lb->pend[i].total);
	lb->npend = 0;
}

static void lb_close(rcp_nic *nic)
{
	struct lb *lb = (struct lb *)nic;
	lb_commit(lb);
	g_lb_closed_committed = lb->committed;
	close(lb->fds[0]);
	close(lb->fds[1]);
	free(lb->q);
	free(lb);
}

static void lb_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	info->backend = "loop";
	info->mtu = LB_MTU;
	info->rx_frames = LB_CAP;
	info->caps = RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_CHECKED |
	             RCP_NIC_CAP_SAME_HOST | RCP_NIC_CAP_SHARED_SEG;
}

static int lb_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	return snprintf(buf, len, "loop:0") < (int)len ? 0 : RCP_ERANGE;
}

static int lb_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	if (*len < 2)
		return RCP_ERANGE;
	((unsigned char *)buf)[0] = 0x7f;
	((unsigned char *)buf)[1] = 0;
	*len = 2;
	return 0;
}

static int lb_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	int p = ((const unsigned char *)blob)[1];
	if (p >= LB_PEERS)
		return RCP_EADDR;
	*peer = p;
	return 0;
}

static int lb_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	if (strncmp(addr, "loop:", 5) || addr[5] < '0' || addr[5] >= '0' + LB_PEERS || addr[6])
		return RCP_EADDR;
	*peer = addr[5] - '0';
	return 0;
}

static int lb_peer_remove(rcp_nic *nic, int peer)
{
	((struct lb *)nic)->removed = peer;
	return 0;
}

static int lb_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                   unsigned flags)
{
	struct lb *lb = (struct lb *)nic;

	if (peer >= LB_PEERS)
		return RCP_EPEER;
	if (total > LB_MTU)
		return RCP_EMSGSIZE;
	if (lb->count + (unsigned)lb->npend >= lb->limit) {
		lb->eagains++;
		lb->base.stats.tx_eagain++;
		return RCP_EAGAIN;
	}
	if ((flags & RCP_NIC_MORE) && iovcnt <= LB_IOV) {
		/* Keep pointers, copy later: what the contract allows. */
		struct lb_pend *p;
		if (lb->npend == LB_BATCH)
			lb_commit(lb);
		p = &lb->pend[lb->npend++];
		p->peer = peer;
		p->iovcnt = iovcnt;
		p->total = total;
		memcpy(p->iov, iov, (size_t)iovcnt * sizeof *iov);
	} else {
		lb_commit(lb);
		lb_put(lb, peer, iov, iovcnt, total);
	}
	lb->base.stats.tx_frames++;
	lb->base.stats.tx_bytes += total;
	return 0;
}

static int lb_flush(rcp_nic *nic)
{
	lb_commit((struct lb *)nic);
	return 0;
}

static int lb_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max)
{
	struct lb *lb = (struct lb *)nic;
	int n = 0;

	if (lb->out)
		return RCP_EINVAL; /* previous burst not released */
	for (; n < max && (unsigned)n < lb->count; n++) {
		struct lb_slot *s = &lb->q[(lb->head + (unsigned)n) % LB_CAP];
		frames[n].data = s->data;
		frames[n].len = s->len;
		frames[n].peer = s->dst;
		frames[n].src = "loop";
		frames[n].srclen = 4;
		frames[n].token = (uintptr_t)n;
		lb->base.stats.rx_frames++;
		lb->base.stats.rx_bytes += s->len;
	}
	lb->out = (unsigned)n;
	return n;
}

static void lb_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct lb *lb = (struct lb *)nic;
	unsigned k = (unsigned)n > lb->out ? lb->out : (unsigned)n;
	lb->head = (lb->head + k) % LB_CAP;
	lb->count -= k;
	lb->out -= k;
}

static int lb_fd(const rcp_nic *nic)
{
	return ((const struct lb *)nic)->fds[0];
}

static int lb_pending(rcp_nic *nic)
{
	struct lb *lb = (struct lb *)nic;
	return lb->count > lb->out;
}

static int lb_arm(rcp_nic *nic)
{
	return lb_pending(nic) ? RCP_EAGAIN : 0;
}

static const struct rcpi_nic_ops lb_ops = {
    .name = "loop",
    .id = 0x7f,
    .close = lb_close,
    .query = lb_query,
    .addr_str = lb_addr_str,
    .addr_blob = lb_addr_blob,
    .peer_add = lb_peer_add,
    .peer_add_str = lb_peer_add_str,
    .peer_remove = lb_peer_remove,
    .send = lb_send,
    .flush = lb_flush,
    .recv = lb_recv,
    .release = lb_release,
    .fd = lb_fd,
    .arm = lb_arm,
    .pending = lb_pending,
};

static struct lb *lb_open(void)
{
	struct lb *lb = calloc(1, sizeof *lb);
	assert_non_null(lb);
	lb->q = calloc(LB_CAP, sizeof *lb->q);
	assert_non_null(lb->q);
	assert_int_equal(pipe(lb->fds), 0);
	lb->base.ops = &lb_ops;
	lb->limit = LB_CAP;
	lb->removed = -1;
	return lb;
}

/* A loopback endpoint wrapped by SPEC. */
static rcp_nic *wrap_lb(const char *spec, struct lb **lbp)
{
	struct lb *lb = lb_open();
	rcp_nic *nic = NULL;
	int rc = rcpi_nic_faults_wrap(&lb->base, spec, &nic);
	CHECK(rc == 0, "wrap \"%s\": %s", spec, rcp_strerror(rc));
	if (lbp)
		*lbp = lb;
	return nic;
}

/* ---- self-describing frames -------------------------------------------- */

#define ID_COPIES 7
#define HDR       (ID_COPIES * 4)

static size_t frame_len(uint32_t id, size_t maxlen)
{
	return HDR + 4 + (id * 2654435761u) % (uint32_t)(maxlen - HDR - 4 + 1);
}

static void build_frame(unsigned char *buf, uint32_t id, size_t len)
{
	for (int i = 0; i < ID_COPIES; i++)
		memcpy(buf + 4 * i, &id, 4);
	test_fill(buf + HDR, len - HDR, id);
}

/* Recovers the id by majority over the copies (any 3 flips cannot turn a
 * majority of 7), then counts the bits that differ from the frame it
 * names.  Returns the number of flipped bits, or -1 if the length is not
 * that frame's. */
static int frame_flips(const unsigned char *p, size_t len, size_t maxlen, uint32_t *idp)
{
	unsigned char want[LB_MTU];
	uint32_t id = 0, c[ID_COPIES];
	int flips = 0;

	if (len < HDR + 4 || len > LB_MTU)
		return -1;
	memcpy(c, p, sizeof c);
	for (int b = 0; b < 32; b++) {
		int ones = 0;
		for (int i = 0; i < ID_COPIES; i++)
			ones += (c[i] >> b) & 1;
		if (ones > ID_COPIES / 2)
			id |= 1u << b;
	}
	*idp = id;
	if (frame_len(id, maxlen) != len)
		return -1;
	build_frame(want, id, len);
	for (size_t i = 0; i < len; i++)
		flips += __builtin_popcount((unsigned)(p[i] ^ want[i]));
	return flips;
}

/* ---- the receiver's record ---------------------------------------------- */

struct rxlog {
	uint32_t n;    /* ids 0..n-1 were sent */
	size_t maxlen; /* frame_len() parameter */
	uint8_t *cnt;  /* arrivals per id (saturating) */
	int8_t *flips; /* bits flipped in the first arrival */
	uint64_t *seq; /* arrivals in order: id | flips << 32 | dst << 40 */
	size_t nseq, capseq;
	int64_t maxid[LB_PEERS];
	uint64_t arrivals, distinct, ooo, bad, flip_mismatch, corrupted_ids;
	uint64_t flipcount[4];
};

static void log_init(struct rxlog *l, uint32_t n, size_t maxlen)
{
	memset(l, 0, sizeof *l);
	l->n = n;
	l->maxlen = maxlen;
	l->cnt = calloc(n, 1);
	l->flips = calloc(n, 1);
	l->capseq = (size_t)n * 2 + 64;
	l->seq = malloc(l->capseq * sizeof *l->seq);
	assert_true(l->cnt && l->flips && l->seq);
	for (int i = 0; i < LB_PEERS; i++)
		l->maxid[i] = -1;
}

static void log_free(struct rxlog *l)
{
	free(l->cnt);
	free(l->flips);
	free(l->seq);
}

static void log_frame(struct rxlog *l, const struct rcp_nic_frame *fr)
{
	uint32_t id;
	int f = frame_flips(fr->data, fr->len, l->maxlen, &id);
	int dst = fr->peer >= 0 && fr->peer < LB_PEERS ? fr->peer : 0;

	if (f < 0 || f > 3 || id >= l->n) {
		l->bad++;
		return;
	}
	l->arrivals++;
	if (l->nseq < l->capseq)
		l->seq[l->nseq++] = id | (uint64_t)f << 32 | (uint64_t)dst << 40;
	if (l->cnt[id] == 0) {
		l->distinct++;
		l->flips[id] = (int8_t)f;
		l->flipcount[f]++;
		l->corrupted_ids += f > 0;
		if ((int64_t)id < l->maxid[dst])
			l->ooo++;
		else
			l->maxid[dst] = id;
	} else if (l->flips[id] != f) {
		l->flip_mismatch++;
	}
	if (l->cnt[id] < 255)
		l->cnt[id]++;
}

static unsigned drain(rcp_nic *nic, struct rxlog *l)
{
	struct rcp_nic_frame fr[64];
	unsigned total = 0;
	int n;

	while ((n = rcp_nic_recv(nic, fr, 64)) > 0) {
		for (int i = 0; i < n; i++)
			log_frame(l, &fr[i]);
		rcp_nic_release(nic, fr, n);
		total += (unsigned)n;
	}
	CHECK(n == 0, "recv: %s", rcp_strerror(n));
	return total;
}

static uint64_t count_ids(const struct rxlog *l, unsigned arrivals)
{
	uint64_t k = 0;
	for (uint32_t i = 0; i < l->n; i++)
		k += l->cnt[i] == arrivals;
	return k;
}

/* ---- the sender ------------------------------------------------------- */

struct workload {
	uint32_t n;         /* frames, ids 0..n-1 */
	unsigned batch;     /* frames between flush + drain */
	int ndest;          /* destinations 0..ndest-1 */
	size_t maxlen;      /* largest frame */
	bool more;          /* RCP_NIC_MORE on about half the frames */
	bool split;         /* gather each frame from 1-3 pieces */
	bool verify_sender; /* the wrapper must not write the caller's data */
	struct lb *lb;      /* if set: check RCP_NIC_MORE batches end, scribble */
	uint64_t seed;      /* the test's own choices (not the faults') */
};

static int split_iov(unsigned char *buf, size_t len, struct iovec *iov, uint64_t *s)
{
	size_t a, b, t;

	if (!s) {
		iov[0].iov_base = buf;
		iov[0].iov_len = len;
		return 1;
	}
	a = test_rand(s) % (len + 1);
	b = test_rand(s) % (len + 1);
	if (a > b) {
		t = a;
		a = b;
		b = t;
	}
	iov[0].iov_base = buf;
	iov[0].iov_len = a;
	iov[1].iov_base = buf + a;
	iov[1].iov_len = b - a;
	iov[2].iov_base = buf + b;
	iov[2].iov_len = len - b;
	return 3;
}

static void flush_all(rcp_nic *nic, struct rxlog *l)
{
	int rc, tries = 0;
	while ((rc = rcp_nic_flush(nic)) == RCP_EAGAIN) {
		CHECK(++tries < 100000, "flush stuck on EAGAIN");
		drain(nic, l);
	}
	CHECK(rc == 0, "flush: %s", rcp_strerror(rc));
}

/* Sends W's frames in batches, each ended by flush and drained into L.
 * The buffers of a batch stay untouched while RCP_NIC_MORE frames may
 * point into them; after a send without it they are overwritten, as a
 * caller is entitled to. */
static void run(rcp_nic *nic, const struct workload *w, struct rxlog *l)
{
	unsigned char(*bufs)[LB_MTU] = malloc((size_t)w->batch * LB_MTU);
	uint64_t s = w->seed;
	uint32_t id = 0;

	assert_non_null(bufs);
	while (id < w->n) {
		unsigned b = w->n - id < w->batch ? w->n - id : w->batch, first_open = 0;
		for (unsigned i = 0; i < b; i++, id++) {
			unsigned char *buf = bufs[i];
			size_t len = frame_len(id, w->maxlen);
			int dst = w->ndest > 1 ? (int)(test_rand(&s) % (unsigned)w->ndest) : 0;
			unsigned flags = w->more && (test_rand(&s) & 1) ? RCP_NIC_MORE : 0;
			struct iovec iov[3];
			int cnt, rc, tries = 0;

			build_frame(buf, id, len);
			cnt = split_iov(buf, len, iov, w->split ? &s : NULL);
			while ((rc = rcp_nic_send(nic, dst, iov, cnt, flags)) == RCP_EAGAIN) {
				CHECK(++tries < 100000, "send of id %u stuck on EAGAIN", id);
				flush_all(nic, l);
				drain(nic, l);
			}
			CHECK(rc == 0, "send id %u: %s", id, rcp_strerror(rc));
			if (w->verify_sender) {
				uint32_t got;
				CHECK(frame_flips(buf, len, w->maxlen, &got) == 0 && got == id,
				      "sender's buffer of id %u was modified", id);
			}
			if (w->lb && !(flags & RCP_NIC_MORE)) {
				CHECK(w->lb->npend == 0,
				      "id %u sent without MORE but the backend still holds a "
				      "batch of %d",
				      id, w->lb->npend);
				for (unsigned j = first_open; j <= i; j++)
					memset(bufs[j], 0xa5, LB_MTU);
				first_open = i + 1;
			}
		}
		flush_all(nic, l);
		if (w->lb) {
			CHECK(w->lb->npend == 0, "backend batch still open after flush");
			for (unsigned j = first_open; j < b; j++)
				memset(bufs[j], 0xa5, LB_MTU);
		}
		drain(nic, l);
	}
	free(bufs);
}

static struct rcp_nic_stats stats_of(const rcp_nic *nic)
{
	struct rcp_nic_stats st;
	assert_int_equal(rcp_nic_get_stats(nic, &st), 0);
	return st;
}

/* ---- spec parsing ------------------------------------------------------- */

static void t_parse_valid(void **state)
{
	struct rcpi_faults_spec s;
	g_seed = 0;

	assert_int_equal(rcpi_faults_parse("", &s), 0);
	assert_true(s.drop == 0 && s.dup == 0 && s.reorder == 0 && s.corrupt == 0 && s.delay == 0);
	assert_int_equal(s.delay_ns, 100000);
	assert_int_equal(s.seed, 1);
	assert_int_equal(rcpi_faults_parse("  ", &s), 0);
	assert_int_equal(s.seed, 1);

	const char *full[] = {
	    "drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,delay=0.01,delay_us=200,seed=7",
	    "seed=7,delay_us=200,delay=0.01,corrupt=0.01,reorder=0.05,dup=0.01,drop=0.05",
	    " drop = 0.05 , dup=1e-2,reorder=.05,corrupt=0.010,delay=0.01,delay_us=200,seed=0x7 ",
	};
	for (size_t i = 0; i < sizeof full / sizeof full[0]; i++) {
		memset(&s, 0, sizeof s);
		assert_int_equal(rcpi_faults_parse(full[i], &s), 0);
		assert_true(s.drop == 0.05 && s.dup == 0.01 && s.reorder == 0.05 &&
		            s.corrupt == 0.01 && s.delay == 0.01);
		assert_int_equal(s.delay_ns, 200000);
		assert_int_equal(s.seed, 7);
	}

	assert_int_equal(rcpi_faults_parse("drop=1,delay_us=0", &s), 0);
	assert_true(s.drop == 1.0 && s.dup == 0);
	assert_int_equal(s.delay_ns, 0);
	assert_int_equal(s.seed, 1);
	assert_int_equal(rcpi_faults_parse("corrupt=0", &s), 0);
	assert_true(s.corrupt == 0);
	assert_int_equal(rcpi_faults_parse("seed=18446744073709551615", &s), 0);
	assert_true(s.seed == UINT64_MAX);
	assert_int_equal(rcpi_faults_parse("seed=0XfFfF", &s), 0);
	assert_int_equal(s.seed, 0xffff);
	assert_int_equal(rcpi_faults_parse("seed=0", &s), 0);
	assert_int_equal(s.seed, 0);
	assert_int_equal(rcpi_faults_parse("delay_us=60000000", &s), 0);
	assert_int_equal(s.delay_ns, 60000000000ull);
	assert_int_equal(rcpi_faults_parse("delay=1", &s), 0);
	assert_true(s.delay == 1.0);
	assert_int_equal(rcpi_faults_parse(NULL, &s), RCP_EINVAL);
	assert_int_equal(rcpi_faults_parse("drop=0.1", NULL), RCP_EINVAL);
}

/* Runs the parser with stderr captured; returns what was logged. */
static const char *parse_captured(const char *spec, struct rcpi_faults_spec *s, int *rc)
{
	static char out[1024];
	FILE *tmp = tmpfile();
	int saved;
	size_t n;

	assert_non_null(tmp);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	*rc = rcpi_faults_parse(spec, s);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof out - 1, tmp);
	out[n] = 0;
	fclose(tmp);
	return out;
}

static void t_parse_invalid(void **state)
{
	/* spec, a piece the warning must quote */
	static const char *const bad[][2] = {
	    {"drop", "'drop' is not key=value"},
	    {"drop=", "'drop='"},
	    {"=0.1", "unknown key ''"},
	    {"drop=abc", "'drop=abc' is not a valid number"},
	    {"drop=0.1x", "'drop=0.1x'"},
	    {"drop=0.1;dup=0.2", "'drop=0.1;dup=0.2'"},
	    {"drop=0.5 0.5", "'drop=0.5 0.5'"},
	    {"drop=-0.1", "'drop=-0.1' out of range"},
	    {"drop=1.5", "'drop=1.5' out of range"},
	    {"dup=nan", "'dup=nan' out of range"},
	    {"reorder=inf", "'reorder=inf' out of range"},
	    {"corrupt=2", "'corrupt=2' out of range"},
	    {"delay=-1e-9", "'delay=-1e-9' out of range"},
	    {"bogus=1", "unknown key 'bogus'"},
	    {"Drop=0.1", "unknown key 'Drop'"},
	    {"drop=0.1,dropp=0.1", "unknown key 'dropp'"},
	    {"delay_us=-5", "'delay_us=-5' is not a valid number"},
	    {"delay_us=1.5", "'delay_us=1.5'"},
	    {"delay_us=60000001", "'delay_us=60000001' out of range"},
	    {"delay_us=99999999999999999999999", "'delay_us=99999999999999999999999' out of range"},
	    {"seed=abc", "'seed=abc'"},
	    {"seed=-1", "'seed=-1'"},
	    {"seed=+1", "'seed=+1'"},
	    {"seed=0x", "'seed=0x'"},
	    {"seed=0xg1", "'seed=0xg1'"},
	    {"seed=18446744073709551616", "'seed=18446744073709551616' out of range"},
	    {"seed=1111111111111111111111111111111111111111111111111111111111111111111111",
	     "is not a valid number"},
	    {"drop=0.1,,dup=0.1", "empty item"},
	    {"drop=0.1,", "empty item"},
	    {",", "empty item"},
	    {"drop=0.1,drop=0.2", "'drop' given twice"},
	    {"drop=0.1,dup=0.1,seed=1,reorder=7", "'reorder=7' out of range"},
	};
	int saved_level = rcpi_log_level;

	g_seed = 0;
	rcpi_log_level = RCPI_LOG_WARN; /* whatever RCP_LOG says */
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct rcpi_faults_spec s, ref;
		const char *msg;
		int rc;

		memset(&s, 0x5a, sizeof s);
		ref = s;
		msg = parse_captured(bad[i][0], &s, &rc);
		CHECK(rc == RCP_EINVAL, "\"%s\" gave %d", bad[i][0], rc);
		CHECK(!memcmp(&s, &ref, sizeof s), "\"%s\": output written on error", bad[i][0]);
		CHECK(strstr(msg, bad[i][1]) != NULL, "\"%s\": warning \"%s\" lacks \"%s\"",
		      bad[i][0], msg, bad[i][1]);
	}
	rcpi_log_level = saved_level;
}

/* A bad spec fails the wrap and leaves INNER to the caller. */
static void t_wrap_bad_spec(void **state)
{
	struct lb *lb = lb_open();
	rcp_nic *nic = (rcp_nic *)1;
	int saved_level = rcpi_log_level;

	g_seed = 0;
	rcpi_log_level = RCPI_LOG_ERROR; /* the warning is tested above */
	assert_int_equal(rcpi_nic_faults_wrap(&lb->base, "drop=2", &nic), RCP_EINVAL);
	rcpi_log_level = saved_level;
	assert_null(nic);
	assert_int_equal(rcpi_nic_faults_wrap(NULL, "drop=0", &nic), RCP_EINVAL);
	assert_int_equal(rcpi_nic_faults_wrap(&lb->base, NULL, &nic), RCP_EINVAL);
	lb_close(&lb->base); /* still ours: ASan reports a leak or a double free */
}

/* ---- the wrapper's face: query, stats, forwarded operations ------------ */

static void t_query_and_forwarding(void **state)
{
	static const struct {
		const char *spec;
		uint32_t gone;
	} cases[] = {
	    {"", 0},
	    {"seed=3", 0},
	    {"drop=0.1", RCP_NIC_CAP_RELIABLE},
	    {"dup=0.1", RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_ORDERED},
	    {"reorder=0.1", RCP_NIC_CAP_ORDERED},
	    {"delay=0.1", RCP_NIC_CAP_ORDERED},
	    {"corrupt=0.1", RCP_NIC_CAP_CHECKED},
	    {"drop=0.1,reorder=0.1,corrupt=0.1",
	     RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_CHECKED},
	};
	/* SHARED_SEG survives every fault (nic/faults.c, Capabilities). */
	const uint32_t all = RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_CHECKED |
	                     RCP_NIC_CAP_SAME_HOST | RCP_NIC_CAP_SHARED_SEG;
	struct rcp_nic_info info;
	struct rcp_nic_stats st;
	unsigned char big[LB_MTU + 1], blob[RCP_NIC_ADDR_MAX], rkey[8];
	char str[RCP_NIC_ADDRSTR_MAX];
	struct iovec iov = {big, sizeof big};
	size_t bloblen = sizeof blob;
	rcp_nic_mr *mr = (rcp_nic_mr *)1;
	struct lb *lb;
	rcp_nic *nic;
	int peer = -1;

	g_seed = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		nic = wrap_lb(cases[i].spec, NULL);
		assert_int_equal(rcp_nic_query(nic, &info), 0);
		assert_string_equal(info.backend, "faults+loop");
		assert_int_equal(info.mtu, LB_MTU);
		assert_int_equal(info.rx_frames, LB_CAP);
		CHECK(info.caps == (all & ~cases[i].gone), "\"%s\": caps %#x", cases[i].spec,
		      info.caps);
		rcp_nic_close(nic);
	}

	nic = wrap_lb("seed=5", &lb);
	assert_int_equal(rcp_nic_addr_str(nic, str, sizeof str), 0);
	assert_string_equal(str, "loop:0");
	assert_int_equal(rcp_nic_addr_blob(nic, blob, &bloblen), 0);
	assert_int_equal(bloblen, 2);
	assert_int_equal(rcp_nic_peer_add(nic, blob, bloblen, &peer), 0);
	assert_int_equal(peer, 0);
	assert_int_equal(rcp_nic_peer_add_str(nic, "loop:3", &peer), 0);
	assert_int_equal(peer, 3);
	assert_int_equal(rcp_nic_peer_add_str(nic, "udp:1.2.3.4:5", &peer), RCP_EADDR);
	assert_int_equal(rcp_nic_peer_remove(nic, 2), 0);
	assert_int_equal(lb->removed, 2);
	assert_int_equal(rcp_nic_fd(nic), lb->fds[0]);
	assert_int_equal(rcp_nic_mr_reg(nic, big, sizeof big, RCP_NIC_ACCESS_READ, &mr),
	                 RCP_ENOTSUP);
	assert_null(mr);
	assert_int_equal(rcp_nic_get(nic, 0, big, 8, rkey, sizeof rkey, 0), RCP_ENOTSUP);
	assert_int_equal(rcp_nic_put(nic, 0, big, 8, rkey, sizeof rkey, 0), RCP_ENOTSUP);
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), RCP_EMSGSIZE);
	assert_int_equal(rcp_nic_send(nic, LB_PEERS, &iov, 1, 0), RCP_EMSGSIZE);
	iov.iov_len = LB_MTU;
	assert_int_equal(rcp_nic_send(nic, LB_PEERS, &iov, 1, 0), RCP_EPEER);
	assert_int_equal(rcp_nic_send(nic, 1, &iov, 1, 0), 0);
	iov.iov_len = 0;
	assert_int_equal(rcp_nic_send(nic, 1, &iov, 1, 0), 0); /* empty frame */
	assert_int_equal(rcp_nic_arm(nic), RCP_EAGAIN);        /* frames waiting */

	/* The backend's counters show through the wrapper. */
	st = stats_of(nic);
	assert_int_equal(st.tx_frames, 2);
	assert_int_equal(st.tx_bytes, LB_MTU);
	assert_int_equal(st.rx_frames, 0);
	{
		struct rcp_nic_frame fr[4];
		int n = rcp_nic_recv(nic, fr, 4);
		assert_int_equal(n, 2);
		assert_int_equal(fr[0].len, LB_MTU);
		assert_int_equal(fr[0].peer, 1);
		assert_int_equal(fr[1].len, 0);
		rcp_nic_release(nic, fr, n);
	}
	st = stats_of(nic);
	assert_int_equal(st.rx_frames, 2);
	assert_int_equal(st.rx_bytes, LB_MTU);
	assert_int_equal(
	    st.f_dropped + st.f_duplicated + st.f_reordered + st.f_corrupted + st.f_delayed, 0);
	assert_int_equal(rcp_nic_arm(nic), 0);
	rcp_nic_close(nic);
}

/* ---- determinism -------------------------------------------------------- */

static void pattern(uint64_t fseed, uint64_t wseed, struct rxlog *l, struct rcp_nic_stats *st)
{
	char spec[160];
	struct lb *lb;
	rcp_nic *nic;
	struct workload w = {.n = 10000,
	                     .batch = 200,
	                     .ndest = 3,
	                     .maxlen = 160,
	                     .more = true,
	                     .split = true,
	                     .seed = wseed};

	snprintf(spec, sizeof spec, "drop=0.05,dup=0.05,reorder=0.1,corrupt=0.05,seed=%llu",
	         (unsigned long long)fseed);
	nic = wrap_lb(spec, &lb);
	w.lb = lb;
	log_init(l, w.n, w.maxlen);
	run(nic, &w, l);
	*st = stats_of(nic);
	rcp_nic_close(nic);
	CHECK(l->bad == 0, "%llu garbled frames", (unsigned long long)l->bad);
}

/* Same seed and same calls: the same frames, in the same order, with the
 * same damage; another seed: another pattern. */
static void t_same_seed_same_pattern(void **state)
{
	struct rxlog a, b, c;
	struct rcp_nic_stats sa, sb, sc;

	g_seed = test_seed(0x5eed0001);
	pattern(g_seed, g_seed ^ 0xabcdef, &a, &sa);
	pattern(g_seed, g_seed ^ 0xabcdef, &b, &sb);
	CHECK(a.nseq == b.nseq, "%zu vs %zu arrivals", a.nseq, b.nseq);
	CHECK(!memcmp(a.seq, b.seq, a.nseq * sizeof *a.seq), "arrival sequences differ");
	CHECK(!memcmp(&sa, &sb, sizeof sa), "statistics differ");
	/* The pattern is not trivial. */
	CHECK(sa.f_dropped && sa.f_duplicated && sa.f_reordered && sa.f_corrupted,
	      "some fault never fired");

	pattern(g_seed + 1, g_seed ^ 0xabcdef, &c, &sc);
	CHECK(a.nseq != c.nseq || memcmp(a.seq, c.seq, a.nseq * sizeof *a.seq),
	      "seeds %llu and %llu gave the same pattern", (unsigned long long)g_seed,
	      (unsigned long long)g_seed + 1);
	log_free(&a);
	log_free(&b);
	log_free(&c);
}

/* ---- rates -------------------------------------------------------------- */

#define RATE_N 100000

/* Square root by Newton's method: the tests do not link libm. */
static double sqrt_n(double x)
{
	double r = x > 1 ? x : 1;
	for (int i = 0; i < 60; i++)
		r = 0.5 * (r + x / r);
	return r;
}

static void check_rate(const char *what, uint64_t hits, double p)
{
	double obs = (double)hits / RATE_N, tol = 4 * sqrt_n(p * (1 - p) / RATE_N);
	CHECK(obs - p < tol && p - obs < tol, "%s: observed %.5f, asked %.5f (tolerance %.5f)",
	      what, obs, p, tol);
}

static void rate_run(const char *fault, double p, struct rxlog *l, struct rcp_nic_stats *st)
{
	char spec[128];
	rcp_nic *nic;
	struct workload w = {.n = RATE_N, .batch = 500, .ndest = 1, .maxlen = 96, .seed = g_seed};

	snprintf(spec, sizeof spec, "%s=%g,seed=%llu", fault, p, (unsigned long long)g_seed);
	nic = wrap_lb(spec, NULL);
	log_init(l, w.n, w.maxlen);
	run(nic, &w, l);
	*st = stats_of(nic);
	rcp_nic_close(nic);
	CHECK(l->bad == 0, "%llu garbled frames", (unsigned long long)l->bad);
}

static void t_rate_drop(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;
	uint64_t lost;

	g_seed = test_seed(0x5eed0002);
	rate_run("drop", 0.05, &l, &st);
	lost = count_ids(&l, 0);
	check_rate("drop", lost, 0.05);
	CHECK(st.f_dropped == lost, "f_dropped %llu, receiver missed %llu",
	      (unsigned long long)st.f_dropped, (unsigned long long)lost);
	CHECK(l.arrivals == l.distinct && l.ooo == 0 && l.corrupted_ids == 0,
	      "drop did more than dropping");
	log_free(&l);
}

static void t_rate_dup(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;
	uint64_t twice;

	g_seed = test_seed(0x5eed0003);
	rate_run("dup", 0.03, &l, &st);
	twice = count_ids(&l, 2);
	check_rate("dup", twice, 0.03);
	CHECK(count_ids(&l, 1) + twice == RATE_N, "a frame was lost or sent 3 times");
	CHECK(st.f_duplicated == twice, "f_duplicated %llu, receiver saw %llu",
	      (unsigned long long)st.f_duplicated, (unsigned long long)twice);
	CHECK(l.ooo == 0 && l.corrupted_ids == 0, "dup did more than duplicating");
	log_free(&l);
}

static void t_rate_reorder(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;

	g_seed = test_seed(0x5eed0004);
	rate_run("reorder", 0.1, &l, &st);
	CHECK(count_ids(&l, 1) == RATE_N, "a frame was lost or duplicated");
	check_rate("reorder", l.ooo, 0.1);
	CHECK(st.f_reordered == l.ooo, "f_reordered %llu, receiver saw %llu late",
	      (unsigned long long)st.f_reordered, (unsigned long long)l.ooo);
	log_free(&l);
}

static void t_rate_corrupt(void **state)
{
	struct rxlog l;
	struct rcp_nic_stats st;

	g_seed = test_seed(0x5eed0005);
	rate_run("corrupt", 0.02, &l, &st);
	CHECK(count_ids(&l, 1) == RATE_N && l.ooo == 0, "a frame was lost, duplicated or moved");
	check_rate("corrupt", l.corrupted_ids, 0.02);
	CHECK(st.f_corrupted == l.corrupted_ids, "f_corrupted %llu, receiver saw %llu",
	      (unsigned long long)st.f_corrupted, (unsigned long long)l.corrupted_ids);
	/* 1, 2 and 3 flipped bits each about a third of the time. */
	for (int k = 1; k <= 3; k++)
		CHECK(l.flipcount[k] > l.corrupted_ids / 5, "%d-bit damage %llu times of %llu", k,
		      (unsigned long long)l.flipcount[k], (unsigned long long)l.corrupted_ids);
	log_free(&l);
}

/* ---- what must never happen --------------------------------------------- */

/* Corruption works on copies: through the pass-through path, with
 * duplicates, and on held frames. */
static void t_corrupt_sender_untouched(void **state)
{
	static const char *const specs[] = {
	    "corrupt=1",
	    "corrupt=1,dup=0.5",
	    "corrupt=1,reorder=0.5",
	    "corrupt=0.5,delay=0.5,delay_us=0",
	};
	g_seed = test_seed(0x5eed0006);
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		char spec[96];
		struct rxlog l;
		struct lb *lb;
		rcp_nic *nic;
		struct workload w = {.n = 3000,
		                     .batch = 100,
		                     .ndest = 2,
		                     .maxlen = LB_MTU,
		                     .more = true,
		                     .split = true,
		                     .verify_sender = true,
		                     .seed = g_seed};

		snprintf(spec, sizeof spec, "%s,seed=%llu", specs[i], (unsigned long long)g_seed);
		if (i == 0) {
			/* Small frames: two flips of one bit would cancel out now
			 * and then, and the frame would arrive intact. */
			w.n = 10000;
			w.maxlen = 36;
		}
		nic = wrap_lb(spec, &lb);
		w.lb = lb;
		log_init(&l, w.n, w.maxlen);
		run(nic, &w, &l);
		CHECK(l.bad == 0, "\"%s\": %llu frames garbled beyond 3 bits", spec,
		      (unsigned long long)l.bad);
		CHECK(l.flip_mismatch == 0, "\"%s\": a duplicate differs from its original", spec);
		CHECK(count_ids(&l, 0) == 0, "\"%s\": a frame was lost", spec);
		if (i == 0)
			CHECK(l.corrupted_ids == w.n, "corrupt=1 left %llu frames intact",
			      (unsigned long long)(w.n - l.corrupted_ids));
		CHECK(stats_of(nic).f_corrupted == l.corrupted_ids, "\"%s\": f_corrupted", spec);
		rcp_nic_close(nic);
		log_free(&l);
	}
}

/* Reordering moves frames, never loses or duplicates one; each
 * destination is reordered on its own. */
static void t_reorder_no_loss(void **state)
{
	struct rxlog l;
	struct lb *lb;
	rcp_nic *nic;
	char spec[64];
	struct rcp_nic_stats st;
	struct workload w = {
	    .n = 20000, .batch = 300, .ndest = 3, .maxlen = 200, .more = true, .split = true};

	g_seed = test_seed(0x5eed0007);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "reorder=0.3,seed=%llu", (unsigned long long)g_seed);
	nic = wrap_lb(spec, &lb);
	w.lb = lb;
	log_init(&l, w.n, w.maxlen);
	run(nic, &w, &l);
	st = stats_of(nic);
	CHECK(l.bad == 0 && l.corrupted_ids == 0, "damaged frames");
	CHECK(count_ids(&l, 1) == w.n, "%llu ids lost, %llu duplicated",
	      (unsigned long long)count_ids(&l, 0), (unsigned long long)(l.arrivals - l.distinct));
	CHECK(l.ooo > w.n / 10, "only %llu frames out of order", (unsigned long long)l.ooo);
	CHECK(st.f_reordered == l.ooo, "f_reordered %llu, receiver saw %llu",
	      (unsigned long long)st.f_reordered, (unsigned long long)l.ooo);
	rcp_nic_close(nic);
	log_free(&l);
}

/* RCP_NIC_MORE: frames passed through keep the caller's memory (the
 * backend copies late), the wrapper's own copies are never handed over
 * with MORE, and a send without MORE ends the backend's batch even when
 * the wrapper dropped or held that frame.  run() checks the batch state
 * after every such send and overwrites the caller's buffers. */
static void t_more_semantics(void **state)
{
	static const char *const specs[] = {
	    "drop=0.3",
	    "reorder=0.3,dup=0.2",
	    "corrupt=0.5,dup=0.3",
	    "delay=0.3,delay_us=0,corrupt=0.2",
	    "drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1",
	};
	g_seed = test_seed(0x5eed0008);
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		char spec[96];
		struct rxlog l;
		struct lb *lb;
		rcp_nic *nic;
		struct workload w = {.n = 4000,
		                     .batch = 150,
		                     .ndest = 2,
		                     .maxlen = 300,
		                     .more = true,
		                     .split = true,
		                     .seed = g_seed + i};

		snprintf(spec, sizeof spec, "%s,seed=%llu", specs[i], (unsigned long long)g_seed);
		nic = wrap_lb(spec, &lb);
		w.lb = lb;
		log_init(&l, w.n, w.maxlen);
		run(nic, &w, &l);
		CHECK(l.bad == 0, "\"%s\": %llu frames with foreign or reused content", spec,
		      (unsigned long long)l.bad);
		CHECK(l.flip_mismatch == 0, "\"%s\": a duplicate differs", spec);
		rcp_nic_close(nic);
		log_free(&l);
	}
}

/* Every counter against what the receiver saw, all faults at once. */
static void t_stats_match_receiver(void **state)
{
	struct rxlog l;
	struct lb *lb;
	rcp_nic *nic;
	char spec[128];
	struct rcp_nic_stats st;
	struct workload w = {
	    .n = 20000, .batch = 250, .ndest = 2, .maxlen = 256, .more = true, .split = true};

	g_seed = test_seed(0x5eed0009);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "drop=0.05,dup=0.05,reorder=0.05,corrupt=0.05,seed=%llu",
	         (unsigned long long)g_seed);
	nic = wrap_lb(spec, &lb);
	w.lb = lb;
	log_init(&l, w.n, w.maxlen);
	run(nic, &w, &l);
	st = stats_of(nic);
	CHECK(l.bad == 0 && l.flip_mismatch == 0, "garbled frames");
	CHECK(st.f_dropped == count_ids(&l, 0), "f_dropped %llu, missing %llu",
	      (unsigned long long)st.f_dropped, (unsigned long long)count_ids(&l, 0));
	CHECK(st.f_duplicated == l.arrivals - l.distinct, "f_duplicated %llu, extra %llu",
	      (unsigned long long)st.f_duplicated, (unsigned long long)(l.arrivals - l.distinct));
	CHECK(count_ids(&l, 0) + count_ids(&l, 1) + count_ids(&l, 2) == w.n, "3 copies of a frame");
	CHECK(st.f_corrupted == l.corrupted_ids, "f_corrupted %llu, receiver %llu",
	      (unsigned long long)st.f_corrupted, (unsigned long long)l.corrupted_ids);
	CHECK(st.f_reordered == l.ooo, "f_reordered %llu, receiver %llu",
	      (unsigned long long)st.f_reordered, (unsigned long long)l.ooo);
	CHECK(st.f_delayed == 0, "f_delayed without delay");
	CHECK(st.tx_frames == l.arrivals && st.rx_frames == l.arrivals,
	      "tx %llu rx %llu arrivals %llu", (unsigned long long)st.tx_frames,
	      (unsigned long long)st.rx_frames, (unsigned long long)l.arrivals);
	/* The wrapper's view is the backend's plus the f_* counters. */
	CHECK(st.tx_frames == lb->base.stats.tx_frames && st.tx_bytes == lb->base.stats.tx_bytes &&
	          st.rx_bytes == lb->base.stats.rx_bytes,
	      "backend counters not shown");
	rcp_nic_close(nic);
	log_free(&l);
}

/* Backpressure changes neither which frames are dropped, duplicated or
 * corrupted (a refused send rewinds the generator) nor loses held frames
 * the backend refused. */
static void t_eagain_same_decisions(void **state)
{
	struct rxlog a, b;
	struct rcp_nic_stats sa, sb;
	char spec[128];
	struct lb *lb;
	rcp_nic *nic;
	struct workload w = {
	    .n = 8000, .batch = 200, .ndest = 2, .maxlen = 128, .more = true, .split = true};

	g_seed = test_seed(0x5eed000a);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "drop=0.05,dup=0.1,reorder=0.1,corrupt=0.05,seed=%llu",
	         (unsigned long long)g_seed);

	nic = wrap_lb(spec, &lb);
	log_init(&a, w.n, w.maxlen);
	run(nic, &w, &a);
	sa = stats_of(nic);
	assert_int_equal(lb->eagains, 0);
	rcp_nic_close(nic);

	nic = wrap_lb(spec, &lb);
	lb->limit = 5; /* frames the backend queues before saying EAGAIN */
	log_init(&b, w.n, w.maxlen);
	run(nic, &w, &b);
	sb = stats_of(nic);
	CHECK(lb->eagains > w.n / 10, "only %llu EAGAINs", (unsigned long long)lb->eagains);
	rcp_nic_close(nic);

	CHECK(a.bad == 0 && b.bad == 0, "garbled frames");
	CHECK(!memcmp(a.cnt, b.cnt, w.n), "different frames dropped or duplicated");
	CHECK(!memcmp(a.flips, b.flips, w.n), "different frames corrupted");
	CHECK(sa.f_dropped == sb.f_dropped && sa.f_duplicated == sb.f_duplicated &&
	          sa.f_corrupted == sb.f_corrupted,
	      "counters differ: dropped %llu/%llu dup %llu/%llu corrupt %llu/%llu",
	      (unsigned long long)sa.f_dropped, (unsigned long long)sb.f_dropped,
	      (unsigned long long)sa.f_duplicated, (unsigned long long)sb.f_duplicated,
	      (unsigned long long)sa.f_corrupted, (unsigned long long)sb.f_corrupted);
	CHECK(sb.f_duplicated == b.arrivals - b.distinct, "f_duplicated %llu, extra %llu",
	      (unsigned long long)sb.f_duplicated, (unsigned long long)(b.arrivals - b.distinct));
	log_free(&a);
	log_free(&b);
}

/* ---- delay -------------------------------------------------------------- */

/* Calls recv (the endpoint's only progress) until N distinct ids arrived
 * or DEADLINE passes; no sleeping. */
static void drain_until(rcp_nic *nic, struct rxlog *l, uint64_t n, uint64_t deadline)
{
	while (l->distinct < n && rcpi_now_ns() < deadline)
		drain(nic, l);
}

/* A delayed frame does not arrive before its time, and does arrive by
 * recv alone afterwards. */
static void t_delay_timing(void **state)
{
	const uint64_t delay = 20000000; /* 20 ms */
	unsigned char buf[64];
	struct iovec iov = {buf, 0};
	struct rxlog l;
	uint64_t t0, t1;
	rcp_nic *nic;

	g_seed = test_seed(0x5eed000b);
	nic = wrap_lb("delay=1,delay_us=20000", NULL);
	log_init(&l, 1, sizeof buf);
	iov.iov_len = frame_len(0, sizeof buf);
	build_frame(buf, 0, iov.iov_len);
	t0 = rcpi_now_ns();
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	assert_int_equal(rcp_nic_flush(nic), 0); /* flush does not hurry delays */
	drain(nic, &l);
	t1 = rcpi_now_ns();
	if (t1 - t0 < delay)
		CHECK(l.distinct == 0, "arrived after %llu ns", (unsigned long long)(t1 - t0));
	drain_until(nic, &l, 1, t0 + 5000000000ull);
	t1 = rcpi_now_ns();
	CHECK(l.distinct == 1, "never arrived");
	CHECK(t1 - t0 >= delay, "arrived after %llu ns", (unsigned long long)(t1 - t0));
	CHECK(stats_of(nic).f_delayed == 1, "f_delayed");
	rcp_nic_close(nic);
	log_free(&l);
}

/* Mixed faults with delays: everything arrives, exactly once. */
static void t_delay_all_arrive(void **state)
{
	struct rxlog l;
	rcp_nic *nic;
	char spec[128];
	struct rcp_nic_stats st;
	struct workload w = {
	    .n = 6000, .batch = 200, .ndest = 3, .maxlen = 200, .more = true, .split = true};

	g_seed = test_seed(0x5eed000c);
	w.seed = g_seed;
	snprintf(spec, sizeof spec, "delay=0.2,delay_us=300,reorder=0.1,corrupt=0.05,seed=%llu",
	         (unsigned long long)g_seed);
	nic = wrap_lb(spec, NULL);
	log_init(&l, w.n, w.maxlen);
	run(nic, &w, &l);
	drain_until(nic, &l, w.n, rcpi_now_ns() + 10000000000ull);
	st = stats_of(nic);
	CHECK(l.bad == 0, "garbled frames");
	CHECK(count_ids(&l, 1) == w.n, "%llu frames missing, %llu extra",
	      (unsigned long long)count_ids(&l, 0), (unsigned long long)(l.arrivals - l.distinct));
	CHECK(st.f_delayed > w.n / 20, "only %llu delayed", (unsigned long long)st.f_delayed);
	CHECK(st.f_corrupted == l.corrupted_ids, "f_corrupted");
	CHECK(st.tx_frames == w.n, "tx_frames %llu", (unsigned long long)st.tx_frames);
	rcp_nic_close(nic);
	log_free(&l);
}

/* The pool of held frames is bounded: when it is full, frames go at once
 * without the delay.  The first frames fill it. */
static void t_delay_pool_bound(void **state)
{
	const uint64_t delay = 50000000; /* 50 ms */
	const uint32_t n = 1000;
	unsigned char buf[64];
	struct iovec iov = {buf, 0};
	struct rxlog l;
	uint64_t t0, t1, held = 0, now_arrived;
	rcp_nic *nic;

	g_seed = test_seed(0x5eed000d);
	nic = wrap_lb("delay=1,delay_us=50000", NULL);
	log_init(&l, n, sizeof buf);
	t0 = rcpi_now_ns();
	for (uint32_t id = 0; id < n; id++) {
		iov.iov_len = frame_len(id, sizeof buf);
		build_frame(buf, id, iov.iov_len);
		assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	}
	now_arrived = drain(nic, &l);
	t1 = rcpi_now_ns();
	if (t1 - t0 < delay) {
		held = n - now_arrived;
		CHECK(held >= 16 && held <= 256, "%llu frames held", (unsigned long long)held);
		for (uint32_t id = 0; id < n; id++)
			CHECK(l.cnt[id] == (id >= held), "id %u: the pool is not its first frames",
			      id);
	}
	drain_until(nic, &l, n, t0 + 10000000000ull);
	t1 = rcpi_now_ns();
	CHECK(count_ids(&l, 1) == n, "%llu frames lost", (unsigned long long)count_ids(&l, 0));
	CHECK(t1 - t0 >= delay, "the held frames came early");
	if (held)
		CHECK(stats_of(nic).f_delayed == held, "f_delayed %llu, held %llu",
		      (unsigned long long)stats_of(nic).f_delayed, (unsigned long long)held);
	rcp_nic_close(nic);
	log_free(&l);
}

/* A sender that only waits still emits its delayed frames: arm() refuses
 * to sleep while frames are held, pending() sends them when due. */
static void t_wait_emits_held(void **state)
{
	unsigned char buf[64] = {0};
	struct iovec iov = {buf, sizeof buf};
	struct rcp_nic_frame fr[2];
	struct lb *lb;
	rcp_nic *nic;
	uint64_t t0, deadline;
	int rc;

	g_seed = test_seed(0x5eed000e);
	nic = wrap_lb("delay=1,delay_us=3000", &lb);
	assert_int_equal(rcp_nic_arm(nic), 0); /* nothing held, nothing waiting */

	/* Through arm(): rcp_nic_wait without spinning. */
	t0 = rcpi_now_ns();
	deadline = t0 + 5000000000ull;
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	assert_int_equal(rcp_nic_arm(nic), RCP_EAGAIN); /* held, or already out */
	while (lb->count == 0 && rcpi_now_ns() < deadline) {
		rc = rcp_nic_wait(nic, 1000000000, 0);
		CHECK(rc == 0, "wait: %s", rcp_strerror(rc));
	}
	CHECK(lb->count == 1, "the delayed frame never left");
	CHECK(rcpi_now_ns() - t0 >= 3000000, "left early");
	assert_int_equal(rcp_nic_arm(nic), RCP_EAGAIN); /* now it waits to be received */
	assert_int_equal(rcp_nic_recv(nic, fr, 2), 1);
	rcp_nic_release(nic, fr, 1);
	assert_int_equal(rcp_nic_arm(nic), 0);

	/* Through pending(): rcp_nic_wait's spin phase, which must end as
	 * soon as the frame is out, not when the 2 s of spinning are over. */
	t0 = rcpi_now_ns();
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	rc = rcp_nic_wait(nic, 4000000000, 2000000000);
	CHECK(rc == 0, "wait: %s", rcp_strerror(rc));
	CHECK(lb->count == 1, "the delayed frame never left");
	CHECK(rcpi_now_ns() - t0 >= 3000000, "left early");
	CHECK(rcpi_now_ns() - t0 < 1000000000, "pending() did not send the due frame");
	CHECK(stats_of(nic).f_delayed == 2, "f_delayed");
	rcp_nic_close(nic);
}

/* Held frames are sent, not lost, when their peer is removed or the
 * endpoint closed -- even when not yet due. */
static void t_held_frames_on_remove_and_close(void **state)
{
	unsigned char buf[32] = {1};
	struct iovec iov = {buf, sizeof buf};
	struct rcp_nic_frame fr[1];
	struct lb *lb;
	rcp_nic *nic;
	uint64_t t0;

	g_seed = test_seed(0x5eed000f);
	nic = wrap_lb("reorder=1", &lb);
	/* Nothing follows: flush lets it go. */
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, RCP_NIC_MORE), 0);
	assert_int_equal(lb->count, 0);
	assert_int_equal(rcp_nic_flush(nic), 0);
	assert_int_equal(lb->count, 1);
	assert_int_equal(stats_of(nic).f_reordered, 0); /* nothing overtook it */
	assert_int_equal(rcp_nic_recv(nic, fr, 1), 1);
	rcp_nic_release(nic, fr, 1);
	assert_int_equal(rcp_nic_send(nic, 1, &iov, 1, 0), 0);
	assert_int_equal(rcp_nic_send(nic, 2, &iov, 1, 0), 0);
	assert_int_equal(lb->count, 0); /* both held: nothing follows them */
	assert_int_equal(rcp_nic_peer_remove(nic, 1), 0);
	assert_int_equal(lb->count, 1);
	assert_int_equal(lb->q[lb->head].dst, 1);
	assert_int_equal(lb->removed, 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rcp_nic_send(nic, 3, &iov, 1, RCP_NIC_MORE), 0);
	rcp_nic_close(nic);
	assert_int_equal(g_lb_closed_committed, 6);

	nic = wrap_lb("delay=1,delay_us=10000000,dup=1", &lb);
	for (int i = 0; i < 10; i++)
		assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), 0);
	assert_int_equal(lb->count, 0);
	t0 = rcpi_now_ns();
	rcp_nic_close(nic);
	CHECK(rcpi_now_ns() - t0 < 1000000000, "close waited for the delay");
	assert_int_equal(g_lb_closed_committed, 20);
}

/* ---- through rcp_nic_open ----------------------------------------------- */

static void t_open_udp_with_faults(void **state)
{
	struct rcp_nic_config cfg = {0};
	struct rcp_nic_info info;
	struct rcp_nic_stats st;
	char spec[128], me[RCP_NIC_ADDRSTR_MAX];
	unsigned char buf[256];
	struct rxlog l;
	rcp_nic *nic = NULL;
	const uint32_t n = 2000;
	int peer, rc;

	g_seed = test_seed(0x5eed0010);
	/* The placeholder table has no open(): the dispatcher would call NULL. */
	if (!rcpi_nic_udp_ops.open) {
		print_message("SKIP: udp backend not built yet\n");
		skip();
	}
	snprintf(spec, sizeof spec, "drop=0.1,dup=0.1,reorder=0.2,corrupt=0.1,seed=%llu",
	         (unsigned long long)g_seed);
	cfg.faults = spec;
	rc = rcp_nic_open("udp:", &cfg, &nic);
	if (rc) {
		print_message("SKIP: rcp_nic_open(\"udp:\"): %s\n", rcp_strerror(rc));
		skip();
	}
	assert_int_equal(rcp_nic_query(nic, &info), 0);
	assert_string_equal(info.backend, "faults+udp");
	CHECK(!(info.caps & (RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_CHECKED)),
	      "caps %#x", info.caps);
	assert_int_equal(rcp_nic_addr_str(nic, me, sizeof me), 0);
	rc = rcp_nic_peer_add_str(nic, me, &peer);
	CHECK(rc == 0, "peer_add_str(%s): %s", me, rcp_strerror(rc));

	log_init(&l, n, sizeof buf);
	for (uint32_t id = 0; id < n;) {
		uint64_t deadline;
		for (int i = 0; i < 32 && id < n; i++, id++) {
			struct iovec iov = {buf, frame_len(id, sizeof buf)};
			build_frame(buf, id, iov.iov_len);
			while ((rc = rcp_nic_send(nic, peer, &iov, 1, 0)) == RCP_EAGAIN)
				drain(nic, &l);
			CHECK(rc == 0, "send: %s", rcp_strerror(rc));
		}
		while ((rc = rcp_nic_flush(nic)) == RCP_EAGAIN)
			drain(nic, &l);
		CHECK(rc == 0, "flush: %s", rcp_strerror(rc));
		/* Everything handed to the socket must come back. */
		deadline = rcpi_now_ns() + 5000000000ull;
		while (l.arrivals + l.bad < stats_of(nic).tx_frames && rcpi_now_ns() < deadline) {
			(void)rcp_nic_wait(nic, 10000000, -1);
			drain(nic, &l);
		}
	}
	st = stats_of(nic);
	CHECK(l.bad == 0 && l.flip_mismatch == 0, "garbled frames");
	CHECK(l.arrivals == st.tx_frames, "%llu of %llu frames arrived",
	      (unsigned long long)l.arrivals, (unsigned long long)st.tx_frames);
	CHECK(l.distinct + st.f_dropped == n, "distinct %llu + dropped %llu != %u",
	      (unsigned long long)l.distinct, (unsigned long long)st.f_dropped, n);
	CHECK(l.arrivals - l.distinct == st.f_duplicated, "f_duplicated");
	CHECK(l.corrupted_ids == st.f_corrupted, "f_corrupted");
	CHECK(st.f_dropped && st.f_duplicated && st.f_corrupted, "a fault never fired");
	rcp_nic_close(nic);
	log_free(&l);

	/* A bad spec fails the open (and closes the socket: ASan/valgrind). */
	cfg.faults = "drop=2";
	{
		int saved = rcpi_log_level;
		rcpi_log_level = RCPI_LOG_ERROR;
		rc = rcp_nic_open("udp:", &cfg, &nic);
		rcpi_log_level = saved;
	}
	assert_int_equal(rc, RCP_EINVAL);
	assert_null(nic);

	/* RCP_FAULTS applies when cfg->faults is NULL; "" turns it off. */
	assert_int_equal(setenv("RCP_FAULTS", "drop=0.5", 1), 0);
	cfg.faults = "";
	assert_int_equal(rcp_nic_open("udp:", &cfg, &nic), 0);
	assert_int_equal(rcp_nic_query(nic, &info), 0);
	assert_string_equal(info.backend, "udp");
	rcp_nic_close(nic);
	assert_int_equal(rcp_nic_open("udp:", NULL, &nic), 0);
	assert_int_equal(rcp_nic_query(nic, &info), 0);
	assert_string_equal(info.backend, "faults+udp");
	rcp_nic_close(nic);
	unsetenv("RCP_FAULTS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_parse_valid),
	    cmocka_unit_test(t_parse_invalid),
	    cmocka_unit_test(t_wrap_bad_spec),
	    cmocka_unit_test(t_query_and_forwarding),
	    cmocka_unit_test(t_same_seed_same_pattern),
	    cmocka_unit_test(t_rate_drop),
	    cmocka_unit_test(t_rate_dup),
	    cmocka_unit_test(t_rate_reorder),
	    cmocka_unit_test(t_rate_corrupt),
	    cmocka_unit_test(t_corrupt_sender_untouched),
	    cmocka_unit_test(t_reorder_no_loss),
	    cmocka_unit_test(t_more_semantics),
	    cmocka_unit_test(t_stats_match_receiver),
	    cmocka_unit_test(t_eagain_same_decisions),
	    cmocka_unit_test(t_delay_timing),
	    cmocka_unit_test(t_delay_all_arrive),
	    cmocka_unit_test(t_delay_pool_bound),
	    cmocka_unit_test(t_wait_emits_held),
	    cmocka_unit_test(t_held_frames_on_remove_and_close),
	    cmocka_unit_test(t_open_udp_with_faults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
