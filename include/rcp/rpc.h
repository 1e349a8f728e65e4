/*
 * rcp/rpc.h — Mercury-style asynchronous RPC over RCP channels.
 *
 * A context (rcp_rpc) is bound to one rcp_ep.  Calls are registered by
 * name; the name gives a stable 64-bit id (FNV-1a), the same in every
 * process, so client and server agree without exchanging tables.  Each
 * call has an input and an output proc (encoder/decoder); a server sets a
 * handler per id.
 *
 * Client: rcp_rpc_forward() is non-blocking.  The call completes exactly
 * once, with a status: 0, RCP_ETIMEDOUT (its timeout passed),
 * RCP_ECANCELED (rcp_rpc_cancel), RCP_EPEER (server unreachable, died or
 * restarted), RCP_ENOENT (no handler for the id at the server),
 * RCP_EPROTO (input or output did not encode/decode: bad proc or bad
 * data), RCP_ENOTSUP (the server uses another byte order), RCP_ECLOSED
 * (context destroyed), or the negative code the handler responded with.
 * Completion is either a callback (run from rcp_rpc_progress/loop/wait,
 * never from inside forward) or a request object tested/waited for.
 *
 * Server: the handler runs from the progress loop with a handle; it reads
 * the input (rcp_rpc_get_input) and answers with rcp_rpc_respond, at once
 * or later from any point of the progress loop (asynchronously).
 *
 * Arguments: encoded in host byte order (the header says which order;
 * a peer of the other order is refused with RCP_ENOTSUP, never misread)
 * and sent in one rcp message.  Up to RCP_RPC_MSG_MAX (16 KiB, capped at
 * one frame) the message is eager; a larger encoded input or output moves
 * in a second rcp message which the receiver pulls when it is ready (RMA
 * rendezvous on shm) — transparently.  See docs/rpc.md.
 *
 * Remote fetch (RFP, shm only): with RCP_RPC_FETCH the client writes
 * requests into a shared-memory segment of the server and fetches results
 * from it, per (server, rpc id) switching to server-reply when the server
 * is slow and back when it is fast again.  See docs/rpc.md.
 *
 * Threads: one thread per context (like its endpoint).  Tags with the top
 * byte 0xFE are reserved for RCP's layers (rpc: 0xFE02..., bulk: 0xFE01...;
 * RCP_RPC_TAG_MASK/BASE); applications must not use them.
 */
#ifndef RCP_RPC_H
#define RCP_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <rcp/bulk.h>
#include <rcp/error.h>
#include <rcp/rcp.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tags carrying rpc traffic: (tag & RCP_RPC_TAG_MASK) == RCP_RPC_TAG_BASE. */
#define RCP_RPC_TAG_MASK 0xffff000000000000ull
#define RCP_RPC_TAG_BASE 0xfe02000000000000ull

typedef struct rcp_rpc rcp_rpc;
typedef struct rcp_rpc_req rcp_rpc_req;
typedef struct rcp_rpc_handle rcp_rpc_handle;
typedef struct rcp_proc rcp_proc;

/* ---- procs ------------------------------------------------------------- */

enum rcp_proc_op {
	RCP_PROC_ENCODE = 0,
	RCP_PROC_DECODE = 1,
	RCP_PROC_SIZE = 2, /* count the bytes an encode would need */
};

/* Encoder/decoder state.  Public so procs can be inlined; use the
 * functions below, not the fields.  Errors are sticky: after the first
 * one every built-in does nothing and returns it. */
struct rcp_proc {
	unsigned char *buf;
	size_t size, pos;
	int op;
	int error;
	rcp_bulk_ctx *bulk; /* for decoding bulk handles (may be NULL) */
};

/* A proc encodes *DATA (ENCODE/SIZE) or decodes into *DATA (DECODE).
 * Returns 0 or a negative code (then rcp_proc_error(p) is set too). */
typedef int (*rcp_proc_fn)(rcp_proc *p, void *data);

/* A byte array.  Decoded: DATA points into the received message (valid
 * as long as the input/output is, see rcp_rpc_get_input). */
