/*
 * tests/test_wire.c — CRC32C: known answers, and the CPU-instruction
 * implementation against the table one on random buffers, alignments,
 * lengths and split points (a frame's CRC is chained over header and
 * payload, so continuation must agree too); and the parser on the
 * compact header of a whole small message, built here byte by byte from
 * the layout in rcp/wire.h; exact frame lengths (no trailing bytes,
 * no truncation) for every frame type; and the version byte (only
 * RCPW_VERSION parses).
 */
#include "testutil.h"

#include "rcp/wire.h"

struct kat {
	unsigned char buf[32];
	size_t len;
	uint32_t crc;
};

/* RFC 3720 B.4 test vectors, and the usual check value. */
static void t_crc_known(void **state)
{
	static struct kat k[5];
	(void)state;
	memcpy(k[0].buf, "123456789", 9);
	k[0].len = 9;
	k[0].crc = 0xe3069283u;
	k[1].len = 32; /* zeros */
	k[1].crc = 0x8a9136aau;
	memset(k[2].buf, 0xff, 32);
	k[2].len = 32;
	k[2].crc = 0x62a8ab43u;
	for (int i = 0; i < 32; i++) {
		k[3].buf[i] = (unsigned char)i;
		k[4].buf[i] = (unsigned char)(31 - i);
	}
	k[3].len = k[4].len = 32;
	k[3].crc = 0x46dd794eu;
	k[4].crc = 0x113fdb5cu;
	for (int i = 0; i < 5; i++) {
		assert_int_equal(rcpw_crc32c(0, k[i].buf, k[i].len), k[i].crc);
		assert_int_equal(rcpw_crc32c_portable(0, k[i].buf, k[i].len), k[i].crc);
	}
	assert_int_equal(rcpw_crc32c(0, "", 0), 0);
	assert_int_equal(rcpw_crc32c(0x12345678u, "", 0), 0x12345678u);
}

static void t_crc_agree(void **state)
{
	uint64_t seed = test_seed(0xc5c32cull), s = seed;
	enum { MAX = 9000 };
	unsigned char *buf = malloc(MAX + 8);
	(void)state;
	assert_non_null(buf);
	printf("crc32c: %s\n", rcpw_crc32c_hw() ? "CPU instruction (checked against the tables)"
	                                        : "tables only on this CPU");
	for (size_t i = 0; i < MAX + 8; i++)
		buf[i] = (unsigned char)test_rand(&s);
	for (int it = 0; it < 3000; it++) {
		size_t off = (size_t)(test_rand(&s) % 8);
		size_t len = it < 64 ? (size_t)it : (size_t)(test_rand(&s) % MAX);
		size_t cut = len ? (size_t)(test_rand(&s) % (len + 1)) : 0;
		uint32_t init = it & 1 ? (uint32_t)test_rand(&s) : 0;
		const unsigned char *p = buf + off;
		uint32_t a = rcpw_crc32c(init, p, len);
		uint32_t b = rcpw_crc32c_portable(init, p, len);
		uint32_t c = rcpw_crc32c(rcpw_crc32c(init, p, cut), p + cut, len - cut);
		if (a != b || a != c) {
			print_error(
			    "crc mismatch: off %zu len %zu cut %zu: %#x %#x %#x (seed %#llx)\n",
			    off, len, cut, a, b, c, (unsigned long long)seed);
			free(buf);
			fail();
		}
	}
	free(buf);
}

static void put(unsigned char *f, size_t off, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		f[off + (size_t)i] = (unsigned char)(v >> (8 * i));
}

/* A compact frame: 48-byte header, then PLEN payload bytes "abc...". */
static size_t compact(unsigned char *f, uint8_t type, uint16_t flags, size_t plen, int crc)
{
	memset(f, 0, 48);
	put(f, 0, RCPW_MAGIC, 2);
	put(f, 2, RCPW_VERSION, 1);
	put(f, 3, type, 1);
	put(f, 4, flags | (crc ? RCPW_F_CRC : 0), 2);
	put(f, 6, RCPW_CHLEN, 2);
	put(f, 8, 0x52435031u, 4);            /* session */
	put(f, 12, 0x1111, 4);                /* src_epoch */
	put(f, 16, 0x2222, 4);                /* dst_epoch */
	put(f, 20, 7, 4);                     /* seq */
	put(f, 24, 5, 4);                     /* ack */
	put(f, 28, 3, 4);                     /* credits */
	put(f, 32, 0x0123456789abcdefull, 8); /* tag */
	put(f, 44, 9, 4);                     /* msg */
	for (size_t i = 0; i < plen; i++)
		f[48 + i] = (unsigned char)('a' + i);
	if (crc)
		put(f, 40, rcpw_crc32c(0, f, 48 + plen), 4);
	return 48 + plen;
}

