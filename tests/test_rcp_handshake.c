/*
 * tests/test_rcp_handshake.c — the handshake of RCP channels over udp with
 * a peer played by hand over a plain socket: forged epochs, many senders,
 * reclaiming half-open channels, restarts, a full channel table.
 * Shared: tests/rcp_test.h.
 */
#include "rcp_test.h"

/* ---- handshake: a peer played by hand over a plain udp socket ----------
 * docs/protocol.md, "Channels and epochs": epochs are verification tags, a
 * restart needs proof, an accepting endpoint keeps nothing for an unknown
 * sender until it echoes a cookie, half-open accepted channels are
 * reclaimed, ICMP errors are hints.  The raw peer builds frames with
 * rcp/wire.h (no CRC: udp needs none, RCP_CRC is unset here) and the
 * default session. */

#define RAW_SESSION 0x52435031u

struct raw {
	int fd;
	struct sockaddr_in to; /* the endpoint under test */
};

static int64_t hs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void hs_env(void)
{
	unsetenv("RCP_SESSION");
	unsetenv("RCP_CRC");
}

/* A socket at SRC (host order, any port) speaking to EP. */
static void raw_open_from(struct raw *w, rcp_ep *ep, uint32_t src)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	struct sockaddr_in me = {.sin_family = AF_INET};
	unsigned port;

	assert_int_equal(rcp_ep_addr(ep, addr, sizeof addr), 0);
	assert_int_equal(sscanf(addr, "udp:127.0.0.1:%u", &port), 1);
	memset(&w->to, 0, sizeof w->to);
	w->to.sin_family = AF_INET;
	w->to.sin_port = htons((uint16_t)port);
	w->to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	w->fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(w->fd >= 0);
	me.sin_addr.s_addr = htonl(src);
	assert_int_equal(bind(w->fd, (struct sockaddr *)&me, sizeof me), 0);
}

static void raw_open(struct raw *w, rcp_ep *ep)
{
	raw_open_from(w, ep, INADDR_LOOPBACK);
}

/* One frame from W (or from socket FD if >= 0) to the endpoint. */
static void raw_send_fd(int fd, const struct sockaddr_in *to, uint8_t type, uint16_t flags,
                        uint32_t src, uint32_t dst, uint32_t seq, uint32_t msg, uint64_t tag,
                        uint64_t arg, const char *pl)
{
	unsigned char f[RCPW_HLEN + 64];
	struct rcpw_hdr h;
	uint32_t len = pl ? (uint32_t)strlen(pl) : 0;

	memset(&h, 0, sizeof h);
	h.magic = RCPW_MAGIC;
	h.version = RCPW_VERSION;
	h.type = type;
	h.flags = flags;
	h.hlen = RCPW_HLEN;
	h.session = RAW_SESSION;
	h.src_epoch = src;
	h.dst_epoch = dst;
	h.seq = seq;
	h.ack = 1;
	h.credits = 64;
	h.wnd = 64;
	h.len = len;
	h.msg = msg;
	h.tag = tag;
	h.arg = type == RCPW_DATA ? len : arg;
	rcpw_hdr_swap(&h);
	memcpy(f, &h, sizeof h);
	if (len)
		memcpy(f + RCPW_HLEN, pl, len);
	assert_int_equal(sendto(fd, f, RCPW_HLEN + len, 0, (const struct sockaddr *)to, sizeof *to),
	                 (ssize_t)(RCPW_HLEN + len));
}

static void raw_send(struct raw *w, uint8_t type, uint32_t src, uint32_t dst, uint32_t seq,
                     uint64_t tag, uint64_t arg, const char *pl)
{
	uint16_t fl = type == RCPW_DATA ? RCPW_F_FIRST | RCPW_F_EAGER : 0;
	raw_send_fd(w->fd, &w->to, type, fl, src, dst, seq, seq, tag, arg, pl);
}

/* Progresses EP until W receives a challenge (PING with a cookie) for
 * incarnation DST; returns the cookie, *FROM the challenger's epoch. */
static uint64_t raw_challenge(struct raw *w, rcp_ep *ep, uint32_t dst, uint32_t *from)
{
	int64_t end = hs_now() + 10 * 1000000000ll;
	while (hs_now() < end) {
		struct rcpw_hdr h;
		ssize_t n;
		rcp_progress(ep);
		n = recv(w->fd, &h, sizeof h, MSG_DONTWAIT);
		if (n < (ssize_t)RCPW_HLEN)
			continue;
		rcpw_hdr_swap(&h);
		if (h.type == RCPW_PING && h.arg && h.dst_epoch == dst) {
			*from = h.src_epoch;
			return h.arg;
		}
	}
	fail_msg("no challenge for epoch %#x", (unsigned)dst);
	return 0;
}

