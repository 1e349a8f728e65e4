librcp_la_SOURCES += rcp/wire.h rcp/wire.c rcp/core.h rcp/core.c rcp/chan.h rcp/chan.c rcp/req.c \
	rcp/send.c rcp/recv.c rcp/msg.c rcp/epoch.c rcp/handshake.c rcp/express.c rcp/timers.c rcp/heap.h \
	rcp/heap.c rcp/endpoint.c rcp/ep_int.h rcp/request.c rcp/rmaq.c rcp/rma.c
librcp_la_SOURCES += rcp/mcastnet.c
librcp_la_SOURCES += rcp/fallback.c
librcp_la_SOURCES += rcp/start.c
librcp_la_SOURCES += rcp/isend.c
rcpinclude_HEADERS += include/rcp/rcp.h include/rcp/wait.h
rcpinclude_HEADERS += include/rcp/mcastnet.h
