/*
 * rcp/epoch.c — the keyed numbers of the handshake (handshake.c,
 * HANDSHAKE): conversation epochs, restart challenges and accept cookies,
 * all SipHash-2-4 under the endpoint's random key (params.cookie_key).
 * Pure functions of the core's key and counters: they call nothing else
 * of the core (rcp/core.c, LAYERS).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"
#include "rcp/chan.h"

static inline uint64_t rotl64(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

/* SipHash-2-4 (Aumasson and Bernstein): a keyed MAC, fast on short input. */
static uint64_t siphash24(const uint64_t k[2], const unsigned char *m, size_t n)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ k[0], v1 = 0x646f72616e646f6dull ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ k[0], v3 = 0x7465646279746573ull ^ k[1];
	uint64_t b = (uint64_t)n << 56, w;
	size_t i;
#define SIPROUND                                                                                   \
	do {                                                                                       \
		v0 += v1, v1 = rotl64(v1, 13), v1 ^= v0, v0 = rotl64(v0, 32);                      \
		v2 += v3, v3 = rotl64(v3, 16), v3 ^= v2;                                           \
		v0 += v3, v3 = rotl64(v3, 21), v3 ^= v0;                                           \
		v2 += v1, v1 = rotl64(v1, 17), v1 ^= v2, v2 = rotl64(v2, 32);                      \
	} while (0)
	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, m + i, 8);
		v3 ^= w;
		SIPROUND;
		SIPROUND;
		v0 ^= w;
	}
	for (size_t j = 0; i + j < n; j++)
		b |= (uint64_t)m[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
#undef SIPROUND
	return v0 ^ v1 ^ v2 ^ v3;
}

/* CHANNELS: our epoch for a new conversation, distinct from the endpoint
 * epoch (which accepted channels and cookies use) and, but by a 2^-32
 * chance, from the conversations before: frames of an old conversation
 * then name an epoch the new one does not have, and are stale. */
uint32_t rcpi_conv_epoch(rcpc_core *c)
{
	unsigned char m[8];
	uint32_t n = ++c->convs, v;
	memcpy(m, &c->p.epoch, 4);
	memcpy(m + 4, &n, 4);
	v = (uint32_t)siphash24(c->p.cookie_key, m, 8);
	while (!v || v == c->p.epoch)
		v = v * 2654435761u + 1;
	return v;
}

/* A restart challenge for incarnation EPOCH of CH's peer: never 0, never
 * one before (a counter under the key), so an echo of an old challenge
 * proves nothing. */
uint64_t rcpi_chal_nonce(rcpc_core *c, rcp_chan *ch, uint32_t epoch)
{
	unsigned char m[12];
	uint32_t n = ++c->convs;
	uint64_t v;
	memcpy(m, &ch->my_epoch, 4);
	memcpy(m + 4, &epoch, 4);
	memcpy(m + 8, &n, 4);
	v = siphash24(c->p.cookie_key, m, 12);
	return v ? v : 1;
}

/* The cookie for a sender at address SRC with incarnation EPOCH in time
 * slot SLOT: a MAC under the endpoint's secret, so checking an echo needs
 * no state.  Never 0 (0 means "no cookie"). */
uint64_t rcpi_cookie_of(const rcpc_core *c, const void *src, size_t srclen, uint32_t epoch,
                        uint64_t slot)
{
	unsigned char m[16 + COOKIE_SRC_MAX];
	uint64_t v;
	memcpy(m, &slot, 8);
	memcpy(m + 8, &c->p.epoch, 4);
	memcpy(m + 12, &epoch, 4);
	memcpy(m + 16, src, srclen);
	v = siphash24(c->p.cookie_key, m, 16 + srclen);
	return v ? v : 1;
}

/* H (from an unknown sender at SRC) echoes a cookie we gave it in this
 * time slot or the one before: the sender receives at its address. */
int rcpi_cookie_echoed(const rcpc_core *c, const void *src, size_t srclen, const struct rcpw_hdr *h,
                       uint64_t now)
{
	uint64_t slot = now >> COOKIE_SLOT_SHIFT;
	if (h->type != RCPW_ACK || !h->arg || h->dst_epoch != c->p.epoch)
		return 0;
	return h->arg == rcpi_cookie_of(c, src, srclen, h->src_epoch, slot) ||
	       h->arg == rcpi_cookie_of(c, src, srclen, h->src_epoch, slot - 1);
}
