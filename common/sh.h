/*
 * common/sh.h — run a shell command line built like printf (tests and
 * perf tools that set up network namespaces; never the library).
 * Returns the command's exit status, 128 if it died by a signal, -1 if it
 * could not be run.
 */
#ifndef RCP_COMMON_SH_H
#define RCP_COMMON_SH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int rcpi_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int rcpi_sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	rc = system(cmd);
	return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

#endif
