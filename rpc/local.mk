# rpc/: Mercury-style RPC (include/rcp/rpc.h).
librcp_la_SOURCES += rpc/rpc_int.h rpc/proc.c rpc/rpc.c rpc/rfp.h rpc/rfp.c rpc/rfp_poll.c rpc/calls.c rpc/hdr.c \
	rpc/bufs.c rpc/peer.c rpc/deadline.c rpc/complete.c rpc/batch.c rpc/client.c rpc/server.c
rcpinclude_HEADERS += include/rcp/rpc.h
