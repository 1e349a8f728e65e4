/*
 * pvm-glue/mcast.c — pvm_pmcast and pvm_mcast to tasks on other hosts by
 * network multicast (rcp/mcastnet.c), and the receiving end of it.
 *
 * A pmcast to two or more tasks reached over one endpoint that can
 * multicast (RCP_NIC_CAP_MCAST: udp's IP multicast, verbs' InfiniBand
 * multicast), of at least PVMRCP_MCAST_MIN bytes, goes once to that
 * endpoint's group: every frame is one datagram whatever the number of
 * hosts.  Order with the
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
 * Every task of a multi-host VM joins, on each of its endpoints that can
 * multicast, the VM's group for that endpoint's address scheme
 * (PVMRCP_MCAST_GROUP, mcgroup.h) at start-up: one group per VM and
 * transport, as for IP multicast, not one per PVM group (pvm_pmcast names
 * tasks, not groups; a member drops frames of messages for others).  Its
 * member name is its task id (the sender knows its channels' tids; an
 * accepted channel has no address string).  The
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
#include "pvm-glue/mcgroup.h"

#define S pvmrcpi_st

#define MCN_STUB   16
#define MCN_MAXMEM 256

static rcp_mcn *mcn[PR_MAXEP]; /* by endpoint (S.eps); NULL: none there */
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

/* The group of endpoint K's scheme, joined beside it; 0 or an RCP code
 * (VERBOSE: why not, on stderr, unless the nic cannot multicast). */
static int open_one(int k, const char *list, int verbose, rcp_mcn **out)
{
	struct rcp_mcn_config c = {0};
	struct rcp_nic_info ni;
	char self[RCP_NIC_ADDRSTR_MAX], uaddr[RCP_NIC_ADDRSTR_MAX], group[RCP_NIC_ADDRSTR_MAX];
	char id[16], scope[96];
	int rc;

	if (rcp_nic_query(rcp_ep_nic(S.eps[k]), &ni) || !(ni.caps & RCP_NIC_CAP_MCAST))
		return RCP_ENOTSUP; /* unicasts, as pvm_rcp_mcast_route then says */
	if (rcp_ep_addr(S.eps[k], self, sizeof self) || pr_mcn_beside(self, uaddr, sizeof uaddr))
		return RCP_EADDR;
	if (pr_mcn_group(list, self, group, sizeof group) &&
	    pr_mcn_group(PR_MCN_GROUPS, self, group, sizeof group))
		snprintf(group, sizeof group, "(none of its scheme)");
	else
		c.group = group;
	snprintf(id, sizeof id, "t%x", (unsigned)S.mytid);
	c.self_id = id; /* senders name members by task id */
	/* Task ids repeat between virtual machines: another VM on the same
	 * group (this host's loopback in tests, or a LAN) is out of scope. */
	snprintf(scope, sizeof scope, "%s/%u", getenv("PVM_VMID") ? getenv("PVM_VMID") : "",
	         (unsigned)getuid());
	c.scope = scope;
	c.dead_ns = (uint64_t)env_num("PVMRCP_MCAST_DEAD_MS", 1000) * 1000000ull;
	rc = c.group ? rcp_mcn_open(uaddr, &c, out) : RCP_EADDR;
	if (rc && verbose)
		fprintf(
		    stderr,
		    "libpvmrcp: t%x: multicast group %s beside %s: %s; pmcast there by unicast\n",
		    (unsigned)S.mytid, group, uaddr, rcp_strerror(rc));
	return rc;
}

void pvmrcpi_mcn_open(void)
{
	const char *e = getenv("PVMRCP_MCAST"), *g = getenv("PVMRCP_MCAST_GROUP");
	struct rcp_wait_src src;

	if (!S.multihost || (e && !strcmp(e, "0")))
		return;
	mcn_min = (size_t)env_num("PVMRCP_MCAST_MIN", 65536);
	for (int k = 0; k < PR_MAXEP; k++) {
		int rc;
		if (!S.eps[k] || mcn[k])
			continue;
		rc = open_one(k, g, e && *e, &mcn[k]);
		if (rc) {
			mcn[k] = NULL;
			continue;
		}
		rcp_mcn_wait_src(mcn[k], &src);
		for (int j = 0; j < PR_MAXEP; j++)
			if (S.eps[j])
				(void)rcp_ep_wait_add(S.eps[j], &src);
	}
}

