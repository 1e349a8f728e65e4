/*
 * tests/test_rcpio_map — reads of another rank's slot from its pool mapped
 * on this host (rcpio/xfer.c, "reads from a mapped pool"; session 20).
 * No MPI: an owner and requesters, rcpio runtimes in this process.
 *
 * Counted, not timed: on shm (whose nic says RCP_NIC_CAP_SHARED_SEG) every
 * read of the owner's slot is a copy from the mapping — no bulk pull — and
 * the owner's pool is mapped once for every peer made of it (a re-open);
 * a slot reused under a reader (tag cleared, new bytes, a new generation)
 * is refused with RCP_ENOENT, never read as the old block; on udp (no
 * SHARED_SEG, even on one host) nothing is mapped and reads go by bulk;
 * a blob naming another file than the owner's pool is not mapped.
 */
#include "tests/testutil.h"

#include <rcp/error.h>

#include "rcpio/meta.h"
#include "rcpio/pool.h"
#include "rcpio/xfer.h"

#define BLOCK 65536u
#define FID   4646u
#define BNUM  5u
#define READS 50

#include "tests/rcpio_rt.h"

/* struct blob of rcpio/xfer.c: the pool file's inode is the u64 at this
 * byte (after the address, block, stride, hlen, pid, fd and dev). */
#define BLOB_INO_AT (128 + 8 * 6)

static unsigned char byte_of(uint64_t gen, size_t i)
{
	return (unsigned char)(gen * 31 + i * 7 + 1);
}

/* Fills a slot of R's pool with block BNUM as a miss would: data, then
 * the tag.  Returns the slot; *GEN its generation. */
static uint32_t fill_slot(struct rt *r, uint64_t *gen)
{
	int s;
	unsigned char *d;
	pthread_mutex_lock(&r->lock);
	s = rcpio_pool_alloc(r->pool);
	assert_true(s >= 0);
	*gen = rcpio_pool_next_gen(r->pool);
	rcpio_pool_slot(r->pool, (uint32_t)s)->fid = FID;
	rcpio_pool_slot(r->pool, (uint32_t)s)->block = BNUM;
	rcpio_pool_slot(r->pool, (uint32_t)s)->gen = *gen;
	d = rcpio_pool_data(r->pool, (uint32_t)s);
	for (size_t i = 0; i < BLOCK; i++)
		d[i] = byte_of(*gen, i);
	rcpio_pool_tag_set(r->pool, (uint32_t)s, FID, BNUM, *gen);
	pthread_mutex_unlock(&r->lock);
	return (uint32_t)s;
}

static int same_bytes(const unsigned char *got, uint64_t gen, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (got[i] != byte_of(gen, off + i))
			return 0;
	return 1;
}

static void start_dir(void)
{
	snprintf(dir, sizeof dir, "/tmp/rcpio-map-XXXXXX");
	assert_non_null(mkdtemp(dir));
}

