/*
 * tests/test_xdp_jumbo.c — the xdp backend at link MTU 9000, where a frame
 * outgrows one 4 KiB UMEM buffer and the kernel hands it up as a chain of
 * descriptors (multi-buffer, XDP_USE_SG): nic/xdp/rx.c joins the chain and
 * gathers a long send over several TX buffers.
 *
 * On a veth pair inside a namespace of its own (tests/test_xdp_veth.h):
 * frames of every size around the buffer boundaries both ways, byte for
 * byte; an unpaced window of MTU frames, many times round small rings
 * (rx_frames must count a frame's several buffers); hostile chains sent
 * by a packet socket, every check of the header wrong in turn, each
 * counted and dropped.  SKIP with the reason where root, netns, XDP or
 * the kernel's multi-buffer (6.6+) are missing.
 */
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>

#include <rcp/nic.h>

#include "testutil.h"
#include "tests/test_xdp_veth.h"

static struct test_veth veth;
static uint64_t seed;
static rcp_nic *open_eps[2]; /* closed by the teardown, even after a failure */

static void open_ep(int side, const struct rcp_nic_config *cfg, rcp_nic **nic)
{
	char addr[64];
	snprintf(addr, sizeof addr, "xdp:%s", veth.ifname[side]);
	assert_int_equal(rcp_nic_open(addr, cfg, nic), 0);
	open_eps[side] = *nic;
}

static int close_eps(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++) {
		rcp_nic_close(open_eps[i]);
		open_eps[i] = NULL;
	}
	return 0;
}

/* Every size around the boundaries of one RX buffer (3840 B with the
 * kernel's headroom, 3824 B of payload) and one TX buffer (4096 B), and
 * random sizes up to the MTU, both ways, gathered from two iovecs, sent
 * singly and batched with MORE. */
static void t_sizes(void **state)
{
	static const uint32_t edge[] = {1,    8,    44,   45,   3823, 3824, 3825,
	                                3826, 3840, 4079, 4080, 4081, 4096, 7663,
	                                7664, 7665, 8159, 8160, 8161, 8997, 8998};
	enum { NE = sizeof edge / sizeof edge[0], NR = 200 };
	static unsigned char buf[9000];
	static uint32_t lens[NE + NR];
	struct rcp_nic_info info;
	rcp_nic *ep[2];
	int peer[2];
	uint64_t s = seed;
	(void)state;

	open_ep(0, NULL, &ep[0]);
	open_ep(1, NULL, &ep[1]);
	assert_int_equal(rcp_nic_query(ep[0], &info), 0);
	assert_int_equal(info.mtu, 9000 - 2);
	peer[1] = test_xdp_add_peer_of(ep[0], ep[1]);
	peer[0] = test_xdp_add_peer_of(ep[1], ep[0]);
	for (int i = 0; i < NE + NR; i++)
		lens[i] = i < NE ? edge[i] : 1 + (uint32_t)(test_rand(&s) % info.mtu);
	for (int dir = 0; dir < 2; dir++) {
		rcp_nic *from = ep[dir], *to = ep[!dir];
		for (int more = 0; more < 2; more++) {
			uint64_t first = (uint64_t)(dir * 2 + more) * 1000;
			for (int i = 0; i < NE + NR; i++) {
				/* 3 bytes in the first iovec: the gather crosses a
				 * TX buffer's end mid-iovec. */
				size_t h = lens[i] < 3 ? lens[i] : 3;
				struct iovec v[2] = {{buf, h}, {buf + h, lens[i] - h}};
				int rc;
				test_fill(buf, lens[i], first + (uint64_t)i);
				while ((rc = rcp_nic_send(from, peer[!dir], v, 2,
				                          more ? RCP_NIC_MORE : 0)) == RCP_EAGAIN)
					rcp_nic_flush(from);
				assert_int_equal(rc, 0);
				if (!more || i % 16 == 15 || i + 1 == NE + NR) {
					while (rcp_nic_flush(from) == RCP_EAGAIN)
						;
					test_xdp_recv_n(to, more ? i % 16 + 1 : 1,
					                first + (uint64_t)(i - (more ? i % 16 : 0)),
					                lens + (more ? i - i % 16 : i), 0,
					                peer[dir], seed);
				}
			}
		}
	}
	{
		struct rcp_nic_stats st;
		assert_int_equal(rcp_nic_get_stats(ep[1], &st), 0);
		assert_int_equal(st.rx_dropped, 0);
	}
}

/* Small rings (rx_bytes 1 MiB: 256 buffers a ring): the window counts a
 * frame of MTU bytes as the three buffers it takes, and windows of such
 * frames sent unpaced, many times round the rings, all arrive. */
