/*
 * sw-spectrum - singular-value spectra of every weight matrix of
 * checkpoints, for the spectra paper's checks: the full sorted spectrum,
 * a summary, a density, the top K values, spectra per attention head,
 * spectra divided by the equilibrium scale sqrt(lr/wd), and a power-law
 * fit of the top singular value across a sweep, and the heavy-tail
 * statistics of each eigenvalue spectrum (--esd-fit). Which matrices and
 * their spectra: lib/analysis/spectra.c (spectra_plan, spectra_compute,
 * spectra_fit_rows) over the math of lib/analysis/spectrum.c (spectrum_full,
 * spectrum_top, spectrum_summarize, spectrum_hist) and lib/analysis/esdfit.c
 * (esdfit_matrix); this reads the files and prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/formats/ckpt.h"
#include "../lib/analysis/esdfit.h"
#include "../lib/analysis/matsched.h"
#include "../lib/analysis/spectra.h"
#include "../lib/analysis/spectrum.h"
#include "common.h"

static const char usage[] =
	"sw-spectrum [--json] [--normalize] [--per-head] [--block LIST]\n"
	"                   [--expert LIST] [--layer LIST] [--name GLOB] [--role LIST]\n"
	"                   [--top K] [--threads N] [--log | --quiet]\n"
	"                   [--fit | --hist BINS | --summary |\n"
	"                    --esd-fit [--hist BINS | --randomize [--seed S]]]\n"
	"                   [FILE ...]";
static const char help[] =
	"Singular values of every weight matrix, one row per value per matrix per file:\n"
	"file step name block role layer index sigma tokens expert (index 1 is the\n"
	"largest; tokens, the training tokens behind the checkpoint, and expert, a\n"
	"mixture of experts' expert or -1, end every row).\n"
	"\n"
	"  --summary      one row per matrix: sigma_max sigma_min stable_rank\n"
	"                 effective_rank condition frobenius count\n"
	"  --hist BINS    density of the sigma_i in BINS log-spaced bins:\n"
	"                 bin bin_lo bin_hi count density\n"
	"  --esd-fit      heavy tails of the eigenvalues lambda = sigma^2 /\n"
	"                 max(rows, cols): count lambda_max alpha alpha_se xmin ks_d\n"
	"                 tail alpha_weighted log_spectral_norm log_norm mp_sigma2\n"
	"                 mp_edge spikes (power law by Clauset-Shalizi-Newman;\n"
	"                 Marchenko-Pastur bulk; the three log metrics of sigma^2,\n"
	"                 WeightWatcher's scale), and after expert warn: short-tail\n"
	"                 (tail < " TOOL_STR(ESDFIT_MIN_TAIL) "), over-trained (alpha < " TOOL_STR(ESDFIT_ALPHA_LOW) "),\n"
	"                 under-trained (alpha > " TOOL_STR(ESDFIT_ALPHA_HIGH) "), as WeightWatcher labels\n"
	"                 layers; with --hist BINS, the density of\n"
	"                 lambda with the fits: bin bin_lo bin_hi count density\n"
	"                 fit_density mp_density, and after expert the fit's alpha\n"
	"                 and warn\n"
	"  --randomize    with --esd-fit, WeightWatcher's randomized ESD: each\n"
	"                 matrix's elements shuffled, its spectrum's columns after\n"
	"                 warn: rand_lambda_max rand_mp_edge traps (the shuffled\n"
	"                 matrix's eigenvalues beyond its Marchenko-Pastur edge and\n"
	"                 WeightWatcher's Tracy-Widom margin: correlation traps)\n"
	"                 ww_softrank (rand_lambda_max / lambda_max)\n"
	"  --seed S       the shuffle's seed (" TOOL_STR(SW_SPECTRUM_SEED) "); a matrix's shuffle\n"
	"                 depends on S and its place in the file only\n"
	"  --fit          across all files, per role: ln sigma_top and ln ||W||_rms\n"
	"                 fitted against ln(equilibrium scale) and ln d_model\n"
	"  --top K        only the K largest values (block Lanczos, relative error\n"
	"                 <= 1e-5)\n"
	"  --per-head     each head's slice of q, k, v (rows) and o (columns),\n"
	"                 column head\n"
	"  --normalize    sigma divided by the equilibrium scale: sqrt(lr/wd) (coupled\n"
	"                 weight decay) or lr/sqrt(wd) (independent)\n"
	TOOL_THREADS_HELP
	TOOL_LOG_HELP
	TOOL_SELECT_HELP
	"See sw-spectrum(1).\n";

enum mode { MODE_VALUES, MODE_SUMMARY, MODE_HIST, MODE_FIT, MODE_ESD };

enum {
	OPT_SUMMARY = OPT_TOOL_FIRST, OPT_HIST, OPT_FIT, OPT_TOP, OPT_PER_HEAD, OPT_NORMALIZE, OPT_ESD_FIT,
	OPT_RANDOMIZE
};

#define MAX_COLS 32
#define SW_SPECTRUM_SEED 1      /* --seed's default */

