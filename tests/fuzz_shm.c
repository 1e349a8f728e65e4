/*
 * tests/fuzz_shm.c — libFuzzer target: the shm nic's receive side when a
 * sender writes whatever it likes into its slot and ring (nic/shm/:
 * scan, ring_activate, ring_read, release, reset).
 *
 * A sender maps the receiver's segment read-write, so nothing in its slot
 * or ring can be trusted.  This target plays that sender without the nic
 * code: it maps the receiver's segment itself, using the on-memory ABI
 * that nic/shm/shm_int.h documents (segment header, 256-byte slots, 64-byte
 * cells, header word VALID | check | WRAP | len), takes a slot by writing
 * its state word, and writes frames the input describes.  Input: a setup
 * byte (bit 0: an invalid sender name; the rest picks the slot), a u32
 * start index written as the slot's consumer index, then records:
 *
 *   u8 f, u32 len, then min(len, 4096, what is left) payload bytes.
 *   The header written is VALID (unless f&4) | check(pos, xor'ed with the
 *   next input byte if f&1) | WRAP (f&2) | len.  The position advances
 *   as a producer's would (f&16: by the next input byte instead), and the
 *   next header word is zeroed (unless f&32).  f&8: the receiver takes up
 *   to (next byte % 16) + 1 frames and releases them (in reverse if f&64).
 *
 * Oracle, besides the sanitizers (which do not see into shared memory):
 * every frame handed out lies inside that slot's ring in the receiver's
 * own mapping and is no longer than the MTU.  At the end the slot is
 * closed; the receiver must give it back (FREE) once it is drained.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rcp/nic.h>

#include "common/rcp_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* ---- the on-memory ABI (nic/shm/shm_int.h; SHM_VERSION 2) ---- */
#define SHM_MAGIC       0x31304d4853504352ull
#define SHM_VERSION     2u
#define MRENT_BYTES     32u
#define SEG_HDR_BYTES   512u
#define SLOT_BYTES      256u
#define RINGS_ALIGN     65536u
#define CELL            64u
#define FRAME_HDR       8u
#define HDR_VALID       (1ull << 63)
#define HDR_WRAP        (1ull << 32)
#define HDR_CHECK_SHIFT 40
#define HDR_CHECK_MASK  0x7fffffull
#define ST_FREE         0u
#define ST_ACTIVE       2u
#define ST_CLOSED       3u

struct seg {
	_Atomic uint64_t magic;
	uint32_t version, nslots, ring_cells, mtu, nmrs;
	int32_t owner_pid;
	uint64_t owner_start;
	uint32_t owner_pidns, cell_bytes;
	uint64_t seg_bytes;
	_Alignas(128) _Atomic uint32_t sleeping;
	_Atomic uint32_t closed;
	_Alignas(128) _Atomic uint32_t events;
};

struct slot {
	_Atomic uint64_t state;
	uint64_t sender_start;
	uint32_t sender_pidns;
	uint8_t namelen;
	char name[43];
	_Alignas(64) _Atomic uint64_t prod;
	_Alignas(128) _Atomic uint64_t cons;
	char pad_[120];
};
_Static_assert(sizeof(struct slot) == SLOT_BYTES, "slot ABI");

enum { NSLOTS = 8 };

static rcp_nic *rx;
static unsigned char *mine;         /* our mapping of the receiver's segment */
static const unsigned char *theirs; /* the receiver's own mapping */
static uint64_t rings_off, ring_bytes, seg_bytes;
static uint32_t ncells, mtu;
static char name[64];

static _Atomic uint64_t *cell_word(unsigned char *cells, uint64_t off)
{
	return (_Atomic uint64_t *)(void *)(cells + off * CELL);
}

static struct slot *slot_at(unsigned i)
{
	return (struct slot *)(void *)(mine + SEG_HDR_BYTES + (size_t)i * SLOT_BYTES);
}

