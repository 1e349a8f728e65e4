/*
 * nic/nic.c — the public nic entry points and the table of backends.
 *
 * This file knows no backend's internals.  It parses the "name:" prefix of
 * an address, picks the ops table, wraps the endpoint in the fault injector
 * when asked to, checks arguments that need no backend knowledge, and
 * implements the spin-then-sleep wait on top of each backend's `pending`
 * and `arm` operations.
 *
 * Wait policy: rcp_nic_wait() runs the one policy of common/wait.c with
 * the nic as its only source: it spins on ops->pending() for spin_ns
 * (RCP_SPIN_NS, default 50 µs: longer than a typical round trip on this
 * kind of host, shorter than a scheduler tick; past the first 5 µs each
 * look yields the CPU), then arms the wake-up and sleeps in ppoll() on the
 * backend's fd, in nanoseconds.  On VMs whose idle vCPUs halt, a
 * sleep/wake costs ~25 µs each way, so spinning first keeps the common
 * ping-pong case fast; sleeping afterwards keeps idle processes off the CPU.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "common/wait.h"
#include "nic/nic_int.h"

/* Built backends.  A backend not built is simply not listed here. */
static const struct rcpi_nic_ops *const backends[] = {
    &rcpi_nic_shm_ops,
    &rcpi_nic_udp_ops,
#if HAVE_XDP
    &rcpi_nic_xdp_ops,
#endif
#if HAVE_VERBS
    &rcpi_nic_verbs_ops,
#endif
    NULL,
};

static const char *const backend_names[] = {"shm", "udp",
#if HAVE_XDP
                                            "xdp",
#endif
#if HAVE_VERBS
                                            "verbs",
#endif
                                            NULL};

const char *const *rcp_nic_backends(void)
{
	return backend_names;
}

static const struct rcpi_nic_ops *find_ops(const char *addr, const char **rest)
{
	const char *colon = addr ? strchr(addr, ':') : NULL;
	if (!colon)
		return NULL;
	for (int i = 0; backends[i]; i++) {
		size_t n = strlen(backends[i]->name);
		if ((size_t)(colon - addr) == n && !strncmp(addr, backends[i]->name, n)) {
			*rest = colon + 1;
			return backends[i];
		}
	}
	return NULL;
}

int rcp_nic_open(const char *addr, const struct rcp_nic_config *cfg, rcp_nic **out)
{
	const struct rcpi_nic_ops *ops;
	const char *rest = NULL, *faults, *key;
	rcp_nic *nic = NULL, *wrapped;
	int rc;

	if (!addr || !out)
		return RCP_EINVAL;
	*out = NULL;
	rcpi_env_init();
	if (!strchr(addr, ':'))
		return RCP_EADDR;
	ops = find_ops(addr, &rest);
	if (!ops)
		return RCP_ENOENT;
	rc = ops->open(rest, cfg, &nic);
	if (rc)
		return rc;
	nic->ops = ops;
	{
		int mode;
		rcpi_wait_policy(&mode, &nic->spin_ns);
	}

	faults = cfg && cfg->faults ? cfg->faults : rcpi_env_str("RCP_FAULTS");
	if (faults && *faults) {
		rc = rcpi_nic_faults_wrap(nic, faults, &wrapped);
		if (rc) {
			ops->close(nic);
			return rc;
		}
		wrapped->spin_ns = nic->spin_ns;
		nic = wrapped;
	}
	/* The job key wraps outermost: frames are sealed before the fault
	 * injector (the "link") can damage them, and checked after. */
	key = cfg && cfg->key ? cfg->key : rcpi_env_str("RCP_SESSION_KEY");
	if (key && *key) {
#if HAVE_SODIUM
		rc = rcpi_nic_auth_wrap(nic, key, &wrapped);
#else
		rc = RCP_ENOTSUP;
#endif
		if (rc) {
			if (rc == RCP_ENOTSUP)
				rcpi_warn("RCP_SESSION_KEY: this librcp was built without "
				          "libsodium; refusing to run without the job key");
			nic->ops->close(nic);
			return rc;
		}
		nic = wrapped;
	}
	*out = nic;
	return 0;
}

