/*
 * nic/auth.c — the job key: every frame authenticated with a keyed MAC.
 *
 * Why.  The session cookie (rcp_ep_config.session) keeps one job's frames
 * out of another's, but it is sent in the clear: any host that can reach a
 * job's UDP ports, or that sees one frame of it, can forge frames that the
 * job accepts.  With a job key every endpoint of the job shares a secret and
 * each frame carries a MAC over all of its bytes; a frame without the right
 * MAC never reaches the protocol.  Like the faults wrapper this is a wrapper
 * around any backend's ops table, so the protocol core stays unaware of it.
 *
 * Where the key comes from.  rcp_nic_config.key, or the RCP_SESSION_KEY
 * environment variable when that is NULL ("" turns the key off even if the
 * variable is set).  Any string is accepted; it is hashed (BLAKE2b, with a
 * domain label) into the 32-byte key, so its strength is the strength of
 * the string: use at least 128 random bits, e.g. 32 hex digits from
 * /dev/urandom.  Every endpoint of a job must be given the same string.
 *
 * The MAC.  Poly1305 with a one-time key, as NaCl's secretbox and
 * ChaCha20-Poly1305 use it: for each frame the sender takes a fresh 24-byte
 * nonce, derives the Poly1305 key from the first 32 bytes of XChaCha20's
 * keystream under the job key and that nonce, and MACs the frame's bytes.
 * Poly1305 is secure only while a one-time key is used once, so a nonce must
 * never repeat under one job key: it is 8 random bytes drawn at open
 * (per endpoint) followed by an 8-byte frame counter, zero-padded to 24.
 * Two endpoints collide on the random half with probability ~n^2/2^65 for n
 * endpoints sharing the key.  Poly1305 runs over the caller's iovec as it is
 * (header, then payload in the user's buffer): no copy of the frame.
 *
 * On the wire the frame is followed by a 32-byte trailer:
 *
 *   frame bytes ... | 16 B nonce (8 random, 8 counter LE) | 16 B tag
 *
 * so the mtu this wrapper reports is the backend's minus 32.  The receiver
 * recomputes the tag over everything before the trailer and compares in
 * constant time; a frame shorter than the trailer or with a wrong tag is
 * counted (rcp_nic_stats.a_rejected) and dropped here.  Replays are not the
 * wrapper's business: a replayed frame is a duplicate to the protocol
 * (sequence numbers, epochs) and is dropped there as any duplicate is.
 *
 * Capabilities.  A frame that passes the MAC is the frame that was sent, so
 * the wrapper adds RCP_NIC_CAP_CHECKED: the protocol's CRC would only check
 * again what the MAC already proved.  It keeps RCP_NIC_CAP_SHARED_SEG, so
 * remote fetch (rpc/rfp.c) still runs: the key's promise is about frames,
 * that none without the MAC reaches the protocol, against other hosts and
 * other users.  A shared segment is not a frame: only processes of our uid
 * on this host can open it (0600, owner checked on both sides), and those
 * can read the key from our environment or write our memory anyway, so
 * the key never stood between them and us.  The attach that names the
 * segment is a frame and carries the MAC, so a client maps only a segment
 * a holder of the key named.
 *
 * Batching.  The trailer must stay valid until the backend has sent the
 * frame.  A send with RCP_NIC_MORE lets the backend keep pointers until its
 * flush, so trailers live in a ring of TRAILERS slots; when a batch would
 * wrap the ring the backend is flushed first.  A send without MORE ends the
 * batch (the backend is done with every pointer when it returns).  Today's
 * backends batch fewer frames than the ring holds (udp: UDP_TXQ, 64), so
 * the guard is for a backend with deeper batches; no test can reach it.
 *
 * Receiving.  Frames are received into the wrapper's own burst array, which
 * the backend's release needs as it was; the ones that pass are copied into
 * the caller's array with the trailer cut off.  release(n) releases the
 * backend's burst up to the n-th passing frame (all of it when n covers
 * every passing frame).  RMA (get/put) and registrations pass through: they
 * never cross a network here (shm), and a backend with network RMA (verbs)
 * checks rkeys in hardware.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "nic/nic_int.h"

#define TRAILER    32u /* nonce (16) + tag (16) */
#define NONCE_LEN  16u /* bytes of the 24-byte XChaCha20 nonce that are sent */
#define TRAILERS   256u
#define BURST      64
#define IOV_MAX_IN 15 /* caller iovecs; one more for the trailer */

