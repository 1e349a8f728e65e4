/*
 * pvm-glue/glue.c — PVM 3.4 programs over RCP channels, by relinking.
 *
 * WHAT IT IS.  libpvmrcp defines pvm_psend, pvm_precv and the new
 * pvm_pmcast, plus thin wrappers of the libpvm3 calls that must see
 * messages that came over RCP (pvm_recv, pvm_nrecv, pvm_trecv, pvm_probe,
 * pvm_bufinfo, pvm_getminfo, pvm_freebuf), of the calls whose messages
 * must stay in order with RCP ones (pvm_send, pvm_mcast) and of pvm_exit.
 * Linked before -lpvm3 (or LD_PRELOADed) it wins the symbol lookup of the
 * program and of libpvm3/libgpvm3 themselves; each wrapper reaches the
 * real function with dlsym(RTLD_NEXT, ...) (real.c).  A static libpvm3.a
 * cannot be wrapped this way: its internal calls are bound at link time.
 * PVMRCP=0 in the environment turns every wrapper into a pass-through.
 *
 * START-UP (glue.c).  On the first call of any wrapper, or pvm_rcp_init():
 * the task opens its RCP endpoints with RCP_EP_ACCEPT — always
 * "shm:pvmrcp-VMID-TID-PID", and when the virtual machine has more than one
 * host also a udp endpoint on the host's address; RCP_TRANSPORT=shm|udp
 * opens only that one — and publishes the address strings (space-separated)
 * in the PVM mailbox under "pvmrcp:TID" (pvm_putinfo; pvmd deletes the
 * entry when the task exits).  TRANSPORT PER PAIR: a peer on the same host
 * (tid bits 18-29 equal) is reached over shm, one on another host over
 * udp; both ends decide alike, so a pair uses one transport both ways.
 * The udp endpoint is bound to the address this host reaches the others
 * from (host_ip), so a VM spread over real hosts (or rcp-cluster's
 * namespaces, docs/cluster.md) needs nothing set.  RCP_TRANSPORT=xdp
 * adds an xdp endpoint on the interface holding that address (AF_XDP,
 * nic/xdp/; PVMRCP_XDP_ADDR names another): one endpoint owns an
 * interface, so the first task of a host to start gets it and the others
 * keep udp; a pair across hosts uses xdp when both ends published it,
 * udp otherwise (both ends see both lists and decide alike).  A host added after a
 * task started is not seen by that task: it has no udp endpoint and
 * reaches the new host's tasks by stock PVM.  PVMRCP_MULTIHOST=1 acts as if the VM had several hosts (both endpoints),
 * =remote also treats every peer as on another host (tests: a one-host VM
 * cannot show a real second host).  RCP's own peer-silence timeout
 * is raised (RCP_PEER_TIMEOUT, unless set) because a PVM task may compute
 * for minutes without calling the library; liveness comes from pvmd
 * instead (below).
 *
 * TID -> CHANNEL TABLE.  A hash table of struct pr_peer keyed by tid,
 * filled lazily: the first psend to a tid looks the mailbox up
 * (pvm_recvinfo, one pvmd round trip); found -> rcp_connect, route RCP;
 * not found (a stock task, or one that has not started yet) -> route
 * STOCK, looked up again after 1 ms, 2 ms, ... up to 1 s.  A task that
 * receives over a channel it did not open learns the tid from the HELLO
 * message that starts every channel direction, so replies need no lookup
 * (HELLOs and FENCEs are taken by receives posted on every endpoint:
 * ctrl.c).  Crossing first sends over udp made one side's channel restart
 * and lose what it had sent: there the HELLO is waited for (send.c, FIRST
 * CONTACT).
 *
 * FALLBACK.  psend/pmcast to a task without RCP, to oneself, with a
 * negative tag or context, or before start-up worked, is stock PVM
 * (pvm_psend / pvm_mcast of an in-place buffer).
 *
 * ORDER BETWEEN THE TWO PATHS.  PVM keeps order per sender.  A relinked
 * sender counts, per destination and context, the messages it sends by
 * stock PVM (pvmrcpi_count_stock, send.c; pksend.c wraps pvm_send and
 * pvm_mcast for it).  Before an RCP message that follows stock ones it
 * sends BARRIER{ctx, count} on the channel.  The receiver moves stock messages out of libpvm3's queue into
 * its own held queue (pvm_nrecv(-1,-1) under the current context, buffer
 * detached with pvm_setrbuf(0)), numbering them k = 1, 2, ... per (sender,
 * context).  An RCP message carries the requirement r of the last BARRIER
 * before it; it sorts after stock message r and before r+1, and may be
 * delivered only once r stock messages from that sender have been moved
 * (if a message handler ate some, the wait ends after PVMRCP_ORDER_MS with
 * a warning).  Senders that never mix paths never send a BARRIER.
 *
 * FAST PATH (recv.c).  pvm_precv(tid, tag) from a relinked task that is
 * "quiet" skips the matcher and libpvm3: it polls only the head of that
 * task's channel and receives a matching data message straight into the
 * user's buffer.  Quiet means no stock message from the task can be
 * pending or come first: its HELLO and BARRIERs carry the number of stock
 * messages it has sent us (all contexts) and of FENCEs it has sent; every
 * told stock message has been moved to the held queue; and no FENCE came
 * after the last BARRIER.  A stock send that follows RCP data is preceded
 * by a FENCE the sender waits to see acknowledged, so the FENCE is in our
 * RCP queue before that stock message can exist: polling the channel
 * alone is exact.  Anything else (a held message that matches, a head
 * that does not, a BARRIER asking for stock messages) goes to the matcher.
 *
 * RECEIVING (recv.c).  Every receive call runs one matcher over (a) the
 * held queue — stock messages moved out of libpvm3 and RCP messages taken
 * out of RCP early — and (b) RCP's own unexpected queue, read with
 * rcp_probe: with a tag, rcp_probe(chan or any, (ctx<<31)|tag) finds the
 * first such message; with tag -1 the head of the channel is examined and
 * control messages or messages of other contexts are taken out of the way
 * in order.  The earliest candidate by the order rule wins.  pvm_precv of
 * an RCP message posts rcp_irecv(channel, exact tag, user buffer): data go
 * straight into the user's buffer (eager copy, or one process_vm_readv for
 * large shm messages).  pvm_recv/nrecv/trecv/probe of an RCP message pack
 * its bytes into a PvmDataRaw buffer (pvm_mkbuf + pvm_pkbyte), so
 * pvm_upk* reads them as from a stock psend; pvm_bufinfo/pvm_getminfo
 * report its real source, tag and length (table syn[], entries dropped by
 * pvm_freebuf and checked against libpvm3's own view of the buffer).
 * Stock messages are moved only when needed: when no RCP candidate is
 * found (at most every 10 us while spinning), when an RCP candidate waits
 * for them, and every 1 ms (also on the fast path, and when a sleep woke
 * on a libpvm3 socket) so wildcard receives cannot starve them and a stock
 * sender cannot stall on our full socket.  With two endpoints, receives
 * from any task probe both, alternating which goes first.
 *
 * CONTEXTS.  The current context (pvm_getcontext) is sent in the RCP tag;
 * matching takes the receiver's current context as PVM does.
 *
 * TRUNCATION.  As stock precv: a message longer than the buffer fills the
 * buffer, the rest is dropped, *rlen reports the whole length in bytes, and
 * the call returns 0.  Lengths are in bytes as in stock PVM 3.4.
 *
 * SENDING (send.c).  Messages up to PVMRCP_COPY_MAX bytes (16 KiB) are
 * copied and psend returns at once (the copy is freed by the send's RCP
 * completion callback, which runs from a later call that progresses the
 * endpoint, at the latest rcp_ep_close; copies of up to 512 bytes come
 * from a small pool of reused buffers).  Larger ones go from the user's buffer
 * and psend waits for RCP to complete them (the receiver pulls them).
 * While it waits longer than PVMRCP_STASH_US it takes other peers'
 * messages into the held queue, so two tasks psending to each other (or
 * any cycle) cannot deadlock.  pvm_pmcast: rcp_mcast to the RCP peers,
 * one stock pvm_mcast to the others; never to the caller itself.
 *
 * EXIT AND FAILURE (wait.c).  pvm_exit deletes the mailbox entry, closes
 * the endpoints (RCP lingers until its frames are acknowledged, then runs
 * the callbacks that free the copies of sends) and calls the real pvm_exit; an atexit hook closes the
 * endpoints of a task that never called pvm_exit.  A task blocked in psend,
 * pmcast or precv on a specific tid asks pvmd (pvm_pstat) every
 * PVMRCP_LIVE_MS (200 ms) whether the peer still runs; when it is gone the
 * channel is closed, pending requests complete, and the call returns
 * PvmNoTask (after one last look for messages that arrived before).
 * A gone task's udp port goes to later processes: a channel we still hold
 * to it is reconnected when a new task turns out to own the address
 * (take_over), or handed over when the new task speaks first.
 *
 * WAITING (wait.c).  Spin alone 5 us, then yield the CPU after every
 * look (a task we wait for may share our CPU), then ppoll on every
 * endpoint's fd (each armed first) and libpvm3's sockets; on a crowded
 * CPU (a yield lost it for long) sleep after the 5 us instead.  While
 * spinning the clock is read every 8th poll only (a read costs about as
 * much as an idle poll).
 *
 * THREADS.  Like libpvm3: one thread.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/glue.h"

struct pr_state pvmrcpi_st = {.state = PR_UNINIT, .gen = 1};
#define S pvmrcpi_st

uint64_t pvmrcpi_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int pvmrcpi_err(int rc)
{
	switch (rc) {
	case 0: return 0;
	case RCP_ENOMEM: return PvmNoMem;
	case RCP_EINVAL: return PvmBadParam;
	case RCP_EPEER:
	case RCP_ECLOSED: return PvmNoTask;
	default: return PvmSysErr;
	}
}

static int64_t env_int(const char *name, int64_t def)
{
	const char *v = getenv(name);
	return v && *v ? strtoll(v, NULL, 0) : def;
}

/* ---- peers ---- */