static void open_rx(void)
{
	struct rcp_nic_config cfg = {0};
	char path[128], line[512];
	struct seg *s;
	FILE *maps;
	int fd;

	if (rx) {
		munmap(mine, seg_bytes);
		rcp_nic_close(rx);
	}
	cfg.rx_bytes = 16384;
	cfg.mtu = 4096;
	cfg.faults = "";
	if (rcp_nic_open(name, &cfg, &rx)) {
		fprintf(stderr, "fuzz_shm: cannot open %s\n", name);
		abort();
	}
	rcpi_log_level = -1; /* every broken ring logs an error line */
	snprintf(path, sizeof path, "/dev/shm/rcp-%s", name + 4);
	/* The receiver's mapping, before ours exists. */
	theirs = NULL;
	maps = fopen("/proc/self/maps", "r");
	while (maps && fgets(line, sizeof line, maps))
		if (strstr(line, path)) {
			unsigned long lo;
			if (sscanf(line, "%lx-", &lo) == 1 && !theirs)
				theirs = (const unsigned char *)lo;
		}
	if (maps)
		fclose(maps);
	fd = open(path, O_RDWR);
	if (fd < 0 || !theirs) {
		fprintf(stderr, "fuzz_shm: cannot find %s\n", path);
		abort();
	}
	s = mmap(NULL, SEG_HDR_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED || atomic_load(&s->magic) != SHM_MAGIC || s->version != SHM_VERSION ||
	    s->cell_bytes != CELL) {
		fprintf(stderr,
		        "fuzz_shm: the shm ABI changed (SHM_VERSION): update tests/fuzz_shm.c\n");
		abort();
	}
	ncells = s->ring_cells;
	mtu = s->mtu;
	seg_bytes = s->seg_bytes;
	/* nic/shm/shm_int.h layout(): slots, then the registration table and the
	 * rings, each RINGS_ALIGN aligned. */
	rings_off = (SEG_HDR_BYTES + (uint64_t)s->nslots * SLOT_BYTES + RINGS_ALIGN - 1) &
	            ~(uint64_t)(RINGS_ALIGN - 1);
	rings_off = (rings_off + (uint64_t)s->nmrs * MRENT_BYTES + RINGS_ALIGN - 1) &
	            ~(uint64_t)(RINGS_ALIGN - 1);
	ring_bytes = (uint64_t)ncells * CELL;
	if (s->nslots != NSLOTS || rings_off + NSLOTS * ring_bytes != seg_bytes) {
		fprintf(stderr, "fuzz_shm: unexpected geometry: update tests/fuzz_shm.c\n");
		abort();
	}
	munmap(s, SEG_HDR_BYTES);
	mine = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	/* Both mappings are made and nothing opens it by name again: gone
	 * from /dev/shm now, so a crash or libFuzzer's exit leaves nothing. */
	unlink(path);
	if (mine == MAP_FAILED)
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("RCP_SHM_PEERS", "8", 1);
	snprintf(name, sizeof name, "shm:fuzz-shm-%d", (int)getpid());
	open_rx();
	return 0;
}

static void bump(void)
{
	atomic_fetch_add(&((struct seg *)(void *)mine)->events, 1);
}

/* Takes up to MAX frames, checks them, releases them. */
static void take(unsigned si, int max, int reverse)
{
	struct rcp_nic_frame fr[16];
	const unsigned char *ring = theirs + rings_off + si * ring_bytes;
	int n = rcp_nic_recv(rx, fr, max);
	if (n < 0 || n > max)
		__builtin_trap();
	for (int i = 0; i < n; i++) {
		const unsigned char *d = fr[i].data;
		volatile unsigned char sink = 0;
		/* In the ring of this slot, whole, and no longer than the MTU:
		 * a frame past the ring's end is another sender's ring. */
		if (fr[i].len > mtu || d < ring || d > ring + ring_bytes ||
		    fr[i].len > (size_t)(ring + ring_bytes - d)) {
			fprintf(stderr,
			        "fuzz_shm: frame at ring+%td len %u outside the ring (%llu)\n",
			        d - ring, fr[i].len, (unsigned long long)ring_bytes);
			__builtin_trap();
		}
		for (uint32_t k = 0; k < fr[i].len; k++)
			sink ^= d[k];
		(void)sink;
	}
	if (reverse)
		for (int i = n - 1; i >= 0; i--)
			rcp_nic_release(rx, &fr[i], 1);
	else if (n)
		rcp_nic_release(rx, fr, n);
}

