/*
 * sw-spectrum - singular-value spectra of every weight matrix of
 * checkpoints, for the spectra paper's checks: the full sorted spectrum,
 * a summary, a density, the top K values, spectra per attention head,
 * spectra divided by the equilibrium scale sqrt(lr/wd), and a power-law
 * fit of the top singular value across a sweep. Computed in lib/spectrum.c
 * (spectrum_full, spectrum_top, spectrum_summarize, spectrum_hist,
 * spectrum_equilibrium_scale) and lib/powerfit.c (powerfit_fit); this
 * reads the files and prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/ckpt.h"
#include "../lib/powerfit.h"
#include "../lib/spectrum.h"
#include "common.h"

static const char usage[] =
	"sw-spectrum [--json] [--normalize] [--per-head] [--block LIST] [--layer LIST]\n"
	"                   [--name GLOB] [--role LIST] [--top K] [--fit | --hist BINS | --summary]\n"
	"                   [FILE ...]";
static const char help[] =
	"Singular values of every weight matrix, one row per value per matrix per file:\n"
	"file step name block role layer index sigma (index 1 is the largest).\n"
	"\n"
	"  --summary      one row per matrix: sigma_max sigma_min stable_rank\n"
	"                 effective_rank condition frobenius count\n"
	"  --hist BINS    density of the sigma_i in BINS log-spaced bins:\n"
	"                 bin lo hi count density\n"
	"  --fit          across all files, per role: ln sigma_top and ln ||W||_rms\n"
	"                 fitted against ln(equilibrium scale) and ln d_model\n"
	"  --top K        only the K largest values (block Lanczos, relative error <= 1e-5)\n"
	"  --per-head     each head's slice of q, k, v (rows) and o (columns), column head\n"
	"  --normalize    sigma divided by the equilibrium scale: sqrt(lr/wd) (coupled\n"
	"                 weight decay) or lr/sqrt(wd) (independent)\n"
	TOOL_SELECT_HELP
	"See sw-spectrum(1).\n";

enum mode { MODE_VALUES, MODE_SUMMARY, MODE_HIST, MODE_FIT };

enum {
	OPT_SUMMARY = OPT_TOOL_FIRST, OPT_HIST, OPT_FIT, OPT_TOP, OPT_PER_HEAD, OPT_NORMALIZE
};

#define MAX_COLS 16

struct opts {
	enum mode mode;
	int per_head, normalize;
	int64_t top;            /* 0: every value */
	int bins;
};

/* One point of --fit: a matrix of one file. */
struct fit_point {
	char role[SW_ROLE_MAX];
	double sigma_top, rms, scale, d_model;
};

struct fit_set {
	struct fit_point *p;
	size_t n, cap;
};

