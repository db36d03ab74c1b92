/*
 * trace.h - scalewatch trace v1: one HDF5 file per training run, appended
 * while the run goes (scalewatch-format(5), the trace).
 *
 * Root attributes scalewatch_format = "trace", format_version = 1, and
 * /config as in a checkpoint. Series are extendible chunked float64
 * datasets under /series/, all aligned with the int64 dataset /series/step:
 * row i of every series belongs to step[i]. A scalar series is 1-D; a
 * per-layer or per-head series is 2-D [rows, ncols] with an attribute
 * `columns` (an array of strings) naming its columns. /status (one int64)
 * is 0 while the writer runs and 1 once it has closed the trace.
 *
 * The writer uses HDF5's single-writer/multiple-reader mode (libver latest,
 * H5Fstart_swmr_write) and flushes after every append, so a reader opening
 * the file with trace_open sees every row up to the last flush, also after
 * the writer was killed with SIGKILL, without h5clear.
 *
 * The writer holds an fcntl(2) write lock on the file while it writes:
 * a second writer of the same file is refused, trace_reopen of a killed
 * run's trace knows no writer is left before it clears HDF5's "open for
 * writing" mark, and a reader can tell a writer that died (trace_abandoned)
 * from one that is still running. /session (one int64) is a number each
 * writer draws when it creates or reopens the trace and writes before it
 * changes any row: a reader that still sees the number it opened the
 * trace with knows the rows it read are the run it opened.
 */
#ifndef SW_TRACE_H
#define SW_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "../base/status.h"

struct trace_series {
	const char *name;               /* "loss", "residual_rms", ... */
	int ncols;                      /* 0: 1-D scalar series; else 2-D */
	const char *const *columns;     /* ncols names ("layer0", ...) or NULL */
};
/* Series names are not empty, not "step", and hold none of / . , TAB NL
 * (a column is selected as SERIES.COLUMN); column names hold none of
 * , TAB NL. columns NULL for a 2-D series names them "0", "1", ... */

/* ---- writer ---- */

struct trace_writer;

/* A number about the run as a whole, an attribute of a group of its own
 * (obj "/optim": the trainer's lr_max and batch_size). */
struct trace_attr {
	const char *obj, *name;
	int integer;                    /* stored as int64, else float64 */
	double value;
};

/*
 * Create path (replacing a regular file there, in place) with these
 * series, /config from cfg (may be NULL) and the nattrs attributes, then
 * switch to SWMR writing. No series or attribute may be added later.
 * SW_ECANTCREAT if the file cannot be created, another process is
 * writing it, or path is a symbolic link or a file of several names
 * (hard links), which is never written through;
 * SW_ESOFTWARE for a bad series list, or an attribute of the root,
 * /config or the writer's own datasets.
 */
int trace_create(const char *path, const struct sw_config *cfg,
		 const struct trace_attr *attrs, int nattrs,
		 const struct trace_series *series, int nseries,
		 struct trace_writer **out, struct sw_err *err);

/*
 * Reopen an existing trace to go on appending after a resume from a
 * checkpoint at keep_step: rows with step > keep_step are dropped. The
 * series (names, column counts) must be those of the file: SW_EDATA if not,
 * or if the file cannot be appended to (no /status, fixed-size series);
 * nothing is changed then.
 * Works on a trace whose writer was killed (HDF5's "open for writing" mark
 * is cleared, as h5clear -s does, once the lock shows no writer is left).
 * SW_ENOINPUT if there is no such file, SW_ECANTCREAT if another process
 * is writing it, or it is a symbolic link or a file of several names.
 */
int trace_reopen(const char *path, const struct trace_series *series,
		 int nseries, int64_t keep_step, struct trace_writer **out,
		 struct sw_err *err);

/*
 * Append one row at step: values[i] holds series i's values (1 for a
 * scalar series, ncols for a 2-D one; NaN for unknown), in the order the
 * series were given; values[i] == NULL: all unknown. Flushes the file
 * to the kernel before returning (a SIGKILL then loses nothing; there is
 * no fsync, so a power failure may). Steps must increase (SW_ESOFTWARE if not); SW_EIO if
 * the write fails (a retry rewrites the same row).
 */
int trace_append(struct trace_writer *w, int64_t step,
		 const double *const *values, struct sw_err *err);

/* Rows in the trace: those appended, after a reopen those kept too. */
int64_t trace_writer_rows(const struct trace_writer *w);

/* The last row's values of series i (in the order given; max(1, ncols)
 * of them) into out: after a reopen, where a resumed run goes on from
 * (its seconds); NaN when there is no row. SW_EIO if HDF5 fails. */
