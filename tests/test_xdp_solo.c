/*
 * tests/test_xdp_solo.c — the xdp nic's time alone (session 20): a waiter
 * on it spins alone 50 us past its last event before it offers the CPU,
 * not the library's 5 us (about one xdp round trip between two hosts, so
 * every slower round trip yielded: nic/xdp/xdp_int.h, "Time alone").
 *
 * The nic says so (rcp_nic_info.solo_ns), and an endpoint over it waits
 * by it: counted, not timed.  A spinning wait of 30 us on nothing ends by
 * its timeout without one yield or sleep (the endpoint took the nic's 50
 * us: with 5 us it yields past 5 us); a wait of 2 ms does give the CPU
 * away (yields, or sleeps when the CPU is crowded) past 50 us, so the
 * time alone is not "forever".  A look past 50 us always comes after the
 * 30 us timeout, so the first check cannot fail by a preemption; the
 * second is tried up to five times (a wait preempted from before 50 us to
 * past 2 ms gives nothing away).  On a veth pair inside a namespace of its
 * own (tests/test_xdp_veth.h); SKIP with the reason where root, netns or
 * XDP are missing.
 */
#include <net/if.h>

#include <rcp/nic.h>
#include <rcp/rcp.h>

#include "testutil.h"
#include "tests/test_xdp_veth.h"

static struct test_veth veth;
static rcp_ep *open_ep; /* closed by the teardown, even after a failure */

static int close_ep(void **state)
{
	(void)state;
	if (open_ep)
		rcp_ep_close(open_ep);
	open_ep = NULL;
	return 0;
}

static int never(void *arg)
{
	(void)arg;
	return 0;
}

static void t_nic_says(void **state)
{
	struct rcp_nic_info info;
	struct rcp_ep_config cfg = {.flags = RCP_EP_SPIN};
	char addr[64];
	(void)state;

	snprintf(addr, sizeof addr, "xdp:%s", veth.ifname[0]);
	assert_int_equal(rcp_ep_open(addr, &cfg, &open_ep), 0);
	assert_int_equal(rcp_nic_query(rcp_ep_nic(open_ep), &info), 0);
	assert_int_equal(info.solo_ns, 50000);
}

static void t_ep_spins_alone(void **state)
{
	struct rcp_ep_config cfg = {.flags = RCP_EP_SPIN};
	struct rcp_wait_stats st;
	char addr[64];
	int gave = 0;
	(void)state;

	snprintf(addr, sizeof addr, "xdp:%s", veth.ifname[0]);
	assert_int_equal(rcp_ep_open(addr, &cfg, &open_ep), 0);
	assert_int_equal(rcp_ep_wait_stats(open_ep, &st, 1), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(rcp_ep_wait(open_ep, never, NULL, 30000), RCP_ETIMEDOUT);
	assert_int_equal(rcp_ep_wait_stats(open_ep, &st, 1), 0);
	assert_true(st.looks > 20);
	assert_int_equal(st.yields, 0);
	assert_int_equal(st.sleeps, 0);
	for (int i = 0; i < 5 && !gave; i++) {
		assert_int_equal(rcp_ep_wait(open_ep, never, NULL, 2000000), RCP_ETIMEDOUT);
		assert_int_equal(rcp_ep_wait_stats(open_ep, &st, 1), 0);
		gave = st.yields + st.sleeps > 0;
	}
	assert_true(gave);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(t_nic_says, close_ep),
	    cmocka_unit_test_teardown(t_ep_spins_alone, close_ep),
	};
	const char *const *names = rcp_nic_backends();
	const char *why;
	char addr[64];
	rcp_nic *probe;
	int have = 0, rc;

	for (int i = 0; names[i]; i++)
		have |= !strcmp(names[i], "xdp");
	if (!have)
		test_skip_all("librcp built without the xdp backend (libxdp/libbpf missing)");
	if ((why = test_veth_make(&veth, "rcpsolo", 1500)))
		test_skip_all(why);
	snprintf(addr, sizeof addr, "xdp:%s", veth.ifname[0]);
	rc = rcp_nic_open(addr, NULL, &probe);
	if (rc == RCP_EPERM || rc == RCP_ENOTSUP) {
		test_veth_remove(&veth);
		test_skip_all("XDP attach not permitted or not supported here");
	}
	assert_int_equal(rc, 0);
	rcp_nic_close(probe);
	rc = cmocka_run_group_tests_name("nic xdp, time alone", tests, NULL, NULL);
	test_veth_remove(&veth);
	return rc;
}
