/*
 * tests/shm_test.h — what the tests of the shared-memory backend
 * (nic/shm/) share: endpoints named after the test's pid, sending and
 * waiting helpers, forked children and the pipes that order their steps.
 * Included once per test program (static definitions): test_shm.c
 * (addresses, geometry, ownership), test_shm_frames.c (frames, rings,
 * hostile senders), test_shm_procs.c (two processes: streams, the
 * doorbell, peers leaving), test_shm_rma.c (RMA by cross-memory attach).
 *
 * Behaviour every backend shares is in test_nic.c; here is what is
 * particular to shm: ring geometry and back-pressure, senders learned from
 * `src`, the slot life cycle (close, crash, reuse), the doorbell handshake,
 * stale-segment reclaim, and RMA by cross-memory attach.
 *
 * Two-process tests fork.  The child never uses cmocka (its asserts would
 * unwind into the parent's test runner): it checks with CHILD_CHECK and
 * reports through its exit status, which the parent asserts.  Steps are
 * ordered by pipes or by frames, never by sleeping.  Endpoint names carry
 * the pid of the test process, so parallel runs do not collide.
 *
 * Randomised tests take their seed from RCP_TEST_SEED (default fixed) and
 * print it in every failure message.
 */
#ifndef RCP_TESTS_SHM_TEST_H
#define RCP_TESTS_SHM_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <rcp/nic.h>

#include "testutil.h"

#define WAIT_NS 10000000000ll /* a lost wake-up fails the test, not hangs it */

#define CHILD_CHECK(c)                                                                             \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "child %d: %s:%d: check failed: %s\n", (int)getpid(),      \
			        __FILE__, __LINE__, #c);                                           \
			_exit(3);                                                                  \
		}                                                                                  \
	} while (0)

/* "shm:ts-<pid>-<tag>": unique per test process. */
static inline void addr_of(char *buf, size_t len, pid_t pid, const char *tag)
{
	snprintf(buf, len, "shm:ts-%d-%s", (int)pid, tag);
}

static inline rcp_nic *open_cfg(pid_t pid, const char *tag, const struct rcp_nic_config *cfg)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	rcp_nic *nic = NULL;
	int rc;

	addr_of(addr, sizeof addr, pid, tag);
	rc = rcp_nic_open(addr, cfg, &nic);
	if (rc)
		fail_msg("open %s: %s", addr, rcp_strerror(rc));
	return nic;
}

static inline rcp_nic *open_ep(const char *tag)
{
	return open_cfg(getpid(), tag, NULL);
}

static inline int add_ep(rcp_nic *from, rcp_nic *to)
{
	char addr[RCP_NIC_ADDRSTR_MAX];
	int peer = -1, rc;

	assert_int_equal(rcp_nic_addr_str(to, addr, sizeof addr), 0);
	rc = rcp_nic_peer_add_str(from, addr, &peer);
	if (rc)
		fail_msg("peer_add %s: %s", addr, rcp_strerror(rc));
	return peer;
}

static inline int send_buf(rcp_nic *nic, int peer, const void *buf, size_t len)
{
	struct iovec iov = {(void *)(uintptr_t)buf, len};
	return rcp_nic_send(nic, peer, &iov, 1, 0);
}

static inline int send_seq(rcp_nic *nic, int peer, uint64_t seq, size_t len)
{
	unsigned char buf[4096];
	assert_true(len <= sizeof buf);
	test_fill(buf, len, seq);
	return send_buf(nic, peer, buf, len);
}

/* Receives up to MAX frames, waiting (spin, then sleep) for the first. */
static inline int recv_wait(rcp_nic *nic, struct rcp_nic_frame *fr, int max, int64_t spin_ns)
{
	uint64_t end = (uint64_t)WAIT_NS;
	struct timespec ts;
	uint64_t start;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	start = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	for (;;) {
		uint64_t now;
		int n = rcp_nic_recv(nic, fr, max), rc;
		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (now - start >= end)
			return RCP_ETIMEDOUT;
		rc = rcp_nic_wait(nic, (int64_t)(end - (now - start)), spin_ns);
		if (rc && rc != RCP_ETIMEDOUT)
			return rc;
	}
}

/* Receives exactly one frame and checks it is SEQ of LEN bytes. */
static inline void expect_seq(rcp_nic *nic, uint64_t seq, size_t len, int peer)
{
	struct rcp_nic_frame fr;
	int n = recv_wait(nic, &fr, 1, -1);
	if (n != 1)
		fail_msg("waiting for frame %llu: %s", (unsigned long long)seq,
		         n < 0 ? rcp_strerror(n) : "none");
	assert_int_equal(fr.len, len);
	assert_int_equal(test_check(fr.data, fr.len, seq), -1);
	assert_int_equal(fr.peer, peer);
	rcp_nic_release(nic, &fr, 1);
}

static inline void child_exit(int code)
{
	fflush(NULL);
	exit(code);
}

static inline pid_t fork_child(void)
{
	pid_t pid;
	fflush(NULL);
	pid = test_fork(); /* dies with us, even if an assertion unwinds us */
	assert_true(pid >= 0);
	/* A child must not outlive a test process that failed or died. */
	if (pid == 0 && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(3);
	return pid;
}

static inline void pipe_put(int fd)
{
	char c = 'x';
	while (write(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static inline int pipe_get(int fd)
{
	char c;
	ssize_t n;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1;
}

/* Forks a child that opens an endpoint at ADDR and holds it until it is
 * killed; returns once the endpoint is open.  C2P and P2C are the pipes
 * (created here) the caller closes afterwards. */
static inline pid_t spawn_holder(const char *addr, int c2p[2], int p2c[2])
{
	pid_t child;
	assert_int_equal(pipe(c2p), 0);
	assert_int_equal(pipe(p2c), 0);
	child = fork_child();
	if (child == 0) {
		rcp_nic *x;
		CHILD_CHECK(rcp_nic_open(addr, NULL, &x) == 0);
		pipe_put(c2p[1]);
		pipe_get(p2c[0]); /* until killed */
		_exit(0);
	}
	assert_true(pipe_get(c2p[0]));
	return child;
}

static inline int shm_exists(pid_t pid, const char *tag)
{
	char path[128];
	int fd;
	snprintf(path, sizeof path, "/rcp-ts-%d-%s", (int)pid, tag);
	fd = shm_open(path, O_RDONLY, 0);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* Maps this process's endpoint TAG's segment read-write, as a hostile
 * peer could; *LEN its size (munmap it with that). */
static inline unsigned char *map_seg(const char *tag, size_t *len)
{
	char path[128];
	struct stat st;
	unsigned char *m;
	int fd;

	snprintf(path, sizeof path, "/rcp-ts-%d-%s", (int)getpid(), tag);
	fd = shm_open(path, O_RDWR, 0);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	close(fd);
	return m;
}

#endif /* RCP_TESTS_SHM_TEST_H */
