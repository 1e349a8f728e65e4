/*
 * rcp/ep_int.h — what the layers inside the library (rpc/, bulk/) use of
 * an endpoint beyond the public API.
 */
#ifndef RCP_EP_INT_H
#define RCP_EP_INT_H

#include <stdint.h>

#include <rcp/rcp.h>

#include "rcp/core.h"

/* rcp_ep_wait with the policy MODE (RCPI_WAIT_*, common/wait.h) for this
 * wait only; MODE < 0: the endpoint's.  Returns like rcp_ep_wait. */
int rcpi_ep_wait_mode(rcp_ep *ep, int mode, int (*done)(void *), void *arg, int64_t timeout_ns);

/* For rcp/request.c (the request API over the endpoint's core). */
rcp_ep *rcpi_ep_of_chan(const rcp_chan *ch);
rcpc_core *rcpi_ep_core(const rcp_ep *ep);
int rcpi_ep_closing(const rcp_ep *ep); /* closing: new posts fail (RCP_ECLOSED) */
uint64_t rcpi_ep_now(rcp_ep *ep);      /* the time to stamp a post with */
int rcpi_ep_progress(rcp_ep *ep);      /* one round of progress (rcp_progress) */
/* After a call into the core: performs the RMA transfers it asked for, if
 * any (endpoint.c, rma_run); the next progress counts what they complete. */
void rcpi_ep_rma(rcp_ep *ep);
/* The callback of a request nobody waits for: it does nothing, the
 * request is released after it. */
void rcpi_ep_cb_drop(rcp_req *req, const struct rcp_status *st, void *user);

#endif