void pvmrcpi_mcn_close(void)
{
	for (int k = 0; k < PR_MAXEP; k++) {
		rcp_mcn_close(mcn[k]);
		mcn[k] = NULL;
	}
}

struct sdone {
	rcp_mcn *m;
	int *status, n;
};

static int send_done(void *arg)
{
	struct sdone *d = arg;
	int rc = rcp_mcn_send_status(d->m, d->status, d->n);
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
	struct sdone d = {NULL, status, n};
	struct pr_peer *p0 = n ? pvmrcpi_chan_get(chans[0]) : NULL;
	uint64_t id;
	uint8_t stub[MCN_STUB];

	*nfall = n;
	for (int i = 0; i < n; i++)
		note(chans[i], 'u');
	/* CHANS share one endpoint (send.c): its group, if it has one. */
	for (int k = 0; p0 && k < PR_MAXEP; k++)
		if (S.eps[k] && S.eps[k] == p0->ep)
			d.m = mcn[k];
	if (!d.m || n < 2 || n > MCN_MAXMEM || bytes < mcn_min)
		return 0;
	for (int i = 0; i < n; i++) {
		struct pr_peer *p = pvmrcpi_chan_get(chans[i]);
		if (!p)
			return 0;
		snprintf(names[i], sizeof names[i], "t%x", (unsigned)p->tid);
		np[i] = names[i];
	}
	if (rcp_mcn_send(d.m, np, n, buf, bytes, &id))
		return 0;
	rc = pvmrcpi_block(send_done, &d, live, nlive, 0, 1);
	if (rc != 1) {
		/* A task we send to is gone (or an error): the layer finishes
		 * on its own (the dead member times out); the others hear of
		 * the message by unicast below. */
		while (rcp_mcn_send_status(d.m, status, n) == RCP_EAGAIN)
			rcp_mcn_progress(d.m);
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
	if (len != MCN_STUB)
		return PvmSysErr;
	for (int k = 7; k >= 0; k--)
		id = id << 8 | s[k], bytes = bytes << 8 | s[8 + k];
	/* The sender put the stub on our channel after we acknowledged the
	 * whole message: it is here, unless a forged or duplicated stub.  In
	 * any of our groups: an id holds the sending layer's random epoch, so
	 * it names one message of one group. */
	for (int tries = 0; tries < 2; tries++) {
		for (int k = 0; k < PR_MAXEP; k++) {
			if (!mcn[k] || rcp_mcn_claim(mcn[k], id, data, dlen))
				continue;
			if (*dlen == bytes)
				return 0;
			free(*data);
			return PvmSysErr;
		}
		for (int k = 0; k < PR_MAXEP; k++)
			if (mcn[k])
				rcp_mcn_progress(mcn[k]);
	}
	return PvmSysErr;
}

const char *pvm_rcp_mcast_route(int tid)
{
	struct pr_peer *p = pvmrcpi_peer(tid, 0);
	switch (p ? p->mc_how : 0) {
	case 'm': return "multicast";
	case 'u': return pvm_rcp_transport(tid); /* a unicast on its endpoint */
	case 'h': return "shm";
	case 's': return "stock";
	default: return "none";
	}
}

int pvm_rcp_mcast_stats(unsigned long long *data_sent, unsigned long long *bytes_recv,
                        unsigned long long *members_failed)
{
	unsigned long long sum[3] = {0};
	int any = 0;
	for (int k = 0; k < PR_MAXEP; k++) { /* every group we joined */
		struct rcp_mcn_stats st = {0};
		if (!mcn[k])
			continue;
		rcp_mcn_get_stats(mcn[k], &st);
		sum[0] += st.data_sent;
		sum[1] += st.bytes_recv;
		sum[2] += st.members_failed;
		any = 1;
	}
	if (!any)
		return PvmNotImpl;
	if (data_sent)
		*data_sent = sum[0];
	if (bytes_recv)
		*bytes_recv = sum[1];
	if (members_failed)
		*members_failed = sum[2];
	return 0;
}