/* Progresses EP (and OTHER, if not NULL) until a message arrives at EP
 * (any channel, any tag). */
static void hs_recv2(rcp_ep *ep, rcp_ep *other, struct rcp_status *st, char *buf, size_t len)
{
	rcp_req *r;
	int64_t end = hs_now() + 10 * 1000000000ll;
	memset(buf, 0, len);
	assert_int_equal(rcp_irecv(ep, RCP_ANY_CHAN, RCP_ANY_TAG, buf, len - 1, &r), 0);
	while (hs_now() < end) {
		if (other)
			rcp_progress(other);
		if (rcp_test(r, st) != RCP_EAGAIN)
			return;
	}
	fail_msg("no message");
}

static void hs_recv(rcp_ep *ep, struct rcp_status *st, char *buf, size_t len)
{
	hs_recv2(ep, NULL, st, buf, len);
}

/* rcp_chan_watch's callback: counts, keeps the last error and the
 * channel's restart count as the callback sees it, watches again. */
struct watch_seen {
	int n, err;
	unsigned restarts;
};
static void on_watch(rcp_req *r, const struct rcp_status *st, void *user)
{
	struct watch_seen *w = user;
	(void)r;
	w->n++;
	w->err = st->error;
	if (st->error == RCP_EPEER) { /* CH lives on (closed: it may be gone) */
		w->restarts = rcp_chan_restarts(st->chan);
		assert_int_equal(rcp_chan_watch(st->chan, on_watch, w, NULL), 0);
	}
}

/* Forged frames on a live udp channel: a dst_epoch 0 frame with a new
 * src_epoch is no restart (the channel and its sequence go on); a restart
 * is taken once the new incarnation answers the challenge with our epoch;
 * after it the old incarnation's stragglers are dropped.  A restart watch
 * (rcp_chan_watch) on the channel fires for the restart only, once, and
 * the one posted again from its callback with the endpoint's close. */
static void t_udp_forged_epochs(void **state)
{
	struct watch_seen ws = {0};
	rcp_req *wr, *wr2;
	const uint32_t e1 = 0x11111111, e2 = 0x22222222, forged = 0xbad0bad0;
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	struct raw w;
	rcp_ep *ep;
	rcp_chan *ch;
	uint32_t es_epoch, from;
	uint64_t cookie;
	char buf[64];
	(void)state;

	hs_env();
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	raw_open(&w, ep);
	/* First contact: no channel before the cookie comes back. */
	raw_send(&w, RCPW_DATA, e1, 0, 1, 1, 0, "one");
	cookie = raw_challenge(&w, ep, e1, &es_epoch);
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 0);
	raw_send(&w, RCPW_ACK, e1, es_epoch, 0, 0, cookie, NULL);
	/* The echo named us: from now on a blind frame of E1 is a
	 * straggler (the real client's resend names us). */
	raw_send(&w, RCPW_DATA, e1, 0, 1, 97, 0, "blind");
	raw_send(&w, RCPW_DATA, e1, es_epoch, 1, 1, 0, "one");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 1);
	assert_string_equal(buf, "one");
	ch = st.chan;
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 1);
	/* A plain watch: one per channel, pending until a reset, canceled. */
	assert_int_equal(rcp_chan_watch(ch, NULL, NULL, NULL), RCP_EINVAL);
	assert_int_equal(rcp_chan_watch(ch, NULL, NULL, &wr), 0);
	assert_int_equal(rcp_chan_watch(ch, on_watch, &ws, &wr2), RCP_EBUSY);
	assert_int_equal(rcp_test(wr, &st), RCP_EAGAIN);
	assert_int_equal(rcp_cancel(wr), 0);
	assert_int_equal(rcp_test(wr, &st), RCP_ECANCELED);
	assert_ptr_equal(st.chan, ch);
	assert_int_equal(rcp_chan_watch(ch, on_watch, &ws, NULL), 0);

	/* Forged: dst_epoch 0, an epoch nobody has.  Challenged, not taken. */
	raw_send(&w, RCPW_DATA, forged, 0, 2, 99, 0, "forged");
	raw_send(&w, RCPW_PING, forged, 0, 0, 0, 0, NULL);
	raw_send(&w, RCPW_DATA, e1, es_epoch, 2, 2, 0, "two");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 2);
	assert_string_equal(buf, "two");
	assert_int_equal(rcp_chan_restarts(ch), 0);
	rcp_ep_get_stats(ep, &es);
	assert_true(es.restart_claims >= 2);
	assert_int_equal(ws.n, 0); /* claims are no restart */

	/* A real restart: E2 speaks without our epoch, is challenged and
	 * answers with it. */
	raw_send(&w, RCPW_DATA, e2, 0, 1, 3, 0, "three");
	cookie = raw_challenge(&w, ep, e2, &from);
	assert_int_equal(from, es_epoch);
	assert_int_equal(rcp_chan_restarts(ch), 0);
	/* Only the echo of that challenge proves it (CHANNELS: a frame
	 * naming our epoch may be a straggler of a conversation before). */
	raw_send(&w, RCPW_ACK, e2, es_epoch, 0, 0, cookie, NULL);
	raw_send(&w, RCPW_DATA, e2, es_epoch, 1, 3, 0, "three");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 3);
	assert_int_equal(rcp_chan_restarts(ch), 1);
	assert_int_equal(ws.n, 1);
	assert_int_equal(ws.err, RCP_EPEER);
	assert_int_equal(ws.restarts, 1);
	/* A straggler of E1, naming our epoch: stale, not another restart. */
	raw_send(&w, RCPW_DATA, e1, es_epoch, 3, 98, 0, "stale");
	raw_send(&w, RCPW_DATA, e2, es_epoch, 2, 4, 0, "four");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 4);
	assert_string_equal(buf, "four");
	assert_int_equal(rcp_chan_restarts(ch), 1);
	assert_int_equal(ws.n, 1);
	close(w.fd);
	rcp_ep_close(ep);
	assert_int_equal(ws.n, 2); /* the watch posted again: closed */
	assert_int_equal(ws.err, RCP_ECLOSED);
}

