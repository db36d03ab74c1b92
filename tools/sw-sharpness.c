/*
 * sw-sharpness - blockwise diagonal Gauss-Newton sharpness of checkpoints
 * per block type (the sharpness-disparity paper's Principle (1)). The
 * estimate is lib/sharpness.c (gnb_estimate), its statistics
 * gnb_stats_of; the model lib/model.c. This reads files and prints.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/ckpt.h"
#include "../lib/data.h"
#include "../lib/h5write.h"
#include "../lib/modelio.h"
#include "../lib/sharpness.h"
#include "common.h"

static const char usage[] =
	"sw-sharpness [--json] [--data FILE] [--batch-tokens N] [--draws K] [--seed S]\n"
	"                    [--same-batch] [--seq-len T] [--micro-batch M] [--recompute]\n"
	"                    [--per-layer | --per-tensor | --hist BINS | --ratios]\n"
	"                    [--check principle [--strict]] [--dump-labels FILE]\n"
	"                    [--threads N] [--block LIST] [--layer LIST] [--name GLOB]\n"
	"                    [--role LIST] FILE ...";
static const char help[] =
	"Diagonal Gauss-Newton (GNB) sharpness of checkpoints, per block type:\n"
	"file step block nparams mean log10_mean mean_log10 q10_log10 median_log10\n"
	"q90_log10 zeros. Uses a checkpoint's /fisher when it has one, else computes\n"
	"the estimate on tokens from --data.\n"
	"\n"
	"  --data FILE        tokens (llm.c, nanoGPT .bin, or text as bytes)\n"
	"  --data-format F    auto, llmc, uint16, bytes\n"
	"  --batch-tokens N   loss terms per estimate (8192); a multiple of --seq-len\n"
	"  --seq-len T        tokens per sequence (the model's, at most 512)\n"
	"  --micro-batch M    sequences per pass (as memory allows); divides the batch\n"
	"  --draws K          label draws averaged (1)\n"
	"  --same-batch       all draws on one batch (default: a fresh batch each)\n"
	"  --seed S           batches and labels (1)\n"
	"  --recompute        ignore /fisher in the checkpoint\n"
	"  --per-layer        one row per block type per layer\n"
	"  --per-tensor       one row per tensor\n"
	"  --hist BINS        the distribution of log10 h per block type\n"
	"  --ratios           S(norm)/S(block) beside the paper's Blockwise LR ratios\n"
	"  --check principle  exit 1 unless Norm is the sharpest and Emb the flattest\n"
	"  --strict           with --check: also S(qk) < S(ffn) < S(vo)\n"
	"  --dump-labels FILE the inputs and sampled labels of every draw (HDF5)\n"
	"  --threads N        threads (default: all cores)\n"
	TOOL_SELECT_HELP
	"See sw-sharpness(1).\n";

enum {
	O_DATA = OPT_TOOL_FIRST, O_DATA_FORMAT, O_BATCH_TOKENS, O_SEQ_LEN, O_MICRO_BATCH, O_DRAWS,
	O_SAME_BATCH, O_SEED, O_RECOMPUTE, O_PER_LAYER, O_PER_TENSOR, O_HIST, O_RATIOS, O_CHECK,
	O_STRICT, O_DUMP_LABELS, O_THREADS
};

enum mode { BY_TYPE, BY_LAYER, BY_TENSOR, HIST, RATIOS };

struct opts {
	const char *data, *dump;
	enum data_format fmt;
	int64_t batch_tokens;
	int seq_len, micro, draws, same_batch, recompute, check, strict, bins;
	uint64_t seed;
	enum mode mode;
};

/* The estimate of one file: h over its tensors, in their order. */
struct estimate {
	int n;
	struct sw_tensor_info *info;    /* (n) */
	size_t *offset;                 /* (n) into h */
	float *h;
	int64_t step;
	int has_step;
	const char *source;             /* "fisher" or "computed" */
};

static void free_estimate(struct estimate *e)
{
	free(e->info);
	free(e->offset);
	free(e->h);
	memset(e, 0, sizeof *e);
}