int trace_writer_last(const struct trace_writer *w, int i, double *out, struct sw_err *err);

/* Mark the trace finished (/status = 1), close, free w (also on failure;
 * w may be NULL). */
int trace_close(struct trace_writer *w, struct sw_err *err);

/* ---- reader ---- */

struct trace_reader;

/* Open for reading, as an SWMR reader (works on a live or killed run).
 * SW_ENOINPUT if it cannot be opened (or is no regular file: never
 * opened then), SW_EDATA if it is not a trace v1: no or another
 * scalewatch_format, another format_version, no /series/step, a series
 * that is no numeric 1-D or 2-D dataset, a 2-D series without a
 * `columns` attribute of ncols strings; or if it breaks a rule for files
 * from strangers (h5io.h): a soft or external link, a virtual dataset,
 * external storage, a filter this libhdf5 lacks, a row never written.
 * /status and /session are optional (a trace without /status counts as
 * finished). */
int trace_open(const char *path, struct trace_reader **out, struct sw_err *err);
void trace_reader_close(struct trace_reader *r);

/*
 * Is path a trace, by its content (the root's scalewatch_format is
 * "trace"), never by its name? 1 or 0; 0 also for anything trace_open
 * would refuse before it reads that attribute (no regular file, not HDF5,
 * unreadable): the reader the caller then opens says what is wrong.
 * kind (len bytes; may be NULL) gets the attribute's value, "checkpoint"
 * for a scalewatch checkpoint, or "" when there is none. Opened as
 * trace_open opens, and closed again.
 */
int trace_sniff(const char *path, char *kind, size_t len);

/*
 * The trace's /config (the model), checked as a checkpoint's is
 * (h5io_read_config). *present says whether the trace has one (c
 * untouched when not); SW_EDATA when it is there and wrong.
 */
int trace_read_config(struct trace_reader *r, struct sw_config *c, int *present,
		      struct sw_err *err);

/*
 * A numeric attribute about the run (obj "/optim", attr "lr_max"): *present
 * says whether it is there; SW_EDATA when it is there and not a number,
 * or obj is reached by a link that is not a hard link.
 */
int trace_attr_number(struct trace_reader *r, const char *obj, const char *attr, double *v,
		      int *present, struct sw_err *err);

int trace_nseries(const struct trace_reader *r);
const char *trace_series_name(const struct trace_reader *r, int i);
int trace_series_ncols(const struct trace_reader *r, int i);          /* 0: scalar */
const char *trace_column_name(const struct trace_reader *r, int i, int j);
int trace_find_series(const struct trace_reader *r, const char *name); /* -1 if none */

/* Rows every series has (the aligned length), as of the last refresh. */
int64_t trace_rows(const struct trace_reader *r);
/* Re-read the lengths of a live trace; *finished set when /status = 1.
 * SW_EIO when the trace is no longer the one opened: its name names
 * another file (or none), or another writer took it over (/session
 * changed, or rows were dropped: a resumed run reopened it), so that no
 * row of another run is ever read as this one's. New rows are checked to
 * be written, as trace_open checks all (SW_EDATA). */
int trace_refresh(struct trace_reader *r, int *finished, struct sw_err *err);
/* The same check of the name and /session alone: call it after reading
 * rows and before using them, so that rows read while another writer took
 * over are never used. */
int trace_verify(struct trace_reader *r, struct sw_err *err);
/* 1 when the trace was not finished at the last refresh and no process
 * holds the writer's lock now: its writer died without closing it
 * (SIGKILL). 0 while a writer runs, once finished, or when file locks are
 * not supported. Refresh after it to see the rows flushed before death. */
int trace_abandoned(const struct trace_reader *r);

/* Rows [row0, row0 + n) of step, or of series i (n x max(1, ncols) values,
 * row-major), as stored. */
int trace_read_steps(struct trace_reader *r, int64_t row0, int64_t n,
		     int64_t *steps, struct sw_err *err);
int trace_read(struct trace_reader *r, int i, int64_t row0, int64_t n,
	       double *out, struct sw_err *err);

/*
 * Every row (trace_rows) of the series called name, in *out (malloc'd,
 * rows x max(1, ncols) values, row-major) when *present; a series with
 * another number of columns than ncols (0: a scalar series) is SW_EDATA
 * naming both. *present 0 and *out NULL when the trace has no such series.
 */
int trace_read_series(struct trace_reader *r, const char *name, int ncols, double **out,
		      int *present, struct sw_err *err);

#endif