static void t_compact(void **state)
{
	const uint16_t whole = RCPW_F_FIRST | RCPW_F_EAGER;
	unsigned char f[128];
	struct rcpw_hdr h;
	const unsigned char *pl;
	size_t n;
	(void)state;

	for (int crc = 0; crc < 2; crc++) {
		for (size_t plen = 0; plen <= 16; plen += 8) {
			n = compact(f, RCPW_DATA, whole | RCPW_F_ACKREQ, plen, crc);
			assert_int_equal(rcpw_parse(f, n, 0x52435031u, crc, &h, &pl), RCPW_OK);
			assert_int_equal(h.type, RCPW_DATA);
			assert_int_equal(h.flags & ~RCPW_F_CRC, whole | RCPW_F_ACKREQ);
			assert_int_equal(h.src_epoch, 0x1111);
			assert_int_equal(h.dst_epoch, 0x2222);
			assert_int_equal(h.seq, 7);
			assert_int_equal(h.ack, 5);
			assert_int_equal(h.credits, 3);
			assert_int_equal(h.wnd, 0); /* none: no update */
			assert_int_equal(h.msg, 9);
			assert_true(h.tag == 0x0123456789abcdefull);
			assert_int_equal(h.len, plen);
			assert_int_equal(h.arg, plen);
			assert_ptr_equal(pl, f + 48);
		}
	}
	/* A flipped payload bit with the CRC on. */
	n = compact(f, RCPW_DATA, whole, 8, 1);
	f[50] ^= 4;
	assert_int_equal(rcpw_parse(f, n, 0x52435031u, 0, &h, &pl), RCPW_BAD_CRC);
	/* Only a whole DATA message may be compact. */
	n = compact(f, RCPW_RTS, whole, 0, 0);
	assert_int_equal(rcpw_parse(f, n, 0x52435031u, 0, &h, &pl), RCPW_BAD_FIELDS);
	n = compact(f, RCPW_DATA, RCPW_F_FIRST, 8, 0);
	assert_int_equal(rcpw_parse(f, n, 0x52435031u, 0, &h, &pl), RCPW_BAD_FIELDS);
	/* Any other header length, a short frame, another session. */
	n = compact(f, RCPW_DATA, whole, 8, 0);
	put(f, 6, 56, 2);
	assert_int_equal(rcpw_parse(f, n, 0x52435031u, 0, &h, &pl), RCPW_BAD_MAGIC);
	n = compact(f, RCPW_DATA, whole, 8, 0);
	assert_int_equal(rcpw_parse(f, 47, 0x52435031u, 0, &h, &pl), RCPW_BAD_SHORT);
	assert_int_equal(rcpw_parse(f, n, 0x52435032u, 0, &h, &pl), RCPW_BAD_SESSION);
	/* A full header claiming 64 bytes in a 48-byte frame. */
	put(f, 6, RCPW_HLEN, 2);
	assert_int_equal(rcpw_parse(f, 48, 0x52435031u, 0, &h, &pl), RCPW_BAD_SHORT);
}

/* A full-header frame: TYPE, FLAGS, ARG, then PLEN payload bytes; the
 * header's len says PLEN. */
static size_t full(unsigned char *f, uint8_t type, uint16_t flags, uint64_t arg, size_t plen,
                   int crc)
{
	memset(f, 0, RCPW_HLEN);
	put(f, 0, RCPW_MAGIC, 2);
	put(f, 2, RCPW_VERSION, 1);
	put(f, 3, type, 1);
	put(f, 4, flags | (crc ? RCPW_F_CRC : 0), 2);
	put(f, 6, RCPW_HLEN, 2);
	put(f, 8, 0x52435031u, 4);
	put(f, 12, 0x1111, 4);
	put(f, 16, 0x2222, 4);
	put(f, 20, 7, 4);
	put(f, 24, 5, 4);
	put(f, 32, 64, 4); /* wnd */
	put(f, 36, plen, 4);
	put(f, 44, 9, 4);
	put(f, 56, arg, 8);
	for (size_t i = 0; i < plen; i++)
		f[RCPW_HLEN + i] = (unsigned char)(0x40 + i);
	if (crc)
		put(f, 40, rcpw_crc32c(0, f, RCPW_HLEN + plen), 4);
	return RCPW_HLEN + plen;
}

/* The frame's length must be exactly header + len: a frame with bytes
 * after its payload (a datagram padded or glued to another) and a
 * truncated one are refused, for every frame type, CRC or not, and no
 * prefix of a valid frame parses.  A compact frame has no len field (its
 * length is the datagram's), so a trailing byte becomes payload: the CRC
 * catches it when on, and without CRC it is a longer message, which is why
 * the compact header is used only where the nic delivers whole frames. */
