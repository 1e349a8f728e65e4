/*
 * pvm-glue/frags.h — a Raw or XDR send buffer's data read where libpvm3
 * holds it, fragment by fragment (pvm-glue/frags.c).
 */
#ifndef PVMRCP_FRAGS_H
#define PVMRCP_FRAGS_H

#include <pvm3.h>
#include <stddef.h>

#include <rcp/rcp.h>

#define PRI_FR __attribute__((visibility("hidden")))

/* The data of buffer BUFID, of encoding ENC (pvm_getminfo's), where
 * libpvm3's fragments hold it: *IOV (malloc'd, the caller frees it) gets
 * the *N non-empty fragments in order, *LEN their total, which is also
 * libpvm3's length of the buffer.  XDR: every fragment must end on a
 * 4-byte boundary (frags.c says why).  Returns 1; 0 when the fragments
 * cannot be trusted (no libpvm3 internals found, a layout other than
 * the one checked, an XDR fragment off the boundary): the caller takes
 * the pvm_pkmesg path; or PvmNoMem. */
PRI_FR int pvmrcpi_frags(int bufid, int enc, int xdr, struct rcp_iov **iov, int *n, long *len);

/* Buffer BUFID's message (*MI: its pvm_getminfo) as the receiver's glue
 * takes it, in wire order, copied once from the fragments into a malloc'd
 * block (*OUT, *LEN bytes): pvm_pkmesg's header, then ONE fragment of all
 * the data (frags.c, ONE FRAGMENT ON THE WIRE).  1, 0 (as pvmrcpi_frags),
 * or PvmNoMem. */
PRI_FR int pvmrcpi_frags_copy(int bufid, const struct pvmminfo *mi, int xdr, char **out,
                              size_t *len);

/* The same message as segments for rcp_isendv, nothing copied, if its
 * data are more than MIN bytes: HEAD (room for PR_PK_HDR + 1 ints) gets
 * the header, *IOV (malloc'd, *N entries) HEAD then each fragment.  1, 0
 * (as pvmrcpi_frags, or MIN bytes or fewer), or PvmNoMem. */
PRI_FR int pvmrcpi_frags_iov(int bufid, const struct pvmminfo *mi, int xdr, size_t min,
                             unsigned char *head, struct rcp_iov **iov, int *n);

/* Messages sent from libpvm3's fragments, gathered and copied (frags.c);
 * counted for a debugger, reported nowhere yet (a test sees the effect:
 * the receiver adopts such a message, tests/pvm packed-frags). */
PRI_FR extern unsigned long pvmrcpi_frags_gathered, pvmrcpi_frags_copied;

#endif