struct rcp_bytes {
	const void *data;
	size_t len;
};

/* The built-ins below return 0 or the sticky error, which the first
 * failure sets: RCP_ERANGE (encoding: the buffer is full; rcp_proc_string
 * or rcp_proc_bytes: a value too long for its length prefix), RCP_EPROTO
 * (decoding: the message ends early or is malformed, or a bulk handle
 * does not deserialise), RCP_EINVAL (a bad operation, or a NULL bulk
 * handle to encode).  A NULL P or value pointer returns RCP_EINVAL and
 * leaves the error alone. */
int rcp_proc_u8(rcp_proc *p, uint8_t *v);
int rcp_proc_u16(rcp_proc *p, uint16_t *v);
int rcp_proc_u32(rcp_proc *p, uint32_t *v);
int rcp_proc_u64(rcp_proc *p, uint64_t *v);
int rcp_proc_i8(rcp_proc *p, int8_t *v);
int rcp_proc_i16(rcp_proc *p, int16_t *v);
int rcp_proc_i32(rcp_proc *p, int32_t *v);
int rcp_proc_i64(rcp_proc *p, int64_t *v);
int rcp_proc_float(rcp_proc *p, float *v);
int rcp_proc_double(rcp_proc *p, double *v);
/* NUL-terminated string (NULL allowed).  Decoded: points into the
 * message; the decoder checks the length and the terminating NUL. */
int rcp_proc_string(rcp_proc *p, const char **s);
/* Length-prefixed byte array (up to 4 GiB - 2). */
int rcp_proc_bytes(rcp_proc *p, struct rcp_bytes *b);
/* A bulk handle (rcp_bulk_serialize / rcp_bulk_deserialize).  Decoding
 * needs the context's bulk ctx (rcp_rpc_config.bulk) and creates a remote
 * handle the caller owns: rcp_bulk_free it when done (also after a later
 * field failed to decode).  NULL handles are not allowed. */
int rcp_proc_bulk(rcp_proc *p, rcp_bulk **h);
/* LEN raw bytes of fixed size (arrays of known length). */
int rcp_proc_raw(rcp_proc *p, void *data, size_t len);
/* Runs FN on DATA (nested structs).  Returns like FN. */
int rcp_proc_struct(rcp_proc *p, rcp_proc_fn fn, void *data);
/* The operation (RCP_PROC_*), and the sticky error (0 if none); each
 * RCP_EINVAL for a NULL P. */
int rcp_proc_op(const rcp_proc *p);
int rcp_proc_error(const rcp_proc *p);

/* Defines `int NAME(rcp_proc *p, void *data)` over a struct TYPE whose
 * fields are processed by the statements that follow, with `v` the
 * struct pointer:
 *     RCP_PROC_DEFINE(proc_point, struct point,
 *                     rcp_proc_i32(p, &v->x); rcp_proc_i32(p, &v->y))
 */
#define RCP_PROC_DEFINE(name, type, ...)                                                           \
	static int name(rcp_proc *p, void *data)                                                   \
	{                                                                                          \
		type *v = (type *)data;                                                            \
		(void)v;                                                                           \
		__VA_ARGS__;                                                                       \
		return rcp_proc_error(p);                                                          \
	}

/* Encodes DATA with FN into BUF (LEN bytes); *USED gets the size.
 * Returns 0, RCP_EINVAL, RCP_ERANGE (BUF too small), or FN's code. */
int rcp_proc_encode(rcp_proc_fn fn, const void *data, void *buf, size_t len, size_t *used);
/* Bytes FN would encode for DATA (0 on error).  *RC gets the code. */
size_t rcp_proc_size(rcp_proc_fn fn, const void *data, int *rc);
/* Decodes BUF (LEN bytes, every byte must be used) into DATA.  Returns 0,
 * RCP_EINVAL or RCP_EPROTO (short, long or malformed input). */
int rcp_proc_decode(rcp_proc_fn fn, void *data, const void *buf, size_t len);

/* ---- contexts ------------------------------------------------------------- */