struct opts {
	enum mode mode;
	int bins;
	struct spectra_opts so;
};

struct run {
	struct tool *tl;
	struct table *tb;
	const struct opts *o;
	const char *file;
	const struct ckpt_meta *m;
};

/* The identifying cells every row starts with. */
static void row_start(struct run *r, const struct sw_tensor_info *t, int64_t head)
{
	tool_row_begin(r->tb, r->file, r->m->has_step, r->m->step);
	table_str(r->tb, t->name);
	table_str(r->tb, sw_block_name(t->block));
	table_str(r->tb, t->role);
	table_int(r->tb, t->layer);
	if (r->o->so.per_head)
		table_int(r->tb, head);
}

/* The cells every row ends with: tokens, then the expert (the newest
 * column: last, so that the columns before it keep their numbers). */
static void row_end(struct run *r, const struct sw_tensor_info *t)
{
	tool_tokens_cell(r->tb, r->m->has_step, r->m->tokens);
	table_int(r->tb, t->expert);
	table_end_row(r->tb);
}

/* Print the spectrum s (n values, descending) of tensor t (head, or -1)
 * as the mode asks. */
static void print_spectrum(struct run *r, const struct sw_tensor_info *t, int64_t head,
			   const double *s, int64_t n, double frob_sq)
{
	if (r->o->mode == MODE_VALUES) {
		for (int64_t i = 0; i < n && !tool_stdout_broken(r->tl); i++) {
			row_start(r, t, head);
			table_int(r->tb, i + 1);
			table_num(r->tb, s[i]);
			row_end(r, t);
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
		row_end(r, t);
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
			row_end(r, t);
		}
		free(bins);
	}
}

/* --esd-fit --hist: the density of lambda on log-spaced bins, beside
 * the fitted power law's (the tail's share of the values, (alpha - 1) /
 * x_min (x / x_min)^-alpha, averaged over the bin's part above x_min) and
 * the Marchenko-Pastur bulk's (the bulk's share, at the bin's geometric
 * centre). */
static int print_esd_hist(struct run *r, const struct sw_tensor_info *t, int64_t head,
			  const double *lam, const struct esdfit_result *f, struct sw_err *err)
{
	struct spectrum_bin *bins = calloc((size_t)r->o->bins, sizeof *bins);
	int64_t n = f->count;
	double y = 0, tailf = (double)f->pl.tail / (double)n, bulkf = (double)(n - f->mp.spikes) / (double)n;
	int64_t rows, cols;

	if (!bins)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	spectra_dims(t, r->o->so.per_head, &rows, &cols);
	y = (double)(rows < cols ? rows : cols) / (double)(rows > cols ? rows : cols);
	spectrum_hist(lam, n, r->o->bins, bins);
	for (int b = 0; b < r->o->bins; b++) {
		double lo = bins[b].lo, hi = bins[b].hi, from = lo > f->pl.xmin ? lo : f->pl.xmin;
		row_start(r, t, head);
		table_int(r->tb, b + 1);
		table_num(r->tb, lo);
		table_num(r->tb, hi);
		table_int(r->tb, bins[b].count);
		table_num(r->tb, bins[b].density);
		if (hi > f->pl.xmin)
			table_num(r->tb, tailf * (pow(from / f->pl.xmin, 1 - f->pl.alpha) -
						  pow(hi / f->pl.xmin, 1 - f->pl.alpha)) / (hi - lo));
		else
			table_empty(r->tb);
		table_num(r->tb, bulkf * esdfit_mp_density(sqrt(lo * hi), f->mp.sigma2, y));
		tool_tokens_cell(r->tb, r->m->has_step, r->m->tokens);
		table_int(r->tb, t->expert);
		/* the newest columns, after expert: the fit's alpha and its warning
		 * on every bin's row, for a figure's key (sw-plot esd-fit) */
		table_num(r->tb, f->pl.alpha);
		table_str(r->tb, esdfit_warn_text(esdfit_warnings(&f->pl)));
		table_end_row(r->tb);
	}
	free(bins);
	return SW_OK;
}

