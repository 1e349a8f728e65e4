/*
 * tests/test_rcp_gather.c — gather sends (rcp_isendv; rcp/start.c, GATHER
 * SENDS) between two endpoints of one process, progressed in turn, over
 * shm and udp, plain and under the faults wrapper (loss, duplicates,
 * reordering): many segment layouts (seeded: empty, 1-byte, straddling a
 * frame's end, many tiny ones, above the rendezvous threshold and RMA's),
 * received byte for byte, each send completing exactly once, receiver
 * first and sender first; frames per stream (one short frame at most per
 * segment boundary); cancel; argument checks.
 * Shared: tests/rcp_test.h.  RCP_TEST_SEED replays a seed.
 */
#include "rcp_test.h"

struct setup {
	const char *transport;
	const char *faults; /* NULL: none */
	int msgs;           /* random layouts sent */
};

static const struct setup setups[] = {
    {"shm", NULL, 120},
    {"udp", NULL, 80},
    {"shm", "drop=0.05,dup=0.02,reorder=0.1,seed=21", 40},
    {"udp", "drop=0.05,dup=0.02,reorder=0.1,seed=22", 40},
};

struct pair {
	rcp_ep *a, *b;
	rcp_chan *ab, *ba;
	size_t pay; /* a frame's payload */
};

static void pair_open(struct pair *p, const struct setup *su, const char *tag)
{
	char an[RCP_NIC_ADDRSTR_MAX], bn[RCP_NIC_ADDRSTR_MAX];
	struct rcp_nic_config nc = {0};
	struct rcp_ep_config ec = {0};
	struct rcp_nic_info info;

	nc.faults = su->faults ? su->faults : "";
	ec.nic = &nc;
	ec.crc = -1;
	if (!strcmp(su->transport, "shm")) {
		snprintf(an, sizeof an, "shm:%s-%d-a", tag, (int)getpid());
		snprintf(bn, sizeof bn, "shm:%s-%d-b", tag, (int)getpid());
	} else {
		snprintf(an, sizeof an, "udp:");
		snprintf(bn, sizeof bn, "udp:");
	}
	assert_int_equal(rcp_ep_open(an, &ec, &p->a), 0);
	assert_int_equal(rcp_ep_open(bn, &ec, &p->b), 0);
	assert_int_equal(rcp_ep_addr(p->a, an, sizeof an), 0);
	assert_int_equal(rcp_ep_addr(p->b, bn, sizeof bn), 0);
	assert_int_equal(rcp_connect(p->a, bn, &p->ab), 0);
	assert_int_equal(rcp_connect(p->b, an, &p->ba), 0);
	assert_int_equal(rcp_nic_query(rcp_ep_nic(p->a), &info), 0);
	p->pay = info.mtu - RCPW_HLEN;
}

static void pair_close(struct pair *p)
{
	rcp_ep_close(p->a);
	rcp_ep_close(p->b);
}

/* A send's completions, counted by its callback. */
struct done {
	int calls, error;
	struct rcp_iov *v; /* its segments: scribbled over once it is done */
	int n;
};

static void send_done(rcp_req *r, const struct rcp_status *st, void *user)
{
	struct done *d = user;
	(void)r;
	d->calls++;
	d->error = st->error;
	/* The send is done: RCP must not read the segments again (a copy it
	 * kept, or the peer has it all). */
	for (int i = 0; i < d->n; i++)
		if (d->v[i].len)
			memset((void *)(uintptr_t)d->v[i].base, 0xA5, d->v[i].len);
}

/* Progresses both ends until COND(ARG) or the watchdog (WAIT_NS: a bound
 * against hangs, never a measurement). */
static int drive(struct pair *p, int (*cond)(void *), void *arg)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0;; i++) {
		if (cond(arg))
			return 1;
		rcp_progress(p->a);
		rcp_progress(p->b);
		if ((i & 1023) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) >
			    WAIT_NS) {
				dump(p->a, "sender");
				dump(p->b, "receiver");
				return 0;
			}
		}
	}
}

struct one {
	struct done *d;
	rcp_req *rr;
	int rdone;
	struct rcp_status rst;
};

static int one_done(void *arg)
{
	struct one *o = arg;
	if (!o->rdone && rcp_test(o->rr, &o->rst) != RCP_EAGAIN)
		o->rdone = 1;
	return o->rdone && o->d->calls;
}

