/*
 * pvm-glue/send.h — what pksend.c (packed messages: pvm_send, pvm_mcast)
 * uses of send.c (psend, pmcast, the in-flight budget); internal, never
 * exported.  send.c does not call into pksend.c.
 */
#ifndef PVMRCP_SEND_H
#define PVMRCP_SEND_H

#include <stddef.h>
#include <stdint.h>

#include <rcp/rcp.h>

#define PRI_SD __attribute__((visibility("hidden")))

/* Nonzero while a real libpvm3 call that sends runs (send.c). */
PRI_SD extern int pvmrcpi_in_real;
/* Bytes of copied or held sends in flight (send.c, "Copies in flight"). */
PRI_SD extern size_t pvmrcpi_inflight;
/* Packed messages sent over RCP, one per destination (PVMRCP_STATS,
 * pvm_rcp_packed_sent). */
PRI_SD extern long pvmrcpi_packed_sent;
/* Before a copied send of LEN bytes: 0, or a PVM code (PvmNoTask: a task
 * of LIVE died meanwhile). */
PRI_SD int pvmrcpi_throttle(const int *live, int nlive, size_t len);
PRI_SD void pvmrcpi_inflight_done(size_t len);
/* A copied send failed under a live task: its peer's loss is noted
 * (send.c, LOST SENDS). */
PRI_SD void pvmrcpi_note_failed(const struct rcp_status *st);
/* Completion callback of a send from a malloc'd COPY: frees it. */
PRI_SD void pvmrcpi_mcast_copy_done(rcp_req *r, const struct rcp_status *st, void *copy);
/* BUF to the NCH channels CHANS, one rcp_mcast per endpoint; OWN (BUF
 * malloc'd) is given up.  0 or the first PVM code. */
PRI_SD int pvmrcpi_mcast_by_ep(rcp_chan **chans, int nch, uint64_t tag, const void *buf,
                               size_t bytes, const int *live, int nlive, void *own);

#endif
