/*
 * rcp/mcastnet.c — reliable multicast of whole messages (include/rcp/mcastnet.h).
 *
 * Why a layer of its own, beside the channels and not inside them: a
 * channel's sequence numbers, window and acks are per pair; a frame sent
 * once to a group must carry one number that means the same to every
 * member.  So a message multicast here is numbered (sender epoch, message,
 * frame index); the channels are left as they are, and the caller ties
 * the two together by sending the message's id on its channel once the
 * members have it (pvm-glue/send.c), which keeps per-sender order without
 * any change to the channel protocol.
 *
 * Two nic endpoints: U, unicast, at the host's address (it sends the data
 * to the group and the repairs, and carries acknowledgements both ways),
 * and G, bound to the group and joined on U's interface (it receives the
 * group's data).  A member learns the sender's U address from the source
 * of the group datagram and answers there.
 *
 * Reliability: a member acknowledges every ACK_EVERY new frames, on every
 * poll and when the message is whole: {cumulative frames, up to MAXRANGES
 * missing ranges above it}.  The sender resends the missing frames to
 * that member alone (a repair by unicast costs the others nothing), at
 * most once per rto for the same frames (a range reported again before
 * the repair could arrive is not resent: REP_HI below).  The sender sends
 * a new frame only below the slowest live member's cumulative ack plus the
 * window, so a slow member slows the group rather than losing frames to a
 * full socket; a member whose acknowledgement has not moved for dead_ns
 * while it lacks frames sent (dead, or alive but stuck: acks that do not
 * advance keep no one waiting) is given up (RCP_EPEER) and the window
 * moves on without it.  No ack for rto
 * with frames outstanding: the sender polls the group (POLL), which every
 * member answers; a poll also tells a member that missed every data frame
 * of a message what it is.
 *
 * Members: a DATA frame names its members by a 64-bit Bloom filter of
 * their ids (one bit each): a host that is not one drops the frame
 * (foreign_recv) without buffering it; a false positive only costs a
 * buffer that is never claimed.  Each sender has one message in flight, so
 * a member holds one partial message per sender: a frame of a newer
 * message abandons the partial one (the sender gave up on us and sends it
 * another way), and one of an older message is stale.
 */
#include "config.h"

#include <rcp/mcastnet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/rcp_common.h"

#define MC_MAGIC     0x4d43u /* "CM" on the wire, little-endian */
#define MC_VERSION   1
#define MC_HDR       40 /* common header; DATA adds 8, ACK 8 + 8 per range */
#define MC_DATA_HDR  48
#define MC_MAXRANGES 32
#define MC_MAXMSG    (1ull << 30)
#define MC_SENDERS   64 /* partial messages held at once (one per sender) */
#define MC_DONE_MAX  32 /* whole messages held unclaimed */
#define MC_BURST     32 /* frames taken per receive call */

enum { MC_DATA = 1, MC_POLL = 2, MC_ACK = 3 };

/* ---- wire ---- */

struct mc_hdr {
	uint32_t type, group, epoch, msg, nfr, fsz;
	uint64_t total, bloom; /* ACK: bloom is the member's id */
};

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void hdr_put(uint8_t *b, const struct mc_hdr *h)
{
	b[0] = (uint8_t)(MC_MAGIC & 0xff);
	b[1] = (uint8_t)(MC_MAGIC >> 8);
	b[2] = MC_VERSION;
	b[3] = (uint8_t)h->type;
	put32(b + 4, h->group);
	put32(b + 8, h->epoch);
	put32(b + 12, h->msg);
	put32(b + 16, h->nfr);
	put32(b + 20, h->fsz);
	put64(b + 24, h->total);
	put64(b + 32, h->bloom);
}

