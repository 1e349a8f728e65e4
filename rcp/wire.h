/*
 * rcp/wire.h — RCP frame format (version 4: version 3 with READY and
 * FIN(SPLIT) that may carry STREAM, an RMA transfer that fell back to
 * frames (rcp/fallback.c); version 3 was version 2 with the accept and
 * restart challenges of the handshake and a credit for every message start;
 * version 2 was version 1 plus the compact header).
 *
 * Every frame starts with a fixed 64-byte header, little-endian on the
 * wire.  The header is the only thing the receiver trusts after checking
 * it: magic, version, header length, type, the payload length against the
 * frame length, the session cookie, and (when FLAG_CRC is set) the CRC32C
 * of header and payload.  See docs/protocol.md for the meaning of each
 * field per frame type.
 *
 *   0  u16 magic 0x5243 ("RC")     2  u8 version (4)    3  u8 type
 *   4  u16 flags                   6  u16 hlen (64)
 *   8  u32 session                12  u32 src_epoch    16  u32 dst_epoch
 *  20  u32 seq                    24  u32 ack          28  u32 credits
 *  32  u32 wnd                    36  u32 len          40  u32 crc
 *  44  u32 msg                    48  u64 tag          56  u64 arg
 *
 * A whole small message may travel under the 48-byte compact header
 * instead (hlen 48; DATA flagged FIRST|EAGER only): bytes 0..31 as above,
 * then
 *
 *  32  u64 tag                    40  u32 crc          44  u32 msg
 *
 * Its len is the frame length minus 48, its total (arg) equals len, and it
 * carries no wnd (0: no update).  Why: the shm nic puts an 8-byte word
 * before each frame in 64-byte ring cells, so an 8-byte message under the
 * full header spans two cells (two cache lines to move between cores) and
 * under the compact one fills exactly one.
 */
#ifndef RCP_WIRE_H
#define RCP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RCPW_MAGIC 0x5243u
/* A peer of another version is refused (BAD_MAGIC, counted in bad_frames):
 * a version-3 peer (session 17) does not know READY+STREAM or FIN
 * SPLIT+STREAM and would wait on such a message instead of refusing it, so
 * the fallback of session 18 raised it to 4 (session 19). */
#define RCPW_VERSION 4u
#define RCPW_HLEN    64u
#define RCPW_CHLEN   48u /* compact header of a whole small message */

/* Frame types.  DATA..FIN are reliable: they take a sequence number, are
 * acknowledged and retransmitted.  ACK and PING are not. */
enum rcpw_type {
	RCPW_DATA = 1,  /* message bytes at offset `arg` (FIRST: arg = total) */
	RCPW_RTS = 2,   /* request to send msg: tag, arg = total; payload: rkey */
	RCPW_READY = 3, /* receiver ready for msg: tag filter, arg = max length,
			   payload: rkey of the receive buffer (RMA) */
	RCPW_FIN = 4,   /* RMA transfer of msg done: arg = bytes moved;
			   FIRST|SPLIT: start of a split transfer, payload:
			   rkey of the send buffer */
	RCPW_ACK = 5,   /* payload: selective-ack bitmap; arg: the last
			   challenge cookie heard (echoed) */
	RCPW_PING = 6,  /* keep-alive / probe; answered by an ACK.  arg != 0:
			   a challenge (handshake.c HANDSHAKE), answered at once
			   by an ACK echoing arg */
	RCPW_TYPE_MAX = 6,
};

