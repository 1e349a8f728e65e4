# examples/: rpc_write (remote write with a bulk pull pipeline) and kvstore.
noinst_PROGRAMS += examples/rpc_write examples/kvstore
examples_rpc_write_SOURCES = examples/rpc_write.c
examples_rpc_write_LDADD = librcp.la
examples_kvstore_SOURCES = examples/kvstore.c
examples_kvstore_LDADD = librcp.la
TESTS += examples/smoke.sh
EXTRA_DIST += examples/smoke.sh
