/*
 * tests/test_wire.c — CRC32C: known answers, and the CPU-instruction
 * implementation against the table one on random buffers, alignments,
 * lengths and split points (a frame's CRC is chained over header and
 * payload, so continuation must agree too).
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_crc_known),
	    cmocka_unit_test(t_crc_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
