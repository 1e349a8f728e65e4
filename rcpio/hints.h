/*
 * rcpio/hints.h — location hints: where a block was last found
 * (docs/rcpio.md, "Location hints").
 *
 * A direct-mapped table, used by the application thread alone
 * (rcpio/cache.c).  A hint is a guess, never trusted — every use is
 * checked the way a query's answer is: our own slot under the lock,
 * another rank's by the tag pulled after the data (rcpio_net_pull) or by
 * the owner before a put (rcpio.put) — so a stale hint costs a failed try
 * and a query, never wrong bytes, and nothing has to keep hints exact:
 * a newer hint simply overwrites whatever shared its entry.
 */
#ifndef RCPIO_HINTS_H
#define RCPIO_HINTS_H

#include <stdint.h>

#define RCPIO_NHINTS 4096u

struct rcpio_hint {
	uint64_t fid, block, gen; /* fid 0: empty */
	uint32_t owner, slot;     /* owner: a rank of the file's communicator */
};

/* The entry of (FID, BLOCK) in table T (RCPIO_NHINTS entries): it may
 * hold another block's hint — compare fid and block. */
static inline struct rcpio_hint *rcpio_hint_of(struct rcpio_hint *t, uint64_t fid, uint64_t block)
{
	uint64_t h = (fid ^ (block * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return &t[(h >> 40) % RCPIO_NHINTS];
}

/* Forgets FID's hints (close, set_size: rank numbers and slots change). */
static inline void rcpio_hints_drop(struct rcpio_hint *t, uint64_t fid)
{
	for (uint32_t i = 0; i < RCPIO_NHINTS; i++)
		if (t[i].fid == fid)
			t[i].fid = 0;
}

#endif
