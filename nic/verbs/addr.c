/*
 * nic/verbs/addr.c — verbs addresses, peers and address handles.
 *
 * Local address (rcp_nic_open): "verbs:DEVICE:PORT[:GID_INDEX]", e.g.
 * "verbs:mlx5_0:1" on InfiniBand, "verbs:mlx5_0:1:3" on RoCE (GID index 3
 * is typically the RoCE v2 GID of the port's IPv4 address; without it the
 * first RoCE v2 GID is used).
 *
 * A peer is a UD queue pair: its QPN, and its LID (InfiniBand: the subnet
 * routes by LID, no GRH needed inside one subnet) or its GID (RoCE: the
 * Ethernet link has no LIDs; every packet carries a GRH, v2 in a UDP/IP
 * header).  Strings: "verbs:DEV:PORT@QPN/LID" or
 * "verbs:DEV:PORT:GIDX@QPN/GID", QPN in hex, GID as IPv6 text
 * (rcp_nic_addr_str gives ours); DEV and PORT in a peer string are the
 * peer's own and not used.
 *
 * Blob (24 bytes, multi-byte fields big endian):
 *   0 RCPI_NIC_VERBS   1 flags (VB_F_GID, VB_F_MC)   2 LID (2)   4 QPN (4)   8 GID (16)
 *
 * Multicast (InfiniBand): a group is named by its MGID, "verbs:mcast:MGID"
 * (IPv6 text, ff..).  Added as a peer by that string, the endpoint joins
 * it through the SA (mcjoin.c: the SA's join, counted per process) to learn its
 * MLID, and sends to it as QPN 0xFFFFFF, LID = MLID, with a GRH whose
 * DGID is the MGID (the IB spec requires one on multicast); removing the
 * peer leaves.  A blob with VB_F_MC names a group and its MLID already:
 * no join.  "verbs:mcast:MGID@DEV:PORT[:GIDX]" opens a group endpoint
 * (verbs.c): its UD QP joins and is attached to the group, and receives
 * what is sent to it, each datagram from the sender's own unicast QP.
 *
 * Received datagrams name their sender by the completion's source QPN and
 * SLID, or on RoCE by the GRH's source GID (an IPv6 GRH, or for RoCE v2
 * over IPv4 the IPv4 header in its last 20 bytes, as an IPv4-mapped GID).
 * Peers are found by a linear scan behind a one-entry cache, as in the
 * xdp backend; a hash on QPN is the next step past a few hundred peers.
 * Each peer owns one address handle: a UD send needs it until the send
 * completes, which with selective signalling we learn only at a later
 * signalled completion.  A removed peer's AH therefore retires with the
 * number of WRs posted so far and is destroyed once the send queue has
 * completed that many (ud.c calls rcpi_vb_ah_reap as completions come),
 * or at close after the QP is gone.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic/verbs/verbs_int.h"

int rcpi_vb_parse_local(const char *rest, char *dev, size_t devlen, uint8_t *port, int *gidx)
{
	const char *c = strchr(rest, ':');
	unsigned long p, g;
	char *end;

	if (!c || c == rest || (size_t)(c - rest) >= devlen ||
	    memchr(rest, '@', (size_t)(c - rest)))
		return RCP_EADDR;
	memcpy(dev, rest, (size_t)(c - rest));
	dev[c - rest] = 0;
	p = strtoul(c + 1, &end, 10);
	if (end == c + 1 || p < 1 || p > 254)
		return RCP_EADDR;
	*gidx = -1;
	if (*end == ':') {
		const char *s = end + 1;
		g = strtoul(s, &end, 10);
		if (end == s || g > 255)
			return RCP_EADDR;
		*gidx = (int)g;
	}
	if (*end)
		return RCP_EADDR;
	*port = (uint8_t)p;
	return 0;
}

int rcpi_vb_addr_str(const rcp_nic *nic, char *buf, size_t len)
{
	const struct verbs_nic *v = vb_ofc(nic);
	int n;

	if (v->roce) {
		char g[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET6, v->gid, g, sizeof g);
		n = snprintf(buf, len, "verbs:%s:%u:%d@0x%06x/%s", v->dev, v->port, v->gid_index,
		             v->qp->qp_num, g);
	} else {
		n = snprintf(buf, len, "verbs:%s:%u@0x%06x/%u", v->dev, v->port, v->qp->qp_num,
		             v->lid);
	}
	return n < 0 || (size_t)n >= len ? RCP_ERANGE : 0;
}

void rcpi_vb_dest_blob(const struct vb_dest *d, uint8_t *b)
{
	memset(b, 0, VB_BLOB);
	b[0] = RCPI_NIC_VERBS;
	b[1] = (d->has_gid ? VB_F_GID : 0) | (d->mc ? VB_F_MC : 0);
	b[2] = (uint8_t)(d->lid >> 8);
	b[3] = (uint8_t)d->lid;
	b[4] = (uint8_t)(d->qpn >> 24);
	b[5] = (uint8_t)(d->qpn >> 16);
	b[6] = (uint8_t)(d->qpn >> 8);
	b[7] = (uint8_t)d->qpn;
	if (d->has_gid)
		memcpy(b + 8, d->gid, 16);
}

int rcpi_vb_addr_blob(const rcp_nic *nic, void *buf, size_t *len)
{
	const struct verbs_nic *v = vb_ofc(nic);
	struct vb_dest d = {.qpn = v->qp->qp_num, .lid = v->lid, .has_gid = v->roce};

	if (*len < VB_BLOB)
		return RCP_ERANGE;
	memcpy(d.gid, v->gid, 16);
	rcpi_vb_dest_blob(&d, buf);
	*len = VB_BLOB;
	return 0;
}

int rcpi_vb_blob_dest(const void *blob, size_t len, struct vb_dest *d)
{
	const uint8_t *b = blob;

	if (len != VB_BLOB || b[0] != RCPI_NIC_VERBS || (b[1] & ~(VB_F_GID | VB_F_MC)))
		return RCP_EADDR;
	memset(d, 0, sizeof *d);
	d->has_gid = b[1] & VB_F_GID;
	d->mc = !!(b[1] & VB_F_MC);
	d->lid = (uint16_t)(b[2] << 8 | b[3]);
	d->qpn = (uint32_t)b[4] << 24 | (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
	if (d->has_gid)
		memcpy(d->gid, b + 8, 16);
	/* QPNs are 24 bits; QP 0 and 1 are the subnet's; LID 0 is unassigned
	 * and 0xC000 up are multicast (0xFFFF: permissive, never a group). */
	if (d->mc)
		return d->qpn == VB_MC_QPN && d->has_gid && d->gid[0] == 0xff && d->lid >= 0xc000 &&
		               d->lid < 0xffff
		           ? 0
		           : RCP_EADDR;
	if (d->qpn > 0xffffff || d->qpn < 2 || (!d->has_gid && (!d->lid || d->lid >= 0xc000)))
		return RCP_EADDR;
	return 0;
}

