/*
 * nic/verbs/memwatch.c — tells the registration cache (mr.c) when memory
 * it caches is unmapped, so that a freed buffer's registration is never
 * used for the pages mapped at its addresses later (session 20).
 *
 * Why.  A cached registration pins the pages the buffer had when it was
 * registered.  If the caller frees the buffer (free() of a large block is
 * munmap; a heap trim is brk or madvise) and later gets new memory at the
 * same addresses, the cache still finds an entry containing them and the
 * HCA moves bytes to or from the old pages: silent corruption, the classic
 * hazard of every registration cache.  UCX patches munmap/mremap/brk/
 * madvise; libfabric has a userfaultfd monitor.  Here it is the latter,
 * because it sees what the kernel does, including glibc's own internal
 * munmap calls that no symbol interposition reaches.
 *
 * How.  One userfaultfd per process (a VMA can belong to one only, so it
 * cannot be per endpoint), opened when the first cache needs it, with the
 * UNMAP, REMOVE (madvise DONTNEED/REMOVE) and REMAP (mremap) events.  Each
 * range the cache registers is registered with it in write-protect mode,
 * without ever write-protecting a page: no access to that memory ever
 * faults to us, only the three events arrive.  The kernel makes the thread
 * that unmaps wait until the event has been read, so a thread of ours reads
 * them (poll on the fd; all signals blocked in it) and records each range
 * in a ring, under a lock.  A cache takes the ranges recorded since its last
 * look under the same lock, before every lookup.  That closes the race:
 * munmap returns only once the event is read, the read happens under the
 * lock, so a lookup after munmap returned sees the range.  The lock is held
 * for a read() and a few stores, never while calling anything that might
 * unmap memory (a deregistration frees memory, a heap trim is an UNMAP
 * event, whose reader would wait for this lock: a deadlock), so ranges are
 * copied out and applied outside it.
 *
 * Ranges are never unregistered from the userfaultfd (another endpoint's
 * cache may cover the same pages): a range stays watched until it is
 * unmapped, at the cost of a VMA split and, on its unmap, a wake-up of our
 * thread.  The last endpoint's close stops the thread and closes the fd,
 * which releases every registration.  Where no userfaultfd can be had
 * (seccomp, kernels before 5.11 without vm.unprivileged_userfaultfd) or a
 * range cannot be watched (a file mapping), mr.c registers for the one
 * transfer instead of caching: slower, never wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nic/verbs/verbs_int.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define RING 256 /* ranges kept; a cache further behind drops everything */

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER; /* users, start/stop */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER; /* read() + ring */
static int users, ufd = -1, stopfd = -1;
static pthread_t thread;
static struct {
	uintptr_t lo, hi;
} ring[RING];
static uint64_t head;        /* ranges ever recorded (under ring_lock) */
static uint64_t events_seen; /* for tests: every event read */

static void record(uintptr_t lo, uintptr_t hi)
{
	ring[head % RING].lo = lo;
	ring[head % RING].hi = hi;
	head++;
}

/* Under ring_lock: every event queued now. */
static void drain(void)
{
	struct uffd_msg m[16];
	ssize_t n;

	while ((n = read(ufd, m, sizeof m)) > 0) {
		for (int i = 0; i < (int)(n / (ssize_t)sizeof m[0]); i++) {
			events_seen++;
			switch (m[i].event) {
			case UFFD_EVENT_UNMAP:
			case UFFD_EVENT_REMOVE:
				record(m[i].arg.remove.start, m[i].arg.remove.end);
				break;
			case UFFD_EVENT_REMAP:
				record(m[i].arg.remap.from,
				       m[i].arg.remap.from + m[i].arg.remap.len);
				break;
			case UFFD_EVENT_PAGEFAULT: {
				/* Never expected (no page is write-protected); if a
				 * kernel raises one, let the thread go on. */
				struct uffdio_writeprotect wp = {
				    .range = {m[i].arg.pagefault.address & ~4095ull, 4096},
				    .mode = 0};
				ioctl(ufd, UFFDIO_WRITEPROTECT, &wp);
				break;
			}
			default: break;
			}
		}
	}
}

static void *watch_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = {{ufd, POLLIN, 0}, {stopfd, POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents & POLLIN) {
			pthread_mutex_lock(&ring_lock);
			drain();
			pthread_mutex_unlock(&ring_lock);
		}
	}
	return NULL;
}

static int start(void)
{
	struct uffdio_api a = {.api = UFFD_API,
	                       .features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
	                                   UFFD_FEATURE_EVENT_REMAP};
	sigset_t all, old;
	int rc;

	ufd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (ufd < 0)
		ufd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (ufd < 0)
		return RCP_ENOTSUP;
	stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ioctl(ufd, UFFDIO_API, &a) || stopfd < 0)
		goto fail;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&thread, NULL, watch_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		goto fail;
	return 0;
fail:
	close(ufd);
	if (stopfd >= 0)
		close(stopfd);
	ufd = stopfd = -1;
	return RCP_ENOTSUP;
}

int rcpi_vb_watch_open(uint64_t *seq)
{
	int rc = 0;

	pthread_mutex_lock(&open_lock);
	if (!users)
		rc = start();
	if (!rc) {
		users++;
		pthread_mutex_lock(&ring_lock);
		*seq = head;
		pthread_mutex_unlock(&ring_lock);
	}
	pthread_mutex_unlock(&open_lock);
	return rc;
}

void rcpi_vb_watch_close(void)
{
	pthread_mutex_lock(&open_lock);
	if (users && !--users) {
		uint64_t one = 1;
		if (write(stopfd, &one, sizeof one) != sizeof one)
			pthread_cancel(thread);
		pthread_join(thread, NULL);
		close(ufd); /* releases every range registered with it */
		close(stopfd);
		ufd = stopfd = -1;
	}
	pthread_mutex_unlock(&open_lock);
}

int rcpi_vb_watch_add(uintptr_t lo, uintptr_t hi)
{
	struct uffdio_register r = {.range = {lo, hi - lo}, .mode = UFFDIO_REGISTER_MODE_WP};

	return ioctl(ufd, UFFDIO_REGISTER, &r) ? RCP_ENOTSUP : 0;
}

int rcpi_vb_watch_take(uint64_t *seq, uintptr_t (*out)[2], int max)
{
	int n = 0;

	pthread_mutex_lock(&ring_lock);
	if (head - *seq > RING) {
		*seq = head;
		n = -1; /* fell behind: the caller drops everything */
	}
	for (; n >= 0 && n < max && *seq < head; n++, (*seq)++) {
		out[n][0] = ring[*seq % RING].lo;
		out[n][1] = ring[*seq % RING].hi;
	}
	pthread_mutex_unlock(&ring_lock);
	return n;
}

uint64_t rcpi_vb_watch_events(void)
{
	uint64_t n;

	pthread_mutex_lock(&ring_lock);
	n = events_seen;
	pthread_mutex_unlock(&ring_lock);
	return n;
}