/* /fisher from the checkpoint: 1 if every tensor has one, 0 if not. */
static int from_fisher(struct ckpt *ck, struct estimate *e, struct sw_err *err)
{
	size_t n = ckpt_count(ck), total = 0;

	for (size_t i = 0; i < n; i++) {
		if (!ckpt_has_aux(ck, "fisher", i))
			return 0;
		total += (size_t)ckpt_info(ck, i)->numel;
	}
	e->n = (int)n;
	e->info = calloc(n ? n : 1, sizeof *e->info);
	e->offset = calloc(n ? n : 1, sizeof *e->offset);
	e->h = malloc((total ? total : 1) * sizeof *e->h);
	if (!e->info || !e->offset || !e->h)
		return -sw_fail(err, SW_ESOFTWARE, "out of memory");
	total = 0;
	for (size_t i = 0; i < n; i++) {
		e->info[i] = *ckpt_info(ck, i);
		e->offset[i] = total;
		if (ckpt_load_aux(ck, "fisher", i, e->h + total, err))
			return -err->code;
		total += (size_t)e->info[i].numel;
	}
	e->source = "fisher";
	return 1;
}

static double mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	double kb = 0;

	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Compute the estimate with the model on tokens from the data file. */
static int compute(const char *file, const struct opts *o, struct estimate *e, struct sw_err *err)
{
	struct model m;
	struct dataset d;
	struct sw_rng r;
	int rc, T, B, mb;
	int *tok = NULL, *labels = NULL, *inputs = NULL;
	real *probs = NULL;
	double need, have = mem_available();

	if (!o->data)
		return sw_fail(err, SW_EUSAGE, "no /fisher in the checkpoint: give --data");
	if ((rc = modelio_load(file, &m, err)))
		return rc;
	if ((rc = data_open(o->data, o->fmt, 0, &d, err))) {
		sw_err_prefix(err, "%s", o->data);
		model_free(&m);
		return rc;
	}
	T = o->seq_len ? o->seq_len : (int)(m.c.seq_len && m.c.seq_len < 512 ? m.c.seq_len : 512);
	if (o->batch_tokens % T) {
		rc = sw_fail(err, SW_EUSAGE, "--batch-tokens %lld is not a multiple of the sequence length %d",
			     (long long)o->batch_tokens, T);
		goto out;
	}
	B = (int)(o->batch_tokens / T);
	if ((rc = data_check(&d, T, (int)m.c.vocab_size, err))) {
		sw_err_prefix(err, "%s", o->data);
		goto out;
	}
	/* the largest micro-batch dividing B whose activations take at most
	 * a quarter of the free memory (or the one asked for) */
	mb = o->micro ? o->micro : B;
	while (!o->micro && mb > 1 && (B % mb || model_acts_bytes(&m.c, mb, T) > have / 4))
		mb--;
	if (B % mb) {
		rc = sw_fail(err, SW_EUSAGE, "--micro-batch %d does not divide the batch of %d sequences", mb, B);
		goto out;
	}
	need = model_acts_bytes(&m.c, mb, T) + 4.0 * (double)m.nparams * 4 +
	       (mb == B ? (double)mb * T * m.c.vocab_size * sizeof(real) : 0);
	if (have > 0 && need > have) {
		rc = sw_fail(err, SW_ESOFTWARE,
			     "needs %.1f GB (parameters, gradient, estimate, activations), %.1f GB available",
			     need / 1e9, have / 1e9);
		goto out;
	}
	e->n = m.ntensors;
	e->info = calloc((size_t)m.ntensors, sizeof *e->info);
	e->offset = calloc((size_t)m.ntensors, sizeof *e->offset);
	e->h = calloc(m.nparams, sizeof *e->h);
	tok = malloc((size_t)B * T * sizeof *tok);
	int *tgt = malloc((size_t)B * T * sizeof *tgt);
	if (o->dump) {
		labels = malloc((size_t)o->draws * B * T * sizeof *labels);
		inputs = malloc((size_t)o->draws * B * T * sizeof *inputs);
	}
	if (mb == B)
		probs = malloc((size_t)B * T * m.c.vocab_size * sizeof *probs);
	if (!e->info || !e->offset || !e->h || !tok || !tgt || (o->dump && (!labels || !inputs)) ||
	    (mb == B && !probs)) {
		free(tgt);
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (int i = 0; i < m.ntensors; i++) {
		e->info[i] = m.tensors[i].info;
		e->offset[i] = m.tensors[i].offset;
	}
	rng_seed(&r, o->seed);
	if (o->same_batch) {
		data_train_batch(&d, &r, B, T, tok, tgt);
		rc = gnb_estimate(&m, tok, B, T, mb, o->draws, &r, e->h, labels, probs, err);
		for (int k = 0; inputs && k < o->draws; k++)
			memcpy(inputs + (size_t)k * B * T, tok, (size_t)B * T * sizeof *tok);
	} else {
		/* a fresh batch for every draw; each adds N g^2, averaged at the end */
		for (int k = 0; k < o->draws && !rc; k++) {
			data_train_batch(&d, &r, B, T, tok, tgt);
			rc = gnb_estimate(&m, tok, B, T, mb, 1, &r, e->h,
					  labels ? labels + (size_t)k * B * T : NULL, probs, err);
			if (inputs)
				memcpy(inputs + (size_t)k * B * T, tok, (size_t)B * T * sizeof *tok);
		}
		for (size_t i = 0; !rc && i < m.nparams; i++)
			e->h[i] /= (float)o->draws;
	}
	free(tgt);
	if (!rc && o->dump) {
		struct h5w *w;
		if (!(rc = h5w_create(o->dump, "gnb-labels", &w, err))) {
			if ((rc = h5w_write_i32(w, "/", "tokens", (int64_t)o->draws * B, T, inputs, err)) ||
			    (rc = h5w_write_i32(w, "/", "labels", (int64_t)o->draws * B, T, labels, err)) ||
			    (rc = h5w_set_i64(w, "/", "draws", o->draws, err)) ||
			    (rc = h5w_set_i64(w, "/", "batch_tokens", (int64_t)B * T, err)))
				h5w_abort(w);
			else
				rc = h5w_commit(w, err);
		}
	}
	e->source = "computed";
out:
	free(tok);
	free(labels);
	free(inputs);
	free(probs);
	data_close(&d);
	model_free(&m);
	return rc;
}

/* ---- printing --------------------------------------------------------- */

static const char *const type_cols[] = {
	"file", "step", "block", "nparams", "mean", "log10_mean", "mean_log10", "q10_log10",
	"median_log10", "q90_log10", "zeros"
};
static const char *const layer_cols[] = {
	"file", "step", "block", "layer", "nparams", "mean", "log10_mean", "mean_log10", "q10_log10",
	"median_log10", "q90_log10", "zeros"
};
static const char *const tensor_cols[] = {
	"file", "step", "name", "block", "role", "layer", "nparams", "mean", "log10_mean",
	"mean_log10", "q10_log10", "median_log10", "q90_log10", "zeros"
};
static const char *const hist_cols[] = {
	"file", "step", "block", "bin_lo", "bin_hi", "count", "fraction"
};
static const char *const ratio_cols[] = {
	"file", "step", "block", "mean", "norm_over_block", "paper_ratio"
};

static void row_head(struct table *tb, const char *file, const struct estimate *e)
{
	table_str(tb, file);
	if (e->has_step)
		table_int(tb, e->step);
	else
		table_empty(tb);
}

static void row_stats(struct table *tb, const struct gnb_stats *s)
{
	table_int(tb, s->n);
	table_num(tb, s->mean);
	table_num(tb, s->mean > 0 ? log10(s->mean) : NAN);
	table_num(tb, s->mean_log10);
	table_num(tb, s->q10);
	table_num(tb, s->median);
	table_num(tb, s->q90);
	table_int(tb, s->zeros);
	table_end_row(tb);
}

/* Gather the estimates of tensors matching (block, layer or any, tensor or
 * any, selection) into vals; returns the count. */
static int64_t gather(const struct tool *tl, const struct estimate *e, int block, int layer,
		      int tensor, float *vals)
{
	int64_t n = 0;

	for (int i = 0; i < e->n; i++) {
		const struct sw_tensor_info *t = &e->info[i];
		if ((block >= 0 && (int)t->block != block) || (layer != -2 && t->layer != layer) ||
		    (tensor >= 0 && i != tensor) || !select_match_info(&tl->sel, t))
			continue;
		memcpy(vals + n, e->h + e->offset[i], (size_t)t->numel * sizeof *vals);
		n += t->numel;
	}
	return n;
}

static int64_t total_params(const struct estimate *e)
{
	int64_t n = 0;
	for (int i = 0; i < e->n; i++)
		n += e->info[i].numel;
	return n;
}

/* S(block) of every type present, for --ratios and --check */
static int type_means(struct tool *tl, const struct estimate *e, float *vals, double *S,
		      struct sw_err *err)
{
	for (int b = 0; b < SW_BLOCK_COUNT; b++) {
		struct gnb_stats s;
		int64_t n = gather(tl, e, b, -2, -1, vals);
		S[b] = NAN;
		if (n && gnb_stats_of(vals, n, &s, err))
			return err->code;
		if (n)
			S[b] = s.mean;
	}
	return SW_OK;
}

static int print_file(struct tool *tl, struct table *tb, const char *file, const struct opts *o,
		      const struct estimate *e, struct sw_err *err)
{
	float *vals = malloc((size_t)(total_params(e) + 1) * sizeof *vals);
	int rc = SW_OK;

	if (!vals)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (o->mode == BY_TYPE || o->mode == BY_LAYER) {
		int L = 0;
		for (int i = 0; i < e->n; i++)
			L = e->info[i].layer + 1 > L ? e->info[i].layer + 1 : L;
		for (int b = 0; b < SW_BLOCK_COUNT && !rc; b++)
			for (int l = o->mode == BY_LAYER ? -1 : -2; l < (o->mode == BY_LAYER ? L : -1); l++) {
				struct gnb_stats s;
				int64_t n = gather(tl, e, b, l, -1, vals);
				if (!n)
					continue;
				if ((rc = gnb_stats_of(vals, n, &s, err)))
					break;
				row_head(tb, file, e);
				table_str(tb, sw_block_name((enum sw_block)b));
				if (o->mode == BY_LAYER)
					table_int(tb, l);
				row_stats(tb, &s);
			}
	} else if (o->mode == BY_TENSOR) {
		for (int i = 0; i < e->n && !rc; i++) {
			struct gnb_stats s;
			int64_t n = gather(tl, e, -1, -2, i, vals);
			if (!n)
				continue;
			if ((rc = gnb_stats_of(vals, n, &s, err)))
				break;
			row_head(tb, file, e);
			table_str(tb, e->info[i].name);
			table_str(tb, sw_block_name(e->info[i].block));
			table_str(tb, e->info[i].role);
			table_int(tb, e->info[i].layer);
			row_stats(tb, &s);
		}
	} else if (o->mode == HIST) {
		/* common log10 bins over every type's nonzero entries */
		double lo = INFINITY, hi = -INFINITY;
		int64_t n = gather(tl, e, -1, -2, -1, vals);
		for (int64_t i = 0; i < n; i++)
			if (vals[i] > 0) {
				double x = log10((double)vals[i]);
				lo = x < lo ? x : lo;
				hi = x > hi ? x : hi;
			}
		if (!(hi >= lo)) {
			rc = sw_fail(err, SW_EDATA, "every estimate is zero: no distribution to print");
		} else {
			double w = hi > lo ? (hi - lo) / o->bins : 1;
			int64_t *count = calloc((size_t)o->bins, sizeof *count);
			for (int b = 0; b < SW_BLOCK_COUNT && count; b++) {
				int64_t nb = gather(tl, e, b, -2, -1, vals), nz = 0;
				if (!nb)
					continue;
				memset(count, 0, (size_t)o->bins * sizeof *count);
				for (int64_t i = 0; i < nb; i++)
					if (vals[i] > 0) {
						int k = (int)((log10((double)vals[i]) - lo) / w);
						count[k >= o->bins ? o->bins - 1 : k < 0 ? 0 : k]++;
						nz++;
					}
				for (int k = 0; k < o->bins; k++) {
					row_head(tb, file, e);
					table_str(tb, sw_block_name((enum sw_block)b));
					table_num(tb, lo + k * w);
					table_num(tb, lo + (k + 1) * w);
					table_int(tb, count[k]);
					table_num(tb, nz ? (double)count[k] / (double)nz : 0);
					table_end_row(tb);
				}
			}
			if (!count)
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			free(count);
		}
	} else {
		double S[SW_BLOCK_COUNT];
		if (!(rc = type_means(tl, e, vals, S, err)))
			for (int b = 0; b < SW_BLOCK_COUNT; b++) {
				if (isnan(S[b]))
					continue;
				row_head(tb, file, e);
				table_str(tb, sw_block_name((enum sw_block)b));
				table_num(tb, S[b]);
				table_num(tb, S[SW_BLOCK_NORM] / S[b]);
				if (gnb_paper_ratio((enum sw_block)b) > 0)
					table_num(tb, gnb_paper_ratio((enum sw_block)b));
				else
					table_empty(tb);
				table_end_row(tb);
			}
	}
	free(vals);
	return rc;
}

/* Principle (1): S(Emb) << S(QK) < S(FFN) < S(VO) << S(Norm). Without
 * --strict: Norm the largest and Emb the smallest of the five. */
static int check_principle(struct tool *tl, const char *file, const struct opts *o,
			   const struct estimate *e, struct sw_err *err)
{
	static const enum sw_block five[] = {
		SW_BLOCK_EMB, SW_BLOCK_QK, SW_BLOCK_VO, SW_BLOCK_FFN, SW_BLOCK_NORM
	};
	float *vals = malloc((size_t)(total_params(e) + 1) * sizeof *vals);
	double S[SW_BLOCK_COUNT];
	int broken = 0, rc;

	if (!vals)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	rc = type_means(tl, e, vals, S, err);
	free(vals);
	if (rc)
		return rc;
	for (size_t i = 0; i < 5; i++)
		if (isnan(S[five[i]]))
			return sw_fail(err, SW_EDATA, "no %s parameters: Principle (1) needs all five types",
				       sw_block_name(five[i]));
	for (size_t i = 0; i < 5; i++) {
		enum sw_block b = five[i];
		if (b != SW_BLOCK_NORM && !(S[b] < S[SW_BLOCK_NORM])) {
			fprintf(stderr, "%s: %s: Principle (1) broken: S(norm) = %.3g is not above S(%s) = %.3g\n",
				tl->prog, file, S[SW_BLOCK_NORM], sw_block_name(b), S[b]);
			broken = 1;
		}
		if (b != SW_BLOCK_EMB && !(S[SW_BLOCK_EMB] < S[b])) {
			fprintf(stderr, "%s: %s: Principle (1) broken: S(emb) = %.3g is not below S(%s) = %.3g\n",
				tl->prog, file, S[SW_BLOCK_EMB], sw_block_name(b), S[b]);
			broken = 1;
		}
	}
	if (o->strict) {
		static const enum sw_block chain[] = {SW_BLOCK_QK, SW_BLOCK_FFN, SW_BLOCK_VO};
		for (int i = 0; i + 1 < 3; i++)
			if (!(S[chain[i]] < S[chain[i + 1]])) {
				fprintf(stderr, "%s: %s: Principle (1) broken: S(%s) = %.3g is not below S(%s) = %.3g\n",
					tl->prog, file, sw_block_name(chain[i]), S[chain[i]],
					sw_block_name(chain[i + 1]), S[chain[i + 1]]);
				broken = 1;
			}
	}
	return broken ? SW_ECHECK : SW_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		{"data", required_argument, NULL, O_DATA},
		{"data-format", required_argument, NULL, O_DATA_FORMAT},
		{"batch-tokens", required_argument, NULL, O_BATCH_TOKENS},
		{"seq-len", required_argument, NULL, O_SEQ_LEN},
		{"micro-batch", required_argument, NULL, O_MICRO_BATCH},
		{"draws", required_argument, NULL, O_DRAWS},
		{"same-batch", no_argument, NULL, O_SAME_BATCH},
		{"seed", required_argument, NULL, O_SEED},
		{"recompute", no_argument, NULL, O_RECOMPUTE},
		{"per-layer", no_argument, NULL, O_PER_LAYER},
		{"per-tensor", no_argument, NULL, O_PER_TENSOR},
		{"hist", required_argument, NULL, O_HIST},
		{"ratios", no_argument, NULL, O_RATIOS},
		{"check", required_argument, NULL, O_CHECK},
		{"strict", no_argument, NULL, O_STRICT},
		{"dump-labels", required_argument, NULL, O_DUMP_LABELS},
		{"threads", required_argument, NULL, O_THREADS},
		{NULL, 0, NULL, 0}
	};
	static const char *const formats[] = {"auto", "llmc", "uint16", "bytes"};
	struct opts o = {.batch_tokens = 8192, .draws = 1, .seed = 1, .mode = BY_TYPE};
	struct tool tl;
	struct table tb;
	const char *file;
	int opt, modes = 0, nfiles = 0;

	tool_runtime(argv);
	tool_init(&tl, "sw-sharpness", usage, help, argc, argv);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case O_DATA: o.data = optarg; break;
		case O_DATA_FORMAT: {
			int k = -1;
			for (int i = 0; i < 4; i++)
				if (!strcmp(optarg, formats[i]))
					k = i;
			if (k < 0)
				tool_usage_error(&tl, "--data-format: auto, llmc, uint16 or bytes");
			o.fmt = (enum data_format)k;
			break;
		}
		case O_BATCH_TOKENS: o.batch_tokens = tool_parse_int(&tl, "--batch-tokens", optarg, 1, 1LL << 32); break;
		case O_SEQ_LEN: o.seq_len = (int)tool_parse_int(&tl, "--seq-len", optarg, 1, 1 << 16); break;
		case O_MICRO_BATCH: o.micro = (int)tool_parse_int(&tl, "--micro-batch", optarg, 1, 1 << 20); break;
		case O_DRAWS: o.draws = (int)tool_parse_int(&tl, "--draws", optarg, 1, 1 << 20); break;
		case O_SAME_BATCH: o.same_batch = 1; break;
		case O_SEED: o.seed = (uint64_t)tool_parse_int(&tl, "--seed", optarg, 0, 1LL << 62); break;
		case O_RECOMPUTE: o.recompute = 1; break;
		case O_PER_LAYER: o.mode = BY_LAYER; modes++; break;
		case O_PER_TENSOR: o.mode = BY_TENSOR; modes++; break;
		case O_HIST: o.mode = HIST; o.bins = (int)tool_parse_int(&tl, "--hist", optarg, 1, 100000); modes++; break;
		case O_RATIOS: o.mode = RATIOS; modes++; break;
		case O_CHECK:
			if (strcmp(optarg, "principle"))
				tool_usage_error(&tl, "--check: the only check is 'principle'");
			o.check = 1;
			break;
		case O_STRICT: o.strict = 1; break;
		case O_DUMP_LABELS: o.dump = optarg; break;
		case O_THREADS: {
			int n = (int)tool_parse_int(&tl, "--threads", optarg, 1, 1024);
			omp_set_num_threads(n);
			break;
		}
		default: tool_common_option(&tl, opt, optarg); break;
		}
	}
	if (modes > 1)
		tool_usage_error(&tl, "--per-layer, --per-tensor, --hist and --ratios exclude each other");
	if (o.strict && !o.check)
		tool_usage_error(&tl, "--strict goes with --check principle");
	tool_files_begin(&tl, optind);
	if (o.dump && argc - optind != 1)
		tool_usage_error(&tl, "--dump-labels takes one FILE");
	if (o.mode == BY_LAYER)
		table_init(&tb, stdout, tl.fmt, layer_cols, 12);
	else if (o.mode == BY_TENSOR)
		table_init(&tb, stdout, tl.fmt, tensor_cols, 14);
	else if (o.mode == HIST)
		table_init(&tb, stdout, tl.fmt, hist_cols, 7);
	else if (o.mode == RATIOS)
		table_init(&tb, stdout, tl.fmt, ratio_cols, 6);
	else
		table_init(&tb, stdout, tl.fmt, type_cols, 11);
	table_header(&tb);
	while ((file = tool_next_file(&tl)) && !tool_stdout_broken(&tl)) {
		struct estimate e;
		struct ckpt *ck;
		struct sw_err err;
		int rc = 0, have;

		memset(&e, 0, sizeof e);
		nfiles++;
		if (ckpt_open(file, &ck, &err)) {
			tool_error(&tl, file, &err);
			continue;
		}
		e.has_step = ckpt_meta(ck)->has_step;
		e.step = ckpt_meta(ck)->step;
		have = o.recompute || o.dump ? 0 : from_fisher(ck, &e, &err);
		ckpt_close(ck);
		if (have < 0) {
			tool_error(&tl, file, &err);
			free_estimate(&e);
			continue;
		}
		if (!have) {
			tool_progress(&tl, "%s: estimating on %lld tokens x %d draws", file,
				      (long long)o.batch_tokens, o.draws);
			free_estimate(&e);
			e.has_step = have = 0;
			if (ckpt_open(file, &ck, &err) == SW_OK) {
				e.has_step = ckpt_meta(ck)->has_step;
				e.step = ckpt_meta(ck)->step;
				ckpt_close(ck);
			}
			rc = compute(file, &o, &e, &err);
		}
		tool_progress_done(&tl);
		if (!rc)
			rc = print_file(&tl, &tb, file, &o, &e, &err);
		if (!rc && o.check) {
			rc = check_principle(&tl, file, &o, &e, &err);
			if (rc == SW_ECHECK) {
				if (!tl.status)
					tl.status = SW_ECHECK;
				rc = 0;
			}
		}
		if (rc)
			tool_error(&tl, file, &err);
		free_estimate(&e);
	}
	return tool_finish(&tl);
}