void rcpi_vb_ah_attr(const struct verbs_nic *v, const struct vb_dest *d, struct ibv_ah_attr *a)
{
	memset(a, 0, sizeof *a);
	a->dlid = d->lid;
	a->sl = v->sl;
	a->port_num = v->port;
	if (d->has_gid) {
		a->is_global = 1;
		memcpy(a->grh.dgid.raw, d->gid, 16);
		a->grh.sgid_index = (uint8_t)(v->gid_index < 0 ? 0 : v->gid_index);
		a->grh.hop_limit = 64;
	}
}

struct ibv_ah *rcpi_vb_ah(struct verbs_nic *v, const struct vb_dest *d)
{
	struct ibv_ah_attr a;

	rcpi_vb_ah_attr(v, d, &a);
	return v->api->create_ah(v->pd, &a);
}

int rcpi_vb_peer_find(struct verbs_nic *v, uint32_t qpn, uint16_t lid, const uint8_t *gid)
{
	int i = v->last_peer;

	if (i >= 0 && v->peers[i].d.qpn == qpn &&
	    (gid ? !memcmp(v->peers[i].d.gid, gid, 16) : v->peers[i].d.lid == lid))
		return i;
	for (i = 0; i < v->npeers; i++) {
		const struct vb_dest *d = &v->peers[i].d;
		if (v->peers[i].used && d->qpn == qpn &&
		    (gid ? d->has_gid && !memcmp(d->gid, gid, 16) : !d->has_gid && d->lid == lid))
			return v->last_peer = i;
	}
	return RCP_NIC_PEER_NONE;
}

