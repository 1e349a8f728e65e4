# rcp-cluster: N virtual hosts (network namespaces on one bridge) with a
# link model, and a PVM virtual machine across them (issue 20,
# docs/cluster.md).  A shell script, installed with the tools.
dist_bin_SCRIPTS = tools/rcp-cluster

# tests/cluster.sh brings a 4-host cluster up and down (root only; else
# SKIP); cluster-udp sends and counts datagrams between the hosts.
check_PROGRAMS += tests/cluster-udp
tests_cluster_udp_SOURCES = tests/cluster_udp.c
TESTS += tests/cluster.sh
EXTRA_DIST += tests/cluster.sh tests/cluster_lib.sh

# A PVM virtual machine across 4 hosts (needs pvm: tests/pvm/pvmt).
TESTS += tests/cluster_pvm.sh
EXTRA_DIST += tests/cluster_pvm.sh
# pvm_pmcast by IP multicast across 5 hosts with loss (needs pvm).
TESTS += tests/cluster_mcast.sh
EXTRA_DIST += tests/cluster_mcast.sh

# A host lost mid-stream: the survivors get errors, never a hang.
if HAVE_PVM
check_PROGRAMS += tests/pvm/pvmt-down
tests_pvm_pvmt_down_SOURCES = tests/pvm/pvmt_down.c
tests_pvm_pvmt_down_LDADD = libpvmrcp.la $(PVM_LIBS)
tests_pvm_pvmt_down_LDFLAGS = -no-install
# perf/cluster_bench.sh's multicast column: a real binary (pvmd execs it)
noinst_PROGRAMS += perf/rcp-pvm-mcast
perf_rcp_pvm_mcast_SOURCES = perf/pvm_mcast.c perf/clock.h
perf_rcp_pvm_mcast_LDADD = libpvmrcp.la $(PVM_LIBS)
perf_rcp_pvm_mcast_LDFLAGS = -no-install
endif
TESTS += tests/cluster_down.sh
EXTRA_DIST += tests/cluster_down.sh

# perf/cluster_bench.sh: the paper's table on a cluster (issue 20 item 4;
# not run by make check), perf/cluster_plot.py its PNG.
EXTRA_DIST += perf/cluster_bench.sh perf/cluster_plot.py
# perf/cluster_rtt_ab.sh: 8 B round trip, two librcp builds vs TCP (issue 20)
EXTRA_DIST += perf/cluster_rtt_ab.sh
# perf/cluster_loss_ab.sh: 1 MiB under loss, librcp builds interleaved vs TCP (issue 20)
EXTRA_DIST += perf/cluster_loss_ab.sh
