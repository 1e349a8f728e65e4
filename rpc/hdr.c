/*
 * rpc/hdr.c — the message header on the wire and the checks a received
 * message passes before any of it is used.
 *
 * MESSAGES.  Every call is one request message (tag TAG_REQ) from client
 * to server and one response message (tag TAG_RESP) back, each a 40-byte
 * header (struct rpc_hdr in rpc_int.h: byte-order mark, kind, status,
 * payload length, rpc id, the client's cookie, aux) followed by the
 * encoded arguments.  Up to msg_max bytes (RCP_RPC_MSG_MAX, capped so a
 * message is one nic frame) a message is eager in rcp: one frame, no
 * handshake, and up to 2 KiB the send completes at once.  A larger encoded
 * payload travels as a header with F_OVF (aux = its size) and a second
 * message on TAG_OVF(cookie): rcp moves it by rendezvous, which on shm is
 * one RMA get by the receiver — the receiver pulls it when it has posted
 * the buffer, so a server controls its inbound flow as with a bulk pull.
 * A message may hold several [header, payload] in a row (BATCHES,
 * batch.c).
 *
 * Why one file: the header is the only thing a peer controls, so every
 * rule about trusting it sits here, in one place, and the client
 * (client.c) and the server (server.c) run the same checks.  The header is
 * written in the sender's byte order; a receiver of the other order swaps
 * it and answers the call with RCP_ENOTSUP (counted as foreign_order).
 *
 * A leaf: it calls no other file of rpc/.
 */
#include <stddef.h>
#include <string.h>

#include "rpc/rpc_int.h"

void rpci_bswap_hdr(struct rpc_hdr *h)
{
	h->order = __builtin_bswap32(h->order);
	h->flags = __builtin_bswap16(h->flags);
	h->status = (int32_t)__builtin_bswap32((uint32_t)h->status);
	h->len = __builtin_bswap32(h->len);
	h->id = __builtin_bswap64(h->id);
	h->cookie = __builtin_bswap64(h->cookie);
	h->aux = __builtin_bswap64(h->aux);
}

/* Checks the header at OFF of a received message of LEN bytes (one
 * message or a batch: BATCHES above) into *H, without counting: 0 good,
 * 1 foreign order (swapped; such a call is answered or failed with
 * RCP_ENOTSUP), -1 bad.  Every header must lie wholly inside the message,
 * its payload too; an overflow header (F_OVF, no payload) only alone in
 * its message. */
static int sub_hdr(const unsigned char *msg, size_t len, size_t off, int kind, struct rpc_hdr *h)
{
	int swapped = 0;
	if (len - off < HDR_LEN)
		return -1;
	/* Only the fields checked, and the length that leads to the next
	 * header, are read: copying the whole header to check it cost ~16
	 * instructions a call on each side (session 19; the foreign order,
	 * rare, takes the whole copy and swap). */
	memcpy(&h->order, msg + off + offsetof(struct rpc_hdr, order), sizeof h->order);
	if (RCPI_LIKELY(h->order == RPC_ORDER)) {
		h->kind = msg[off + offsetof(struct rpc_hdr, kind)];
		h->version = msg[off + offsetof(struct rpc_hdr, version)];
		memcpy(&h->flags, msg + off + offsetof(struct rpc_hdr, flags), sizeof h->flags);
		memcpy(&h->len, msg + off + offsetof(struct rpc_hdr, len), sizeof h->len);
	} else {
		memcpy(h, msg + off, HDR_LEN);
		if (h->order != __builtin_bswap32(RPC_ORDER))
			return -1;
		rpci_bswap_hdr(h);
		swapped = 1;
	}
	if (h->kind != kind || (!swapped && h->version != RPC_VERSION))
		return -1;
	if ((size_t)h->len > len - off - HDR_LEN)
		return -1;
	if ((h->flags & F_OVF) && (h->len || off || len != HDR_LEN))
		return -1;
	return swapped;
}

/* The first 8 bytes of a header (order, kind, version, flags) as one
 * word, as they lie in memory on this host.  WORD (session 20): a header
 * of our order whose word, F_TIME masked, is hdr_word(kind, 0) is good if
 * its payload fits: checked in one compare, not field by field (sub_hdr
 * cost ~33 instructions a call on each side, perf/rpc_instr.sh).  Any
 * other header (foreign order, F_OVF, unknown flags, a bad field) takes
 * sub_hdr's rules, unchanged. */
static inline uint64_t hdr_word(int kind, uint16_t flags)
{
	struct rpc_hdr h = {
	    .order = RPC_ORDER, .kind = (uint8_t)kind, .version = RPC_VERSION, .flags = flags};
	uint64_t w;
	memcpy(&w, &h, sizeof w);
	return w;
}

/* Checks a whole received message of KIND before anything in it is used:
 * 0 and the number of messages in *N, or -1 (bad_msgs counted once).
 * Once it passed, its headers are read with rpci_hdr_read (rpc_int.h):
 * each is checked once, not again as it is used (an empty call's four
 * header checks, two a side, cost 128 instructions; reading them once
 * checked brought perf/rpc_instr.sh reply from 1,209 to 1,127). */
int rpci_msg_check(rcp_rpc *rpc, const unsigned char *msg, const struct rcp_status *st, int kind,
                   uint32_t *n)
{
	struct rpc_hdr h;
	const uint64_t want = hdr_word(kind, 0), mask = ~(hdr_word(0, F_TIME) ^ hdr_word(0, 0));
	uint32_t k = 0;
	*n = 0;
	if (st->len < HDR_LEN || st->len > rpc->msg_max)
		goto bad;
	for (size_t off = 0; off < st->len; off += HDR_LEN + h.len, k++) {
		uint64_t w;
		/* WORD: our byte order, KIND, our version, flags 0 or F_TIME,
		 * and the payload inside the message: all sub_hdr would accept
		 * of such a header, in one compare */
		if (RCPI_LIKELY(st->len - off >= HDR_LEN)) {
			memcpy(&w, msg + off, sizeof w);
			memcpy(&h.len, msg + off + offsetof(struct rpc_hdr, len), sizeof h.len);
			if (RCPI_LIKELY((w & mask) == want &&
			                (size_t)h.len <= st->len - off - HDR_LEN))
				continue;
		}
		if (sub_hdr(msg, st->len, off, kind, &h) < 0)
			goto bad;
	}
	*n = k;
	return 0;
bad:
	rpc->st.bad_msgs++;
	return -1;
}
