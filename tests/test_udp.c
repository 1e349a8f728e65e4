/*
 * tests/test_udp.c — the udp backend (nic/udp/): addressing,
 * the peer table, IPv6.
 * What every udp test shares, and the rules they follow: tests/udp_test.h.
 */
#include "udp_test.h"

/* ---- addresses --------------------------------------------------------- */

static void t_parse_errors(void **state)
{
	static const char *const bad_open[] = {
	    "udp:127.0.0.1",       /* no port separator */
	    "udp:127.0.0.1:65536", /* port out of range */
	    "udp:127.0.0.1:99999",
	    "udp:127.0.0.1:123456",
	    "udp:127.0.0.1:-1",
	    "udp:127.0.0.1:+1",
	    "udp:127.0.0.1:1x",
	    "udp:127.0.0.1:0x10",
	    "udp:127.0.0.1: 1",
	    "udp:127.0.0.1:1 ",
	    "udp:127.0.0.1:5:",
	    "udp::5", /* empty host */
	    "udp::",
	    "udp:::1:5", /* IPv6 without brackets */
	    "udp:[::1]",
	    "udp:[::1]5",
	    "udp:[::1:5",
	    "udp:[]:5",
	    "udp:[1.2.3.4]:5",
	    "udp:[::1%]:5",
	    "udp:[::g]:5",
	    "udp:[::1]:5:6",
	    "udp:[::1]:x",
	    "udp:256.0.0.1:5",
	    "udp:1.2.3.4.5:5",
	    "udp:1..2:5",
	    "udp:a..b:5",
	    "udp:-ab:5",
	    "udp:ab-:5",
	    "udp:a b:5",
	    "udp:a/b:5",
	    "udp: 127.0.0.1:5",
	    "udp:host.:5",
	    "udp:.host:5",
	    "udp:203.0.113.7:", /* well formed, but not an address of this host */
	};
	static const char *const bad_peer[] = {
	    "udp:",                              /* peers need host and port */
	    "udp:127.0.0.1:", "udp:127.0.0.1:0", /* port 0 is no destination */
	    "udp:0.0.0.0:5",                     /* wildcard is no destination */
	    "udp:[::1]:5",                       /* other family than the endpoint */
	    "shm:foo",        "udpx:127.0.0.1:5", "UDP:127.0.0.1:5", "udp:127.0.0.1:65536",
	    "udp:::1:5",      "udp:[::1]:5:6",    "udp:1.2.3.4.5:5",
	};
	char longhost[400];
	rcp_nic *n = (rcp_nic *)0x1, *e;
	unsigned char blob[RCP_NIC_ADDR_MAX], b2[RCP_NIC_ADDR_MAX];
	size_t blen = sizeof blob;
	int p;
	(void)state;

	for (size_t i = 0; i < sizeof bad_open / sizeof bad_open[0]; i++) {
		int rc = rcp_nic_open(bad_open[i], NULL, &n);
		if (rc != RCP_EADDR)
			fail_msg("open \"%s\": %s, want RCP_EADDR", bad_open[i], rcp_strerror(rc));
		assert_null(n);
	}
	memset(longhost, 'a', sizeof longhost);
	memcpy(longhost, "udp:", 4);
	strcpy(longhost + sizeof longhost - 3, ":5");
	assert_int_equal(rcp_nic_open(longhost, NULL, &n), RCP_EADDR);

	e = xopen("udp:", NULL);
	for (size_t i = 0; i < sizeof bad_peer / sizeof bad_peer[0]; i++) {
		int rc = rcp_nic_peer_add_str(e, bad_peer[i], &p);
		if (rc != RCP_EADDR)
			fail_msg("peer \"%s\": %s, want RCP_EADDR", bad_peer[i], rcp_strerror(rc));
	}
	assert_int_equal(rcp_nic_peer_add_str(e, longhost, &p), RCP_EADDR);

	/* Blobs: wrong lengths, family, tag, port 0, wildcard address. */
	assert_int_equal(rcp_nic_addr_blob(e, blob, &blen), 0);
	assert_int_equal(blen, 8);
	for (size_t l = 2; l < 30; l++)
		if (l != 8)
			assert_int_equal(rcp_nic_peer_add(e, blob, l, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	b2[1] = 5;
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	b2[0] = 1; /* shm's tag */
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	b2[2] = b2[3] = 0;
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	memcpy(b2, blob, 8);
	memset(b2 + 4, 0, 4);
	assert_int_equal(rcp_nic_peer_add(e, b2, 8, &p), RCP_EADDR);
	/* An IPv6 blob on an IPv4 endpoint. */
	memset(b2, 0, sizeof b2);
	b2[0] = blob[0];
	b2[1] = 6;
	b2[2] = 0x30;
	b2[19] = 1;
	assert_int_equal(rcp_nic_peer_add(e, b2, 20, &p), RCP_EADDR);
	/* The blob itself is fine. */
	assert_int_equal(rcp_nic_peer_add(e, blob, blen, &p), 0);
	rcp_nic_close(e);
}

static void t_addresses(void **state)
{
	rcp_nic *a, *b, *c;
	struct rcp_nic_info info;
	struct rcp_nic_config cfg;
	char s[RCP_NIC_ADDRSTR_MAX], s2[RCP_NIC_ADDRSTR_MAX], want[64];
	unsigned char blob[RCP_NIC_ADDR_MAX];
	size_t blen = sizeof blob, small;
	unsigned port;
	uint16_t nport;
	int p1, p2;
	(void)state;

	/* "udp:" binds 127.0.0.1 on a free port and says which. */
	a = xopen("udp:", NULL);
	port = port_of(a);
	assert_true(port > 0 && port < 65536);
	assert_int_equal(rcp_nic_addr_str(a, s, sizeof s), 0);
	snprintf(want, sizeof want, "udp:127.0.0.1:%u", port);
	assert_string_equal(s, want);
	/* Exactly enough room, and one byte short. */
	assert_int_equal(rcp_nic_addr_str(a, s2, strlen(s) + 1), 0);
	assert_int_equal(rcp_nic_addr_str(a, s2, strlen(s)), RCP_ERANGE);
	/* Blob: tag, family, port (network order), address. */
	assert_int_equal(rcp_nic_addr_blob(a, blob, &blen), 0);
	assert_int_equal(blen, 8);
	assert_int_equal(blob[0], 2);
	assert_int_equal(blob[1], 4);
	memcpy(&nport, blob + 2, 2);
	assert_int_equal(ntohs(nport), port);
	assert_int_equal(blob[4], 127);
	assert_int_equal(blob[7], 1);
	small = 7;
	assert_int_equal(rcp_nic_addr_blob(a, blob, &small), RCP_ERANGE);

	/* The port is taken now. */
	snprintf(s2, sizeof s2, "udp:127.0.0.1:%u", port);
	assert_int_equal(rcp_nic_open(s2, NULL, &b), RCP_EADDRINUSE);
	assert_null(b);

	/* Other spellings of a local address; names resolve. */
	b = xopen("udp:127.0.0.1:", NULL);
	assert_true(port_of(b) != port);
	c = xopen("udp:localhost:0", NULL);
	assert_int_equal(rcp_nic_addr_str(c, s2, sizeof s2), 0);
	assert_int_equal(strncmp(s2, "udp:127.0.0.1:", 14), 0);
	/* String, blob and name forms of one address are one peer. */
	assert_int_equal(rcp_nic_peer_add_str(b, s, &p1), 0);
	assert_int_equal(rcp_nic_peer_add(b, blob, blen, &p2), 0);
	assert_int_equal(p1, p2);
	snprintf(s2, sizeof s2, "udp:localhost:%u", port);
	assert_int_equal(rcp_nic_peer_add_str(b, s2, &p2), 0);
	assert_int_equal(p1, p2);
	rcp_nic_close(c);

	/* Info: loopback defaults; caps say what UDP does and does not do. */
	assert_int_equal(rcp_nic_query(a, &info), 0);
	assert_string_equal(info.backend, "udp");
	if (!getenv("RCP_UDP_MTU"))
		assert_int_equal(info.mtu, 65000);
	assert_true(info.rx_frames >= 1 && info.rx_frames <= 4096);
	assert_true(info.caps & RCP_NIC_CAP_CHECKED);
	assert_true(info.caps & RCP_NIC_CAP_SAME_HOST);
	/* No SHARED_SEG even on loopback: a udp peer may be another user. */
	assert_false(info.caps & (RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_RMA |
	                          RCP_NIC_CAP_SHARED_SEG));
	/* On loopback a waiter keeps the library's time alone; off it, the
	 * udp nic's longer one (a round trip between hosts is longer). */
	assert_int_equal(info.solo_ns, 0);
	rcp_nic_close(a);
	c = xopen("udp:0.0.0.0:", NULL);
	{
		struct rcp_nic_info i3;
		assert_int_equal(rcp_nic_query(c, &i3), 0);
		assert_false(i3.caps & RCP_NIC_CAP_SAME_HOST);
		assert_int_equal(i3.solo_ns, 50000);
	}
	rcp_nic_close(c);

	/* cfg->mtu lowers the MTU, never raises it; rx_frames follows. */
	memset(&cfg, 0, sizeof cfg);
	cfg.mtu = 1000;
	c = xopen("udp:", &cfg);
	{
		struct rcp_nic_info i2;
		assert_int_equal(rcp_nic_query(c, &i2), 0);
		assert_int_equal(i2.mtu, 1000);
		assert_true(i2.rx_frames > info.rx_frames);
	}
	rcp_nic_close(c);
	cfg.mtu = 1u << 30;
	c = xopen("udp:", &cfg);
	assert_int_equal(rcp_nic_query(c, &info), 0);
	assert_true(info.mtu <= 65507);
	rcp_nic_close(c);

	/* No RMA. */
	{
		rcp_nic_mr *mr;
		char area[64], key[8] = {0};
		assert_int_equal(rcp_nic_mr_reg(b, area, sizeof area, RCP_NIC_ACCESS_READ, &mr),
		                 RCP_ENOTSUP);
		assert_int_equal(rcp_nic_get(b, p1, area, 8, key, sizeof key, 0), RCP_ENOTSUP);
		assert_int_equal(rcp_nic_put(b, p1, area, 8, key, sizeof key, 0), RCP_ENOTSUP);
	}
	rcp_nic_close(b);
}

/* ---- peer table -------------------------------------------------------- */

static void t_peer_table(void **state)
{
	enum { MAXP = 4096 };
	static int idx[MAXP];
	rcp_nic *a = xopen("udp:", NULL);
	char s[64];
	int p, q;
	uint8_t seen[MAXP] = {0};
	(void)state;

	/* Fill the table: distinct addresses get distinct indexes. */
	for (int i = 0; i < MAXP; i++) {
		/* Spread over addresses and ports so the hash sees both. */
		snprintf(s, sizeof s, "udp:127.0.%d.%d:%d", i % 7, 1 + i % 13, 1 + i);
		assert_int_equal(rcp_nic_peer_add_str(a, s, &idx[i]), 0);
		assert_true(idx[i] >= 0 && idx[i] < MAXP);
		assert_false(seen[idx[i]]);
		seen[idx[i]] = 1;
	}
	/* Full: a new address waits, a known one still resolves. */
	assert_int_equal(rcp_nic_peer_add_str(a, "udp:127.0.0.1:9", &p), RCP_EAGAIN);
	snprintf(s, sizeof s, "udp:127.0.%d.%d:%d", 100 % 7, 1 + 100 % 13, 101);
	assert_int_equal(rcp_nic_peer_add_str(a, s, &p), 0);
	assert_int_equal(p, idx[100]);

	/* Remove every other peer; the rest must still be found (deletion
	 * keeps probe chains intact), removed indexes are invalid. */
	for (int i = 0; i < MAXP; i += 2)
		assert_int_equal(rcp_nic_peer_remove(a, idx[i]), 0);
	assert_int_equal(rcp_nic_peer_remove(a, idx[0]), RCP_EINVAL);
	assert_int_equal(send_buf(a, idx[0], "x", 1, 0), RCP_EINVAL);
	for (int i = 1; i < MAXP; i += 2) {
		snprintf(s, sizeof s, "udp:127.0.%d.%d:%d", i % 7, 1 + i % 13, 1 + i);
		assert_int_equal(rcp_nic_peer_add_str(a, s, &p), 0);
		assert_int_equal(p, idx[i]);
	}
	/* Freed indexes are reused. */
	memset(seen, 0, sizeof seen);
	for (int i = 0; i < MAXP; i += 2)
		seen[idx[i]] = 1;
	for (int i = 0; i < MAXP / 2; i++) {
		snprintf(s, sizeof s, "udp:127.1.%d.%d:%d", i % 5, 1 + i % 11, 1 + i);
		assert_int_equal(rcp_nic_peer_add_str(a, s, &p), 0);
		assert_true(seen[p]);
		seen[p] = 0;
	}
	assert_int_equal(rcp_nic_peer_add_str(a, "udp:127.0.0.1:9", &q), RCP_EAGAIN);
	assert_int_equal(rcp_nic_peer_remove(a, 99999), RCP_EINVAL);
	rcp_nic_close(a);
}

/* ---- IPv6 -------------------------------------------------------------- */

static void t_ipv6(void **state)
{
	rcp_nic *a = NULL, *b;
	unsigned char blob[RCP_NIC_ADDR_MAX], buf[300];
	size_t blen = sizeof blob;
	char s[RCP_NIC_ADDRSTR_MAX], want[64];
	struct rcp_nic_frame f;
	int rc, pb, pa;
	(void)state;

	rc = rcp_nic_open("udp:[::1]:", NULL, &a);
	if (rc == RCP_EADDR) {
		printf("SKIP: no IPv6 loopback (::1) on this host\n");
		skip();
	}
	assert_int_equal(rc, 0);
	b = xopen("udp:[::1]:0", NULL);
	assert_int_equal(rcp_nic_addr_str(a, s, sizeof s), 0);
	snprintf(want, sizeof want, "udp:[::1]:%u", port_of(a));
	assert_string_equal(s, want);
	assert_int_equal(rcp_nic_addr_blob(a, blob, &blen), 0);
	assert_int_equal(blen, 20);
	assert_int_equal(blob[1], 6);

	pb = xpeer(a, b);
	assert_int_equal(send_seq(a, pb, buf, 300, 1, 0), 0);
	assert_int_equal(recv_wait(b, &f, 1), 1);
	assert_int_equal(f.peer, RCP_NIC_PEER_NONE);
	assert_int_equal(f.srclen, 20);
	assert_memory_equal(f.src, blob, 20);
	assert_int_equal(test_check(f.data, 300, 1), -1);
	assert_int_equal(rcp_nic_peer_add(b, f.src, f.srclen, &pa), 0);
	rcp_nic_release(b, &f, 1);
	assert_int_equal(send_seq(b, pa, buf, 100, 2, 0), 0);
	expect_seq(a, 100, 2, pb);
	/* Batched, GSO where offered. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(
		    send_seq(a, pb, buf + i * 50, 50, (uint64_t)(10 + i), i < 4 ? RCP_NIC_MORE : 0),
		    0);
	for (int i = 0; i < 5; i++)
		expect_seq(b, 50, (uint64_t)(10 + i), pa);
	/* Families do not mix. */
	assert_int_equal(rcp_nic_peer_add_str(a, "udp:127.0.0.1:5", &rc), RCP_EADDR);
	{
		rcp_nic *v4 = xopen("udp:", NULL);
		unsigned char b4[RCP_NIC_ADDR_MAX];
		size_t l4 = sizeof b4;
		assert_int_equal(rcp_nic_addr_blob(v4, b4, &l4), 0);
		assert_int_equal(rcp_nic_peer_add(a, b4, l4, &rc), RCP_EADDR);
		rcp_nic_close(v4);
	}
	rcp_nic_close(a);
	rcp_nic_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_parse_errors),
	    cmocka_unit_test(t_addresses),
	    cmocka_unit_test(t_peer_table),
	    cmocka_unit_test(t_ipv6),
	};
	g_seed = test_seed(0x5eedf00d);
	/* The tests set RCP_UDP_GSO themselves; start from the default. */
	unsetenv("RCP_UDP_GSO");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