static unsigned hash_tid(int tid, unsigned cap)
{
	return ((uint32_t)tid * 2654435761u) & (cap - 1);
}

struct pr_peer *pvmrcpi_peer_find(int tid, int create)
{
	struct pr_peer *p;
	unsigned h;

	if (!S.htab) {
		if (!create)
			return NULL;
		S.hcap = 256;
		S.htab = calloc(S.hcap, sizeof *S.htab);
		if (!S.htab)
			return NULL;
	}
	h = hash_tid(tid, S.hcap);
	for (p = S.htab[h]; p; p = p->hnext)
		if (p->tid == tid)
			return S.last_peer = p;
	if (!create)
		return NULL;
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->tid = tid;
	p->route = PR_UNKNOWN;
	p->hnext = S.htab[h];
	S.htab[h] = p;
	return S.last_peer = p;
}

/* 256 buckets: a walk is a few hundred loads (a wildcard receive's
 * every 64th look, recv.c). */
struct pr_peer *pvmrcpi_lost_any(void)
{
	for (unsigned h = 0; S.htab && h < S.hcap; h++)
		for (struct pr_peer *p = S.htab[h]; p; p = p->hnext)
			if (!p->dead && p->ch && pr_lost(p))
				return p;
	return NULL;
}

struct pr_ctxstate *pvmrcpi_cs_find(struct pr_peer *p, int ctx)
{
	for (int i = 0; i < p->ncs; i++)
		if (p->cs[i].ctx == ctx)
			return &p->cs[i];
	if (p->ncs == p->capcs) {
		int nc = p->capcs ? 2 * p->capcs : 4;
		struct pr_ctxstate *n = realloc(p->cs, (size_t)nc * sizeof *n);
		if (!n)
			return NULL;
		p->cs = n;
		p->capcs = nc;
	}
	memset(&p->cs[p->ncs], 0, sizeof p->cs[0]);
	p->cs[p->ncs].ctx = ctx;
	return &p->cs[p->ncs++];
}

