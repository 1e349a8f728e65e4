/*
 * rcpio/xfer.h — the cache's network: RCP endpoints, the rcpio RPC
 * protocol, bulk transfers between pools (docs/rcpio.md).
 *
 * Two endpoints per process.  The server endpoint belongs to a progress
 * thread that answers peers at any time — the application may be
 * computing, or blocked in MPI, when a peer needs the metadata this rank
 * manages — and exposes the pool's block area as one bulk handle.  The
 * client endpoint belongs to the application thread, which sends queries
 * and moves data in its MPI-IO calls; between its calls the progress
 * thread tends it (acks, pings, resends: xfer.c, "the client endpoint
 * between calls").  Handlers take the cache lock given at create; every
 * RCP context is used by one thread at a time (the client's under a
 * lock of its own).
 *
 * Calls (all little structs of integers, docs/rcpio.md has the table):
 *   rcpio.query (fid, block, requester, offered slot, its gen) -> reply
 *   rcpio.ready (fid, block, owner, slot)         FILLING -> VALID, async
 *   rcpio.evict (fid, block, owner, slot)         the owner gives it up
 *   rcpio.put   (fid, block, slot, gen, off, bulk) the owner pulls the
 *               requester's bytes into its slot and marks them dirty
 *   rcpio.alive ()  a manager's probe of a filler that has not reported
 *               READY (RCP_EPEER: it is gone, the block is freed)
 *   rcpio.claim (fid, owner, [block, gen, slot]...)  deferred claims of
 *               blocks written into the owner's slots -> a status each
 * Reads need no call to the owner: the requester pulls the data, then the
 * slot's tag, and trusts the data only if the tag names the block.
 */
#ifndef RCPIO_XFER_H
#define RCPIO_XFER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rcpio/meta.h"
#include "rcpio/pool.h"

typedef struct rcpio_net rcpio_net;
typedef struct rcpio_peer rcpio_peer;

#define RCPIO_BLOB 512 /* bytes one rank publishes: address + pool handle */

struct rcpio_net_stats {
	uint64_t queries_sent, queries_served, puts_sent, puts_served, puts_stale;
	uint64_t pulls, pull_bytes, put_bytes, readies_sent, evicts_sent, errors;
	/* Owner side of rcpio.put: puts whose pull failed (the requester died
	 * or went silent mid-transfer), and the pool bytes pinned right now
	 * by puts in flight (0 once every transfer has ended, either way). */
	uint64_t puts_failed, held_bytes;
	/* Manager side: fillers probed while their block was FILLING, and
	 * FILLING entries dropped because the filler was gone (RCP_EPEER). */
	uint64_t probes, fillers_lost;
	/* Reads of another rank's slot by a memcpy from its pool mapped on
	 * this host (xfer.c, "reads from a mapped pool"; pulls counts bulk
	 * pulls, pull_bytes the bytes of both), and peers' pools mapped. */
	uint64_t pulls_mapped, pools_mapped;
	/* Deferred claims (rcpio_net_claim): calls sent; claims served as a
	 * manager. */
	uint64_t claims_sent, claims_served;
};

/* Starts the endpoints and the progress thread.  TRANSPORT: "shm" or
 * "udp" (NULL: shm).  LOCK guards META and POOL.  Returns 0 or an RCP
 * code. */
int rcpio_net_start(const char *transport, pthread_mutex_t *lock, rcpio_meta *meta,
                    rcpio_pool *pool, rcpio_net **out);
/* Stops the thread, closes everything.  NULL accepted. */
void rcpio_net_stop(rcpio_net *n);
/* This rank's blob (RCPIO_BLOB bytes) for the other ranks. */
int rcpio_net_blob(rcpio_net *n, void *blob);
/* A peer from its blob: connects, reads its pool handle.  Returns 0 or an
 * RCP code (RCP_EPROTO: malformed blob). */
