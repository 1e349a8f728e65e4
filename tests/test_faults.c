/*
 * tests/test_faults.c — the fault-injecting nic wrapper (nic/faults.c): spec
 * parsing, the wrapper's face (query, stats, forwarded operations), and
 * rcp_nic_open("udp:") with cfg->faults (skipped while the udp backend
 * is not built).
 * The loopback backend and the frames every test uses: tests/faults_test.h.
 */
#include "faults_test.h"

/* ---- spec parsing ------------------------------------------------------- */

static void t_parse_valid(void **state)
{
	struct rcpi_faults_spec s;
	g_seed = 0;

	assert_int_equal(rcpi_faults_parse("", &s), 0);
	assert_true(s.drop == 0 && s.dup == 0 && s.reorder == 0 && s.corrupt == 0 && s.delay == 0);
	assert_int_equal(s.delay_ns, 100000);
	assert_int_equal(s.seed, 1);
	assert_int_equal(rcpi_faults_parse("  ", &s), 0);
	assert_int_equal(s.seed, 1);

	const char *full[] = {
	    "drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,delay=0.01,delay_us=200,seed=7",
	    "seed=7,delay_us=200,delay=0.01,corrupt=0.01,reorder=0.05,dup=0.01,drop=0.05",
	    " drop = 0.05 , dup=1e-2,reorder=.05,corrupt=0.010,delay=0.01,delay_us=200,seed=0x7 ",
	};
	for (size_t i = 0; i < sizeof full / sizeof full[0]; i++) {
		memset(&s, 0, sizeof s);
		assert_int_equal(rcpi_faults_parse(full[i], &s), 0);
		assert_true(s.drop == 0.05 && s.dup == 0.01 && s.reorder == 0.05 &&
		            s.corrupt == 0.01 && s.delay == 0.01);
		assert_int_equal(s.delay_ns, 200000);
		assert_int_equal(s.seed, 7);
	}

	assert_int_equal(rcpi_faults_parse("drop=1,delay_us=0", &s), 0);
	assert_true(s.drop == 1.0 && s.dup == 0);
	assert_int_equal(s.delay_ns, 0);
	assert_int_equal(s.seed, 1);
	assert_int_equal(rcpi_faults_parse("corrupt=0", &s), 0);
	assert_true(s.corrupt == 0);
	assert_int_equal(rcpi_faults_parse("seed=18446744073709551615", &s), 0);
	assert_true(s.seed == UINT64_MAX);
	assert_int_equal(rcpi_faults_parse("seed=0XfFfF", &s), 0);
	assert_int_equal(s.seed, 0xffff);
	assert_int_equal(rcpi_faults_parse("seed=0", &s), 0);
	assert_int_equal(s.seed, 0);
	assert_int_equal(rcpi_faults_parse("delay_us=60000000", &s), 0);
	assert_int_equal(s.delay_ns, 60000000000ull);
	assert_int_equal(rcpi_faults_parse("delay=1", &s), 0);
	assert_true(s.delay == 1.0);
	assert_int_equal(rcpi_faults_parse(NULL, &s), RCP_EINVAL);
	assert_int_equal(rcpi_faults_parse("drop=0.1", NULL), RCP_EINVAL);
}

/* Runs the parser with stderr captured; returns what was logged. */
static const char *parse_captured(const char *spec, struct rcpi_faults_spec *s, int *rc)
{
	static char out[1024];
	FILE *tmp = tmpfile();
	int saved;
	size_t n;

	assert_non_null(tmp);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	*rc = rcpi_faults_parse(spec, s);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof out - 1, tmp);
	out[n] = 0;
	fclose(tmp);
	return out;
}

