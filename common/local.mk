lib_LTLIBRARIES += librcp.la
librcp_la_SOURCES = common/error.c common/env.c common/log.c common/proc.c common/shmseg.c common/fdwait.c common/wait.c common/wait.h common/rcp_common.h
librcp_la_LDFLAGS = -version-info 0:0:0 -export-symbols-regex '^rcp_'
rcpinclude_HEADERS += include/rcp/error.h
