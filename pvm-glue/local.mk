# pvm-glue: libpvmrcp (PVM programs over RCP by relinking), its tests with a
# real pvmd, and the PVM ping-pong benchmark.  Built only when configure
# found pvm3.h and libpvm3.
EXTRA_DIST += pvmrcp.pc.in docs/pvm.md tests/pvm/run.sh tests/pvm/examples.sh \
	perf/pvm_bench.sh perf/bwtest_modes.sh
if HAVE_PVM
lib_LTLIBRARIES += libpvmrcp.la
libpvmrcp_la_SOURCES = pvm-glue/glue.h pvm-glue/glue.c pvm-glue/real.c pvm-glue/send.c \
	pvm-glue/recv.c pvm-glue/wait.c pvm-glue/packed.h pvm-glue/packed.c pvm-glue/mcast.c \
	pvm-glue/ctrl.c pvm-glue/inplace.h pvm-glue/inplace.c
libpvmrcp_la_SOURCES += pvm-glue/msgbuf.h pvm-glue/msgbuf.c
libpvmrcp_la_SOURCES += pvm-glue/upk.h pvm-glue/upk.c pvm-glue/real.h
libpvmrcp_la_SOURCES += pvm-glue/frags.h pvm-glue/frags.c
libpvmrcp_la_SOURCES += pvm-glue/mcgroup.h
libpvmrcp_la_SOURCES += pvm-glue/send.h pvm-glue/pksend.c
libpvmrcp_la_LIBADD = librcp.la $(PVM_LIBS)
libpvmrcp_la_LDFLAGS = -version-info 0:0:0 -export-symbols-regex '^pvm_'
rcpinclude_HEADERS += include/rcp/pvmrcp.h
pkgconfig_DATA += pvmrcp.pc

# Test tasks: one relinked, one stock (same source).  -no-install: real
# binaries, not libtool wrappers, since pvmd execs them from the ep= path.
check_PROGRAMS += tests/pvm/pvmt tests/pvm/pvmt-stock
tests_pvm_pvmt_SOURCES = tests/pvm/pvmt.c tests/pvm/pvmt_packed.h tests/pvm/pvmt_contact.h tests/pvm/pvmt_async.h
tests_pvm_pvmt_LDADD = libpvmrcp.la -lgpvm3 $(PVM_LIBS)
tests_pvm_pvmt_LDFLAGS = -no-install
tests_pvm_pvmt_stock_SOURCES = tests/pvm/pvmt.c tests/pvm/pvmt_packed.h tests/pvm/pvmt_contact.h tests/pvm/pvmt_async.h
tests_pvm_pvmt_stock_CPPFLAGS = $(AM_CPPFLAGS) -DPVMT_STOCK
tests_pvm_pvmt_stock_LDADD = -lgpvm3 $(PVM_LIBS)
tests_pvm_pvmt_stock_LDFLAGS = -no-install
# pvmt by topic (included by pvmt.c)
tests_pvm_pvmt_SOURCES += tests/pvm/pvmt_children.h tests/pvm/pvmt_transport.h
tests_pvm_pvmt_SOURCES += tests/pvm/pvmt_adopt.h
tests_pvm_pvmt_stock_SOURCES += tests/pvm/pvmt_children.h tests/pvm/pvmt_transport.h
tests_pvm_pvmt_stock_SOURCES += tests/pvm/pvmt_adopt.h
tests_pvm_pvmt_SOURCES += tests/pvm/pvmt_fast.h
tests_pvm_pvmt_stock_SOURCES += tests/pvm/pvmt_fast.h
if HAVE_CMOCKA
# The packed message's wire layout: byte order and hostile lengths (no
# libpvm3 call: packed.c is compiled in).
check_PROGRAMS += tests/test_pvm_packed
TESTS += tests/test_pvm_packed
tests_test_pvm_packed_SOURCES = tests/test_pvm_packed.c tests/testutil.h pvm-glue/packed.c
tests_test_pvm_packed_CFLAGS = $(TEST_CFLAGS)
tests_test_pvm_packed_LDADD = $(TEST_LDADD)
endif
check_DATA = tests/pvm/env.sh
tests/pvm/env.sh: Makefile
	$(AM_V_GEN)mkdir -p tests/pvm && { \
	  echo "CC='$(CC)'"; echo "SAN_CFLAGS='$(SAN_CFLAGS)'"; echo "PVM_LIBS='$(PVM_LIBS)'"; \
	  echo "abs_builddir='$(abs_top_builddir)'"; echo "abs_srcdir='$(abs_top_srcdir)'"; } > $@
CLEANFILES += tests/pvm/env.sh
TESTS += tests/pvm/run.sh

bin_PROGRAMS += perf/rcp-pvm-pingpong
perf_rcp_pvm_pingpong_SOURCES = perf/pvm_pingpong.c perf/clock.h
perf_rcp_pvm_pingpong_LDADD = libpvmrcp.la $(PVM_LIBS)
# a real binary in the build tree: pvmd execs it from the ep= path
perf_rcp_pvm_pingpong_LDFLAGS = -no-install
# the same program built stock (libpvm3 only): pvm_bench.sh runs it
# unchanged with LD_PRELOAD=libpvmrcp.so (row rcp-preload)
noinst_PROGRAMS += perf/rcp-pvm-pingpong-stock
perf_rcp_pvm_pingpong_stock_SOURCES = perf/pvm_pingpong.c perf/clock.h
perf_rcp_pvm_pingpong_stock_CPPFLAGS = $(AM_CPPFLAGS) -DPP_STOCK
perf_rcp_pvm_pingpong_stock_LDADD = $(PVM_LIBS)
perf_rcp_pvm_pingpong_stock_LDFLAGS = -no-install
endif

# pvm_pmcast to N hosts: IP multicast vs unicasts vs stock pvm_mcast
# (perf/pmcast_bench.sh runs it on an rcp-cluster; issue 20).
if HAVE_PVM
noinst_PROGRAMS += perf/rcp-pvm-mcast-bench
perf_rcp_pvm_mcast_bench_SOURCES = perf/pvm_mcast_bench.c perf/clock.h
perf_rcp_pvm_mcast_bench_LDADD = libpvmrcp.la $(PVM_LIBS)
perf_rcp_pvm_mcast_bench_LDFLAGS = -no-install
endif
EXTRA_DIST += perf/pmcast_bench.sh
