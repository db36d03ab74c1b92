/*
 * Unit tests of the trace side of lib/analysis/qkdrift.c and lib/analysis/transfer.c, on
 * traces written here with lib/files/tracewrite.c's writer: qkdrift_layer on arrays
 * gives what qkdrift_head_derive makes of its four scales; a trace's rows
 * read back as heads with the config's KV heads, the selected layers and
 * the tokens; the trace is told from a checkpoint by content; and what an
 * older or a malformed trace lacks is SW_EDATA with one message naming it:
 * a series missing, columns not layerL.headH, a multiplier series without
 * its pair, a scale that is NaN, /optim missing, an attribute the writer
 * must refuse.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/analysis/qkdrift.h"
#include "../../lib/files/trace.h"
#include "../../lib/analysis/transfer.h"
#include "tap.h"

/* 2 layers of 2 heads sharing 1 KV head */
static const struct sw_config cfg = {
	.arch = "llama", .vocab_size = 11, .d_model = 4, .n_layers = 2, .n_heads = 2,
	.n_kv_heads = 1, .head_dim = 2, .d_ff = 6, .seq_len = 8, .rope_theta = 1e4,
	.norm_eps = 1e-5, .tie_embeddings = 1, .multipliers = "none", .scale_vectors = 1,
};

static const char *const good_cols[] = {"layer0.head0", "layer0.head1", "layer1.head0", "layer1.head1"};
static const char *const bad_cols[] = {"layer0.head0", "layer0.head1", "layer1.head1", "layer1.head0"};

/* Write path: the series given (4 columns for 2-D ones), 3 rows at steps
 * 10, 20, 30; column j of a 2-D series at row r is (j + 1) (r + 1),
 * except that nan_at (>= 0) is NaN in row 1; tokens 100 r; val_loss at
 * rows 1 and 2. */
static int write_trace(const char *path, const struct sw_config *c,
		       const struct trace_attr *attrs, int nattrs,
		       const struct trace_series *s, int ns, int nan_at)
{
	struct trace_writer *w;
	struct sw_err err;

	if (trace_create(path, c, attrs, nattrs, s, ns, &w, &err)) {
		diag("%s", err.msg);
		return 0;
	}
	for (int r = 0; r < 3; r++) {
		double v[8][4];
		const double *p[8];
		for (int i = 0; i < ns; i++) {
			for (int j = 0; j < 4; j++)
				v[i][j] = (j + 1) * (r + 1.0);
			if (!strcmp(s[i].name, "tokens"))
				v[i][0] = 100.0 * r;
			if (!strcmp(s[i].name, "val_loss"))
				v[i][0] = r ? 3.0 - r : NAN;
			if (r == 1 && nan_at >= 0 && s[i].ncols)
				v[i][nan_at] = NAN;
			p[i] = v[i];
		}
		if (trace_append(w, 10 * (r + 1), p, &err)) {
			diag("%s", err.msg);
			trace_close(w, NULL);
			return 0;
		}
	}
	return trace_close(w, &err) == SW_OK;
}

/* qkdrift_read_trace on path: its status, and the message in err. */
static int read_qk(const char *path, struct sw_err *err, struct qk_step **steps, size_t *n,
		   size_t *nh, const struct sw_select *sel)
{
	struct sw_config c;

	return qkdrift_read_trace(path, sel, &c, steps, n, nh, err);
}

