/*
 * sw-qkdrift - the Q/K multiplicative symmetry across the checkpoints and
 * the trace of a run: per layer and head the scales of the Q/K pair, their
 * product (what the attention logits use) and log2 ratio (free under
 * (Q, K) -> (sQ, K/s)), and with --drift the least-squares slope of the
 * ratio over steps. The numbers come from lib/analysis/qkdrift.c (qkdrift_heads,
 * qkdrift_read_trace, qkdrift_drift); this reads the files, orders the
 * steps, keeps one row per step where a trace and a checkpoint both have
 * it, and prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/formats/ckpt.h"
#include "../lib/analysis/qkdrift.h"
#include "../lib/files/trace.h"
#include "common.h"

static const char usage[] =
	"sw-qkdrift [--drift] [--check drift=MAX] [--json] [--layer LIST]\n"
	"                  [--log | --quiet] [FILE ...]";
static const char help[] =
	"FILE: the checkpoints of a run, or its trace (told by its content), or\n"
	"both: a step that a trace and a checkpoint both have is one row, the\n"
	"checkpoint's.\n"
	"\n"
	"Per checkpoint or trace row, layer and head: file step tokens layer head\n"
	"kv_head source q_rms k_rms product log2_ratio q_mult k_mult mult_product\n"
	"mult_log2_ratio, in step order. q_rms and k_rms are the RMS of the head's\n"
	"rows of the effective q and k projections (multipliers and the attn_norm\n"
	"gain folded in; with GQA k is the head's KV head), or of the q_norm/k_norm\n"
	"gains under QK-norm (source says which); a trace holds them as computed\n"
	"so from the weights of its step. q_mult ... are the learnable Q/K\n"
	"multipliers' own pair, where both exist.\n"
	"\n"
	"  --drift        one row per layer and head: the least-squares slope of\n"
	"                 log2_ratio per 1000 steps over every step given (points:\n"
	"                 checkpoints and trace rows), its standard error, and the\n"
	"                 relative change of the product from the first to the last step\n"
	"  --check drift=MAX  with --drift: exit 1 when any |slope| (or |mult_slope|)\n"
	"                 exceeds MAX, naming the layer and head\n"
	"  --layer LIST   only these layers (0,3-5); a file with none of them is said\n"
	"                 on stderr (exit 65 if no file had one)\n"
	"  --json         JSON Lines instead of TSV\n"
	TOOL_LOG_HELP
	"  --help, --version\n"
	"\n"
	"With no FILE, or FILE '-', file names are read from stdin, one per line.\n"
	"See sw-qkdrift(1).\n";

enum { OPT_DRIFT = OPT_TOOL_FIRST, OPT_CHECK };

static const char *const head_cols[] = {
	"file", "step", "tokens", "layer", "head", "kv_head", "source", "q_rms", "k_rms",
	"product", "log2_ratio", "q_mult", "k_mult", "mult_product", "mult_log2_ratio"
};
static const char *const drift_cols[] = {
	"layer", "head", "kv_head", "source", "points", "first_step", "last_step",
	"slope", "slope_se", "product_change", "mult_slope", "mult_slope_se",
	"mult_product_change"
};

/* One checkpoint, or one row of a trace. */
struct entry {
	const char *file;       /* the run's file it came from */
	size_t order;           /* the file's position in the input: ties keep it */
	size_t row;             /* a trace's row */
	int from_trace;
	int has_step, has_tokens;
	int64_t step, tokens;
	struct qk_head *heads;  /* (nheads) */
};

/* What was read: the entries, the files they name, the first model. */
struct run {
	struct entry *e;
	size_t n, cap;
	char **files;
	size_t nfiles, fcap;
	struct sw_config first;
	const char *first_file; /* NULL until a file was read */
	size_t nheads;
};

/* Steps first, in step order, then those without a step; at one step the
 * checkpoints, then the trace rows; input order on ties. */
static int entry_cmp(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;

	if (a->has_step != b->has_step)
		return a->has_step ? -1 : 1;
	if (a->has_step && a->step != b->step)
		return a->step < b->step ? -1 : 1;
	if (a->from_trace != b->from_trace)
		return a->from_trace ? 1 : -1;
	if (a->order != b->order)
		return a->order < b->order ? -1 : 1;
	return a->row < b->row ? -1 : a->row > b->row;
}

/*
 * One row per step where a trace has it: a trace row at a step that a
 * checkpoint or an earlier trace row already gives is dropped (at a
 * checkpoint's step the two agree to the digits the trace keeps). Two
 * checkpoints at one step both stay, as given. e sorted by entry_cmp;
 * returns how many are kept, in order.
 */
static size_t dedup(struct entry *e, size_t n)
{
	size_t kept = 0;

	for (size_t c = 0; c < n; c++) {
		if (e[c].from_trace && kept && e[kept - 1].has_step && e[kept - 1].step == e[c].step) {
			free(e[c].heads);
			continue;
		}
		e[kept++] = e[c];
	}
	return kept;
}

