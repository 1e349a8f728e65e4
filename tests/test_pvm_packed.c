/*
 * tests/test_pvm_packed.c — a packed PVM message's bytes on an RCP channel
 * (pvm-glue/packed.c): big-endian header and fragment lengths whatever
 * the host, and the receiver's checks of hostile bytes.  No pvmd: the
 * functions are pure.
 */
#include <arpa/inet.h>
#include <pvm3.h>

#include "testutil.h"

#include "pvm-glue/packed.h"

/* A native-order message: header {len, 1..7}, then NF fragments of the
 * sizes in FR; returns its length in B (CAP bytes). */
static size_t build(unsigned char *b, size_t cap, const int *fr, int nf)
{
	int32_t hdr[PR_PK_HDR] = {0, 11, 12, 13, 14, 15, 16, 17};
	size_t off = sizeof hdr;
	for (int i = 0; i < nf; i++)
		hdr[0] += fr[i];
	memcpy(b, hdr, sizeof hdr);
	for (int i = 0; i < nf; i++) {
		int32_t l = fr[i];
		assert_true(off + 4 + (size_t)l <= cap);
		memcpy(b + off, &l, 4);
		test_fill(b + off + 4, (size_t)l, (uint64_t)i);
		off += 4 + (size_t)l;
	}
	return off;
}

static uint32_t be_at(const unsigned char *b, size_t off)
{
	uint32_t v;
	memcpy(&v, b + off, 4);
	return ntohl(v);
}

/* To the wire: every header int and fragment length big-endian, the data
 * untouched; and back: the native bytes again. */
static void t_byte_order(void **state)
{
	static unsigned char b[4096], orig[4096];
	static const int fr[] = {5, 0, 1000, 3};
	size_t n = build(b, sizeof b, fr, 4), off = 4 * PR_PK_HDR;
	(void)state;
	memcpy(orig, b, n);
	assert_int_equal(pvmrcpi_pk_to_wire(b, n), 0);
	assert_int_equal(be_at(b, 0), 1008);
	for (int i = 1; i < PR_PK_HDR; i++)
		assert_int_equal(be_at(b, 4 * (size_t)i), 10 + i);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(be_at(b, off), fr[i]);
		assert_int_equal(test_check(b + off + 4, (size_t)fr[i], (uint64_t)i), -1);
		off += 4 + (size_t)fr[i];
	}
	assert_int_equal(pvmrcpi_pk_from_wire(b, n), 0);
	assert_memory_equal(b, orig, n);
}

/* Empty message: the header alone. */
static void t_empty(void **state)
{
	unsigned char b[64];
	size_t n = build(b, sizeof b, NULL, 0);
	(void)state;
	assert_int_equal(n, 4 * PR_PK_HDR);
	assert_int_equal(pvmrcpi_pk_to_wire(b, n), 0);
	assert_int_equal(pvmrcpi_pk_from_wire(b, n), 0);
}

/* Each malformed case from the wire is refused. */
static void t_hostile(void **state)
{
	static unsigned char b[256];
	static const int fr[] = {8, 8};
	size_t n;
	uint32_t v;
	(void)state;
	/* too short for the header */
	n = build(b, sizeof b, fr, 2);
	assert_int_equal(pvmrcpi_pk_to_wire(b, n), 0);
	assert_int_equal(pvmrcpi_pk_from_wire(b, 4 * PR_PK_HDR - 1), PvmBadMsg);
	/* negative total */
	build(b, sizeof b, fr, 2);
	pvmrcpi_pk_to_wire(b, n);
	v = htonl(0x80000000u);
	memcpy(b, &v, 4);
	assert_int_equal(pvmrcpi_pk_from_wire(b, n), PvmBadMsg);
	/* a fragment longer than the total */
	build(b, sizeof b, fr, 2);
	pvmrcpi_pk_to_wire(b, n);
	v = htonl(17);
	memcpy(b + 4 * PR_PK_HDR, &v, 4);
	assert_int_equal(pvmrcpi_pk_from_wire(b, n), PvmBadMsg);
	/* a negative fragment */
	build(b, sizeof b, fr, 2);
	pvmrcpi_pk_to_wire(b, n);
	v = htonl(0xfffffff8u);
	memcpy(b + 4 * PR_PK_HDR, &v, 4);
	assert_int_equal(pvmrcpi_pk_from_wire(b, n), PvmBadMsg);
	/* total larger than the fragments: the bytes end first */
	build(b, sizeof b, fr, 2);
	pvmrcpi_pk_to_wire(b, n);
	v = htonl(40);
	memcpy(b, &v, 4);
	assert_int_equal(pvmrcpi_pk_from_wire(b, n), PvmBadMsg);
	/* trailing bytes after the last fragment */
	build(b, sizeof b, fr, 2);
	pvmrcpi_pk_to_wire(b, n);
	assert_int_equal(pvmrcpi_pk_from_wire(b, n + 4), PvmBadMsg);
	/* cut inside a fragment */
	build(b, sizeof b, fr, 2);
	pvmrcpi_pk_to_wire(b, n);
	assert_int_equal(pvmrcpi_pk_from_wire(b, n - 1), PvmBadMsg);
	/* zero-length fragments forever: refused when the bytes end */
	memset(b, 0, sizeof b);
	v = htonl(1);
	memcpy(b, &v, 4);
	assert_int_equal(pvmrcpi_pk_from_wire(b, sizeof b), PvmBadMsg);
}

/* Random bytes and random corruptions of good messages, each in a buffer
 * of exactly its length (ASan sees any read past it): accepted only if
 * the lengths add up, never read outside. */
static void t_random(void **state)
{
	uint64_t seed = test_seed(0x5eed22), s = seed;
	(void)state;
	for (int it = 0; it < 20000; it++) {
		unsigned char tmp[600];
		int fr[6], nf = (int)(test_rand(&s) % 6);
		size_t n;
		unsigned char *b;
		for (int i = 0; i < nf; i++)
			fr[i] = 1 + (int)(test_rand(&s) % 80); /* a last empty one: never sent */
		n = build(tmp, sizeof tmp, fr, nf);
		assert_int_equal(pvmrcpi_pk_to_wire(tmp, n), 0);
		if (it & 1) /* corrupt one byte of the ints' region or cut */
			tmp[test_rand(&s) % n] ^= (unsigned char)(1u << (test_rand(&s) % 8));
		else
			n -= test_rand(&s) % (n + 1);
		b = malloc(n ? n : 1);
		memcpy(b, tmp, n);
		if (pvmrcpi_pk_from_wire(b, n) == 0) {
			/* accepted: the walk must add up by itself */
			int32_t tot;
			size_t off = 4 * PR_PK_HDR;
			int64_t sum = 0;
			memcpy(&tot, b, 4);
			while (off < n) {
				int32_t l;
				memcpy(&l, b + off, 4);
				sum += l;
				off += 4 + (size_t)l;
			}
			if (off != n || sum != tot)
				fail_msg(
				    "seed %#llx it %d: accepted a message that does not add up",
				    (unsigned long long)seed, it);
		}
		free(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_byte_order),
	    cmocka_unit_test(t_empty),
	    cmocka_unit_test(t_hostile),
	    cmocka_unit_test(t_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
