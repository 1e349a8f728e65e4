/*
 * rcp/error.h — error codes shared by every RCP layer.
 *
 * Every RCP function returns 0 (or a non-negative count) on success and a
 * negative RCP_E* code on failure.  Codes are stable: they are part of the
 * ABI and never renumbered.  rcp_strerror() names them.
 */
#ifndef RCP_ERROR_H
#define RCP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum rcp_error {
	RCP_OK = 0,
	RCP_EINVAL = -1,      /* invalid argument */
	RCP_ENOMEM = -2,      /* out of memory */
	RCP_EADDR = -3,       /* malformed or unsupported address */
	RCP_EMSGSIZE = -4,    /* frame larger than the MTU */
	RCP_EAGAIN = -5,      /* no room / nothing ready now; try again */
	RCP_ENOTSUP = -6,     /* operation not offered by this backend */
	RCP_EPEER = -7,       /* peer unreachable, vanished or silent */
	RCP_ETIMEDOUT = -8,   /* operation timed out */
	RCP_ECANCELED = -9,   /* operation canceled */
	RCP_ESYS = -10,       /* a system call failed (see errno, logs) */
	RCP_EPERM = -11,      /* missing privilege or capability */
	RCP_ENOENT = -12,     /* no such backend, endpoint or object */
	RCP_EADDRINUSE = -13, /* address already in use */
	RCP_EPROTO = -14,     /* malformed frame or protocol violation */
	RCP_ETRUNC = -15,     /* message longer than the buffer */
	RCP_EBUSY = -16,      /* resource busy */
	RCP_ECLOSED = -17,    /* endpoint or channel closed */
	RCP_EACCES = -18,     /* access outside what a key/handle grants */
	RCP_ERANGE = -19,     /* value out of range */
	RCP_ENODEV = -20,     /* no such device (verbs: no RDMA device or port) */
};

/* Returns a static, human-readable name for an RCP_E* code (or for 0).
 * Unknown values give "unknown error".  Never returns NULL. */
const char *rcp_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
