/*
 * rcp/bulk.h — Mercury-style bulk data handles over RCP channels.
 *
 * A bulk handle describes memory a process exposes to its peers: one
 * contiguous region or a list of segments, seen as one logical byte range
 * [0, size) laid over the segments in order, with a permission saying what
 * peers may do with it (READ_ONLY: peers may pull from it; WRITE_ONLY:
 * peers may push into it; READWRITE: both).  The owner serialises the handle
 * (e.g. into an RPC argument); a peer deserialises it into a "remote"
 * handle and moves bytes between it and one of its own local handles:
 *
 *   PULL: read [remote_off, +len) of the remote handle into
 *         [local_off, +len) of the local handle;
 *   PUSH: write [local_off, +len) of the local handle into
 *         [remote_off, +len) of the remote handle.
 *
 * Offsets are logical: a transfer may start, end or cross segment borders
 * anywhere on either side.
 *
 * Backends: where the channel's nic offers one-sided RMA (shm: cross-memory
 * attach), a transfer is one rcp_nic_get/put per contiguous run and the
 * owner does nothing.  Elsewhere (udp) the same API is emulated over RCP
 * messages that the owner's rcp_bulk_progress() serves.  Both paths have
 * the same semantics and the same error codes.
 *
 * Security: a handle from the wire is never trusted.  The owner issued a
 * random 64-bit key per handle (never a pointer); every access is checked
 * against the owner's own record of the handle: key known and not freed,
 * [off, off+len) inside the handle (overflow-safe), permission.  A refused
 * access completes with RCP_EACCES and touches nothing.  On shm the nic's
 * per-registration key table does the check (a freed handle's registration
 * is gone), in emulation the owner's progress engine does.
 *
 * Progress: the owner must progress its context (rcp_bulk_progress, or any
 * rcp_bulk_wait/test) for emulated transfers to be served; on shm it need
 * not.  The context shares its endpoint's wait fd: a sleeper calls
 * rcp_bulk_arm() (instead of rcp_ep_arm), then polls rcp_ep_fd() for at
 * most rcp_ep_timeout_ns(), then calls rcp_bulk_progress().
 *
 * Completion: every operation completes exactly once with a status: 0,
 * RCP_EACCES (the owner refused: unknown/forged/freed key, out of bounds,
 * permission), RCP_EPEER (peer dead or silent for RCP_PEER_TIMEOUT),
 * RCP_ECANCELED, RCP_ECLOSED (context or channel closed), RCP_EPROTO (the
 * peer answered nonsense), RCP_EPERM (shm: cross-memory attach refused and
 * emulation impossible), RCP_ENOMEM.  The callback (if any) runs exactly
 * once, from rcp_bulk_progress/test/wait or rcp_bulk_ctx_close in the
 * calling thread, never from inside rcp_bulk_transfer.
 *
 * Tags: bulk's RCP messages use reserved tags (top byte 0xFE, layer byte
 * 0x01; rpc/ uses layer 0x02; see common/rcp_tags.h).  Applications must not
 * use tags whose top byte is 0xFE on an endpoint that has a bulk context.
 *
 * Threads: a context is used by one thread at a time, like its endpoint.
 * One bulk context per endpoint.
 */
#ifndef RCP_BULK_H
#define RCP_BULK_H

#include <stddef.h>
#include <stdint.h>

#include <rcp/error.h>
#include <rcp/rcp.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rcp_bulk_ctx rcp_bulk_ctx;
typedef struct rcp_bulk rcp_bulk;
typedef struct rcp_bulk_op rcp_bulk_op;

/* Permissions (what peers may do with a handle). */
enum {
	RCP_BULK_READ_ONLY = 1u << 0,  /* peers may PULL from it */
	RCP_BULK_WRITE_ONLY = 1u << 1, /* peers may PUSH into it */
	RCP_BULK_READWRITE = (1u << 0) | (1u << 1),
};

/* Transfer directions. */
enum {
	RCP_BULK_PULL = 0, /* remote -> local */
	RCP_BULK_PUSH = 1, /* local -> remote */
};

/* Most segments one handle may have (also the limit on deserialised ones). */
#define RCP_BULK_MAX_SEGS 65536

/* Completion callback of a transfer: STATUS is 0 or an RCP_E* code. */
typedef void (*rcp_bulk_cb)(void *arg, int status);