/* 6,000 one-frame senders, each from its own source port, leave an
 * accepting endpoint without a single peer or channel (each got a
 * stateless challenge); a real client still gets through. */
static void t_udp_many_senders(void **state)
{
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	char addr[RCP_NIC_ADDRSTR_MAX], buf[64];
	uint64_t r = test_seed(18);
	struct raw w;
	rcp_ep *ep, *cl;
	rcp_chan *ch;
	(void)state;

	hs_env();
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	raw_open(&w, ep);
	close(w.fd);
	for (int i = 0; i < 6000; i++) {
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		uint32_t e = (uint32_t)test_rand(&r) | 1;
		assert_true(fd >= 0);
		raw_send_fd(fd, &w.to, RCPW_DATA, RCPW_F_FIRST | RCPW_F_EAGER, e, 0, 1, 1, 1, 0,
		            "hi");
		close(fd);
		if (i % 16 == 15)
			for (int k = 0; k < 4; k++)
				rcp_progress(ep);
	}
	for (int k = 0; k < 64; k++)
		rcp_progress(ep);
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 0);
	assert_true(es.challenges_sent > 0);

	assert_int_equal(rcp_ep_open("udp:", NULL, &cl), 0);
	assert_int_equal(rcp_ep_addr(ep, addr, sizeof addr), 0);
	assert_int_equal(rcp_connect(cl, addr, &ch), 0);
	assert_int_equal(rcp_send(ch, 7, "real", 4), 0);
	hs_recv2(ep, cl, &st, buf, sizeof buf);
	assert_int_equal(st.tag, 7);
	assert_string_equal(buf, "real");
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 1);
	rcp_ep_close(cl);
	rcp_ep_close(ep);
}

/* An accepted channel that stays half-open (cookie echoed, no message) is
 * reclaimed after the peer timeout; one that carried a message is not,
 * though idle as long. */