/* The header's own consistency: nfr frames of fsz bytes cover total. */
static int hdr_get(const uint8_t *b, size_t len, struct mc_hdr *h)
{
	if (len < MC_HDR || b[0] != (MC_MAGIC & 0xff) || b[1] != (MC_MAGIC >> 8) ||
	    b[2] != MC_VERSION)
		return -1;
	h->type = b[3];
	h->group = get32(b + 4);
	h->epoch = get32(b + 8);
	h->msg = get32(b + 12);
	h->nfr = get32(b + 16);
	h->fsz = get32(b + 20);
	h->total = get64(b + 24);
	h->bloom = get64(b + 32);
	if (h->type < MC_DATA || h->type > MC_ACK || !h->msg || !h->nfr || !h->fsz ||
	    h->total > MC_MAXMSG)
		return -1;
	/* nfr == ceil(total / fsz), at least one frame (an empty message) */
	if (h->nfr != (h->total ? (h->total + h->fsz - 1) / h->fsz : 1))
		return -1;
	return 0;
}

static uint64_t hash64(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h ^ (h >> 29);
}
static uint64_t bloom_bit(uint64_t id)
{
	return 1ull << (id % 64);
}

/* ---- state ---- */

struct mc_member { /* sender side */
	uint64_t id;
	int peer; /* on U, -1 until its first ack */
	uint32_t cum;
	uint32_t rep_hi;           /* frames below were repaired at rep_ns */
	uint64_t heard_ns, rep_ns; /* heard_ns: its ack last moved (or it had all) */
	int failed;
};

struct mc_rx { /* member side: one sender's partial message */
	uint8_t src[RCP_NIC_ADDR_MAX];
	uint32_t srclen;
	int peer; /* on U */
	uint32_t epoch, msg, nfr, fsz, cum, hi, since_ack;
	uint64_t total;
	uint32_t done_msg; /* the last message of this epoch received whole */
	uint8_t *buf, *have;
	uint64_t used_ns;
	int live;
};

struct mc_done {
	uint64_t id;
	void *buf;
	size_t len;
};

struct rcp_mcn {
	rcp_nic *u, *g;
	int gpeer; /* the group, a peer on U */
	uint32_t group, epoch, mtu, window, ack_every;
	uint64_t self, dead_ns, rto_ns;
	uint8_t uaddr[RCP_NIC_ADDR_MAX];
	size_t uaddrlen;
	/* sending */
	int sending; /* 1: a message in flight; 2: done, status not yet taken */
	const uint8_t *sbuf;
	uint64_t slen, bloom;
	uint32_t smsg, snfr, sfsz, next;
	uint64_t last_ack_ns, last_poll_ns;
	struct mc_member *mem;
	int nmem;
	/* receiving */
	struct mc_rx rx[MC_SENDERS];
	struct mc_done done[MC_DONE_MAX];
	int ndone;
	struct rcp_mcn_stats st;
};

/* ---- sending ---- */

static int send_data(rcp_mcn *m, int peer, uint32_t idx)
{
	uint8_t h[MC_DATA_HDR];
	struct mc_hdr hd = {MC_DATA, m->group, m->epoch, m->smsg,
	                    m->snfr, m->sfsz,  m->slen,  m->bloom};
	uint64_t off = (uint64_t)idx * m->sfsz;
	size_t n = idx + 1 == m->snfr ? (size_t)(m->slen - off) : m->sfsz;
	struct iovec iov[2] = {{h, sizeof h}, {(void *)(uintptr_t)(m->sbuf + off), n}};
	hdr_put(h, &hd);
	put32(h + 40, idx);
	put32(h + 44, 0);
	return rcp_nic_send(m->u, peer, iov, n ? 2 : 1, 0);
}

static void send_poll(rcp_mcn *m, uint64_t now)
{
	uint8_t h[MC_HDR + 8];
	struct mc_hdr hd = {MC_POLL, m->group, m->epoch, m->smsg,
	                    m->snfr, m->sfsz,  m->slen,  m->bloom};
	struct iovec iov = {h, sizeof h};
	hdr_put(h, &hd);
	put32(h + MC_HDR, m->next); /* frames sent so far: the tail's losses show */
	put32(h + MC_HDR + 4, 0);
	if (rcp_nic_send(m->u, m->gpeer, &iov, 1, 0) == 0)
		m->st.polls_sent++;
	m->last_poll_ns = now;
}