/* rcp_rpc_config.flags */
enum {
	RCP_RPC_SPIN = 1u << 0,   /* loops/waits never sleep */
	RCP_RPC_SLEEP = 1u << 1,  /* loops/waits sleep at once (default: spin, then sleep) */
	RCP_RPC_FETCH = 1u << 2,  /* client: use remote fetch (RFP) where the server offers it */
	RCP_RPC_NO_RFP = 1u << 3, /* server: do not offer remote fetch */
};

struct rcp_rpc_config {
	unsigned flags;     /* RCP_RPC_*; RCP_WAIT and RCP_RPC_MODE also apply */
	int recvs;          /* server: request receives kept posted (0: RCP_RPC_RECVS) */
	int64_t timeout_ns; /* default per-call timeout (0: RCP_RPC_TIMEOUT_MS; <0 none) */
	/* The endpoint's bulk context, if bulk handles travel in arguments
	 * (decoding them needs it); progressed with the rpc context. */
	rcp_bulk_ctx *bulk;
};

struct rcp_rpc_stats {
	uint64_t forwarded, completed_ok, failed, timeouts, canceled, peer_errors;
	uint64_t handled, responded, bad_msgs, stale_responses, foreign_order;
	uint64_t overflow_in, overflow_out; /* arguments moved by a second message */
	uint64_t rfp_calls, rfp_fetch_hits, rfp_fetch_misses, rfp_to_reply, rfp_to_fetch;
	/* Bookkeeping work: completion tests of the context's rcp requests
	 * plus calls examined by its timers.  A small constant per call
	 * (about 3 on each side) however many calls are in flight. */
	uint64_t polls;
	uint64_t rfp_refused; /* RFP segments not ours / not 0600 / short: refused (docs/rpc.md) */
	/* Requests and responses that travelled several to one rcp message
	 * (docs/rpc.md, batches): sent so, received so. */
	uint64_t batched_out, batched_in;
};

/* Creates a context on EP (which must outlive it; a server's EP is opened
 * with RCP_EP_ACCEPT).  CFG may be NULL.  Returns 0, RCP_EINVAL,
 * RCP_ENOMEM. */
int rcp_rpc_create(rcp_ep *ep, const struct rcp_rpc_config *cfg, rcp_rpc **out);
/* Completes every pending call with RCP_ECLOSED (callbacks run), drops
 * unanswered handles, frees everything.  NULL accepted. */
void rcp_rpc_destroy(rcp_rpc *rpc);
rcp_ep *rcp_rpc_ep(const rcp_rpc *rpc);
/* Copies RPC's counters into ST.  0, or RCP_EINVAL (RPC or ST NULL). */
int rcp_rpc_get_stats(const rcp_rpc *rpc, struct rcp_rpc_stats *st);

/* The stable id of NAME (FNV-1a 64; never 0). */
uint64_t rcp_rpc_id(const char *name);
/* Registers NAME with its procs (NULL: no data), *ID (may be NULL) gets
 * its id.  Registering the same name again with the same procs is a no-op;
 * another name whose id collides, or the same name with other procs,
 * is refused.  Returns 0, RCP_EINVAL, RCP_EADDRINUSE (collision),
 * RCP_ENOMEM. */
int rcp_rpc_register(rcp_rpc *rpc, const char *name, rcp_proc_fn in_proc, rcp_proc_fn out_proc,
                     uint64_t *id);

/* ---- client -------------------------------------------------------------- */

/* Completion callback: STATUS as in the header comment; OUT is the
 * caller's output struct (decoded if STATUS is 0).  REQ is valid until
 * the callback returns. */
typedef void (*rcp_rpc_cb)(rcp_rpc_req *req, int status, void *out, void *arg);

/* Forwards call ID with input IN (encoded before return: IN may be reused
 * at once) to the server on CH.  OUT receives the decoded output; strings
 * and byte arrays in it point into the response and stay valid until the
 * callback returns / rcp_rpc_req_free.  TIMEOUT_NS: 0 the context default,
 * < 0 none.  With CB, the callback reports completion (REQ may be NULL);
 * without, REQ is required and completes through rcp_rpc_test/wait, then
 * rcp_rpc_req_free.  Returns 0, RCP_EINVAL, RCP_ENOENT (ID not
 * registered here), RCP_EPROTO (input does not encode), RCP_ENOMEM,
 * RCP_EPEER / RCP_ECLOSED (channel already failed). */