struct auth_nic {
	struct rcpi_nic_wrap w; /* first: base, inner (nic/wrap.c) */
	unsigned char key[crypto_stream_xchacha20_KEYBYTES];
	unsigned char prefix[8]; /* random half of every nonce */
	uint64_t counter;        /* frames sent */
	uint64_t rejected;
	uint32_t mtu; /* inner mtu minus the trailer */
	unsigned ring_next;
	unsigned in_batch; /* trailers handed out since the batch began */
	unsigned char ring[TRAILERS][TRAILER];
	/* The backend's last burst and where each passing frame came from. */
	struct rcp_nic_frame burst[BURST];
	int burst_n;
	int good_n;
	unsigned char good_at[BURST];
	char name[40];
};

static void sync_stats(struct auth_nic *a)
{
	a->w.base.stats = a->w.inner->stats;
	a->w.base.stats.a_rejected += a->rejected;
}

/* Tag of the bytes in IOV under the nonce NONCE16 (zero-padded to 24). */
static void mac(const struct auth_nic *a, const unsigned char *nonce16, const struct iovec *iov,
                int iovcnt, unsigned char tag[16])
{
	unsigned char nonce[crypto_stream_xchacha20_NONCEBYTES] = {0};
	unsigned char otk[crypto_onetimeauth_poly1305_KEYBYTES];
	crypto_onetimeauth_poly1305_state st;

	memcpy(nonce, nonce16, NONCE_LEN);
	crypto_stream_xchacha20(otk, sizeof otk, nonce, a->key);
	crypto_onetimeauth_poly1305_init(&st, otk);
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len)
			crypto_onetimeauth_poly1305_update(&st, iov[i].iov_base, iov[i].iov_len);
	crypto_onetimeauth_poly1305_final(&st, tag);
	sodium_memzero(otk, sizeof otk);
}

/* ---- sending ---------------------------------------------------------- */

static int anic_send(rcp_nic *nic, int peer, const struct iovec *iov, int iovcnt, size_t total,
                     unsigned flags)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	struct iovec v[IOV_MAX_IN + 1];
	unsigned char *t;
	int rc;

	if (iovcnt > IOV_MAX_IN)
		return RCP_EINVAL;
	if (total > a->mtu)
		return RCP_EMSGSIZE;
	if (a->in_batch >= TRAILERS) {
		/* Every slot may still be referenced by the backend's batch. */
		rc = a->w.inner->ops->flush(a->w.inner);
		if (rc) {
			sync_stats(a);
			return rc == RCP_EAGAIN ? RCP_EAGAIN : rc;
		}
		a->in_batch = 0;
	}
	t = a->ring[a->ring_next];
	memcpy(t, a->prefix, 8);
	for (int i = 0; i < 8; i++)
		t[8 + i] = (unsigned char)(a->counter >> (8 * i));
	mac(a, t, iov, iovcnt, t + NONCE_LEN);
	memcpy(v, iov, (size_t)iovcnt * sizeof *iov);
	v[iovcnt].iov_base = t;
	v[iovcnt].iov_len = TRAILER;
	rc = a->w.inner->ops->send(a->w.inner, peer, v, iovcnt + 1, total + TRAILER, flags);
	if (!rc) {
		/* A nonce is burnt only when the frame left: a refused send
		 * retried later reuses it for the very same bytes, which
		 * Poly1305 allows. */
		a->counter++;
		a->ring_next = (a->ring_next + 1) % TRAILERS;
		a->in_batch = (flags & RCP_NIC_MORE) ? a->in_batch + 1 : 0;
	}
	sync_stats(a);
	return rc;
}

static int anic_flush(rcp_nic *nic)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	int rc = a->w.inner->ops->flush(a->w.inner);
	if (!rc)
		a->in_batch = 0;
	sync_stats(a);
	return rc;
}

/* ---- receiving -------------------------------------------------------- */

static bool frame_ok(const struct auth_nic *a, const struct rcp_nic_frame *f)
{
	const unsigned char *p = f->data;
	unsigned char tag[16];
	struct iovec iov;

	if (f->len < TRAILER)
		return false;
	iov.iov_base = (void *)p;
	iov.iov_len = f->len - TRAILER;
	mac(a, p + iov.iov_len, &iov, 1, tag);
	return crypto_verify_16(tag, p + iov.iov_len + NONCE_LEN) == 0;
}

/* Checks the burst of N frames just received; copies the good ones into
 * FRAMES.  Returns how many passed. */
static int filter(struct auth_nic *a, struct rcp_nic_frame *frames, int n)
{
	int good = 0;

	a->burst_n = n > 0 ? n : 0;
	for (int i = 0; i < n; i++) {
		if (!frame_ok(a, &a->burst[i])) {
			a->rejected++;
			continue;
		}
		frames[good] = a->burst[i];
		frames[good].len -= TRAILER;
		a->good_at[good++] = (unsigned char)i;
	}
	a->good_n = good;
	if (n > 0 && !good) {
		/* Nothing to hand up: give the burst back now, the caller
		 * will not release a burst of zero frames. */
		a->w.inner->ops->release(a->w.inner, a->burst, n);
		a->burst_n = 0;
	}
	sync_stats(a);
	return n < 0 ? n : good;
}

