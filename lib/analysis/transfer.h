/*
 * transfer.h - norm transfer across a sweep of runs (optimal-norm paper
 * section 3.2; docs/numerics.md): group the runs by model size
 * (d_model) and horizon D (tokens), find each group's loss-optimal
 * (lr, batch), the output layer's ||W_out||_{RMS->inf} there, raw and with
 * the final norm gain folded in (W_out diag(gamma), as sw-norms computes
 * both, lib/analysis/norms.h), how far log2 of that norm spreads across groups,
 * and the power laws eta*(D), B*(D) (lib/analysis/fit.h).
 *
 * A run comes from a checkpoint (transfer_read_ckpt: /optim lr_max and
 * batch_size, the root's tokens, /config d_model, /metrics val_loss and
 * train_loss, the head's norms), from each evaluation step of a trace
 * (transfer_read_trace: the same numbers, logged by sw-train at that
 * step: equal to its checkpoint's there), or from a row of a TSV with the
 * columns lr batch tokens d_model loss out_norm [out_norm_folded]
 * [loss_kind] [file] (transfer_table_*), so other tools' numbers can be
 * piped in.
 */
#ifndef SW_TRANSFER_H
#define SW_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

struct transfer_run {
	char *name;                     /* file, or "-:LINE"; malloc'd */
	double lr;                      /* eta: the peak learning rate (lr_max) */
	double batch;                   /* B: sequences per step */
	int64_t tokens;                 /* D: tokens seen */
	int64_t d_model;
	double val_loss, train_loss;    /* NaN: unknown (a TSV's loss is val_loss) */
	int from_table;
	char loss_kind[16];             /* a TSV's loss_kind column, else "loss" */
	double out_norm;                /* ||W_out||_{RMS->inf} */
	double out_norm_folded;         /* of W_out diag(gamma_final); NaN: no gain */
	/* set by transfer_analyze */
	double loss;                    /* the loss its group ranks by */
	size_t group;
	int optimal;                    /* the group's optimum */
};

/*
 * One checkpoint (scalewatch HDF5; a safetensors checkpoint has no /optim,
 * step or tokens: SW_EDATA saying to use the TSV form). SW_EDATA when it
 * has neither val_loss nor train_loss, no lr/lr_max or batch_size in
 * /optim, or no output head. r->name is path, copied.
 */
int transfer_read_ckpt(const char *path, struct transfer_run *r, struct sw_err *err);

/*
 * The runs of a trace (trace.h), one per row with a validation loss (an
 * evaluation step) after 0 tokens: lr and batch from its /optim lr_max and batch_size,
 * d_model from /config, tokens, val_loss, train_loss (series loss),
 * out_norm and out_norm_folded from that row's series (out_norm_folded
 * NaN where the trace has none: an older sw-train logged the raw norm
 * only). *runs malloc'd, each named path. As trace_open for the file;
 * SW_EDATA, one line naming what is missing, for a trace without those
 * attributes or series (an older sw-train), a row whose numbers are out
 * of range, or no row with a validation loss.
 */
int transfer_read_trace(const char *path, struct transfer_run **runs, size_t *n,
			struct sw_err *err);

/*
 * The files that hold the runs of a sweep directory (or of one run's
 * directory): in dir and in each directory in it (one level down), its
 * trace, or where it has none its checkpoints; told by content, in name
 * order. *files malloc'd (transfer_files_free), *n may be 0: dir holds
 * neither (a safetensors checkpoint's directory, say).
 */
int transfer_dir_files(const char *dir, char ***files, size_t *n, struct sw_err *err);
void transfer_files_free(char **files, size_t n);

/* The columns of a TSV header line. */
struct transfer_cols {
	int ncols;
	int lr, batch, tokens, d_model, loss, out_norm;         /* -1: absent */
	int out_norm_folded, loss_kind, file;                   /* optional */
};

/* Is line (without its newline) a header naming the required columns?
 * 1 and cols filled, or 0. */
int transfer_table_header(const char *line, struct transfer_cols *cols);

/* The missing required columns of a header line, in buf ("" if none). */
void transfer_table_missing(const char *line, char *buf, size_t len);

/* One row (line number lineno, for its name when it has no file column).
 * SW_EDATA naming the column that is missing, not a number, or out of range
 * (no loss: empty or nan). */
int transfer_table_row(const struct transfer_cols *cols, const char *line,
		       size_t lineno, struct transfer_run *r, struct sw_err *err);

void transfer_run_free(struct transfer_run *r);

struct transfer_opts {
	int refine;             /* parabola in log2 lr through the optimum and its neighbours */
	double horizon_tol;     /* tokens within this relative distance are one horizon */
};

struct transfer_group {
	int64_t d_model;
	int64_t tokens;         /* the geometric mean of its runs' tokens, rounded */
	size_t first, runs;     /* runs[first .. first+runs) after transfer_analyze */
	const char *loss_kind;  /* val_loss | train_loss | mixed (each run's val, else
				 * train); from a TSV its loss_kind when the runs agree, else loss */
	size_t best;            /* index of the optimal run */
	double lr, batch, loss; /* at the optimum (lr and loss refined when refined) */
	double out_norm, out_norm_folded;  /* there (interpolated when refined) */
	int bracketed;          /* the optimal lr has a smaller and a larger lr at its batch */
	int refined;
};

/*
 * Sort runs (d_model, tokens, batch, lr, name), group them and find each
 * group's optimum; *groups malloc'd. SW_EDATA if there is no run.
 */
int transfer_analyze(struct transfer_run *runs, size_t n, const struct transfer_opts *o,
		     struct transfer_group **groups, size_t *ngroups, struct sw_err *err);

struct transfer_summary {
	int64_t d_model;        /* -1: every model size */
	size_t groups;
	size_t unbracketed;     /* groups whose optimal lr is at the grid's edge: a
				 * bound, not a measured optimum, so a fit through
				 * them (an exponent of 0 +- 0 when every one is
				 * at the same edge) says little */
	size_t norm_min, norm_max;       /* groups with the smallest and largest norm */
	size_t folded_min, folded_max;   /* the same for the folded norm */
	double log2_norm_mean, log2_norm_sd, log2_norm_spread;  /* spread = max - min */
	double log2_folded_mean, log2_folded_sd, log2_folded_spread;  /* NaN if a group lacks it */
	/* log2 eta* = a + lr_exponent log2 D (one a per model size for -1) */
	int fit_ok;
	double lr_exponent, lr_exponent_se, lr_prefactor, lr_r2;
	double batch_exponent, batch_exponent_se, batch_prefactor, batch_r2;
};

/*
 * Across the groups of one model size (d_model), or all (-1; the fits then
 * share the exponents and give each size its own prefactor, left NaN).
 * The norm statistics are always filled; SW_EDATA when the fits cannot be
 * made (fewer than two horizons), with fit_ok = 0 and the fits NaN.
 */
int transfer_summarize(const struct transfer_group *g, size_t ng, int64_t d_model,
		       struct transfer_summary *s, struct sw_err *err);

#endif
