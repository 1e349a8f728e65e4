/*
 * rcpio/pool.h — one process's persistent cache pool (docs/rcpio.md).
 *
 * A file mapped with libpmem2 (a DAX device or any file; on a plain file
 * system persistence is msync) holding the object pool — header, undo
 * log, file table, slot table, allocation bitmap — and the block pool:
 * NSLOTS slots of BLOCK data bytes each followed by a RCPIO_TAG-byte tag
 * naming the block the slot holds.  Peers pull data and tag together and
 * trust the data only if the tag names what they asked for.
 *
 * Persistent state changes only inside a transaction (undo log): an entry
 * is copied to the log and persisted before it is modified, so a crash at
 * any point leaves either the old or the new state after recovery
 * (rcpio_pool_open rolls an unfinished transaction back).  Checksums on
 * the header and every entry: a pool whose header does not check out is
 * refused (re-initialised, counted), a bad entry is dropped, never trusted.
 *
 * DRAM state per slot (owner side): in use, the block it holds, dirty
 * byte range, pins (transfers in flight), committed.  The free queue is
 * DRAM, rebuilt at open from the persistent bitmap.  Not thread-safe: the
 * caller locks (rcpio/cache.c holds one mutex over pool and metadata).
 */
#ifndef RCPIO_POOL_H
#define RCPIO_POOL_H

#include <stddef.h>
#include <stdint.h>

#define RCPIO_TAG       64u
#define RCPIO_NFILES    64u
#define RCPIO_PATH_MAX  440u
#define RCPIO_LOG_BYTES (1024u * 1024u)

typedef struct rcpio_pool rcpio_pool;

struct rcpio_pool_cfg {
	size_t block;    /* data bytes per slot (multiple of 4096) */
	uint32_t nslots; /* slots in the block pool */
};

/* Identity of a backing file when its blocks were committed: a cached
 * block is reused after a restart only if the file still matches. */
struct rcpio_fident {
	uint64_t fid; /* rcpio_fid(path); 0: entry unused */
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	char path[RCPIO_PATH_MAX];
};

struct rcpio_pool_info {
	int created;        /* new pool file (or re-initialised) */
	int refused;        /* existing pool did not check out: re-initialised */
	int rolled_back;    /* an unfinished transaction was undone */
	uint32_t dropped;   /* entries whose checksum failed */
	uint32_t committed; /* committed slots found */
};

/* Per-slot DRAM state. */
struct rcpio_slot {
	uint64_t fid, block, gen;
	uint32_t lo, hi; /* dirty bytes [lo, hi) (lo >= hi: clean) */
	uint16_t pins;
	uint8_t used, committed;
};

uint64_t rcpio_fid(const char *path);
uint64_t rcpio_sum(const void *p, size_t len, uint64_t seed);

/* Opens (creating or re-initialising as needed) the pool at PATH with
 * CFG's geometry; an existing pool of another geometry is re-initialised.
 * Recovers: rolls back an unfinished transaction, drops bad entries.
 * The pool is locked (flock) while open.  Returns 0, RCP_EINVAL,
 * RCP_ENOMEM, RCP_ESYS (open/map failed), RCP_EBUSY (another process, or
 * another open here, has it). */
int rcpio_pool_open(const char *path, const struct rcpio_pool_cfg *cfg, rcpio_pool **out,
                    struct rcpio_pool_info *info);
/* The geometry of the pool at PATH, from its header, without opening it
 * (rcpio-cachectl).  Returns 0, RCP_ESYS (unreadable), RCP_EPROTO (not a
 * pool, or a header that does not check out). */
int rcpio_pool_geometry(const char *path, struct rcpio_pool_cfg *cfg);
/* Persists and unmaps.  NULL accepted. */
void rcpio_pool_close(rcpio_pool *p);

size_t rcpio_pool_block(const rcpio_pool *p);
uint32_t rcpio_pool_nslots(const rcpio_pool *p);
size_t rcpio_pool_stride(const rcpio_pool *p); /* block + RCPIO_TAG */
/* The block area (nslots * stride bytes), for bulk registration. */
void *rcpio_pool_area(const rcpio_pool *p, size_t *len);
/* The pool's file (open while the pool is) and the block area's offset in
 * it: a process of this host maps the file to read slots (rcpio/xfer.c,
 * "reads from a mapped pool"). */
