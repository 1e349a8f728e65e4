/*
 * common/rcp_common.h — small things every layer below the public API
 * shares: logging, RCP_* environment configuration, the monotonic clock
 * (for nic/ and tools only: rcp/ core takes time as an argument).
 *
 * Internal symbols shared between files carry the `rcpi_` prefix and are
 * not exported from the shared library.
 */
#ifndef RCP_COMMON_H
#define RCP_COMMON_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <rcp/error.h>

#define RCPI_LIKELY(x)   __builtin_expect(!!(x), 1)
#define RCPI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RCPI_CACHELINE   64

/* ---- logging: RCP_LOG=error|warn|info|debug (default warn) ---- */
enum { RCPI_LOG_ERROR, RCPI_LOG_WARN, RCPI_LOG_INFO, RCPI_LOG_DEBUG };
extern int rcpi_log_level;
void rcpi_log_init(void);
void rcpi_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define rcpi_err(...)  rcpi_log(RCPI_LOG_ERROR, __VA_ARGS__)
#define rcpi_warn(...) rcpi_log(RCPI_LOG_WARN, __VA_ARGS__)
#define rcpi_info(...)                                                                             \
	do {                                                                                       \
		if (rcpi_log_level >= RCPI_LOG_INFO)                                               \
			rcpi_log(RCPI_LOG_INFO, __VA_ARGS__);                                      \
	} while (0)
#define rcpi_debug(...)                                                                            \
	do {                                                                                       \
		if (rcpi_log_level >= RCPI_LOG_DEBUG)                                              \
			rcpi_log(RCPI_LOG_DEBUG, __VA_ARGS__);                                     \
	} while (0)

/* ---- configuration from RCP_* environment variables ----
 * Every variable the library reads is listed in common/env.c with its
 * default and meaning (and in docs/config.md).  The first call of
 * rcpi_env_init() warns once about RCP_* variables not in that list. */
void rcpi_env_init(void);
/* Value of NAME (which must be listed), or NULL if unset/empty. */
const char *rcpi_env_str(const char *name);
/* Integer value with suffixes k/m/g (x1024) for sizes; DEF if unset.
 * A malformed value is warned about and gives DEF. */
int64_t rcpi_env_int(const char *name, int64_t def);

/* ---- time (not for rcp/ core) ---- */
static inline uint64_t rcpi_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void rcpi_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Grows *ARR (of *N elements of ELEM bytes) so index NEED is valid,
 * doubling from 16, new elements zeroed.  Returns 0 or RCP_ENOMEM (the
 * array is then unchanged). */
int rcpi_grow_zeroed(void **arr, int *n, size_t elem, int need);

/* Maps an errno value to an RCP_E* code. */
int rcpi_errno_to_rcp(int err);

/* common/fdwait.c.  Sleeps until FD is readable or TIMEOUT_NS passes
 * (<0: forever); a signal ends the sleep early.  0 or RCP_ESYS. */
int rcpi_fd_wait(int fd, int64_t timeout_ns);

/* common/proc.c.  State (R, S, Z, ...) and start time (clock ticks after
 * boot) of PID from /proc: 0 or -errno. */
int rcpi_proc_stat(pid_t pid, char *state, uint64_t *start);
/* The pid namespace of this process (its inode), 0 if unknown. */
uint32_t rcpi_self_pidns(void);
/* 0 if process (PID, START, PIDNS) has certainly exited, 1 if it is alive
 * or cannot be told from here (another pid namespace).  0: unknown. */
int rcpi_proc_alive(pid_t pid, uint64_t start, uint32_t pidns, uint32_t my_pidns);

/* common/shmseg.c.  Where shm_open puts segments: RCP_SHM_DIR, default
 * /dev/shm (for scans and messages). */
const char *rcpi_shm_dir(void);
/* 0 if ST (fstat of shm segment NAME) is one we may trust: a regular file
 * of our effective uid, mode 0600 or stricter.  Else logs (WHO: prefix)
 * the owner uid and mode and returns RCP_EPERM. */
struct stat;
int rcpi_shm_trusted(const struct stat *st, const char *who, const char *name);

#endif