int rcp_mcn_send(rcp_mcn *m, const char *const *members, int n, const void *buf, size_t len,
                 uint64_t *id)
{
	struct mc_member *mem;
	uint64_t now = rcpi_now_ns();
	if (!m || !members || n <= 0 || (!buf && len) || !id)
		return RCP_EINVAL;
	if (m->sending)
		return RCP_EBUSY;
	if (len > MC_MAXMSG)
		return RCP_EMSGSIZE;
	mem = calloc((size_t)n, sizeof *mem);
	if (!mem)
		return RCP_ENOMEM;
	free(m->mem);
	m->mem = mem;
	m->nmem = n;
	m->bloom = 0;
	for (int i = 0; i < n; i++) {
		if (!members[i]) {
			m->nmem = 0;
			return RCP_EINVAL;
		}
		mem[i].id = hash64(members[i]);
		mem[i].peer = -1;
		mem[i].heard_ns = now;
		m->bloom |= bloom_bit(mem[i].id);
	}
	m->sbuf = buf;
	m->slen = len;
	m->smsg++;
	m->sfsz = m->mtu - MC_DATA_HDR;
	m->snfr = len ? (uint32_t)((len + m->sfsz - 1) / m->sfsz) : 1;
	m->next = 0;
	m->last_ack_ns = m->last_poll_ns = now;
	m->sending = 1;
	*id = (uint64_t)m->epoch << 32 | m->smsg;
	rcp_mcn_progress(m);
	return 0;
}

int rcp_mcn_send_status(rcp_mcn *m, int *status, int n)
{
	if (!m || !m->nmem || n != m->nmem || (!status && n))
		return RCP_EINVAL;
	if (m->sending == 1)
		return RCP_EAGAIN;
	for (int i = 0; i < n; i++)
		status[i] = m->mem[i].failed ? RCP_EPEER : 0;
	m->sending = 0;
	return 0;
}

/* The slowest live member's ack; SND_DONE set when every member has the
 * message or failed. */
static uint32_t slowest(rcp_mcn *m, uint64_t now, int *all_done)
{
	uint32_t lo = m->snfr;
	*all_done = 1;
	for (int i = 0; i < m->nmem; i++) {
		struct mc_member *me = &m->mem[i];
		if (me->failed || me->cum == m->snfr)
			continue;
		if (me->cum >= m->next) /* has all sent so far: not behind */
			me->heard_ns = now;
		else if (now - me->heard_ns > m->dead_ns) {
			me->failed = 1;
			m->st.members_failed++;
			continue;
		}
		*all_done = 0;
		if (me->cum < lo)
			lo = me->cum;
	}
	return lo;
}

static int send_step(rcp_mcn *m, uint64_t now)
{
	int all_done, did = 0;
	uint32_t lo;
	if (m->sending != 1)
		return 0;
	lo = slowest(m, now, &all_done);
	if (all_done) {
		m->sending = 2;
		m->st.msgs_sent++;
		return 1;
	}
	while (m->next < m->snfr && m->next < lo + m->window) {
		if (send_data(m, m->gpeer, m->next))
			break; /* EAGAIN: the socket is full; next progress */
		m->next++;
		m->st.data_sent++;
		did = 1;
	}
	if (now - m->last_ack_ns >= m->rto_ns && now - m->last_poll_ns >= m->rto_ns)
		send_poll(m, now);
	return did;
}