static void test_layer(void)
{
	/* q: 4x4 (2 heads of 2 rows), k: 2x4 (1 KV head), attn_norm gain 2 */
	static const float q[16] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2};
	static const float k[8] = {3, 3, 3, 3, 3, 3, 3, 3};
	static const float gamma[4] = {2, 2, 2, 2};
	struct sw_tensor_info tq = {.rank = 2, .shape = {4, 4}, .numel = 16};
	struct sw_tensor_info tk = {.rank = 2, .shape = {2, 4}, .numel = 8};
	struct sw_tensor_info tg = {.rank = 1, .shape = {4}, .numel = 4};
	struct qk_tensor in[QK_NROLES];
	struct sw_config c = cfg;
	struct qk_head h[2];
	struct sw_err err;

	memset(in, 0, sizeof in);
	in[QK_Q] = (struct qk_tensor){&tq, q};
	in[QK_K] = (struct qk_tensor){&tk, k};
	in[QK_ATTN_NORM] = (struct qk_tensor){&tg, gamma};
	ok(qkdrift_layer(&c, 1, in, h, &err) == SW_OK, "qkdrift_layer on arrays");
	ok(h[0].layer == 1 && h[1].head == 1 && h[1].kv_head == 0 && h[0].source == QK_SRC_MATRICES,
	   "layer, head, KV head of the group, source");
	ok(h[0].q_rms == 2 && h[1].q_rms == 4 && h[0].k_rms == 6, "the gain folded in: q_rms 2, 4, k_rms 6");
	ok(h[1].product == 24 && h[1].log2_ratio == log2(4.0 / 6), "product and log2 ratio");
	ok(isnan(h[0].q_mult) && isnan(h[0].mult_product), "no multipliers: NaN");
	{
		/* rowcol: q rows r = (1, 1, 3, 3), columns c = (2, 2, 2, 2); k rows
		 * (4, 4), columns (0.5 x4): head 1's Q_h = 3 x 2 x 2 x 2 = 24, its
		 * q_mult 3 x 2 = 6; K = 3 x 2 x 4 x 0.5 = 12, k_mult 4 x 0.5 = 2 */
		static const float qr[4] = {1, 1, 3, 3}, qc[4] = {2, 2, 2, 2}, kr[2] = {4, 4},
				   kc[4] = {0.5, 0.5, 0.5, 0.5};
		struct sw_tensor_info t4 = {.rank = 1, .shape = {4}, .numel = 4, .name = "q_mult"};
		struct sw_tensor_info t2 = {.rank = 1, .shape = {2}, .numel = 2, .name = "k_mult"};
		struct qk_tensor rc[QK_NROLES];
		memcpy(rc, in, sizeof rc);
		strcpy(c.multipliers, "rowcol");
		rc[QK_QMULT] = (struct qk_tensor){&t4, qr};
		rc[QK_QMULT_COL] = (struct qk_tensor){&t4, qc};
		rc[QK_KMULT] = (struct qk_tensor){&t2, kr};
		rc[QK_KMULT_COL] = (struct qk_tensor){&t4, kc};
		ok(qkdrift_layer(&c, 1, rc, h, &err) == SW_OK && h[1].q_rms == 24 && h[1].k_rms == 12 &&
		   h[1].q_mult == 6 && h[1].k_mult == 2 && h[0].q_rms == 4 && h[0].q_mult == 2,
		   "row and column multipliers: both folded in, q_mult the product of their RMS");
		rc[QK_KMULT_COL] = (struct qk_tensor){&t2, kr};
		ok(qkdrift_layer(&c, 1, rc, h, &err) == SW_EDATA && strstr(err.msg, "not the column multiplier"),
		   "a column multiplier of the wrong size: SW_EDATA (%s)", err.msg);
		strcpy(c.multipliers, "none");
	}
	in[QK_Q].t = NULL;
	ok(qkdrift_layer(&c, 1, in, h, &err) == SW_EDATA && strstr(err.msg, "layer 1 has no q projection"),
	   "no q projection: SW_EDATA (%s)", err.msg);
	c.qk_norm = 1;
	ok(qkdrift_layer(&c, 1, in, h, &err) == SW_OK && h[0].source == QK_SRC_UNIT &&
	   h[0].q_rms == 1 && h[0].log2_ratio == 0, "QK-norm without gains: unit scales");
	ok(qkdrift_source(&c, 1) == QK_SRC_GAINS && qkdrift_source(&cfg, 1) == QK_SRC_MATRICES,
	   "qkdrift_source");
}