/* Sends the message whose segments have lengths LENS[0..N) over P (a
 * fresh allocation each, filled from a pattern of SEQ), receiver first
 * or not, and checks it arrives byte for byte, once. */
static void send_layout(struct pair *p, const size_t *lens, int n, uint64_t seq, int recv_first,
                        uint64_t seed)
{
	struct rcp_iov *v = calloc((size_t)(n ? n : 1), sizeof *v);
	struct done d = {0, -1, v, n};
	struct one o = {&d, NULL, 0, {0}};
	size_t total = 0, off = 0;
	unsigned char *ref, *in;
	rcp_req *sr;

	for (int i = 0; i < n; i++)
		total += lens[i];
	ref = malloc(total + 1);
	in = malloc(total + 16);
	assert_non_null(v);
	assert_non_null(ref);
	assert_non_null(in);
	test_fill(ref, total, seq);
	memset(in, 0x5A, total + 16);
	for (int i = 0; i < n; i++) {
		unsigned char *s = lens[i] ? malloc(lens[i]) : NULL;
		if (lens[i]) {
			assert_non_null(s);
			memcpy(s, ref + off, lens[i]);
		}
		v[i] = (struct rcp_iov){s, lens[i]};
		off += lens[i];
	}
	if (recv_first)
		assert_int_equal(rcp_irecv(p->b, p->ba, 9, in, total + 16, &o.rr), 0);
	assert_int_equal(rcp_isendv(p->ab, 9, v, n, &sr), 0);
	assert_int_equal(rcp_req_set_cb(sr, send_done, &d), 0);
	if (!recv_first) {
		/* let the start arrive first: unexpected (eager) or an RTS */
		for (int i = 0; i < 50; i++) {
			rcp_progress(p->a);
			rcp_progress(p->b);
		}
		assert_int_equal(rcp_irecv(p->b, p->ba, 9, in, total + 16, &o.rr), 0);
	}
	if (!drive(p, one_done, &o))
		fail_msg("seed %llu: message %llu (%d segments, %zu bytes) not done",
		         (unsigned long long)seed, (unsigned long long)seq, n, total);
	if (d.error || o.rst.error || o.rst.len != total || memcmp(in, ref, total)) {
		size_t k = 0;
		while (k < total && in[k] == ref[k])
			k++;
		print_error(
		    "seed %llu msg %llu: %d segments, %zu bytes, recv_first %d: send %d recv "
		    "%d len %zu, first bad byte %zu\n",
		    (unsigned long long)seed, (unsigned long long)seq, n, total, recv_first,
		    d.error, o.rst.error, o.rst.len, k);
		for (int i = 0; i < n; i++)
			print_error("  seg %d: %zu\n", i, lens[i]);
		fail();
	}
	for (size_t k = total; k < total + 16; k++)
		assert_int_equal(in[k], 0x5A); /* nothing past the message */
	/* exactly once, even after more progress */
	for (int i = 0; i < 20; i++) {
		rcp_progress(p->a);
		rcp_progress(p->b);
	}
	assert_int_equal(d.calls, 1);
	for (int i = 0; i < n; i++)
		free((void *)(uintptr_t)v[i].base);
	free(v);
	free(ref);
	free(in);
}

/* One random segment length at message offset OFF: empty, 1 byte, a few,
 * ending just before/at/after a frame's end, up to a few frames, or
 * (rarely, if BIG) past the RMA threshold. */
static size_t rand_len(uint64_t *rs, size_t off, size_t pay, int big)
{
	size_t end;
	switch (test_rand(rs) % 8) {
	case 0: return 0;
	case 1: return 1;
	case 2: return 1 + test_rand(rs) % 64;
	case 3:
	case 4:
		/* straddle: end at k*pay + {-2..2} of the message */
		end = (off / pay + 1 + test_rand(rs) % 2) * pay;
		end = end + (size_t)(test_rand(rs) % 5) - 2;
		return end > off ? end - off : 1;
	case 5: return 1 + test_rand(rs) % (3 * pay);
	case 6: return 2048 + test_rand(rs) % 3; /* INLINE_CAP and around it */
	default:
		return big && test_rand(rs) % 4 == 0 ? (100u << 10) + test_rand(rs) % (1u << 20)
		                                     : 1 + test_rand(rs) % 512;
	}
}