static void t_mapped_reads(void **state)
{
	struct rt m, b;
	struct rcpio_net_stats st;
	rcpio_peer *p1 = NULL, *p2 = NULL;
	unsigned char *got = malloc(BLOCK);
	uint64_t gen, gen2;
	uint32_t s;
	(void)state;

	start_dir();
	rt_start_on(&m, "m", "shm");
	rt_start_on(&b, "b", "shm");
	s = fill_slot(&m, &gen);
	assert_int_equal(rcpio_net_peer(b.net, m.blob, &p1), 0);
	for (int i = 0; i < READS; i++) {
		memset(got, 0, BLOCK);
		assert_int_equal(rcpio_net_pull(b.net, p1, FID, BNUM, s, gen, 0, got, BLOCK), 0);
		assert_true(same_bytes(got, gen, 0, BLOCK));
	}
	/* A piece of the block, at an offset. */
	memset(got, 0, BLOCK);
	assert_int_equal(rcpio_net_pull(b.net, p1, FID, BNUM, s, gen, 100, got, 1000), 0);
	assert_true(same_bytes(got, gen, 100, 1000));
	/* A second peer of the same owner (a re-open) reuses the mapping. */
	assert_int_equal(rcpio_net_peer(b.net, m.blob, &p2), 0);
	assert_int_equal(rcpio_net_pull(b.net, p2, FID, BNUM, s, gen, 0, got, BLOCK), 0);
	rcpio_net_get_stats(b.net, &st);
	print_message("# shm: %llu mapped reads, %llu bulk pulls, %llu pools mapped\n",
	              (unsigned long long)st.pulls_mapped, (unsigned long long)st.pulls,
	              (unsigned long long)st.pools_mapped);
	assert_int_equal(st.pulls_mapped, READS + 2);
	assert_int_equal(st.pulls, 0);
	assert_int_equal(st.pools_mapped, 1);
	assert_int_equal(st.pull_bytes, (uint64_t)(READS + 1) * BLOCK + 1000);

	/* The owner reuses the slot: tag cleared first, new bytes, new tag. */
	pthread_mutex_lock(&m.lock);
	rcpio_pool_tag_clear(m.pool, s);
	rcpio_pool_release(m.pool, s);
	pthread_mutex_unlock(&m.lock);
	assert_int_equal(fill_slot(&m, &gen2), s); /* (a stack: the same slot) */
	assert_true(gen2 != gen);
	assert_int_equal(rcpio_net_pull(b.net, p1, FID, BNUM, s, gen, 0, got, BLOCK), RCP_ENOENT);
	assert_int_equal(rcpio_net_pull(b.net, p1, FID, BNUM, s, gen2, 0, got, BLOCK), 0);
	assert_true(same_bytes(got, gen2, 0, BLOCK));
	/* Past the owner's area: refused, nothing read. */
	assert_int_equal(rcpio_net_pull(b.net, p1, FID, BNUM, 4, gen2, 0, got, BLOCK), RCP_ERANGE);

	rcpio_net_peer_free(p2);
	rcpio_net_peer_free(p1);
	rt_stop(&b);
	rt_stop(&m);
	rmdir(dir);
	free(got);
}

/* Udp has no SHARED_SEG, even between runtimes of one process: bulk. */
static void t_udp_by_bulk(void **state)
{
	struct rt m, b;
	struct rcpio_net_stats st;
	rcpio_peer *p = NULL;
	unsigned char *got = malloc(BLOCK);
	uint64_t gen;
	uint32_t s;
	(void)state;

	start_dir();
	rt_start(&m, "m");
	rt_start(&b, "b");
	s = fill_slot(&m, &gen);
	assert_int_equal(rcpio_net_peer(b.net, m.blob, &p), 0);
	for (int i = 0; i < 5; i++) {
		memset(got, 0, BLOCK);
		assert_int_equal(rcpio_net_pull(b.net, p, FID, BNUM, s, gen, 0, got, BLOCK), 0);
		assert_true(same_bytes(got, gen, 0, BLOCK));
	}
	rcpio_net_get_stats(b.net, &st);
	assert_int_equal(st.pools_mapped, 0);
	assert_int_equal(st.pulls_mapped, 0);
	assert_int_equal(st.pulls, 5);
	rcpio_net_peer_free(p);
	rt_stop(&b);
	rt_stop(&m);
	rmdir(dir);
	free(got);
}

/* A blob whose identity is not the file behind the descriptor it names
 * (here: another inode) is not mapped: reads go by bulk, right. */
static void t_other_file_not_mapped(void **state)
{
	struct rt m, b;
	struct rcpio_net_stats st;
	rcpio_peer *p = NULL;
	unsigned char *got = malloc(BLOCK), blob[RCPIO_BLOB];
	uint64_t gen, ino;
	uint32_t s;
	(void)state;

	start_dir();
	rt_start_on(&m, "m", "shm");
	rt_start_on(&b, "b", "shm");
	s = fill_slot(&m, &gen);
	memcpy(blob, m.blob, sizeof blob);
	memcpy(&ino, blob + BLOB_INO_AT, sizeof ino);
	ino++;
	memcpy(blob + BLOB_INO_AT, &ino, sizeof ino);
	assert_int_equal(rcpio_net_peer(b.net, blob, &p), 0);
	assert_int_equal(rcpio_net_pull(b.net, p, FID, BNUM, s, gen, 0, got, BLOCK), 0);
	assert_true(same_bytes(got, gen, 0, BLOCK));
	rcpio_net_get_stats(b.net, &st);
	assert_int_equal(st.pools_mapped, 0);
	assert_int_equal(st.pulls_mapped, 0);
	assert_int_equal(st.pulls, 1);
	rcpio_net_peer_free(p);
	rt_stop(&b);
	rt_stop(&m);
	rmdir(dir);
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_mapped_reads),
	    cmocka_unit_test(t_udp_by_bulk),
	    cmocka_unit_test(t_other_file_not_mapped),
	};
	alarm(60);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
