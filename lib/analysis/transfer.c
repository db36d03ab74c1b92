/* transfer.c - norm transfer across a sweep (see transfer.h). */
#include "transfer.h"
#include "../formats/ckpt.h"
#include "fit.h"
#include "norms.h"
#include "../files/trace.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void transfer_run_free(struct transfer_run *r)
{
	free(r->name);
	r->name = NULL;
}

static void run_init(struct transfer_run *r)
{
	memset(r, 0, sizeof *r);
	r->lr = r->batch = r->val_loss = r->train_loss = NAN;
	r->out_norm = r->out_norm_folded = r->loss = NAN;
}

/* Whether the checkpoint has any attribute of /optim. */
static int has_optim(struct ckpt *ck)
{
	static const char prefix[] = ATTRMAP_PREFIX "optim.";
	const struct attr_map *m;

	if (ckpt_attrs(ck, &m, NULL))
		return 0;
	for (size_t i = 0; i < m->n; i++)
		if (!strncmp(m->kv[i].key, prefix, sizeof prefix - 1))
			return 1;
	return 0;
}

/* /optim: the peak learning rate (lr_max; lr, the value at the step, when
 * there is no lr_max) and batch_size. */
static int read_optim(struct ckpt *ck, double *lr, double *batch, struct sw_err *err)
{
	static const char unknown[] = "give the run's lr and batch_size in a TSV on stdin, '-'";
	int rc, has_lr_max, has_lr = 0, has_batch;

	if ((rc = ckpt_attr_number(ck, "/optim", "lr_max", 0, lr, &has_lr_max, err)) ||
	    (!has_lr_max && (rc = ckpt_attr_number(ck, "/optim", "lr", 0, lr, &has_lr, err))) ||
	    (rc = ckpt_attr_number(ck, "/optim", "batch_size", 0, batch, &has_batch, err)))
		return rc;
	if (!has_optim(ck))
		return sw_fail(err, SW_EDATA, "no /optim group: the run's lr and batch_size are unknown (%s)",
			       unknown);
	if (!has_lr_max && !has_lr)
		return sw_fail(err, SW_EDATA, "/optim: missing attribute 'lr_max' (or 'lr') (%s)", unknown);
	if (!has_batch)
		return sw_fail(err, SW_EDATA, "/optim: missing attribute 'batch_size' (%s)", unknown);
	if (!(*lr > 0) || !isfinite(*lr) || !(*batch > 0) || !isfinite(*batch))
		return sw_fail(err, SW_EDATA, "/optim: lr %g and batch_size %g must be positive", *lr, *batch);
	return SW_OK;
}