/* --esd-fit: one row, or with --hist the density and the fits. */
static void print_esd(struct run *r, const struct sw_tensor_info *t, int64_t head, const double *s,
		      const double *rand_s, int64_t n)
{
	struct esdfit_random rf;
	double *lam = malloc((size_t)(n > 0 ? n : 1) * sizeof *lam);
	struct esdfit_result f;
	struct sw_err err;
	int64_t rows, cols;
	int rc;

	if (!lam) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(r->tl, r->file, &err);
		return;
	}
	spectra_dims(t, r->o->so.per_head, &rows, &cols);
	if ((rc = esdfit_matrix(s, n, rows, cols, lam, &f, &err))) {
		sw_err_prefix(&err, "%s", t->name);
	} else if (rand_s && (rc = esdfit_randomized(rand_s, n, rows, cols, f.lambda_max, &rf, &err))) {
		sw_err_prefix(&err, "%s: randomized", t->name);
	} else if (r->o->bins) {
		rc = print_esd_hist(r, t, head, lam, &f, &err);
	} else {
		row_start(r, t, head);
		table_int(r->tb, f.count);
		table_num(r->tb, f.lambda_max);
		table_num(r->tb, f.pl.alpha);
		table_num(r->tb, f.pl.alpha_se);
		table_num(r->tb, f.pl.xmin);
		table_num(r->tb, f.pl.D);
		table_int(r->tb, f.pl.tail);
		table_num(r->tb, f.alpha_weighted);
		table_num(r->tb, f.log_spectral_norm);
		table_num(r->tb, f.log_norm);
		table_num(r->tb, f.mp.sigma2);
		table_num(r->tb, f.mp.edge);
		table_int(r->tb, f.mp.spikes);
		tool_tokens_cell(r->tb, r->m->has_step, r->m->tokens);
		table_int(r->tb, t->expert);
		/* the newest columns, after expert */
		table_str(r->tb, esdfit_warn_text(esdfit_warnings(&f.pl)));
		if (rand_s) {
			table_num(r->tb, rf.lambda_max);
			table_num(r->tb, rf.mp_edge);
			table_int(r->tb, rf.traps);
			table_num(r->tb, rf.softrank);
		}
		table_end_row(r->tb);
	}
	if (rc)
		tool_error(r->tl, r->file, &err);
	free(lam);
}

/* The matrices of one file, computed side by side (tool_run_matrices),
 * each into its own result. */
struct file_jobs {
	struct run *r;
	struct ckpt *ck;
	struct spectra_fit_set *fit;
	const struct spectra_job *jobs;
	struct spectra_cache cache;
	struct spectra_result *res;
};

static int spectrum_job(void *ctx, size_t k, struct sw_err *err)
{
	struct file_jobs *f = ctx;

	return spectra_compute(f->ck, &f->jobs[k], &f->r->o->so, &f->cache, &f->res[k], err);
}

static const char *spectrum_name(void *ctx, size_t k)
{
	return ((struct file_jobs *)ctx)->jobs[k].info.name;
}

static void spectrum_emit(void *ctx, size_t k)
{
	struct file_jobs *f = ctx;
	struct run *r = f->r;
	const struct sw_tensor_info *t = &f->jobs[k].info;
	struct spectra_result *res = &f->res[k];
	struct sw_err err;

	if (r->o->mode == MODE_FIT) {
		if (spectra_fit_add(f->fit, t, res, r->m->config.d_model, &err))
			tool_error(r->tl, r->file, &err);
	} else if (r->o->mode == MODE_ESD) {
		for (int64_t h = 0; h < res->count && !tool_stdout_broken(r->tl); h++)
			print_esd(r, t, r->o->so.per_head ? h : -1, res->s + h * res->n, res->rand_s, res->n);
	} else {
		for (int64_t h = 0; h < res->count && !tool_stdout_broken(r->tl); h++)
			print_spectrum(r, t, r->o->so.per_head ? h : -1, res->s + h * res->n,
				       res->n, res->frob_sq[h]);
	}
}

