/*
 * tests/fuzz_guard.h — keeps the fuzz targets off a known bug until its
 * fix is merged.
 *
 * Issue 18, failure 1: process_ack_fields (rcp/send.c) takes a cumulative
 * ack exactly 2^31 ahead of tx_una as valid when nothing is in flight
 * (both serial-number comparisons are true) and walks 2^31 slots: seconds
 * of CPU per frame.  A fuzzer finds it at once and then reports nothing
 * else but timeouts, so the targets do not deliver such frames while
 * FUZZ_GUARD_ACK_SPIN is 1.  tests/corpus/known/core/ack-2pow31 is the
 * frame (an ACK 2^31 ahead to a channel with nothing in flight).  The fix
 * is merged (process_ack_fields bounds the ack by distance): the guard is
 * off by default and the frame is a regression input
 * (tests/corpus/regress/core/ack-2pow31); -DFUZZ_GUARD_ACK_SPIN=1 turns
 * the guard back on for a library without the fix.
 */
#ifndef RCP_FUZZ_GUARD_H
#define RCP_FUZZ_GUARD_H

#include <stdio.h>
#include <string.h>

#include "rcp/core.h"
#include "rcp/wire.h"

#ifndef FUZZ_GUARD_ACK_SPIN
#define FUZZ_GUARD_ACK_SPIN 0
#endif

/* Nonzero if FRAME's cumulative ack would walk past tx_next of CH (NULL:
 * a channel not made yet).  A new channel, or one the frame resets (a new
 * src_epoch), starts at tx_una = tx_next = 1. */
static inline int fuzz_ack_spins(const rcp_chan *ch, const void *frame, size_t len,
                                 uint32_t session)
{
	struct rcpw_hdr h;
	const unsigned char *pl;
	unsigned una, next;
	char line[512];
	const char *t;

	if (!FUZZ_GUARD_ACK_SPIN || rcpw_parse(frame, len, session, 0, &h, &pl) != RCPW_OK)
		return 0;
	if (h.ack == 0x80000001u)
		return 1;
	if (!ch)
		return 0;
	rcpc_chan_debug(ch, line, sizeof line);
	t = strstr(line, "tx una ");
	if (!t || sscanf(t, "tx una %u next %u", &una, &next) != 2)
		return 0;
	return rcpw_seq_lt(una, h.ack) && rcpw_seq_le(h.ack, next) &&
	       (uint32_t)(h.ack - una) > (uint32_t)(next - una);
}

#endif