void rcp_nic_close(rcp_nic *nic)
{
	if (nic)
		nic->ops->close(nic);
}

int rcp_nic_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	if (!nic || !info)
		return RCP_EINVAL;
	memset(info, 0, sizeof *info);
	nic->ops->query(nic, info);
	return 0;
}

int rcp_nic_get_stats(const rcp_nic *nic, struct rcp_nic_stats *st)
{
	if (!nic || !st)
		return RCP_EINVAL;
	*st = nic->stats;
	return 0;
}

int rcp_nic_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	if (!nic || !buf || !len)
		return RCP_EINVAL;
	return nic->ops->addr_str(nic, buf, len);
}

int rcp_nic_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	if (!nic || !buf || !len)
		return RCP_EINVAL;
	return nic->ops->addr_blob(nic, buf, len);
}

int rcp_nic_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	if (!nic || !blob || !peer)
		return RCP_EINVAL;
	if (len < 2 || len > RCP_NIC_ADDR_MAX)
		return RCP_EADDR;
	return nic->ops->peer_add(nic, blob, len, peer);
}

int rcp_nic_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	if (!nic || !addr || !peer)
		return RCP_EINVAL;
	if (!strchr(addr, ':'))
		return RCP_EADDR;
	return nic->ops->peer_add_str(nic, addr, peer);
}

int rcpi_nic_send_to(rcp_nic *nic, const void *blob, size_t len, const void *frame, size_t flen)
{
	if (!nic || !blob || !frame || len < 2 || len > RCP_NIC_ADDR_MAX)
		return RCP_EINVAL;
	if (!nic->ops->send_to)
		return RCP_ENOTSUP;
	if (((const uint8_t *)blob)[0] != nic->ops->id)
		return RCP_EADDR;
	return nic->ops->send_to(nic, blob, len, frame, flen);
}

int rcpi_nic_has_send_to(const rcp_nic *nic)
{
	return nic && nic->ops->send_to != NULL;
}

int rcp_nic_peer_remove(rcp_nic *nic, int peer)
{
	if (!nic || peer < 0)
		return RCP_EINVAL;
	return nic->ops->peer_remove(nic, peer);
}

int rcp_nic_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, unsigned flags)
{
	int64_t total;

	if (RCPI_UNLIKELY(!nic || peer < 0 || iovcnt < 0 || (iovcnt && !iov) ||
	                  (flags & ~RCP_NIC_MORE)))
		return RCP_EINVAL;
	total = rcpi_iov_total(iov, iovcnt);
	if (RCPI_UNLIKELY(total < 0))
		return RCP_EINVAL;
	return nic->ops->send(nic, peer, iov, iovcnt, (size_t)total, flags);
}

int rcp_nic_flush(rcp_nic *nic)
{
	if (!nic)
		return RCP_EINVAL;
	return nic->ops->flush(nic);
}

int rcp_nic_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max)
{
	if (RCPI_UNLIKELY(!nic || !frames || max <= 0))
		return RCP_EINVAL;
	return nic->ops->recv(nic, frames, max);
}

/* rcp_nic_recv_wait for a backend without its own: arm, poll the fd,
 * receive. */
static int recv_wait_poll(rcp_nic *nic, struct rcp_nic_frame *frames, int max, int64_t timeout_ns)
{
	int rc = nic->ops->arm(nic);

	if (!rc)
		rc = rcpi_fd_wait(nic->ops->fd(nic), timeout_ns);
	if (rc && rc != RCP_EAGAIN)
		return rc;
	return nic->ops->recv(nic, frames, max);
}