/* Per-chunk callback of a pipelined transfer: chunk INDEX covers
 * [OFF, OFF+LEN) relative to the start of the transfer (add remote_off /
 * local_off for handle offsets) and completed with STATUS.  Chunks may
 * complete in any order.  Returning nonzero stops the pipeline: chunks not
 * yet started are not started and the pipeline completes with that value
 * (use a negative RCP_E* code, e.g. RCP_ECANCELED). */
typedef int (*rcp_bulk_chunk_cb)(void *arg, int status, size_t index, uint64_t off, size_t len);

struct rcp_bulk_stats {
	uint64_t rma_ops, rma_bytes;       /* one-sided nic get/put calls, bytes */
	uint64_t emu_ops, emu_bytes;       /* emulated pieces requested, bytes */
	uint64_t served_ops, served_bytes; /* emulated pieces served as owner */
	uint64_t refused;                  /* requests refused as owner (EACCES) */
	uint64_t regcache_hits, regcache_misses;
};

/* ---- contexts ---------------------------------------------------------- */

/* Opens the bulk context of EP (which stays owned by the caller and must
 * outlive the context).  Posts receives for emulated-RMA requests on
 * RCP_ANY_CHAN; the endpoint should be opened with RCP_EP_ACCEPT if
 * unknown peers will access its handles.
 * Returns 0, RCP_EINVAL, RCP_ENOMEM, or an rcp_irecv code. */
int rcp_bulk_ctx_open(rcp_ep *ep, rcp_bulk_ctx **out);

/* Closes the context: pending transfers complete with RCP_ECLOSED (their
 * callbacks run now; op pointers not yet reported by test/wait become
 * invalid), accesses being served are finished or aborted, handles still
 * alive are freed.  NULL accepted. */
void rcp_bulk_ctx_close(rcp_bulk_ctx *ctx);

/* The endpoint of the context (NULL for NULL). */
rcp_ep *rcp_bulk_ctx_ep(const rcp_bulk_ctx *ctx);

/* Progresses the endpoint (rcp_progress) and the context: serves peers'
 * emulated accesses, advances transfers, runs completion callbacks.
 * Returns the number of operations completed (>= 0), RCP_EINVAL, or a
 * negative rcp_progress code. */
int rcp_bulk_progress(rcp_bulk_ctx *ctx);

/* Sleep check for a caller that waits on rcp_ep_fd(): returns 0 if it may
 * sleep now, RCP_EAGAIN if there is work (completions to deliver, frames
 * waiting): call rcp_bulk_progress() instead.  RCP_EINVAL for NULL. */
int rcp_bulk_arm(rcp_bulk_ctx *ctx);

/* Copies the context's counters.  Returns 0 or RCP_EINVAL. */
int rcp_bulk_get_stats(const rcp_bulk_ctx *ctx, struct rcp_bulk_stats *st);

/* ---- handles ------------------------------------------------------------ */

/* Creates a local handle over NSEG segments PTRS[i], LENS[i] (1 <= NSEG <=
 * RCP_BULK_MAX_SEGS; zero-length segments are allowed and take no room;
 * a NULL pointer is allowed only with length 0) with permission PERM
 * (RCP_BULK_READ_ONLY / WRITE_ONLY / READWRITE).  The memory must stay
 * valid until rcp_bulk_free.  Registers it with the nic where it offers
 * RMA (through the registration cache); if the nic refuses (e.g. its table
 * is full) the handle is still created and peers reach it by emulation.
 * Returns 0, RCP_EINVAL, RCP_ERANGE (total size overflows), RCP_ENOMEM. */
int rcp_bulk_create(rcp_bulk_ctx *ctx, int nseg, void *const ptrs[], const size_t lens[],
                    unsigned perm, rcp_bulk **out);

/* Frees a local or remote handle.  A local handle's key is revoked at once:
 * later accesses by peers fail with RCP_EACCES; accesses being served are
 * finished first (this may progress the endpoint, bounded by the peer
 * timeout).  Returns 0, or RCP_EBUSY (a transfer of this
 * process still uses the handle: the handle is not freed).  NULL gives 0. */
int rcp_bulk_free(rcp_bulk *h);

/* Logical size in bytes (sum of the segment lengths); 0 for NULL. */
uint64_t rcp_bulk_size(const rcp_bulk *h);

/* Permission of the handle (RCP_BULK_*), 0 for NULL. */
unsigned rcp_bulk_perm(const rcp_bulk *h);

/* Number of segments; 0 for NULL. */
int rcp_bulk_nseg(const rcp_bulk *h);