int rcp_rpc_forward(rcp_rpc *rpc, rcp_chan *ch, uint64_t id, const void *in, void *out,
                    int64_t timeout_ns, rcp_rpc_cb cb, void *arg, rcp_rpc_req **req);
/* Status of a request without a callback: RCP_EAGAIN while pending, else
 * its final status (may be asked again).  rcp_rpc_test progresses once
 * (its error is returned).  RCP_EINVAL for NULL, a request with a
 * callback, or one freed. */
int rcp_rpc_test(rcp_rpc_req *req);
/* Waits up to TIMEOUT_NS (<0: forever) for REQ; returns its status, or
 * RCP_EAGAIN if it is still pending when the wait ends (the timeout
 * passed), a progress error, or RCP_EINVAL as rcp_rpc_test. */
int rcp_rpc_wait(rcp_rpc_req *req, int64_t timeout_ns);
/* Frees a completed request without a callback.  Returns 0, RCP_EINVAL,
 * RCP_EBUSY (still pending: cancel it first). */
int rcp_rpc_req_free(rcp_rpc_req *req);
/* Cancels a pending call: it completes with RCP_ECANCELED (callback on the
 * next progress) unless it has completed already.  A late response is
 * dropped.  Returns 0 or RCP_EINVAL. */
int rcp_rpc_cancel(rcp_rpc_req *req);

/* ---- server -------------------------------------------------------------- */

typedef void (*rcp_rpc_handler)(rcp_rpc_handle *h, void *arg);

/* Sets the handler of a registered ID (NULL removes it).  The first
 * handler makes the context a server: it posts RECVS request receives.
 * Returns 0, RCP_EINVAL, RCP_ENOENT (not registered), RCP_ENOMEM. */
int rcp_rpc_set_handler(rcp_rpc *rpc, uint64_t id, rcp_rpc_handler fn, void *arg);
/* Decodes the call's input into IN (strings/bytes point into the request,
 * valid until rcp_rpc_respond).  Returns 0, RCP_EINVAL, RCP_EPROTO. */
int rcp_rpc_get_input(rcp_rpc_handle *h, void *in);
uint64_t rcp_rpc_handle_id(const rcp_rpc_handle *h);
rcp_chan *rcp_rpc_handle_chan(const rcp_rpc_handle *h);
/* Answers the call, once, and releases H: STATUS 0 sends OUT (encoded
 * before return), a negative code sends only that status.  Returns 0,
 * RCP_EINVAL, RCP_EPROTO (OUT does not encode: the client gets
 * RCP_EPROTO), RCP_ENOMEM, RCP_EPEER (client gone: H is released anyway). */
int rcp_rpc_respond(rcp_rpc_handle *h, const void *out, int status);

/* ---- progress ------------------------------------------------------------ */

/* One round of progress without blocking: receives, runs handlers and
 * callbacks, fires timeouts.  Returns the number of events (handlers +
 * completions) or a negative code. */
int rcp_rpc_progress(rcp_rpc *rpc);
/* Progresses until at least one event or TIMEOUT_NS (<0: forever),
 * spinning then sleeping on the endpoint fd (per RCP_RPC_SPIN/SLEEP).
 * Returns the events (> 0), RCP_ETIMEDOUT, or a negative code. */
int rcp_rpc_loop(rcp_rpc *rpc, int64_t timeout_ns);
/* For external event loops: ns until rcp_rpc_progress must run even if
 * rcp_ep_fd() stays quiet (0: now, -1: no timer).  Sleep on rcp_ep_fd()
 * after rcp_ep_arm() returns 0. */
int64_t rcp_rpc_timeout_ns(const rcp_rpc *rpc);

#ifdef __cplusplus
}
#endif
#endif