int rcp_nic_recv_wait(rcp_nic *nic, struct rcp_nic_frame *frames, int max, int64_t timeout_ns)
{
	if (RCPI_UNLIKELY(!nic || !frames || max <= 0))
		return RCP_EINVAL;
	if (nic->ops->recv_wait)
		return nic->ops->recv_wait(nic, frames, max, timeout_ns);
	return recv_wait_poll(nic, frames, max, timeout_ns);
}

void rcp_nic_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	if (nic && frames && n > 0)
		nic->ops->release(nic, frames, n);
}

int rcp_nic_fd(const rcp_nic *nic)
{
	return nic ? nic->ops->fd(nic) : RCP_EINVAL;
}

int rcp_nic_arm(rcp_nic *nic)
{
	return nic ? nic->ops->arm(nic) : RCP_EINVAL;
}

/* rcp_nic_wait through the one wait policy (common/wait.c): the nic is
 * its only source; DONE asks pending(), which takes nothing. */
static int nic_pending(void *arg)
{
	rcp_nic *nic = arg;
	return nic->ops->pending(nic) != 0;
}

static int nic_arm(void *arg, int64_t *timeout_ns)
{
	rcp_nic *nic = arg;
	(void)timeout_ns;
	return nic->ops->arm(nic);
}

int rcp_nic_wait(rcp_nic *nic, int64_t timeout_ns, int64_t spin_ns)
{
	struct rcpi_waiter w;
	struct rcp_wait_src src = {.arm = nic_arm};
	int rc;

	if (!nic)
		return RCP_EINVAL;
	src.fd = nic->ops->fd(nic);
	src.arg = nic;
	rc = rcpi_waiter_init(&w, spin_ns == 0 ? RCPI_WAIT_SLEEP : RCPI_WAIT_DEFAULT,
	                      spin_ns < 0 ? nic->spin_ns : spin_ns, &src);
	if (!rc) {
		struct rcp_nic_info info;
		rcp_nic_query(nic, &info);
		if (info.solo_ns)
			w.solo_ns = info.solo_ns;
	}
	if (!rc)
		rc = rcpi_waiter_wait(&w, nic_pending, nic, timeout_ns);
	rcpi_waiter_fini(&w);
	return rc;
}

int rcp_nic_mr_reg(rcp_nic *nic, void *addr, size_t len, unsigned access, rcp_nic_mr **out)
{
	if (!nic || !addr || !len || !out ||
	    (access & ~(unsigned)(RCP_NIC_ACCESS_READ | RCP_NIC_ACCESS_WRITE)))
		return RCP_EINVAL;
	*out = NULL;
	if (!nic->ops->mr_reg)
		return RCP_ENOTSUP;
	return nic->ops->mr_reg(nic, addr, len, access, out);
}

int rcp_nic_mr_dereg(rcp_nic_mr *mr)
{
	if (!mr)
		return 0;
	return mr->nic->ops->mr_dereg(mr);
}

int rcp_nic_mr_pack(const rcp_nic_mr *mr, void *rkey, size_t *len)
{
	if (!mr || !rkey || !len)
		return RCP_EINVAL;
	return mr->nic->ops->mr_pack(mr, rkey, len);
}

int rcp_nic_get(rcp_nic *nic, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                uint64_t offset)
{
	if (!nic || peer < 0 || (!local && len) || !rkey)
		return RCP_EINVAL;
	if (!nic->ops->get)
		return RCP_ENOTSUP;
	return nic->ops->get(nic, peer, local, len, rkey, rkeylen, offset);
}

int rcp_nic_put(rcp_nic *nic, int peer, const void *local, size_t len, const void *rkey,
                size_t rkeylen, uint64_t offset)
{
	if (!nic || peer < 0 || (!local && len) || !rkey)
		return RCP_EINVAL;
	if (!nic->ops->put)
		return RCP_ENOTSUP;
	return nic->ops->put(nic, peer, local, len, rkey, rkeylen, offset);
}
