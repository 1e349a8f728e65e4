/*
 * rcp/request.c — the request API of an endpoint: posting sends and
 * receives (plain, with a completion callback, detached), testing, waiting
 * and cancelling them, probing.  Each call stamps the time and hands the
 * request to the core (rcp/core.h); waits run on the endpoint's one waiter
 * (common/wait.c).  Depends on rcp/endpoint.c through rcp/ep_int.h only;
 * endpoint.c knows nothing of this file.
 */
#include <rcp/rcp.h>

#include "common/rcp_common.h"
#include "common/wait.h"
#include "rcp/core.h"
#include "rcp/ep_int.h"

/* Posts of this size or more tell the core whether the CPU is crowded
 * (where RMA starts depends on it: rcp/start.c, rcpi_rma_min); smaller ones
 * never move by RMA and skip the look. */
#define CROWD_LOOK_MIN 4096u

/* Inlined into each of its callers: a call of its own cost an 8 B round
 * trip ~26 instructions (perf/callgrind.sh).  irecv below the same way,
 * since rcpc_irecv_api is inlined whole too (session 20: -20; before, with
 * rcpc_irecv then a call of its own, it cost 50 more). */
static inline __attribute__((always_inline)) int isend(rcp_chan *ch, uint64_t tag, const void *buf,
                                                       size_t len, int sync, rcp_req **req,
                                                       rcp_req_cb cb, void *user)
{
	rcp_ep *ep;
	uint64_t now;
	rcp_req *r;
	int rc;
	if (!ch || !req)
		return RCP_EINVAL;
	ep = rcpi_ep_of_chan(ch);
	if (rcpi_ep_closing(ep))
		return RCP_ECLOSED;
	now = rcpi_ep_now(ep);
	if (len >= CROWD_LOOK_MIN)
		rcpc_set_crowded(rcpi_ep_core(ep), rcpi_wait_crowded(now));
	rc = rcpc_isend_api(ch, tag, buf, len, sync, now, &r);
	if (rc)
		return rc;
	if (cb)
		rcpc_req_set_cb(r, cb, user);
	rcpi_ep_rma(ep); /* a put it (or a send queued before it) asked for */
	*req = r;
	return 0;
}

int rcp_isend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req **req)
{
	return isend(ch, tag, buf, len, 0, req, NULL, NULL);
}

int rcp_issend(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req **req)
{
	return isend(ch, tag, buf, len, 1, req, NULL, NULL);
}

int rcp_isend_cb(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req_cb cb, void *user,
                 rcp_req **req)
{
	rcp_req *r;
	if (!cb)
		return RCP_EINVAL;
	return isend(ch, tag, buf, len, 0, req ? req : &r, cb, user);
}

int rcp_issend_cb(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req_cb cb,
                  void *user, rcp_req **req)
{
	rcp_req *r;
	if (!cb)
		return RCP_EINVAL;
	return isend(ch, tag, buf, len, 1, req ? req : &r, cb, user);
}

/* One segment of data (empty ones left out) is rcp_isend, by the same
 * path; several go to the core's gather send, whose RMA-free frames need
 * no rcpi_ep_rma here (a put a send queued before it asked for goes at
 * the next progress; a second caller would also take rcpi_ep_rma out of
 * line, +10 instructions per rcp_isend). */
int rcp_isendv(rcp_chan *ch, uint64_t tag, const struct rcp_iov *iov, int iovcnt, rcp_req **req)
{
	rcp_ep *ep;
	int n = 0, one = 0;
	if (!ch || !req || iovcnt < 0 || (!iov && iovcnt))
		return RCP_EINVAL;
	for (int i = 0; i < iovcnt && n < 2; i++)
		if (iov[i].len) {
			n++;
			one = i;
		}
	if (n < 2)
		return isend(ch, tag, n ? iov[one].base : NULL, n ? iov[one].len : 0, 0, req, NULL,
		             NULL);
	ep = rcpi_ep_of_chan(ch);
	if (rcpi_ep_closing(ep))
		return RCP_ECLOSED;
	return rcpc_isendv(ch, tag, iov, iovcnt, rcpi_ep_now(ep), req);
}

