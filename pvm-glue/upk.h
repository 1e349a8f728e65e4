/*
 * pvm-glue/upk.h — large Raw and XDR messages received over RCP unpacked straight
 * from the bytes RCP delivered (pvm-glue/upk.c).
 */
#ifndef PVMRCP_UPK_H
#define PVMRCP_UPK_H

#include <stddef.h>

#define PRI_UPK __attribute__((visibility("hidden")))

/* Messages of at least this many data bytes are adopted (upk.c):
 * PVMRCP_UPK_MIN, read once, default 65536; -1 never. */
PRI_UPK long pvmrcpi_upk_min(void);

/* Empty buffer BUFID (PvmDataRaw, or with XDR 1 PvmDataDefault) stands
 * for the LEN data bytes at P (XDR: LEN a multiple of 4), which lie in
 * MEM (malloc'd): pvm_upk* read them from there until a call we do not
 * serve needs them in libpvm3's buffer (upk.c, ADOPTED BUFFERS).  Takes
 * MEM on success (0); PvmNoMem or PvmSysErr leave it the caller's. */
PRI_UPK int pvmrcpi_upk_adopt(int bufid, int xdr, void *mem, const char *p, size_t len);

/* Buffer BUFID is freed, or its id was handed out again: forget it. */
PRI_UPK void pvmrcpi_upk_drop(int bufid);

/* Adopted buffers now, and since the start (tests, pvm_rcp_upkstats). */
PRI_UPK extern unsigned long pvmrcpi_upk_adopted, pvmrcpi_upk_served, pvmrcpi_upk_built;

#endif
