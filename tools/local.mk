# rcp-cluster: N virtual hosts (network namespaces on one bridge) with a
# link model, and a PVM virtual machine across them (issue 20,
# docs/cluster.md).  A shell script, installed with the tools.
dist_bin_SCRIPTS = tools/rcp-cluster

# tests/cluster.sh brings a 4-host cluster up and down (root only; else
# SKIP); cluster-udp sends and counts datagrams between the hosts.
check_PROGRAMS += tests/cluster-udp
tests_cluster_udp_SOURCES = tests/cluster_udp.c
TESTS += tests/cluster.sh
EXTRA_DIST += tests/cluster.sh

# A PVM virtual machine across 4 hosts (needs pvm: tests/pvm/pvmt).
TESTS += tests/cluster_pvm.sh
EXTRA_DIST += tests/cluster_pvm.sh
# pvm_pmcast by IP multicast across 5 hosts with loss (needs pvm).
TESTS += tests/cluster_mcast.sh
EXTRA_DIST += tests/cluster_mcast.sh

# perf/cluster_bench.sh: RCP across cluster hosts per link (a skeleton of
# issue 20 item 4; not run by make check).
EXTRA_DIST += perf/cluster_bench.sh
