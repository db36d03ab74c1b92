/*
 * Unit tests of lib/analysis/transfer.c and the drift half of lib/analysis/qkdrift.c on
 * sweeps and runs whose answers are known by construction:
 *
 * A sweep over lr = 2^-10..2^-4, batch = 2^3..2^7 at horizons D = 2^20,
 * 2^22, 2^24 and d_model 64 and 128, with
 *   loss     = L0 + 0.05 (log2 lr - x*)^2 + 0.02 (log2 B - y*)^2
 *   log2 N   = n0 + 0.7 (log2 lr - x*) + 0.3 (log2 B - y*),  folded N 1.1 N
 *   x*       = c - 0.3 log2 D   (c = 0 at d_model 64, -0.25 at 128)
 *   y*       = -6 + 0.5 log2 D  (16, 32, 64: on the grid)
 *   n0       = 7 + 0.05 k + 0.1 [d_model 128], k the horizon's index
 * so the refined optimum is (2^x*, 2^y*) with norm 2^n0, the exponents are
 * -0.3 and 0.5, and log2 of the optimal norm spans 0.1 per model size and
 * 0.2 in all. Without refinement the optimum is the grid lr nearest x*.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/qkdrift.h"
#include "../../lib/analysis/transfer.h"
#include "tap.h"

#define NLR 7
#define NB 5
#define ND 3

static double xstar(int64_t d_model, int k) { return (d_model == 64 ? 0 : -0.25) - 0.3 * (20 + 2 * k); }
static double ystar(int k) { return -6 + 0.5 * (20 + 2 * k); }
static double n0(int64_t d_model, int k) { return 7 + 0.05 * k + (d_model == 128 ? 0.1 : 0); }

/* The sweep, in an order the analysis must not depend on (reversed). */
static struct transfer_run *make_sweep(size_t *n)
{
	struct transfer_run *runs = calloc(2 * ND * NLR * NB, sizeof *runs);
	size_t i = 2 * ND * NLR * NB;

	for (int m = 0; m < 2; m++)
		for (int k = 0; k < ND; k++)
			for (int a = 0; a < NLR; a++)
				for (int b = 0; b < NB; b++) {
					struct transfer_run *r = &runs[--i];
					int64_t d = m ? 128 : 64;
					double x = -10 + a, y = 3 + b, dx = x - xstar(d, k), dy = y - ystar(k);
					r->lr = exp2(x);
					r->batch = exp2(y);
					r->tokens = (int64_t)1 << (20 + 2 * k);
					r->d_model = d;
					r->val_loss = 3 - 0.1 * k - 0.2 * m + 0.05 * dx * dx + 0.02 * dy * dy;
					r->train_loss = NAN;
					r->out_norm = exp2(n0(d, k) + 0.7 * dx + 0.3 * dy);
					r->out_norm_folded = 1.1 * r->out_norm;
					if (asprintf(&r->name, "run-%d-%d-%d-%d", m, k, a, b) < 0)
						r->name = NULL;
				}
	*n = 2 * ND * NLR * NB;
	return runs;
}

static void free_sweep(struct transfer_run *runs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		transfer_run_free(&runs[i]);
	free(runs);
}

