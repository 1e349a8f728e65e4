/*
 * tests/test_xdp_veth.h — a veth pair inside network namespaces of its
 * own, for tests that run a link backend (xdp) with both endpoints in one
 * process tree: tests/test_nic.c, test_xdp_jumbo.c, test_xdp_rings.c,
 * test_xdp_solo.c.
 *
 * test_veth_make() makes namespace PREFIX-PID holding both ends of a veth
 * pair (up, MTU as asked, no addresses: the xdp backend's peers are MAC
 * addresses) and
 * moves the process into it, so that every endpoint it opens and every
 * child it forks or execs sees the pair.  test_veth_make2() (session 21,
 * tests/test_nic.c's xdp groups) makes the same, then moves the second end
 * (ifname[1]) into a namespace of its own, PREFIX-PID-b: two hosts, each
 * with its own network stack, joined by the veth as by a cable.  The
 * process stays in the first; test_veth_in(v, 1) moves it into the second
 * for as long as it opens a socket there (a socket keeps the namespace it
 * was made in) and test_veth_in(v, 0) back.  test_veth_remove() moves back
 * and deletes the namespace(s); an atexit handler and SIGINT/SIGTERM do the
 * same after a failure, and namespaces left by a killed run (a dead pid in
 * the name, PREFIX-PID and PREFIX-PID-b alike) are swept by the next make.  While the pair exists the
 * process holds the lock tests/test_xdp.c and tests/cluster_down.sh take
 * ($TMPDIR/rcp-netns-tests.lock), so namespace tests run one at a time.
 *
 * test_xdp_add_peer_of() and test_xdp_recv_n() are what tests/test_xdp.c
 * and tests/test_xdp_jumbo.c both do with a pair of xdp endpoints: add
 * one as the other's peer, receive a counted run of patterned frames.
 *
 * setns() moves only the calling thread: call these from a process that
 * has no other threads (cmocka makes none).
 */
#ifndef RCP_TESTS_TEST_XDP_VETH_H
#define RCP_TESTS_TEST_XDP_VETH_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <rcp/nic.h>

#include "common/sh.h"
#include "tests/testutil.h"

struct test_veth {
	char ns[40];
	char ns2[44]; /* test_veth_make2's second namespace, or "" */
	char ifname[2][IF_NAMESIZE];
	int home; /* our own namespace, to go back to */
	int lock;
	pid_t owner; /* only the maker removes (not a forked child) */
};

static struct test_veth *test_veth_live;

static void test_veth_remove(struct test_veth *v) __attribute__((unused));
static void test_veth_remove(struct test_veth *v)
{
	if (!v || v->owner != getpid())
		return;
	v->owner = 0;
	if (v->home >= 0) {
		(void)!setns(v->home, CLONE_NEWNET);
		close(v->home);
		v->home = -1;
	}
	rcpi_sh("ip netns del %s 2>/dev/null", v->ns);
	if (v->ns2[0])
		rcpi_sh("ip netns del %s 2>/dev/null", v->ns2);
	v->ns2[0] = 0;
	if (v->lock >= 0)
		close(v->lock);
	v->lock = -1;
	test_veth_live = NULL;
}

static void test_veth_atexit(void)
{
	test_veth_remove(test_veth_live);
}

