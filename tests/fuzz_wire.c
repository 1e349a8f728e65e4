/*
 * tests/fuzz_wire.c — libFuzzer target: the frame parser and everything
 * the protocol core does with what gets past it.
 *
 * Input: a sequence of records, each a control byte, a 16-bit length
 * (little-endian) and that many bytes of frame.  Control: bit 0, the frame
 * comes from an unknown sender (else from peer 0); bit 1, the core's
 * timers run after it; bits 2-7, E: virtual time advances 2^E ns first.
 * Each frame is copied into its own allocation of exactly its length, so
 * a read past its end is ASan's to catch (slices of the input would put
 * the next frame's bytes there).  Each input runs against a fresh core
 * (CRC off, so well-formed hostile frames reach the state machine) with a
 * few receives posted and sends queued, then the core's timers run.  Its
 * epoch is the simulator's core 1 (0x1001), so the seeds tests/fuzz_seed
 * records there are addressed to it.  Build: `make tests/fuzz_wire`
 * (needs clang with libFuzzer); `make check` runs it briefly
 * (tests/fuzz_wire.sh, docs/fuzzing.md).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rcp/core.h"
#include "rcp/wire.h"
#include "fuzz_guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int io_send(void *ctx, int peer, const struct iovec *iov, int iovcnt, unsigned flags)
{
	(void)ctx;
	(void)peer;
	(void)flags;
	/* Touch every byte: catches frames built from freed or short memory. */
	volatile unsigned char sink = 0;
	for (int i = 0; i < iovcnt; i++)
		for (size_t k = 0; k < iov[i].iov_len; k++)
			sink ^= ((const unsigned char *)iov[i].iov_base)[k];
	(void)sink;
	return 0;
}

static int io_peer_add(void *ctx, const void *src, size_t srclen, int *peer)
{
	(void)ctx;
	(void)src;
	if (srclen != 1)
		return RCP_EADDR;
	*peer = 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char rbuf[3][70000], sbuf[70000];
	struct rcpc_params p;
	struct rcpc_io io = {0};
	struct rcpw_hdr h;
	const unsigned char *pl;
	rcpc_core *c;
	rcp_chan *ch;
	rcp_req *r[5];
	uint64_t now = 1000000000ull;
	unsigned char src = 0;

	/* The parser alone, on the whole input. */
	(void)rcpw_parse(data, size, 0x52435031u, 0, &h, &pl);
	(void)rcpw_parse(data, size, 0x52435031u, 1, &h, &pl);

	rcpc_params_default(&p);
	p.mtu = 4096;
	p.rx_frames = 16;
	p.crc = 0;
	p.epoch = 0x1001;
	p.flags = RCP_EP_ACCEPT;
	io.send = io_send;
	io.peer_add = io_peer_add;
	if (rcpc_core_new(&p, &io, NULL, &c))
		return 0;
	rcpc_chan_open(c, 0, now, &ch);
	rcpc_irecv(c, ch, 1, rbuf[0], 100, now, &r[0]);
	rcpc_irecv(c, ch, RCP_ANY_TAG, rbuf[1], sizeof rbuf[1], now, &r[1]);
	rcpc_irecv(c, NULL, RCP_ANY_TAG, rbuf[2], 10, now, &r[2]);
	rcpc_isend(ch, 1, sbuf, 10, now, &r[3]);
	rcpc_isend(ch, 2, sbuf, sizeof sbuf, now, &r[4]);
	while (size >= 3) {
		unsigned ctl = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		unsigned char *frame;
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		frame = malloc(len ? len : 1);
		if (!frame)
			break;
		memcpy(frame, data, len);
		now += 1ull << (ctl >> 2);
		/* tests/fuzz_guard.h; unknown senders become peer 1. */
		if (!fuzz_ack_spins(rcpc_chan_by_peer(c, (ctl & 1) ? 1 : 0), frame, len, p.session))
			rcpc_input(c, (ctl & 1) ? RCP_NIC_PEER_NONE : 0, &src, 1, frame, len, now);
		free(frame);
		data += len;
		size -= len;
		if (ctl & 2)
			rcpc_timers(c, now);
		rcpc_flush(c, now);
	}
	now += 10000000000ull;
	rcpc_timers(c, now);
	rcpc_core_free(c);
	return 0;
}
