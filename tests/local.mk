# cmocka tests.  Each program exits 77 (SKIP) with a visible "SKIP: reason"
# line when the machine lacks what it needs.
if HAVE_CMOCKA
TEST_LDADD = librcp.la $(CMOCKA_LIBS)
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)

check_PROGRAMS += tests/test_nic tests/test_shm tests/test_udp tests/test_faults
TESTS += tests/test_nic tests/test_shm tests/test_udp tests/test_faults

tests_test_nic_SOURCES = tests/test_nic.c tests/testutil.h tests/test_xdp_veth.h common/sh.h
tests_test_nic_CFLAGS = $(TEST_CFLAGS)
tests_test_nic_LDADD = $(TEST_LDADD)
tests_test_shm_SOURCES = tests/test_shm.c tests/shm_test.h tests/testutil.h
tests_test_shm_CFLAGS = $(TEST_CFLAGS)
tests_test_shm_LDADD = $(TEST_LDADD)
# the shm backend by topic (what they share: tests/shm_test.h)
check_PROGRAMS += tests/test_shm_frames tests/test_shm_procs tests/test_shm_rma
TESTS += tests/test_shm_frames tests/test_shm_procs tests/test_shm_rma
tests_test_shm_frames_SOURCES = tests/test_shm_frames.c tests/shm_test.h tests/testutil.h
tests_test_shm_frames_CFLAGS = $(TEST_CFLAGS)
tests_test_shm_frames_LDADD = $(TEST_LDADD)
tests_test_shm_procs_SOURCES = tests/test_shm_procs.c tests/shm_test.h tests/testutil.h
tests_test_shm_procs_CFLAGS = $(TEST_CFLAGS)
tests_test_shm_procs_LDADD = $(TEST_LDADD)
tests_test_shm_rma_SOURCES = tests/test_shm_rma.c tests/shm_test.h tests/testutil.h
tests_test_shm_rma_CFLAGS = $(TEST_CFLAGS)
tests_test_shm_rma_LDADD = $(TEST_LDADD)
tests_test_udp_SOURCES = tests/test_udp.c tests/udp_test.h tests/testutil.h
tests_test_udp_CFLAGS = $(TEST_CFLAGS)
tests_test_udp_LDADD = $(TEST_LDADD)
# the udp backend by topic (what they share: tests/udp_test.h)
check_PROGRAMS += tests/test_udp_data tests/test_udp_net
TESTS += tests/test_udp_data tests/test_udp_net
tests_test_udp_data_SOURCES = tests/test_udp_data.c tests/udp_test.h tests/testutil.h
tests_test_udp_data_CFLAGS = $(TEST_CFLAGS)
tests_test_udp_data_LDADD = $(TEST_LDADD)
tests_test_udp_net_SOURCES = tests/test_udp_net.c tests/udp_test.h tests/testutil.h
tests_test_udp_net_CFLAGS = $(TEST_CFLAGS)
tests_test_udp_net_LDADD = $(TEST_LDADD)
# test_faults reaches internal symbols (the spec parser): link the
# convenience objects statically.
tests_test_faults_SOURCES = tests/test_faults.c tests/faults_test.h tests/testutil.h
tests_test_faults_CFLAGS = $(TEST_CFLAGS)
tests_test_faults_LDFLAGS = -static
tests_test_faults_LDADD = $(TEST_LDADD)
# the faults wrapper by topic (what they share: tests/faults_test.h)
check_PROGRAMS += tests/test_faults_rates tests/test_faults_delay
TESTS += tests/test_faults_rates tests/test_faults_delay
tests_test_faults_rates_SOURCES = tests/test_faults_rates.c tests/faults_test.h tests/testutil.h
tests_test_faults_rates_CFLAGS = $(TEST_CFLAGS)
tests_test_faults_rates_LDFLAGS = -static
tests_test_faults_rates_LDADD = $(TEST_LDADD)
tests_test_faults_delay_SOURCES = tests/test_faults_delay.c tests/faults_test.h tests/testutil.h
tests_test_faults_delay_CFLAGS = $(TEST_CFLAGS)
tests_test_faults_delay_LDFLAGS = -static
tests_test_faults_delay_LDADD = $(TEST_LDADD)
# reliable multicast (rcp/mcastnet.c) on loopback
check_PROGRAMS += tests/test_mcastnet
TESTS += tests/test_mcastnet
tests_test_mcastnet_SOURCES = tests/test_mcastnet.c tests/testutil.h
tests_test_mcastnet_CFLAGS = $(TEST_CFLAGS)
tests_test_mcastnet_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
if HAVE_SODIUM
# The job key (nic/auth.c).
check_PROGRAMS += tests/test_auth
TESTS += tests/test_auth
tests_test_auth_SOURCES = tests/test_auth.c tests/testutil.h
tests_test_auth_CFLAGS = $(TEST_CFLAGS)
tests_test_auth_LDADD = $(TEST_LDADD)
endif
endif

