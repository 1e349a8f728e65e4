/*
 * common/fdwait.c — sleep until one fd is readable or a timeout in
 * nanoseconds passes: the last step of every wait that sleeps on an
 * endpoint (nic recv_wait fallback, bulk and rpc waits).  ppoll, not
 * poll: timers are microseconds apart and poll's millisecond rounding
 * would stretch every one.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "common/rcp_common.h"

int rcpi_fd_wait(int fd, int64_t timeout_ns)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int rc;

	if (timeout_ns < 0) {
		rc = poll(&pfd, 1, -1);
	} else {
		struct timespec ts = {(time_t)(timeout_ns / 1000000000),
		                      (long)(timeout_ns % 1000000000)};
		rc = ppoll(&pfd, 1, &ts, NULL);
	}
	return rc < 0 && errno != EINTR ? RCP_ESYS : 0;
}
