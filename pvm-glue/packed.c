/*
 * pvm-glue/packed.c — a packed PVM message's bytes on an RCP channel.
 *
 * The sender's glue asks libpvm3 for the message (pvm_pkmesg) and sends
 * what it writes: eight header ints {len, ctx, tag, wid, enc, crc, src,
 * dst}, then each fragment as {int length, bytes}.  libpvm3 writes those
 * ints in the sender's byte order, and the receiver's pvm_upkmesg reads
 * them in its own: between a little- and a big-endian host they would be
 * garbage.  So on the wire every one of those ints is big-endian, whatever
 * the hosts, and each side converts in place: the sender after building,
 * the receiver before handing the bytes to pvm_upkmesg.  The fragments'
 * bytes are not touched: an XDR message's data is portable by itself, a
 * raw one is not, exactly as with stock PVM (its enc tells the receiver's
 * libpvm3, which refuses to decode an alien raw message as stock does).
 *
 * The receiver's walk is also the check of hostile input: every length
 * is read from the buffer, so each is bounded before it is used, and the
 * message must end exactly where its last fragment does.  libpvm3 is
 * never given a message whose fragment lengths do not add up.
 */
#include <arpa/inet.h>
#include <pvm3.h>
#include <stdint.h>
#include <string.h>

#include "pvm-glue/packed.h"

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, sizeof v);
}

/* One walk for both directions: TO_WIRE reads native ints and writes
 * big-endian ones, else the reverse; lengths are taken in native order
 * either way before they are trusted. */
static int walk(unsigned char *b, size_t len, int to_wire)
{
	size_t off = PR_PK_HDR * 4;
	int64_t left;

	if (!b || len < off)
		return PvmBadMsg;
	for (int i = 0; i < PR_PK_HDR; i++) {
		uint32_t v = get32(b + 4 * i);
		put32(b + 4 * i, to_wire ? htonl(v) : ntohl(v));
	}
	left = (int32_t)(to_wire ? ntohl(get32(b)) : get32(b));
	if (left < 0)
		return PvmBadMsg;
	while (left > 0) {
		uint32_t raw;
		int64_t frl;
		if (len - off < 4)
			return PvmBadMsg;
		raw = get32(b + off);
		frl = (int32_t)(to_wire ? raw : ntohl(raw));
		if (frl < 0 || frl > left || (size_t)frl > len - off - 4)
			return PvmBadMsg;
		put32(b + off, to_wire ? htonl(raw) : ntohl(raw));
		off += 4 + (size_t)frl;
		left -= frl;
	}
	return off == len ? 0 : PvmBadMsg;
}

int pvmrcpi_pk_to_wire(unsigned char *b, size_t len)
{
	return walk(b, len, 1);
}

int pvmrcpi_pk_from_wire(unsigned char *b, size_t len)
{
	return walk(b, len, 0);
}

int pvmrcpi_pk_head_to_wire(unsigned char *b, size_t hdrlen)
{
	int32_t len;

	if (!b || hdrlen < PR_PK_HDR * 4)
		return PvmBadMsg;
	len = (int32_t)get32(b);
	if (len < 0 || hdrlen != PR_PK_HDR * 4 + (len ? 4u : 0u) ||
	    (len && (int32_t)get32(b + PR_PK_HDR * 4) != len))
		return PvmBadMsg;
	for (size_t off = 0; off < hdrlen; off += 4)
		put32(b + off, htonl(get32(b + off)));
	return 0;
}