/* An ack from a member: {cum, nr, ranges}. */
static void take_ack(rcp_mcn *m, const struct mc_hdr *h, const uint8_t *b, size_t len,
                     const struct rcp_nic_frame *f, uint64_t now)
{
	struct mc_member *me = NULL;
	uint32_t cum, nr;
	if (len < MC_HDR + 8) {
		m->st.bad_recv++;
		return;
	}
	cum = get32(b + MC_HDR);
	nr = get32(b + MC_HDR + 4);
	if (nr > MC_MAXRANGES || len != MC_HDR + 8 + 8 * (size_t)nr) {
		m->st.bad_recv++;
		return;
	}
	if (h->epoch != m->epoch || !m->sending || h->msg != m->smsg) {
		m->st.stale_recv++; /* an ack of an earlier message, or of our earlier life */
		return;
	}
	if (h->nfr != m->snfr || h->total != m->slen || h->fsz != m->sfsz || cum > m->snfr) {
		m->st.bad_recv++;
		return;
	}
	for (int i = 0; i < m->nmem && !me; i++)
		if (m->mem[i].id == h->bloom)
			me = &m->mem[i];
	if (!me || me->failed) {
		m->st.stale_recv++; /* not a member of this message, or given up */
		return;
	}
	if (me->peer < 0 && rcp_nic_peer_add(m->u, f->src, f->srclen, &me->peer)) {
		me->peer = -1;
		return;
	}
	m->st.acks_recv++;
	m->last_ack_ns = now;
	if (cum > me->cum) { /* progress: a member that acks without it is stuck */
		me->cum = cum;
		me->heard_ns = now;
	}
	/* Repairs: frames reported missing, sent before, not repaired in the
	 * last rto (a repair then may still be on its way). */
	if (now - me->rep_ns >= m->rto_ns)
		me->rep_hi = 0;
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t a = get32(b + MC_HDR + 8 + 8 * i), e = get32(b + MC_HDR + 12 + 8 * i);
		if (a >= e || a < cum || e > m->snfr) {
			m->st.bad_recv++;
			return;
		}
		if (a < me->rep_hi)
			a = me->rep_hi;
		if (e > m->next)
			e = m->next;
		for (; a < e; a++) {
			if (send_data(m, me->peer, a))
				return;
			m->st.repairs_sent++;
			me->rep_hi = a + 1;
			me->rep_ns = now;
		}
	}
}

/* ---- receiving ---- */

static void send_ack(rcp_mcn *m, struct mc_rx *r, uint32_t msg, uint32_t cum, int gaps)
{
	uint8_t b[MC_HDR + 8 + 8 * MC_MAXRANGES];
	struct mc_hdr hd = {MC_ACK, m->group, r->epoch, msg, r->nfr, r->fsz, r->total, m->self};
	uint32_t nr = 0;
	struct iovec iov = {b, 0};
	hdr_put(b, &hd);
	if (gaps && r->have) {
		for (uint32_t i = r->cum; i < r->hi && nr < MC_MAXRANGES;) {
			uint32_t j;
			if (r->have[i]) {
				i++;
				continue;
			}
			for (j = i; j < r->hi && !r->have[j]; j++)
				;
			put32(b + MC_HDR + 8 + 8 * nr, i);
			put32(b + MC_HDR + 12 + 8 * nr, j);
			nr++;
			i = j;
		}
	}
	put32(b + MC_HDR, cum);
	put32(b + MC_HDR + 4, nr);
	iov.iov_len = MC_HDR + 8 + 8 * (size_t)nr;
	if (rcp_nic_send(m->u, r->peer, &iov, 1, 0) == 0)
		m->st.acks_sent++;
	r->since_ack = 0;
}

static void rx_reset(struct mc_rx *r)
{
	free(r->buf);
	free(r->have);
	r->buf = r->have = NULL;
	r->msg = 0;
}

/* The partial-message slot of the sender at F's source (made, or the
 * least recently used one taken over). */
static struct mc_rx *rx_slot(rcp_mcn *m, const struct rcp_nic_frame *f, uint64_t now)
{
	struct mc_rx *r = NULL, *old = &m->rx[0];
	if (!f->src || !f->srclen || f->srclen > RCP_NIC_ADDR_MAX)
		return NULL;
	for (int i = 0; i < MC_SENDERS; i++) {
		struct mc_rx *x = &m->rx[i];
		if (x->live && x->srclen == f->srclen && !memcmp(x->src, f->src, f->srclen)) {
			r = x;
			break;
		}
		if (!x->live || (old->live && x->used_ns < old->used_ns))
			old = x;
	}
	if (!r) {
		r = old;
		if (r->live && r->msg)
			m->st.abandoned++;
		rx_reset(r);
		memset(r, 0, sizeof *r);
		if (rcp_nic_peer_add(m->u, f->src, f->srclen, &r->peer))
			return NULL;
		memcpy(r->src, f->src, f->srclen);
		r->srclen = f->srclen;
		r->live = 1;
	}
	r->used_ns = now;
	return r;
}