static void t_parse_invalid(void **state)
{
	/* spec, a piece the warning must quote */
	static const char *const bad[][2] = {
	    {"drop", "'drop' is not key=value"},
	    {"drop=", "'drop='"},
	    {"=0.1", "unknown key ''"},
	    {"drop=abc", "'drop=abc' is not a valid number"},
	    {"drop=0.1x", "'drop=0.1x'"},
	    {"drop=0.1;dup=0.2", "'drop=0.1;dup=0.2'"},
	    {"drop=0.5 0.5", "'drop=0.5 0.5'"},
	    {"drop=-0.1", "'drop=-0.1' out of range"},
	    {"drop=1.5", "'drop=1.5' out of range"},
	    {"dup=nan", "'dup=nan' out of range"},
	    {"reorder=inf", "'reorder=inf' out of range"},
	    {"corrupt=2", "'corrupt=2' out of range"},
	    {"delay=-1e-9", "'delay=-1e-9' out of range"},
	    {"bogus=1", "unknown key 'bogus'"},
	    {"Drop=0.1", "unknown key 'Drop'"},
	    {"drop=0.1,dropp=0.1", "unknown key 'dropp'"},
	    {"delay_us=-5", "'delay_us=-5' is not a valid number"},
	    {"delay_us=1.5", "'delay_us=1.5'"},
	    {"delay_us=60000001", "'delay_us=60000001' out of range"},
	    {"delay_us=99999999999999999999999", "'delay_us=99999999999999999999999' out of range"},
	    {"seed=abc", "'seed=abc'"},
	    {"seed=-1", "'seed=-1'"},
	    {"seed=+1", "'seed=+1'"},
	    {"seed=0x", "'seed=0x'"},
	    {"seed=0xg1", "'seed=0xg1'"},
	    {"seed=18446744073709551616", "'seed=18446744073709551616' out of range"},
	    {"seed=1111111111111111111111111111111111111111111111111111111111111111111111",
	     "is not a valid number"},
	    {"drop=0.1,,dup=0.1", "empty item"},
	    {"drop=0.1,", "empty item"},
	    {",", "empty item"},
	    {"drop=0.1,drop=0.2", "'drop' given twice"},
	    {"drop=0.1,dup=0.1,seed=1,reorder=7", "'reorder=7' out of range"},
	};
	int saved_level = rcpi_log_level;

	g_seed = 0;
	rcpi_log_level = RCPI_LOG_WARN; /* whatever RCP_LOG says */
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct rcpi_faults_spec s, ref;
		const char *msg;
		int rc;

		memset(&s, 0x5a, sizeof s);
		ref = s;
		msg = parse_captured(bad[i][0], &s, &rc);
		CHECK(rc == RCP_EINVAL, "\"%s\" gave %d", bad[i][0], rc);
		CHECK(!memcmp(&s, &ref, sizeof s), "\"%s\": output written on error", bad[i][0]);
		CHECK(strstr(msg, bad[i][1]) != NULL, "\"%s\": warning \"%s\" lacks \"%s\"",
		      bad[i][0], msg, bad[i][1]);
	}
	rcpi_log_level = saved_level;
}

/* A bad spec fails the wrap and leaves INNER to the caller. */
static void t_wrap_bad_spec(void **state)
{
	struct lb *lb = lb_open();
	rcp_nic *nic = (rcp_nic *)1;
	int saved_level = rcpi_log_level;

	g_seed = 0;
	rcpi_log_level = RCPI_LOG_ERROR; /* the warning is tested above */
	assert_int_equal(rcpi_nic_faults_wrap(&lb->base, "drop=2", &nic), RCP_EINVAL);
	rcpi_log_level = saved_level;
	assert_null(nic);
	assert_int_equal(rcpi_nic_faults_wrap(NULL, "drop=0", &nic), RCP_EINVAL);
	assert_int_equal(rcpi_nic_faults_wrap(&lb->base, NULL, &nic), RCP_EINVAL);
	lb_close(&lb->base); /* still ours: ASan reports a leak or a double free */
}

/* ---- the wrapper's face: query, stats, forwarded operations ------------ */

