librcp_la_SOURCES += bulk/bulk_int.h bulk/bulk.c bulk/handle.c bulk/regcache.c bulk/transfer.c \
	bulk/serve.c bulk/pipeline.c common/rcp_tags.h
rcpinclude_HEADERS += include/rcp/bulk.h
