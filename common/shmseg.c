/*
 * common/shmseg.c — may this process trust a shared-memory segment?
 *
 * POSIX shm names live in one directory that every user may write
 * (/dev/shm, sticky): another user can create a name before us
 * (squatting), and a file that others may write can say anything.  A
 * segment is trusted only if it is a regular file of our effective uid
 * that nobody else may open (mode 0600 or stricter).  Used by nic/shm/'s
 * segments and rpc/rfp.c's remote fetch segments.  Slow paths only.
 */
#include "rcp_common.h"

#include <sys/stat.h>
#include <unistd.h>

const char *rcpi_shm_dir(void)
{
	const char *dir = rcpi_env_str("RCP_SHM_DIR");
	return dir && *dir ? dir : "/dev/shm";
}

int rcpi_shm_trusted(const struct stat *st, const char *who, const char *name)
{
	if (S_ISREG(st->st_mode) && st->st_uid == geteuid() && !(st->st_mode & 077))
		return 0;
	rcpi_err("%s: %s%s is %s owned by uid %u, mode %04o; refusing it (expected a file of uid "
	         "%u, mode 0600: another user may have created the name first)",
	         who, rcpi_shm_dir(), name,
	         S_ISREG(st->st_mode)   ? "a file"
	         : S_ISLNK(st->st_mode) ? "a symlink"
	                                : "not a file",
	         (unsigned)st->st_uid, (unsigned)(st->st_mode & 0777), (unsigned)geteuid());
	return RCP_EPERM;
}
