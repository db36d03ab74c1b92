/* status.c - error messages and exit codes (see status.h). */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/*
 * A message is one line, and names in it come from files of strangers:
 * control bytes and DEL become \xNN, so no name breaks the line or sends
 * a terminal an escape sequence.
 */
static void escape_controls(char *msg, size_t cap)
{
	char out[sizeof ((struct sw_err *)0)->msg];
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)msg; *p && o + 1 < sizeof out; p++) {
		if (*p >= 0x20 && *p != 0x7f) {
			out[o++] = (char)*p;
		} else if (o + 5 < sizeof out) {
			snprintf(out + o, 5, "\\x%02x", *p);
			o += 4;
		} else {
			break;
		}
	}
	out[o] = '\0';
	snprintf(msg, cap, "%s", out);
}

int sw_fail(struct sw_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		escape_controls(err->msg, sizeof err->msg);
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
	escape_controls(err->msg, sizeof err->msg);
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
