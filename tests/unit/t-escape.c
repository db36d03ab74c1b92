/* Unit tests of what names from files become on output: lib/base/table.c's
 * TSV and JSON cells, lib/base/status.c's one-line messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/status.h"
#include "../../lib/base/table.h"
#include "tap.h"

/* One row of one string cell, as TSV or JSON. */
static char *cell(enum table_format fmt, const char *s)
{
	static const char *const cols[] = {"name"};
	struct table t;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	table_init(&t, f, fmt, cols, 1);
	table_str(&t, s);
	table_end_row(&t);
	fclose(f);
	return buf;
}

int main(void)
{
	/* every byte a name could hold that must not reach a table raw */
	const char *name = "a\tb\nc\rd\\e\x1b[31m\x01\x7f\xff\xc3\xa9\xe2\x82";
	struct sw_err err;
	char *s;

	s = cell(TABLE_TSV, name);
	ok(!strcmp(s, "name\na\\tb\\nc\\rd\\\\e\\x1b[31m\\x01\\x7f\\xff\xc3\xa9\\xe2\\x82\n"),
	   "TSV: \\t \\n \\r \\\\ by letter, control bytes, DEL and invalid UTF-8 as \\xNN, UTF-8 kept");
	free(s);
	s = cell(TABLE_JSON, name);
	ok(!strcmp(s, "{\"name\": \"a\\tb\\nc\\rd\\\\e\\u001b[31m\\u0001\\u007f\\ufffd\xc3\xa9\\ufffd\\ufffd\"}\n"),
	   "JSON: control bytes as \\u00NN, invalid UTF-8 as U+FFFD, UTF-8 kept: %s", s);
	free(s);
	s = cell(TABLE_JSON, "q\"uote");
	ok(!strcmp(s, "{\"name\": \"q\\\"uote\"}\n"), "JSON: a quote escaped");
	free(s);

	sw_fail(&err, SW_EDATA, "%s: unknown dtype", "x\x1b]0;t\x07\ny\r");
	ok(!strcmp(err.msg, "x\\x1b]0;t\\x07\\x0ay\\x0d: unknown dtype"),
	   "a message: control bytes as \\xNN, one line: %s", err.msg);
	sw_err_prefix(&err, "%s", "tensor\x7f");
	ok(!strcmp(err.msg, "tensor\\x7f: x\\x1b]0;t\\x07\\x0ay\\x0d: unknown dtype"),
	   "a prefix escaped too, the rest not twice: %s", err.msg);
	{
		char long_name[600];
		memset(long_name, '\x1b', sizeof long_name - 1);
		long_name[sizeof long_name - 1] = '\0';
		sw_fail(&err, SW_EDATA, "%s", long_name);
		ok(strlen(err.msg) < sizeof err.msg && strlen(err.msg) % 4 == 0 &&
		   !strchr(err.msg, '\x1b'), "a message of control bytes cut whole escapes, no raw byte");
	}
	return tap_done();
}
