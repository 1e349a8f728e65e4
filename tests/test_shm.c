/*
 * tests/test_shm.c — the shared-memory backend (nic/shm/): addresses, geometry,
 * ownership (names squatted by another user, stale segments reclaimed
 * and swept).
 * What every shm test shares, and the rules they follow: tests/shm_test.h.
 */
#include "shm_test.h"

/* ---- addresses, geometry, ownership ------------------------------------------ */

/* An address blob: backend byte ID, then NAME. */
static size_t mkblob(unsigned char *blob, unsigned char id, const char *name)
{
	blob[0] = id;
	memcpy(blob + 1, name, strlen(name));
	return 1 + strlen(name);
}

static void t_addr_errors(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX], buf[RCP_NIC_ADDRSTR_MAX], name40[64];
	unsigned char blob[RCP_NIC_ADDR_MAX];
	static const char *const bad[] = {
	    "shm:",
	    "shm:a/b",
	    "shm:a b",
	    "shm:a:b",
	    "shm:\xc3\xa9t\xc3\xa9",
	    "shm:a\n",
	    "shm:01234567890123456789012345678901234567890", /* 41 */
	};
	size_t len;
	rcp_nic *a, *b;
	int peer, rc;
	(void)state;

	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		rcp_nic *x = NULL;
		rc = rcp_nic_open(bad[i], NULL, &x);
		if (rc != RCP_EADDR)
			fail_msg("open \"%s\": %s, want RCP_EADDR", bad[i], rcp_strerror(rc));
		assert_null(x);
	}

	/* 40 characters is the limit, and works. */
	snprintf(name40, sizeof name40, "ts-%d-", (int)getpid());
	while (strlen(name40) < 40)
		strcat(name40, "x");
	snprintf(addr, sizeof addr, "shm:%s", name40);
	assert_int_equal(rcp_nic_open(addr, NULL, &a), 0);
	assert_int_equal(rcp_nic_addr_str(a, buf, sizeof buf), 0);
	assert_string_equal(buf, addr);
	assert_int_equal(rcp_nic_addr_str(a, buf, strlen(addr)), RCP_ERANGE);
	len = sizeof blob;
	assert_int_equal(rcp_nic_addr_blob(a, blob, &len), 0);
	assert_int_equal(len, 41);
	assert_int_equal(blob[0], 1); /* RCPI_NIC_SHM */
	assert_memory_equal(blob + 1, name40, 40);
	len = 40;
	assert_int_equal(rcp_nic_addr_blob(a, blob, &len), RCP_ERANGE);

	b = open_ep("b");
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		rc = rcp_nic_peer_add_str(b, bad[i], &peer);
		if (rc != RCP_EADDR)
			fail_msg("peer_add \"%s\": %s, want RCP_EADDR", bad[i], rcp_strerror(rc));
	}
	assert_int_equal(rcp_nic_peer_add_str(b, "udp:127.0.0.1:9", &peer), RCP_EADDR);
	assert_int_equal(rcp_nic_peer_add_str(b, "shmx:abc", &peer), RCP_EADDR);
	/* Blobs: another backend's byte, bad characters. */
	len = mkblob(blob, 2, "abc");
	assert_int_equal(rcp_nic_peer_add(b, blob, len, &peer), RCP_EADDR);
	len = mkblob(blob, 1, "a/c");
	assert_int_equal(rcp_nic_peer_add(b, blob, len, &peer), RCP_EADDR);
	/* Well formed, but nobody there. */
	snprintf(addr, sizeof addr, "shm:ts-%d-nobody", (int)getpid());
	assert_int_equal(rcp_nic_peer_add_str(b, addr, &peer), RCP_EPEER);
	len = mkblob(blob, 1, "ts-nobody-here");
	assert_int_equal(rcp_nic_peer_add(b, blob, len, &peer), RCP_EPEER);

	/* The blob and the string name the same peer. */
	len = sizeof blob;
	assert_int_equal(rcp_nic_addr_blob(a, blob, &len), 0);
	assert_int_equal(rcp_nic_peer_add(b, blob, len, &peer), 0);
	{
		int again = -1;
		assert_int_equal(rcp_nic_peer_add_str(b, addr, &again), RCP_EPEER);
		assert_int_equal(rcp_nic_addr_str(a, buf, sizeof buf), 0);
		assert_int_equal(rcp_nic_peer_add_str(b, buf, &again), 0);
		assert_int_equal(again, peer);
	}
	rcp_nic_close(a);
	rcp_nic_close(b);
}