enum rcpw_flags {
	RCPW_F_FIRST = 1u << 0,  /* DATA: first frame of a message (arg = total) */
	RCPW_F_EAGER = 1u << 1,  /* DATA: whole message in this frame */
	RCPW_F_STREAM = 1u << 2, /* DATA-first: sent on a READY, without RTS;
	                            READY, FIN(SPLIT): an RMA transfer fell back,
	                            the message goes as DATA (rcp/fallback.c) */
	RCPW_F_ACKREQ = 1u << 3, /* acknowledge at once: sender waits on it */
	RCPW_F_CRC = 1u << 4,    /* crc field covers header (crc=0) + payload */
	RCPW_F_RMA = 1u << 5,    /* RTS/READY: payload is a nic rkey */
	RCPW_F_ANYTAG = 1u << 6, /* READY: the receive takes any tag */
	RCPW_F_SPLIT = 1u << 7,  /* FIN, READY: a split RMA transfer; RTS: the
	                            sender offers one (see msg.c) */
	RCPW_F_FRESH = 1u << 8,  /* ACK echoing a challenge: the sender has taken
	                          * no reliable frame on this channel (HANDSHAKE) */
	RCPW_F_ALL = (1u << 9) - 1,
};

struct rcpw_hdr {
	uint16_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint16_t hlen;
	uint32_t session;
	uint32_t src_epoch;
	uint32_t dst_epoch;
	uint32_t seq;
	uint32_t ack;
	uint32_t credits;
	uint32_t wnd;
	uint32_t len;
	uint32_t crc;
	uint32_t msg;
	uint64_t tag;
	uint64_t arg;
};

_Static_assert(sizeof(struct rcpw_hdr) == RCPW_HLEN, "header is 64 bytes");

/* Turns header H, in wire order, whose host-order hlen was RCPW_CHLEN (an
 * eager DATA frame), into the compact layout in place: the tag moves to
 * offset 32 over wnd and len.  The crc (offset 40) is filled after. */
static inline void rcpw_compact(struct rcpw_hdr *h)
{
	memmove((unsigned char *)h + 32, &h->tag, 8);
}

/* ACK payload: nwords 64-bit words; bit i of word w set means frame
 * ack + 1 + 64*w + i has arrived.  At most RCPW_SACK_WORDS words. */
#define RCPW_SACK_WORDS 16

/* Why a frame was refused (counted by the caller). */
enum rcpw_verdict {
	RCPW_OK = 0,
	RCPW_BAD_SHORT,   /* shorter than a header */
	RCPW_BAD_MAGIC,   /* magic, version or header length */
	RCPW_BAD_TYPE,    /* unknown type or flags */
	RCPW_BAD_LEN,     /* payload length disagrees with the frame */
	RCPW_BAD_CRC,     /* checksum mismatch (or CRC required but absent) */
	RCPW_BAD_SESSION, /* another job's frame */
	RCPW_BAD_FIELDS,  /* fields inconsistent for the type */
};

/* Host <-> little-endian.  On little-endian hosts these are no-ops. */
static inline void rcpw_hdr_swap(struct rcpw_hdr *h)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	h->magic = __builtin_bswap16(h->magic);
	h->flags = __builtin_bswap16(h->flags);
	h->hlen = __builtin_bswap16(h->hlen);
	uint32_t *w = &h->session;
	for (int i = 0; i < 10; i++)
		w[i] = __builtin_bswap32(w[i]);
	h->tag = __builtin_bswap64(h->tag);
	h->arg = __builtin_bswap64(h->arg);
#else
	(void)h;
#endif
}

/* Parses and checks FRAME (LEN bytes) into *H (host order).  If
 * REQUIRE_CRC, a frame without FLAG_CRC is refused.  *PAYLOAD points into
 * FRAME.  Never reads outside [FRAME, FRAME+LEN). */
enum rcpw_verdict rcpw_parse(const void *frame, size_t len, uint32_t session, int require_crc,
                             struct rcpw_hdr *h, const unsigned char **payload);

/* CRC32C (Castagnoli) of BUF, continuing from CRC (0 to start): chain
 * calls to cover the header (crc field zeroed) and then the payload. */
uint32_t rcpw_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same with tables only, whatever the CPU (tests compare the two). */
uint32_t rcpw_crc32c_portable(uint32_t crc, const void *buf, size_t len);
/* Nonzero if rcpw_crc32c uses a CPU instruction here. */
int rcpw_crc32c_hw(void);

/* Serial-number arithmetic on 32-bit sequence numbers (RFC 1982). */
static inline int rcpw_seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}
static inline int rcpw_seq_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

#endif