static void t_layouts(void **state)
{
	const struct setup *su = *state;
	uint64_t seed = test_seed(2200), rs = seed;
	struct pair p;
	size_t lens[40];
	uint64_t seq = 1;

	pair_open(&p, su, "tgl");
	/* fixed layouts first */
	{
		size_t P = p.pay;
		const struct {
			int n;
			size_t l[6];
		} fixed[] = {
		    {3, {0, 0, 1}},
		    {3, {1, 1, 0}},
		    {2, {36, 4 << 20}},
		    {3, {P - 1, 1, P + 1}},
		    {3, {P, P, P}},
		    {2, {P + 1, P - 1}},
		    {4, {2047, 1, 1, 2048}},
		    {4, {2049, 3 * P, 0, 7}},
		    {4, {0, 300 << 10, 0, 0}},
		    {2, {P / 2, P / 2}},
		    {2, {5, P - 5}},
		    {3, {1, 2 * P - 2, 1}},
		    {6, {0, 0, 0, 0, 0, 0}},
		    {2, {P, 1}},
		    {3, {1, P, 1}},
		};
		for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
			send_layout(&p, fixed[k].l, fixed[k].n, seq++, (int)(k & 1), seed);
			send_layout(&p, fixed[k].l, fixed[k].n, seq++, !(k & 1), seed);
		}
		/* many tiny segments, and none */
		for (int i = 0; i < 40; i++)
			lens[i] = i % 3 ? 1 : 0;
		send_layout(&p, lens, 40, seq++, 1, seed);
		send_layout(&p, lens, 40, seq++, 0, seed);
		send_layout(&p, lens, 0, seq++, 1, seed);
	}
	for (int m = 0; m < su->msgs; m++) {
		int n = (int)(test_rand(&rs) % 12) + (m & 1 ? 2 : 1);
		size_t off = 0;
		for (int i = 0; i < n; i++) {
			lens[i] = rand_len(&rs, off, p.pay, !su->faults);
			off += lens[i];
		}
		send_layout(&p, lens, n, seq++, (int)(test_rand(&rs) & 1), seed);
	}
	pair_close(&p);
}

/* Frames: a 3-segment stream goes by frames, never RMA (GATHER SENDS),
 * at most one short frame per segment boundary; a message of one segment
 * of data among empty ones is a plain send (RMA on shm). */
static void t_frames(void **state)
{
	const struct setup *su = *state;
	struct pair p;
	struct rcp_ep_stats s0, s1;
	uint64_t seed = test_seed(2201);
	size_t P, lens[3];
	uint64_t want;
	(void)state;

	pair_open(&p, su, "tgf");
	P = p.pay;
	lens[0] = 36;             /* a header */
	lens[1] = 40 * P + P / 3; /* the data */
	lens[2] = P / 2 + 3000;   /* a tail that is not a frame's multiple */
	rcp_ep_get_stats(p.a, &s0);
	send_layout(&p, lens, 3, 1, 1, seed);
	rcp_ep_get_stats(p.a, &s1);
	{
		struct rcp_ep_stats r;
		rcp_ep_get_stats(p.b, &r);
		assert_int_equal(s1.rma_msgs + r.rma_msgs, s0.rma_msgs); /* b's were 0 */
	}
	/* data frames: ceil(total/P) and one per boundary; acks and control
	 * frames of the sender are the rest (none needed by a READY'd
	 * stream but the nic may carry window updates): bounded by 4 */
	want = (36 + lens[1] + lens[2] + P - 1) / P + 2;
	if (s1.frames_sent - s0.frames_sent - (s1.retransmits - s0.retransmits) > want + 4)
		fail_msg("%llu frames for %llu expected",
		         (unsigned long long)(s1.frames_sent - s0.frames_sent),
		         (unsigned long long)want);
	{
		/* segments that end where frames end: every frame points into
		 * one, none is gathered or short */
		size_t al[3] = {P, 20 * P, 20 * P};
		uint64_t f;
		rcp_ep_get_stats(p.a, &s0);
		send_layout(&p, al, 3, 3, 1, seed);
		rcp_ep_get_stats(p.a, &s1);
		f = (s1.frames_sent - s0.frames_sent) - (s1.acks_sent - s0.acks_sent) -
		    (s1.retransmits - s0.retransmits);
		/* 41 data frames and the one control frame seen on shm and
		 * udp alike (resends and acks not counted) */
		if (f > 42)
			fail_msg("%llu frames for 41 of data", (unsigned long long)f);
	}
	{
		size_t one[3] = {0, 1u << 20, 0};
		struct rcp_ep_stats r0, r1;
		rcp_ep_get_stats(p.a, &s0);
		rcp_ep_get_stats(p.b, &r0);
		send_layout(&p, one, 3, 2, 0, seed);
		rcp_ep_get_stats(p.a, &s1);
		rcp_ep_get_stats(p.b, &r1);
		/* sender first: the receiver pulls it with one get */
		if (!strcmp(su->transport, "shm") && !su->faults)
			assert_int_equal(s1.rma_msgs + r1.rma_msgs, s0.rma_msgs + r0.rma_msgs + 1);
	}
	pair_close(&p);
}

