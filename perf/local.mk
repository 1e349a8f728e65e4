bin_PROGRAMS += perf/rcp-nic-pingpong
perf_rcp_nic_pingpong_SOURCES = perf/nic_pingpong.c perf/cluster_ns.h common/sh.h
perf_rcp_nic_pingpong_LDADD = librcp.la

bin_PROGRAMS += perf/rcp-pingpong
perf_rcp_pingpong_SOURCES = perf/rcp_pingpong.c perf/rcp_pingpong.h perf/pp_run.c perf/pp_client.c \
	perf/pp_server.c perf/pp_proto.c perf/tcp_pingpong.c perf/tcp_pingpong.h
perf_rcp_pingpong_LDADD = librcp.la
EXTRA_DIST += perf/sweep.sh perf/plot.py perf/pingpong_smoke.sh perf/udp_ratio.sh perf/key_cost.sh perf/hog_runs.sh perf/rounds.sh
TESTS += perf/pingpong_smoke.sh

bin_PROGRAMS += perf/rcp-rpcbench
perf_rcp_rpcbench_SOURCES = perf/rpcbench.c perf/size_arg.h
perf_rcp_rpcbench_LDADD = librcp.la
EXTRA_DIST += perf/rpc_sweep.sh perf/rpc_plot.py
# Instructions per empty RPC under callgrind (perf/rpc_instr.sh), and the
# side-by-side rate against Mercury (perf/rpc_vs_mercury.sh).
noinst_PROGRAMS += perf/rcp-rpc-instr
perf_rcp_rpc_instr_SOURCES = perf/rpc_instr.c perf/instr.h
perf_rcp_rpc_instr_LDADD = librcp.la
perf_rcp_rpc_instr_LDFLAGS = -no-install
EXTRA_DIST += perf/rpc_instr.sh perf/rpc_vs_mercury.sh

bin_PROGRAMS += perf/rcp-copy-ceiling
perf_rcp_copy_ceiling_SOURCES = perf/copy_ceiling.c perf/tcp_pingpong.c perf/tcp_pingpong.h perf/size_arg.h \
	perf/clock.h

# Instructions per 8 B round trip under callgrind (issue 19): perf/callgrind.sh
# runs rcp-instr (bare nic frame, RCP channel) and, with PVM, rcp-instr-pvm.
noinst_PROGRAMS += perf/rcp-instr
perf_rcp_instr_SOURCES = perf/rcp_instr.c perf/instr.h
perf_rcp_instr_LDADD = librcp.la
# a real binary (not a libtool wrapper script) for valgrind to run
perf_rcp_instr_LDFLAGS = -no-install
EXTRA_DIST += perf/callgrind.sh perf/cg_funcs.py
TESTS += perf/callgrind_smoke.sh
EXTRA_DIST += perf/callgrind_smoke.sh
if HAVE_PVM
noinst_PROGRAMS += perf/rcp-instr-pvm
perf_rcp_instr_pvm_SOURCES = perf/rcp_instr_pvm.c perf/instr.h
perf_rcp_instr_pvm_LDADD = libpvmrcp.la $(PVM_LIBS)
# a real binary: valgrind runs it, pvmd execs it from the ep= path
perf_rcp_instr_pvm_LDFLAGS = -no-install
endif

if HAVE_XDP
# Bare frame round trip over xdp, udp and a kernel UDP socket on a veth pair
# between two namespaces of its own (root; issue 21).
noinst_PROGRAMS += perf/rcp-xdp-pingpong
perf_rcp_xdp_pingpong_SOURCES = perf/xdp_pingpong.c perf/cluster_ns.h common/sh.h
perf_rcp_xdp_pingpong_LDADD = librcp.la
# Issue 21's closing figures between two rcp-cluster hosts (root; not run
# by make check).
EXTRA_DIST += perf/xdp_bench.sh
endif
# The verbs backend on a machine with an HCA (docs/nic.md, verbs).
EXTRA_DIST += perf/verbs_check.sh perf/verbs_callgrind.sh
