/*
 * rcpio/pmap.h — peers' pool files mapped read-only on this host, for
 * reads from a mapped pool (rcpio/xfer.c; docs/rcpio.md).  Used by the
 * application thread alone.
 */
#ifndef RCPIO_PMAP_H
#define RCPIO_PMAP_H

#include <stdint.h>

struct rcpio_pmap;

/* The first NEED bytes of the pool file that process PID has open as
 * descriptor FD, mapped read-only, if that file is (DEV, INO): from
 * *LIST, or mapped now and added to it (*FRESH = 1).  NULL: not mapped
 * (no such descriptor, another file, too short, no memory). */
const unsigned char *rcpio_pmap_get(struct rcpio_pmap **list, uint64_t pid, uint64_t fd,
                                    uint64_t dev, uint64_t ino, uint64_t need, int *fresh);
/* Unmaps everything in *LIST. */
void rcpio_pmap_free(struct rcpio_pmap **list);

#endif