static void test_derive(void)
{
	struct qk_head h = {.q_rms = 8, .k_rms = 2, .q_mult = 0.5, .k_mult = 2};

	qkdrift_head_derive(&h);
	ok(h.product == 16 && h.log2_ratio == 2 && h.mult_product == 1 && h.mult_log2_ratio == -2,
	   "qkdrift_head_derive: products and log2 ratios");
	h.k_mult = NAN;
	qkdrift_head_derive(&h);
	ok(isnan(h.mult_product) && isnan(h.mult_log2_ratio), "one multiplier unknown: the pair NaN");
}

static void test_read(const char *dir)
{
	static const struct trace_series good[] = {
		{"tokens", 0, NULL}, {"qk_q_rms", 4, good_cols}, {"qk_k_rms", 4, good_cols},
	};
	char path[512];
	struct qk_step *s = NULL;
	struct sw_select sel;
	struct sw_err err;
	size_t n = 0, nh = 0;
	char kind[32];

	snprintf(path, sizeof path, "%s/good.h5", dir);
	ok(write_trace(path, &cfg, NULL, 0, good, 3, -1), "a trace with the Q/K pair");
	ok(trace_sniff(path, kind, sizeof kind) == 1 && !strcmp(kind, "trace"), "sniffed: a trace");
	ok(read_qk(path, &err, &s, &n, &nh, NULL) == SW_OK && n == 3 && nh == 4, "read: 3 rows of 4 heads");
	if (n == 3 && nh == 4) {
		ok(s[2].step == 30 && s[2].has_tokens && s[2].tokens == 200, "steps and tokens");
		ok(s[1].heads[3].layer == 1 && s[1].heads[3].head == 1 && s[1].heads[3].kv_head == 0,
		   "layer1.head1 is layer 1, head 1, KV head 0");
		ok(s[1].heads[3].q_rms == 8 && s[1].heads[3].k_rms == 8 && s[1].heads[3].log2_ratio == 0,
		   "its scales, row 1 column 3: 4 x 2");
		ok(s[0].heads[2].source == QK_SRC_MATRICES && isnan(s[0].heads[2].q_mult), "source, no multipliers");
	}
	qkdrift_steps_free(s, n);
	select_init(&sel);
	ok(select_add_layers(&sel, "1", &err) == SW_OK, "--layer 1");
	ok(read_qk(path, &err, &s, &n, &nh, &sel) == SW_OK && n == 3 && nh == 2 &&
	   s[0].heads[0].layer == 1 && s[0].heads[1].head == 1, "--layer 1: its two heads");
	qkdrift_steps_free(s, n);
}

/* Each malformed trace: its series, config, the message expected. */
static void test_refused(const char *dir)
{
	static const struct trace_series no_k[] = {{"qk_q_rms", 4, good_cols}, {"q_head_rms", 4, good_cols}};
	static const struct trace_series shuffled[] = {{"qk_q_rms", 4, good_cols}, {"qk_k_rms", 4, bad_cols}};
	static const struct trace_series narrow[] = {{"qk_q_rms", 3, good_cols}, {"qk_k_rms", 4, good_cols}};
	static const struct trace_series half_mult[] = {
		{"qk_q_rms", 4, good_cols}, {"qk_k_rms", 4, good_cols}, {"qk_q_mult", 4, good_cols},
	};
	static const struct trace_series pair[] = {{"qk_q_rms", 4, good_cols}, {"qk_k_rms", 4, good_cols}};
	const struct {
		const char *name;
		const struct sw_config *c;
		const struct trace_series *s;
		int ns, nan_at;
		const char *msg;
	} cases[] = {
		{"older", &cfg, no_k, 2, -1, "no series qk_k_rms"},
		{"shuffled", &cfg, shuffled, 2, -1, "/series/qk_k_rms: column 2 is 'layer1.head1', not layer1.head0"},
		{"narrow", &cfg, narrow, 2, -1, "/series/qk_q_rms: 3 columns, not 4"},
		{"half-mult", &cfg, half_mult, 3, -1, "series qk_q_mult without qk_k_mult"},
		{"nan", &cfg, pair, 2, 1, "step 20: layer 0 head 1: the Q/K scales are not known"},
		{"no-config", NULL, pair, 2, -1, "no /config"},
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char path[512];
		struct qk_step *s = NULL;
		struct sw_err err;
		size_t n = 0, nh = 0;
		int rc;

		snprintf(path, sizeof path, "%s/%s.h5", dir, cases[i].name);
		if (!write_trace(path, cases[i].c, NULL, 0, cases[i].s, cases[i].ns, cases[i].nan_at)) {
			ok(0, "%s: written", cases[i].name);
			continue;
		}
		rc = read_qk(path, &err, &s, &n, &nh, NULL);
		ok(rc == SW_EDATA && strstr(err.msg, cases[i].msg) && !s && !n,
		   "%s: SW_EDATA, '%s' (%s)", cases[i].name, cases[i].msg, rc ? err.msg : "read");
		qkdrift_steps_free(s, n);
	}
}