struct run {
	struct tool *tl;
	struct table *tb;
	const struct opts *o;
	struct fit_set *fit;
	double t0;
	const char *file;
	struct ckpt *ck;
	size_t done, total;     /* matrices of this file, for progress */
	/* the embedding's spectrum, reused for a tied head */
	double *embed_s;
	int64_t embed_n;
	double embed_frob_sq;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The identifying cells every row starts with. */
static void row_start(struct run *r, const struct sw_tensor_info *t, int64_t head)
{
	const struct ckpt_meta *m = ckpt_meta(r->ck);

	table_str(r->tb, r->file);
	if (m->has_step)
		table_int(r->tb, m->step);
	else
		table_empty(r->tb);
	table_str(r->tb, t->name);
	table_str(r->tb, sw_block_name(t->block));
	table_str(r->tb, t->role);
	table_int(r->tb, t->layer);
	if (r->o->per_head)
		table_int(r->tb, head);
}

/* Print the spectrum s (n values, descending, already divided by the
 * scale) of tensor t (head, or -1) as the mode asks. */
static void print_spectrum(struct run *r, const struct sw_tensor_info *t, int64_t head,
			   const double *s, int64_t n, double frob_sq)
{
	if (r->o->mode == MODE_VALUES) {
		for (int64_t i = 0; i < n && !tool_stdout_broken(r->tl); i++) {
			row_start(r, t, head);
			table_int(r->tb, i + 1);
			table_num(r->tb, s[i]);
			table_end_row(r->tb);
		}
	} else if (r->o->mode == MODE_SUMMARY) {
		struct spectrum_summary sm;

		spectrum_summarize(s, n, frob_sq, &sm);
		row_start(r, t, head);
		table_num(r->tb, sm.sigma_max);
		table_num(r->tb, sm.sigma_min);
		table_num(r->tb, sm.stable_rank);
		table_num(r->tb, sm.effective_rank);
		table_num(r->tb, sm.condition);
		table_num(r->tb, sm.frobenius);
		table_int(r->tb, sm.count);
		table_end_row(r->tb);
	} else if (r->o->mode == MODE_HIST) {
		struct spectrum_bin *bins = calloc((size_t)r->o->bins, sizeof *bins);
		struct sw_err err;

		if (!bins) {
			sw_fail(&err, SW_ESOFTWARE, "out of memory");
			tool_error(r->tl, r->file, &err);
			return;
		}
		spectrum_hist(s, n, r->o->bins, bins);
		for (int b = 0; b < r->o->bins; b++) {
			row_start(r, t, head);
			table_int(r->tb, b + 1);
			table_num(r->tb, bins[b].lo);
			table_num(r->tb, bins[b].hi);
			table_int(r->tb, bins[b].count);
			table_num(r->tb, bins[b].density);
			table_end_row(r->tb);
		}
		free(bins);
	}
}

/* The spectrum of one view: every value, or the top K, into s; its
 * squared Frobenius norm into *frob_sq; how many values into *n. */
static int view_spectrum(const struct spec_view *v, int64_t top, double *s,
			 int64_t *n, double *frob_sq, struct sw_err *err)
{
	int64_t k = v->rows < v->cols ? v->rows : v->cols;
	struct spectrum_top_info info;

	if (!top) {
		*n = k;
		return spectrum_full(v, s, frob_sq, err);
	}
	*n = top < k ? top : k;
	return spectrum_top(v, *n, SPECTRUM_TOP_REL_TOL, s, frob_sq, &info, err);
}

static void add_fit_point(struct run *r, const struct sw_tensor_info *t, double sigma_top,
			  double frob_sq, double scale)
{
	struct fit_set *f = r->fit;
	struct fit_point *p;

	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		struct fit_point *np = realloc(f->p, cap * sizeof *np);
		if (!np) {
			struct sw_err err;
			sw_fail(&err, SW_ESOFTWARE, "out of memory");
			tool_error(r->tl, r->file, &err);
			return;
		}
		f->p = np;
		f->cap = cap;
	}
	p = &f->p[f->n++];
	snprintf(p->role, sizeof p->role, "%s", t->role);
	p->sigma_top = sigma_top;
	p->rms = sqrt(frob_sq / ((double)t->shape[0] * (double)t->shape[1]));
	p->scale = scale;
	p->d_model = (double)ckpt_meta(r->ck)->config.d_model;
}

/* Heads of an attention projection: q, k, v by rows, o by columns. */
static int head_layout(const struct sw_tensor_info *t, int *by_cols, struct sw_err *err)
{
	int64_t span;

	*by_cols = !strcmp(t->role, "o");
	if (!(*by_cols || !strcmp(t->role, "q") || !strcmp(t->role, "k") || !strcmp(t->role, "v")) ||
	    t->n_heads <= 0 || t->head_dim <= 0)
		return 0;
	span = *by_cols ? t->shape[1] : t->shape[0];
	if ((int64_t)t->n_heads * t->head_dim != span) {
		sw_fail(err, SW_EDATA, "%s: %d heads of %d do not fill its %lld %s", t->name,
			t->n_heads, t->head_dim, (long long)span, *by_cols ? "columns" : "rows");
		return -1;
	}
	return 1;
}

/*
 * One matrix: tensor i of the file, described by t (t differs from the
 * file's own info for a tied head, computed from the embedding).
 */
