/*
 * pvm-glue/inplace.h — what was packed into PvmDataInPlace buffers, so
 * pvm_send can gather it straight from the user's memory into one RCP
 * message (pvm-glue/inplace.c).
 */
#ifndef PVMRCP_INPLACE_H
#define PVMRCP_INPLACE_H

#include <stddef.h>

#include <rcp/rcp.h>

#define PRI_IP __attribute__((visibility("hidden")))

/* Does our record of in-place buffer BUFID hold all of its data: every
 * pack into it since it was made went through our wrappers, and their
 * bytes add up to LEN, libpvm3's own count of the buffer (pmsg_setlen).
 * 1 yes, 0 no (then the caller takes the pvm_pkmesg path). */
PRI_IP int pvmrcpi_ip_ok(int bufid, long len);

/* The packed message of in-place buffer BUFID (pvmrcpi_ip_ok said yes,
 * LEN its length): the eight header ints {len, 0, 0, 0, ENC, 0, 0, 0}
 * and one fragment {len, bytes} gathered from the user's memory, in
 * native byte order; packed.c's pvmrcpi_pk_to_wire makes it wire order.
 * malloc'd into *OUT, *OUTLEN bytes.  0 or PvmNoMem. */
PRI_IP int pvmrcpi_ip_gather(int bufid, long len, int enc, char **out, size_t *outlen);

/* The same message as segments for rcp_isendv, nothing copied: HEAD
 * (room for PR_PK_HDR + 1 ints) gets the header and the fragment's
 * length in native order (*HEADLEN bytes; packed.c's
 * pvmrcpi_pk_head_to_wire makes them wire order), *IOV (malloc'd, *N
 * entries) HEAD then the user's noted pieces.  0, PvmBadMsg, PvmNoMem. */
PRI_IP int pvmrcpi_ip_iov(int bufid, long len, int enc, unsigned char *head, size_t *headlen,
                          struct rcp_iov **iov, int *n);

/* Once: glibc's heap keeps freed memory and serves large blocks, so a
 * packed message's buffers do not fault their pages in per message
 * (inplace.c, MEMORY); PVMRCP_MALLOC_KEEP=0 skips it. */
PRI_IP void pvmrcpi_ip_malloc_setup(void);

/* This host's raw encoding (pvm_getminfo's enc of a PvmDataRaw buffer,
 * learnt once in pksend.c), or with XDR 1 XDR's (PvmDataDefault's), or -1
 * if libpvm3's encodings could not be told apart. */
PRI_IP int pvmrcpi_enc_sig(int xdr);

#endif