static void sweep(int refine)
{
	struct transfer_opts o = {refine, 0};
	struct transfer_group *g;
	struct transfer_summary s;
	struct sw_err err;
	size_t n, ng;
	struct transfer_run *runs = make_sweep(&n);
	int good = 1;

	ok(transfer_analyze(runs, n, &o, &g, &ng, &err) == SW_OK && ng == 6,
	   "%s: 6 groups (2 sizes x 3 horizons)", refine ? "refined" : "grid");
	for (size_t k = 0; k < ng; k++) {
		int h = (int)k % 3;
		double xs = xstar(g[k].d_model, h), xg = round(xs);
		double want_x = refine ? xs : xg;
		double want_n = n0(g[k].d_model, h) + (refine ? 0 : 0.7 * (xg - xs));
		good &= g[k].tokens == (int64_t)1 << (20 + 2 * h) && g[k].runs == NLR * NB;
		good &= close_rel(log2(g[k].lr), want_x, 1e-9) && g[k].batch == exp2(ystar(h));
		good &= close_rel(log2(g[k].out_norm), want_n, 1e-9);
		good &= close_rel(g[k].out_norm_folded, 1.1 * g[k].out_norm, 1e-9);
		good &= g[k].bracketed == 1 && g[k].refined == refine;
		good &= runs[g[k].best].optimal && !strcmp(g[k].loss_kind, "val_loss");
		if (!good)
			diag("group %zu: d_model %lld tokens %lld lr 2^%.12g batch %g norm 2^%.12g",
			     k, (long long)g[k].d_model, (long long)g[k].tokens, log2(g[k].lr),
			     g[k].batch, log2(g[k].out_norm));
	}
	ok(good, "%s: every group's optimum, its norm and the folded norm", refine ? "refined" : "grid");

	ok(transfer_summarize(g, ng, 64, &s, &err) == SW_OK && s.groups == 3 && s.fit_ok,
	   "d_model 64: summary");
	if (refine) {
		ok(close_rel(s.lr_exponent, -0.3, 1e-9) && close_rel(s.batch_exponent, 0.5, 1e-9),
		   "d_model 64: exponents -0.3, 0.5: %.12g %.12g", s.lr_exponent, s.batch_exponent);
		ok(close_rel(s.lr_prefactor, 1, 1e-9) && close_rel(s.batch_prefactor, exp2(-6), 1e-9) &&
		   close_rel(s.lr_r2, 1, 1e-9) && fabs(s.lr_exponent_se) < 1e-9,
		   "prefactors 1 and 2^-6, R^2 1, se 0");
		ok(close_rel(s.log2_norm_spread, 0.1, 1e-9) && close_rel(s.log2_norm_mean, 7.05, 1e-9) &&
		   close_rel(s.log2_norm_sd, 0.05, 1e-9) && close_rel(s.log2_folded_spread, 0.1, 1e-9),
		   "d_model 64: log2 norm mean 7.05, sd 0.05, spread 0.1: %.12g %.12g %.12g",
		   s.log2_norm_mean, s.log2_norm_sd, s.log2_norm_spread);
		ok(transfer_summarize(g, ng, -1, &s, &err) == SW_OK && s.groups == 6 &&
		   close_rel(s.lr_exponent, -0.3, 1e-9) && close_rel(s.batch_exponent, 0.5, 1e-9) &&
		   isnan(s.lr_prefactor),
		   "all sizes: the shared exponents, no single prefactor");
		ok(close_rel(s.log2_norm_spread, 0.2, 1e-9) && g[s.norm_min].d_model == 64 &&
		   g[s.norm_min].tokens == 1 << 20 && g[s.norm_max].d_model == 128 &&
		   g[s.norm_max].tokens == 1 << 24,
		   "all sizes: spread 0.2, from d_model 64 D 2^20 to d_model 128 D 2^24");
	} else {
		/* grid lr: -6, -7, -7 at d_model 64: slope of the line through them */
		ok(close_rel(s.lr_exponent, -0.25, 1e-9), "grid: lr exponent -0.25 (x* rounded): %.12g",
		   s.lr_exponent);
	}
	free(g);
	free_sweep(runs, n);
}