static void do_matrix(struct run *r, size_t i, const struct sw_tensor_info *t, int is_embed,
		      int is_tied_head)
{
	const struct opts *o = r->o;
	int64_t rows = t->shape[0], cols = t->shape[1], k = rows < cols ? rows : cols;
	double scale = 1, *s = NULL, frob_sq = 0;
	struct ckpt_view cv;
	struct sw_err err;
	int by_cols = 0, heads, rc;

	r->done++;
	tool_progress(r->tl, "%s: matrix %zu of %zu, %s, %.1f s", r->file, r->done, r->total,
		      t->name, now() - r->t0);
	if (o->normalize || o->mode == MODE_FIT) {
		if (spectrum_equilibrium_scale(t, &scale, &err)) {
			tool_error(r->tl, r->file, &err);
			return;
		}
	}
	heads = o->per_head ? head_layout(t, &by_cols, &err) : 0;
	if (heads < 0) {
		tool_error(r->tl, r->file, &err);
		return;
	}
	if (o->per_head && !heads)
		return;
	s = malloc((size_t)(k > 0 ? k : 1) * sizeof *s);
	if (!s) {
		sw_fail(&err, SW_ESOFTWARE, "%s: out of memory", t->name);
		tool_error(r->tl, r->file, &err);
		return;
	}
	if (is_tied_head && r->embed_s && o->mode != MODE_FIT) {
		/* one tensor, two roles: the spectrum is the embedding's */
		for (int64_t j = 0; j < r->embed_n; j++)
			s[j] = r->embed_s[j] / scale;
		print_spectrum(r, t, -1, s, r->embed_n, r->embed_frob_sq / (scale * scale));
		free(s);
		return;
	}
	if ((rc = ckpt_load(r->ck, i, &cv, &err))) {
		free(s);
		tool_error(r->tl, r->file, &err);
		return;
	}
	if (heads) {
		/* NaN/Inf is the tensor's fault, reported once for the tensor */
		struct spec_view whole = spectrum_view(cv.data, rows, cols);
		struct spec_scan sc;

		spectrum_scan(&whole, &sc);
		if (sc.nonfinite) {
			sw_fail(&err, SW_EDATA, "%s: %lld of %lld values are NaN or Inf", t->name,
				(long long)sc.nonfinite, (long long)(rows * cols));
			tool_error(r->tl, r->file, &err);
			goto out;
		}
		for (int64_t h = 0; h < t->n_heads && !tool_stdout_broken(r->tl); h++) {
			struct spec_view v = spectrum_head_view(cv.data, rows, cols, by_cols, h, t->head_dim);
			int64_t n;

			if (view_spectrum(&v, o->top, s, &n, &frob_sq, &err)) {
				sw_err_prefix(&err, "%s: head %lld", t->name, (long long)h);
				tool_error(r->tl, r->file, &err);
				goto out;
			}
			for (int64_t j = 0; j < n; j++)
				s[j] /= scale;
			print_spectrum(r, t, h, s, n, frob_sq / (scale * scale));
		}
	} else {
		struct spec_view v = spectrum_view(cv.data, rows, cols);
		int64_t n;

		if (view_spectrum(&v, o->mode == MODE_FIT ? 1 : o->top, s, &n, &frob_sq, &err)) {
			sw_err_prefix(&err, "%s", t->name);
			tool_error(r->tl, r->file, &err);
			goto out;
		}
		if (o->mode == MODE_FIT) {
			if (n > 0)
				add_fit_point(r, t, s[0], frob_sq, scale);
			goto out;
		}
		if (is_embed && !o->top) {
			free(r->embed_s);
			r->embed_s = malloc((size_t)(n > 0 ? n : 1) * sizeof *r->embed_s);
			if (r->embed_s) {
				memcpy(r->embed_s, s, (size_t)n * sizeof *s);
				r->embed_n = n;
				r->embed_frob_sq = frob_sq;
			}
		}
		for (int64_t j = 0; j < n; j++)
			s[j] /= scale;
		print_spectrum(r, t, -1, s, n, frob_sq / (scale * scale));
	}
out:
	ckpt_release(r->ck, &cv);
	free(s);
}

static int any_tensor_has_lr(const struct ckpt *ck)
{
	for (size_t i = 0; i < ckpt_count(ck); i++)
		if (!isnan(ckpt_info(ck, i)->lr))
			return 1;
	return 0;
}