static void t_udp_reclaim(void **state)
{
	const uint32_t ea = 0x0a0a0a0a, eb = 0x0b0b0b0b;
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	struct raw a, b;
	rcp_ep *ep;
	uint32_t es_epoch;
	uint64_t cookie;
	int64_t end;
	char buf[64];
	(void)state;

	hs_env();
	setenv("RCP_PEER_TIMEOUT", "100", 1);
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	unsetenv("RCP_PEER_TIMEOUT");
	raw_open(&b, ep);
	raw_open(&a, ep);
	/* B: a message, then silence. */
	raw_send(&b, RCPW_DATA, eb, 0, 1, 1, 0, "b");
	cookie = raw_challenge(&b, ep, eb, &es_epoch);
	raw_send(&b, RCPW_ACK, eb, es_epoch, 0, 0, cookie, NULL);
	raw_send(&b, RCPW_DATA, eb, es_epoch, 1, 1, 0, "b");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_string_equal(buf, "b");
	/* A: the handshake only. */
	raw_send(&a, RCPW_PING, ea, 0, 0, 0, 0, NULL);
	cookie = raw_challenge(&a, ep, ea, &es_epoch);
	raw_send(&a, RCPW_ACK, ea, es_epoch, 0, 0, cookie, NULL);
	end = hs_now() + 20 * 1000000000ll;
	do {
		rcp_progress(ep);
		rcp_ep_get_stats(ep, &es);
	} while (es.chans_reclaimed == 0 && hs_now() < end);
	assert_int_equal(es.chans_accepted, 2);
	assert_int_equal(es.chans_reclaimed, 1); /* A only: B was idle longer */
	/* B's channel is there: its next message needs no new cookie. */
	raw_send(&b, RCPW_DATA, eb, es_epoch, 2, 2, 0, "b2");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_string_equal(buf, "b2");
	/* A's is gone: it is challenged afresh and accepted again. */
	raw_send(&a, RCPW_DATA, ea, es_epoch, 1, 1, 0, "a");
	cookie = raw_challenge(&a, ep, ea, &es_epoch);
	raw_send(&a, RCPW_ACK, ea, es_epoch, 0, 0, cookie, NULL);
	raw_send(&a, RCPW_DATA, ea, es_epoch, 1, 1, 0, "a");
	hs_recv(ep, &st, buf, sizeof buf);
	assert_string_equal(buf, "a");
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, 3);
	close(a.fd);
	close(b.fd);
	rcp_ep_close(ep);
}

/* A client started before its server: its frames draw ICMP port
 * unreachable, which must not fail the channel before the peer timeout;
 * the server then appears at the address and the message goes through. */