static int peer_insert(struct verbs_nic *v, const struct vb_dest *d, int *peer)
{
	int i;

	if (d->mc ? v->roce : d->has_gid != v->roce)
		return RCP_EADDR; /* an InfiniBand address on RoCE or the reverse */
	i = rcpi_vb_peer_find(v, d->qpn, d->lid, d->has_gid ? d->gid : NULL);
	if (i >= 0 && v->peers[i].d.mc == d->mc) {
		*peer = i;
		return 0;
	}
	for (i = 0; i < VB_PEERS && v->peers[i].used; i++)
		;
	if (i == VB_PEERS)
		return RCP_EAGAIN;
	v->peers[i].ah = rcpi_vb_ah(v, d);
	if (!v->peers[i].ah) {
		rcpi_warn("verbs: %s: cannot make an address handle for QPN 0x%x", v->dev, d->qpn);
		return RCP_EPEER;
	}
	v->peers[i].d = *d;
	v->peers[i].used = 1;
	if (i >= v->npeers)
		v->npeers = i + 1;
	*peer = i;
	return 0;
}

int rcpi_vb_peer_add(rcp_nic *nic, const void *blob, size_t len, int *peer)
{
	struct vb_dest d;
	int rc = rcpi_vb_blob_dest(blob, len, &d);
	return rc ? rc : peer_insert(vb_of(nic), &d, peer);
}

/* "@QPN/LID" or "@QPN/GID" of a peer string into D. */
static int parse_dest(const char *at, struct vb_dest *d)
{
	const char *slash = strchr(at, '/');
	unsigned long q, l;
	char *end;

	memset(d, 0, sizeof *d);
	if (!slash)
		return RCP_EADDR;
	q = strtoul(at, &end, 16);
	if (end == at || end != slash)
		return RCP_EADDR;
	d->qpn = (uint32_t)q;
	if (strchr(slash + 1, ':')) {
		if (inet_pton(AF_INET6, slash + 1, d->gid) != 1)
			return RCP_EADDR;
		d->has_gid = 1;
	} else {
		l = strtoul(slash + 1, &end, 10);
		if (end == slash + 1 || *end || l > 0xffff)
			return RCP_EADDR;
		d->lid = (uint16_t)l;
	}
	if (q > 0xffffff || q < 2 || (!d->has_gid && (!d->lid || d->lid >= 0xc000)))
		return RCP_EADDR;
	return 0;
}

int rcpi_vb_parse_group(const char *rest, uint8_t *mgid, const char **local)
{
	char txt[INET6_ADDRSTRLEN];
	const char *at = strchr(rest, '@');
	size_t n;

	if (strncmp(rest, "mcast:", 6))
		return RCP_EADDR;
	rest += 6;
	n = at ? (size_t)(at - rest) : strlen(rest);
	if (n >= sizeof txt)
		return RCP_EADDR;
	memcpy(txt, rest, n);
	txt[n] = 0;
	if (inet_pton(AF_INET6, txt, mgid) != 1 || mgid[0] != 0xff)
		return RCP_EADDR;
	*local = at ? at + 1 : NULL;
	return 0;
}

