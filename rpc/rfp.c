/* rpc/rfp.c — remote fetch (placeholder until implemented). */
#include "rpc/rpc_int.h"

int rfp_init(rcp_rpc *rpc)
{
	(void)rpc;
	return 0;
}
void rfp_fini(rcp_rpc *rpc)
{
	(void)rpc;
}
void rfp_serve(rcp_rpc *rpc)
{
	(void)rpc;
}
int rfp_poll(rcp_rpc *rpc)
{
	(void)rpc;
	return 0;
}
int rfp_busy(const rcp_rpc *rpc)
{
	(void)rpc;
	return 0;
}
int rfp_cli_submit(rcp_rpc *rpc, struct peer *p, struct rcp_rpc_req *r, uint64_t id,
                   const void *msg, size_t len, uint32_t *slot)
{
	(void)rpc, (void)p, (void)r, (void)id, (void)msg, (void)len, (void)slot;
	return 0;
}
void rfp_cli_abandon(rcp_rpc *rpc, struct peer *p, uint32_t slot)
{
	(void)rpc, (void)p, (void)slot;
}
void rfp_cli_note_reply(rcp_rpc *rpc, struct rfp_cli *c, uint64_t id, uint64_t proc_ns)
{
	(void)rpc, (void)c, (void)id, (void)proc_ns;
}
int rfp_srv_respond(struct rfp_srv *s, uint32_t cli, uint32_t slot, const struct rpc_hdr *h,
                    const void *payload, uint32_t len)
{
	(void)s, (void)cli, (void)slot, (void)h, (void)payload, (void)len;
	return 0;
}