static void print_heads(struct tool *tl, const struct entry *e, size_t n, size_t nheads)
{
	struct table tb;

	table_init(&tb, stdout, tl->fmt, head_cols, TOOL_NCOLS(head_cols));
	table_header(&tb);
	for (size_t c = 0; c < n && !tool_stdout_broken(tl); c++) {
		for (size_t j = 0; j < nheads; j++) {
			const struct qk_head *h = &e[c].heads[j];
			table_str(&tb, e[c].file);
			if (e[c].has_step)
				table_int(&tb, e[c].step);
			else
				table_empty(&tb);
			if (e[c].has_tokens)
				table_int(&tb, e[c].tokens);
			else
				table_empty(&tb);
			table_int(&tb, h->layer);
			table_int(&tb, h->head);
			table_int(&tb, h->kv_head);
			table_str(&tb, qkdrift_source_name(h->source));
			table_num(&tb, h->q_rms);
			table_num(&tb, h->k_rms);
			table_num(&tb, h->product);
			table_num(&tb, h->log2_ratio);
			table_num(&tb, h->q_mult);
			table_num(&tb, h->k_mult);
			table_num(&tb, h->mult_product);
			table_num(&tb, h->mult_log2_ratio);
			table_end_row(&tb);
		}
	}
}

/* Distinct steps among the n checkpoints (sorted by step). */
static size_t distinct_steps(const struct entry *e, size_t n)
{
	size_t k = n ? 1 : 0;

	for (size_t c = 1; c < n; c++)
		k += e[c].step != e[c - 1].step;
	return k;
}

static void print_drift(struct tool *tl, const struct entry *e, size_t n, size_t nheads,
			int check, double max)
{
	int64_t *steps = malloc((n ? n : 1) * sizeof *steps);
	struct qk_head **heads = malloc((n ? n : 1) * sizeof *heads);
	struct sw_err err;
	struct table tb;

	if (!steps || !heads) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, NULL, &err);
		goto out;
	}
	if (distinct_steps(e, n) < 2) {
		if (!n && tl->status)
			goto out;       /* why no file gave a point was said, file by file */
		if (n)
			sw_fail(&err, SW_EDATA, "--drift: %zu point%s, all at step %lld: a drift needs two steps or more",
				n, n == 1 ? "" : "s", (long long)e[0].step);
		else
			sw_fail(&err, SW_EDATA, "--drift: no checkpoint or trace could be read");
		tool_error(tl, NULL, &err);
		goto out;
	}
	for (size_t c = 0; c < n; c++) {
		steps[c] = e[c].step;
		heads[c] = e[c].heads;
	}
	table_init(&tb, stdout, tl->fmt, drift_cols, TOOL_NCOLS(drift_cols));
	table_header(&tb);
	for (size_t j = 0; j < nheads && !tool_stdout_broken(tl); j++) {
		struct qk_drift d;

		if (qkdrift_drift(steps, heads, n, j, &d, &err)) {
			tool_error(tl, NULL, &err);
			continue;
		}
		table_int(&tb, d.layer);
		table_int(&tb, d.head);
		table_int(&tb, d.kv_head);
		table_str(&tb, qkdrift_source_name(d.source));
		table_int(&tb, (int64_t)d.n);
		table_int(&tb, d.first_step);
		table_int(&tb, d.last_step);
		table_num(&tb, d.slope);
		table_num(&tb, d.slope_se);
		table_num(&tb, d.product_change);
		table_num(&tb, d.mult_slope);
		table_num(&tb, d.mult_slope_se);
		table_num(&tb, d.mult_product_change);
		table_end_row(&tb);
		if (check && fabs(d.slope) > max) {
			sw_fail(&err, SW_ECHECK, "check: layer %d head %d: log2_ratio drifts %.6g per 1000 steps (|slope| > %g)",
				d.layer, d.head, d.slope, max);
			tool_error(tl, NULL, &err);
		}
		if (check && fabs(d.mult_slope) > max) {
			sw_fail(&err, SW_ECHECK, "check: layer %d head %d: the multipliers' log2 ratio drifts %.6g per 1000 steps (|mult_slope| > %g)",
				d.layer, d.head, d.mult_slope, max);
			tool_error(tl, NULL, &err);
		}
	}
out:
	free(steps);
	free(heads);
}

/* Room for one more entry and one more file name: 0, or -1 (out of
 * memory; nothing changed). */
static int grow(struct run *r)
{
	if (r->n == r->cap) {
		size_t want = r->cap ? 2 * r->cap : 16;
		struct entry *p = reallocarray(r->e, want, sizeof *p);
		if (!p)
			return -1;
		r->e = p;
		r->cap = want;
	}
	if (r->nfiles == r->fcap) {
		size_t want = r->fcap ? 2 * r->fcap : 16;
		char **p = reallocarray(r->files, want, sizeof *p);
		if (!p)
			return -1;
		r->files = p;
		r->fcap = want;
	}
	return 0;
}