static void t_query(void **state)
{
	struct rcp_nic_config cfg;
	struct rcp_nic_info info;
	rcp_nic *a;
	(void)state;

	a = open_ep("q1");
	assert_int_equal(rcp_nic_query(a, &info), 0);
	assert_string_equal(info.backend, "shm");
	assert_int_equal(info.mtu, 16384);
	assert_int_equal(info.caps, RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE |
	                                RCP_NIC_CAP_CHECKED | RCP_NIC_CAP_RMA |
	                                RCP_NIC_CAP_SAME_HOST | RCP_NIC_CAP_SHARED_SEG);
	/* 1 MiB / 64 = 16384 cells; an MTU frame takes 257. */
	assert_int_equal(info.rx_frames, (16384 - 257) / 257);
	assert_true(rcp_nic_fd(a) >= 0);
	rcp_nic_close(a);

	memset(&cfg, 0, sizeof cfg);
	cfg.rx_bytes = 60000; /* rounded up to 64 KiB */
	cfg.mtu = 1000;
	a = open_cfg(getpid(), "q2", &cfg);
	assert_int_equal(rcp_nic_query(a, &info), 0);
	assert_int_equal(info.mtu, 1000);
	assert_int_equal(info.rx_frames, (1024 - 16) / 16);
	rcp_nic_close(a);

	/* An MTU the ring cannot hold twice is lowered. */
	cfg.rx_bytes = 4096;
	cfg.mtu = 16384;
	a = open_cfg(getpid(), "q3", &cfg);
	assert_int_equal(rcp_nic_query(a, &info), 0);
	assert_int_equal(info.mtu, 31 * 64 - 8);
	assert_true(info.rx_frames >= 1);
	rcp_nic_close(a);
}

static void t_dup_open(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	rcp_nic *a, *b = NULL;
	(void)state;

	a = open_ep("dup");
	addr_of(addr, sizeof addr, getpid(), "dup");
	assert_int_equal(rcp_nic_open(addr, NULL, &b), RCP_EADDRINUSE);
	assert_null(b);
	assert_true(shm_exists(getpid(), "dup"));
	rcp_nic_close(a);
	assert_false(shm_exists(getpid(), "dup")); /* unlinked on close */
	assert_int_equal(rcp_nic_open(addr, NULL, &b), 0);
	rcp_nic_close(b);
}

static void t_stale_reclaim(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	pid_t me = getpid(), child;
	rcp_nic *a, *b;
	int c2p[2], p2c[2], peer;
	(void)state;

	addr_of(addr, sizeof addr, me, "stale");
	child = spawn_holder(addr, c2p, p2c);
	assert_true(shm_exists(me, "stale"));
	/* Alive: the name is taken. */
	assert_int_equal(rcp_nic_open(addr, NULL, &a), RCP_EADDRINUSE);
	kill(child, SIGKILL);
	assert_int_equal(test_wait_child(child), 128 + SIGKILL);
	close(c2p[0]), close(c2p[1]), close(p2c[0]), close(p2c[1]);

	/* Its segment outlived it (unless a process of ours opening its
	 * first endpoint just swept it: see t_sweep); a sender must not
	 * attach to it. */
	b = open_ep("stale-tx");
	assert_int_equal(rcp_nic_peer_add_str(b, addr, &peer), RCP_EPEER);

	/* Reclaimed by the next owner, and working. */
	assert_int_equal(rcp_nic_open(addr, NULL, &a), 0);
	assert_int_equal(rcp_nic_peer_add_str(b, addr, &peer), 0);
	assert_int_equal(send_seq(b, peer, 7, 100), 0);
	expect_seq(a, 7, 100, RCP_NIC_PEER_NONE);
	rcp_nic_close(a);
	assert_false(shm_exists(me, "stale"));
	rcp_nic_close(b);
}

/* ---- ownership: names squatted by another user, stale segments swept ---- */

#define NOBODY 65534

static int seg_open(pid_t pid, const char *tag, int flags, mode_t mode)
{
	char path[128];
	snprintf(path, sizeof path, "/rcp-ts-%d-%s", (int)pid, tag);
	return shm_open(path, flags, mode);
}

static void seg_unlink(pid_t pid, const char *tag)
{
	char path[128];
	snprintf(path, sizeof path, "/rcp-ts-%d-%s", (int)pid, tag);
	shm_unlink(path);
}

/* Another user created the names first: the server refuses them cleanly
 * (RCP_EPERM, nothing of theirs touched); a client refuses a segment not
 * of our uid and mode 0600; a stale segment of ours with a loose mode is
 * replaced by one of mode 0600. */