/* Channel -> peer: the channel's user pointer, the task that took it.  A
 * task that lets go of its channel (pvmrcpi_peer_gone: a new task spoke
 * at its address) stays the user pointer with its own ch moved away, so
 * take_over can still tell "let go, speaks to a gone task" from "never
 * taken"; pvmrcpi_chan_get reports no task for it. */
void pvmrcpi_chan_set(rcp_chan *ch, struct pr_peer *p)
{
	rcp_chan_set_user(ch, p);
}

struct pr_peer *pvmrcpi_chan_get(const rcp_chan *ch)
{
	struct pr_peer *p = rcp_chan_get_user(ch);
	return p && p->ch == ch ? p : NULL;
}

static void mbox_name(int tid, char *buf, size_t len)
{
	snprintf(buf, len, "pvmrcp:%x", (unsigned)tid);
}

/* Looks TID's address up in the mailbox.  0 and ADDR, or a PVM code. */
static int mbox_lookup(int tid, char *addr, size_t len)
{
	char name[64];
	int save, b, rc;

	mbox_name(tid, name, sizeof name);
	save = pvm_setrbuf(0);
	b = pvm_recvinfo(name, 0, PvmMboxDefault);
	if (b > 0) {
		char tmp[sizeof S.addr + 16] = {0};
		rc = pvm_upkstr(tmp);
		if (!rc && strlen(tmp) < len)
			strcpy(addr, tmp);
		else
			rc = PvmNotFound;
		pvmrcpi_real.freebuf(pvm_setrbuf(save));
		return rc;
	}
	pvm_setrbuf(save);
	return b < 0 ? b : PvmNotFound;
}

