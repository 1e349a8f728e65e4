/*
 * tests/verbs_mock_mc.c — the HCA model's multicast: a subnet
 * administrator that keeps groups and their member ports, QPs attached to
 * groups, and the fabric's delivery of a datagram sent to a group.
 *
 * As InfiniBand does it:
 *   - the SA (sa_join/sa_leave in the api table): a join of a port to an
 *     MGID creates the group on first use, with an MLID from 0xC001, and
 *     is idempotent per port (a second join of the same port changes
 *     nothing); a leave takes the port out, whoever else on that port
 *     still wants the group; a leave of a port not in it is ENOENT;
 *   - ibv_attach_mcast: a UD QP, an MLID in the multicast range and the
 *     group's MGID; detach undoes it (EINVAL if not attached);
 *   - a send to QPN 0xFFFFFF must carry a GRH (the AH global) whose DGID
 *     is the group's MGID and a DLID equal to its MLID; the switches
 *     forward it to every MEMBER port, where each QP attached to the group
 *     gets a copy, the sender's own QPs included (loopback).  A port that
 *     left gets nothing even if a QP there is still attached;
 *   - a QP still attached to a group cannot be destroyed (EBUSY: the
 *     kernel counts attachments in the QP's use count), so a backend that
 *     forgets ibv_detach_mcast leaks the QP rather than leaving the model
 *     a dangling attachment.
 * Each copy may be lost (mock_faults.drop) independently.
 */
#include <errno.h>
#include <string.h>

#include "tests/verbs_mock_int.h"

#define MC_GROUPS  16
#define MC_ATTACH  64
#define MC_MEMBERS 8

static struct {
	uint8_t mgid[16];
	uint16_t mlid;
	int used;
	char member[MC_MEMBERS][64]; /* member ports: device names (one port each) */
} groups[MC_GROUPS];

static struct {
	struct mock_qp *qp;
	uint16_t mlid;
	uint8_t mgid[16];
} att[MC_ATTACH];

void mock_mc_reset(void)
{
	memset(groups, 0, sizeof groups);
	memset(att, 0, sizeof att);
}

static int group_of(const uint8_t *mgid)
{
	for (int i = 0; i < MC_GROUPS; i++)
		if (groups[i].used && !memcmp(groups[i].mgid, mgid, 16))
			return i;
	return -1;
}

static int member(int g, const char *dev)
{
	for (int m = 0; m < MC_MEMBERS; m++)
		if (groups[g].member[m][0] && !strcmp(groups[g].member[m], dev))
			return m;
	return -1;
}

int mock_mc_join(const char *dev, uint8_t port, const uint8_t mgid[16], uint32_t qkey,
                 uint16_t *mlid)
{
	int g = group_of(mgid), m;

	(void)qkey;
	if (port != 1 || mgid[0] != 0xff)
		return -EINVAL;
	if (g < 0) {
		for (g = 0; g < MC_GROUPS && groups[g].used; g++)
			;
		if (g == MC_GROUPS)
			return -ENOMEM;
		memset(&groups[g], 0, sizeof groups[g]);
		groups[g].used = 1;
		memcpy(groups[g].mgid, mgid, 16);
		groups[g].mlid = (uint16_t)(0xc001 + g);
	}
	*mlid = groups[g].mlid;
	if (member(g, dev) >= 0)
		return 0; /* the SA counts a port once */
	for (m = 0; m < MC_MEMBERS && groups[g].member[m][0]; m++)
		;
	if (m == MC_MEMBERS)
		return -ENOMEM;
	strncpy(groups[g].member[m], dev, sizeof groups[g].member[m] - 1);
	mock_st.mc_members++;
	return 0;
}

int mock_mc_leave(const char *dev, uint8_t port, const uint8_t mgid[16])
{
	int g = group_of(mgid), m = g < 0 ? -1 : member(g, dev);

	if (port != 1 || m < 0)
		return -ENOENT;
	groups[g].member[m][0] = 0;
	mock_st.mc_members--;
	return 0;
}

int mock_mc_attach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	int g = group_of(gid->raw);

	if (qp->qp_type != IBV_QPT_UD || lid < 0xc000 || lid == 0xffff || g < 0 ||
	    groups[g].mlid != lid)
		return EINVAL;
	for (int i = 0; i < MC_ATTACH; i++) {
		if (att[i].qp)
			continue;
		att[i].qp = (struct mock_qp *)qp;
		att[i].mlid = lid;
		memcpy(att[i].mgid, gid->raw, 16);
		mock_live_add(1);
		return 0;
	}
	return ENOMEM;
}

int mock_mc_detach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	for (int i = 0; i < MC_ATTACH; i++) {
		if (att[i].qp == (struct mock_qp *)qp && att[i].mlid == lid &&
		    !memcmp(att[i].mgid, gid->raw, 16)) {
			att[i].qp = NULL;
			mock_live_add(-1);
			return 0;
		}
	}
	return EINVAL;
}

int mock_mc_attached(const struct mock_qp *qp)
{
	int n = 0;

	for (int i = 0; i < MC_ATTACH; i++)
		n += att[i].qp == qp;
	return n;
}

void mock_mc_deliver(struct mock_qp *s, const struct ibv_send_wr *wr, const struct ibv_ah_attr *a,
                     const uint8_t *data, uint32_t len)
{
	int g = a->is_global ? group_of(a->grh.dgid.raw) : -1;

	mock_st.mc_sends++;
	if (g < 0 || groups[g].mlid != a->dlid) {
		mock_st.mc_unrouted++;
		return;
	}
	for (int i = 0; i < MC_ATTACH; i++) {
		struct mock_qp *d = att[i].qp;
		if (!d || att[i].mlid != a->dlid || memcmp(att[i].mgid, groups[g].mgid, 16) ||
		    member(g, d->dev->dev.name) < 0)
			continue;
		mock_st.mc_copies++;
		mock_deliver_to(s, d, wr, data, len);
	}
}