struct many {
	rcp_req **rr;
	int n, left;
	struct rcp_status *st;
	int *got;
};

static int many_done(void *arg)
{
	struct many *m = arg;
	for (int i = 0; i < m->n; i++)
		if (m->rr[i] && !m->got[i] && rcp_test(m->rr[i], &m->st[i]) != RCP_EAGAIN) {
			m->got[i] = 1;
			m->left--;
		}
	return m->left == 0;
}

/* A gather send still queued (no credit: nothing received) is canceled,
 * completes once with RCP_ECANCELED, and the messages around it arrive
 * in order; one whose start went out cannot be (RCP_EBUSY). */
static void t_cancel(void **state)
{
	struct setup su = {"shm", NULL, 0};
	struct pair p;
	enum { N = 400, SEG = 700 };
	static unsigned char seg[N][3][SEG];
	struct rcp_iov v[N][3];
	struct done d[N];
	rcp_req *sr[N], *rr[N];
	struct rcp_status st[N];
	int got[N] = {0}, cancel = N / 2;
	static unsigned char in[N][3 * SEG];
	struct many m = {rr, N - 1, N - 1, st, got};
	(void)state;

	pair_open(&p, &su, "tgc");
	for (int i = 0; i < N; i++) {
		for (int k = 0; k < 3; k++) {
			memset(seg[i][k], (i * 3 + k) & 0xff, SEG);
			v[i][k] = (struct rcp_iov){seg[i][k], k == 1 ? SEG : SEG / 2};
		}
		d[i] = (struct done){0, -1, NULL, 0};
		assert_int_equal(rcp_isendv(p.ab, 5, v[i], 3, &sr[i]), 0);
		assert_int_equal(rcp_req_set_cb(sr[i], send_done, &d[i]), 0);
	}
	for (int i = 0; i < 200; i++) {
		rcp_progress(p.a);
		rcp_progress(p.b);
	}
	/* it waits for a credit (RCP_CREDITS 64: nothing is received yet) */
	assert_int_equal(d[cancel].calls, 0);
	assert_int_equal(rcp_cancel(sr[cancel]), 0);
	for (int i = 0; i < 4; i++)
		rcp_progress(p.a);
	assert_int_equal(d[cancel].calls, 1);
	assert_int_equal(d[cancel].error, RCP_ECANCELED);
	/* a rendezvous one whose RTS is out cannot be canceled */
	{
		size_t big[2] = {p.pay, p.pay + 5};
		rcp_req *b;
		struct done bd = {0, -1, NULL, 0};
		unsigned char *x = calloc(1, 2 * p.pay + 5), *y = calloc(1, 2 * p.pay + 5);
		struct rcp_iov bv[2] = {{x, big[0]}, {x + big[0], big[1]}};
		for (int i = 0; i < N - 1; i++)
			assert_int_equal(rcp_irecv(p.b, p.ba, 5, in[i], sizeof in[i], &rr[i]), 0);
		assert_true(drive(&p, many_done, &m));
		assert_int_equal(rcp_isendv(p.ab, 6, bv, 2, &b), 0);
		assert_int_equal(rcp_req_set_cb(b, send_done, &bd), 0);
		for (int i = 0; i < 50; i++) {
			rcp_progress(p.a);
			rcp_progress(p.b);
		}
		assert_int_equal(rcp_cancel(b), RCP_EBUSY);
		{
			struct one o = {&bd, NULL, 0, {0}};
			assert_int_equal(rcp_irecv(p.b, p.ba, 6, y, 2 * p.pay + 5, &o.rr), 0);
			assert_true(drive(&p, one_done, &o));
			assert_int_equal(o.rst.error, 0);
		}
		assert_int_equal(bd.calls, 1);
		assert_int_equal(bd.error, 0);
		free(x);
		free(y);
	}
	for (int i = 0; i < N - 1; i++) {
		int w = i < cancel ? i : i + 1; /* the message it must hold */
		assert_int_equal(st[i].error, 0);
		assert_int_equal(st[i].len, 2 * SEG);
		for (int k = 0, o = 0; k < 3; o += (int)v[w][k].len, k++)
			for (size_t j = 0; j < v[w][k].len; j++)
				assert_int_equal(in[i][o + (int)j], (w * 3 + k) & 0xff);
		assert_int_equal(d[w].calls, 1);
	}
	assert_int_equal(d[cancel].calls, 1);
	pair_close(&p);
}