/* Is TID on another host?  Its host is its pvmd's (pvm_tidtohost: the
 * host part of the tid, bits 18-29), the host pvmd started it on: real
 * hosts, with nothing pretended (PVMRCP_MULTIHOST=remote aside). */
static int remote_tid(int tid)
{
	return S.all_remote || pvm_tidtohost(tid) != pvm_tidtohost(S.mytid);
}

/* From the peer's published addresses ADDRS (space-separated), the one to
 * connect to and our endpoint for it: shm on the same host, else udp (a
 * peer on another host is reached by udp only).  Both ends of a pair
 * decide alike, so a pair uses one transport both ways.  NULL: none. */
static rcp_ep *pick_peer_addr(int tid, char *addrs, const char **out)
{
	static const char *pfx[PR_MAXEP] = {"shm:", "udp:", "xdp:", "verbs:"};
	/* preference order: same host shm, udp; another host verbs, xdp, udp */
	static const int order[2][4] = {{PR_SHM, PR_UDP, -1}, {PR_VERBS, PR_XDP, PR_UDP, -1}};
	int remote = remote_tid(tid);
	char *list[16];
	int n = 0;

	for (char *a = strtok(addrs, " "); a && n < 16; a = strtok(NULL, " "))
		list[n++] = a;
	for (const int *k = order[remote]; *k >= 0; k++) {
		if (!S.eps[*k])
			continue;
		for (int i = 0; i < n; i++)
			if (!strncmp(list[i], pfx[*k], strlen(pfx[*k]))) {
				*out = list[i];
				return S.eps[*k];
			}
	}
	return NULL;
}

/* Task P connected to its published address and got channel CH.  RCP
 * keys channels by address, and the udp port of a task that is gone is
 * given to new processes: CH may be an old channel that still speaks to
 * an earlier holder of the address.  Frames on it name that holder's
 * epoch, so P's process would drop them as stale and never answer.
 * Which process CH speaks to: the task that took it (its HELLO, or our
 * connect; a HELLO still waiting on an unclaimed CH is taken now), as
 * long as no new incarnation has spoken since (rcp_chan_restarts).
 * - P: CH is P's.
 * - never taken by a task: a channel our connect just made, or one P's
 *   process opened and whose HELLO is still on its way (heard or not:
 *   a first contact over udp exchanges control frames before any
 *   message, send.c FIRST CONTACT).  P's: no other process speaks there.
 * - taken by another task O (still O's, or let go by O), and a new
 *   incarnation spoke since O took CH: that is P's process (two live
 *   tasks never share an address); RCP has failed O's pending requests
 *   then.  O lets go.
 * - taken by another task O, nothing new spoke since: CH speaks to a
 *   gone task.  O lets go and CH is reconnected (rcp_chan_reconnect:
 *   fresh, and deaf to the stragglers of the incarnation it spoke to).
 * First the frames already queued are taken, so that what P's process
 * has sent counts.  (Until session 17 a never-taken channel that had
 * heard frames was reconnected too; a first contact met halfway then
 * banned P's own process, and one direction of the pair stayed silent.)
 * Not covered: a task that died after its first control frames and
 * before its HELLO arrived, whose port a new task took.  Returns 0 or an
 * rcp_chan_reconnect code. */
