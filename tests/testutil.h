/*
 * tests/testutil.h — helpers shared by the cmocka tests.
 *
 * Seeds: a test that uses randomness takes its seed from RCP_TEST_SEED
 * (or a fixed default), and prints it on failure via test_seed_note().
 */
#ifndef RCP_TESTUTIL_H
#define RCP_TESTUTIL_H

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Exit code automake reads as SKIP. */
#define TEST_SKIP_CODE 77

static inline void test_skip_all(const char *reason)
{
	printf("SKIP: %s\n", reason);
	fflush(stdout);
	exit(TEST_SKIP_CODE);
}

/* Deterministic 64-bit PRNG (splitmix64). */
static inline uint64_t test_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t test_seed(uint64_t def)
{
	const char *s = getenv("RCP_TEST_SEED");
	return s ? strtoull(s, NULL, 0) : def;
}

/* Fills BUF with a pattern that depends on SEQ, so misplaced or mixed-up
 * bytes are caught, not only missing ones. */
static inline void test_fill(void *buf, size_t len, uint64_t seq)
{
	uint64_t s = seq * 0x100000001b3ull + 1;
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++) {
		if ((i & 7) == 0)
			s = s * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (unsigned char)(s >> ((i & 7) * 8));
	}
}

/* Returns the index of the first wrong byte, or -1. */
static inline long test_check(const void *buf, size_t len, uint64_t seq)
{
	uint64_t s = seq * 0x100000001b3ull + 1;
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++) {
		if ((i & 7) == 0)
			s = s * 6364136223846793005ull + 1442695040888963407ull;
		if (p[i] != (unsigned char)(s >> ((i & 7) * 8)))
			return (long)i;
	}
	return -1;
}

/* fork() for tests.  In the child, cmocka's signal handlers are reset:
 * they would otherwise longjmp a crashing child back into the test runner,
 * which would then run the remaining tests a second time in the child.
 *
 * The child also dies with the test program (PR_SET_PDEATHSIG): when a
 * failed assertion unwinds the parent past its waitpid, a child waiting
 * for a peer would otherwise poll forever.  Its pid goes to
 * $RCPTEST_PIDFILE (set by tests/driver.sh), which then removes the
 * /dev/shm segments named after it if the child could not. */
static inline pid_t test_fork(void)
{
	pid_t parent = getpid(), p;
	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p == 0) {
		static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			signal(sigs[i], SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) /* the parent died before the prctl */
			_exit(1);
	} else if (p > 0) {
		const char *f = getenv("RCPTEST_PIDFILE");
		int fd = f ? open(f, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
		if (fd >= 0) {
			char line[24];
			int n = snprintf(line, sizeof line, "%d\n", (int)p);
			if (write(fd, line, (size_t)n) != n) {
				/* best effort: only the leak sweep is less precise */
			}
			close(fd);
		}
	}
	return p;
}

/* Waits for CHILD; returns its exit status (or 128+signal). */
static inline int test_wait_child(pid_t child)
{
	int st;
	while (waitpid(child, &st, 0) < 0)
		;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

/* A cmocka test entry NAME that runs FN with *state = ROW (a row of a
 * table of setups), so one function serves every row under its own name. */
#define TEST_ROW(name, fn, row)                                                                    \
	{                                                                                          \
		name, fn, NULL, NULL, (void *)(row)                                                \
	}

#endif
