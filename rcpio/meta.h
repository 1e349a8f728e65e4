/*
 * rcpio/meta.h — block metadata kept by managers (docs/rcpio.md).
 *
 * Block B of a file is managed by rank B mod nprocs.  The manager maps
 * (file, block) to the block's owner (the rank whose pool caches it), the
 * owner's slot and the slot's generation, and a state:
 *   FILLING  the owner was just assigned and is reading the block in from
 *            the file system: others are told BUSY and ask again;
 *   VALID    the owner's slot holds the block.
 * A query carries the requester's pre-update: a free slot of its own.  On
 * a miss the manager records the requester as owner at once (no second
 * round trip): the requester fills its slot and reports READY.  DRAM only:
 * ownership is made persistent by the owner's pool at commit, and rebuilt
 * from the pools at open (rcpio_meta_insert).  Not thread-safe (the cache
 * holds its lock).
 */
#ifndef RCPIO_META_H
#define RCPIO_META_H

#include <stdint.h>

typedef struct rcpio_meta rcpio_meta;

enum {
	RCPIO_HIT = 0,  /* owner/slot/gen name the cached copy */
	RCPIO_MISS = 1, /* the requester owns the block now, in its offered slot */
	RCPIO_BUSY = 2, /* being filled (owner/slot/gen: by whom): ask again */
	RCPIO_NONE = 3, /* not cached and no slot offered: use the file system */
};

enum { RCPIO_FILLING = 1, RCPIO_VALID = 2 };

struct rcpio_meta_reply {
	uint32_t kind, owner, slot;
	uint64_t gen;
};

struct rcpio_meta_stats {
	uint64_t queries, hits, misses, busy, none, ready, evicted, inserted, stale;
	uint64_t probes, lost; /* fillers probed; FILLING entries of dead fillers dropped */
	uint64_t peeks;        /* locations sent ahead (VALID blocks peeked at) */
	uint64_t entries;
};

int rcpio_meta_create(rcpio_meta **out);
void rcpio_meta_destroy(rcpio_meta *m);

/* The manager's answer to REQUESTER's query for (FID, BLOCK) offering
 * OFFER_SLOT (< 0: none) with generation OFFER_GEN.  Returns 0 (the reply
 * in *R), RCP_EINVAL, RCP_ENOMEM. */
int rcpio_meta_query(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t requester,
                     int64_t offer_slot, uint64_t offer_gen, struct rcpio_meta_reply *r);
/* A requester that dies after its MISS never reports READY: its block
 * would stay FILLING and every other requester BUSY.  The manager probes
 * the filler (rcpio/xfer.c) when it answers BUSY; these two functions
 * keep one probe at a time per entry.  rcpio_meta_probe: 1 if (FID,
 * BLOCK) is FILLING by OWNER in SLOT and not being probed (it is marked
 * probed now: start one), else 0.  rcpio_meta_probed: the probe's end;
 * ALIVE 0 (the filler is gone) drops the entry if it is still that
 * filler's FILLING one, so the next query is a MISS and another
 * requester fills the block: returns 1 then, else 0. */
int rcpio_meta_probe(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot);
int rcpio_meta_probed(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot,
                      int alive);
/* Where (FID, BLOCK) is cached, without changing anything: 1 and *R
 * (HIT) if it is VALID, else 0 (not cached, or FILLING).  For the
 * locations a query's reply carries ahead (rcpio/xfer.c). */
int rcpio_meta_peek(rcpio_meta *m, uint64_t fid, uint64_t block, struct rcpio_meta_reply *r);
/* The owner filled its slot: FILLING -> VALID.  Returns 0 or RCP_ENOENT
 * (no such entry with that owner and slot: dropped in between). */
int rcpio_meta_ready(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot);
/* The owner gives the block up.  Returns 0 or RCP_ENOENT. */
int rcpio_meta_evict(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot);
/* A block recovered from OWNER's pool (VALID).  Returns 0, RCP_EADDRINUSE
 * (another owner has it: the caller drops its copy), RCP_ENOMEM. */
int rcpio_meta_insert(rcpio_meta *m, uint64_t fid, uint64_t block, uint32_t owner, uint32_t slot,
                      uint64_t gen);
/* Forgets every block of FID (close, set_size).  Returns how many. */
uint64_t rcpio_meta_drop_file(rcpio_meta *m, uint64_t fid);
void rcpio_meta_get_stats(const rcpio_meta *m, struct rcpio_meta_stats *st);

#endif
