/* table.c - TSV and JSON Lines output (see table.h). */
#include "table.h"
#include "jsonstrict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The bytes of s that print as they are, up to the first that needs an
 * escape: printable ASCII not in special, valid UTF-8 sequences. */
static size_t plain_run(const unsigned char *s, size_t left, const char *special)
{
	size_t i = 0;

	while (i < left) {
		int n = jsonstrict_utf8_len(s + i, left - i);
		if (n == 0 || s[i] < 0x20 || s[i] == 0x7f || (s[i] < 0x80 && strchr(special, s[i])))
			break;
		i += (size_t)n;
	}
	return i;
}

/* Write str: its plain runs as they are, each other byte through escape. */
static void put_escaped(FILE *f, const char *str, const char *special,
			void (*escape)(FILE *f, unsigned char c))
{
	const unsigned char *s = (const unsigned char *)str;
	size_t left = strlen(str);

	while (left) {
		size_t run = plain_run(s, left, special);
		fwrite(s, 1, run, f);
		s += run;
		left -= run;
		if (left) {
			escape(f, *s++);
			left--;
		}
	}
}

/*
 * A TSV cell: backslash escapes as PostgreSQL's COPY text format writes
 * them, so no cell spills into another and a terminal reading the table
 * runs no escape sequence: \t \n \r \\ by letter, every other control
 * byte (and DEL) and every byte that is not part of valid UTF-8 as \xNN.
 */
static void tsv_escape(FILE *f, unsigned char c)
{
	if (c == '\t')
		fputs("\\t", f);
	else if (c == '\n')
		fputs("\\n", f);
	else if (c == '\r')
		fputs("\\r", f);
	else if (c == '\\')
		fputs("\\\\", f);
	else
		fprintf(f, "\\x%02x", c);
}

/* A JSON string, valid whatever the bytes: control bytes escaped, a byte
 * that is not part of valid UTF-8 written as U+FFFD. */
static void json_escape(FILE *f, unsigned char c)
{
	if (c == '"' || c == '\\')
		fprintf(f, "\\%c", c);
	else if (c == '\n')
		fputs("\\n", f);
	else if (c == '\t')
		fputs("\\t", f);
	else if (c == '\r')
		fputs("\\r", f);
	else if (c < 0x20 || c == 0x7f)
		fprintf(f, "\\u%04x", c);
	else
		fputs("\\ufffd", f);
}

static void put_tsv_string(FILE *f, const char *s)
{
	put_escaped(f, s, "\\", tsv_escape);
}

static void put_json_string(FILE *f, const char *s)
{
	putc('"', f);
	put_escaped(f, s, "\"\\", json_escape);
	putc('"', f);
}

void table_init(struct table *t, FILE *out, enum table_format fmt,
		const char *const *cols, int ncols)
{
	t->out = out;
	t->fmt = fmt;
	t->cols = cols;
	t->ncols = ncols;
	t->col = 0;
	t->header_done = 0;
}

void table_header(struct table *t)
{
	if (t->header_done)
		return;
	t->header_done = 1;
	if (t->fmt != TABLE_TSV)
		return;
	for (int i = 0; i < t->ncols; i++) {
		if (i)
			putc('\t', t->out);
		fputs(t->cols[i], t->out);
	}
	putc('\n', t->out);
}

/* Start a cell: header first, separator, JSON key. */
static void cell(struct table *t)
{
	if (t->col == 0)
		table_header(t);
	if (t->fmt == TABLE_TSV) {
		if (t->col)
			putc('\t', t->out);
	} else {
		fputs(t->col ? ", " : "{", t->out);
		put_json_string(t->out, t->col < t->ncols ? t->cols[t->col] : "?");
		fputs(": ", t->out);
	}
	t->col++;
}

void table_str(struct table *t, const char *s)
{
	cell(t);
	if (t->fmt == TABLE_TSV)
		put_tsv_string(t->out, s);
	else
		put_json_string(t->out, s);
}

void table_int(struct table *t, int64_t v)
{
	cell(t);
	fprintf(t->out, "%lld", (long long)v);
}

void table_num(struct table *t, double v)
{
	cell(t);
	if (isfinite(v))
		fprintf(t->out, "%.9g", v);
	else if (t->fmt == TABLE_JSON)
		fputs("null", t->out);
	else if (!isnan(v))     /* NaN: unknown, an empty field */
		fputs(v > 0 ? "inf" : "-inf", t->out);
}

void table_double(struct table *t, double v)
{
	char buf[32];

	if (!isfinite(v)) {
		table_num(t, v);
		return;
	}
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(buf, sizeof buf, "%.*g", digits, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	cell(t);
	fputs(buf, t->out);
}

void table_empty(struct table *t)
{
	cell(t);
	if (t->fmt == TABLE_JSON)
		fputs("null", t->out);
}

void table_shape(struct table *t, int rank, const int64_t *shape)
{
	cell(t);
	if (t->fmt == TABLE_JSON)
		putc('[', t->out);
	for (int i = 0; i < rank; i++)
		fprintf(t->out, "%s%lld", i ? (t->fmt == TABLE_JSON ? ", " : "x") : "",
			(long long)shape[i]);
	if (t->fmt == TABLE_JSON)
		putc(']', t->out);
}

int table_end_row(struct table *t)
{
	if (t->fmt == TABLE_JSON)
		putc('}', t->out);
	putc('\n', t->out);
	t->col = 0;
	return ferror(t->out) ? -1 : 0;
}