int rcp_isend_detached(rcp_chan *ch, uint64_t tag, const void *buf, size_t len, rcp_req **req)
{
	rcp_ep *ep;
	int rc;
	if (!ch || !req)
		return RCP_EINVAL;
	ep = rcpi_ep_of_chan(ch);
	if (rcpi_ep_closing(ep))
		return RCP_ECLOSED;
	rc = rcpc_isend_detached(ch, tag, buf, len, rcpi_ep_now(ep), rcpi_ep_cb_drop, req);
	rcpi_ep_rma(ep); /* a send queued before it may start by RMA */
	return rc;
}

static inline __attribute__((always_inline)) int irecv(rcp_ep *ep, rcp_chan *ch, uint64_t tag,
                                                       void *buf, size_t len, rcp_req **req,
                                                       rcp_req_cb cb, void *user)
{
	uint64_t now;
	rcp_req *r;
	int rc;
	if (!ep || !req)
		return RCP_EINVAL;
	if (rcpi_ep_closing(ep))
		return RCP_ECLOSED;
	now = rcpi_ep_now(ep);
	if (len >= CROWD_LOOK_MIN)
		rcpc_set_crowded(rcpi_ep_core(ep), rcpi_wait_crowded(now));
	rc = rcpc_irecv_api(rcpi_ep_core(ep), ch, tag, buf, len, now, &r);
	if (rc)
		return rc;
	if (cb)
		rcpc_req_set_cb(r, cb, user);
	rcpi_ep_rma(ep); /* the get of a held RTS it matched */
	*req = r;
	return 0;
}

int rcp_irecv(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, rcp_req **req)
{
	return irecv(ep, ch, tag, buf, len, req, NULL, NULL);
}

int rcp_irecv_cb(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, rcp_req_cb cb,
                 void *user, rcp_req **req)
{
	rcp_req *r;
	if (!cb)
		return RCP_EINVAL;
	return irecv(ep, ch, tag, buf, len, req ? req : &r, cb, user);
}

int rcp_chan_watch(rcp_chan *ch, rcp_req_cb cb, void *user, rcp_req **req)
{
	rcp_req *r;
	int rc;
	if (!ch || (!cb && !req))
		return RCP_EINVAL;
	if (rcpi_ep_closing(rcpi_ep_of_chan(ch)))
		return RCP_ECLOSED;
	rc = rcpc_chan_watch(ch, &r);
	if (rc)
		return rc;
	if (cb)
		rcpc_req_set_cb(r, cb, user);
	if (req)
		*req = r;
	return 0;
}

int rcp_irecv_next(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, rcp_req **req)
{
	if (!ep || !req)
		return RCP_EINVAL;
	if (rcpi_ep_closing(ep))
		return RCP_ECLOSED;
	return rcpc_irecv_next(rcpi_ep_core(ep), ch, tag, buf, len, rcpi_ep_now(ep), req);
}

int rcp_req_set_cb(rcp_req *req, rcp_req_cb cb, void *user)
{
	if (!req)
		return RCP_EINVAL;
	rcpc_req_set_cb(req, cb ? cb : rcpi_ep_cb_drop, cb ? user : NULL);
	return 0;
}

int rcp_mcast(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t len, rcp_req **req)
{
	int rc;
	if (!chans || n <= 0 || !chans[0])
		return RCP_EINVAL;
	rc = rcpc_mcast(chans, n, tag, buf, len, rcpi_now_ns(), req);
	rcpi_ep_rma(rcpi_ep_of_chan(chans[0]));
	return rc;
}

int rcp_mcastv(rcp_chan **chans, int n, uint64_t tag, const struct rcp_iov *iov, int iovcnt,
               rcp_req **req)
{
	int rc;
	if (!chans || n <= 0 || !chans[0])
		return RCP_EINVAL;
	rc = rcpc_mcastv(chans, n, tag, iov, iovcnt, rcpi_now_ns(), req);
	rcpi_ep_rma(rcpi_ep_of_chan(chans[0]));
	return rc;
}

/* rcp_test of a request not finished at the first look: progress, then
 * look again.  Out of line, so the look at a finished request (a small
 * send is finished when rcp_isend returns) saves no registers for the
 * call: -12 instructions per rcp_test (perf/callgrind.sh, session 20). */
