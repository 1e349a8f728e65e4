/*
 * pvm-glue/packed.h — the bytes of a packed PVM message on an RCP channel
 * (pvm-glue/packed.c).  Pure functions: no libpvm3 call, no state.
 */
#ifndef PVMRCP_PACKED_H
#define PVMRCP_PACKED_H

#include <stddef.h>

/* Header ints before the fragments: {len, ctx, tag, wid, enc, crc, src,
 * dst}, as pvm_pkmesg writes them. */
#define PR_PK_HDR 8

/* The message in B (LEN bytes), laid out by the sender in native byte
 * order, turned into wire order (big-endian) in place.  0, or PvmBadMsg
 * if it is not a well-formed message (then B is unspecified). */
int pvmrcpi_pk_to_wire(unsigned char *b, size_t len);

/* The head of a message whose one fragment's bytes are sent from
 * elsewhere (a gathered in-place message, pksend.c): the header and, if
 * the header's len is not 0, that fragment's length, HDRLEN bytes in B
 * (PR_PK_HDR ints, or one more), turned into wire order in place.  0, or
 * PvmBadMsg (HDRLEN does not fit what the header says). */
int pvmrcpi_pk_head_to_wire(unsigned char *b, size_t hdrlen);

/* The message in B (LEN bytes) as it came off the wire, checked and
 * turned into native order in place, ready for pvm_upkmesg: the header,
 * then fragments {length, bytes} whose lengths are >= 0 and add up to
 * the header's len, ending exactly at LEN.  0, or PvmBadMsg (B then
 * unspecified; nothing is read outside it). */
int pvmrcpi_pk_from_wire(unsigned char *b, size_t len);

#endif
