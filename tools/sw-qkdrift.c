/*
 * sw-qkdrift - the Q/K multiplicative symmetry across the checkpoints of a
 * run: per layer and head the scales of the Q/K pair, their product (what
 * the attention logits use) and log2 ratio (free under (Q, K) -> (sQ, K/s)),
 * and with --drift the least-squares slope of the ratio over steps. The
 * numbers come from lib/qkdrift.c (qkdrift_heads, qkdrift_drift); this
 * reads the files, orders them by step and prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/ckpt.h"
#include "../lib/qkdrift.h"
#include "common.h"

static const char usage[] =
	"sw-qkdrift [--drift] [--check MAX] [--json] [--layer LIST] [FILE ...]";
static const char help[] =
	"Per checkpoint, layer and head: file step tokens layer head kv_head source\n"
	"q_rms k_rms product log2_ratio q_mult k_mult mult_product mult_log2_ratio,\n"
	"rows in step order. q_rms and k_rms are the RMS of the head's rows of the\n"
	"effective q and k projections (multipliers and the attn_norm gain folded\n"
	"in; with GQA k is the head's KV head), or of the q_norm/k_norm gains under\n"
	"QK-norm (source says which). q_mult ... are the learnable Q/K multipliers'\n"
	"own pair, where both exist.\n"
	"\n"
	"  --drift        one row per layer and head: the least-squares slope of\n"
	"                 log2_ratio per 1000 steps, its standard error, and the\n"
	"                 relative change of the product from the first to the last step\n"
	"  --check MAX    with --drift: exit 1 when any |slope| (or |mult_slope|)\n"
	"                 exceeds MAX, naming the layer and head\n"
	"  --layer LIST   only these layers (0,3-5); a file with none of them is said\n"
	"                 on stderr (exit 65 if no file had one)\n"
	"  --json         JSON Lines instead of TSV\n"
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
	"layer", "head", "kv_head", "source", "checkpoints", "first_step", "last_step",
	"slope", "slope_se", "product_change", "mult_slope", "mult_slope_se",
	"mult_product_change"
};

/* One checkpoint read. */
struct entry {
	char *file;
	size_t order;           /* position in the input: ties keep it */
	int has_step;
	int64_t step, tokens;
	struct qk_head *heads;  /* (nheads) */
};