static int take_over(struct pr_peer *p, rcp_ep *ep, rcp_chan **ch)
{
	struct pr_peer *o = rcp_chan_get_user(*ch);
	struct rcp_status st;

	if (o == p)
		return 0;
	/* bounded: a flood of new frames does not keep us here */
	for (int k = 0; k < 64 && rcp_progress(ep) > 0; k++)
		;
	o = rcp_chan_get_user(*ch);
	if (!o && rcp_probe(ep, *ch, PR_HELLO, &st) == 1) {
		pvmrcpi_take_ctrl(ep, *ch, PR_HELLO);
		o = rcp_chan_get_user(*ch);
	}
	if (o == p || !o)
		return 0;
	{
		int renew = rcp_chan_restarts(*ch) == o->restarts;
		pvmrcpi_peer_gone(o);
		if (!renew)
			return 0;
	}
	return rcp_chan_reconnect(ch);
}

int pvmrcpi_route(struct pr_peer *p)
{
	char addr[sizeof S.addr];
	const char *a;
	rcp_ep *ep;
	uint64_t now;

	if (p->route == PR_RCP)
		return PR_RCP;
	if (p->dead || p->tid == S.mytid)
		return PR_STOCK;
	now = pvmrcpi_now();
	if (p->route == PR_STOCK && now < p->recheck_ns)
		return PR_STOCK;
	pr_changed(); /* p->ch and p->route (glue.h, FAST PATHS) */
	if (mbox_lookup(p->tid, addr, sizeof addr) == 0 &&
	    (ep = pick_peer_addr(p->tid, addr, &a)) != NULL && rcp_connect(ep, a, &p->ch) == 0 &&
	    take_over(p, ep, &p->ch) == 0) {
		p->ep = ep;
		p->restarts = rcp_chan_restarts(p->ch);
		pvmrcpi_chan_set(p->ch, p);
		p->route = PR_RCP;
		return PR_RCP;
	}
	p->backoff_ns = p->backoff_ns ? p->backoff_ns * 2 : 1000000;
	if (p->backoff_ns > 1000000000ull)
		p->backoff_ns = 1000000000ull;
	p->recheck_ns = now + p->backoff_ns;
	p->route = PR_STOCK;
	return PR_STOCK;
}

/* P's task is gone and another task speaks on its channel now: P lets
 * go of the channel (it no longer names P) without closing it. */
void pvmrcpi_peer_gone(struct pr_peer *p)
{
	pvmrcpi_unwatch(p); /* the channel's next task watches it */
	pr_changed();
	p->dead = 1;
	p->ch = NULL; /* the channel's user pointer stays: let go (chan_get) */
	p->route = PR_STOCK;
}

void pvmrcpi_peer_dead(struct pr_peer *p)
{
	pr_changed();
	p->dead = 1;
	if (p->ch) {
		pvmrcpi_chan_set(p->ch, NULL);
		rcp_chan_close(p->ch);
		p->ch = NULL;
	}
	p->route = PR_STOCK;
}

/* ---- start-up and exit ---- */

static void close_eps(void)
{
	pr_changed(); /* no fast path past the close (glue.h, FAST PATHS) */
	for (int k = 0; k < PR_MAXEP; k++) {
		rcp_ep_close(S.eps[k]);
		S.eps[k] = NULL;
	}
	pvmrcpi_mcn_close();
}

static void at_exit(void)
{
	if (S.state == PR_READY) {
		close_eps();
		S.state = PR_CLOSED;
	}
}