if HAVE_CMOCKA
if HAVE_XDP
# The AF_XDP backend on a veth pair between two namespaces of its own
# (SKIP without root or netns).
check_PROGRAMS += tests/test_xdp
TESTS += tests/test_xdp
tests_test_xdp_SOURCES = tests/test_xdp.c tests/testutil.h tests/test_xdp_veth.h common/sh.h
tests_test_xdp_CFLAGS = $(TEST_CFLAGS)
tests_test_xdp_LDADD = $(TEST_LDADD)
# ... and at link MTU 9000: frames over several UMEM buffers (multi-buffer)
check_PROGRAMS += tests/test_xdp_jumbo
TESTS += tests/test_xdp_jumbo
tests_test_xdp_jumbo_SOURCES = tests/test_xdp_jumbo.c tests/testutil.h tests/test_xdp_veth.h common/sh.h
tests_test_xdp_jumbo_CFLAGS = $(TEST_CFLAGS)
tests_test_xdp_jumbo_LDADD = $(TEST_LDADD)
# ... its rings and open, white box (session 21: issue 21's audit)
check_PROGRAMS += tests/test_xdp_rings
TESTS += tests/test_xdp_rings
tests_test_xdp_rings_SOURCES = tests/test_xdp_rings.c tests/testutil.h tests/test_xdp_veth.h common/sh.h
tests_test_xdp_rings_CFLAGS = $(TEST_CFLAGS)
tests_test_xdp_rings_LDADD = $(TEST_LDADD)
# ... and the xdp nic's time alone, as an endpoint's waits use it
check_PROGRAMS += tests/test_xdp_solo
TESTS += tests/test_xdp_solo
tests_test_xdp_solo_SOURCES = tests/test_xdp_solo.c tests/testutil.h tests/test_xdp_veth.h common/sh.h
tests_test_xdp_solo_CFLAGS = $(TEST_CFLAGS)
tests_test_xdp_solo_LDADD = $(TEST_LDADD)
# RCP_TRANSPORT=xdp between two rcp-cluster hosts: relinked PVM (pvmt
# transport-hosts) and RPC calls (cluster-xdp-rpc).  Root only; else SKIP.
check_PROGRAMS += tests/cluster-xdp-rpc
tests_cluster_xdp_rpc_SOURCES = tests/cluster_xdp_rpc.c
tests_cluster_xdp_rpc_LDADD = librcp.la
TESTS += tests/cluster_xdp.sh
EXTRA_DIST += tests/cluster_xdp.sh
endif
endif