static void spectrum_file(struct run *r)
{
	const struct ckpt_meta *m = ckpt_meta(r->ck);
	size_t count = ckpt_count(r->ck);
	long embed = ckpt_find_role(r->ck, "embed", -1);
	struct sw_tensor_info tied;
	int want_tied = 0;

	if ((r->o->normalize || r->o->mode == MODE_FIT) && m->format == CKPT_SAFETENSORS &&
	    !any_tensor_has_lr(r->ck)) {
		/* one message for the file, not one per matrix; an export by
		 * sw-convert carries lr, wd and wd_mode in its metadata */
		struct sw_err err;
		sw_fail(&err, SW_EDATA, "safetensors without scalewatch metadata carry no per-tensor lr, wd and wd_mode: %s needs them",
			r->o->normalize ? "--normalize" : "--fit");
		tool_error(r->tl, r->file, &err);
		return;
	}
	if (m->head_tied && embed >= 0) {
		tied = *ckpt_info(r->ck, (size_t)embed);
		arch_info_for_role(&m->config, "lm_head", -1, &tied);
		want_tied = select_match_info(&r->tl->sel, &tied);
	}
	r->done = 0;
	r->total = (size_t)want_tied;
	for (size_t i = 0; i < count; i++) {
		const struct sw_tensor_info *t = ckpt_info(r->ck, i);
		r->total += t->kind == SW_KIND_MATRIX && select_match_info(&r->tl->sel, t);
	}
	for (size_t i = 0; i < count && !tool_stdout_broken(r->tl); i++) {
		const struct sw_tensor_info *t = ckpt_info(r->ck, i);

		if (t->kind != SW_KIND_MATRIX || !select_match_info(&r->tl->sel, t))
			continue;
		do_matrix(r, i, t, (long)i == embed && want_tied, 0);
	}
	if (want_tied && !tool_stdout_broken(r->tl))
		do_matrix(r, (size_t)embed, &tied, 0, 1);
	free(r->embed_s);
	r->embed_s = NULL;
}

/* NaN is "unknown" (an exponent of a regressor that did not vary, a
 * standard error from as many points as parameters): an empty cell. */
static void num_or_empty(struct table *tb, double v)
{
	if (isnan(v))
		table_empty(tb);
	else
		table_num(tb, v);
}

/* --fit: per role, in order of first appearance, sigma_top then rms. */
static void print_fit(struct tool *tl, struct table *tb, const struct fit_set *f)
{
	double *y = malloc((f->n ? f->n : 1) * 4 * sizeof *y), *y2, *x1, *x2;
	struct sw_err err;

	if (!y) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, NULL, &err);
		return;
	}
	y2 = y + f->n;
	x1 = y2 + f->n;
	x2 = x1 + f->n;
	for (size_t i = 0; i < f->n; i++) {
		int64_t n = 0;
		int first = 1;

		for (size_t j = 0; j < i && first; j++)
			first = strcmp(f->p[j].role, f->p[i].role) != 0;
		if (!first)
			continue;
		for (size_t j = i; j < f->n; j++) {
			if (strcmp(f->p[j].role, f->p[i].role))
				continue;
			y[n] = f->p[j].sigma_top;
			y2[n] = f->p[j].rms;
			x1[n] = f->p[j].scale;
			x2[n] = f->p[j].d_model;
			n++;
		}
		for (int q = 0; q < 2; q++) {
			struct powerfit pf;

			if (powerfit_fit(q ? y2 : y, x1, x2, n, &pf, &err)) {
				sw_err_prefix(&err, "--fit: role %s, %s", f->p[i].role,
					      q ? "rms" : "sigma_top");
				tool_error(tl, NULL, &err);
				continue;
			}
			table_str(tb, f->p[i].role);
			table_str(tb, q ? "rms" : "sigma_top");
			table_int(tb, pf.n);
			num_or_empty(tb, pf.a1);
			num_or_empty(tb, pf.se1);
			num_or_empty(tb, pf.a2);
			num_or_empty(tb, pf.se2);
			num_or_empty(tb, pf.c);
			num_or_empty(tb, pf.r2);
			table_end_row(tb);
		}
	}
	free(y);
}

/* The columns of a mode: the identifying ones, head with --per-head,
 * then the mode's own. */
