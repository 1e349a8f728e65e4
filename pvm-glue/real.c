/*
 * pvm-glue/real.c — the libpvm3 functions libpvmrcp wraps, found with
 * dlsym(RTLD_NEXT, ...): the next definition after ours in the lookup
 * order, i.e. libpvm3.so's.  If libpvm3 comes before libpvmrcp (wrong link
 * order) RTLD_NEXT would not find them: that is reported once and every
 * wrapper then fails with PvmSysErr instead of recursing.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "pvm-glue/glue.h"

struct pvmrcpi_real pvmrcpi_real;

#define GET(field, name)                                                                           \
	do {                                                                                       \
		*(void **)&pvmrcpi_real.field = dlsym(RTLD_NEXT, name);                            \
		if (!pvmrcpi_real.field) {                                                         \
			fprintf(stderr,                                                            \
			        "libpvmrcp: %s not found after libpvmrcp (link "                   \
			        "libpvmrcp before libpvm3): %s\n",                                 \
			        name, dlerror());                                                  \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

static int resolve_all(void)
{
	GET(psend, "pvm_psend");
	GET(precv, "pvm_precv");
	GET(send, "pvm_send");
	GET(mcast, "pvm_mcast");
	GET(recv, "pvm_recv");
	GET(nrecv, "pvm_nrecv");
	GET(trecv, "pvm_trecv");
	GET(probe, "pvm_probe");
	GET(bufinfo, "pvm_bufinfo");
	GET(getminfo, "pvm_getminfo");
	GET(freebuf, "pvm_freebuf");
	GET(exit, "pvm_exit");
	*(void **)&pvmrcpi_real.midtobuf = dlsym(RTLD_NEXT, "midtobuf");
	*(void **)&pvmrcpi_real.pmsg_setlen = dlsym(RTLD_NEXT, "pmsg_setlen");
	*(void **)&pvmrcpi_real.pmsg_unref = dlsym(RTLD_NEXT, "pmsg_unref");
	*(void **)&pvmrcpi_real.myctx = dlsym(RTLD_NEXT, "pvmmyctx");
	return 0;
}

int pvmrcpi_resolve(void)
{
	static int done, rc;
	if (!done) {
		rc = resolve_all();
		done = 1;
	}
	return rc;
}
