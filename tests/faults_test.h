/*
 * tests/faults_test.h — what the tests of the fault-injecting nic wrapper
 * (nic/faults.c) share: the loopback backend, self-describing frames, the
 * receiver's record and the sender.  Included once per test program
 * (static definitions): test_faults.c (spec parsing, the wrapper's face,
 * rcp_nic_open), test_faults_rates.c (determinism, rates, what must never
 * happen), test_faults_delay.c (delay).
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
 */
#ifndef RCP_TESTS_FAULTS_TEST_H
#define RCP_TESTS_FAULTS_TEST_H

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

static inline void lb_put(struct lb *lb, int peer, const struct iovec *iov, int iovcnt,
                          size_t total)
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

static inline void lb_commit(struct lb *lb)
{
	for (int i = 0; i < lb->npend; i++)
		lb_put(lb, lb->pend[i].peer, lb->pend[i].iov, lb->pend[i].iovcnt,
		       lb->pend[i].total);
	lb->npend = 0;
}

static inline void lb_close(rcp_nic *nic)
{
	struct lb *lb = (struct lb *)nic;
	lb_commit(lb);
	g_lb_closed_committed = lb->committed;
	close(lb->fds[0]);
	close(lb->fds[1]);
	free(lb->q);
	free(lb);
}

static inline void lb_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	info->backend = "loop";
	info->mtu = LB_MTU;
	info->rx_frames = LB_CAP;
	info->caps = RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_CHECKED |
	             RCP_NIC_CAP_SAME_HOST | RCP_NIC_CAP_SHARED_SEG;
}

static inline int lb_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	return snprintf(buf, len, "loop:0") < (int)len ? 0 : RCP_ERANGE;
}

static inline int lb_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	if (*len < 2)
		return RCP_ERANGE;
	((unsigned char *)buf)[0] = 0x7f;
	((unsigned char *)buf)[1] = 0;
	*len = 2;
	return 0;
}

static inline int lb_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	int p = ((const unsigned char *)blob)[1];
	if (p >= LB_PEERS)
		return RCP_EADDR;
	*peer = p;
	return 0;
}

static inline int lb_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	if (strncmp(addr, "loop:", 5) || addr[5] < '0' || addr[5] >= '0' + LB_PEERS || addr[6])
		return RCP_EADDR;
	*peer = addr[5] - '0';
	return 0;
}

static inline int lb_peer_remove(rcp_nic *nic, int peer)
{
	((struct lb *)nic)->removed = peer;
	return 0;
}

static inline int lb_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
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

static inline int lb_flush(rcp_nic *nic)
{
	lb_commit((struct lb *)nic);
	return 0;
}

static inline int lb_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max)
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

static inline void lb_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct lb *lb = (struct lb *)nic;
	unsigned k = (unsigned)n > lb->out ? lb->out : (unsigned)n;
	lb->head = (lb->head + k) % LB_CAP;
	lb->count -= k;
	lb->out -= k;
}

static inline int lb_fd(const rcp_nic *nic)
{
	return ((const struct lb *)nic)->fds[0];
}

static inline int lb_pending(rcp_nic *nic)
{
	struct lb *lb = (struct lb *)nic;
	return lb->count > lb->out;
}

static inline int lb_arm(rcp_nic *nic)
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

static inline struct lb *lb_open(void)
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
static inline rcp_nic *wrap_lb(const char *spec, struct lb **lbp)
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

static inline size_t frame_len(uint32_t id, size_t maxlen)
{
	return HDR + 4 + (id * 2654435761u) % (uint32_t)(maxlen - HDR - 4 + 1);
}

static inline void build_frame(unsigned char *buf, uint32_t id, size_t len)
{
	for (int i = 0; i < ID_COPIES; i++)
		memcpy(buf + 4 * i, &id, 4);
	test_fill(buf + HDR, len - HDR, id);
}

/* Recovers the id by majority over the copies (any 3 flips cannot turn a
 * majority of 7), then counts the bits that differ from the frame it
 * names.  Returns the number of flipped bits, or -1 if the length is not
 * that frame's. */
static inline int frame_flips(const unsigned char *p, size_t len, size_t maxlen, uint32_t *idp)
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

static inline void log_init(struct rxlog *l, uint32_t n, size_t maxlen)
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

static inline void log_free(struct rxlog *l)
{
	free(l->cnt);
	free(l->flips);
	free(l->seq);
}

static inline void log_frame(struct rxlog *l, const struct rcp_nic_frame *fr)
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

static inline unsigned drain(rcp_nic *nic, struct rxlog *l)
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

static inline uint64_t count_ids(const struct rxlog *l, unsigned arrivals)
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

static inline int split_iov(unsigned char *buf, size_t len, struct iovec *iov, uint64_t *s)
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

static inline void flush_all(rcp_nic *nic, struct rxlog *l)
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
static inline void run(rcp_nic *nic, const struct workload *w, struct rxlog *l)
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

/* Wraps a fresh loopback backend with SPEC (W->lb set to it), runs W and
 * logs what arrives in L (initialised here).  Returns the wrapped nic. */
static inline rcp_nic *wrap_run(const char *spec, struct workload *w, struct rxlog *l)
{
	struct lb *lb;
	rcp_nic *nic = wrap_lb(spec, &lb);
	w->lb = lb;
	log_init(l, w->n, w->maxlen);
	run(nic, w, l);
	return nic;
}

static inline struct rcp_nic_stats stats_of(const rcp_nic *nic)
{
	/* Zeroed: once inlined (LTO), gcc sees rcp_nic_get_stats's error path
	 * leave it unwritten, not that the assert ends the test there. */
	struct rcp_nic_stats st = {0};
	assert_int_equal(rcp_nic_get_stats(nic, &st), 0);
	return st;
}

#endif /* RCP_TESTS_FAULTS_TEST_H */