/* Maps logical offset OFF of H to (segment *SEG, offset *SEGOFF within it):
 * the segment holding byte OFF (zero-length segments are skipped).  OFF ==
 * size maps to (nseg, 0).  Returns 0, RCP_EINVAL, RCP_ERANGE (OFF > size). */
int rcp_bulk_locate(const rcp_bulk *h, uint64_t off, int *seg, uint64_t *segoff);

/* Bytes rcp_bulk_serialize needs for H; 0 for NULL. */
size_t rcp_bulk_serialized_size(const rcp_bulk *h);

/* Writes H (local, or a remote handle to forward) into BUF; *LEN is in:
 * buffer size, out: bytes written.  Returns 0, RCP_EINVAL, RCP_ERANGE
 * (buffer too small; *LEN then holds the size needed). */
int rcp_bulk_serialize(const rcp_bulk *h, void *buf, size_t *len);

/* Reads a handle serialised by a peer into a new remote handle of CTX.
 * Validates the layout (never the key: only the owner can).  Returns 0,
 * RCP_EINVAL, RCP_EPROTO (malformed, truncated, other byte order, too many
 * segments, sizes overflow), RCP_ENOMEM. */
int rcp_bulk_deserialize(rcp_bulk_ctx *ctx, const void *buf, size_t len, rcp_bulk **out);

/* ---- transfers ---------------------------------------------------------- */

/* Starts moving LEN bytes between REMOTE (a deserialised handle owned by
 * the peer at the other end of CHAN) at REMOTE_OFF and LOCAL (a handle of
 * this context) at LOCAL_OFF, in direction DIR (RCP_BULK_PULL/PUSH).
 * Non-blocking.  On completion CB(ARG, status) runs once (CB may be NULL).
 * If OP is not NULL, *OP gets an operation to test/wait/cancel, which stays
 * valid until rcp_bulk_test/wait reports its completion; if OP is NULL the
 * operation is released after its callback.  LEN 0 completes with 0.
 * Returns 0, RCP_EINVAL (NULL, REMOTE not deserialised, LOCAL not local,
 * bad DIR, CHAN of another endpoint), RCP_ERANGE (a range outside a
 * handle), RCP_EACCES (REMOTE's permission forbids DIR), RCP_ENOMEM. */
int rcp_bulk_transfer(rcp_bulk_ctx *ctx, rcp_chan *chan, int dir, rcp_bulk *remote,
                      uint64_t remote_off, rcp_bulk *local, uint64_t local_off, uint64_t len,
                      rcp_bulk_cb cb, void *arg, rcp_bulk_op **op);

/* A pipelined transfer: the same range as rcp_bulk_transfer, moved as
 * chunks of CHUNK bytes (the last may be shorter), at most DEPTH in flight;
 * CHUNK_CB (may be NULL) runs per chunk, then CB once for the whole (status:
 * 0, the first chunk error, or the value a CHUNK_CB returned).  Chunks add
 * no system calls beyond their own RMA (shm) or messages (emulation).
 * Returns like rcp_bulk_transfer, and RCP_EINVAL for CHUNK 0 or DEPTH < 1. */
int rcp_bulk_pipeline(rcp_bulk_ctx *ctx, rcp_chan *chan, int dir, rcp_bulk *remote,
                      uint64_t remote_off, rcp_bulk *local, uint64_t local_off, uint64_t len,
                      uint64_t chunk, int depth, rcp_bulk_chunk_cb chunk_cb, rcp_bulk_cb cb,
                      void *arg, rcp_bulk_op **op);

/* If OP has completed: stores its status in *STATUS (may be NULL), releases
 * OP and returns 0; else progresses once and returns RCP_EAGAIN (OP stays).
 * Returns RCP_EINVAL for NULL. */
int rcp_bulk_test(rcp_bulk_op *op, int *status);

/* Waits up to TIMEOUT_NS (< 0: forever) for OP, progressing the context
 * (spin then sleep, like rcp_wait).  Returns like rcp_bulk_test, or
 * RCP_ETIMEDOUT (OP stays pending), or a negative progress code. */
int rcp_bulk_wait(rcp_bulk_op *op, int64_t timeout_ns, int *status);

/* Cancels OP: it completes with RCP_ECANCELED unless it completed first.
 * Pieces already requested from the owner are waited for (no message is
 * left unmatched and no buffer is written after completion), pieces not
 * started are not started.  Returns 0 or RCP_EINVAL. */
int rcp_bulk_cancel(rcp_bulk_op *op);

#ifdef __cplusplus
}
#endif
#endif