if HAVE_CMOCKA
# Both directions, random sizes, late receives, faults (tests/soak.c).
check_PROGRAMS += tests/soak
TESTS += tests/soak
tests_soak_SOURCES = tests/soak.c tests/testutil.h
tests_soak_CFLAGS = $(TEST_CFLAGS)
tests_soak_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
# Frame format helpers (internal API: static link).
check_PROGRAMS += tests/test_wire
TESTS += tests/test_wire
tests_test_wire_SOURCES = tests/test_wire.c tests/testutil.h
tests_test_wire_CFLAGS = $(TEST_CFLAGS)
tests_test_wire_LDFLAGS = -static
tests_test_wire_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
# The core's timer heap against a brute force (internal API: static link).
check_PROGRAMS += tests/test_heap
TESTS += tests/test_heap
tests_test_heap_SOURCES = tests/test_heap.c tests/testutil.h
tests_test_heap_CFLAGS = $(TEST_CFLAGS)
tests_test_heap_LDFLAGS = -static
tests_test_heap_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
# The protocol core on a simulated network (internal API: static link).
check_PROGRAMS += tests/test_rcp_sim
TESTS += tests/test_rcp_sim
tests_test_rcp_sim_SOURCES = tests/test_rcp_sim.c tests/rcp_sim_test.h tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_sim_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_sim_LDFLAGS = -static
tests_test_rcp_sim_LDADD = $(TEST_LDADD)
# the simulated network by topic (what they share: tests/rcp_sim_test.h)
check_PROGRAMS += tests/test_rcp_sim_hostile tests/test_rcp_sim_echo tests/test_rcp_sim_acks
TESTS += tests/test_rcp_sim_hostile tests/test_rcp_sim_echo tests/test_rcp_sim_acks
tests_test_rcp_sim_hostile_SOURCES = tests/test_rcp_sim_hostile.c tests/rcp_sim_test.h tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_sim_hostile_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_sim_hostile_LDFLAGS = -static
tests_test_rcp_sim_hostile_LDADD = $(TEST_LDADD)
tests_test_rcp_sim_echo_SOURCES = tests/test_rcp_sim_echo.c tests/rcp_sim_test.h tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_sim_echo_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_sim_echo_LDFLAGS = -static
tests_test_rcp_sim_echo_LDADD = $(TEST_LDADD)
tests_test_rcp_sim_acks_SOURCES = tests/test_rcp_sim_acks.c tests/rcp_sim_test.h tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_sim_acks_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_sim_acks_LDFLAGS = -static
tests_test_rcp_sim_acks_LDADD = $(TEST_LDADD)

# The small-message path (rcp/isend.c, SMALL SENDS), on the simulator.
check_PROGRAMS += tests/test_rcp_small
TESTS += tests/test_rcp_small
tests_test_rcp_small_SOURCES = tests/test_rcp_small.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_small_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_small_LDFLAGS = -static
tests_test_rcp_small_LDADD = $(TEST_LDADD)
# where a send slot keeps a copied payload (session 21, rcp/chan.h SLOT STORAGE)
check_PROGRAMS += tests/test_rcp_slots
TESTS += tests/test_rcp_slots
tests_test_rcp_slots_SOURCES = tests/test_rcp_slots.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_slots_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_slots_LDFLAGS = -static
tests_test_rcp_slots_LDADD = $(TEST_LDADD)
# The READY handshake when a promise and an RTS cross.
check_PROGRAMS += tests/test_rcp_ready
TESTS += tests/test_rcp_ready
tests_test_rcp_ready_SOURCES = tests/test_rcp_ready.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_ready_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_ready_LDFLAGS = -static
tests_test_rcp_ready_LDADD = $(TEST_LDADD)

# The timer heap kept exact where a channel's work ends by a cancel.
check_PROGRAMS += tests/test_rcp_timers
TESTS += tests/test_rcp_timers
tests_test_rcp_timers_SOURCES = tests/test_rcp_timers.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_timers_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_timers_LDFLAGS = -static
tests_test_rcp_timers_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_rcp_loss
TESTS += tests/test_rcp_loss
tests_test_rcp_loss_SOURCES = tests/test_rcp_loss.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_loss_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_loss_LDFLAGS = -static
tests_test_rcp_loss_LDADD = $(TEST_LDADD)

# Bounds on unexpected messages, linger on close (issue 18: 4, 11).
check_PROGRAMS += tests/test_rcp_limits
TESTS += tests/test_rcp_limits
tests_test_rcp_limits_SOURCES = tests/test_rcp_limits.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_limits_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_limits_LDFLAGS = -static
tests_test_rcp_limits_LDADD = $(TEST_LDADD)

