/*
 * pvm-glue/mcast.c — pvm_pmcast and pvm_mcast to tasks on other hosts by
 * IP multicast (rcp/mcastnet.c), and the receiving end of it.
 *
 * A pmcast to two or more tasks reached over udp, of at least
 * PVMRCP_MCAST_MIN bytes, goes once to the VM's multicast group: every
 * frame is one datagram whatever the number of hosts.  Order with the
 * other messages of the same sender (PVM delivers a sender's messages in
 * order) comes from the channels: when a member has the message whole
 * (acknowledged), the sender puts a 16-byte STUB on that member's channel,
 * with the data tag and PR_MCNET: {message id, length}.  The member takes
 * the stub in channel order like any message and swaps in the data the
 * multicast layer holds for it (pvmrcpi_mcn_take).  A member the multicast
 * layer gave up on (it did not answer within PVMRCP_MCAST_DEAD_MS: no
 * multicast there, or busy computing) gets the message as before, one
 * RCP unicast on its channel; pvm_rcp_mcast_route tells which path each
 * task was reached by last.
 *
 * Every task of a multi-host VM with a multicast-capable udp endpoint
 * joins the group (PVMRCP_MCAST_GROUP) at start-up; its member name is its
 * task id (the sender knows its channels' tids; an accepted channel has
 * no address string).  The
 * layer is progressed by every wait of the task (a wait source of each
 * endpoint), so a task blocked in any PVM call acknowledges; one that
 * computes for longer than the dead time gets the unicast instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rcp/mcastnet.h>
#include <rcp/pvmrcp.h>

#include "pvm-glue/glue.h"

#define S pvmrcpi_st

#define MCN_GROUP  "udp:239.255.82.67:47067"
#define MCN_STUB   16
#define MCN_MAXMEM 256

static rcp_mcn *mcn;
static size_t mcn_min;

static int64_t env_num(const char *name, int64_t def)
{
	const char *e = getenv(name);
	char *end;
	long long v;
	if (!e || !*e)
		return def;
	v = strtoll(e, &end, 10);
	return *end || v < 0 ? def : v;
}

void pvmrcpi_mcn_open(void)
{
	struct rcp_mcn_config c = {0};
	struct rcp_nic_info ni;
	struct rcp_wait_src src;
	char self[RCP_NIC_ADDRSTR_MAX], uaddr[RCP_NIC_ADDRSTR_MAX], id[16], scope[96];
	const char *e = getenv("PVMRCP_MCAST"), *g = getenv("PVMRCP_MCAST_GROUP");
	char *colon;
	rcp_ep *ep = S.eps[PR_UDP];
	int rc;

	if (!ep || !S.multihost || (e && !strcmp(e, "0")) || mcn)
		return;
	if (rcp_nic_query(rcp_ep_nic(ep), &ni) || !(ni.caps & RCP_NIC_CAP_MCAST))
		return; /* unicasts, as pvm_rcp_mcast_route then says */
	if (rcp_ep_addr(ep, self, sizeof self))
		return;
	snprintf(uaddr, sizeof uaddr, "%s", self);
	colon = strrchr(uaddr, ':');
	if (!colon)
		return;
	colon[1] = '\0'; /* same interface, any port */
	c.group = g && *g ? g : MCN_GROUP;
	snprintf(id, sizeof id, "t%x", (unsigned)S.mytid);
	c.self_id = id; /* senders name members by task id */
	/* Task ids repeat between virtual machines: another VM on the same
	 * group (this host's loopback in tests, or a LAN) is out of scope. */
	snprintf(scope, sizeof scope, "%s/%u", getenv("PVM_VMID") ? getenv("PVM_VMID") : "",
	         (unsigned)getuid());
	c.scope = scope;
	c.dead_ns = (uint64_t)env_num("PVMRCP_MCAST_DEAD_MS", 1000) * 1000000ull;
	mcn_min = (size_t)env_num("PVMRCP_MCAST_MIN", 65536);
	rc = rcp_mcn_open(uaddr, &c, &mcn);
	if (rc) {
		if (e && *e)
			fprintf(stderr,
			        "libpvmrcp: t%x: multicast group %s: %s; pmcast by unicast\n",
			        (unsigned)S.mytid, c.group, rcp_strerror(rc));
		mcn = NULL;
		return;
	}
	rcp_mcn_wait_src(mcn, &src);
	for (int k = 0; k < PR_MAXEP; k++)
		if (S.eps[k])
			(void)rcp_ep_wait_add(S.eps[k], &src);
}

void pvmrcpi_mcn_close(void)
{
	rcp_mcn_close(mcn);
	mcn = NULL;
}