static void spectrum_file(struct run *r, struct ckpt *ck, struct spectra_fit_set *fit)
{
	struct file_jobs f = {.r = r, .ck = ck, .fit = fit};
	struct tool_matrix_jobs mj = {spectrum_job, spectrum_name, spectrum_emit, &f};
	struct matsched_item *items;
	struct spectra_job *jobs;
	struct sw_err err;
	size_t n;

	if (spectra_plan(ck, &r->tl->sel, &r->o->so, &jobs, &n, &err)) {
		tool_error(r->tl, r->file, &err);
		return;
	}
	/* spectra are of matrices only; per head, of attention projections */
	tool_selected(r->tl, r->file, n, r->o->so.per_head ? "attention projection" : "matrix");
	f.jobs = jobs;
	f.res = calloc(n ? n : 1, sizeof *f.res);
	items = calloc(n ? n : 1, sizeof *items);
	if (!f.res || !items) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(r->tl, r->file, &err);
	} else {
		for (size_t k = 0; k < n; k++)
			spectra_job_cost(&jobs[k], &r->o->so, &items[k]);
		tool_run_matrices(r->tl, r->file, items, n, &mj);
	}
	for (size_t k = 0; f.res && k < n; k++)
		spectra_result_free(&f.res[k]);
	free(f.res);
	free(items);
	spectra_cache_free(&f.cache);
	free(jobs);
}

/* --fit: per role, in order of first appearance, sigma_top then rms. */
static void print_fit(struct tool *tl, struct table *tb, const struct spectra_fit_set *f)
{
	struct spectra_fit_row *rows;
	struct sw_err err;
	size_t n;

	if (spectra_fit_rows(f, &rows, &n, &err)) {
		tool_error(tl, NULL, &err);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct powerfit *pf = &rows[i].fit;

		if (rows[i].rc) {
			tool_error(tl, NULL, &rows[i].err);
			continue;
		}
		table_str(tb, rows[i].role);
		table_str(tb, rows[i].quantity);
		table_int(tb, pf->n);
		table_num(tb, pf->a1);
		table_num(tb, pf->se1);
		table_num(tb, pf->a2);
		table_num(tb, pf->se2);
		table_num(tb, pf->c);
		table_num(tb, pf->r2);
		table_end_row(tb);
	}
	free(rows);
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
	static const char *const hist[] = {"bin", "bin_lo", "bin_hi", "count", "density"};
	static const char *const esd[] = {
		"count", "lambda_max", "alpha", "alpha_se", "xmin", "ks_d", "tail", "alpha_weighted",
		"log_spectral_norm", "log_norm", "mp_sigma2", "mp_edge", "spikes"
	};
	static const char *const esd_hist[] = {
		"bin", "bin_lo", "bin_hi", "count", "density", "fit_density", "mp_density"
	};
	static const char *const fit[] = {
		"role", "quantity", "points", "exp_scale", "se_scale", "exp_d_model",
		"se_d_model", "prefactor", "r2"
	};
	const char *const *own = o->mode == MODE_SUMMARY ? summary : o->mode == MODE_HIST ? hist :
				 o->mode == MODE_ESD ? (o->bins ? esd_hist : esd) : values;
	int n = 0, nown = o->mode == MODE_SUMMARY ? 7 : o->mode == MODE_HIST ? 5 :
			  o->mode == MODE_ESD ? (o->bins ? 7 : 13) : 2;

	if (o->mode == MODE_FIT) {
		for (int i = 0; i < 9; i++)
			cols[n++] = fit[i];
		return n;
	}
	for (int i = 0; i < 6; i++)
		cols[n++] = ident[i];
	if (o->so.per_head)
		cols[n++] = "head";
	for (int i = 0; i < nown; i++)
		cols[n++] = own[i];
	cols[n++] = "tokens";
	cols[n++] = "expert";
	if (o->mode == MODE_ESD && o->bins)
		cols[n++] = "alpha";
	if (o->mode == MODE_ESD)
		cols[n++] = "warn";
	if (o->so.randomize) {
		cols[n++] = "rand_lambda_max";
		cols[n++] = "rand_mp_edge";
		cols[n++] = "traps";
		cols[n++] = "ww_softrank";
	}
	return n;
}

