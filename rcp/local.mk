librcp_la_SOURCES += rcp/wire.h rcp/wire.c rcp/core.h rcp/core.c rcp/heap.h rcp/heap.c rcp/endpoint.c
rcpinclude_HEADERS += include/rcp/rcp.h
