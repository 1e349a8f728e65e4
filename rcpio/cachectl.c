/*
 * rcpio/cachectl.c — rcpio-cachectl: inspect or drop rcpio pools.
 *
 * usage: rcpio-cachectl show POOL...   geometry, state, committed blocks per file
 *        rcpio-cachectl drop POOL...   removes the pool files
 * Show opens the pool as a job would (an unfinished transaction is rolled
 * back, bad entries dropped: said so in the output).  Dropping loses
 * nothing but the cache: committed blocks were written back before they
 * were committed.  A running job's pools are locked (rcpio_pool_open):
 * show says so, drop leaves them alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <rcp/error.h>

#include "rcpio/pool.h"

static int show(const char *path)
{
	struct rcpio_pool_cfg cfg;
	struct rcpio_pool_info info;
	rcpio_pool *p;
	uint32_t counts[RCPIO_NFILES] = {0}, orphans = 0, used = 0;
	int rc = rcpio_pool_geometry(path, &cfg);

	if (rc) {
		printf("%s: %s\n", path,
		       rc == RCP_EPROTO ? "not a valid rcpio pool" : "unreadable");
		return 1;
	}
	if ((rc = rcpio_pool_open(path, &cfg, &p, &info))) {
		printf("%s: cannot open: %s\n", path, rcp_strerror(rc));
		return 1;
	}
	for (uint32_t s = 0; s < cfg.nslots; s++) {
		uint64_t fid;
		int idx;
		if (rcpio_pool_committed(p, s, &fid, NULL, NULL))
			continue;
		used++;
		idx = rcpio_pool_file_find(p, fid);
		if (idx >= 0)
			counts[idx]++;
		else
			orphans++;
	}
	printf("%s: %u slots of %zu bytes, %u committed, %u free; %s%s%u bad entries dropped\n",
	       path, cfg.nslots, cfg.block, used, cfg.nslots - used,
	       info.rolled_back ? "an unfinished transaction rolled back, " : "",
	       info.refused ? "REFUSED and re-initialised, " : "", info.dropped);
	for (uint32_t i = 0; i < RCPIO_NFILES; i++) {
		struct rcpio_fident id;
		if (rcpio_pool_file_get(p, i, &id) || !id.fid)
			continue;
		printf("  %s: %u blocks (%llu bytes at commit, mtime %lld.%09lld)\n", id.path,
		       counts[i], (unsigned long long)id.size,
		       (long long)(id.mtime_ns / 1000000000),
		       (long long)(id.mtime_ns % 1000000000));
	}
	if (orphans)
		printf("  %u committed blocks of files not in the table\n", orphans);
	rcpio_pool_close(p);
	return 0;
}

int main(int argc, char **argv)
{
	int bad = 0;
	if (argc < 3 || (strcmp(argv[1], "show") && strcmp(argv[1], "drop"))) {
		fprintf(stderr, "usage: rcpio-cachectl show|drop POOL...\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[1], "show"))
			bad |= show(argv[i]);
		else {
			struct rcpio_pool_cfg cfg;
			int fd = -1;
			if (rcpio_pool_geometry(argv[i], &cfg)) {
				fprintf(stderr, "%s: not an rcpio pool; left alone\n", argv[i]);
				bad = 1;
			} else if ((fd = open(argv[i], O_RDONLY | O_CLOEXEC)) < 0 ||
			           flock(fd, LOCK_EX | LOCK_NB)) {
				fprintf(stderr, "%s: %s; left alone\n", argv[i],
				        fd >= 0 && errno == EWOULDBLOCK ? "in use by a running job"
				                                        : strerror(errno));
				bad = 1;
			} else if (unlink(argv[i])) {
				perror(argv[i]);
				bad = 1;
			} else
				printf("%s: dropped\n", argv[i]);
			if (fd >= 0)
				close(fd);
		}
	}
	return bad;
}
