/*
 * rcp/ep_int.h — what the layers inside the library (rpc/, bulk/) use of
 * an endpoint beyond the public API.
 */
#ifndef RCP_EP_INT_H
#define RCP_EP_INT_H

#include <rcp/rcp.h>

/* rcp_ep_wait with the policy MODE (RCPI_WAIT_*, common/wait.h) for this
 * wait only; MODE < 0: the endpoint's.  Returns like rcp_ep_wait. */
int rcpi_ep_wait_mode(rcp_ep *ep, int mode, int (*done)(void *), void *arg, int64_t timeout_ns);

#endif
