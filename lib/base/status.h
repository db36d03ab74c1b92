/*
 * status.h - exit codes and error reports shared by lib/ and every tool.
 *
 * lib/ never prints and never exits: a function that can fail returns one of
 * the SW_E* codes below and fills a struct sw_err with a one-line message
 * ("tensor X: shape 3x4 disagrees with /config (4x4)"). Tools print it as
 * "sw-TOOL: FILE: message" and exit with the code (control bytes in a
 * message, from names in a file, are written \xNN). The codes are those of
 * <sysexits.h>, documented in every man page's EXIT STATUS.
 */
#ifndef SW_STATUS_H
#define SW_STATUS_H

enum sw_status {
	SW_OK = 0,
	SW_ECHECK = 1,       /* a --check found a violation */
	SW_EUSAGE = 64,      /* bad command line */
	SW_EDATA = 65,       /* bad data: not a scalewatch file, wrong shape, NaN */
	SW_ENOINPUT = 66,    /* cannot open input */
	SW_EUNAVAILABLE = 69,   /* a service the run needs is missing: no usable GPU */
	SW_ESOFTWARE = 70,   /* internal error (a bug, or out of memory) */
	SW_ECANTCREAT = 73,  /* cannot create output */
	SW_EIO = 74,         /* I/O error while reading or writing */
	SW_EINTERRUPTED = 130,  /* stopped by SIGINT after saving (128 + SIGINT, as a shell says) */
};

struct sw_err {
	int code;            /* one of enum sw_status */
	char msg[1024];
};

/* Set err (if not NULL) to code and a printf-style message; returns code. */
int sw_fail(struct sw_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix the message already in err with "prefix: " (adds context). */
void sw_err_prefix(struct sw_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The exit code for an errno value from open(2)/read(2): 66 or 74. */
int sw_errno_status(int errnum);

#endif
