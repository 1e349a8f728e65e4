/*
 * perf/instr.h — callgrind's collection toggle for rcp-instr and
 * rcp-instr-pvm, a no-op where valgrind's headers are not installed (the
 * programs then run, and perf/callgrind.sh says SKIP: it needs valgrind
 * anyway).  CALLGRIND_TOGGLE_COLLECT only flips a flag in callgrind: it
 * costs a few instructions and, unlike START/STOP_INSTRUMENTATION, throws
 * no translations away, so it can be toggled around every call.
 */
#ifndef RCP_PERF_INSTR_H
#define RCP_PERF_INSTR_H

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define INSTR_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#endif
#endif
#ifndef INSTR_TOGGLE
#define INSTR_TOGGLE() ((void)0)
#endif

#endif