static void set_mode(struct tool *tl, struct opts *o, enum mode m)
{
	/* --hist goes with --esd-fit: the density of lambda with the fits */
	if ((m == MODE_HIST && o->mode == MODE_ESD) || (m == MODE_ESD && o->mode == MODE_HIST)) {
		o->mode = MODE_ESD;
		return;
	}
	if (o->mode != MODE_VALUES && o->mode != m)
		tool_usage_error(tl, "--summary, --hist, --fit and --esd-fit exclude each other (but --esd-fit --hist)");
	o->mode = m;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		TOOL_THREADS_OPTION,
		TOOL_LOG_OPTION,
		{"summary", no_argument, NULL, OPT_SUMMARY},
		{"hist", required_argument, NULL, OPT_HIST},
		{"fit", no_argument, NULL, OPT_FIT},
		{"top", required_argument, NULL, OPT_TOP},
		{"per-head", no_argument, NULL, OPT_PER_HEAD},
		{"normalize", no_argument, NULL, OPT_NORMALIZE},
		{"esd-fit", no_argument, NULL, OPT_ESD_FIT},
		{"randomize", no_argument, NULL, OPT_RANDOMIZE},
		{"seed", required_argument, NULL, OPT_SEED},
		{NULL, 0, NULL, 0}
	};
	struct opts o = {MODE_VALUES, 0, {0, 0, 0, 0, 0, SW_SPECTRUM_SEED}};
	int seed_given = 0;
	struct spectra_fit_set fit = {NULL, 0, 0};
	const char *cols[MAX_COLS];
	struct tool tl;
	struct table tb;
	struct ckpt *ck;
	const char *file;
	int opt;

	tool_init(&tl, "sw-spectrum", usage, help, argc, argv);
	tl.run_dirs = TOOL_RUN_DIRS_CKPTS;      /* a run directory: its checkpoints */
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_SUMMARY: set_mode(&tl, &o, MODE_SUMMARY); break;
		case OPT_FIT: set_mode(&tl, &o, MODE_FIT); break;
		case OPT_ESD_FIT: set_mode(&tl, &o, MODE_ESD); break;
		case OPT_HIST:
			set_mode(&tl, &o, MODE_HIST);
			o.bins = (int)tool_parse_int(&tl, "--hist", optarg, 1, 100000);
			break;
		case OPT_TOP:
			o.so.top = tool_parse_int(&tl, "--top", optarg, 1, (long long)1 << 31);
			break;
		case OPT_PER_HEAD: o.so.per_head = 1; break;
		case OPT_NORMALIZE: o.so.normalize = 1; break;
		case OPT_RANDOMIZE: o.so.randomize = 1; break;
		case OPT_SEED:
			o.so.seed = (uint64_t)tool_parse_int(&tl, "--seed", optarg, 0, 1LL << 62);
			seed_given = 1;
			break;
		default: tool_common_option(&tl, opt, optarg);
		}
	}
	if (o.so.top && (o.mode == MODE_SUMMARY || o.mode == MODE_HIST || o.mode == MODE_ESD))
		tool_usage_error(&tl, "--top gives part of the spectrum; --summary, --hist and --esd-fit need all of it");
	if (o.mode == MODE_FIT && (o.so.top || o.so.per_head || o.so.normalize))
		tool_usage_error(&tl, "--fit takes no --top, --per-head or --normalize (it fits sigma_top of whole matrices against the scale)");
	if (o.so.randomize && (o.mode != MODE_ESD || o.bins || o.so.per_head))
		tool_usage_error(&tl, "--randomize goes with --esd-fit, without --hist or --per-head (whole matrices are shuffled)");
	if (seed_given && !o.so.randomize)
		tool_usage_error(&tl, "--seed is the shuffle's of --randomize");
	if (o.mode == MODE_FIT)
		o.so.top = 1;   /* sigma_top and the Frobenius norm are all a fit needs */
	o.so.need_scale = o.so.normalize || o.mode == MODE_FIT;
	tool_files_begin(&tl, optind);
	table_init(&tb, stdout, tl.fmt, cols, columns(&o, cols));
	table_header(&tb);
	while ((ck = tool_next_ckpt(&tl, &file))) {
		struct run r = {&tl, &tb, &o, file, ckpt_meta(ck)};

		spectrum_file(&r, ck, &fit);
		ckpt_close(ck);
	}
	if (o.mode == MODE_FIT && !tool_stdout_broken(&tl))
		print_fit(&tl, &tb, &fit);
	spectra_fit_free(&fit);
	return tool_finish(&tl);
}