# A conversation that starts again takes none of the old one's frames
# (issue 18; rcp/chan.c, CHANNELS).
check_PROGRAMS += tests/test_rcp_stale
TESTS += tests/test_rcp_stale
tests_test_rcp_stale_SOURCES = tests/test_rcp_stale.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_stale_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_stale_LDFLAGS = -static
tests_test_rcp_stale_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_rcp_cross
TESTS += tests/test_rcp_cross
tests_test_rcp_cross_SOURCES = tests/test_rcp_cross.c tests/testutil.h
tests_test_rcp_cross_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_cross_LDADD = $(TEST_LDADD)
endif

# libFuzzer targets (docs/fuzzing.md).  Built with clang when it can link
# -fsanitize=fuzzer: the library's sources are compiled once, instrumented,
# into tests/fuzz-lib.a; each target links it.  tests/fuzz_seed writes a
# seed corpus from the current code (real frames, scripts, handles), so the
# seeds follow the wire format.  make check runs each target for seconds.
FUZZ_TESTS = tests/fuzz_wire.sh tests/fuzz_core.sh tests/fuzz_bulk.sh tests/fuzz_rpc.sh \
	tests/fuzz_udp.sh tests/fuzz_shm.sh
FUZZ_BINS = tests/fuzz_wire tests/fuzz_core tests/fuzz_bulk tests/fuzz_rpc tests/fuzz_udp \
	tests/fuzz_shm
EXTRA_DIST += tests/fuzz_wire.c tests/fuzz_core.c tests/fuzz_bulk.c tests/fuzz_rpc.c \
	tests/fuzz_udp.c tests/fuzz_shm.c tests/fuzz_seed.c tests/fuzz_guard.h tests/fuzz_run.sh \
	$(FUZZ_TESTS) tests/corpus
