librcp_la_SOURCES += nic/nic_int.h nic/nic.c nic/udp/udp_int.h nic/udp/addr.c nic/udp/peers.c nic/udp/tx.c nic/udp/rx.c nic/udp/udp.c nic/faults.c nic/wrap.c \
	nic/shm/shm_int.h nic/shm/seg.c nic/shm/slots.c nic/shm/doorbell.c nic/shm/peers.c \
	nic/shm/ring.c nic/shm/rma.c nic/shm/shm.c
rcpinclude_HEADERS += include/rcp/nic.h
if HAVE_SODIUM
librcp_la_SOURCES += nic/auth.c
endif
if HAVE_XDP
librcp_la_SOURCES += nic/xdp/xdp_int.h nic/xdp/xdp.c nic/xdp/rx.c nic/xdp/tx.c nic/xdp/peers.c \
	nic/xdp/link.c nic/xdp/neigh.c
endif
if HAVE_VERBS
librcp_la_SOURCES += nic/verbs/verbs.c nic/verbs/ud.c nic/verbs/addr.c nic/verbs/api.c \
	nic/verbs/api.h nic/verbs/verbs_int.h nic/verbs/umad.c nic/verbs/umad.h \
	nic/verbs/rc.c nic/verbs/mr.c nic/verbs/mcjoin.c nic/verbs/memwatch.c
endif
