/*
 * nic/verbs/mcjoin.c — multicast joins counted per process.
 *
 * The subnet administrator records membership per port (its GID), not per
 * endpoint: two endpoints of one process on one port joining the same
 * group are one member, and the first to leave would take the port out of
 * the group under the other, whose QP, still attached, would silently stop
 * receiving (the switches no longer forward the MLID to the port).  A
 * group endpoint and the same process's unicast endpoint sending to the
 * group (rcp/mcastnet.c: G and U) are exactly that pair.  So the backend
 * joins and leaves through here: the first join of (device, port, MGID)
 * asks the SA (api.h's sa_join) and the last leave tells it; the others
 * count.  A mutex: endpoints may live in different threads.
 */
#include <pthread.h>
#include <string.h>

#include "nic/verbs/verbs_int.h"

#define MC_JOINS 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	const struct rcpi_verbs_api *api; /* a test may swap tables between runs */
	char dev[64];
	uint8_t port, mgid[16];
	uint16_t mlid;
	int n;
} joins[MC_JOINS];

static int find(const struct verbs_nic *v, const uint8_t *mgid)
{
	for (int i = 0; i < MC_JOINS; i++)
		if (joins[i].n && joins[i].api == v->api && joins[i].port == v->port &&
		    !strcmp(joins[i].dev, v->dev) && !memcmp(joins[i].mgid, mgid, 16))
			return i;
	return -1;
}

int rcpi_vb_mc_join(struct verbs_nic *v, const uint8_t *mgid, uint16_t *mlid)
{
	int rc = 0, i;

	pthread_mutex_lock(&lock);
	i = find(v, mgid);
	if (i < 0) {
		for (i = 0; i < MC_JOINS && joins[i].n; i++)
			;
		if (i == MC_JOINS)
			rc = RCP_ENOMEM;
		else
			rc = v->api->sa_join(v->dev, v->port, mgid, VB_QKEY, &joins[i].mlid);
		if (!rc) {
			joins[i].api = v->api;
			memcpy(joins[i].dev, v->dev, sizeof joins[i].dev);
			joins[i].port = v->port;
			memcpy(joins[i].mgid, mgid, 16);
		}
	}
	if (!rc) {
		joins[i].n++;
		*mlid = joins[i].mlid;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void rcpi_vb_mc_leave(struct verbs_nic *v, const uint8_t *mgid)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(v, mgid);
	if (i >= 0 && --joins[i].n == 0 && v->api->sa_leave(v->dev, v->port, mgid))
		rcpi_debug("verbs: %s: leaving a multicast group: the SA did not answer", v->dev);
	pthread_mutex_unlock(&lock);
}