int rcpio_net_peer(rcpio_net *n, const void *blob, rcpio_peer **out);
void rcpio_net_peer_free(rcpio_peer *p);
/* The ranks of file FID (SIZE blobs in rank order, this rank ME): the
 * manager probes a filler at its address (xfer.c, "probes of fillers").
 * rcpio_net_members_drop forgets them (close).  0 or RCP_ENOMEM. */
int rcpio_net_members(rcpio_net *n, uint64_t fid, uint32_t me, uint32_t size, const void *blobs);
void rcpio_net_members_drop(rcpio_net *n, uint64_t fid);

/* Blocking client calls (application thread).  Return 0 or an RCP code. */
int rcpio_net_query(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t me,
                    int64_t offer, uint64_t gen, struct rcpio_meta_reply *r);
/* A block's location (gen 0: not known to be cached). */
struct rcpio_loc {
	uint64_t gen;
	uint32_t owner, slot;
};
#define RCPIO_AHEAD_MAX 32u
/* rcpio_net_query that also asks where blocks BLOCK + i*STRIDE, i = 1 ..
 * AHEAD (<= RCPIO_AHEAD_MAX), are cached: NEXT[i-1] gets each VALID one's
 * location, as the manager knows it now (hints: checked at use). */
int rcpio_net_query_ahead(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t me,
                          int64_t offer, uint64_t gen, struct rcpio_meta_reply *r, uint32_t stride,
                          uint32_t ahead, struct rcpio_loc *next);
int rcpio_net_evict(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t owner,
                    uint32_t slot);
/* Sends READY without waiting; rcpio_net_drain waits for all of them
 * (sync points) and returns the first error. */
int rcpio_net_ready(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint64_t block, uint32_t owner,
                    uint32_t slot);
int rcpio_net_drain(rcpio_net *n);
/* Writes LEN bytes at OFF of the owner's slot.  RCP_ENOENT: the slot no
 * longer holds (fid, block, gen): query again. */
int rcpio_net_put(rcpio_net *n, rcpio_peer *owner, uint64_t fid, uint64_t block, uint32_t slot,
                  uint64_t gen, uint32_t off, const void *src, size_t len);
/* Reads LEN bytes at OFF of the owner's slot into DST: a memcpy from the
 * owner's pool if it is mapped here (same host), else a bulk pull.
 * RCP_ENOENT: the slot's tag does not name (fid, block, gen): query
 * again. */
int rcpio_net_pull(rcpio_net *n, rcpio_peer *owner, uint64_t fid, uint64_t block, uint32_t slot,
                   uint64_t gen, uint32_t off, void *dst, size_t len);
/* Deferred claims (session 21).  A write of a whole block that no hint
 * places goes into a free slot of the writer's own, without a query; the
 * writer tells the block's manager later, many blocks in one call
 * (rcpio/cache.c, "deferred claims").  STATUS[i] gets claim i's answer:
 * 0, the manager records OWNER as the block's owner (VALID), or
 * RCP_EADDRINUSE, the block has an entry already (another owner, or a
 * filler): the writer's bytes must go where a query says.  COUNT <=
 * RCPIO_CLAIM_MAX.  Returns 0, RCP_EINVAL, RCP_EPROTO (a malformed reply
 * or request), or an RCP code of the call. */
struct rcpio_claim {
	uint64_t block, gen;
	uint32_t slot, pad;
};
#define RCPIO_CLAIM_MAX 64u
int rcpio_net_claim(rcpio_net *n, rcpio_peer *mgr, uint64_t fid, uint32_t owner,
                    const struct rcpio_claim *claims, uint32_t count, int32_t *status);
/* Lets the client endpoint make progress (while spinning on BUSY). */
void rcpio_net_poll(rcpio_net *n);
/* A copy of the counters, taken under the lock given at create. */
void rcpio_net_get_stats(rcpio_net *n, struct rcpio_net_stats *st);

#endif
