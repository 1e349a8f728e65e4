/*
 * common/rcp_tags.h — the RCP message tag space reserved for RCP's own
 * layers (bulk/, rpc/).  Internal header; not installed.
 *
 * A tag whose top byte is 0xFE belongs to an RCP layer; applications must
 * not use such tags on an endpoint that carries bulk/ or rpc/ traffic
 * (RCP_ANY_TAG, all ones, is outside this range).  Layout:
 *
 *   bits 63..56  0xFE           reserved marker
 *   bits 55..48  layer          0x01 bulk/, 0x02 rpc/, 0x03..0xFF free
 *   bits 47..0   layer's own    bulk/: see the comment at the top of
 *                               bulk/bulk.c; rpc/: its own
 *
 * A receive that must see only one layer's traffic matches exact tags (RCP
 * matches on (channel or any, tag or any), so a layer posts one receive per
 * exact tag it expects).
 */
#ifndef RCP_TAGS_H
#define RCP_TAGS_H

#include <stdint.h>

#define RCPI_TAG_RESERVED    0xFE00000000000000ull
#define RCPI_TAG_LAYER_SHIFT 48
#define RCPI_TAG_LOW_MASK    0x0000FFFFFFFFFFFFull
#define RCPI_TAG_LAYER_BULK  0x01u
#define RCPI_TAG_LAYER_RPC   0x02u

/* The tag LOW (48 bits) of LAYER. */
#define RCPI_TAG(layer, low)                                                                       \
	(RCPI_TAG_RESERVED | ((uint64_t)(layer) << RCPI_TAG_LAYER_SHIFT) |                         \
	 ((uint64_t)(low)&RCPI_TAG_LOW_MASK))

/* Is TAG in the reserved space? */
#define RCPI_TAG_IS_RESERVED(tag) (((uint64_t)(tag) >> 56) == 0xFEu)

#endif
