/*
 * tests/test_rcp_sim_hostile.c — the protocol core on a simulated network
 * against frames a broken or hostile peer sends (random headers, with and
 * without CRC), replayed frames from a tape, the compact header as seen
 * on the wire, and frames of the previous wire version.
 * Shared helpers: tests/rcp_sim_test.h.
 */
#include "rcp_sim_test.h"

/* Turns the random bytes at F (LEN >= header) into a frame whose header
 * passes the parser's basic checks but whose fields are random: what a
 * broken or hostile peer of the same job could send. */
static void hostile_header(unsigned char *f, size_t len, uint64_t *r)
{
	struct rcpw_hdr h;
	memcpy(&h, f, sizeof h);
	h.magic = RCPW_MAGIC;
	h.version = RCPW_VERSION;
	h.hlen = RCPW_HLEN;
	h.type = (uint8_t)(1 + test_rand(r) % 6);
	h.flags &= RCPW_F_ALL & ~RCPW_F_CRC;
	h.session = 0x52435031u;
	h.len = (uint32_t)(len - sizeof h);
	h.dst_epoch = 0;
	h.src_epoch = 0x1000;
	memcpy(f, &h, sizeof h);
}

/* Garbage in: random bytes, truncations and replays of real frames, and
 * frames with valid headers but hostile fields.  The core must count and
 * drop them and keep working. */
static void t_garbage(void **state)
{
	struct sim *s = pair(test_seed(13), 0, 0, 4096);
	uint64_t r = test_seed(13);
	unsigned char f[4096];
	struct sim_one o[2] = {{0}};
	unsigned char sb[3000], rb[3000];
	struct rcp_ep_stats st;
	(void)state;

	sim_chan(s, 1, 0);
	for (int i = 0; i < 20000; i++) {
		size_t len = test_rand(&r) % sizeof f;
		for (size_t k = 0; k < len; k++)
			f[k] = (unsigned char)test_rand(&r);
		if (i % 2) {
			if (len < sizeof(struct rcpw_hdr))
				len = sizeof(struct rcpw_hdr);
			hostile_header(f, len, &r);
		}
		sim_inject(s, 0, 1, f, len);
	}
	rcpc_core_stats(sim_core(s, 1), &st);
	assert_true(st.bad_frames + st.stale_frames > 0);
	/* The channel still works both ways (CRC on: nothing unchecked got in). */
	test_fill(sb, sizeof sb, 5);
	assert_int_equal(
	    rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 1, rb, sizeof rb, sim_now(s), &o[1].r),
	    0);
	assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 1, sb, sizeof sb, sim_now(s), &o[0].r), 0);
	assert_int_equal(sim_run(s, sim_two_done, o, 10 * SEC), 0);
	assert_int_equal(o[1].st.error, 0);
	assert_memory_equal(rb, sb, sizeof sb);
	sim_free(s);
}

/* Replay: record every real frame of an exchange, then feed them all
 * again — whole, truncated, and in a shuffled order — to the receiver.
 * Nothing may be delivered twice, nothing may crash, and the channel must
 * still carry new messages afterwards. */
struct tape {
	unsigned char *f[4096];
	size_t len[4096];
	int n;
};

static void tape_rec(void *arg, int from, int to, const void *frame, size_t len)
{
	struct tape *t = arg;
	if (from != 0 || to != 1 || t->n == 4096)
		return;
	t->f[t->n] = malloc(len);
	memcpy(t->f[t->n], frame, len);
	t->len[t->n++] = len;
}

static void t_replay(void **state)
{
	struct sim *s = pair(test_seed(15), 0.05, 0, 4096);
	static struct tape t;
	static unsigned char sb[8][20000], rb[8][20000], extra[8];
	struct sim_one o[2] = {{0}};
	uint64_t r = test_seed(15);
	rcp_req *late;
	(void)state;

	t.n = 0;
	sim_set_tap(s, tape_rec, &t);
	for (int i = 0; i < 8; i++) {
		size_t len = i % 2 ? 100 : sizeof sb[i];
		memset(o, 0, sizeof o);
		test_fill(sb[i], len, (uint64_t)i);
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 1, rb[i],
		                            sizeof rb[i], sim_now(s), &o[1].r),
		                 0);
		assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 1, sb[i], len, sim_now(s), &o[0].r),
		                 0);
		assert_int_equal(sim_run(s, sim_two_done, o, 10 * SEC), 0);
		assert_int_equal(o[1].st.error, 0);
		assert_int_equal(test_check(rb[i], len, (uint64_t)i), -1);
	}
	sim_set_tap(s, NULL, NULL);
	assert_true(t.n > 16);
	/* A receive that would catch any message delivered again. */
	assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG, extra,
	                            sizeof extra, sim_now(s), &late),
	                 0);
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < t.n; k++) {
			int i = (int)(test_rand(&r) % (uint64_t)t.n);
			size_t len = t.len[i];
			if (round == 1)
				len = test_rand(&r) % (len + 1); /* truncated */
			sim_inject(s, 0, 1, t.f[i], len);
		}
		rcpc_flush(sim_core(s, 1), sim_now(s));
	}
	{
		struct sim_one w = {.r = late};
		sim_run(s, sim_one_done, &w, SEC / 10);
		assert_int_equal(w.done, 0); /* nothing was delivered twice */
	}
	/* Still works: the late receive takes the next real message. */
	{
		struct sim_one w[2] = {{0}};
		w[1].r = late;
		assert_int_equal(
		    rcpc_isend(sim_chan(s, 0, 1), 2, "abcdefg", 8, sim_now(s), &w[0].r), 0);
		assert_int_equal(sim_run(s, sim_two_done, w, 10 * SEC), 0);
		assert_int_equal(w[1].st.error, 0);
		assert_int_equal(w[1].st.tag, 2);
		assert_memory_equal(extra, "abcdefg", 8);
	}
	for (int k = 0; k < t.n; k++)
		free(t.f[k]);
	sim_free(s);
}