/* Our IPv4 address as the other hosts of the VM reach us, into IP: the
 * source address the kernel picks toward another host's pvmd (connecting
 * a UDP socket sends nothing).  Our host name alone is not enough: it
 * often resolves to loopback (Debian's "127.0.1.1 host" line), which no
 * other host reaches.  Falls back to the name's address when no other
 * host resolves.  0, or -1: none (then udp: on loopback, as one host). */
static int host_ip(char *ip, size_t len)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res;
	struct pvmhostinfo *hi;
	int nhost = 0, narch, me = pvm_tidtohost(S.mytid);
	char host[256];

	if (pvm_config(&nhost, &narch, &hi) < 0)
		nhost = 0;
	for (int i = 0; i < nhost; i++) {
		struct sockaddr_in a;
		socklen_t al = sizeof a;
		int fd, ok;
		if (hi[i].hi_tid == me || !hi[i].hi_name ||
		    getaddrinfo(hi[i].hi_name, "9", &hints, &res))
			continue;
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
		     getsockname(fd, (struct sockaddr *)&a, &al) == 0 &&
		     (ntohl(a.sin_addr.s_addr) >> 24) != 127 &&
		     inet_ntop(AF_INET, &a.sin_addr, ip, (socklen_t)len);
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		if (ok)
			return 0;
	}
	if (gethostname(host, sizeof host) == 0 && getaddrinfo(host, NULL, &hints, &res) == 0) {
		int rc = getnameinfo(res->ai_addr, res->ai_addrlen, ip, (socklen_t)len, NULL, 0,
		                     NI_NUMERICHOST);
		freeaddrinfo(res);
		return rc ? -1 : 0;
	}
	return -1;
}

/* The interface holding IPv4 address IP into NAME; 0 or -1. */
static int ip_ifname(const char *ip, char *name, size_t len)
{
	struct ifaddrs *ifa, *i;
	char a[64];
	int rc = -1;

	if (getifaddrs(&ifa))
		return -1;
	for (i = ifa; i && rc; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a,
		              sizeof a) &&
		    !strcmp(a, ip) && strlen(i->ifa_name) < len) {
			snprintf(name, len, "%s", i->ifa_name);
			rc = 0;
		}
	freeifaddrs(ifa);
	return rc;
}

/* Our address for transport K; "" if there is none. */
static void ep_addr(int k, char *buf, size_t len, int mytid)
{
	if (k == PR_VERBS) {
		/* no default: which HCA port reaches the other hosts is the
		 * site's to say ("verbs:mlx5_0:1") */
		const char *want = getenv("PVMRCP_VERBS_ADDR");
		snprintf(buf, len, "%s", want && !strncmp(want, "verbs:", 6) ? want : "");
	} else if (k == PR_XDP) {
		const char *want = getenv("PVMRCP_XDP_ADDR");
		char ip[64], ifn[64];
		buf[0] = 0;
		if (want && !strncmp(want, "xdp:", 4))
			snprintf(buf, len, "%s", want);
		else if (host_ip(ip, sizeof ip) == 0 && ip_ifname(ip, ifn, sizeof ifn) == 0)
			snprintf(buf, len, "xdp:%s", ifn);
	} else if (k == PR_SHM) {
		/* PVM_VMID in the name lets a harness clean up after killed tasks */
		const char *vm = getenv("PVM_VMID");
		snprintf(buf, len, "shm:pvmrcp-%.12s-%x-%d", vm && *vm ? vm : "0", (unsigned)mytid,
		         (int)getpid());
	} else {
		const char *want = getenv("PVMRCP_UDP_ADDR");
		char ip[64];
		if (want && !strncmp(want, "udp:", 4)) {
			snprintf(buf, len, "%s", want); /* an interface, a port */
			return;
		}
		/* a real multi-host VM needs the host's address, not loopback */
		if (S.multihost && !S.all_remote && host_ip(ip, sizeof ip) == 0)
			snprintf(buf, len, "udp:%s:", ip);
		else
			snprintf(buf, len, "udp:");
	}
}

