/* table.c - TSV and JSON Lines output (see table.h). */
#include "table.h"
#include "jsonstrict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * A TSV cell: backslash escapes as PostgreSQL's COPY text format writes
 * them, so no cell spills into another and a terminal reading the table
 * runs no escape sequence: \t \n \r \\ by letter, every other control
 * byte (and DEL) and every byte that is not part of valid UTF-8 as \xNN.
 */
static void put_tsv_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t left = strlen(str);

	while (left) {
		int n = jsonstrict_utf8_len(s, left);
		if (*s == '\t')
			fputs("\\t", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else if (*s == '\r')
			fputs("\\r", f);
		else if (*s == '\\')
			fputs("\\\\", f);
		else if (*s < 0x20 || *s == 0x7f || n == 0)
			fprintf(f, "\\x%02x", *s);
		else
			fwrite(s, 1, (size_t)n, f);
		n = n ? n : 1;
		s += n;
		left -= (size_t)n;
	}
}

/* A JSON string, valid whatever the bytes: control bytes escaped, a byte
 * that is not part of valid UTF-8 written as U+FFFD. */
static void put_json_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t left = strlen(str);

	putc('"', f);
	while (left) {
		int n = jsonstrict_utf8_len(s, left);
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else if (*s == '\t')
			fputs("\\t", f);
		else if (*s == '\r')
			fputs("\\r", f);
		else if (*s < 0x20 || *s == 0x7f)
			fprintf(f, "\\u%04x", *s);
		else if (n == 0)
			fputs("\\ufffd", f);
		else
			fwrite(s, 1, (size_t)n, f);
		n = n ? n : 1;
		s += n;
		left -= (size_t)n;
	}
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
	else
		fputs(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", t->out);
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