/* Small whole messages go under the 48-byte compact header once the
 * peer has acknowledged a full one (only full headers carry the window):
 * the first 8-byte message of a ping-pong is a 72-byte frame, the rest are
 * 56 bytes, and every one arrives intact both ways. */
static void t_compact_eager(void **state)
{
	struct sim *s = pair(test_seed(16), 0, 0, 4096);
	static struct tape t;
	size_t data[8] = {0};
	int n = 0;
	(void)state;

	t.n = 0;
	sim_set_tap(s, tape_rec, &t);
	for (int i = 0; i < 6; i++) {
		/* Side 0 sends buf[0] into buf[1], side 1 echoes it into buf[2]. */
		char buf[3][8] = {"ping000"};
		buf[0][6] = (char)('0' + i);
		for (int side = 0; side < 2; side++) {
			struct sim_one o[2] = {{0}};
			int to = !side;
			uint64_t tag = 100 * (uint64_t)(side + 1) + (uint64_t)i;
			assert_int_equal(rcpc_irecv(sim_core(s, to), sim_chan(s, to, side),
			                            RCP_ANY_TAG, buf[side + 1], 8, sim_now(s),
			                            &o[1].r),
			                 0);
			assert_int_equal(rcpc_isend(sim_chan(s, side, to), tag, buf[side], 8,
			                            sim_now(s), &o[0].r),
			                 0);
			assert_int_equal(sim_run(s, sim_two_done, o, 10 * SEC), 0);
			assert_int_equal(o[1].st.error, 0);
			assert_int_equal(o[1].st.tag, tag);
			assert_int_equal(o[1].st.len, 8);
			assert_memory_equal(buf[side + 1], buf[0], 8);
		}
	}
	sim_set_tap(s, NULL, NULL);
	for (int k = 0; k < t.n; k++) {
		if (t.len[k] > 3 && t.f[k][3] == RCPW_DATA && n < 8)
			data[n++] = t.len[k];
		free(t.f[k]);
	}
	assert_int_equal(n, 6); /* no loss: each message once */
	assert_int_equal(data[0], RCPW_HLEN + 8);
	for (int i = 1; i < n; i++)
		assert_int_equal(data[i], RCPW_CHLEN + 8);
	sim_free(s);
}

/* A peer of the previous wire version: every real frame of an exchange,
 * both ways (DATA, RTS, READY, FIN, ACK: eager, streamed and RMA
 * messages), sent again with the version byte of session 17
 * (RCPW_VERSION - 1) and its CRC resealed, is counted in bad_frames and
 * changes nothing: no duplicate counted, no message taken by a waiting
 * receive.  The same frames at the current version are taken (as
 * duplicates), so it is the version that refuses. */
struct tape2 {
	struct tape t;
	int from[4096];
};

static void tape2_rec(void *arg, int from, int to, const void *frame, size_t len)
{
	struct tape2 *t = arg;
	(void)to;
	if (t->t.n == 4096)
		return;
	t->t.f[t->t.n] = malloc(len);
	memcpy(t->t.f[t->t.n], frame, len);
	t->from[t->t.n] = from;
	t->t.len[t->t.n++] = len;
}