static void t_window(void **state)
{
	struct rcp_nic_config cfg = {.rx_bytes = 1 << 20};
	static unsigned char buf[9000];
	struct rcp_nic_info info;
	rcp_nic *a, *b;
	int pb, pa;
	(void)state;

	open_ep(0, &cfg, &a);
	open_ep(1, &cfg, &b);
	assert_int_equal(rcp_nic_query(b, &info), 0);
	assert_int_equal(info.rx_frames, (256 - 64 - 32) / 2 / 3);
	pb = test_xdp_add_peer_of(a, b);
	pa = test_xdp_add_peer_of(b, a);
	for (int w = 0; w < 20; w++) {
		for (uint32_t i = 0; i < info.rx_frames; i++) {
			struct iovec v = {buf, info.mtu};
			int rc;
			test_fill(buf, info.mtu, (uint64_t)w * 1000 + i);
			while ((rc = rcp_nic_send(a, pb, &v, 1, RCP_NIC_MORE)) == RCP_EAGAIN)
				rcp_nic_flush(a);
			assert_int_equal(rc, 0);
		}
		while (rcp_nic_flush(a) == RCP_EAGAIN)
			;
		test_xdp_recv_n(b, (int)info.rx_frames, (uint64_t)w * 1000, NULL, info.mtu, pa,
		                seed);
	}
}

/* Hostile chains: raw 9,000-byte frames of our EtherType (three RX
 * buffers each) sent by a packet socket, each with one check wrong, then
 * one-buffer frames of the same kinds; each counted in rx_dropped and
 * never handed up.  A good jumbo frame after them arrives whole. */
static void t_bad_chains(void **state)
{
	static unsigned char f[9014];
	struct rcp_nic_stats st;
	struct sockaddr_ll sl = {.sll_family = AF_PACKET};
	unsigned char mac_a[7], mac_b[7];
	size_t ml = sizeof mac_b;
	rcp_nic *a, *b;
	int pa, pb, s, nbad = 0;
	(void)state;

	open_ep(0, NULL, &a);
	open_ep(1, NULL, &b);
	pa = test_xdp_add_peer_of(b, a);
	pb = test_xdp_add_peer_of(a, b);
	assert_int_equal(rcp_nic_addr_blob(b, mac_b, &ml), 0);
	ml = sizeof mac_a;
	assert_int_equal(rcp_nic_addr_blob(a, mac_a, &ml), 0);
	s = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	sl.sll_ifindex = (int)if_nametoindex(veth.ifname[0]);
	sl.sll_halen = 6;
	memcpy(sl.sll_addr, mac_b + 1, 6);
	for (int size = 0; size < 2; size++) {
		size_t len = size ? 9014 : 3000; /* three buffers, then one */
		for (int k = 0; k < 5; k++) {
			size_t plen = len - 16;
			memset(f, 0x5a, len);
			memcpy(f, mac_b + 1, 6);
			memcpy(f + 6, mac_a + 1, 6);
			f[12] = 0x88, f[13] = 0xB5;
			switch (k) {
			case 0: plen += 1; break;     /* length word past the frame */
			case 1: plen -= 100; break;   /* bytes past the length word */
			case 2: f[6] |= 1; break;     /* a multicast source */
			case 3: f[5] ^= 0x40; break;  /* another destination */
			case 4: plen = 0xffff; break; /* the largest length word */
			}
			f[14] = (unsigned char)(plen >> 8), f[15] = (unsigned char)plen;
			assert_int_equal(sendto(s, f, len, 0, (struct sockaddr *)&sl, sizeof sl),
			                 (ssize_t)len);
			nbad++;
		}
	}
	close(s);
	{
		static unsigned char good[8998];
		struct iovec v = {good, sizeof good};
		test_fill(good, sizeof good, 77);
		assert_int_equal(rcp_nic_send(a, pb, &v, 1, 0), 0);
	}
	test_xdp_recv_n(b, 1, 77, NULL, 8998, pa, seed);
	assert_int_equal(rcp_nic_get_stats(b, &st), 0);
	assert_int_equal(st.rx_dropped, nbad);
	assert_int_equal(st.rx_frames, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(t_sizes, close_eps),
	    cmocka_unit_test_teardown(t_window, close_eps),
	    cmocka_unit_test_teardown(t_bad_chains, close_eps),
	};
	const char *const *names = rcp_nic_backends();
	const char *why;
	struct rcp_nic_info info;
	char addr[64];
	rcp_nic *probe;
	int have = 0, rc;

	for (int i = 0; names[i]; i++)
		have |= !strcmp(names[i], "xdp");
	if (!have)
		test_skip_all("librcp built without the xdp backend (libxdp/libbpf missing)");
	if ((why = test_veth_make(&veth, "rcpjumbo", 9000)))
		test_skip_all(why);
	seed = test_seed(0x9000);
	snprintf(addr, sizeof addr, "xdp:%s", veth.ifname[0]);
	rc = rcp_nic_open(addr, NULL, &probe);
	if (rc == RCP_EPERM || rc == RCP_ENOTSUP) {
		test_veth_remove(&veth);
		test_skip_all("XDP attach not permitted or not supported here");
	}
	assert_int_equal(rc, 0);
	assert_int_equal(rcp_nic_query(probe, &info), 0);
	rcp_nic_close(probe);
	if (info.mtu < 9000 - 2) {
		test_veth_remove(&veth);
		test_skip_all(
		    "no AF_XDP multi-buffer in this kernel (6.6+): frames stop at 3824 B");
	}
	printf("# seed %llu (RCP_TEST_SEED)\n", (unsigned long long)seed);
	rc = cmocka_run_group_tests_name("nic xdp, link MTU 9000", tests, NULL, NULL);
	test_veth_remove(&veth);
	return rc;
}