static void one_horizon(void)
{
	struct transfer_run r[2];
	struct transfer_opts o = {1, 0};
	struct transfer_group *g;
	struct transfer_summary s;
	struct sw_err err;
	size_t ng;
	int rc;

	memset(r, 0, sizeof r);
	for (int i = 0; i < 2; i++) {
		r[i].name = strdup(i ? "b" : "a");
		r[i].lr = i ? 1e-3 : 2e-3;
		r[i].batch = 8;
		r[i].tokens = 1000;
		r[i].d_model = 32;
		r[i].val_loss = i ? 3.5 : 3.25;
		r[i].train_loss = 3;
		r[i].out_norm = i ? 4 : 8;
		r[i].out_norm_folded = NAN;
	}
	ok(transfer_analyze(r, 2, &o, &g, &ng, &err) == SW_OK && ng == 1 && g[0].lr == 2e-3 &&
	   g[0].out_norm == 8 && !g[0].bracketed && !g[0].refined && isnan(g[0].out_norm_folded),
	   "one horizon: the optimum at the grid's edge is not bracketed, not refined");
	ok(transfer_summarize(g, ng, 32, &s, &err) == SW_EDATA && !s.fit_ok &&
	   strstr(err.msg, "one horizon") && s.log2_norm_spread == 0 && isnan(s.log2_folded_mean),
	   "no fit with one horizon, the norm statistics still there: %s", err.msg);
	free(g);

	/* transfer_analyze sorted the runs: r[0] is b (lr 1e-3), r[1] is a.
	 * b without val_loss: the group ranks by train_loss (a 3, b 2.5) */
	r[0].val_loss = NAN;
	r[0].train_loss = 2.5;
	rc = transfer_analyze(r, 2, &o, &g, &ng, &err);
	ok(rc == SW_OK && !strcmp(g[0].loss_kind, "train_loss") && g[0].lr == 1e-3 && g[0].loss == 2.5,
	   "not every run has val_loss: train_loss for all (%s)", g[0].loss_kind);
	free(g);
	/* a with val_loss only, b with train_loss only: each its own */
	r[1].train_loss = NAN;
	rc = transfer_analyze(r, 2, &o, &g, &ng, &err);
	ok(rc == SW_OK && !strcmp(g[0].loss_kind, "mixed") && g[0].loss == 2.5 && r[1].loss == 3.25,
	   "neither for all: each run's own (%s)", g[0].loss_kind);
	free(g);

	/* horizons within 1 %: one group with --horizon-tol 0.01, two without */
	r[1].train_loss = 3;
	r[0].tokens = 1009;
	o.horizon_tol = 0.01;
	ok(transfer_analyze(r, 2, &o, &g, &ng, &err) == SW_OK && ng == 1 && g[0].tokens == 1004,
	   "--horizon-tol 0.01: one group, tokens the geometric mean (1004)");
	free(g);
	o.horizon_tol = 0;
	ok(transfer_analyze(r, 2, &o, &g, &ng, &err) == SW_OK && ng == 2, "exact: two horizons");
	free(g);
	ok(transfer_analyze(r, 0, &o, &g, &ng, &err) == SW_EDATA, "no runs: SW_EDATA");
	transfer_run_free(&r[0]);
	transfer_run_free(&r[1]);
}

static void table_rows(void)
{
	struct transfer_cols c;
	struct transfer_run r;
	struct sw_err err;
	char missing[128];
	int rc;

	ok(transfer_table_header("file\tlr\tbatch\ttokens\td_model\tloss\tx\tout_norm", &c) &&
	   c.file == 0 && c.lr == 1 && c.out_norm == 7 && c.out_norm_folded == -1,
	   "header: columns found in any order, others ignored");
	ok(transfer_table_row(&c, "r1\t0.001\t16\t1e6\t64\t3.25\tjunk\t128", 2, &r, &err) == SW_OK &&
	   r.lr == 0.001 && r.batch == 16 && r.tokens == 1000000 && r.d_model == 64 &&
	   r.val_loss == 3.25 && r.out_norm == 128 && isnan(r.out_norm_folded) &&
	   !strcmp(r.name, "r1"), "a row");
	transfer_run_free(&r);
	ok(transfer_table_row(&c, "r2\t0.001\t16\t1e6\t64\t\tjunk\t128", 3, &r, &err) == SW_EDATA &&
	   strstr(err.msg, "no loss") && !strcmp(r.name, "r2"), "empty loss: %s", err.msg);
	transfer_run_free(&r);
	ok(transfer_table_row(&c, "r3\t0.001\t16\t1e6\t64\tnan\tjunk\t128", 4, &r, &err) == SW_EDATA,
	   "nan loss");
	transfer_run_free(&r);
	ok(transfer_table_row(&c, "r4\tfast\t16\t1e6\t64\t3\tjunk\t128", 5, &r, &err) == SW_EDATA &&
	   strstr(err.msg, "lr is not a number"), "lr not a number: %s", err.msg);
	transfer_run_free(&r);
	ok(transfer_table_row(&c, "r5\t0.001\t16\t1.5\t64\t3\tjunk\t128", 6, &r, &err) == SW_EDATA &&
	   strstr(err.msg, "positive integers"), "fractional tokens: %s", err.msg);
	transfer_run_free(&r);
	ok(transfer_table_row(&c, "r6\t0.001\t16", 7, &r, &err) == SW_EDATA, "a short row");
	transfer_run_free(&r);
	ok(!transfer_table_header("lr\tbatch\ttokens", &c), "not a header without every column");
	transfer_table_missing("lr\tbatch\ttokens\tfile", missing, sizeof missing);
	ok(!strcmp(missing, "d_model loss out_norm"), "missing columns named: '%s'", missing);
	rc = transfer_table_header("lr\tbatch\ttokens\td_model\tloss\tout_norm", &c) &&
	     transfer_table_row(&c, "0.5\t2\t3\t4\t5\t6", 9, &r, &err) == SW_OK;
	ok(rc && !strcmp(r.name, "-: line 9") && !strcmp(r.loss_kind, "loss"),
	   "no file column: named by its line (%s), loss_kind loss", r.name);
	transfer_run_free(&r);
	rc = transfer_table_header("lr\tbatch\ttokens\td_model\tloss\tout_norm\tloss_kind", &c) &&
	     transfer_table_row(&c, "0.5\t2\t3\t4\t5\t6\ttrain_loss", 10, &r, &err) == SW_OK;
	ok(rc && !strcmp(r.loss_kind, "train_loss"), "a loss_kind column is kept (%s)", r.loss_kind);
	transfer_run_free(&r);
}