static void t_old_version(void **state)
{
	struct sim *s = pair(test_seed(17), 0, 1, 4096);
	static struct tape2 t2;
	struct tape *t = &t2.t;
	static unsigned char sb[200000], rb[200000], extra[8];
	struct rcp_ep_stats a[2], b[2];
	rcp_req *late;
	int types = 0, sent[2] = {0};
	(void)state;

	t->n = 0;
	sim_set_tap(s, tape2_rec, &t2);
	for (int i = 0; i < 3; i++) {
		struct sim_one o[2] = {{0}};
		size_t len = i == 0 ? 100 : i == 1 ? 20000 : sizeof sb;
		test_fill(sb, len, (uint64_t)i);
		assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), 1, rb, sizeof rb,
		                            sim_now(s), &o[1].r),
		                 0);
		assert_int_equal(rcpc_isend(sim_chan(s, 0, 1), 1, sb, len, sim_now(s), &o[0].r), 0);
		assert_int_equal(sim_run(s, sim_two_done, o, 10 * SEC), 0);
		assert_int_equal(o[1].st.error, 0);
		assert_int_equal(test_check(rb, len, (uint64_t)i), -1);
	}
	sim_set_tap(s, NULL, NULL);
	for (int k = 0; k < t->n; k++) {
		types |= 1 << t->f[k][3];
		sent[t2.from[k]]++;
	}
	assert_int_equal(types, 1 << RCPW_DATA | 1 << RCPW_RTS | 1 << RCPW_READY | 1 << RCPW_FIN |
	                            1 << RCPW_ACK);
	assert_int_equal(rcpc_irecv(sim_core(s, 1), sim_chan(s, 1, 0), RCP_ANY_TAG, extra,
	                            sizeof extra, sim_now(s), &late),
	                 0);
	for (int ver = RCPW_VERSION - 1; ver <= (int)RCPW_VERSION; ver++) {
		for (int i = 0; i < 2; i++)
			rcpc_core_stats(sim_core(s, i), &a[i]);
		for (int k = 0; k < t->n; k++) {
			unsigned char *f = t->f[k];
			size_t len = t->len[k], hl = f[6];
			assert_true(len >= RCPW_CHLEN && f[2] >= RCPW_VERSION - 1);
			f[2] = (unsigned char)ver;
			if (f[4] & RCPW_F_CRC) {
				uint32_t crc = 0;
				memcpy(f + 40, &crc, 4);
				crc = rcpw_crc32c(rcpw_crc32c(0, f, hl), f + hl, len - hl);
				memcpy(f + 40, &crc, 4); /* little-endian host (wire.h) */
			}
			sim_inject(s, t2.from[k], !t2.from[k], f, len);
		}
		for (int i = 0; i < 2; i++) {
			rcpc_flush(sim_core(s, i), sim_now(s));
			rcpc_core_stats(sim_core(s, i), &b[i]);
			if (ver < (int)RCPW_VERSION) {
				assert_int_equal(b[i].bad_frames - a[i].bad_frames, sent[!i]);
				assert_int_equal(b[i].dup_frames, a[i].dup_frames);
				assert_int_equal(b[i].stale_frames, a[i].stale_frames);
			} else {
				assert_int_equal(b[i].bad_frames, a[i].bad_frames);
				assert_true(b[i].dup_frames > a[i].dup_frames);
			}
		}
	}
	{
		struct sim_one w = {.r = late};
		sim_run(s, sim_one_done, &w, SEC / 10);
		assert_int_equal(w.done, 0);
	}
	for (int k = 0; k < t->n; k++)
		free(t->f[k]);
	sim_free(s);
}

/* Without CRC (a checked link), hostile-but-well-formed frames may be
 * accepted into the sequence space; the core must still never crash. */
static void t_garbage_nocrc(void **state)
{
	struct sim_opts o = {0};
	struct sim *s;
	uint64_t r = test_seed(14);
	unsigned char f[4096];
	(void)state;

	o.n = 2;
	o.seed = r;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 32;
	o.params.crc = 0;
	o.params.flags = 0;
	s = sim_new(&o);
	sim_chan(s, 1, 0);
	for (int i = 0; i < 50000; i++) {
		struct rcpw_hdr h;
		size_t len = sizeof h + test_rand(&r) % 256;
		for (size_t k = 0; k < len; k++)
			f[k] = (unsigned char)test_rand(&r);
		hostile_header(f, len, &r);
		/* Steer it into the sequence and message space. */
		memcpy(&h, f, sizeof h);
		h.seq = 1 + (uint32_t)(test_rand(&r) % 64);
		h.msg = 1 + (uint32_t)(test_rand(&r) % 8);
		if (test_rand(&r) % 2)
			h.arg = test_rand(&r) % 100000;
		if (test_rand(&r) % 4 == 0) {
			/* A compact whole message: its tag is bytes 32..39. */
			h.hlen = RCPW_CHLEN;
			h.type = RCPW_DATA;
			h.flags |= RCPW_F_FIRST | RCPW_F_EAGER;
		}
		memcpy(f, &h, sizeof h);
		sim_inject(s, 0, 1, f, len);
		if (i % 100 == 0) {
			rcpc_flush(sim_core(s, 1), sim_now(s));
			rcpc_timers(sim_core(s, 1), sim_now(s));
		}
	}
	sim_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_garbage),     cmocka_unit_test(t_garbage_nocrc),
	    cmocka_unit_test(t_replay),      cmocka_unit_test(t_compact_eager),
	    cmocka_unit_test(t_old_version),
	};
	return cmocka_run_group_tests_name("rcp core on a simulated network: hostile frames", tests,
	                                   NULL, NULL);
}