static void t_query_and_forwarding(void **state)
{
	static const struct {
		const char *spec;
		uint32_t gone;
	} cases[] = {
	    {"", 0},
	    {"seed=3", 0},
	    {"drop=0.1", RCP_NIC_CAP_RELIABLE},
	    {"dup=0.1", RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_ORDERED},
	    {"reorder=0.1", RCP_NIC_CAP_ORDERED},
	    {"delay=0.1", RCP_NIC_CAP_ORDERED},
	    {"corrupt=0.1", RCP_NIC_CAP_CHECKED},
	    {"drop=0.1,reorder=0.1,corrupt=0.1",
	     RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_CHECKED},
	};
	/* SHARED_SEG survives every fault (nic/faults.c, Capabilities). */
	const uint32_t all = RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_CHECKED |
	                     RCP_NIC_CAP_SAME_HOST | RCP_NIC_CAP_SHARED_SEG;
	struct rcp_nic_info info;
	struct rcp_nic_stats st;
	unsigned char big[LB_MTU + 1], blob[RCP_NIC_ADDR_MAX], rkey[8];
	char str[RCP_NIC_ADDRSTR_MAX];
	struct iovec iov = {big, sizeof big};
	size_t bloblen = sizeof blob;
	rcp_nic_mr *mr = (rcp_nic_mr *)1;
	struct lb *lb;
	rcp_nic *nic;
	int peer = -1;

	g_seed = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		nic = wrap_lb(cases[i].spec, NULL);
		assert_int_equal(rcp_nic_query(nic, &info), 0);
		assert_string_equal(info.backend, "faults+loop");
		assert_int_equal(info.mtu, LB_MTU);
		assert_int_equal(info.rx_frames, LB_CAP);
		CHECK(info.caps == (all & ~cases[i].gone), "\"%s\": caps %#x", cases[i].spec,
		      info.caps);
		rcp_nic_close(nic);
	}

	nic = wrap_lb("seed=5", &lb);
	assert_int_equal(rcp_nic_addr_str(nic, str, sizeof str), 0);
	assert_string_equal(str, "loop:0");
	assert_int_equal(rcp_nic_addr_blob(nic, blob, &bloblen), 0);
	assert_int_equal(bloblen, 2);
	assert_int_equal(rcp_nic_peer_add(nic, blob, bloblen, &peer), 0);
	assert_int_equal(peer, 0);
	assert_int_equal(rcp_nic_peer_add_str(nic, "loop:3", &peer), 0);
	assert_int_equal(peer, 3);
	assert_int_equal(rcp_nic_peer_add_str(nic, "udp:1.2.3.4:5", &peer), RCP_EADDR);
	assert_int_equal(rcp_nic_peer_remove(nic, 2), 0);
	assert_int_equal(lb->removed, 2);
	assert_int_equal(rcp_nic_fd(nic), lb->fds[0]);
	assert_int_equal(rcp_nic_mr_reg(nic, big, sizeof big, RCP_NIC_ACCESS_READ, &mr),
	                 RCP_ENOTSUP);
	assert_null(mr);
	assert_int_equal(rcp_nic_get(nic, 0, big, 8, rkey, sizeof rkey, 0), RCP_ENOTSUP);
	assert_int_equal(rcp_nic_put(nic, 0, big, 8, rkey, sizeof rkey, 0), RCP_ENOTSUP);
	assert_int_equal(rcp_nic_send(nic, 0, &iov, 1, 0), RCP_EMSGSIZE);
	assert_int_equal(rcp_nic_send(nic, LB_PEERS, &iov, 1, 0), RCP_EMSGSIZE);
	iov.iov_len = LB_MTU;
	assert_int_equal(rcp_nic_send(nic, LB_PEERS, &iov, 1, 0), RCP_EPEER);
	assert_int_equal(rcp_nic_send(nic, 1, &iov, 1, 0), 0);
	iov.iov_len = 0;
	assert_int_equal(rcp_nic_send(nic, 1, &iov, 1, 0), 0); /* empty frame */
	assert_int_equal(rcp_nic_arm(nic), RCP_EAGAIN);        /* frames waiting */

	/* The backend's counters show through the wrapper. */
	st = stats_of(nic);
	assert_int_equal(st.tx_frames, 2);
	assert_int_equal(st.tx_bytes, LB_MTU);
	assert_int_equal(st.rx_frames, 0);
	{
		struct rcp_nic_frame fr[4];
		int n = rcp_nic_recv(nic, fr, 4);
		assert_int_equal(n, 2);
		assert_int_equal(fr[0].len, LB_MTU);
		assert_int_equal(fr[0].peer, 1);
		assert_int_equal(fr[1].len, 0);
		rcp_nic_release(nic, fr, n);
	}
	st = stats_of(nic);
	assert_int_equal(st.rx_frames, 2);
	assert_int_equal(st.rx_bytes, LB_MTU);
	assert_int_equal(
	    st.f_dropped + st.f_duplicated + st.f_reordered + st.f_corrupted + st.f_delayed, 0);
	assert_int_equal(rcp_nic_arm(nic), 0);
	rcp_nic_close(nic);
}

/* ---- through rcp_nic_open ----------------------------------------------- */