static void t_udp_client_first(void **state)
{
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof sa;
	struct rcp_ep_stats es;
	struct rcp_status st;
	char addr[64], buf[64];
	rcp_ep *cl, *srv;
	rcp_chan *ch;
	rcp_req *sr;
	int fd, rc = RCP_EAGAIN;
	int64_t end;
	(void)state;

	hs_env();
	/* A free port, closed again: nobody listens there. */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	snprintf(addr, sizeof addr, "udp:127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));

	setenv("RCP_PEER_TIMEOUT", "60000", 1);
	assert_int_equal(rcp_ep_open("udp:", NULL, &cl), 0);
	unsetenv("RCP_PEER_TIMEOUT");
	assert_int_equal(rcp_connect(cl, addr, &ch), 0);
	assert_int_equal(rcp_issend(ch, 5, "early", 5, &sr), 0);
	/* Sent and resent into the closed port (each draws an ICMP error). */
	end = hs_now() + 20 * 1000000000ll;
	do {
		rc = rcp_test(sr, &st);
		rcp_ep_get_stats(cl, &es);
	} while (rc == RCP_EAGAIN && es.retransmits < 4 && hs_now() < end);
	assert_int_equal(rc, RCP_EAGAIN); /* still pending, not RCP_EPEER */
	assert_true(es.retransmits >= 4);

	assert_int_equal(rcp_ep_open(addr, &ec, &srv), 0);
	{
		rcp_req *r;
		memset(buf, 0, sizeof buf);
		assert_int_equal(rcp_irecv(srv, RCP_ANY_CHAN, 5, buf, sizeof buf - 1, &r), 0);
		end = hs_now() + 30 * 1000000000ll;
		rc = RCP_EAGAIN;
		while (rc == RCP_EAGAIN && hs_now() < end) {
			rcp_progress(cl);
			rc = rcp_test(r, &st);
		}
		assert_int_equal(rc, 0);
		assert_string_equal(buf, "early");
	}
	assert_int_equal(rcp_wait(sr, &st, WAIT_NS), 0);
	rcp_ep_close(cl);
	rcp_ep_close(srv);
}

/* A udp peer restarts at the same address and speaks first: the channel
 * challenges the new incarnation, which answers with our epoch (proof),
 * and only then is it taken as a restart; its first message, dropped
 * meanwhile, is resent and arrives. */
static void t_udp_restart_proven(void **state)
{
	char aa[RCP_NIC_ADDRSTR_MAX], ba[RCP_NIC_ADDRSTR_MAX], buf[16];
	struct rcp_ep_stats es;
	struct rcp_status st;
	rcp_ep *a, *b1, *b2;
	rcp_chan *ab, *ba1, *ba2;
	int64_t end;
	(void)state;

	hs_env();
	assert_int_equal(rcp_ep_open("udp:", NULL, &a), 0);
	assert_int_equal(rcp_ep_open("udp:", NULL, &b1), 0);
	assert_int_equal(rcp_ep_addr(a, aa, sizeof aa), 0);
	assert_int_equal(rcp_ep_addr(b1, ba, sizeof ba), 0);
	assert_int_equal(rcp_connect(a, ba, &ab), 0);
	assert_int_equal(rcp_connect(b1, aa, &ba1), 0);
	assert_int_equal(rcp_send(ab, 1, "a1", 2), 0);
	assert_int_equal(rcp_recv(b1, ba1, 1, buf, sizeof buf, &st), 0);
	assert_int_equal(rcp_send(ba1, 2, "b1", 2), 0);
	assert_int_equal(rcp_recv(a, ab, 2, buf, sizeof buf, &st), 0);
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(b1);
	unsetenv("RCP_LINGER_MS");
	assert_int_equal(rcp_ep_open(ba, NULL, &b2), 0);
	assert_int_equal(rcp_connect(b2, aa, &ba2), 0);
	assert_int_equal(rcp_send(ba2, 9, "b2", 2), 0);
	end = hs_now() + 10 * 1000000000ll;
	while (rcp_chan_restarts(ab) == 0 && hs_now() < end) {
		rcp_progress(a);
		rcp_progress(b2);
	}
	assert_int_equal(rcp_chan_restarts(ab), 1);
	rcp_ep_get_stats(a, &es);
	assert_true(es.challenges_sent >= 1);
	assert_int_equal(rcp_recv(a, ab, 9, buf, sizeof buf, &st), 0);
	assert_memory_equal(buf, "b2", 2);
	setenv("RCP_LINGER_MS", "0", 1);
	rcp_ep_close(b2);
	rcp_ep_close(a);
	unsetenv("RCP_LINGER_MS");
}

/* Senders that own their addresses and echo the cookie fill the peer
 * table (4,096 udp peers) with half-open channels; a real client then
 * displaces the oldest of them instead of being refused. */
static void t_udp_table_full(void **state)
{
	struct rcp_ep_config ec = {.flags = RCP_EP_ACCEPT};
	struct rcp_ep_stats es;
	struct rcp_status st;
	char addr[RCP_NIC_ADDRSTR_MAX], buf[64];
	struct raw w;
	rcp_ep *ep, *cl;
	rcp_chan *ch;
	const int n = 4100;
	(void)state;

	hs_env();
	setenv("RCP_PEER_TIMEOUT", "600000", 1); /* no idle reclaim here */
	assert_int_equal(rcp_ep_open("udp:", &ec, &ep), 0);
	unsetenv("RCP_PEER_TIMEOUT");
	for (int i = 0; i < n; i++) {
		uint32_t e = 0x30000000u + (uint32_t)i, es_epoch;
		uint64_t cookie;
		/* Distinct addresses: a port closed may come back at once. */
		raw_open_from(&w, ep, 0x7f010000u + (uint32_t)i);
		raw_send(&w, RCPW_PING, e, 0, 0, 0, 0, NULL);
		cookie = raw_challenge(&w, ep, e, &es_epoch);
		raw_send(&w, RCPW_ACK, e, es_epoch, 0, 0, cookie, NULL);
		close(w.fd);
	}
	for (int k = 0; k < 64; k++)
		rcp_progress(ep);
	/* The udp table holds 4,096 peers: the last few displaced the oldest. */
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_accepted, n);
	assert_int_equal(es.chans_reclaimed, n - 4096);

	assert_int_equal(rcp_ep_open("udp:", NULL, &cl), 0);
	assert_int_equal(rcp_ep_addr(ep, addr, sizeof addr), 0);
	assert_int_equal(rcp_connect(cl, addr, &ch), 0);
	assert_int_equal(rcp_send(ch, 7, "real", 4), 0);
	hs_recv2(ep, cl, &st, buf, sizeof buf);
	assert_string_equal(buf, "real");
	rcp_ep_get_stats(ep, &es);
	assert_int_equal(es.chans_reclaimed, n - 4096 + 1);
	rcp_ep_close(cl);
	rcp_ep_close(ep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_udp_forged_epochs),  cmocka_unit_test(t_udp_many_senders),
	    cmocka_unit_test(t_udp_reclaim),        cmocka_unit_test(t_udp_client_first),
	    cmocka_unit_test(t_udp_restart_proven), cmocka_unit_test(t_udp_table_full),
	};
	return cmocka_run_group_tests_name("rcp channels: handshake", tests, NULL, NULL);
}
