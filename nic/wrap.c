/*
 * nic/wrap.c — what a wrapper around another nic endpoint forwards as it
 * is.
 *
 * The fault injector (nic/faults.c) and the job key (nic/auth.c) wrap a
 * backend's endpoint and change only how frames are sent and received.
 * Addresses, peers, the wait fd, registrations and RMA belong to the
 * backend: these ops pass them through to the wrapped endpoint.  A
 * wrapper's struct starts with struct rcpi_nic_wrap.  A registration is
 * the backend's own (mr->nic is the inner endpoint), so rcp_nic_mr_dereg
 * and rcp_nic_mr_pack reach the backend without the wrapper.
 */
#include "nic/nic_int.h"

static rcp_nic *inner(const rcp_nic *nic)
{
	return ((const struct rcpi_nic_wrap *)nic)->inner;
}

int rcpi_wrap_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	return inner(nic)->ops->addr_str(inner(nic), buf, len);
}

int rcpi_wrap_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	return inner(nic)->ops->addr_blob(inner(nic), buf, len);
}

int rcpi_wrap_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	return inner(nic)->ops->peer_add(inner(nic), blob, len, peer);
}

int rcpi_wrap_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	return inner(nic)->ops->peer_add_str(inner(nic), addr, peer);
}

int rcpi_wrap_fd(const rcp_nic *nic)
{
	return inner(nic)->ops->fd(inner(nic));
}

int rcpi_wrap_mr_reg(rcp_nic *nic, void *addr, size_t len, unsigned access, rcp_nic_mr **out)
{
	rcp_nic *in = inner(nic);
	return in->ops->mr_reg ? in->ops->mr_reg(in, addr, len, access, out) : RCP_ENOTSUP;
}

int rcpi_wrap_get(rcp_nic *nic, int peer, void *local, size_t len, const void *rkey, size_t rkeylen,
                  uint64_t offset)
{
	rcp_nic *in = inner(nic);
	return in->ops->get ? in->ops->get(in, peer, local, len, rkey, rkeylen, offset)
	                    : RCP_ENOTSUP;
}

int rcpi_wrap_put(rcp_nic *nic, int peer, const void *local, size_t len, const void *rkey,
                  size_t rkeylen, uint64_t offset)
{
	rcp_nic *in = inner(nic);
	return in->ops->put ? in->ops->put(in, peer, local, len, rkey, rkeylen, offset)
	                    : RCP_ENOTSUP;
}