static __attribute__((noinline)) int test_progress(rcp_req *req, struct rcp_status *st)
{
	int rc;
	if (rcpc_req_has_cb(req))
		return RCP_EINVAL; /* with a callback: the library's */
	rc = rcpi_ep_progress(rcpc_core_owner(rcpc_req_core(req)));
	if (rc < 0)
		return rc;
	return rcpc_req_finish(req, st);
}

int rcp_test(rcp_req *req, struct rcp_status *st)
{
	int rc;
	if (!req)
		return RCP_EINVAL;
	rc = rcpc_req_finish(req, st); /* RCP_EAGAIN with a callback too */
	return rc != RCP_EAGAIN ? rc : test_progress(req, st);
}

struct done_one {
	rcp_req *req;
	struct rcp_status st;
	int fin;
};

static int done_one(void *arg)
{
	struct done_one *d = arg;
	if (!d->fin)
		d->fin = rcpc_req_done(d->req, &d->st);
	return d->fin;
}

int rcp_wait(rcp_req *req, struct rcp_status *st, int64_t timeout_ns)
{
	struct done_one d = {req, {0}, 0};
	int rc;
	if (!req || rcpc_req_has_cb(req))
		return RCP_EINVAL;
	rc = rcpi_ep_wait_mode(rcpc_core_owner(rcpc_req_core(req)), -1, done_one, &d, timeout_ns);
	if (rc)
		return rc;
	if (st)
		*st = d.st;
	return d.st.error;
}

struct done_any {
	rcp_req **reqs;
	int n, idx;
	struct rcp_status st;
};

static int done_any(void *arg)
{
	struct done_any *d = arg;
	if (d->idx >= 0)
		return 1;
	for (int i = 0; i < d->n; i++) {
		if (d->reqs[i] && rcpc_req_done(d->reqs[i], &d->st)) {
			d->reqs[i] = NULL;
			d->idx = i;
			return 1;
		}
	}
	return 0;
}

int rcp_waitany(rcp_req **reqs, int n, int *idx, struct rcp_status *st, int64_t timeout_ns)
{
	struct done_any d = {reqs, n, -1, {0}};
	rcp_ep *ep = NULL;
	int rc;

	if (!reqs || n <= 0 || !idx)
		return RCP_EINVAL;
	for (int i = 0; i < n; i++) {
		if (!reqs[i])
			continue;
		if (!ep)
			ep = rcpc_core_owner(rcpc_req_core(reqs[i]));
		if (rcpc_req_has_cb(reqs[i]))
			return RCP_EINVAL;
	}
	if (!ep)
		return RCP_EINVAL;
	rc = rcpi_ep_wait_mode(ep, -1, done_any, &d, timeout_ns);
	if (rc)
		return rc;
	*idx = d.idx;
	if (st)
		*st = d.st;
	return d.st.error;
}

int rcp_cancel(rcp_req *req)
{
	if (!req)
		return RCP_EINVAL;
	return rcpc_cancel(req, rcpi_now_ns());
}

int rcp_send(rcp_chan *ch, uint64_t tag, const void *buf, size_t len)
{
	rcp_req *r;
	int rc = rcp_isend(ch, tag, buf, len, &r);
	return rc ? rc : rcp_wait(r, NULL, -1);
}

int rcp_recv(rcp_ep *ep, rcp_chan *ch, uint64_t tag, void *buf, size_t len, struct rcp_status *st)
{
	rcp_req *r;
	int rc = rcp_irecv(ep, ch, tag, buf, len, &r);
	return rc ? rc : rcp_wait(r, st, -1);
}

int rcp_probe(rcp_ep *ep, rcp_chan *ch, uint64_t tag, struct rcp_status *st)
{
	int rc;
	if (!ep)
		return RCP_EINVAL;
	rc = rcpi_ep_progress(ep);
	if (rc < 0)
		return rc;
	return rcpc_probe(rcpi_ep_core(ep), ch, tag, st);
}

/* ---- for the layers above (bulk/, rpc/) ---- */

/* The nic peer index of CH (for rcp_nic_get/put on the channel's peer), or
 * RCP_EINVAL for NULL.  Added for bulk/: one-sided RMA to a channel's peer. */
