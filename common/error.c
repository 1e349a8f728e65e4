/* common/error.c — names for RCP_E* codes and the errno mapping. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"

const char *rcp_strerror(int code)
{
	switch (code) {
	case RCP_OK: return "success";
	case RCP_EINVAL: return "invalid argument";
	case RCP_ENOMEM: return "out of memory";
	case RCP_EADDR: return "malformed or unsupported address";
	case RCP_EMSGSIZE: return "frame larger than the MTU";
	case RCP_EAGAIN: return "resource temporarily unavailable";
	case RCP_ENOTSUP: return "operation not supported by this backend";
	case RCP_EPEER: return "peer unreachable or gone";
	case RCP_ETIMEDOUT: return "operation timed out";
	case RCP_ECANCELED: return "operation canceled";
	case RCP_ESYS: return "system call failed";
	case RCP_EPERM: return "missing privilege or capability";
	case RCP_ENOENT: return "no such backend, endpoint or object";
	case RCP_EADDRINUSE: return "address already in use";
	case RCP_EPROTO: return "malformed frame or protocol violation";
	case RCP_ETRUNC: return "message truncated";
	case RCP_EBUSY: return "resource busy";
	case RCP_ECLOSED: return "endpoint or channel closed";
	case RCP_EACCES: return "access not permitted by key or handle";
	case RCP_ERANGE: return "value out of range";
	case RCP_ENODEV: return "no such device";
	default: return "unknown error";
	}
}

int rcpi_grow_zeroed(void **arr, int *n, size_t elem, int need)
{
	int nn = *n ? *n : 16;
	char *na;
	if (need < *n)
		return 0;
	while (nn <= need)
		nn *= 2;
	na = realloc(*arr, elem * (size_t)nn);
	if (!na)
		return RCP_ENOMEM;
	memset(na + elem * (size_t)*n, 0, elem * (size_t)(nn - *n));
	*arr = na;
	*n = nn;
	return 0;
}

int rcpi_errno_to_rcp(int err)
{
	switch (err) {
	case 0: return RCP_OK;
	case EINVAL: return RCP_EINVAL;
	case ENOMEM:
	case ENOBUFS: return RCP_ENOMEM;
	case EAGAIN: return RCP_EAGAIN;
	case EMSGSIZE: return RCP_EMSGSIZE;
	case EPERM:
	case EACCES: return RCP_EPERM;
	case ENOENT: return RCP_ENOENT;
	case EADDRINUSE: return RCP_EADDRINUSE;
	case EADDRNOTAVAIL:
	case EAFNOSUPPORT: return RCP_EADDR;
	case ESRCH:
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ECONNRESET:
	case EPIPE: return RCP_EPEER;
	case ETIMEDOUT: return RCP_ETIMEDOUT;
	case EBUSY: return RCP_EBUSY;
	case EOPNOTSUPP: return RCP_ENOTSUP;
	case ERANGE: return RCP_ERANGE;
	default: return RCP_ESYS;
	}
}