TESTS += $(FUZZ_TESTS)
if HAVE_FUZZER
FUZZ_CFLAGS = -g -O1 -std=c11 -D_GNU_SOURCE -I$(top_srcdir)/include -I$(top_srcdir) -I$(top_builddir)
FUZZ_LINK = $(CLANG) $(FUZZ_CFLAGS) -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined
FUZZ_DEPS = $(top_srcdir)/tests/fuzz_guard.h tests/fuzz-lib.a
check_SCRIPTS = $(FUZZ_BINS) tests/fuzz_seed
tests/fuzz-lib.a: $(librcp_la_SOURCES)
	$(AM_V_GEN)rm -rf tests/fuzz-obj && mkdir -p tests/fuzz-obj && \
	for f in $(librcp_la_SOURCES); do case $$f in *.c) \
	  $(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $(top_srcdir)/$$f \
	    -o tests/fuzz-obj/`echo $$f | tr / _`.o || exit 1;; esac; done && \
	rm -f $@ && ar rcs $@ tests/fuzz-obj/*.o
tests/fuzz_wire: $(top_srcdir)/tests/fuzz_wire.c $(FUZZ_DEPS)
	$(AM_V_CC)$(FUZZ_LINK) $(top_srcdir)/tests/fuzz_wire.c tests/fuzz-lib.a -o $@ -pthread $(LIBS) -lm
tests/fuzz_core: $(top_srcdir)/tests/fuzz_core.c $(FUZZ_DEPS)
	$(AM_V_CC)$(FUZZ_LINK) $(top_srcdir)/tests/fuzz_core.c tests/fuzz-lib.a -o $@ -pthread $(LIBS) -lm
tests/fuzz_bulk: $(top_srcdir)/tests/fuzz_bulk.c $(FUZZ_DEPS)
	$(AM_V_CC)$(FUZZ_LINK) $(top_srcdir)/tests/fuzz_bulk.c tests/fuzz-lib.a -o $@ -pthread $(LIBS) -lm
tests/fuzz_rpc: $(top_srcdir)/tests/fuzz_rpc.c $(FUZZ_DEPS)
	$(AM_V_CC)$(FUZZ_LINK) $(top_srcdir)/tests/fuzz_rpc.c tests/fuzz-lib.a -o $@ -pthread $(LIBS) -lm
tests/fuzz_udp: $(top_srcdir)/tests/fuzz_udp.c $(FUZZ_DEPS)
	$(AM_V_CC)$(FUZZ_LINK) $(top_srcdir)/tests/fuzz_udp.c tests/fuzz-lib.a -o $@ -pthread $(LIBS) -lm
tests/fuzz_shm: $(top_srcdir)/tests/fuzz_shm.c $(FUZZ_DEPS)
	$(AM_V_CC)$(FUZZ_LINK) $(top_srcdir)/tests/fuzz_shm.c tests/fuzz-lib.a -o $@ -pthread $(LIBS) -lm
# The seed writer is an ordinary program (no libFuzzer main).
tests/fuzz_seed: $(top_srcdir)/tests/fuzz_seed.c $(top_srcdir)/tests/sim.c $(FUZZ_DEPS)
	$(AM_V_CC)$(CLANG) $(FUZZ_CFLAGS) -Wall -Wextra -Werror -fsanitize=fuzzer-no-link,address,undefined \
	  $(top_srcdir)/tests/fuzz_seed.c $(top_srcdir)/tests/sim.c tests/fuzz-lib.a -o $@ -pthread $(LIBS) -lm
CLEANFILES += $(FUZZ_BINS) tests/fuzz_seed tests/fuzz-lib.a
clean-local: clean-fuzz
clean-fuzz:
	rm -rf tests/fuzz-obj tests/fuzz-*-crash-* tests/fuzz-*-timeout-* tests/fuzz-*-oom-* \
	  tests/fuzz-*-leak-*
.PHONY: clean-fuzz
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_rcp
TESTS += tests/test_rcp
tests_test_rcp_SOURCES = tests/test_rcp.c tests/rcp_test.h tests/testutil.h
tests_test_rcp_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_LDADD = $(TEST_LDADD)
# channels between real endpoints by topic (what they share: tests/rcp_test.h)
check_PROGRAMS += tests/test_rcp_api tests/test_rcp_handshake
TESTS += tests/test_rcp_api tests/test_rcp_handshake
tests_test_rcp_api_SOURCES = tests/test_rcp_api.c tests/rcp_test.h tests/testutil.h
tests_test_rcp_api_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_api_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_rcp_gather
TESTS += tests/test_rcp_gather
tests_test_rcp_gather_SOURCES = tests/test_rcp_gather.c tests/rcp_test.h tests/testutil.h
tests_test_rcp_gather_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_gather_LDADD = $(TEST_LDADD)
tests_test_rcp_handshake_SOURCES = tests/test_rcp_handshake.c tests/rcp_test.h tests/testutil.h
tests_test_rcp_handshake_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_handshake_LDADD = $(TEST_LDADD)

check_PROGRAMS += tests/test_rcp_cb
TESTS += tests/test_rcp_cb
tests_test_rcp_cb_SOURCES = tests/test_rcp_cb.c tests/testutil.h
tests_test_rcp_cb_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_cb_LDADD = $(TEST_LDADD)
endif

TESTS += tests/check_config_doc.sh
EXTRA_DIST += tests/check_config_doc.sh

TESTS += tests/check_exports.sh
EXTRA_DIST += tests/check_exports.sh

# Capabilities, not names (issue 19): no layer above nic/ compares a
# backend's name.
TESTS += tests/check_backend_names.sh
EXTRA_DIST += tests/check_backend_names.sh

# Docs true to the code (issue 19 item 6): every name and file a design doc
# mentions in backticks exists in the tree.
TESTS += tests/check_doc_names.sh
EXTRA_DIST += tests/check_doc_names.sh

if HAVE_CMOCKA
check_PROGRAMS += tests/test_rpc_proc tests/test_rpc
TESTS += tests/test_rpc_proc tests/test_rpc
tests_test_rpc_proc_SOURCES = tests/test_rpc_proc.c tests/testutil.h
tests_test_rpc_proc_CFLAGS = $(TEST_CFLAGS)
tests_test_rpc_proc_LDADD = $(TEST_LDADD) -lm
tests_test_rpc_SOURCES = tests/test_rpc.c tests/testutil.h
tests_test_rpc_CFLAGS = $(TEST_CFLAGS)
tests_test_rpc_LDADD = $(TEST_LDADD)
# rpc batches: several requests/responses to one message, checked whole
check_PROGRAMS += tests/test_rpc_batch
TESTS += tests/test_rpc_batch
tests_test_rpc_batch_SOURCES = tests/test_rpc_batch.c tests/testutil.h
tests_test_rpc_batch_CFLAGS = $(TEST_CFLAGS)
tests_test_rpc_batch_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
# bulk/: handles, owner checks, transfers between processes.
check_PROGRAMS += tests/test_bulk
TESTS += tests/test_bulk
tests_test_bulk_SOURCES = tests/test_bulk.c tests/bulk_test.h tests/testutil.h
tests_test_bulk_CFLAGS = $(TEST_CFLAGS)
tests_test_bulk_LDADD = $(TEST_LDADD)
# bulk/ by topic (what they share: tests/bulk_test.h)
check_PROGRAMS += tests/test_bulk_ops tests/test_bulk_xfer
TESTS += tests/test_bulk_ops tests/test_bulk_xfer
tests_test_bulk_ops_SOURCES = tests/test_bulk_ops.c tests/bulk_test.h tests/testutil.h
tests_test_bulk_ops_CFLAGS = $(TEST_CFLAGS)
tests_test_bulk_ops_LDADD = $(TEST_LDADD)
tests_test_bulk_xfer_SOURCES = tests/test_bulk_xfer.c tests/bulk_test.h tests/testutil.h
tests_test_bulk_xfer_CFLAGS = $(TEST_CFLAGS)
tests_test_bulk_xfer_LDADD = $(TEST_LDADD)
endif

# Every test runs under tests/driver.sh: one result per cmocka case and TAP
# line (so make check's summary counts them all), a time limit per test, and
# no process or /dev/shm segment left behind (see the script's header).
LOG_DRIVER = $(SHELL) $(top_srcdir)/tests/driver.sh
EXTRA_DIST += tests/driver.sh tests/check_driver.sh tests/check_gitignore.sh
TESTS += tests/check_driver.sh tests/check_gitignore.sh

if HAVE_CMOCKA
# rpc/rfp.c: remote-fetch segments of another uid, mode or size refused.
check_PROGRAMS += tests/test_rfp_owner
TESTS += tests/test_rfp_owner
tests_test_rfp_owner_SOURCES = tests/test_rfp_owner.c tests/testutil.h
tests_test_rfp_owner_CFLAGS = $(TEST_CFLAGS)
tests_test_rfp_owner_LDADD = $(TEST_LDADD)
endif

# The one wait policy (common/wait.c), on a fake clock: counted, not timed.
check_PROGRAMS += tests/test_wait
TESTS += tests/test_wait
tests_test_wait_SOURCES = tests/test_wait.c tests/testutil.h
tests_test_wait_CFLAGS = $(TEST_CFLAGS)
tests_test_wait_LDFLAGS = -static
tests_test_wait_LDADD = $(TEST_LDADD)

# Where RMA starts on a crowded CPU (rcpc_set_crowded), on the simulator.
check_PROGRAMS += tests/test_rcp_crowded
TESTS += tests/test_rcp_crowded
tests_test_rcp_crowded_SOURCES = tests/test_rcp_crowded.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_crowded_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_crowded_LDFLAGS = -static
tests_test_rcp_crowded_LDADD = $(TEST_LDADD)

if HAVE_CMOCKA
if HAVE_VERBS
# The verbs backend (nic/verbs/) on a model of an HCA (tests/verbs_mock.c);
# internal API (the api table): static link.
check_PROGRAMS += tests/test_verbs
TESTS += tests/test_verbs
tests_test_verbs_SOURCES = tests/test_verbs.c tests/verbs_mock.c tests/verbs_mock.h tests/verbs_test.h tests/testutil.h \
	tests/verbs_mock_rc.c tests/verbs_mock_mc.c tests/verbs_mock_int.h
tests_test_verbs_CFLAGS = $(TEST_CFLAGS)
tests_test_verbs_LDFLAGS = -static
tests_test_verbs_LDADD = $(TEST_LDADD)
endif
endif
if HAVE_CMOCKA
if HAVE_VERBS
# nic/verbs/rc.c and mr.c (RMA on RC QPs) on the model of an HCA.
check_PROGRAMS += tests/test_verbs_rma
TESTS += tests/test_verbs_rma
tests_test_verbs_rma_SOURCES = tests/test_verbs_rma.c tests/verbs_mock.c tests/verbs_mock_rc.c \
	tests/verbs_mock_mc.c tests/verbs_mock.h tests/verbs_mock_int.h tests/verbs_test.h tests/testutil.h
tests_test_verbs_rma_CFLAGS = $(TEST_CFLAGS)
tests_test_verbs_rma_LDFLAGS = -static
tests_test_verbs_rma_LDADD = $(TEST_LDADD)

# nic/verbs/ multicast and rcp/mcastnet.c over it on the model.
check_PROGRAMS += tests/test_verbs_mcast
TESTS += tests/test_verbs_mcast
tests_test_verbs_mcast_SOURCES = tests/test_verbs_mcast.c tests/verbs_mock.c \
	tests/verbs_mock_rc.c tests/verbs_mock_mc.c tests/verbs_mock.h tests/verbs_mock_int.h tests/verbs_test.h \
	tests/testutil.h
tests_test_verbs_mcast_CFLAGS = $(TEST_CFLAGS)
tests_test_verbs_mcast_LDFLAGS = -static
tests_test_verbs_mcast_LDADD = $(TEST_LDADD)

# tests/test_nic.c's conformance suite over verbs on the model, the forked
# processes joined by tests/verbs_mock_wire.c (session 20).
check_PROGRAMS += tests/test_nic_model
TESTS += tests/test_nic_model
tests_test_nic_model_SOURCES = tests/test_nic.c tests/verbs_mock.c tests/verbs_mock_rc.c \
	tests/verbs_mock_mc.c tests/verbs_mock_wire.c tests/verbs_mock.h tests/verbs_mock_int.h \
	tests/testutil.h tests/test_xdp_veth.h common/sh.h
tests_test_nic_model_CPPFLAGS = $(AM_CPPFLAGS) -DTEST_NIC_MODEL
tests_test_nic_model_CFLAGS = $(TEST_CFLAGS)
tests_test_nic_model_LDFLAGS = -static
tests_test_nic_model_LDADD = $(TEST_LDADD)

# nic/verbs/umad.c against ibsim + opensm (SKIP without them).
check_PROGRAMS += tests/test_verbs_umad
TESTS += tests/test_verbs_umad
tests_test_verbs_umad_SOURCES = tests/test_verbs_umad.c tests/testutil.h
tests_test_verbs_umad_CFLAGS = $(TEST_CFLAGS)
tests_test_verbs_umad_LDFLAGS = -static
tests_test_verbs_umad_LDADD = $(TEST_LDADD)
endif
endif
if HAVE_CMOCKA
# RMA transfers as events, with an asynchronous executor (rcp/rmaq.c).
check_PROGRAMS += tests/test_rcp_rma
TESTS += tests/test_rcp_rma
tests_test_rcp_rma_SOURCES = tests/test_rcp_rma.c tests/sim.c tests/sim.h tests/testutil.h
tests_test_rcp_rma_CFLAGS = $(TEST_CFLAGS)
tests_test_rcp_rma_LDFLAGS = -static
tests_test_rcp_rma_LDADD = $(TEST_LDADD)
endif