int rcpio_pool_fd(const rcpio_pool *p);
uint64_t rcpio_pool_area_offset(const rcpio_pool *p);
/* KiB of the pool mapped with 2 MiB pages in this process now (from
 * /proc/self/smaps; 0 if none or unknown): what the pool's file system
 * gave it, 0 on a tmpfs mounted huge=never such as a usual /dev/shm.
 * Session 21. */
uint64_t rcpio_pool_huge_kb(const rcpio_pool *p);
unsigned char *rcpio_pool_data(const rcpio_pool *p, uint32_t slot);
struct rcpio_slot *rcpio_pool_slot(rcpio_pool *p, uint32_t slot);
void rcpio_pool_persist(rcpio_pool *p, const void *addr, size_t len);

/* Before a write fills SLOT: its data pages mapped writable in this
 * process in one system call (MADV_POPULATE_WRITE, Linux 5.14) instead
 * of a page fault per 4 KiB; where the kernel lacks it, nothing (the
 * write faults them in as before).  Session 21. */
void rcpio_pool_prefault(rcpio_pool *p, uint32_t slot);

/* Free queue.  Returns a slot (>= 0) or RCP_EAGAIN (none free). */
int rcpio_pool_alloc(rcpio_pool *p);
void rcpio_pool_release(rcpio_pool *p, uint32_t slot);
uint32_t rcpio_pool_nfree(const rcpio_pool *p);

/* Tags: written by the owner when the slot's data is valid, cleared first
 * when it stops being so.  rcpio_tag_ok checks a tag (pulled by a peer). */
void rcpio_pool_tag_set(rcpio_pool *p, uint32_t slot, uint64_t fid, uint64_t block, uint64_t gen);
void rcpio_pool_tag_clear(rcpio_pool *p, uint32_t slot);
int rcpio_tag_ok(const void *tag, uint64_t fid, uint64_t block, uint64_t gen);

/* ---- transactions (undo log) -------------------------------------------- */
/* One at a time.  Every change below logs the old bytes first and
 * returns 0, RCP_EINVAL (no transaction, bad index) or RCP_ERANGE (the
 * log is full: abort). */
int rcpio_pool_tx_begin(rcpio_pool *p);
/* Marks SLOT committed as holding (FID, BLOCK, GEN), or not (clear). */
int rcpio_pool_tx_slot(rcpio_pool *p, uint32_t slot, uint64_t fid, uint64_t block, uint64_t gen);
int rcpio_pool_tx_slot_clear(rcpio_pool *p, uint32_t slot);
/* Writes file entry IDX. */
int rcpio_pool_tx_file(rcpio_pool *p, uint32_t idx, const struct rcpio_fident *id);
/* Persists the changes and truncates the log: the transaction holds. */
int rcpio_pool_tx_commit(rcpio_pool *p);
/* Restores the logged bytes and truncates the log. */
int rcpio_pool_tx_abort(rcpio_pool *p);
/* Test hook: leaves the transaction as a crash would (log kept, no
 * truncation); the next rcpio_pool_open rolls it back. */
void rcpio_pool_tx_crash(rcpio_pool *p);

/* SLOT no longer committed, in a transaction of its own (nothing if it
 * was not): before its bytes change, or when it is given up. */
void rcpio_pool_uncommit(rcpio_pool *p, uint32_t slot);

/* Committed entry of SLOT: 0 and the fields, or RCP_ENOENT. */
int rcpio_pool_committed(const rcpio_pool *p, uint32_t slot, uint64_t *fid, uint64_t *block,
                         uint64_t *gen);
/* File table: index of FID's entry, or RCP_ENOENT; a free index or
 * RCP_EAGAIN (table full); read entry IDX. */
int rcpio_pool_file_find(const rcpio_pool *p, uint64_t fid);
int rcpio_pool_file_free(const rcpio_pool *p);
int rcpio_pool_file_get(const rcpio_pool *p, uint32_t idx, struct rcpio_fident *id);
/* Test hook: address of slot SLOT's persistent entry (to corrupt it). */
void *rcpio_pool_entry_addr(rcpio_pool *p, uint32_t slot);
/* A fresh generation number (unique in this pool's lifetime). */
uint64_t rcpio_pool_next_gen(rcpio_pool *p);

#endif