static void t_args(void **state)
{
	struct setup su = {"shm", NULL, 0};
	struct pair p;
	char x[8] = "abcdefg", in[8];
	struct rcp_iov v[3] = {{x, 3}, {NULL, 0}, {x + 3, 4}};
	struct rcp_status st;
	rcp_req *r = NULL;
	(void)state;

	pair_open(&p, &su, "tga");
	assert_int_equal(rcp_isendv(NULL, 1, v, 3, &r), RCP_EINVAL);
	assert_int_equal(rcp_isendv(p.ab, 1, v, 3, NULL), RCP_EINVAL);
	assert_int_equal(rcp_isendv(p.ab, RCP_ANY_TAG, v, 3, &r), RCP_EINVAL);
	assert_int_equal(rcp_isendv(p.ab, 1, v, -1, &r), RCP_EINVAL);
	assert_int_equal(rcp_isendv(p.ab, 1, NULL, 2, &r), RCP_EINVAL);
	{
		struct rcp_iov bad[2] = {{x, 1}, {NULL, 1}};
		struct rcp_iov over[3] = {{x, SIZE_MAX / 2}, {x, SIZE_MAX / 2}, {x, 2}};
		struct rcp_iov over1[2] = {{x, SIZE_MAX}, {x, 1}};
		assert_int_equal(rcp_isendv(p.ab, 1, bad, 2, &r), RCP_EINVAL);
		assert_int_equal(rcp_isendv(p.ab, 1, over, 3, &r), RCP_EINVAL);
		assert_int_equal(rcp_isendv(p.ab, 1, over1, 2, &r), RCP_EINVAL);
	}
	/* nothing was sent by those: the next message is the first */
	assert_int_equal(rcp_isendv(p.ab, 1, v, 3, &r), 0);
	assert_int_equal(rcp_wait(r, &st, WAIT_NS), 0);
	assert_int_equal(rcp_isendv(p.ab, 2, NULL, 0, &r), 0); /* empty */
	assert_int_equal(rcp_wait(r, &st, WAIT_NS), 0);
	memset(in, 0, sizeof in);
	assert_int_equal(rcp_recv(p.b, p.ba, RCP_ANY_TAG, in, sizeof in, &st), 0);
	assert_int_equal(st.tag, 1);
	assert_int_equal(st.len, 7);
	assert_memory_equal(in, "abcdefg", 7);
	assert_int_equal(rcp_recv(p.b, p.ba, RCP_ANY_TAG, in, sizeof in, &st), 0);
	assert_int_equal(st.tag, 2);
	assert_int_equal(st.len, 0);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_args),
	    cmocka_unit_test(t_cancel),
	    TEST_ROW("t_layouts_shm", t_layouts, &setups[0]),
	    TEST_ROW("t_layouts_udp", t_layouts, &setups[1]),
	    TEST_ROW("t_layouts_shm_faults", t_layouts, &setups[2]),
	    TEST_ROW("t_layouts_udp_faults", t_layouts, &setups[3]),
	    TEST_ROW("t_frames_shm", t_frames, &setups[0]),
	    TEST_ROW("t_frames_udp", t_frames, &setups[1]),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