static void t_squatted(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	pid_t me = getpid();
	rcp_nic *a = NULL, *b;
	struct stat st;
	int fd, peer, root = geteuid() == 0;
	(void)state;

	/* A segment of another user at the server's name. */
	if (root) {
		fd = seg_open(me, "sq1", O_RDWR | O_CREAT | O_EXCL, 0600);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, 1 << 20), 0);
		assert_int_equal(fchown(fd, NOBODY, NOBODY), 0);
		addr_of(addr, sizeof addr, me, "sq1");
		assert_int_equal(rcp_nic_open(addr, NULL, &a), RCP_EPERM);
		assert_null(a);
		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(st.st_uid, NOBODY); /* still there, still theirs */
		assert_int_equal(st.st_size, 1 << 20);
		close(fd);
		seg_unlink(me, "sq1");
	}

	/* A client attaching to a segment of another user, or of ours but
	 * open to others. */
	a = open_ep("sq2");
	b = open_ep("sq2-tx");
	addr_of(addr, sizeof addr, me, "sq2");
	fd = seg_open(me, "sq2", O_RDWR, 0);
	assert_true(fd >= 0);
	if (root) {
		assert_int_equal(fchown(fd, NOBODY, NOBODY), 0);
		assert_int_equal(rcp_nic_peer_add_str(b, addr, &peer), RCP_EPERM);
		assert_int_equal(fchown(fd, geteuid(), getegid()), 0);
	}
	assert_int_equal(fchmod(fd, 0644), 0);
	assert_int_equal(rcp_nic_peer_add_str(b, addr, &peer), RCP_EPERM);
	assert_int_equal(fchmod(fd, 0600), 0);
	assert_int_equal(rcp_nic_peer_add_str(b, addr, &peer), 0);
	assert_int_equal(send_seq(b, peer, 3, 10), 0);
	expect_seq(a, 3, 10, RCP_NIC_PEER_NONE);
	close(fd);
	rcp_nic_close(b);
	rcp_nic_close(a);

	/* A stale segment of ours that others could write: replaced. */
	fd = seg_open(me, "sq3", O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0666), 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	close(fd);
	a = open_ep("sq3");
	fd = seg_open(me, "sq3", O_RDONLY, 0);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_true(st.st_size > 4096);
	close(fd);
	rcp_nic_close(a);

	/* The doorbell name bound first by another user (root only: the
	 * child becomes nobody).  The server says who holds it. */
	if (root) {
		int c2p[2], p2c[2];
		pid_t child;
		assert_int_equal(pipe(c2p), 0);
		assert_int_equal(pipe(p2c), 0);
		child = fork_child();
		if (child == 0) {
			struct sockaddr_un sa;
			int s, k;
			memset(&sa, 0, sizeof sa);
			sa.sun_family = AF_UNIX;
			k = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "rcp-shm-ts-%d-sq4",
			             (int)me);
			CHILD_CHECK(setgid(NOBODY) == 0 && setuid(NOBODY) == 0);
			/* A change of credentials clears the parent-death signal. */
			CHILD_CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() == me);
			close(c2p[0]);
			close(p2c[1]);
			s = socket(AF_UNIX, SOCK_DGRAM, 0);
			CHILD_CHECK(s >= 0);
			CHILD_CHECK(bind(s, (struct sockaddr *)&sa,
			                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			                             (size_t)k)) == 0);
			pipe_put(c2p[1]);
			pipe_get(p2c[0]); /* until killed */
			_exit(0);
		}
		assert_true(pipe_get(c2p[0]));
		addr_of(addr, sizeof addr, me, "sq4");
		a = NULL;
		assert_int_equal(rcp_nic_open(addr, NULL, &a), RCP_EPERM);
		assert_null(a);
		assert_false(shm_exists(me, "sq4"));
		kill(child, SIGKILL);
		assert_int_equal(test_wait_child(child), 128 + SIGKILL);
		close(c2p[0]), close(c2p[1]), close(p2c[0]), close(p2c[1]);
	} else {
		print_message("note: not root: the other-user cases were not run\n");
	}
}

/* A killed endpoint's segment is removed by the next process of ours that
 * opens an endpoint (its first open sweeps); a live endpoint's is not. */
static void t_sweep(void **state)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	pid_t me = getpid(), live, dead, sweeper;
	int lc2p[2], lp2c[2], dc2p[2], dp2c[2];
	(void)state;

	addr_of(addr, sizeof addr, me, "sw-live");
	live = spawn_holder(addr, lc2p, lp2c);
	addr_of(addr, sizeof addr, me, "sw-dead");
	dead = spawn_holder(addr, dc2p, dp2c);
	kill(dead, SIGKILL);
	assert_int_equal(test_wait_child(dead), 128 + SIGKILL);
	close(dc2p[0]), close(dc2p[1]), close(dp2c[0]), close(dp2c[1]);
	assert_true(shm_exists(me, "sw-dead"));

	sweeper = fork_child();
	if (sweeper == 0) {
		rcp_nic *x;
		addr_of(addr, sizeof addr, me, "sw-new");
		CHILD_CHECK(rcp_nic_open(addr, NULL, &x) == 0);
		rcp_nic_close(x);
		_exit(0);
	}
	assert_int_equal(test_wait_child(sweeper), 0);
	assert_false(shm_exists(me, "sw-dead"));
	assert_true(shm_exists(me, "sw-live"));
	kill(live, SIGKILL);
	assert_int_equal(test_wait_child(live), 128 + SIGKILL);
	close(lc2p[0]), close(lc2p[1]), close(lp2c[0]), close(lp2c[1]);
	seg_unlink(me, "sw-live");
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_addr_errors),
		cmocka_unit_test(t_query),
		cmocka_unit_test(t_dup_open),
		cmocka_unit_test(t_stale_reclaim),
		cmocka_unit_test(t_squatted),
		cmocka_unit_test(t_sweep),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
