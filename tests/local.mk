# cmocka tests.  Each program exits 77 (SKIP) with a visible "SKIP: reason"
# line when the machine lacks what it needs.
if HAVE_CMOCKA
TEST_LDADD = librcp.la $(CMOCKA_LIBS)
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)

check_PROGRAMS += tests/test_nic tests/test_shm tests/test_udp tests/test_faults
TESTS += tests/test_nic tests/test_shm tests/test_udp tests/test_faults

tests_test_nic_SOURCES = tests/test_nic.c tests/testutil.h
tests_test_nic_CFLAGS = $(TEST_CFLAGS)
tests_test_nic_LDADD = $(TEST_LDADD)
tests_test_shm_SOURCES = tests/test_shm.c tests/testutil.h
tests_test_shm_CFLAGS = $(TEST_CFLAGS)
tests_test_shm_LDADD = $(TEST_LDADD)
tests_test_udp_SOURCES = tests/test_udp.c tests/testutil.h
tests_test_udp_CFLAGS = $(TEST_CFLAGS)
tests_test_udp_LDADD = $(TEST_LDADD)
# test_faults reaches internal symbols (the spec parser): link the
# convenience objects statically.
tests_test_faults_SOURCES = tests/test_faults.c tests/testutil.h
tests_test_faults_CFLAGS = $(TEST_CFLAGS)
tests_test_faults_LDFLAGS = -static
tests_test_faults_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
# The protocol core on a simulated network (internal API: static link).
check_PROGRAMS += tests/test_rcp_sim
TESTS += tests/test_rcp_sim
tests_test_rcp_sim_SOURCES = tests/test_rcp_sim.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_sim_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_sim_LDFLAGS = -static
tests_test_rcp_sim_LDADD = $(TEST_LDADD)
endif
