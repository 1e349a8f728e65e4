librcp_la_SOURCES += rcp/wire.h rcp/wire.c rcp/core.h rcp/core.c rcp/endpoint.c rcp/ep_int.h
rcpinclude_HEADERS += include/rcp/rcp.h include/rcp/wait.h