struct sdone {
	int *status, n;
};

static int send_done(void *arg)
{
	struct sdone *d = arg;
	int rc = rcp_mcn_send_status(mcn, d->status, d->n);
	return rc == RCP_EAGAIN ? 0 : rc == 0 ? 1 : rc;
}

static void note(rcp_chan *ch, int how)
{
	struct pr_peer *p = pvmrcpi_chan_get(ch);
	if (p)
		p->mc_how = how;
}

int pvmrcpi_mcn_send(rcp_chan **chans, int n, uint64_t tag, const void *buf, size_t bytes,
                     const int *live, int nlive, int *nfall)
{
	char names[MCN_MAXMEM][16];
	const char *np[MCN_MAXMEM];
	int status[MCN_MAXMEM], nf = 0, rc = 0;
	struct sdone d = {status, n};
	uint64_t id;
	uint8_t stub[MCN_STUB];

	*nfall = n;
	for (int i = 0; i < n; i++)
		note(chans[i], 'u');
	if (!mcn || n < 2 || n > MCN_MAXMEM || bytes < mcn_min)
		return 0;
	for (int i = 0; i < n; i++) {
		struct pr_peer *p = pvmrcpi_chan_get(chans[i]);
		if (!p)
			return 0;
		snprintf(names[i], sizeof names[i], "t%x", (unsigned)p->tid);
		np[i] = names[i];
	}
	if (rcp_mcn_send(mcn, np, n, buf, bytes, &id))
		return 0;
	rc = pvmrcpi_block(send_done, &d, live, nlive, 0, 1);
	if (rc != 1) {
		/* A task we send to is gone (or an error): the layer finishes
		 * on its own (the dead member times out); the others hear of
		 * the message by unicast below. */
		while (rcp_mcn_send_status(mcn, status, n) == RCP_EAGAIN)
			rcp_mcn_progress(mcn);
	}
	for (int k = 0; k < 8; k++)
		stub[k] = (uint8_t)(id >> (8 * k)),
		stub[8 + k] = (uint8_t)((uint64_t)bytes >> (8 * k));
	rc = 0;
	for (int i = 0; i < n; i++) {
		rcp_req *r = NULL;
		int rc2;
		if (status[i]) { /* the unicast fallback: to the front */
			rcp_chan *t = chans[nf];
			chans[nf++] = chans[i];
			chans[i] = t;
			continue;
		}
		rc2 = rcp_isend_detached(chans[i], tag | PR_MCNET, stub, sizeof stub, &r);
		if (!rc2 && r) {
			struct rcp_status st;
			rc2 = pvmrcpi_wait_req(r, &st, live, nlive, 1);
		} else if (rc2) {
			rc2 = pvmrcpi_err(rc2);
		}
		if (rc2 && !rc)
			rc = rc2;
		note(chans[i], 'm');
	}
	*nfall = nf;
	return rc;
}

int pvmrcpi_mcn_take(const void *stubv, size_t len, void **data, size_t *dlen)
{
	const uint8_t *s = stubv;
	uint64_t id = 0, bytes = 0;
	if (len != MCN_STUB || !mcn)
		return PvmSysErr;
	for (int k = 7; k >= 0; k--)
		id = id << 8 | s[k], bytes = bytes << 8 | s[8 + k];
	/* The sender put the stub on our channel after we acknowledged the
	 * whole message: it is here, unless a forged or duplicated stub. */
	for (int tries = 0; tries < 2; tries++) {
		if (rcp_mcn_claim(mcn, id, data, dlen) == 0) {
			if (*dlen == bytes)
				return 0;
			free(*data);
			return PvmSysErr;
		}
		rcp_mcn_progress(mcn);
	}
	return PvmSysErr;
}

const char *pvm_rcp_mcast_route(int tid)
{
	struct pr_peer *p = pvmrcpi_peer(tid, 0);
	switch (p ? p->mc_how : 0) {
	case 'm': return "multicast";
	case 'u': return "udp";
	case 'h': return "shm";
	case 's': return "stock";
	default: return "none";
	}
}

int pvm_rcp_mcast_stats(unsigned long long *data_sent, unsigned long long *bytes_recv,
                        unsigned long long *members_failed)
{
	struct rcp_mcn_stats st = {0};
	if (!mcn)
		return PvmNotImpl;
	rcp_mcn_get_stats(mcn, &st);
	if (data_sent)
		*data_sent = st.data_sent;
	if (bytes_recv)
		*bytes_recv = st.bytes_recv;
	if (members_failed)
		*members_failed = st.members_failed;
	return 0;
}
