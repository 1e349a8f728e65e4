/*
 * tests/fuzz_seed.c — writes a seed corpus for one fuzz target.
 *
 *   fuzz_seed TARGET DIR      TARGET: wire core bulk rpc udp shm
 *
 * Seeds are made from the current code rather than committed: frames are
 * recorded from real exchanges on the simulator (tests/sim.c, its tap),
 * so they follow the wire format as it is today and a format change does
 * not leave a corpus of frames the parser refuses at the first byte.  The
 * other seeds are small scripts and encodings built here by hand, each
 * documented next to its target's input format (tests/fuzz_*.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/rpc.h>

#include "rcp/core.h"
#include "rcp/wire.h"
#include "sim.h"

static const char *g_dir;
static int g_count;

/* ---- a growing byte buffer ---- */

struct buf {
	unsigned char *b;
	size_t n, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 256;
		b->b = realloc(b->b, b->cap);
		if (!b->b)
			abort();
	}
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put8(struct buf *b, unsigned v)
{
	unsigned char c = (unsigned char)v;
	put(b, &c, 1);
}

static void put16(struct buf *b, unsigned v)
{
	put8(b, v & 0xff);
	put8(b, v >> 8);
}

static void emit(const char *name, const struct buf *b)
{
	char path[4096];
	FILE *f;
	snprintf(path, sizeof path, "%s/%s-%03d", g_dir, name, g_count++);
	f = fopen(path, "wb");
	if (!f || fwrite(b->b, 1, b->n, f) != b->n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* ---- frames recorded on the simulator ---- */

/* What the tap keeps: the frames core 0 sent core 1. */
struct rec {
	struct buf out;
	int udp; /* udp seeds: dst_epoch cleared, CRC resealed */
};

/* Refills the CRC of FRAME (when it carries one) after an edit. */
static void reseal(unsigned char *f, size_t len)
{
	unsigned hl;
	uint32_t crc;
	if (len < RCPW_CHLEN || !(f[4] & RCPW_F_CRC))
		return;
	hl = f[6] | f[7] << 8;
	if (hl > len)
		return;
	memset(f + 40, 0, 4);
	crc = rcpw_crc32c(rcpw_crc32c(0, f, hl), f + hl, len - hl);
	memcpy(f + 40, &crc, 4);
}

static void tap(void *arg, int from, int to, const void *frame, size_t len)
{
	struct rec *r = arg;
	unsigned char *copy;
	(void)from;
	if (to != 1 || len > 0xffff)
		return;
	copy = malloc(len ? len : 1);
	memcpy(copy, frame, len);
	if (r->udp && len >= 20) {
		/* The udp target's endpoint has a random epoch: a frame for
		 * "whoever is there" (dst_epoch 0) reaches it. */
		memset(copy + 16, 0, 4);
		reseal(copy, len);
	}
	/* Record format of fuzz_wire and fuzz_udp: u8 ctl, u16 len, bytes. */
	put8(&r->out, 0);
	put16(&r->out, (unsigned)len);
	put(&r->out, copy, len);
	free(copy);
}

struct work {
	rcp_req *req[16];
	int n;
};

static int all_done(void *arg)
{
	struct work *w = arg;
	for (int i = 0; i < w->n; i++)
		if (w->req[i]) {
			struct rcp_status st;
			if (!rcpc_req_done(w->req[i], &st))
				return 0;
			w->req[i] = NULL;
		}
	return 1;
}

/* One exchange: core 1 posts what fuzz_wire's core posts, core 0 sends
 * messages of SIZES; the frames core 1 receives become one seed. */
static void record(const char *name, int udp, double drop, int rma, const size_t *sizes, int n)
{
	static unsigned char sbuf[3][200000], rbuf[8][200000];
	struct sim_opts o = {0};
	struct rec r = {{0}, udp};
	struct work w = {{0}, 0};
	struct sim *s;

	o.n = 2;
	o.seed = 42;
	o.link.latency = 10000;
	o.link.drop = drop;
	o.rma = rma;
	rcpc_params_default(&o.params);
	o.params.mtu = 4096;
	o.params.rx_frames = 16;
	o.params.crc = udp; /* the endpoint checks CRCs by default */
	s = sim_new(&o);
	sim_set_tap(s, tap, &r);
	for (int i = 0; i < n && i < 8; i++)
		rcpc_irecv(sim_core(s, 1), NULL, RCP_ANY_TAG, rbuf[i], sizeof rbuf[i], sim_now(s),
		           &w.req[w.n++]);
	for (int i = 0; i < n && i < 8; i++)
		rcpc_isend(sim_chan(s, 0, 1), (uint64_t)(i % 3), sbuf[i % 3], sizes[i], sim_now(s),
		           &w.req[w.n++]);
	/* Core 1 talks back, so acks and its own traffic are in the record. */
	rcpc_isend(sim_chan(s, 1, 0), 1, sbuf[0], 10, sim_now(s), &w.req[w.n++]);
	if (sim_run(s, all_done, &w, 1000000000ull))
		fprintf(stderr, "fuzz_seed: %s did not complete (recorded anyway)\n", name);
	sim_free(s);
	emit(name, &r.out);
	free(r.out.b);
}

static void seeds_frames(int udp)
{
	static const size_t small[] = {0, 8, 100};
	static const size_t multi[] = {5000, 3000};
	static const size_t large[] = {70000, 150000};
	static const size_t mixed[] = {8, 70000, 2000, 9000};
	for (int rma = 0; rma < 2; rma++) {
		record("small", udp, 0, rma, small, 3);
		record("multi", udp, 0, rma, multi, 2);
		record("large", udp, 0, rma, large, 2);
		record("lossy", udp, 0.1, rma, mixed, 4);
	}
}

/* ---- fuzz_core scripts (op numbers: tests/fuzz_core.c, op()) ---- */

enum {
	C_DELIVER = 0,
	C_ALL = 3,
	C_DROP = 4,
	C_ADV = 6,
	C_DEADLINE = 7,
	C_SEND = 8,
	C_SSEND = 9,
	C_MCAST = 10,
	C_RECV = 11,
	C_CANCEL = 12,
	C_PROBE = 13,
	C_CLOSE = 14,
	C_RESTART = 15,
	C_REAP = 16
};

static void seeds_core(void)
{
	/* cfg bits: 1 crc, 2 rma, 4 no split, 8 small window, 16 reliable,
	 * 32 B accepts, 64-128 mtu. */
	static const unsigned cfgs[] = {0x00, 0x02, 0x23, 0x06, 0x8a, 0x52, 0xc2, 0x12};
	for (unsigned c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
		for (unsigned sz = 0; sz < 16; sz += (c & 1) ? 1 : 3) {
			struct buf b = {0};
			put8(&b, cfgs[c]);
			put8(&b, C_RECV), put8(&b, 1 | 1 << 1), put8(&b, 13); /* B: tag 1 */
			put8(&b, C_SEND), put8(&b, 0 | 1 << 1), put8(&b, sz); /* A: tag 1 */
			put8(&b, C_SSEND), put8(&b, 1 | 2 << 1), put8(&b, sz % 7);
			put8(&b, C_RECV), put8(&b, 0 | 8), put8(&b, 13);
			put8(&b, C_ALL), put8(&b, 7);
			put8(&b, C_DROP), put8(&b, 1);
			put8(&b, C_ADV), put8(&b, 0x55);
			put8(&b, C_ALL), put8(&b, 7);
			put8(&b, C_MCAST), put8(&b, 0x80 | 1 << 1), put8(&b, sz / 2);
			put8(&b, C_PROBE), put8(&b, 1 | 4);
			put8(&b, C_RECV), put8(&b, 1 | 8 | 16), put8(&b, 13);
			put8(&b, C_DELIVER), put8(&b, 1);
			put8(&b, C_DEADLINE);
			put8(&b, C_ALL), put8(&b, 7);
			put8(&b, C_REAP);
			if (sz & 1) {
				put8(&b, C_SEND), put8(&b, 0), put8(&b, 12);
				put8(&b, C_CANCEL), put8(&b, 0);
				put8(&b, C_CLOSE), put8(&b, c & 1);
			}
			if (sz & 2) {
				put8(&b, C_RESTART), put8(&b, 1);
				put8(&b, C_SEND), put8(&b, 0), put8(&b, 2);
				put8(&b, C_ALL), put8(&b, 7);
			}
			emit("script", &b);
			free(b.b);
		}
}

/* ---- bulk handles (layout: bulk/handle.c) ---- */

static void handle(struct buf *b, unsigned perm, uint32_t nseg, uint32_t rkeylen,
                   const uint64_t *lens)
{
	uint32_t magic = 0x42504352u;
	uint64_t key = 0x1234567890abcdefull, size = 0;
	for (uint32_t i = 0; i < nseg; i++)
		size += lens[i];
	put(b, &magic, 4);
	put8(b, 1);
	put8(b, perm);
	put8(b, rkeylen ? 1 : 0);
	put8(b, 0);
	put(b, &nseg, 4);
	put(b, &rkeylen, 4);
	put(b, &key, 8);
	put(b, &size, 8);
	put(b, lens, 8 * (size_t)nseg);
	for (uint32_t i = 0; i < nseg * rkeylen; i++)
		put8(b, i);
}

static void seeds_bulk(void)
{
	static const uint64_t lens[4] = {4096, 0, 100, 1u << 20};
	for (unsigned perm = 1; perm <= 3; perm++)
		for (uint32_t nseg = 1; nseg <= 4; nseg++) {
			struct buf b = {0};
			put16(&b,
			      (unsigned)(nseg * 1000 + perm)); /* offset probe, see fuzz_bulk.c */
			handle(&b, perm, nseg, nseg == 3 ? 0 : 40, lens);
			emit("handle", &b);
			free(b.b);
		}
}

/* ---- rpc procs (schema: tests/fuzz_rpc.c) ---- */

static void seeds_rpc(void)
{
	static const uint64_t lens[2] = {4096, 8};
	const char *str = "hello";
	uint32_t n = 5, none = 0xffffffffu;
	uint64_t v64 = 7;
	double d = 1.5;
	struct buf b = {0}, h = {0};

	/* u8 u16 u32 u64 double string bytes struct{u32 string} */
	put8(&b, 9);
	put8(&b, 0), put8(&b, 1), put8(&b, 2), put8(&b, 3), put8(&b, 5), put8(&b, 6), put8(&b, 7),
	    put8(&b, 9), put8(&b, 2);
	put8(&b, 1), put16(&b, 2), put(&b, &n, 4), put(&b, &v64, 8), put(&b, &d, 8);
	put(&b, &n, 4), put(&b, str, 6);
	put(&b, &n, 4), put(&b, str, 5);
	put(&b, &n, 4);
	emit("proc", &b);
	b.n = 0;
	/* string NULL, bulk */
	put8(&b, 2), put8(&b, 6), put8(&b, 8);
	put(&b, &none, 4);
	handle(&h, 3, 2, 40, lens);
	n = (uint32_t)h.n;
	put(&b, &n, 4);
	put(&b, h.b, h.n);
	emit("proc", &b);
	free(b.b);
	free(h.b);
}

/* ---- shm ring records (tests/fuzz_shm.c) ---- */

static void seeds_shm(void)
{
	struct buf b = {0};
	for (int k = 0; k < 4; k++) {
		uint32_t start = k == 3 ? 250 : (uint32_t)k * 100; /* 256-cell ring: 3 wraps */
		b.n = 0;
		put8(&b, (unsigned)k << 1);
		put(&b, &start, 4);
		for (int i = 0; i < 4 + 8 * k; i++) {
			uint32_t len = (uint32_t)(i * 37 % 300) + (k == 2 ? 3000 : 56);
			put8(&b, i % 4 == 3 ? 8 : 0); /* bit 3: receive after it */
			put(&b, &len, 4);
			for (uint32_t j = 0; j < len; j++)
				put8(&b, j);
			if (i % 4 == 3)
				put8(&b, 15);
		}
		emit("ring", &b);
	}
	free(b.b);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz_seed wire|core|bulk|rpc|udp|shm DIR\n");
		return 2;
	}
	g_dir = argv[2];
	if (!strcmp(argv[1], "wire"))
		seeds_frames(0);
	else if (!strcmp(argv[1], "udp"))
		seeds_frames(1);
	else if (!strcmp(argv[1], "core"))
		seeds_core();
	else if (!strcmp(argv[1], "bulk"))
		seeds_bulk();
	else if (!strcmp(argv[1], "rpc"))
		seeds_rpc();
	else if (!strcmp(argv[1], "shm"))
		seeds_shm();
	else {
		fprintf(stderr, "fuzz_seed: unknown target %s\n", argv[1]);
		return 2;
	}
	return 0;
}
