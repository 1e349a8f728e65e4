/*
 * pvm-glue/frags.h — a Raw or XDR send buffer's data read where libpvm3
 * holds it, fragment by fragment (pvm-glue/frags.c).
 */
#ifndef PVMRCP_FRAGS_H
#define PVMRCP_FRAGS_H

#include <pvm3.h>
#include <stddef.h>

#include <rcp/rcp.h>

#include "pvm-glue/packed.h"

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

/* A large message's send, kept alive until RCP is done with it
 * (frags.c, KEPT BY REFERENCE): the header the first segment points at,
 * the reference held on libpvm3's message, the bytes it counts in the
 * glue's in-flight budget. */
struct pr_hold {
	void *msg; /* libpvm3's struct pmsg, one reference ours */
	size_t len;
	unsigned char head[(PR_PK_HDR + 1) * sizeof(int)];
};

/* The same message as segments for rcp_isendv, nothing copied, if its
 * data are more than MIN bytes: *HOLD (malloc'd) gets the header and a
 * reference on libpvm3's message, so the fragments outlive pvm_freebuf
 * and pvm_initsend until pvmrcpi_frags_release(*HOLD); *IOV (malloc'd,
 * *N entries) the header, then each fragment.  1, 0 (as pvmrcpi_frags,
 * or MIN bytes or fewer; nothing held), or PvmNoMem. */
PRI_FR int pvmrcpi_frags_iov(int bufid, const struct pvmminfo *mi, int xdr, size_t min,
                             struct pr_hold **hold, struct rcp_iov **iov, int *n);

/* Drops HOLD's reference (libpvm3 frees the message if it was the last:
 * the buffer was freed meanwhile) and HOLD. */
PRI_FR void pvmrcpi_frags_release(struct pr_hold *hold);

/* Messages sent from libpvm3's fragments, gathered and copied (frags.c);
 * counted for a debugger, reported nowhere yet (a test sees the effect:
 * the receiver adopts such a message, tests/pvm packed-frags). */
PRI_FR extern unsigned long pvmrcpi_frags_gathered, pvmrcpi_frags_copied;

/* Packed messages (pvm_send, pvm_mcast) sent as segments from where
 * their bytes lie, and those the glue copied first (packed_bytes: a
 * small one, one pvm_pkmesg could not be read from, a multicast), with
 * the bytes so copied; counted in pksend.c, reported by pvm_rcp_sendstats. */
PRI_FR extern unsigned long pvmrcpi_sent_gathered, pvmrcpi_sent_copied;
PRI_FR extern unsigned long long pvmrcpi_bytes_copied;
static inline void pvmrcpi_count_copy(size_t len)
{
	pvmrcpi_sent_copied++;
	pvmrcpi_bytes_copied += len;
}

#endif
