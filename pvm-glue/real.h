/* pvm-glue/real.h: REAL(fn), libpvm3's own definition of a call the glue
 * wraps (inplace.c, upk.c).  The glue is linked ahead of libpvm3 (or
 * preloaded), so its pvm_initsend, pvm_upkint, ... are the ones a program
 * calls; each wrapper that hands a call on finds the next definition, once,
 * with dlsym(RTLD_NEXT).  Missing (a libpvm3 without the call), the
 * wrapper returns PvmSysErr. */
#ifndef PVMRCP_REAL_H
#define PVMRCP_REAL_H

#include <dlfcn.h>
#include <pvm3.h>

/* The next definition of FN after ours (libpvm3's), found once. */
#define REAL(fn)                                                                                   \
	static __typeof__(fn) *real_;                                                              \
	if (!real_)                                                                                \
		*(void **)&real_ = dlsym(RTLD_NEXT, #fn);                                          \
	if (!real_) {                                                                              \
		return PvmSysErr;                                                                  \
	}                                                                                          \
	(void)0

#endif
