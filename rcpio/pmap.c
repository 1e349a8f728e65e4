/*
 * rcpio/pmap.c — peers' pool files mapped read-only (pmap.h).
 *
 * On shm a pull is a process_vm_readv: the kernel pins the owner's pages
 * and copies, 4.5 GB/s on this machine for 1 MiB against 13 GB/s for a
 * memcpy from a mapping already faulted in (docs/results.md, session 20).
 * Where the client nic says every peer is a process of this host and of
 * our uid (RCP_NIC_CAP_SHARED_SEG: a capability, never a guess from
 * names or addresses), a requester maps the owner's pool file read-only
 * once — opened through /proc/PID/fd/FD, which needs the same permission
 * as process_vm_readv, and used only if the file is the one the owner
 * published (device and inode; a pid reused by another process has no
 * such descriptor) — and a read is a memcpy from that mapping, then the
 * tag: the same one-sided protocol as a pull (data first, tag second, an
 * acquire fence between them so the tag's load is not done before the
 * data's), the owner still doing nothing.  Anything that fails (no
 * capability, /proc refused, another file) leaves the peer on bulk.
 * A mapping lives until rcpio_net_stop, so the pages a first read faulted
 * in stay mapped after a close and re-open of the file.  (The owner's
 * pool file keeps its size while the owner lives: it is locked; a file
 * shrunk under a mapping would fault on access.)  The protocol's side —
 * the capability, the copy, the fence, the tag — is rcpio/xfer.c's
 * rcpio_net_pull; this file only maps. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rcpio/pmap.h"

/* A mapping is kept until rcpio_pmap_free (rcpio_net_stop), so a re-open
 * finds its pages mapped. */
struct rcpio_pmap {
	struct rcpio_pmap *next;
	uint64_t dev, ino;
	void *base;
	size_t len;
};

const unsigned char *rcpio_pmap_get(struct rcpio_pmap **list, uint64_t pid, uint64_t fd,
                                    uint64_t dev, uint64_t ino, uint64_t need, int *fresh)
{
	struct rcpio_pmap *m;
	struct stat st;
	char path[64];
	void *base;
	int f;

	*fresh = 0;
	for (m = *list; m; m = m->next)
		if (m->dev == dev && m->ino == ino && m->len >= need)
			return m->base;
	snprintf(path, sizeof path, "/proc/%llu/fd/%llu", (unsigned long long)pid,
	         (unsigned long long)fd);
	if ((f = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	if (fstat(f, &st) || (uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino ||
	    (uint64_t)st.st_size < need || !(m = calloc(1, sizeof *m))) {
		close(f);
		return NULL;
	}
	base = mmap(NULL, (size_t)need, PROT_READ, MAP_SHARED, f, 0);
	close(f);
	if (base == MAP_FAILED) {
		free(m);
		return NULL;
	}
	*m = (struct rcpio_pmap){*list, dev, ino, base, (size_t)need};
	*list = m;
	*fresh = 1;
	return base;
}

void rcpio_pmap_free(struct rcpio_pmap **list)
{
	while (*list) {
		struct rcpio_pmap *m = *list;
		*list = m->next;
		munmap(m->base, m->len);
		free(m);
	}
}