static void test_veth_signal(int sig)
{
	test_veth_remove(test_veth_live);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Makes the pair (link MTU MTU) and enters its namespace: NULL, or why
 * it cannot (the caller SKIPs with that reason; nothing is left behind). */
static const char *test_veth_make(struct test_veth *v, const char *prefix, int mtu)
    __attribute__((unused));
/* What every namespace test does first (here and tests/test_xdp.c's
 * two-namespace set-up): root and iproute2 checked, the namespace tests'
 * lock taken (*LOCK, held until closed or exit), and namespaces named
 * PREFIX-PID... that a killed run left behind (a dead PID) deleted.  NULL,
 * or why the test cannot run (the caller SKIPs with it). */
static const char *test_veth_prepare(const char *prefix, int *lock) __attribute__((unused));
static const char *test_veth_prepare(const char *prefix, int *lock)
{
	const char *td = getenv("TMPDIR");
	char path[256];
	struct dirent *e;
	DIR *d;

	*lock = -1;
	if (geteuid() != 0)
		return "needs root (network namespaces, XDP attach)";
	if (rcpi_sh("ip -V >/dev/null 2>&1"))
		return "needs iproute2's ip";
	snprintf(path, sizeof path, "%s/rcp-netns-tests.lock", td && *td ? td : "/tmp");
	*lock = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (*lock >= 0)
		(void)flock(*lock, LOCK_EX);
	if ((d = opendir("/run/netns"))) {
		size_t pl = strlen(prefix);
		while ((e = readdir(d))) {
			int dead;
			if (!strncmp(e->d_name, prefix, pl) && e->d_name[pl] == '-' &&
			    sscanf(e->d_name + pl + 1, "%d", &dead) == 1 && dead > 0 &&
			    kill(dead, 0) < 0 && errno == ESRCH)
				rcpi_sh("ip netns del %s 2>/dev/null", e->d_name);
		}
		closedir(d);
	}
	return NULL;
}

static const char *test_veth_make(struct test_veth *v, const char *prefix, int mtu)
{
	static int registered;
	const char *why;
	int pid = (int)getpid();

	v->home = -1;
	v->owner = 0;
	v->ns2[0] = 0;
	if ((why = test_veth_prepare(prefix, &v->lock)))
		return why;
	snprintf(v->ns, sizeof v->ns, "%s-%d", prefix, pid);
	snprintf(v->ifname[0], IF_NAMESIZE, "%.3sa%d", prefix, pid);
	snprintf(v->ifname[1], IF_NAMESIZE, "%.3sb%d", prefix, pid);
	v->home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	v->owner = getpid();
	test_veth_live = v;
	if (!registered) {
		registered = 1;
		atexit(test_veth_atexit);
		signal(SIGINT, test_veth_signal);
		signal(SIGTERM, test_veth_signal);
	}
	if (v->home < 0 || rcpi_sh("ip netns add %s", v->ns)) {
		test_veth_remove(v);
		return "cannot create a network namespace";
	}
	if (rcpi_sh("ip -n %s link add %s mtu %d type veth peer name %s mtu %d && "
	            "ip -n %s link set %s up && ip -n %s link set %s up",
	            v->ns, v->ifname[0], mtu, v->ifname[1], mtu, v->ns, v->ifname[0], v->ns,
	            v->ifname[1])) {
		test_veth_remove(v);
		return "cannot create a veth pair in a namespace";
	}
	if (rcpi_netns_enter(v->ns)) {
		test_veth_remove(v);
		return "cannot enter the namespace (setns)";
	}
	return NULL;
}

/* test_veth_make, and then ifname[1] moved into namespace PREFIX-PID-b
 * (swept and deleted with the first: test_veth_prepare's match reads the
 * PID and ignores the "-b"). */
static const char *test_veth_make2(struct test_veth *v, const char *prefix, int mtu)
    __attribute__((unused));
static const char *test_veth_make2(struct test_veth *v, const char *prefix, int mtu)
{
	const char *why = test_veth_make(v, prefix, mtu);

	if (why)
		return why;
	snprintf(v->ns2, sizeof v->ns2, "%s-b", v->ns);
	if (rcpi_sh("ip netns add %s", v->ns2)) {
		v->ns2[0] = 0;
		test_veth_remove(v);
		return "cannot create a second network namespace";
	}
	if (rcpi_sh("ip link set %s netns %s && ip -n %s link set %s up", v->ifname[1], v->ns2,
	            v->ns2, v->ifname[1])) {
		test_veth_remove(v);
		return "cannot move the veth's second end into the second namespace";
	}
	return NULL;
}

/* Moves the calling thread into the namespace of end SIDE of V (0: the
 * first, where test_veth_make left it; 1: test_veth_make2's second, or
 * the first if there is none).  0, or -1 with errno. */
static int test_veth_in(const struct test_veth *v, int side) __attribute__((unused));
static int test_veth_in(const struct test_veth *v, int side)
{
	return rcpi_netns_enter(side && v->ns2[0] ? v->ns2 : v->ns);
}

/* ---- frames over an xdp pair (tests/test_xdp.c, tests/test_xdp_jumbo.c) -- */

/* Adds WHOM's address (its own string) as a peer of TO: the index. */
static inline int test_xdp_add_peer_of(rcp_nic *to, rcp_nic *whom)
{
	char s[RCP_NIC_ADDRSTR_MAX];
	int peer = -1;

	assert_int_equal(rcp_nic_addr_str(whom, s, sizeof s), 0);
	assert_int_equal(rcp_nic_peer_add_str(to, s, &peer), 0);
	return peer;
}

/* Receives exactly N frames at B (each burst waited for up to 10 s: a
 * guard against hanging, not a timed assertion), frame i of length
 * LENS[i] or LEN holding test_fill(FIRST + i), from PEER; SEED is printed
 * on a failure. */
static inline void test_xdp_recv_n(rcp_nic *b, int n, uint64_t first, const uint32_t *lens,
                                   uint32_t len, int peer, uint64_t seed)
{
	struct rcp_nic_frame fr[32];
	int got = 0;

	while (got < n) {
		int k = rcp_nic_recv_wait(b, fr, 32, 10 * 1000000000ll);
		assert_true(k >= 0);
		if (k == 0)
			fail_msg("only %d of %d frames arrived (seed %llu)", got, n,
			         (unsigned long long)seed);
		assert_true(got + k <= n);
		for (int i = 0; i < k; i++, got++) {
			assert_int_equal(fr[i].len, lens ? lens[got] : len);
			assert_int_equal(fr[i].peer, peer);
			if (test_check(fr[i].data, fr[i].len, first + (uint64_t)got) != -1)
				fail_msg("frame %d (%u B) corrupt (seed %llu)", got, fr[i].len,
				         (unsigned long long)seed);
		}
		rcp_nic_release(b, fr, k);
	}
}

#endif