static void test_transfer(const char *dir)
{
	static const struct trace_series s[] = {
		{"tokens", 0, NULL}, {"val_loss", 0, NULL}, {"out_norm", 0, NULL}, {"loss", 0, NULL},
	};
	static const struct trace_attr optim[] = {{"/optim", "lr_max", 0, 0.5}, {"/optim", "batch_size", 1, 8}};
	static const struct trace_attr lr_only[] = {{"/optim", "lr_max", 0, 0.5}};
	static const struct trace_attr bad[] = {{"/config", "lr_max", 0, 0.5}};
	struct transfer_run *runs = NULL;
	struct trace_writer *w = NULL;
	struct sw_err err;
	char path[512];
	size_t n = 0;

	snprintf(path, sizeof path, "%s/runs.h5", dir);
	ok(write_trace(path, &cfg, optim, 2, s, 4, -1), "a trace with /optim");
	ok(transfer_read_trace(path, &runs, &n, &err) == SW_OK && n == 2, "two evaluation rows, two runs");
	if (n == 2)
		ok(runs[0].lr == 0.5 && runs[0].batch == 8 && runs[0].d_model == 4 && runs[0].tokens == 100 &&
		   runs[0].val_loss == 2 && runs[0].train_loss == 2 && runs[0].out_norm == 2 &&
		   isnan(runs[0].out_norm_folded) && runs[1].tokens == 200 && runs[1].val_loss == 1 &&
		   !strcmp(runs[1].name, path), "lr_max, batch_size, d_model, tokens, losses, norms, name");
	for (size_t i = 0; i < n; i++)
		transfer_run_free(&runs[i]);
	free(runs);
	snprintf(path, sizeof path, "%s/lr-only.h5", dir);
	ok(write_trace(path, &cfg, lr_only, 1, s, 4, -1) &&
	   transfer_read_trace(path, &runs, &n, &err) == SW_EDATA && strstr(err.msg, "no /optim batch_size") &&
	   !runs && !n, "no batch_size: SW_EDATA (%s)", err.msg);
	snprintf(path, sizeof path, "%s/bad-attr.h5", dir);
	ok(trace_create(path, &cfg, bad, 1, s, 4, &w, &err) == SW_ESOFTWARE && !w && access(path, F_OK) != 0,
	   "an attribute of /config: SW_ESOFTWARE, no file (%s)", err.msg);
}

int main(void)
{
	char dir[] = "/tmp/t-qkdrift.XXXXXX";

	if (!mkdtemp(dir))
		return 1;
	test_layer();
	test_derive();
	test_read(dir);
	test_refused(dir);
	test_transfer(dir);
	{
		char cmd[64];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			diag("could not remove %s", dir);
	}
	return tap_done();
}