/* Steps first, in step order, then those without a step; input order on ties. */
static int entry_cmp(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;

	if (a->has_step != b->has_step)
		return a->has_step ? -1 : 1;
	if (a->has_step && a->step != b->step)
		return a->step < b->step ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* A number, or an empty cell when unknown or not applicable (NaN). */
static void num(struct table *tb, double v)
{
	if (isnan(v))
		table_empty(tb);
	else
		table_num(tb, v);
}

static void print_heads(struct tool *tl, const struct entry *e, size_t n, size_t nheads)
{
	struct table tb;

	table_init(&tb, stdout, tl->fmt, head_cols, (int)(sizeof head_cols / sizeof head_cols[0]));
	table_header(&tb);
	for (size_t c = 0; c < n && !tool_stdout_broken(tl); c++) {
		for (size_t j = 0; j < nheads; j++) {
			const struct qk_head *h = &e[c].heads[j];
			table_str(&tb, e[c].file);
			if (e[c].has_step) {
				table_int(&tb, e[c].step);
				table_int(&tb, e[c].tokens);
			} else {
				table_empty(&tb);
				table_empty(&tb);
			}
			table_int(&tb, h->layer);
			table_int(&tb, h->head);
			table_int(&tb, h->kv_head);
			table_str(&tb, qkdrift_source_name(h->source));
			table_num(&tb, h->q_rms);
			table_num(&tb, h->k_rms);
			table_num(&tb, h->product);
			table_num(&tb, h->log2_ratio);
			num(&tb, h->q_mult);
			num(&tb, h->k_mult);
			num(&tb, h->mult_product);
			num(&tb, h->mult_log2_ratio);
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
		if (n)
			sw_fail(&err, SW_EDATA, "--drift: %zu checkpoint%s, all at step %lld: a drift needs two steps or more",
				n, n == 1 ? "" : "s", (long long)e[0].step);
		else
			sw_fail(&err, SW_EDATA, "--drift: no checkpoint could be read");
		tool_error(tl, NULL, &err);
		goto out;
	}
	for (size_t c = 0; c < n; c++) {
		steps[c] = e[c].step;
		heads[c] = e[c].heads;
	}
	table_init(&tb, stdout, tl->fmt, drift_cols, (int)(sizeof drift_cols / sizeof drift_cols[0]));
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
		num(&tb, d.slope_se);
		table_num(&tb, d.product_change);
		num(&tb, d.mult_slope);
		num(&tb, d.mult_slope_se);
		num(&tb, d.mult_product_change);
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

/* Room for one more entry: 0, or -1 (out of memory; *e unchanged). */
static int grow(struct entry **e, size_t *cap)
{
	size_t want = *cap ? 2 * *cap : 16;
	struct entry *p = reallocarray(*e, want, sizeof **e);

	if (!p)
		return -1;
	*e = p;
	*cap = want;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"drift", no_argument, NULL, OPT_DRIFT},
		{"check", required_argument, NULL, OPT_CHECK},
		{"layer", required_argument, NULL, OPT_LAYER},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0}
	};
	struct entry *e = NULL;
	size_t n = 0, cap = 0, nheads = 0, order = 0;
	struct sw_config first;
	char *first_file = NULL;
	int opt, drift = 0, check = 0;
	double max = 0;
	const char *file;
	struct tool tl;

	memset(&first, 0, sizeof first);
	tool_init(&tl, "sw-qkdrift", usage, help, argc, argv);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_DRIFT:
			drift = 1;
			break;
		case OPT_CHECK:
			check = drift = 1;
			max = tool_parse_double(&tl, "--check", optarg, 0, 1e300);
			break;
		default:
			tool_common_option(&tl, opt, optarg);
		}
	}
	tool_files_begin(&tl, optind);
	while ((file = tool_next_file(&tl))) {
		struct sw_err err;
		struct ckpt *ck;
		const struct ckpt_meta *m;
		struct entry x = {0};
		size_t nh;

		order++;
		tool_progress(&tl, "%s", file);
		if (ckpt_open(file, &ck, &err)) {
			tool_error(&tl, file, &err);
			continue;
		}
		m = ckpt_meta(ck);
		if (drift && !m->has_step) {
			sw_fail(&err, SW_EDATA, "no step in this checkpoint (safetensors from elsewhere, GGUF and llama2.c files have none): --drift orders checkpoints by step");
			tool_error(&tl, file, &err);
		} else if (first_file && qkdrift_same_model(&first, first_file, &m->config, &err)) {
			tool_error(&tl, file, &err);
		} else if (qkdrift_heads(ck, &tl.sel, &x.heads, &nh, &err)) {
			tool_error(&tl, file, &err);
		} else if (!nh) {
			tool_selected(&tl, file, 0, "layer");   /* --layer matched none of its layers */
			free(x.heads);
		} else if (!(x.file = strdup(file)) || (n == cap && grow(&e, &cap))) {
			sw_fail(&err, SW_ESOFTWARE, "out of memory");
			tool_error(&tl, file, &err);
			free(x.file);
			free(x.heads);
			ckpt_close(ck);
			break;
		} else {
			tool_selected(&tl, file, nh, "layer");
			if (!first_file) {
				first = m->config;
				first_file = x.file;
			}
			x.order = order;
			x.has_step = m->has_step;
			x.step = m->step;
			x.tokens = m->tokens;
			nheads = nh;
			e[n++] = x;
		}
		ckpt_close(ck);
	}
	tool_progress_done(&tl);
	if (n)
		qsort(e, n, sizeof *e, entry_cmp);
	if (drift)
		print_drift(&tl, e, n, nheads, check, max);
	else
		print_heads(&tl, e, n, nheads);
	for (size_t c = 0; c < n; c++) {
		free(e[c].file);
		free(e[c].heads);
	}
	free(e);
	return tool_finish(&tl);
}