/* The name of the file read last (its entries point to it), or NULL. */
static const char *keep_name(struct run *r, const char *file)
{
	char *name = grow(r) ? NULL : strdup(file);

	if (name)
		r->files[r->nfiles++] = name;
	return name;
}

/* A checkpoint: one entry. */
static void read_ckpt(struct tool *tl, struct run *r, const char *file, size_t order, int drift)
{
	struct entry x = {0};
	struct sw_err err;
	struct ckpt *ck;
	const struct ckpt_meta *m;
	size_t nh;

	if (ckpt_open(file, &ck, &err)) {
		tool_error(tl, file, &err);
		return;
	}
	m = ckpt_meta(ck);
	if (drift && !m->has_step) {
		sw_fail(&err, SW_EDATA, "no step in this checkpoint (safetensors from elsewhere, PyTorch, GGUF and llama2.c files have none): --drift orders checkpoints by step");
		tool_error(tl, file, &err);
	} else if (r->first_file && qkdrift_same_model(&r->first, r->first_file, &m->config, &err)) {
		tool_error(tl, file, &err);
	} else if (qkdrift_heads(ck, &tl->sel, &x.heads, &nh, &err)) {
		tool_error(tl, file, &err);
	} else if (!nh) {
		tool_selected(tl, file, 0, "layer");    /* --layer matched none of its layers */
		free(x.heads);
	} else if (!(x.file = keep_name(r, file))) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, file, &err);
		free(x.heads);
	} else {
		tool_selected(tl, file, nh, "layer");
		if (!r->first_file) {
			r->first = m->config;
			r->first_file = x.file;
		}
		x.order = order;
		x.has_step = m->has_step;
		x.has_tokens = m->has_step && m->tokens >= 0;   /* -1: the step alone */
		x.step = m->step;
		x.tokens = m->tokens;
		r->nheads = nh;
		r->e[r->n++] = x;
	}
	ckpt_close(ck);
}

/* A trace: an entry per row. */
static void read_trace(struct tool *tl, struct run *r, const char *file, size_t order)
{
	struct qk_step *steps = NULL;
	struct sw_config cfg;
	struct sw_err err;
	size_t nsteps = 0, nh = 0, row;
	const char *name;

	if (qkdrift_read_trace(file, &tl->sel, &cfg, &steps, &nsteps, &nh, &err) ||
	    (r->first_file && qkdrift_same_model(&r->first, r->first_file, &cfg, &err))) {
		tool_error(tl, file, &err);
		qkdrift_steps_free(steps, nsteps);
		return;
	}
	tool_selected(tl, file, nh, "layer");
	if (!nh)
		return;
	if (!(name = keep_name(r, file))) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, file, &err);
		qkdrift_steps_free(steps, nsteps);
		return;
	}
	if (!r->first_file) {
		r->first = cfg;
		r->first_file = name;
	}
	r->nheads = nh;
	for (row = 0; row < nsteps; row++) {
		struct entry x = {name, order, row, 1, 1, steps[row].has_tokens, steps[row].step,
				  steps[row].tokens, steps[row].heads};
		if (grow(r))
			break;
		r->e[r->n++] = x;
		steps[row].heads = NULL;        /* the entry's now */
	}
	if (row < nsteps) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, file, &err);
	}
	qkdrift_steps_free(steps, nsteps);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_LOG_OPTION,
		{"drift", no_argument, NULL, OPT_DRIFT},
		{"check", required_argument, NULL, OPT_CHECK},
		{"layer", required_argument, NULL, OPT_LAYER},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0}
	};
	struct run r;
	size_t order = 0;
	int opt, drift = 0, check = 0;
	double max = 0;
	const char *file;
	struct tool tl;

	memset(&r, 0, sizeof r);
	tool_init(&tl, "sw-qkdrift", usage, help, argc, argv);
	tl.run_dirs = TOOL_RUN_DIRS_CKPTS;      /* a run directory: its checkpoints */
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_DRIFT:
			drift = 1;
			break;
		case OPT_CHECK:
			check = drift = 1;
			max = tool_parse_check(&tl, "drift", optarg, 0, 1e300);
			break;
		default:
			tool_common_option(&tl, opt, optarg);
		}
	}
	tool_files_begin(&tl, optind);
	while ((file = tool_next_file(&tl))) {
		order++;
		tool_progress(&tl, "%s", file);
		/* by its content, never its name */
		if (trace_sniff(file, NULL, 0))
			read_trace(&tl, &r, file, order);
		else
			read_ckpt(&tl, &r, file, order, drift);
	}
	tool_progress_done(&tl);
	if (r.n)
		qsort(r.e, r.n, sizeof *r.e, entry_cmp);
	r.n = dedup(r.e, r.n);
	if (drift)
		print_drift(&tl, r.e, r.n, r.nheads, check, max);
	else
		print_heads(&tl, r.e, r.n, r.nheads);
	for (size_t c = 0; c < r.n; c++)
		free(r.e[c].heads);
	for (size_t c = 0; c < r.nfiles; c++)
		free(r.files[c]);
	free(r.e);
	free(r.files);
	return tool_finish(&tl);
}