static void drift(void)
{
	/* log2_ratio = 1 + 0.5 step/1000, the multipliers' -0.25 step/1000,
	 * the product 2 + step/1000; checkpoints out of step order */
	const int64_t steps[4] = {3000, 0, 2000, 1000};
	struct qk_head h[4][1], *rows[4];
	struct qk_drift d;
	struct sw_err err;

	for (int c = 0; c < 4; c++) {
		memset(h[c], 0, sizeof h[c]);
		h[c][0].layer = 2;
		h[c][0].head = 5;
		h[c][0].kv_head = 1;
		h[c][0].log2_ratio = 1 + 0.5 * (double)steps[c] / 1000;
		h[c][0].product = 2 + (double)steps[c] / 1000;    /* 2 -> 5: +150 % */
		h[c][0].mult_log2_ratio = -0.25 * (double)steps[c] / 1000;
		h[c][0].mult_product = 1;
		rows[c] = h[c];
	}
	ok(qkdrift_drift(steps, rows, 4, 0, &d, &err) == SW_OK && close_rel(d.slope, 0.5, 1e-12) &&
	   fabs(d.slope_se) < 1e-12 && d.first_step == 0 && d.last_step == 3000 && d.n == 4 &&
	   close_rel(d.product_change, 1.5, 1e-12) && d.layer == 2 && d.head == 5 && d.kv_head == 1,
	   "drift: slope 0.5 per 1000 steps, product +150 %%, steps in any order");
	ok(close_rel(d.mult_slope, -0.25, 1e-12) && d.mult_product_change == 0,
	   "the multipliers' drift beside it");
	h[1][0].mult_log2_ratio = NAN;
	ok(qkdrift_drift(steps, rows, 4, 0, &d, &err) == SW_OK && isnan(d.mult_slope),
	   "no multipliers: NaN");
	ok(qkdrift_drift(steps + 1, rows + 1, 1, 0, &d, &err) == SW_EDATA && strstr(err.msg, "two steps"),
	   "one checkpoint: %s", err.msg);
}

static void same_model(void)
{
	struct sw_config a, b;
	struct sw_err err;

	memset(&a, 0, sizeof a);
	a.d_model = 16;
	a.n_heads = 4;
	a.n_kv_heads = 2;
	strcpy(a.multipliers, "none");
	b = a;
	ok(qkdrift_same_model(&a, "first.h5", &b, &err) == SW_OK, "the same model");
	b.n_heads = 8;
	ok(qkdrift_same_model(&a, "first.h5", &b, &err) == SW_EDATA &&
	   strstr(err.msg, "n_heads is 8 here, 4 in first.h5"), "n_heads differs: %s", err.msg);
	b = a;
	strcpy(b.multipliers, "row");
	ok(qkdrift_same_model(&a, "first.h5", &b, &err) == SW_EDATA && strstr(err.msg, "multipliers"),
	   "multipliers differ: %s", err.msg);
}

int main(void)
{
	sweep(1);
	sweep(0);
	one_horizon();
	table_rows();
	drift();
	same_model();
	return tap_done();
}
