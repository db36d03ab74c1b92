/* status.c - error messages and exit codes (see status.h). */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sw_fail(struct sw_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

void sw_err_prefix(struct sw_err *err, const char *fmt, ...)
{
	char prefix[256], old[sizeof err->msg];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	if (snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old) >= (int)sizeof err->msg)
		err->msg[sizeof err->msg - 1] = '\0';   /* truncated, still a line */
}

int sw_errno_status(int errnum)
{
	switch (errnum) {
	case ENOENT: case EACCES: case EPERM: case ENOTDIR: case EISDIR:
	case ENAMETOOLONG: case ELOOP: case ENXIO: case ENODEV:
		return SW_ENOINPUT;
	default:
		return SW_EIO;
	}
}
