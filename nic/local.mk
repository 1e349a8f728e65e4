librcp_la_SOURCES += nic/nic_int.h nic/nic.c nic/shm.c nic/udp.c nic/faults.c nic/wrap.c
rcpinclude_HEADERS += include/rcp/nic.h
if HAVE_SODIUM
librcp_la_SOURCES += nic/auth.c
endif
if HAVE_XDP
librcp_la_SOURCES += nic/xdp.c nic/xdp_link.c nic/xdp_int.h
endif