static void t_exact_length(void **state)
{
	static const struct {
		uint8_t type;
		uint16_t flags;
		uint64_t arg;
		size_t plen;
	} k[] = {
	    {RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, 8, 8},
	    {RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, 0, 0},
	    {RCPW_DATA, RCPW_F_FIRST, 5000, 24},
	    {RCPW_DATA, 0, 4096, 16},
	    {RCPW_ACK, 0, 0, 0},
	    {RCPW_ACK, 0, 0, 16},
	    {RCPW_PING, 0, 0, 0},
	    {RCPW_RTS, 0, 100000, 0},
	    {RCPW_RTS, RCPW_F_RMA, 100000, 24},
	    {RCPW_READY, RCPW_F_ANYTAG, 100000, 0},
	    {RCPW_FIN, 0, 100000, 0},
	    {RCPW_FIN, RCPW_F_FIRST | RCPW_F_SPLIT, 100000, 24},
	};
	unsigned char f[RCPW_HLEN + 64], g[RCPW_HLEN + 64];
	struct rcpw_hdr h;
	const unsigned char *pl;
	(void)state;

	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		for (int crc = 0; crc < 2; crc++) {
			size_t n = full(f, k[i].type, k[i].flags, k[i].arg, k[i].plen, crc);
			if (rcpw_parse(f, n, 0x52435031u, crc, &h, &pl) != RCPW_OK)
				fail_msg("case %zu crc %d: a valid frame refused", i, crc);
			assert_int_equal(h.len, k[i].plen);
			assert_ptr_equal(pl, f + RCPW_HLEN);
			/* One trailing byte, and eight, whatever their value. */
			for (size_t extra = 1; extra <= 8; extra += 7) {
				memset(f + n, 0, extra);
				assert_int_equal(rcpw_parse(f, n + extra, 0x52435031u, 0, &h, &pl),
				                 RCPW_BAD_LEN);
			}
			/* Every truncation: short header, then a short payload. */
			for (size_t cut = 0; cut < n; cut++) {
				enum rcpw_verdict v = rcpw_parse(f, cut, 0x52435031u, 0, &h, &pl);
				enum rcpw_verdict want =
				    cut < RCPW_HLEN ? RCPW_BAD_SHORT : RCPW_BAD_LEN;
				if (v != want)
					fail_msg(
					    "case %zu crc %d: %zu of %zu bytes gave %d, want %d", i,
					    crc, cut, n, (int)v, (int)want);
			}
			/* The len field one more or one less than the payload. */
			memcpy(g, f, n);
			put(g, 36, k[i].plen + 1, 4);
			assert_int_equal(rcpw_parse(g, n, 0x52435031u, 0, &h, &pl), RCPW_BAD_LEN);
			if (k[i].plen) {
				put(g, 36, k[i].plen - 1, 4);
				assert_int_equal(rcpw_parse(g, n, 0x52435031u, 0, &h, &pl),
				                 RCPW_BAD_LEN);
			}
		}
	}
	/* Compact: a trailing byte is payload; with the CRC on it is caught. */
	{
		size_t n = compact(f, RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, 8, 1);
		f[n] = 'x';
		assert_int_equal(rcpw_parse(f, n + 1, 0x52435031u, 1, &h, &pl), RCPW_BAD_CRC);
		assert_int_equal(rcpw_parse(f, n - 1, 0x52435031u, 1, &h, &pl), RCPW_BAD_CRC);
		n = compact(f, RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, 8, 0);
		assert_int_equal(rcpw_parse(f, n + 1, 0x52435031u, 0, &h, &pl), RCPW_OK);
		assert_int_equal(h.len, 9);
	}
}

/* Only RCPW_VERSION parses: a frame of any other version byte is
 * BAD_MAGIC, under the full and the compact header, with a valid CRC or
 * none.  In particular version 3 (session 17), whose READY and FIN SPLIT
 * never carried STREAM (rcp/wire.h: why the version went to 4). */
static void t_version(void **state)
{
	static const struct {
		uint8_t type;
		uint16_t flags;
		size_t plen;
	} k[] = {
	    {RCPW_READY, RCPW_F_STREAM, 0},
	    {RCPW_FIN, RCPW_F_SPLIT | RCPW_F_STREAM, 0},
	    {RCPW_DATA, RCPW_F_FIRST, 24},
	    {RCPW_ACK, 0, 16},
	};
	unsigned char f[RCPW_HLEN + 64];
	struct rcpw_hdr h;
	const unsigned char *pl;
	(void)state;

	assert_int_equal(RCPW_VERSION, 4);
	for (size_t i = 0; i <= sizeof k / sizeof k[0]; i++) {
		for (int crc = 0; crc < 2; crc++) {
			for (unsigned ver = 0; ver < 256; ver++) {
				/* the last case: a compact whole message */
				size_t n = i < sizeof k / sizeof k[0]
				               ? full(f, k[i].type, k[i].flags, 100, k[i].plen, crc)
				               : compact(f, RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER,
				                         8, crc);
				size_t hl = f[6];
				enum rcpw_verdict v,
				    want = ver == RCPW_VERSION ? RCPW_OK : RCPW_BAD_MAGIC;
				put(f, 2, ver, 1);
				if (crc) { /* resealed: the version, not the CRC, decides */
					put(f, 40, 0, 4);
					put(f, 40,
					    rcpw_crc32c(rcpw_crc32c(0, f, hl), f + hl, n - hl), 4);
				}
				v = rcpw_parse(f, n, 0x52435031u, crc, &h, &pl);
				if (v != want)
					fail_msg("case %zu crc %d: version %u gave %d, want %d", i,
					         crc, ver, (int)v, (int)want);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_crc_known), cmocka_unit_test(t_crc_agree),
	    cmocka_unit_test(t_compact),   cmocka_unit_test(t_exact_length),
	    cmocka_unit_test(t_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
