/*
 * table.h - the output every tool prints: TSV with one header line, or
 * JSON Lines with the same field names (--json).
 *
 * Numbers are printed with %.9g (enough to round-trip a float32); integers
 * exactly. NaN is an unknown value, in every tool: like an empty cell it
 * is an empty field in TSV and null in JSON; infinities print as inf and
 * -inf in TSV and null in JSON (which has no number for them).
 * Strings (names come from files of strangers) are escaped so that a cell
 * never spills and a terminal runs nothing: in TSV as PostgreSQL's COPY
 * text writes them, \t \n \r \\ by letter, other control bytes, DEL and
 * bytes outside valid UTF-8 as \xNN; in JSON control bytes as \u00NN and
 * a byte outside valid UTF-8 as U+FFFD, so every line is valid JSON.
 */
#ifndef SW_TABLE_H
#define SW_TABLE_H

#include <stdint.h>
#include <stdio.h>

enum table_format { TABLE_TSV, TABLE_JSON };

struct table {
	FILE *out;
	enum table_format fmt;
	const char *const *cols;
	int ncols;
	int col;                /* next column of the current row */
	int header_done;
};

void table_init(struct table *t, FILE *out, enum table_format fmt,
		const char *const *cols, int ncols);

/* The cells of one row, left to right. */
void table_str(struct table *t, const char *s);
void table_int(struct table *t, int64_t v);
void table_num(struct table *t, double v);
/* A float64 value with the fewest digits (15 to 17) that read back to
 * the same double: 0.1 prints as 0.1, 123456789012 as 123456789012. */
void table_double(struct table *t, double v);
void table_empty(struct table *t);
void table_shape(struct table *t, int rank, const int64_t *shape);

/* End the row (the header goes out before the first row). Returns 0, or -1
 * if the stream has failed (errno tells why, EPIPE when a reader left). */
int table_end_row(struct table *t);

/* Print the TSV header now even if no row follows (an empty table). */
void table_header(struct table *t);

#endif
