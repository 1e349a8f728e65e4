librcp_la_SOURCES += bulk/bulk_int.h bulk/bulk.c bulk/handle.c bulk/regcache.c bulk/transfer.c \
	bulk/serve.c bulk/pipeline.c common/rcp_tags.h
rcpinclude_HEADERS += include/rcp/bulk.h

# rcp-bulk-bw: bulk pull/push bandwidth between two local processes.
noinst_PROGRAMS += perf/rcp-bulk-bw
perf_rcp_bulk_bw_SOURCES = perf/bulk_bw.c perf/size_arg.h
perf_rcp_bulk_bw_LDADD = librcp.la