static void t_open_udp_with_faults(void **state)
{
	struct rcp_nic_config cfg = {0};
	struct rcp_nic_info info;
	struct rcp_nic_stats st;
	char spec[128], me[RCP_NIC_ADDRSTR_MAX];
	unsigned char buf[256];
	struct rxlog l;
	rcp_nic *nic = NULL;
	const uint32_t n = 2000;
	int peer, rc;

	g_seed = test_seed(0x5eed0010);
	/* The placeholder table has no open(): the dispatcher would call NULL. */
	if (!rcpi_nic_udp_ops.open) {
		print_message("SKIP: udp backend not built yet\n");
		skip();
	}
	snprintf(spec, sizeof spec, "drop=0.1,dup=0.1,reorder=0.2,corrupt=0.1,seed=%llu",
	         (unsigned long long)g_seed);
	cfg.faults = spec;
	rc = rcp_nic_open("udp:", &cfg, &nic);
	if (rc) {
		print_message("SKIP: rcp_nic_open(\"udp:\"): %s\n", rcp_strerror(rc));
		skip();
	}
	assert_int_equal(rcp_nic_query(nic, &info), 0);
	assert_string_equal(info.backend, "faults+udp");
	CHECK(!(info.caps & (RCP_NIC_CAP_ORDERED | RCP_NIC_CAP_RELIABLE | RCP_NIC_CAP_CHECKED)),
	      "caps %#x", info.caps);
	assert_int_equal(rcp_nic_addr_str(nic, me, sizeof me), 0);
	rc = rcp_nic_peer_add_str(nic, me, &peer);
	CHECK(rc == 0, "peer_add_str(%s): %s", me, rcp_strerror(rc));

	log_init(&l, n, sizeof buf);
	for (uint32_t id = 0; id < n;) {
		uint64_t deadline;
		for (int i = 0; i < 32 && id < n; i++, id++) {
			struct iovec iov = {buf, frame_len(id, sizeof buf)};
			build_frame(buf, id, iov.iov_len);
			while ((rc = rcp_nic_send(nic, peer, &iov, 1, 0)) == RCP_EAGAIN)
				drain(nic, &l);
			CHECK(rc == 0, "send: %s", rcp_strerror(rc));
		}
		while ((rc = rcp_nic_flush(nic)) == RCP_EAGAIN)
			drain(nic, &l);
		CHECK(rc == 0, "flush: %s", rcp_strerror(rc));
		/* Everything handed to the socket must come back. */
		deadline = rcpi_now_ns() + 5000000000ull;
		while (l.arrivals + l.bad < stats_of(nic).tx_frames && rcpi_now_ns() < deadline) {
			(void)rcp_nic_wait(nic, 10000000, -1);
			drain(nic, &l);
		}
	}
	st = stats_of(nic);
	CHECK(l.bad == 0 && l.flip_mismatch == 0, "garbled frames");
	CHECK(l.arrivals == st.tx_frames, "%llu of %llu frames arrived",
	      (unsigned long long)l.arrivals, (unsigned long long)st.tx_frames);
	CHECK(l.distinct + st.f_dropped == n, "distinct %llu + dropped %llu != %u",
	      (unsigned long long)l.distinct, (unsigned long long)st.f_dropped, n);
	CHECK(l.arrivals - l.distinct == st.f_duplicated, "f_duplicated");
	CHECK(l.corrupted_ids == st.f_corrupted, "f_corrupted");
	CHECK(st.f_dropped && st.f_duplicated && st.f_corrupted, "a fault never fired");
	rcp_nic_close(nic);
	log_free(&l);

	/* A bad spec fails the open (and closes the socket: ASan/valgrind). */
	cfg.faults = "drop=2";
	{
		int saved = rcpi_log_level;
		rcpi_log_level = RCPI_LOG_ERROR;
		rc = rcp_nic_open("udp:", &cfg, &nic);
		rcpi_log_level = saved;
	}
	assert_int_equal(rc, RCP_EINVAL);
	assert_null(nic);

	/* RCP_FAULTS applies when cfg->faults is NULL; "" turns it off. */
	assert_int_equal(setenv("RCP_FAULTS", "drop=0.5", 1), 0);
	cfg.faults = "";
	assert_int_equal(rcp_nic_open("udp:", &cfg, &nic), 0);
	assert_int_equal(rcp_nic_query(nic, &info), 0);
	assert_string_equal(info.backend, "udp");
	rcp_nic_close(nic);
	assert_int_equal(rcp_nic_open("udp:", NULL, &nic), 0);
	assert_int_equal(rcp_nic_query(nic, &info), 0);
	assert_string_equal(info.backend, "faults+udp");
	rcp_nic_close(nic);
	unsetenv("RCP_FAULTS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_parse_valid),          cmocka_unit_test(t_parse_invalid),
	    cmocka_unit_test(t_wrap_bad_spec),        cmocka_unit_test(t_query_and_forwarding),
	    cmocka_unit_test(t_open_udp_with_faults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
