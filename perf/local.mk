bin_PROGRAMS += perf/rcp-nic-pingpong
perf_rcp_nic_pingpong_SOURCES = perf/nic_pingpong.c
perf_rcp_nic_pingpong_LDADD = librcp.la
