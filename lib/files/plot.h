/*
 * plot.h - figures with gnuplot, where no file name and no cell of a table
 * can become a command.
 *
 * gnuplot runs a data file named "<cmd" through a shell, substitutes
 * `backquotes` and @macros in every command line it reads (eval'd strings
 * included), and an output named "|cmd" is a pipe. So no string of the
 * user's reaches a gnuplot command: the table is read here, checked (a
 * header holding the columns the figure needs, every row as wide as the
 * header, no NUL byte) and copied to data.tsv in a private directory made
 * with mkdtemp; gnuplot runs in that directory on that fixed name and
 * writes the figure to its stdout, which is copied to the caller's file.
 * The scripts (plots/KIND.gp) in turn never eval a string built from the
 * data: they splice only integers and their own literals into commands.
 */
#ifndef SW_PLOT_H
#define SW_PLOT_H

#include <limits.h>
#include <stddef.h>

#include "../base/status.h"

/* A figure kind: its script is plots/NAME.gp. */
struct plot_kind {
	const char *name;
	const char *columns;    /* the columns it needs, space-separated; a|b: either */
	const char *what;       /* what it shows, one line */
	const char *source;     /* the command that prints its table */
	const char *column;     /* the value column drawn unless --column names
	                           another; NULL: the kind takes no --column */
};

extern const struct plot_kind plot_kinds[];
extern const size_t plot_nkinds;

/* The kind called name, or NULL. */
const struct plot_kind *plot_kind_find(const char *name);

/* The format out's extension asks for ("png", "pdf", "svg"), or NULL. */
const char *plot_format(const char *out);

/* Is an executable gnuplot in $PATH? */
int plot_have_gnuplot(void);

/*
 * The absolute directory of the scripts: $SW_PLOTS_DIR, or found beside
 * the program (installed: ../share/scalewatch/plots; in the tree:
 * ../../plots). SW_ESOFTWARE when none holds common.gp.
 */
int plot_scripts_dir(char *dir, size_t len, struct sw_err *err);

/* The private directory gnuplot runs in, and what it holds. */
struct plot_stage {
	char dir[PATH_MAX];           /* made by mkdtemp in $TMPDIR or /tmp; "" when none */
	char data[PATH_MAX + 16];     /* dir/data.tsv: the checked copy of the table */
	char log[PATH_MAX + 16];      /* dir/gnuplot.err: what gnuplot said on stderr */
	int column;                   /* the value column's number (from 1), 0: none */
};

/*
 * Read the table at path ("-": stdin), check it for kind k and copy it
 * into a fresh stage. column names the value column of a kind that takes
 * one (NULL: the kind's default); it must be in the header, and its number
 * is kept in st->column (the scripts are given the number, never the
 * name). Every file of the stage is removed if a signal kills
 * the process (atomicfile.h) until plot_unstage. SW_ENOINPUT or SW_EIO
 * when it cannot be read, SW_EDATA (saying what is wrong, and for a
 * missing column the command that prints the right table) when it is not
 * a table the figure can use, SW_ECANTCREAT when the stage cannot be made.
 * On failure nothing is left behind.
 */
int plot_stage_table(const char *path, const struct plot_kind *k, const char *column,
		     struct plot_stage *st, struct sw_err *err);

/*
 * Run gnuplot on the stage's table with script (an absolute path) and
 * format (plot_format's answer), and write the figure it prints to out_fd
 * (out_name names it in messages). gnuplot reads no init file (-d). Every
 * byte gnuplot writes is read, even after a write failed, so it never
 * blocks. SW_EDATA with gnuplot's last line of complaint when it fails on
 * the table, SW_EIO when the figure cannot be written, SW_ESOFTWARE when
 * gnuplot cannot be run or dies of a signal.
 */
int plot_render(const struct plot_stage *st, const char *script, const char *format,
		int out_fd, const char *out_name, struct sw_err *err);

/* Remove the stage: its two files and the directory, which stays if
 * anything else appeared in it (nothing gnuplot runs may write there). */
void plot_unstage(struct plot_stage *st);

#endif
