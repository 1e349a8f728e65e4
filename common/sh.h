/*
 * common/sh.h — for tests and perf tools that set up network namespaces
 * (never the library): run a shell command line built like printf
 * (rcpi_sh: the command's exit status, 128 if it died by a signal, -1 if
 * it could not be run), and enter a namespace (rcpi_netns_enter).
 */
#ifndef RCP_COMMON_SH_H
#define RCP_COMMON_SH_H

#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Moves the calling thread into the network namespace NAME made by
 * `ip netns add` (setns is per thread).  0, or -1 with errno. */
static int rcpi_netns_enter(const char *name) __attribute__((unused));
static int rcpi_netns_enter(const char *name)
{
	char path[128];
	int fd, rc;

	snprintf(path, sizeof path, "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = setns(fd, CLONE_NEWNET);
	close(fd);
	return rc;
}

#endif