static int columns(const struct opts *o, const char **cols)
{
	static const char *const ident[] = {"file", "step", "name", "block", "role", "layer"};
	static const char *const values[] = {"index", "sigma"};
	static const char *const summary[] = {
		"sigma_max", "sigma_min", "stable_rank", "effective_rank", "condition",
		"frobenius", "count"
	};
	static const char *const hist[] = {"bin", "lo", "hi", "count", "density"};
	static const char *const fit[] = {
		"role", "quantity", "points", "exp_scale", "se_scale", "exp_d_model",
		"se_d_model", "prefactor", "r2"
	};
	const char *const *own = o->mode == MODE_SUMMARY ? summary : o->mode == MODE_HIST ? hist : values;
	int n = 0, nown = o->mode == MODE_SUMMARY ? 7 : o->mode == MODE_HIST ? 5 : 2;

	if (o->mode == MODE_FIT) {
		for (int i = 0; i < 9; i++)
			cols[n++] = fit[i];
		return n;
	}
	for (int i = 0; i < 6; i++)
		cols[n++] = ident[i];
	if (o->per_head)
		cols[n++] = "head";
	for (int i = 0; i < nown; i++)
		cols[n++] = own[i];
	return n;
}

static void set_mode(struct tool *tl, struct opts *o, enum mode m)
{
	if (o->mode != MODE_VALUES && o->mode != m)
		tool_usage_error(tl, "--summary, --hist and --fit exclude each other");
	o->mode = m;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		{"summary", no_argument, NULL, OPT_SUMMARY},
		{"hist", required_argument, NULL, OPT_HIST},
		{"fit", no_argument, NULL, OPT_FIT},
		{"top", required_argument, NULL, OPT_TOP},
		{"per-head", no_argument, NULL, OPT_PER_HEAD},
		{"normalize", no_argument, NULL, OPT_NORMALIZE},
		{NULL, 0, NULL, 0}
	};
	struct opts o = {MODE_VALUES, 0, 0, 0, 0};
	struct fit_set fit = {NULL, 0, 0};
	const char *cols[MAX_COLS];
	struct tool tl;
	struct table tb;
	const char *file;
	double t0 = now();
	int opt;

	tool_runtime(argv);
	tool_init(&tl, "sw-spectrum", usage, help, argc, argv);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_SUMMARY: set_mode(&tl, &o, MODE_SUMMARY); break;
		case OPT_FIT: set_mode(&tl, &o, MODE_FIT); break;
		case OPT_HIST:
			set_mode(&tl, &o, MODE_HIST);
			o.bins = (int)tool_parse_int(&tl, "--hist", optarg, 1, 100000);
			break;
		case OPT_TOP:
			o.top = tool_parse_int(&tl, "--top", optarg, 1, (long long)1 << 31);
			break;
		case OPT_PER_HEAD: o.per_head = 1; break;
		case OPT_NORMALIZE: o.normalize = 1; break;
		default: tool_common_option(&tl, opt, optarg);
		}
	}
	if (o.top && (o.mode == MODE_SUMMARY || o.mode == MODE_HIST))
		tool_usage_error(&tl, "--top gives part of the spectrum; --summary and --hist need all of it");
	if (o.mode == MODE_FIT && (o.top || o.per_head || o.normalize))
		tool_usage_error(&tl, "--fit takes no --top, --per-head or --normalize (it fits sigma_top of whole matrices against the scale)");
	tool_files_begin(&tl, optind);
	table_init(&tb, stdout, tl.fmt, cols, columns(&o, cols));
	table_header(&tb);
	while ((file = tool_next_file(&tl)) && !tool_stdout_broken(&tl)) {
		struct run r = {&tl, &tb, &o, &fit, t0, file, NULL, 0, 0, NULL, 0, 0};
		struct sw_err err;

		if (ckpt_open(file, &r.ck, &err)) {
			tool_error(&tl, file, &err);
			continue;
		}
		spectrum_file(&r);
		ckpt_close(r.ck);
	}
	if (o.mode == MODE_FIT && !tool_stdout_broken(&tl))
		print_fit(&tl, &tb, &fit);
	free(fit.p);
	return tool_finish(&tl);
}
