/* common/log.c — one-line diagnostics on stderr, level from RCP_LOG. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/rcp_common.h"

int rcpi_log_level = RCPI_LOG_WARN;

void rcpi_log_init(void)
{
	const char *v = rcpi_env_str("RCP_LOG");
	static const char *const names[] = {"error", "warn", "info", "debug"};
	if (!v)
		return;
	for (int i = 0; i < 4; i++)
		if (!strcmp(v, names[i]))
			rcpi_log_level = i;
}

void rcpi_log(int level, const char *fmt, ...)
{
	static const char *const tag[] = {"error", "warn", "info", "debug"};
	char line[512];
	int n;
	va_list ap;

	if (level > rcpi_log_level)
		return;
	n = snprintf(line, sizeof line, "rcp[%d] %s: ", (int)getpid(), tag[level]);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	/* One write(2) so lines from several processes do not interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
