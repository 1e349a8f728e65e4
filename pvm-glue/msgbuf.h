/*
 * pvm-glue/msgbuf.h — libpvm3 buffers made for RCP messages, and the
 * record of where each came from (pvm-glue/msgbuf.c).
 */
#ifndef PVMRCP_MSGBUF_H
#define PVMRCP_MSGBUF_H

#include "pvm-glue/glue.h"

/* The record of buffer BUFID made here, or NULL. */
PRI struct pr_syn *pvmrcpi_syn_find(int bufid);
/* Forgets the record of buffer BUFID, if any. */
PRI void pvmrcpi_syn_del(int bufid);
/* M's bytes as a libpvm3 buffer (M->bufid; M->data freed), as a stock
 * psend would have made it; a packed M rebuilt as its sender packed it.
 * 0 (also if M already has one), PvmNoMem, PvmBadMsg, or what libpvm3
 * returned. */
PRI int pvmrcpi_pack_msg(struct pr_msg *m);
/* As stock pvm_recv/nrecv/trecv: the old receive buffer goes first (its
 * record and any adopted bytes with it). */
PRI void pvmrcpi_free_rbuf(void);

#endif