static void rx_complete(rcp_mcn *m, struct mc_rx *r)
{
	struct mc_done *d;
	if (m->ndone == MC_DONE_MAX) { /* the oldest goes: its claim never came */
		free(m->done[0].buf);
		memmove(m->done, m->done + 1, (MC_DONE_MAX - 1) * sizeof *m->done);
		m->ndone--;
		m->st.unclaimed++;
	}
	d = &m->done[m->ndone++];
	d->id = (uint64_t)r->epoch << 32 | r->msg;
	d->buf = r->buf ? r->buf : malloc(1);
	d->len = (size_t)r->total;
	r->buf = NULL;
	m->st.msgs_recv++;
	m->st.bytes_recv += r->total;
	r->done_msg = r->msg;
	free(r->have);
	r->have = NULL;
	r->msg = 0;
}

/* A DATA or POLL frame from the group (or a repair on U). */
static void take_data(rcp_mcn *m, const struct mc_hdr *h, const uint8_t *b, size_t len,
                      const struct rcp_nic_frame *f, uint64_t now)
{
	struct mc_rx *r;
	uint32_t idx = 0;
	size_t plen = 0;
	if (h->type == MC_DATA) {
		if (len < MC_DATA_HDR) {
			m->st.bad_recv++;
			return;
		}
		idx = get32(b + 40);
		plen = len - MC_DATA_HDR;
		if (idx >= h->nfr ||
		    plen != (idx + 1 == h->nfr ? h->total - (uint64_t)idx * h->fsz : h->fsz)) {
			m->st.bad_recv++;
			return;
		}
	} else if (len != MC_HDR + 8 || (idx = get32(b + MC_HDR)) > h->nfr) {
		m->st.bad_recv++; /* a POLL: IDX is the frames sent so far */
		return;
	}
	if (!(h->bloom & bloom_bit(m->self))) {
		m->st.foreign_recv++;
		return;
	}
	r = rx_slot(m, f, now);
	if (!r)
		return;
	if (r->epoch != h->epoch) { /* a new life of that sender: start afresh */
		if (r->msg)
			m->st.abandoned++;
		rx_reset(r);
		r->epoch = h->epoch;
		r->done_msg = 0;
	} else if (h->msg <= r->done_msg || (r->msg && h->msg < r->msg)) {
		/* Done already (our ack was lost: say so again), or older. */
		m->st.stale_recv++;
		if (h->msg == r->done_msg && !r->msg) {
			struct mc_rx t = *r;
			t.nfr = h->nfr, t.fsz = h->fsz, t.total = h->total;
			send_ack(m, &t, h->msg, h->nfr, 0);
		}
		return;
	}
	if (r->msg != h->msg) { /* a newer message */
		if (r->msg)
			m->st.abandoned++;
		rx_reset(r);
		r->have = calloc(h->nfr, 1);
		r->buf = malloc(h->total ? (size_t)h->total : 1);
		if (!r->have || !r->buf) {
			rx_reset(r);
			return;
		}
		r->msg = h->msg;
		r->nfr = h->nfr;
		r->fsz = h->fsz;
		r->total = h->total;
		r->cum = r->hi = r->since_ack = 0;
	} else if (h->nfr != r->nfr || h->fsz != r->fsz || h->total != r->total) {
		m->st.bad_recv++; /* the same message cannot change shape */
		return;
	}
	if (h->type == MC_POLL) {
		if (idx > r->hi)
			r->hi = idx;
		send_ack(m, r, r->msg, r->cum, 1);
		return;
	}
	if (r->have[idx]) {
		m->st.dup_recv++;
		return;
	}
	memcpy(r->buf + (size_t)idx * r->fsz, b + MC_DATA_HDR, plen);
	r->have[idx] = 1;
	m->st.data_recv++;
	if (idx >= r->hi)
		r->hi = idx + 1;
	while (r->cum < r->nfr && r->have[r->cum])
		r->cum++;
	if (r->cum == r->nfr) {
		uint32_t msg = r->msg;
		send_ack(m, r, msg, r->nfr, 0);
		rx_complete(m, r);
		return;
	}
	if (++r->since_ack >= m->ack_every)
		send_ack(m, r, r->msg, r->cum, 1);
}