static unsigned get8(const uint8_t **p, const uint8_t *end)
{
	return *p < end ? *(*p)++ : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned next_slot;
	const uint8_t *p = data, *end = data + size;
	unsigned setup = get8(&p, end), si = next_slot++ % NSLOTS;
	struct slot *s = slot_at(si);
	unsigned char *cells = mine + rings_off + si * ring_bytes;
	uint64_t v = atomic_load(&s->state), pos = 0, mask = ncells - 1;
	uint32_t gen = (uint32_t)(v >> 2) & 0x3fffffffu;

	if ((v & 3) != ST_FREE)
		open_rx(); /* an earlier input crashed half-way (-fork) */
	for (int i = 0; i < 4; i++)
		pos |= (uint64_t)get8(&p, end) << (8 * i);
	/* Claim it as a sender would (an honest one CASes). */
	s->namelen = (setup & 1) ? 41 : 2;
	memcpy(s->name, (setup & 1) ? "bad/name" : "fz", 3);
	atomic_store(&s->cons, pos);
	atomic_store(cell_word(cells, pos & mask), 0);
	atomic_store(&s->state, (uint64_t)getpid() << 32 | (uint64_t)gen << 2 | ST_ACTIVE);
	bump();

	while (p < end) {
		unsigned f = get8(&p, end), x;
		uint32_t len = 0, cells_n;
		uint64_t off = pos & mask, h;
		size_t room, n;
		for (int i = 0; i < 4; i++)
			len |= (uint32_t)get8(&p, end) << (8 * i);
		x = (f & 1) ? get8(&p, end) : 0;
		h = ((f & 4) ? 0 : HDR_VALID) |
		    ((((pos ^ x) & HDR_CHECK_MASK)) << HDR_CHECK_SHIFT) | ((f & 2) ? HDR_WRAP : 0) |
		    len;
		/* Payload first, then the header (release), like a producer. */
		room = (size_t)(ring_bytes - off * CELL - FRAME_HDR);
		n = len < 4096 ? len : 4096;
		n = n < (size_t)(end - p) ? n : (size_t)(end - p);
		n = n < room ? n : room;
		memcpy(cells + off * CELL + FRAME_HDR, p, n);
		p += n;
		if (f & 16)
			cells_n = get8(&p, end);
		else if (f & 2)
			cells_n = (uint32_t)(ncells - off);
		else
			cells_n = (uint32_t)((FRAME_HDR + (uint64_t)len + CELL - 1) / CELL);
		if (cells_n > ncells)
			cells_n = ncells;
		if (!(f & 32))
			atomic_store(cell_word(cells, (pos + cells_n) & mask), 0);
		atomic_store_explicit(cell_word(cells, off), h, memory_order_release);
		pos += cells_n;
		atomic_store(&s->prod, pos);
		if (f & 8)
			take(si, 1 + (int)(get8(&p, end) % 16), (f & 64) != 0);
	}
	for (int i = 0; i < 64; i++)
		take(si, 16, 0);
	/* Leave; the receiver frees the slot once it holds none of its
	 * frames.  A ring that still shows a frame it will not read (it is
	 * not broken: it waits for the frame's release) is emptied here, as
	 * a receiver that drained it would see it. */
	atomic_store(&s->state, (uint64_t)getpid() << 32 | (uint64_t)gen << 2 | ST_CLOSED);
	bump();
	take(si, 16, 0);
	if ((atomic_load(&s->state) & 3) != ST_FREE) {
		memset(cells, 0, ring_bytes);
		for (int i = 0; i < 4 && (atomic_load(&s->state) & 3) != ST_FREE; i++)
			take(si, 16, 0);
	}
	if ((atomic_load(&s->state) & 3) != ST_FREE) {
		fprintf(stderr, "fuzz_shm: slot %u not given back after its sender left\n", si);
		__builtin_trap();
	}
	return 0;
}