/* "verbs:mcast:MGID": the group joined, its MLID learnt (module comment). */
static int group_add(struct verbs_nic *v, const char *rest, int *peer)
{
	struct vb_dest d = {.qpn = VB_MC_QPN, .has_gid = 1, .mc = 1};
	const char *local;
	int rc = rcpi_vb_parse_group(rest, d.gid, &local);

	if (rc || local)
		return RCP_EADDR;
	if (v->roce) {
		rcpi_warn("verbs: %s: multicast on RoCE is not built (no SA: rdma_cm's IGMP join)",
		          v->dev);
		return RCP_EADDR;
	}
	rc = rcpi_vb_mc_join(v, d.gid, &d.lid);
	if (rc)
		return rc == RCP_ENOMEM ? rc : RCP_EPEER;
	rc = peer_insert(v, &d, peer);
	if (!rc && !v->peers[*peer].joined)
		v->peers[*peer].joined = 1;
	else
		rcpi_vb_mc_leave(v, d.gid); /* one join per peer */
	return rc;
}

int rcpi_vb_peer_add_str(rcp_nic *nic, const char *addr, int *peer)
{
	struct vb_dest d;
	const char *at;
	int rc;

	if (strncmp(addr, "verbs:", 6))
		return RCP_EADDR;
	if (!strncmp(addr + 6, "mcast:", 6))
		return group_add(vb_of(nic), addr + 6, peer);
	at = strchr(addr + 6, '@');
	if (!at)
		return RCP_EADDR;
	rc = parse_dest(at + 1, &d);
	return rc ? rc : peer_insert(vb_of(nic), &d, peer);
}

/* Sends to a removed peer may still be queued holding its AH: it waits
 * until the send queue has completed every WR chained so far. */
int rcpi_vb_ah_retire(struct verbs_nic *v, struct ibv_ah *ah)
{
	if (v->ndead == v->dead_cap) {
		int n = v->dead_cap ? 2 * v->dead_cap : 8;
		void *p = realloc(v->dead, (size_t)n * sizeof *v->dead);
		if (!p)
			return RCP_ENOMEM;
		v->dead = p;
		v->dead_cap = n;
	}
	v->dead[v->ndead].ah = ah;
	v->dead[v->ndead].seq = v->sq_next;
	v->ndead++;
	return 0;
}

void rcpi_vb_ah_reap(struct verbs_nic *v, int all)
{
	int j = 0;

	for (int i = 0; i < v->ndead; i++) {
		if (all || v->dead[i].seq <= v->sq_done)
			v->api->destroy_ah(v->dead[i].ah);
		else
			v->dead[j++] = v->dead[i];
	}
	v->ndead = j;
}

int rcpi_vb_peer_remove(rcp_nic *nic, int peer)
{
	struct verbs_nic *v = vb_of(nic);
	int rc;

	if (peer >= v->npeers || !v->peers[peer].used)
		return RCP_EINVAL;
	rc = rcpi_vb_ah_retire(v, v->peers[peer].ah);
	if (rc)
		return rc;
	if (v->peers[peer].joined)
		rcpi_vb_mc_leave(v, v->peers[peer].d.gid);
	memset(&v->peers[peer], 0, sizeof v->peers[peer]);
	if (v->last_peer == peer)
		v->last_peer = -1;
	while (v->npeers && !v->peers[v->npeers - 1].used)
		v->npeers--;
	return 0;
}

void rcpi_vb_peers_free(struct verbs_nic *v)
{
	rcpi_vb_ah_reap(v, 1);
	free(v->dead);
	v->dead = NULL;
	if (!v->peers)
		return;
	for (int i = 0; i < v->npeers; i++) {
		if (v->peers[i].used)
			v->api->destroy_ah(v->peers[i].ah);
		if (v->peers[i].joined)
			rcpi_vb_mc_leave(v, v->peers[i].d.gid);
	}
	free(v->peers);
	v->peers = NULL;
}
