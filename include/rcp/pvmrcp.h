/*
 * rcp/pvmrcp.h — PVM 3.4 programs over RCP channels, by relinking.
 *
 * Link with  cc prog.c -lpvmrcp -lpvm3  (libpvmrcp BEFORE libpvm3), or
 * `pkg-config --cflags --libs pvmrcp`, or run an unchanged dynamically
 * linked program with LD_PRELOAD=libpvmrcp.so.  pvm_psend and pvm_precv
 * then travel over RCP (shared memory on one host, udp between hosts)
 * whenever both tasks are relinked, and over stock PVM otherwise; every
 * other PVM call keeps its stock behaviour and sees messages of both
 * paths, in order per sender.  See docs/pvm.md.
 *
 * Start-up is automatic on the first PVM communication call; the calls
 * below are optional.  PVMRCP=0 in a task's environment turns the library
 * into a pass-through to libpvm3.
 */
#ifndef RCP_PVMRCP_H
#define RCP_PVMRCP_H

#include <pvm3.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts RCP for this task now (enrolling in PVM if needed), to fail
 * early.  Returns 0, or a PVM error code (PvmSysErr: no pvmd or no RCP
 * endpoint, or after pvm_exit; PvmNotImpl: disabled by PVMRCP=0; or
 * pvm_mytid's error when enrolling fails).  Without it, start-up
 * happens on first use and a failure there silently means stock PVM. */
int pvm_rcp_init(void);

/* 1 if this task's messages may travel over RCP, else 0. */
int pvm_rcp_active(void);

/* 1 if messages to TID go over RCP now, 0 if by stock PVM (TID not
 * relinked, not started yet, or this task itself).  May ask pvmd. */
int pvm_rcp_route(int tid);

/* The transport of this task's RCP channel with TID: "shm", "udp", "xdp",
 * "verbs", or "stock" (no channel yet, or TID not relinked).  Does not ask pvmd: call
 * pvm_rcp_route first to open the channel.  For tests and diagnostics. */
const char *pvm_rcp_transport(int tid);

/* Sends LEN elements of DATATYPE at BUF with MSGTAG to each of the NTASK
 * tasks in TIDS (the caller itself and repeated tids skipped), without
 * packing the data into PVM buffers: one RCP multicast to the relinked
 * tasks, one stock pvm_mcast to the others.  Receivers use pvm_precv (or
 * pvm_recv and friends).  Returns 0, PvmBadParam, PvmNotImpl (PVM_STR, as
 * pvm_psend), PvmNoMem, PvmNoTask (a destination exited during the send)
 * or PvmSysErr. */
int pvm_pmcast(int *tids, int ntask, int msgtag, void *buf, int len, int datatype);

/* How the last pvm_pmcast or pvm_mcast of this task reached TID:
 * "multicast" (IP or InfiniBand multicast, one datagram per frame for all
 * hosts), "udp", "verbs" or "xdp" (an RCP unicast on that transport:
 * another host without multicast, a message under PVMRCP_MCAST_MIN, fewer
 * than two remote tasks, or a task that did not acknowledge in time),
 * "shm" (same host), "stock", or "none" (not sent to).  For tests and
 * diagnostics (docs/pvm.md, "pvm_pmcast"). */
const char *pvm_rcp_mcast_route(int tid);
/* This task's multicast layers (one per endpoint that joined a group),
 * summed: data frames it sent to the groups, bytes
 * it received whole by multicast, members it gave up on (each NULL-able).
 * 0, or PvmNotImpl (no multicast group: unicasts only). */
int pvm_rcp_mcast_stats(unsigned long long *data_sent, unsigned long long *bytes_recv,
                        unsigned long long *members_failed);

/* pvm_send's of packed buffers (and pvm_mcast copies) that went over RCP
 * (not pvmd) since the start; RESET nonzero: back to 0 after.  Always
 * >= 0 (no error code). */
long pvm_rcp_packed_sent(int reset);

/* Large raw messages received over RCP that pvm_upk* read where they
 * landed (pvm-glue/upk.c; PVMRCP_UPK_MIN): since the start, *ADOPTED
 * buffers so made, *SERVED pvm_upk* calls answered from them, *BUILT of
 * them given to libpvm3 after all (a call the glue does not serve needed
 * their bytes there).  Any pointer may be NULL.  For tests and
 * diagnostics.  Returns 0. */
int pvm_rcp_upkstats(unsigned long *adopted, unsigned long *served, unsigned long *built);

/* Packed messages this task sent over RCP since the start (pvm_send,
 * pvm_mcast; session 21): *GATHERED as segments from where their bytes
 * lie (libpvm3's fragments, the user's memory for in-place data),
 * *COPIED from a copy the glue made first, *BYTES_COPIED the bytes of
 * those copies.  Any pointer may be NULL.  For tests and diagnostics.
 * Returns 0. */
int pvm_rcp_sendstats(unsigned long *gathered, unsigned long *copied,
                      unsigned long long *bytes_copied);

/* How this task's blocking waits went, counted since start-up or the last
 * reset (RESET nonzero: zeroed after the copy).  A wait spins alone for a
 * few microseconds, then offers the CPU (sched_yield) after every look at
 * the transports, so that a task it waits for on the same CPU (the peer,
 * pvmd, the group server) runs; then sleeps (with RCP_WAIT=spin only
 * when the CPU is crowded, docs/waiting.md).
 * For tests and diagnostics.  Returns 0. */
struct pvm_rcp_waitstats {
	unsigned long long waits;      /* waits that did not end at the first look */
	unsigned long long polls;      /* looks at the transports while waiting */
	unsigned long long yields;     /* sched_yield calls */
	unsigned long long sleeps;     /* sleeps on the endpoints' and pvmd's fds */
	unsigned long long max_run;    /* most looks in a row, past the few microseconds
	                               alone, without yielding or sleeping */
	unsigned long long crowded;    /* yields that kept this task off the CPU long
	                               (other tasks want it: sleep rather than yield) */
	unsigned long long nic_polls;  /* the first endpoint's nic polls, waiting or not:
	                                 one per look (polls) and a few per message */
	unsigned long long unexpected; /* the first endpoint's messages that found no
	                                  receive posted (buffered, copied out later) */
};
int pvm_rcp_waitstats(struct pvm_rcp_waitstats *st, int reset);

#ifdef __cplusplus
}
#endif
#endif
