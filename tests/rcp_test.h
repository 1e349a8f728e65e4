/*
 * tests/rcp_test.h — what the tests of RCP channels between real
 * endpoints share: the headers, the wait bound and the stats dump printed
 * on failure.  Included once per test program: test_rcp.c (two processes
 * over shm and udp, with and without faults; a killed peer), test_rcp_api.c
 * (argument checks, post order, address reuse, ack arming, CRC by default),
 * test_rcp_handshake.c (a peer played by hand over a plain udp socket).
 */
#ifndef RCP_TESTS_RCP_TEST_H
#define RCP_TESTS_RCP_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include <rcp/rcp.h>

#include "rcp/wire.h"
#include "testutil.h"

#define WAIT_NS (120ll * 1000000000)

/* On failure: what the endpoint saw, to tell loss from protocol bugs. */
static inline void dump(rcp_ep *ep, const char *who)
{
	struct rcp_ep_stats e;
	struct rcp_nic_stats n;
	rcp_ep_get_stats(ep, &e);
	rcp_nic_get_stats(rcp_ep_nic(ep), &n);
	print_error("%s: frames %llu/%llu retx %llu timeouts %llu dup %llu bad %llu stale %llu "
	            "ooo %llu | nic tx %llu rx %llu rxdrop %llu eagain %llu fdrop %llu\n",
	            who, (unsigned long long)e.frames_sent, (unsigned long long)e.frames_recv,
	            (unsigned long long)e.retransmits, (unsigned long long)e.timeouts,
	            (unsigned long long)e.dup_frames, (unsigned long long)e.bad_frames,
	            (unsigned long long)e.stale_frames, (unsigned long long)e.ooo_frames,
	            (unsigned long long)n.tx_frames, (unsigned long long)n.rx_frames,
	            (unsigned long long)n.rx_dropped, (unsigned long long)n.tx_eagain,
	            (unsigned long long)n.f_dropped);
}

#endif
