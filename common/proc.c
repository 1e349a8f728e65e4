/*
 * common/proc.c — is that process still alive?  For state other processes
 * left behind in shared memory (shm nic slots and segments, RFP segments):
 * pid, start time and pid namespace identify a process across pid reuse.
 * Slow paths only: every call reads /proc.
 */
#include "rcp_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads state and start time (clock ticks after boot) of PID from
 * /proc/PID/stat.  Returns 0, or -errno. */
int rcpi_proc_stat(pid_t pid, char *state, uint64_t *start)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd, f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof buf - 1);
	f = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -f : -EIO;
	buf[n] = 0;
	/* "pid (comm) S ppid ...": comm may hold spaces and ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	p += 2;
	*state = *p;
	for (f = 3; f < 22; f++) { /* field 22 is starttime */
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

uint32_t rcpi_self_pidns(void)
{
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) < 0)
		return 0;
	return (uint32_t)st.st_ino;
}

/* 0 if the process (PID, START, PIDNS) has certainly exited, 1 if it is
 * alive or cannot be checked.  START 0: unknown.  System calls: slow
 * paths only. */
int rcpi_proc_alive(pid_t pid, uint64_t start, uint32_t pidns, uint32_t my_pidns)
{
	uint64_t s;
	char st;
	int rc;

	if (pid <= 0)
		return 0;
	/* A pid from another pid namespace names some other process here. */
	if (pidns && my_pidns && pidns != my_pidns)
		return 1;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	rc = rcpi_proc_stat(pid, &st, &s);
	if (rc == -ENOENT || rc == -ESRCH)
		return 0; /* exited between the two calls */
	if (rc == 0) {
		if (st == 'Z' || st == 'X')
			return 0; /* exited, not yet reaped */
		if (start && s != start)
			return 0; /* pid reused by another process */
	}
	return 1;
}
