/*
 * perf/size_arg.h — byte counts on the command line of the bulk and RPC
 * benchmarks: "4096", "64k", "4M", "1.5G" (binary multiples, k/m/g in
 * either case).  Lenient like strtod: junk after the number is ignored.
 * (rcp-pingpong has its own stricter parser, which refuses junk.)
 */
#ifndef RCP_PERF_SIZE_ARG_H
#define RCP_PERF_SIZE_ARG_H

#include <stddef.h>
#include <stdlib.h>

static inline size_t size_arg(const char *s)
{
	char *e;
	double v = strtod(s, &e);
	switch (*e) {
	case 'k':
	case 'K': v *= 1024; break;
	case 'm':
	case 'M': v *= 1024 * 1024; break;
	case 'g':
	case 'G': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return (size_t)v;
}

#endif