static void take_frame(rcp_mcn *m, const struct rcp_nic_frame *f, uint64_t now)
{
	const uint8_t *b = f->data;
	struct mc_hdr h;
	if (hdr_get(b, f->len, &h) || h.group != m->group) {
		m->st.bad_recv++;
		return;
	}
	if (h.type == MC_ACK) {
		take_ack(m, &h, b, f->len, f, now);
		return;
	}
	/* Our own data looped back by the group (IP_MULTICAST_LOOP). */
	if (f->srclen == m->uaddrlen && !memcmp(f->src, m->uaddr, m->uaddrlen) &&
	    h.epoch == m->epoch)
		return;
	take_data(m, &h, b, f->len, f, now);
}

static int drain(rcp_mcn *m, rcp_nic *nic, uint64_t now)
{
	struct rcp_nic_frame fr[MC_BURST];
	int n = rcp_nic_recv(nic, fr, MC_BURST);
	if (n <= 0)
		return n;
	for (int i = 0; i < n; i++)
		take_frame(m, &fr[i], now);
	rcp_nic_release(nic, fr, n);
	return n;
}

int rcp_mcn_progress(rcp_mcn *m)
{
	uint64_t now;
	int a, b, c;
	if (!m)
		return RCP_EINVAL;
	now = rcpi_now_ns();
	a = drain(m, m->u, now);
	b = drain(m, m->g, now);
	if (a < 0 || b < 0)
		return a < 0 ? a : b;
	c = send_step(m, now);
	return a + b + c > 0;
}

int64_t rcp_mcn_timeout_ns(const rcp_mcn *m)
{
	uint64_t now, due;
	if (!m || m->sending != 1)
		return -1;
	now = rcpi_now_ns();
	due = m->last_poll_ns > m->last_ack_ns ? m->last_poll_ns : m->last_ack_ns;
	due += m->rto_ns;
	return due <= now ? 0 : (int64_t)(due - now);
}

int rcp_mcn_claim(rcp_mcn *m, uint64_t id, void **buf, size_t *len)
{
	if (!m || !buf || !len)
		return RCP_EINVAL;
	for (int i = 0; i < m->ndone; i++) {
		if (m->done[i].id != id)
			continue;
		*buf = m->done[i].buf;
		*len = m->done[i].len;
		memmove(m->done + i, m->done + i + 1, (size_t)(m->ndone - i - 1) * sizeof *m->done);
		m->ndone--;
		return 0;
	}
	return RCP_ENOENT;
}

/* ---- waiting ---- */

static int ws_progress(void *arg)
{
	return rcp_mcn_progress(arg);
}

static int ws_arm(void *arg, int64_t *timeout_ns)
{
	rcp_mcn *m = arg;
	int64_t t = rcp_mcn_timeout_ns(m);
	if (rcp_nic_arm(m->u) == RCP_EAGAIN || rcp_nic_arm(m->g) == RCP_EAGAIN || t == 0)
		return RCP_EAGAIN;
	if (t > 0 && (*timeout_ns < 0 || t < *timeout_ns))
		*timeout_ns = t;
	return 0;
}

static int ws_fds(void *arg, int *fds, int max)
{
	rcp_mcn *m = arg;
	if (max < 1)
		return 0;
	fds[0] = rcp_nic_fd(m->u);
	return 1;
}

int rcp_mcn_wait_src(rcp_mcn *m, struct rcp_wait_src *src)
{
	if (!m || !src)
		return RCP_EINVAL;
	memset(src, 0, sizeof *src);
	src->fd = rcp_nic_fd(m->g);
	src->progress = ws_progress;
	src->arm = ws_arm;
	src->fds = ws_fds;
	src->arg = m;
	return 0;
}

/* ---- open, close ---- */