/* Which endpoints to open: shm always, udp too when the VM has more than
 * one host (or PVMRCP_MULTIHOST says to pretend so); RCP_TRANSPORT=shm|udp
 * opens that one only, for every peer; RCP_TRANSPORT=xdp opens shm, and
 * in a VM of several hosts udp and xdp (the last may fail: another task
 * owns the interface); RCP_TRANSPORT=verbs the same with verbs for xdp
 * (PVMRCP_VERBS_ADDR; where it does not open, udp).  *WANT[k]
 * set for each. */
static int pick_transports(int want[PR_MAXEP])
{
	const char *t = getenv("RCP_TRANSPORT"), *mh = getenv("PVMRCP_MULTIHOST");
	int nhost = 1, narch;
	struct pvmhostinfo *hi;

	if (mh && *mh && strcmp(mh, "0")) {
		S.multihost = 1;
		S.all_remote = !strcmp(mh, "remote");
	} else {
		if (pvm_config(&nhost, &narch, &hi) < 0)
			nhost = 1;
		S.multihost = nhost > 1;
	}
	want[PR_SHM] = want[PR_UDP] = want[PR_XDP] = want[PR_VERBS] = 0;
	if (!t || !*t) {
		want[PR_SHM] = 1;
		want[PR_UDP] = S.multihost;
		return 0;
	}
	if (!strcmp(t, "shm") || !strcmp(t, "udp")) {
		want[!strcmp(t, "shm") ? PR_SHM : PR_UDP] = 1;
		return 0;
	}
	if (!strcmp(t, "xdp")) {
		/* as by default, plus xdp where there is another host to reach
		 * (never an XDP program on the interface of a one-host VM) */
		want[PR_SHM] = 1;
		want[PR_UDP] = S.multihost;
		want[PR_XDP] = S.multihost && !S.all_remote;
		return 0;
	}
	if (!strcmp(t, "verbs")) {
		/* as by default, plus verbs for other hosts (where it opens:
		 * udp stays for peers without it) */
		want[PR_SHM] = 1;
		want[PR_UDP] = want[PR_VERBS] = S.multihost;
		return 0;
	}
	fprintf(stderr, "libpvmrcp: RCP_TRANSPORT=%s not supported here (shm|udp|xdp|verbs)\n", t);
	return -1;
}

static int do_init(void)
{
	struct rcp_ep_config ec = {0};
	char addr[RCP_NIC_ADDRSTR_MAX];
	int tid, rc, b, save, want[PR_MAXEP];

	tid = pvm_mytid();
	if (tid < 0)
		return tid;
	S.mytid = tid;
	S.held.next = S.held.prev = &S.held;
	S.stash_ns = (uint64_t)env_int("PVMRCP_STASH_US", 1000) * 1000;
	S.live_ns = (uint64_t)env_int("PVMRCP_LIVE_MS", 200) * 1000000;
	S.order_ns = (uint64_t)env_int("PVMRCP_ORDER_MS", 2000) * 1000000;
	S.copy_max = (size_t)env_int("PVMRCP_COPY_MAX", 16384);
	S.copy_bytes = (size_t)env_int("PVMRCP_COPY_BYTES", 4 << 20);
	{
		const char *st = getenv("PVMRCP_STATS");
		S.stats = st && *st && strcmp(st, "0") ? st : NULL;
	}
	/* Liveness comes from pvmd; RCP must not fail a channel because a peer
	 * computes for a long time without calling the library.  A user who
	 * sets it chooses RCP's liveness for tasks on other hosts (wait.c,
	 * WATCHES). */
	S.rcp_liveness = getenv("RCP_PEER_TIMEOUT") != NULL;
	setenv("RCP_PEER_TIMEOUT", "86400000", 0);
	if (pick_transports(want))
		return PvmBadParam;
	ec.flags = RCP_EP_ACCEPT;
	ec.crc = -1;
	for (int k = 0; k < PR_MAXEP; k++) {
		size_t n = strlen(S.addr);
		if (!want[k])
			continue;
		ep_addr(k, addr, sizeof addr, tid);
		rc = k >= PR_XDP && !addr[0] ? RCP_EADDR : rcp_ep_open(addr, &ec, &S.eps[k]);
		if (rc && k >= PR_XDP) {
			/* udp stays: our peers on other hosts reach us by it */
			fprintf(stderr, "libpvmrcp: t%x: rcp_ep_open(%s): %s; udp to other hosts\n",
			        (unsigned)tid,
			        addr[0]       ? addr
			        : k == PR_XDP ? "xdp: no interface"
			                      : "verbs: PVMRCP_VERBS_ADDR unset",
			        rcp_strerror(rc));
			S.eps[k] = NULL;
			continue;
		}
		if (rc) {
			fprintf(stderr, "libpvmrcp: t%x: rcp_ep_open(%s): %s; using stock PVM\n",
			        (unsigned)tid, addr, rcp_strerror(rc));
			close_eps();
			return pvmrcpi_err(rc);
		}
		if (n)
			S.addr[n++] = ' ';
		rcp_ep_addr(S.eps[k], S.addr + n, sizeof S.addr - n);
	}
	pvmrcpi_ctrl_open(); /* before anyone knows our address */
	pvmrcpi_mcn_open();  /* pmcast by network multicast where it can */
	mbox_name(tid, S.mbox, sizeof S.mbox);
	b = pvm_mkbuf(PvmDataDefault);
	save = pvm_setsbuf(b);
	pvm_pkstr(S.addr);
	rc = pvm_putinfo(S.mbox, b, PvmMboxDefault);
	pvm_setsbuf(save);
	pvmrcpi_real.freebuf(b);
	if (rc < 0) {
		fprintf(stderr, "libpvmrcp: t%x: pvm_putinfo(%s): %d; using stock PVM\n",
		        (unsigned)tid, S.mbox, rc);
		close_eps();
		return rc;
	}
	atexit(at_exit);
	return 0;
}