static int anic_recv(rcp_nic *nic, struct rcp_nic_frame *frames, int max)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	int n = a->w.inner->ops->recv(a->w.inner, a->burst, max < BURST ? max : BURST);
	return filter(a, frames, n);
}

/* A burst of refused frames is not the "nothing came" that a return of 0
 * means here: wait again for what is left of the timeout. */
static int anic_recv_wait(rcp_nic *nic, struct rcp_nic_frame *frames, int max, int64_t timeout_ns)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	uint64_t end = timeout_ns > 0 ? rcpi_now_ns() + (uint64_t)timeout_ns : 0;

	for (;;) {
		int n =
		    rcp_nic_recv_wait(a->w.inner, a->burst, max < BURST ? max : BURST, timeout_ns);
		int good = filter(a, frames, n);
		if (good || n <= 0 || timeout_ns == 0)
			return good;
		if (timeout_ns > 0) {
			uint64_t now = rcpi_now_ns();
			if (now >= end)
				return 0;
			timeout_ns = (int64_t)(end - now);
		}
	}
}

static void anic_release(rcp_nic *nic, struct rcp_nic_frame *frames, int n)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	int m;

	(void)frames;
	if (n <= 0 || !a->burst_n)
		return;
	m = n >= a->good_n ? a->burst_n : a->good_at[n - 1] + 1;
	a->w.inner->ops->release(a->w.inner, a->burst, m);
	a->burst_n = 0;
	sync_stats(a);
}

/* ---- the rest: forwarded ---------------------------------------------- */

static void anic_query(const rcp_nic *nic, struct rcp_nic_info *info)
{
	const struct auth_nic *a = (const struct auth_nic *)nic;
	a->w.inner->ops->query(a->w.inner, info);
	info->backend = a->name;
	info->mtu = a->mtu;
	info->caps |= RCP_NIC_CAP_CHECKED; /* SHARED_SEG kept: see Capabilities */
}

static int anic_peer_remove(rcp_nic *nic, int peer)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	return a->w.inner->ops->peer_remove(a->w.inner, peer);
}

static int anic_arm(rcp_nic *nic)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	return a->w.inner->ops->arm(a->w.inner);
}

static int anic_pending(rcp_nic *nic)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	return a->w.inner->ops->pending(a->w.inner);
}

static void anic_close(rcp_nic *nic)
{
	struct auth_nic *a = (struct auth_nic *)nic;
	a->w.inner->ops->close(a->w.inner);
	sodium_memzero(a->key, sizeof a->key);
	free(a);
}

static const struct rcpi_nic_ops auth_ops = {
    .name = "auth",
    .id = 0, /* not an address: never in the backend table */
    .close = anic_close,
    .query = anic_query,
    .addr_str = rcpi_wrap_addr_str,
    .addr_blob = rcpi_wrap_addr_blob,
    .peer_add = rcpi_wrap_peer_add,
    .peer_add_str = rcpi_wrap_peer_add_str,
    .peer_remove = anic_peer_remove,
    .send = anic_send,
    .flush = anic_flush,
    .recv = anic_recv,
    .release = anic_release,
    .fd = rcpi_wrap_fd,
    .arm = anic_arm,
    .pending = anic_pending,
    .recv_wait = anic_recv_wait,
    .mr_reg = rcpi_wrap_mr_reg,
    .get = rcpi_wrap_get,
    .put = rcpi_wrap_put,
};

int rcpi_nic_auth_wrap(rcp_nic *inner, const char *key, rcp_nic **out)
{
	static const char label[] = "rcp-job-key-v1.0"; /* 16 B: BLAKE2b key minimum */
	struct rcp_nic_info info;
	struct auth_nic *a;

	if (!inner || !key || !*key || !out)
		return RCP_EINVAL;
	*out = NULL;
	if (sodium_init() < 0)
		return RCP_ESYS;
	memset(&info, 0, sizeof info);
	inner->ops->query(inner, &info);
	if (info.mtu <= TRAILER + 64)
		return RCP_EINVAL;
	a = calloc(1, sizeof *a);
	if (!a)
		return RCP_ENOMEM;
	crypto_generichash(a->key, sizeof a->key, (const unsigned char *)key, strlen(key),
	                   (const unsigned char *)label, sizeof label - 1);
	randombytes_buf(a->prefix, sizeof a->prefix);
	a->w.inner = inner;
	a->mtu = info.mtu - TRAILER;
	snprintf(a->name, sizeof a->name, "auth+%s", info.backend ? info.backend : "?");
	a->w.base.ops = &auth_ops;
	a->w.base.spin_ns = inner->spin_ns;
	sync_stats(a);
	*out = &a->w.base;
	return 0;
}