int transfer_read_ckpt(const char *path, struct transfer_run *r, struct sw_err *err)
{
	struct head_norms hn;
	struct ckpt *ck = NULL;
	const struct ckpt_meta *m;
	int rc;

	run_init(r);
	if (!(r->name = strdup(path)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if ((rc = ckpt_open(path, &ck, err)))
		return rc;
	m = ckpt_meta(ck);
	if (!m->has_step) {
		/* an export of sw-convert keeps them in its metadata; others have none */
		rc = sw_fail(err, SW_EDATA,
			     "a safetensors checkpoint without scalewatch metadata has no /optim, tokens or loss: give its lr, batch, tokens, d_model, loss and out_norm in a TSV on stdin ('-')");
		goto out;
	}
	if (m->tokens < 0) {
		rc = sw_fail(err, SW_EDATA, "its step is known but not its tokens: give its lr, batch, tokens, "
			     "d_model, loss and out_norm in a TSV on stdin ('-')");
		goto out;
	}
	r->tokens = m->tokens;
	r->d_model = m->config.d_model;
	r->val_loss = m->val_loss;
	r->train_loss = m->train_loss;
	if (isnan(r->val_loss) && isnan(r->train_loss)) {
		rc = sw_fail(err, SW_EDATA, "no val_loss or train_loss in /metrics: a run without a loss cannot be ranked");
		goto out;
	}
	if (r->tokens <= 0) {
		rc = sw_fail(err, SW_EDATA, "tokens = %lld: the horizon must be positive", (long long)r->tokens);
		goto out;
	}
	if ((rc = read_optim(ck, &r->lr, &r->batch, err)))
		goto out;
	/* sw-norms' lm_head and lm_head_folded rows, to the last digit */
	rc = norms_output_head_ckpt(ck, NORMS_NO_SPECTRAL, &hn, err);
	r->out_norm = hn.raw.rms_to_inf;
	r->out_norm_folded = hn.folded.rms_to_inf;
out:
	ckpt_close(ck);
	return rc;
}

/* ---- from a trace ------------------------------------------------------ */

/* The series a trace's runs read, by name; the first four must be there. */
enum { TS_VAL_LOSS, TS_TOKENS, TS_OUT_NORM, TS_LOSS, TS_OUT_NORM_FOLDED, TS_COUNT };
static const char *const trace_series_names[TS_COUNT] = {
	"val_loss", "tokens", "out_norm", "loss", "out_norm_folded"
};
#define TS_REQUIRED TS_LOSS

static const char older[] = "a trace of an older sw-train: give the run's checkpoints";

/* /optim lr_max and batch_size of the trace, checked as a checkpoint's. */
static int trace_optim(struct trace_reader *t, double *lr, double *batch, struct sw_err *err)
{
	int rc, has_lr, has_batch;

	if ((rc = trace_attr_number(t, "/optim", "lr_max", lr, &has_lr, err)) ||
	    (rc = trace_attr_number(t, "/optim", "batch_size", batch, &has_batch, err)))
		return rc;
	if (!has_lr || !has_batch)
		return sw_fail(err, SW_EDATA, "no /optim %s: the run's lr and batch size are unknown (%s)",
			       !has_lr ? "lr_max" : "batch_size", older);
	if (!(*lr > 0) || !isfinite(*lr) || !(*batch > 0) || !isfinite(*batch))
		return sw_fail(err, SW_EDATA, "/optim: lr_max %g and batch_size %g must be positive", *lr, *batch);
	return SW_OK;
}

/* Row i of the trace as a run: r filled but for its name. */
static int trace_run(double *const v[TS_COUNT], int64_t i, int64_t step, struct transfer_run *r,
		     struct sw_err *err)
{
	double tokens = v[TS_TOKENS][i];

	r->val_loss = v[TS_VAL_LOSS][i];
	r->train_loss = v[TS_LOSS] ? v[TS_LOSS][i] : NAN;
	r->out_norm = v[TS_OUT_NORM][i];
	r->out_norm_folded = v[TS_OUT_NORM_FOLDED] ? v[TS_OUT_NORM_FOLDED][i] : NAN;
	if (!(tokens >= 1 && tokens < 9e18 && tokens == floor(tokens)))
		return sw_fail(err, SW_EDATA, "step %lld: tokens = %g: not a positive integer",
			       (long long)step, tokens);
	r->tokens = (int64_t)tokens;
	if (!isfinite(r->val_loss))
		return sw_fail(err, SW_EDATA, "step %lld: val_loss = %g", (long long)step, r->val_loss);
	if (!(r->out_norm > 0) || !isfinite(r->out_norm))
		return sw_fail(err, SW_EDATA, "step %lld: out_norm = %g: must be positive",
			       (long long)step, r->out_norm);
	if (!isnan(r->out_norm_folded) && !(r->out_norm_folded > 0 && isfinite(r->out_norm_folded)))
		return sw_fail(err, SW_EDATA, "step %lld: out_norm_folded = %g: must be positive",
			       (long long)step, r->out_norm_folded);
	return SW_OK;
}

int transfer_read_trace(const char *path, struct transfer_run **runs, size_t *n,
			struct sw_err *err)
{
	struct trace_reader *t = NULL;
	struct transfer_run *out = NULL;
	struct sw_config cfg;
	double *v[TS_COUNT] = {NULL}, lr, batch;
	int64_t *steps = NULL, rows = 0;
	size_t used = 0;
	int rc, present;

	*runs = NULL;
	*n = 0;
	if ((rc = trace_open(path, &t, err)))
		return rc;
	if ((rc = trace_read_config(t, &cfg, &present, err)))
		goto out;
	if (!present) {
		rc = sw_fail(err, SW_EDATA, "no /config: the trace does not say d_model");
		goto out;
	}
	if ((rc = trace_optim(t, &lr, &batch, err)))
		goto out;
	for (int k = 0; k < TS_COUNT; k++) {
		if ((rc = trace_read_series(t, trace_series_names[k], 0, &v[k], &present, err)))
			goto out;
		if (!present && k < TS_REQUIRED) {
			rc = sw_fail(err, SW_EDATA, "no series %s (%s)", trace_series_names[k], older);
			goto out;
		}
	}
	rows = trace_rows(t);
	steps = malloc((rows ? (size_t)rows : 1) * sizeof *steps);
	out = calloc(rows ? (size_t)rows : 1, sizeof *out);
	if (!steps || !out) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	/* the rows read are the run's: no other writer took the trace over */
	if ((rc = trace_read_steps(t, 0, rows, steps, err)) || (rc = trace_verify(t, err)))
		goto out;
	for (int64_t i = 0; i < rows; i++) {
		struct transfer_run *r = &out[used];
		if (isnan(v[TS_VAL_LOSS][i]) || v[TS_TOKENS][i] == 0)
			continue;       /* not an evaluation step, or before training: no horizon */
		run_init(r);
		r->lr = lr;
		r->batch = batch;
		r->d_model = cfg.d_model;
		if ((rc = trace_run(v, i, steps[i], r, err)))
			goto out;
		if (!(r->name = strdup(path))) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		used++;
	}
	if (!used)
		rc = sw_fail(err, SW_EDATA,
			     "no row has a validation loss (sw-train logs it at the evaluation steps that are trace steps: --eval-every a multiple of --trace-every)");
out:
	for (int k = 0; k < TS_COUNT; k++)
		free(v[k]);
	free(steps);
	trace_reader_close(t);
	if (rc) {
		for (size_t i = 0; i < used; i++)
			transfer_run_free(&out[i]);
		free(out);
		return rc;
	}
	*runs = out;
	*n = used;
	return SW_OK;
}

/* ---- a sweep directory ------------------------------------------------- */

void transfer_files_free(char **files, size_t n)
{
	for (size_t i = 0; files && i < n; i++)
		free(files[i]);
	free(files);
}

struct file_list {
	char **v;
	size_t n, cap;
};

static int list_add(struct file_list *l, char *path)
{
	if (l->n == l->cap) {
		size_t want = l->cap ? 2 * l->cap : 16;
		char **p = reallocarray(l->v, want, sizeof *p);
		if (!p)
			return -1;
		l->v = p;
		l->cap = want;
	}
	l->v[l->n++] = path;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files among the entries of dir, as dir/NAME, in name
 * order, and the directories in subdirs (none listed when NULL). */
static int list_dir(const char *dir, struct file_list *files, struct file_list *subdirs,
		    struct sw_err *err)
{
	DIR *d = opendir(dir);
	const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
	struct dirent *de;
	int rc = SW_OK;

	if (!d)   /* the top directory is named by the caller's message */
		return subdirs ? sw_fail(err, sw_errno_status(errno), "%s", strerror(errno))
			       : sw_fail(err, sw_errno_status(errno), "%s: %s", dir, strerror(errno));
	while ((errno = 0, de = readdir(d))) {
		struct file_list *to;
		struct stat st;
		char *path;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&path, "%s%s%s", dir, sep, de->d_name) < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			break;
		}
		/* only regular files and directories; a link is followed */
		to = stat(path, &st) < 0 ? NULL : S_ISDIR(st.st_mode) ? subdirs
		     : S_ISREG(st.st_mode) ? files : NULL;
		if (!to) {
			free(path);
		} else if (list_add(to, path)) {
			free(path);
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			break;
		}
	}
	if (!rc && errno)
		rc = subdirs ? sw_fail(err, SW_EIO, "%s", strerror(errno))
			     : sw_fail(err, SW_EIO, "%s: %s", dir, strerror(errno));
	closedir(d);
	if (files->n)
		qsort(files->v, files->n, sizeof *files->v, cmp_name);
	if (subdirs && subdirs->n)
		qsort(subdirs->v, subdirs->n, sizeof *subdirs->v, cmp_name);
	return rc;
}

/* One directory's runs into out: its traces, else its checkpoints. */
static int dir_runs(const char *dir, struct file_list *subdirs, struct file_list *out,
		    struct sw_err *err)
{
	struct file_list files = {0}, traces = {0}, ckpts = {0};
	struct file_list *keep;
	int rc;

	if ((rc = list_dir(dir, &files, subdirs, err)))
		goto out;
	for (size_t i = 0; i < files.n; i++) {
		char kind[32];
		struct file_list *to = trace_sniff(files.v[i], kind, sizeof kind) ? &traces
				       : !strcmp(kind, "checkpoint") ? &ckpts : NULL;
		if (to && list_add(to, files.v[i])) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
	}
	keep = traces.n ? &traces : &ckpts;
	for (size_t i = 0; i < keep->n; i++) {
		char *copy = strdup(keep->v[i]);
		if (!copy || list_add(out, copy)) {
			free(copy);
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
	}
out:
	transfer_files_free(files.v, files.n);
	free(traces.v);
	free(ckpts.v);
	return rc;
}

int transfer_dir_files(const char *dir, char ***files, size_t *n, struct sw_err *err)
{
	struct file_list out = {0}, subdirs = {0};
	int rc;

	*files = NULL;
	*n = 0;
	rc = dir_runs(dir, &subdirs, &out, err);
	for (size_t i = 0; !rc && i < subdirs.n; i++)
		rc = dir_runs(subdirs.v[i], NULL, &out, err);
	transfer_files_free(subdirs.v, subdirs.n);
	if (rc) {
		transfer_files_free(out.v, out.n);
		return rc;
	}
	*files = out.v;
	*n = out.n;
	return SW_OK;
}

/* ---- the TSV form ----------------------------------------------------- */

static const char *const required[] = {"lr", "batch", "tokens", "d_model", "loss", "out_norm"};
#define NREQUIRED (sizeof required / sizeof required[0])

/* Field i of a tab-separated line: start and length; -1 past the end. */
static int field(const char *line, int i, const char **start, size_t *len)
{
	const char *p = line;

	for (int k = 0; k < i; k++) {
		p = strchr(p, '\t');
		if (!p)
			return -1;
		p++;
	}
	*start = p;
	*len = strcspn(p, "\t\r\n");
	return 0;
}

static int field_is(const char *s, size_t len, const char *name)
{
	return strlen(name) == len && !strncmp(s, name, len);
}

static void find_cols(const char *line, struct transfer_cols *c)
{
	int *slot[] = {&c->lr, &c->batch, &c->tokens, &c->d_model, &c->loss, &c->out_norm};
	const char *s;
	size_t len;

	c->lr = c->batch = c->tokens = c->d_model = c->loss = c->out_norm = -1;
	c->out_norm_folded = c->loss_kind = c->file = -1;
	c->ncols = 0;
	for (int i = 0; field(line, i, &s, &len) == 0; i++) {
		c->ncols = i + 1;
		for (size_t k = 0; k < NREQUIRED; k++)
			if (field_is(s, len, required[k]) && *slot[k] < 0)
				*slot[k] = i;
		if (field_is(s, len, "out_norm_folded") && c->out_norm_folded < 0)
			c->out_norm_folded = i;
		if (field_is(s, len, "file") && c->file < 0)
			c->file = i;
		if (field_is(s, len, "loss_kind") && c->loss_kind < 0)
			c->loss_kind = i;
	}
}

int transfer_table_header(const char *line, struct transfer_cols *c)
{
	find_cols(line, c);
	return c->lr >= 0 && c->batch >= 0 && c->tokens >= 0 && c->d_model >= 0 &&
	       c->loss >= 0 && c->out_norm >= 0;
}

void transfer_table_missing(const char *line, char *buf, size_t len)
{
	struct transfer_cols c;
	size_t used = 0;

	find_cols(line, &c);
	const int at[NREQUIRED] = {c.lr, c.batch, c.tokens, c.d_model, c.loss, c.out_norm};
	buf[0] = '\0';
	for (size_t k = 0; k < NREQUIRED; k++) {
		int w;
		if (at[k] >= 0)
			continue;
		w = snprintf(buf + used, len - used, "%s%s", used ? " " : "", required[k]);
		if (w < 0 || (size_t)w >= len - used)
			return;
		used += (size_t)w;
	}
}

/* A number cell: "" and nan are NaN (unknown). -1 if it is not a number. */
static int cell_number(const char *line, int col, double *v)
{
	char buf[64], *end;
	const char *s;
	size_t len;

	*v = NAN;
	if (field(line, col, &s, &len) < 0)
		return -1;
	if (len == 0)
		return 0;
	if (len >= sizeof buf)
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	*v = strtod(buf, &end);
	return *end || errno == ERANGE ? -1 : 0;
}

int transfer_table_row(const struct transfer_cols *c, const char *line,
		       size_t lineno, struct transfer_run *r, struct sw_err *err)
{
	const struct { const char *name; int col; double *dst; int positive; } num[] = {
		{"lr", c->lr, &r->lr, 1}, {"batch", c->batch, &r->batch, 1},
		{"loss", c->loss, &r->val_loss, 0}, {"out_norm", c->out_norm, &r->out_norm, 1},
	};
	double tokens, d_model;
	const char *s;
	size_t len;

	run_init(r);
	r->from_table = 1;
	strcpy(r->loss_kind, "loss");
	if (c->loss_kind >= 0 && field(line, c->loss_kind, &s, &len) == 0 && len > 0 &&
	    len < sizeof r->loss_kind) {
		memcpy(r->loss_kind, s, len);
		r->loss_kind[len] = '\0';
	}
	if (c->file >= 0 && field(line, c->file, &s, &len) == 0 && len > 0)
		r->name = strndup(s, len);
	else if (asprintf(&r->name, "-: line %zu", lineno) < 0)
		r->name = NULL;
	if (!r->name)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t k = 0; k < sizeof num / sizeof num[0]; k++) {
		if (cell_number(line, num[k].col, num[k].dst) < 0)
			return sw_fail(err, SW_EDATA, "%s is not a number", num[k].name);
		if (isnan(*num[k].dst))
			return sw_fail(err, SW_EDATA, "no %s%s", num[k].name,
				       !strcmp(num[k].name, "loss")
				       ? ": a run without a loss cannot be ranked" : "");
		if (!isfinite(*num[k].dst) || (num[k].positive && !(*num[k].dst > 0)))
			return sw_fail(err, SW_EDATA, "%s = %g: must be %s", num[k].name,
				       *num[k].dst, num[k].positive ? "positive" : "finite");
	}
	if (cell_number(line, c->tokens, &tokens) < 0 || cell_number(line, c->d_model, &d_model) < 0)
		return sw_fail(err, SW_EDATA, "tokens or d_model is not a number");
	if (!(tokens >= 1 && tokens < 9e18 && tokens == floor(tokens)) ||
	    !(d_model >= 1 && d_model < 9e18 && d_model == floor(d_model)))
		return sw_fail(err, SW_EDATA, "tokens = %g, d_model = %g: must be positive integers",
			       tokens, d_model);
	r->tokens = (int64_t)tokens;
	r->d_model = (int64_t)d_model;
	if (c->out_norm_folded >= 0) {
		if (cell_number(line, c->out_norm_folded, &r->out_norm_folded) < 0 ||
		    (!isnan(r->out_norm_folded) && !(r->out_norm_folded > 0 && isfinite(r->out_norm_folded))))
			return sw_fail(err, SW_EDATA, "out_norm_folded is not a positive number");
	}
	return SW_OK;
}

/* ---- grouping and optima --------------------------------------------- */

static int run_cmp(const void *pa, const void *pb)
{
	const struct transfer_run *a = pa, *b = pb;

	if (a->d_model != b->d_model)
		return a->d_model < b->d_model ? -1 : 1;
	if (a->tokens != b->tokens)
		return a->tokens < b->tokens ? -1 : 1;
	if (a->batch != b->batch)
		return a->batch < b->batch ? -1 : 1;
	if (a->lr != b->lr)
		return a->lr < b->lr ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The loss the group ranks by: val_loss when every run has one, else
 * train_loss when every run has one, else each run's val, else train. */
static void choose_loss(struct transfer_run *runs, struct transfer_group *g)
{
	int all_val = 1, all_train = 1;

	for (size_t i = g->first; i < g->first + g->runs; i++) {
		all_val &= !isnan(runs[i].val_loss);
		all_train &= !isnan(runs[i].train_loss);
	}
	g->loss_kind = all_val ? "val_loss" : all_train ? "train_loss" : "mixed";
	if (runs[g->first].from_table) {
		/* a TSV says what its loss is, or nothing */
		g->loss_kind = runs[g->first].loss_kind;
		for (size_t i = g->first; i < g->first + g->runs; i++)
			if (strcmp(runs[i].loss_kind, g->loss_kind))
				g->loss_kind = "loss";
	}
	for (size_t i = g->first; i < g->first + g->runs; i++) {
		struct transfer_run *r = &runs[i];
		r->loss = all_val || (!all_train && !isnan(r->val_loss)) ? r->val_loss : r->train_loss;
	}
}

/*
 * The optimum of a group: its lowest loss (the first in sort order on
 * ties). At the optimum's batch, the best run of each lr; with refine and
 * a neighbour on each side, the parabola in log2 lr through the three
 * gives lr* and the loss there, and log2 of the norms is interpolated
 * through the same three points.
 */
static void find_optimum(struct transfer_run *runs, struct transfer_group *g, int refine)
{
	size_t best = g->first, below = SIZE_MAX, above = SIZE_MAX;
	struct transfer_run *b;

	for (size_t i = g->first; i < g->first + g->runs; i++)
		if (runs[i].loss < runs[best].loss)
			best = i;
	b = &runs[best];
	b->optimal = 1;
	/* the nearest lr on each side at the same batch, each its best run */
	for (size_t i = g->first; i < g->first + g->runs; i++) {
		const struct transfer_run *r = &runs[i];
		if (r->batch != b->batch || r->lr == b->lr)
			continue;
		if (r->lr < b->lr && (below == SIZE_MAX || r->lr > runs[below].lr ||
				      (r->lr == runs[below].lr && r->loss < runs[below].loss)))
			below = i;
		if (r->lr > b->lr && (above == SIZE_MAX || r->lr < runs[above].lr ||
				      (r->lr == runs[above].lr && r->loss < runs[above].loss)))
			above = i;
	}
	g->best = best;
	g->lr = b->lr;
	g->batch = b->batch;
	g->loss = b->loss;
	g->out_norm = b->out_norm;
	g->out_norm_folded = b->out_norm_folded;
	g->bracketed = below != SIZE_MAX && above != SIZE_MAX;
	g->refined = 0;
	if (refine && g->bracketed) {
		const struct transfer_run *p[3] = {&runs[below], b, &runs[above]};
		double x[3], y[3], n[3], nf[3], xv, yv;
		for (int k = 0; k < 3; k++) {
			x[k] = log2(p[k]->lr);
			y[k] = p[k]->loss;
			n[k] = log2(p[k]->out_norm);
			nf[k] = log2(p[k]->out_norm_folded);
		}
		if (fit_parabola_vertex(x, y, &xv, &yv) == 0) {
			g->lr = exp2(xv);
			g->loss = yv;
			g->out_norm = exp2(fit_interp3(x, n, xv));
			g->out_norm_folded = exp2(fit_interp3(x, nf, xv));  /* NaN stays NaN */
			g->refined = 1;
		}
	}
}

int transfer_analyze(struct transfer_run *runs, size_t n, const struct transfer_opts *o,
		     struct transfer_group **groups, size_t *ngroups, struct sw_err *err)
{
	struct transfer_group *gs;
	size_t ng = 0;

	*groups = NULL;
	*ngroups = 0;
	if (n == 0)
		return sw_fail(err, SW_EDATA, "no runs");
	qsort(runs, n, sizeof *runs, run_cmp);
	gs = calloc(n, sizeof *gs);
	if (!gs)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct transfer_group *g = ng ? &gs[ng - 1] : NULL;
		const struct transfer_run *lead = g ? &runs[g->first] : NULL;
		if (!g || runs[i].d_model != lead->d_model ||
		    (double)runs[i].tokens > (double)lead->tokens * (1 + o->horizon_tol)) {
			g = &gs[ng++];
			g->d_model = runs[i].d_model;
			g->first = i;
		}
		g->runs++;
		runs[i].group = ng - 1;
	}
	for (size_t k = 0; k < ng; k++) {
		struct transfer_group *g = &gs[k];
		double logsum = 0;
		for (size_t i = g->first; i < g->first + g->runs; i++)
			logsum += log((double)runs[i].tokens);
		g->tokens = llround(exp(logsum / (double)g->runs));
		if (g->runs == 1 || runs[g->first].tokens == runs[g->first + g->runs - 1].tokens)
			g->tokens = runs[g->first].tokens;   /* exact, not through exp(log) */
		choose_loss(runs, g);
		find_optimum(runs, g, o->refine);
	}
	*groups = gs;
	*ngroups = ng;
	return SW_OK;
}

/* ---- across groups ---------------------------------------------------- */

/* mean, sample standard deviation and max - min of log2 v[i]; which
 * entries are the smallest and largest. */
static void log2_stats(const double *v, size_t n, double *mean, double *sd, double *spread,
		       size_t *imin, size_t *imax)
{
	double s = 0, ss = 0;

	*imin = *imax = 0;
	for (size_t i = 0; i < n; i++) {
		s += log2(v[i]);
		if (v[i] < v[*imin])
			*imin = i;
		if (v[i] > v[*imax])
			*imax = i;
	}
	*mean = s / (double)n;
	for (size_t i = 0; i < n; i++)
		ss += (log2(v[i]) - *mean) * (log2(v[i]) - *mean);
	*sd = n > 1 ? sqrt(ss / (double)(n - 1)) : NAN;
	*spread = log2(v[*imax]) - log2(v[*imin]);
}

static size_t runs_in(const struct transfer_group *g, const size_t *idx, size_t n)
{
	size_t runs = 0;

	for (size_t i = 0; i < n; i++)
		runs += g[idx[i]].runs;
	return runs;
}

int transfer_summarize(const struct transfer_group *g, size_t ng, int64_t d_model,
		       struct transfer_summary *s, struct sw_err *err)
{
	double *norm = malloc((ng ? ng : 1) * sizeof *norm), *folded = malloc((ng ? ng : 1) * sizeof *folded);
	double *x = malloc((ng ? ng : 1) * sizeof *x), *ylr = malloc((ng ? ng : 1) * sizeof *ylr);
	double *yb = malloc((ng ? ng : 1) * sizeof *yb);
	size_t *model = malloc((ng ? ng : 1) * sizeof *model), *idx = malloc((ng ? ng : 1) * sizeof *idx);
	size_t n = 0, nmodels = 0, imin, imax;
	int has_folded = 1, rc = SW_OK;
	struct fit_line flr, fb;

	memset(s, 0, sizeof *s);
	s->d_model = d_model;
	s->log2_norm_mean = s->log2_norm_sd = s->log2_norm_spread = NAN;
	s->log2_folded_mean = s->log2_folded_sd = s->log2_folded_spread = NAN;
	s->lr_exponent = s->lr_exponent_se = s->lr_prefactor = s->lr_r2 = NAN;
	s->batch_exponent = s->batch_exponent_se = s->batch_prefactor = s->batch_r2 = NAN;
	if (!norm || !folded || !x || !ylr || !yb || !model || !idx) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < ng; k++) {
		if (d_model >= 0 && g[k].d_model != d_model)
			continue;
		/* groups come sorted by d_model: a new size starts a new intercept */
		if (n == 0 || g[k].d_model != g[idx[n - 1]].d_model)
			nmodels++;
		idx[n] = k;
		s->unbracketed += !g[k].bracketed;
		model[n] = nmodels - 1;
		norm[n] = g[k].out_norm;
		folded[n] = g[k].out_norm_folded;
		has_folded &= !isnan(folded[n]);
		x[n] = log2((double)g[k].tokens);
		ylr[n] = log2(g[k].lr);
		yb[n] = log2(g[k].batch);
		n++;
	}
	s->groups = n;
	if (n == 0) {
		rc = sw_fail(err, SW_EDATA, "no group of d_model %lld", (long long)d_model);
		goto out;
	}
	log2_stats(norm, n, &s->log2_norm_mean, &s->log2_norm_sd, &s->log2_norm_spread, &imin, &imax);
	s->norm_min = idx[imin];
	s->norm_max = idx[imax];
	if (has_folded) {
		log2_stats(folded, n, &s->log2_folded_mean, &s->log2_folded_sd, &s->log2_folded_spread,
			   &imin, &imax);
		s->folded_min = idx[imin];
		s->folded_max = idx[imax];
	}
	if (n == nmodels) {
		rc = sw_fail(err, SW_EDATA,
			     "cannot fit lr*(D) and batch*(D): %s one horizon (%zu run%s in all): a power law in D needs two or more",
			     nmodels == 1 ? "the sweep has" : "each model size has", runs_in(g, idx, n),
			     runs_in(g, idx, n) == 1 ? "" : "s");
		goto out;
	}
	if ((rc = fit_line_grouped(x, ylr, model, n, nmodels, &flr, err)) ||
	    (rc = fit_line_grouped(x, yb, model, n, nmodels, &fb, err))) {
		sw_err_prefix(err, "cannot fit lr*(D) and batch*(D)");
		goto out;
	}
	s->fit_ok = 1;
	s->lr_exponent = flr.slope;
	s->lr_exponent_se = flr.slope_se;
	s->lr_r2 = flr.r2;
	s->batch_exponent = fb.slope;
	s->batch_exponent_se = fb.slope_se;
	s->batch_r2 = fb.r2;
	if (nmodels == 1 && (rc = fit_line(x, ylr, n, &flr, err)) == SW_OK &&
	    (rc = fit_line(x, yb, n, &fb, err)) == SW_OK) {
		s->lr_prefactor = exp2(flr.intercept);
		s->batch_prefactor = exp2(fb.intercept);
	}
out:
	free(norm);
	free(folded);
	free(x);
	free(ylr);
	free(yb);
	free(model);
	free(idx);
	return rc;
}
