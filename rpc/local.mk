# rpc/: Mercury-style RPC (include/rcp/rpc.h).
librcp_la_SOURCES += rpc/rpc_int.h rpc/proc.c rpc/rpc.c rpc/rfp.c
rcpinclude_HEADERS += include/rcp/rpc.h