int pvmrcpi_ready(void)
{
	const char *e;
	int rc;

	if (S.state == PR_READY)
		return 1;
	if (S.state != PR_UNINIT)
		return 0;
	if (pvmrcpi_resolve())
		return 0;
	e = getenv("PVMRCP");
	if (e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "no"))) {
		S.state = PR_OFF;
		return 0;
	}
	S.state = PR_INITING;
	rc = do_init();
	if (rc == 0) {
		S.state = PR_READY;
		return 1;
	}
	/* No pvmd yet: try again on the next call; other failures: stock. */
	S.state = rc == PvmSysErr && !S.eps[PR_SHM] && !S.eps[PR_UDP] ? PR_UNINIT : PR_OFF;
	return 0;
}

int pvm_rcp_init(void)
{
	if (pvmrcpi_ready())
		return 0;
	if (S.state == PR_OFF)
		return pvmrcpi_resolve() ? PvmSysErr : PvmNotImpl;
	return S.state == PR_CLOSED ? PvmSysErr : pvm_mytid() < 0 ? pvm_mytid() : PvmSysErr;
}

int pvm_rcp_active(void)
{
	return S.state == PR_READY;
}

int pvm_rcp_route(int tid)
{
	struct pr_peer *p;
	if (!pvmrcpi_ready())
		return 0;
	p = pvmrcpi_peer(tid, 1);
	if (!p || p->route == PR_RCP)
		return !!p;
	/* A channel opened here says so at once: a peer whose first message
	 * crossed our connect waits for our HELLO (send.c, FIRST CONTACT). */
	return pvmrcpi_route(p) == PR_RCP && pvmrcpi_hello(p) == 0;
}

const char *pvm_rcp_transport(int tid)
{
	struct pr_peer *p = S.state == PR_READY ? pvmrcpi_peer(tid, 0) : NULL;
	if (!p || !p->ch || p->route != PR_RCP)
		return "stock";
	return p->ep == S.eps[PR_SHM]     ? "shm"
	       : p->ep == S.eps[PR_XDP]   ? "xdp"
	       : p->ep == S.eps[PR_VERBS] ? "verbs"
	                                  : "udp";
}

int pvm_exit(void)
{
	if (pvmrcpi_resolve())
		return PvmSysErr;
	if (S.state == PR_READY) {
		if (S.stats)
			pvmrcpi_stats_print();
		pvm_delinfo(S.mbox, 0, PvmMboxDefault);
		close_eps();
		pvmrcpi_free_held();
		S.state = PR_CLOSED;
	}
	return pvmrcpi_real.exit();
}