int rcp_mcn_open(const char *uaddr, const struct rcp_mcn_config *cfg, rcp_mcn **out)
{
	struct rcp_nic_config nc = {0};
	struct rcp_nic_info ui, gi;
	char ustr[RCP_NIC_ADDRSTR_MAX], gstr[RCP_NIC_ADDRSTR_MAX + 64];
	const char *ip, *colon;
	rcp_mcn *m;
	int rc;

	if (!uaddr || !cfg || !cfg->group || !cfg->self_id || !out || !strchr(uaddr, ':') ||
	    (strncmp(cfg->group, "udp:", 4) && strncmp(cfg->group, "verbs:", 6)))
		return RCP_EINVAL;
	m = calloc(1, sizeof *m);
	if (!m)
		return RCP_ENOMEM;
	if (cfg->nic)
		nc = *cfg->nic;
	/* No lane: its connected socket would only serve the first member's
	 * acks, and a second fd to sleep on. */
	nc.flags |= RCP_NIC_SLEEPER;
	rc = rcp_nic_open(uaddr, &nc, &m->u);
	if (rc)
		goto fail;
	rcp_nic_query(m->u, &ui);
	if (!(ui.caps & RCP_NIC_CAP_MCAST)) {
		rc = RCP_ENOTSUP;
		goto fail;
	}
	/* The group endpoint joins on U's interface address (udp), or on U's
	 * device and port (verbs: "verbs:mcast:MGID@DEV:PORT", docs/nic.md). */
	rc = rcp_nic_addr_str(m->u, ustr, sizeof ustr);
	if (rc)
		goto fail;
	ip = ustr + 4;
	colon = strrchr(ip, ':');
	if (!colon) {
		rc = RCP_EADDR;
		goto fail;
	}
	if (strncmp(cfg->group, "udp:", 4))
		snprintf(gstr, sizeof gstr, "%s@%s", cfg->group, strchr(uaddr, ':') + 1);
	else
		snprintf(gstr, sizeof gstr, "%s@%.*s", cfg->group, (int)(colon - ip), ip);
	rc = rcp_nic_open(gstr, &nc, &m->g);
	if (rc)
		goto fail;
	rcp_nic_query(m->g, &gi);
	rc = rcp_nic_peer_add_str(m->u, cfg->group, &m->gpeer);
	if (rc)
		goto fail;
	m->uaddrlen = sizeof m->uaddr;
	rc = rcp_nic_addr_blob(m->u, m->uaddr, &m->uaddrlen);
	if (rc)
		goto fail;
	m->mtu = ui.mtu < gi.mtu ? ui.mtu : gi.mtu;
	if (m->mtu > 65000)
		m->mtu = 65000;
	if (m->mtu <= MC_DATA_HDR + 64) {
		rc = RCP_EINVAL;
		goto fail;
	}
	m->window = cfg->window ? cfg->window : 256;
	if (gi.rx_frames / 2 >= 8 && m->window > gi.rx_frames / 2)
		m->window = gi.rx_frames / 2;
	m->ack_every = m->window / 8 ? m->window / 8 : 1;
	m->dead_ns = cfg->dead_ns ? cfg->dead_ns : 1000000000ull;
	m->rto_ns = cfg->rto_ns ? cfg->rto_ns : 2000000ull;
	m->group = (uint32_t)(hash64(cfg->group) ^ (cfg->scope ? hash64(cfg->scope) : 0));
	m->self = hash64(cfg->self_id);
	do
		m->epoch = (uint32_t)(hash64(ustr) ^ rcpi_now_ns() ^ ((uint64_t)getpid() << 16));
	while (!m->epoch);
	*out = m;
	return 0;
fail:
	rcp_nic_close(m->g);
	rcp_nic_close(m->u);
	free(m);
	return rc;
}

void rcp_mcn_close(rcp_mcn *m)
{
	if (!m)
		return;
	for (int i = 0; i < MC_SENDERS; i++)
		rx_reset(&m->rx[i]);
	for (int i = 0; i < m->ndone; i++)
		free(m->done[i].buf);
	free(m->mem);
	rcp_nic_close(m->g);
	rcp_nic_close(m->u);
	free(m);
}

int rcp_mcn_addr(const rcp_mcn *m, char *buf, size_t len)
{
	if (!m || !buf)
		return RCP_EINVAL;
	return rcp_nic_addr_str(m->u, buf, len);
}

int rcp_mcn_get_stats(const rcp_mcn *m, struct rcp_mcn_stats *st)
{
	if (!m || !st)
		return RCP_EINVAL;
	*st = m->st;
	return 0;
}
