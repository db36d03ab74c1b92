/*
 * lib/analysis/lanczos.c and lib/runs/hessian.c against values known independently:
 *   - lanczos_top on symmetric matrices with known eigenvalues (diagonal
 *     and rotated, indefinite): the top k to 1e-6 (the basis is float32),
 *     the bound honest when
 *     stopped early, exact at an invariant subspace, the same bits on 1
 *     and 2 threads;
 *   - lanczos_quadrature: sum_k w_k theta_k^p = v^T A^p v / v^T v for
 *     p <= 2m - 1 (to 1e-6), weights summing to 1; lanczos_density integrating to 1;
 *   - hessian_run on a checkpoint written here: the output head's block,
 *     whose Hessian has a closed form, H = (1/N) sum_n (diag p_n -
 *     p_n p_n^T) (x) x_n x_n^T (x_n the final normed activations), formed
 *     densely in double and diagonalized by LAPACK: the top 3 to 1e-4, the
 *     Gauss-Newton block equal to it, Adam's preconditioned block
 *     D H D (D = (sqrt(v_hat) + eps)^-1/2 from the moments written) to
 *     1e-4, the trace within 3 standard errors; the blocks planned per
 *     type, layer and tensor; a selection that keeps nothing.
 */
#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/files/data.h"
#include "../../lib/runs/hessian.h"
#include "../../lib/analysis/lanczos.h"
#include "../../lib/model/layout.h"
#include "../../lib/model/model.h"
#include "../../lib/model/modelio.h"
#include "../../lib/model/optim.h"
#include "../../lib/base/rng.h"
#include "tap.h"

/* A = Q diag(lam) Q^T (Q a Householder reflection when rotate, else I) */
struct dense {
	int64_t n;
	double *a;
};

static int dense_op(void *ctx, const double *x, double *y, struct sw_err *err)
{
	const struct dense *d = ctx;

	(void)err;
	for (int64_t i = 0; i < d->n; i++) {
		double s = 0;
		for (int64_t j = 0; j < d->n; j++)
			s += d->a[i * d->n + j] * x[j];
		y[i] = s;
	}
	return SW_OK;
}

static void make_dense(struct dense *d, int64_t n, const double *lam, int rotate, struct sw_rng *r)
{
	double *u = malloc((size_t)n * sizeof *u), nu = 0;

	d->n = n;
	d->a = calloc((size_t)(n * n), sizeof *d->a);
	for (int64_t i = 0; i < n; i++) {
		u[i] = rotate ? rng_normal(r) : 0;
		nu += u[i] * u[i];
	}
	/* Q = I - 2 u u^T / |u|^2; A = Q diag(lam) Q */
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < n; j++) {
			double s = 0;
			for (int64_t k = 0; k < n; k++) {
				double qik = (i == k) - (nu > 0 ? 2 * u[i] * u[k] / nu : 0);
				double qkj = (k == j) - (nu > 0 ? 2 * u[k] * u[j] / nu : 0);
				s += qik * lam[k] * qkj;
			}
			d->a[i * n + j] = s;
		}
	free(u);
}

/* diagonal operator for a large n */
static int diag_op(void *ctx, const double *x, double *y, struct sw_err *err)
{
	const struct dense *d = ctx;

	(void)err;
	for (int64_t i = 0; i < d->n; i++)
		y[i] = d->a[i] * x[i];
	return SW_OK;
}

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

static void test_lanczos(void)
{
	enum { N = 120, K = 5 };
	double lam[N], sorted[N], start[N], eig[K], nodes[8], weights[8];
	struct lanczos_top info;
	struct dense d;
	struct sw_rng r;
	struct sw_err err;
	double worst = 0;
	int rc, m;

	rng_seed(&r, 5);
	/* indefinite, a separated top and a cluster below it */
	for (int i = 0; i < N; i++)
		lam[i] = i < 3 ? 10.0 - 2 * i : -3 + 6.0 * rng_uniform(&r);
	memcpy(sorted, lam, sizeof lam);
	qsort(sorted, N, sizeof *sorted, cmp_desc);
	make_dense(&d, N, lam, 1, &r);
	for (int i = 0; i < N; i++)
		start[i] = rng_normal(&r);
	rc = lanczos_top(N, dense_op, &d, start, K, N, 1e-6, eig, &info, &err);
	for (int i = 0; i < K; i++)
		worst = fmax(worst, fabs(eig[i] - sorted[i]));
	ok(!rc && info.converged && info.k == K && worst < 1e-6 * sorted[0] && worst <= info.bound,
	   "lanczos_top: the top %d of an indefinite rotated spectrum to 1e-6 (worst %.2g, within the bound %.2g; %d steps)",
	   K, worst, info.bound, info.steps);

	/* lanczos_extremes: the same top K, the smallest eigenvalue from the
	 * same space, and Ritz vectors whose residuals ||A x - theta x|| are
	 * the bound (plus the float32 basis: 1e-6 of the scale); the smallest
	 * Ritz value is not below -8 but by the basis's rounding, which its
	 * bound holds */
	{
		double lm[N], sm[N], *vecs = malloc((size_t)K * N * sizeof *vecs), *ax = malloc(N * sizeof *ax);
		double worst_res = 0, worst_norm = 0;
		struct dense dm;
		struct sw_rng r2;       /* its own: the tests below keep their draws */
		rng_seed(&r2, 11);
		for (int i = 0; i < N; i++)
			lm[i] = i == N - 1 ? -8 : lam[i];
		memcpy(sm, lm, sizeof lm);
		qsort(sm, N, sizeof *sm, cmp_desc);
		make_dense(&dm, N, lm, 1, &r2);
		rc = lanczos_extremes(N, dense_op, &dm, start, K, N, 1e-6, eig, vecs, &info, &err);
		for (int i = 0; !rc && i < info.k; i++) {
			double res = 0, nrm = 0;
			dense_op(&dm, vecs + (size_t)i * N, ax, &err);
			for (int t = 0; t < N; t++) {
				double e = ax[t] - eig[i] * vecs[(size_t)i * N + t];
				res += e * e;
				nrm += vecs[(size_t)i * N + t] * vecs[(size_t)i * N + t];
			}
			worst_res = fmax(worst_res, sqrt(res));
			worst_norm = fmax(worst_norm, fabs(sqrt(nrm) - 1));
		}
		ok(!rc && info.k == K && fabs(eig[0] - sm[0]) < 1e-6 * sm[0] &&
		   fabs(info.min + 8) <= info.min_bound && info.min >= -8 - info.min_bound && info.min_bound < 1e-5 * 10 &&
		   worst_res <= 2 * info.bound + 1e-6 * info.scale && worst_norm < 1e-6,
		   "lanczos_extremes: lambda_min %.9g of -8 within %.2g; Ritz vectors' residuals %.2g (bound %.2g), norms 1 to %.2g",
		   info.min, info.min_bound, worst_res, info.bound, worst_norm);
		free(dm.a);
		free(vecs);
		free(ax);
	}

	/* stopped early: each value still within the bound of an eigenvalue */
	rc = lanczos_top(N, dense_op, &d, start, K, 8, 1e-12, eig, &info, &err);
	{
		int honest = 1;
		for (int i = 0; i < info.k; i++) {
			double dist = INFINITY;
			for (int j = 0; j < N; j++)
				dist = fmin(dist, fabs(eig[i] - lam[j]));
			honest &= dist <= info.bound * (1 + 1e-9) + 1e-12;
		}
		ok(!rc && !info.converged && info.steps == 8 && info.bound > 0 && honest,
		   "lanczos_top after 8 steps: not converged, every value within the bound %.3g of an eigenvalue",
		   info.bound);
	}

	/* a start vector in a 3-dimensional invariant subspace: exact in 3 steps */
	{
		double dl[N];
		struct dense dd;
		for (int i = 0; i < N; i++) {
			dl[i] = i + 1;
			start[i] = i % 40 == 0 ? 1 : 0;     /* entries 0, 40, 80 */
		}
		make_dense(&dd, N, dl, 0, &r);
		rc = lanczos_top(N, dense_op, &dd, start, 2, 50, 1e-12, eig, &info, &err);
		ok(!rc && info.converged && info.steps == 3 && fabs(eig[0] - 81) < 1e-6 * 81 &&
		   fabs(eig[1] - 41) < 1e-6 * 81 && info.bound < 1e-6 * 81,
		   "an invariant subspace ends Lanczos with its exact values (%g, %g after %d steps)",
		   eig[0], eig[1], info.steps);
		free(dd.a);
	}

	/* k larger than n: every eigenvalue */
	{
		double l3[3] = {2, -1, 0.5}, s3[3] = {1, 1, 1}, e3[5];
		struct dense d3;
		make_dense(&d3, 3, l3, 1, &r);
		rc = lanczos_top(3, dense_op, &d3, s3, 5, 10, 1e-12, e3, &info, &err);
		ok(!rc && info.k == 3 && fabs(e3[0] - 2) < 2e-6 && fabs(e3[1] - 0.5) < 2e-6 &&
		   fabs(e3[2] + 1) < 2e-6, "k above n: all n values (%g %g %g)", e3[0], e3[1], e3[2]);
		free(d3.a);
	}

	ok(lanczos_top(N, dense_op, &d, (double[N]){0}, 1, 5, 1e-6, eig, &info, &err) == SW_EUSAGE,
	   "a zero start vector is refused: %s", err.msg);

	/* Gauss quadrature: exact moments up to 2m - 1 */
	{
		enum { M = 4 };
		double v[N], av[N], tmp[N], vv = 0, want[2 * M], got[2 * M] = {0}, wsum = 0, err_max = 0;
		for (int i = 0; i < N; i++) {
			v[i] = rng_next(&r) >> 63 ? 1 : -1;
			av[i] = v[i];
			vv += v[i] * v[i];
		}
		for (int p = 1; p < 2 * M; p++) {       /* want[p] = v^T A^p v / v^T v */
			double s = 0;
			dense_op(&d, av, tmp, &err);
			memcpy(av, tmp, sizeof av);
			for (int i = 0; i < N; i++)
				s += v[i] * av[i];
			want[p] = s / vv;
		}
		rc = lanczos_quadrature(N, dense_op, &d, v, M, nodes, weights, &m, &err);
		for (int k = 0; k < m; k++) {
			wsum += weights[k];
			for (int p = 1; p < 2 * M; p++)
				got[p] += weights[k] * pow(nodes[k], p);
		}
		for (int p = 1; p < 2 * M; p++)
			err_max = fmax(err_max, fabs(got[p] - want[p]) / fabs(want[p]));
		ok(!rc && m == M && fabs(wsum - 1) < 1e-12 && err_max < 1e-6,
		   "lanczos_quadrature, %d steps: moments 1..%d exact (worst %.2g), weights sum to 1", M,
		   2 * M - 1, err_max);
	}

	/* the smoothed density integrates to 1 */
	{
		double x[2001], y[2001], area = 0;
		lanczos_density(nodes, weights, m, 1, 0.3, -20, 20, 2001, x, y);
		for (int i = 1; i < 2001; i++)
			area += (x[i] - x[i - 1]) * (y[i] + y[i - 1]) / 2;
		ok(fabs(area - 1) < 1e-9, "lanczos_density integrates to 1 (%.12f)", area);
	}
	free(d.a);

	/* chunked sums: the same bits whatever the thread count */
	{
		enum { BIG = 100003 };
		struct dense dg = {BIG, malloc(BIG * sizeof(double))};
		double *s0 = malloc(BIG * sizeof *s0), e1[3], e2[3];
		struct lanczos_top i1, i2;
		for (int i = 0; i < BIG; i++) {
			dg.a[i] = rng_uniform(&r) + (i == 7 ? 3 : 0);
			s0[i] = rng_normal(&r);
		}
		omp_set_num_threads(1);
		lanczos_top(BIG, diag_op, &dg, s0, 3, 30, 1e-8, e1, &i1, &err);
		omp_set_num_threads(2);
		lanczos_top(BIG, diag_op, &dg, s0, 3, 30, 1e-8, e2, &i2, &err);
		ok(!memcmp(e1, e2, sizeof e1) && i1.steps == i2.steps && fabs(e1[0] - dg.a[7]) < 1e-8,
		   "the same values, bit for bit, on 1 and 2 threads (%.17g)", e1[0]);
		free(dg.a);
		free(s0);
	}
}

/* ---- hessian_run on a checkpoint written here -------------------------- */

enum { V = 12, C = 8, T = 8, BT = 32 };

static const char *dir;
static char ckpt[512], data[512];

static int write_inputs(void)
{
	struct sw_config c = {
		.arch = "llama", .vocab_size = V, .d_model = C, .n_layers = 2, .n_heads = 2,
		.n_kv_heads = 1, .head_dim = 4, .d_ff = 16, .seq_len = T, .rope_theta = 10000,
		.norm_eps = 1e-5, .tie_embeddings = 0, .multipliers = "none", .scale_vectors = 1,
	};
	struct optim_config oc;
	struct run_state rs = {0};
	struct modelio_extras x = {0};
	struct model m;
	struct optim o;
	struct sw_rng r;
	struct sw_err err;
	FILE *f;
	int rc;

	snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", dir);
	snprintf(data, sizeof data, "%s/tokens.txt", dir);
	if (model_build(&m, &c, &err))
		return 1;
	model_init(&m, 3);
	rng_seed(&r, 9);
	/* weights large enough for a Hessian with structure */
	for (size_t k = 0; k < m.nparams; k++)
		m.params[k] += (real)(0.3 * rng_normal(&r));
	optim_defaults(&oc);
	if (optim_init(&o, &oc, &m, &err))
		return 1;
	o.t = 5;
	for (size_t k = 0; k < m.nparams; k++)
		o.v[k] = (float)(1e-6 * exp(4 * rng_normal(&r)));
	rs.step = 5;
	rs.batch = 4;
	rs.grad_accum = 1;
	rs.seq_len = T;
	rs.train_loss = rs.val_loss = NAN;
	rc = modelio_save(ckpt, &m, &o, &rs, &x, &err);
	if (rc)
		diag("modelio_save: %s", err.msg);
	optim_free(&o);
	model_free(&m);
	if (!(f = fopen(data, "w")))
		return 1;
	for (int i = 0; i < 4000; i++)
		fputc((int)(rng_next(&r) % V), f);
	fclose(f);
	return rc;
}

/* The head's Hessian, dense, in double, on hessian_run's batch; with
 * dscale, D H D. Eigenvalues descending into top (3), its trace. */
static int head_hessian(const double *dscale_head, double top[3], double *trace)
{
	struct model m;
	struct dataset d;
	struct sw_rng r;
	struct sw_err err;
	int tok[BT], tgt[BT], n = V * C, N = BT, rc;
	double *h = calloc((size_t)n * n, sizeof *h), *w = malloc((size_t)n * sizeof *w);

	if (!h || !w || modelio_load(ckpt, &m, &err) || data_open(data, DATA_AUTO, 0, &d, &err))
		return 1;
	rng_seed(&r, 1);
	if ((rc = data_train_batch(&d, &r, BT / T, T, tok, tgt, &err)) ||
	    (rc = model_alloc_acts(&m, BT / T, T, &err)))
		return 1;
	model_forward(&m, tok, tgt, BT / T, T);
	/* H[(i,a),(j,b)] = (1/N) sum_n (d_ij p_i - p_i p_j) x_a x_b, W row-major (V, C) */
	for (int t = 0; t < N; t++) {
		const real *p = m.logits + (size_t)t * V, *x = m.nf + (size_t)t * C;
		for (int i = 0; i < V; i++)
			for (int j = 0; j < V; j++) {
				double s = ((i == j) * (double)p[i] - (double)p[i] * p[j]) / N;
				for (int a = 0; a < C; a++)
					for (int b = 0; b < C; b++)
						h[(size_t)(i * C + a) * n + j * C + b] += s * x[a] * x[b];
			}
	}
	for (int i = 0; dscale_head && i < n; i++)
		for (int j = 0; j < n; j++)
			h[(size_t)i * n + j] *= dscale_head[i] * dscale_head[j];
	*trace = 0;
	for (int i = 0; i < n; i++)
		*trace += h[(size_t)i * n + i];
	rc = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', n, h, n, w);
	for (int k = 0; k < 3; k++)
		top[k] = w[n - 1 - k];
	free(h);
	free(w);
	data_close(&d);
	model_free(&m);
	return rc;
}

static int find_block(const struct hessian_result *r, enum sw_block b)
{
	for (int i = 0; i < r->nblocks; i++)
		if (r->b[i].block == (int)b)
			return i;
	return -1;
}

static void test_hessian(void)
{
	struct hessian_opts o = {
		.data = {.data = data, .batch_tokens = BT, .seq_len = T, .seed = 1}, .by = HESSIAN_BY_TYPE,
		.top = 3, .max_steps = 200, .tol = 1e-6, .probes = 200, .slq_steps = 10,
	};
	struct hessian_result r, g, pr;
	struct sw_select sel;
	struct sw_err err;
	double top[3], tr, worst = 0;
	int rc, i;

	select_init(&sel);
	rc = hessian_run(ckpt, &sel, &o, NULL, NULL, &r, &err);
	if (!ok(rc == 0, "hessian_run on a checkpoint written here%s%s", rc ? ": " : "", rc ? err.msg : ""))
		return;
	ok(r.nblocks == 7 && r.b[r.nblocks - 1].block == -1 && r.b[r.nblocks - 1].n == r.nparams,
	   "blocks per type: emb qk vo ffn norm out, then all (%d blocks)", r.nblocks);
	i = find_block(&r, SW_BLOCK_OUT);
	head_hessian(NULL, top, &tr);
	for (int k = 0; k < 3; k++)
		worst = fmax(worst, fabs(r.b[i].eig[k] - top[k]) / top[k]);
	ok(worst < 1e-4, "the head's top 3 against its closed form: %g %g %g vs %g %g %g",
	   r.b[i].eig[0], r.b[i].eig[1], r.b[i].eig[2], top[0], top[1], top[2]);
	ok(fabs(r.b[i].trace - tr) <= 3 * r.b[i].trace_se,
	   "the head's trace %g +- %g within 3 s.e. of the exact %g", r.b[i].trace, r.b[i].trace_se, tr);

	o.gauss_newton = 1;
	rc = hessian_run(ckpt, &sel, &o, NULL, NULL, &g, &err);
	i = find_block(&g, SW_BLOCK_OUT);
	ok(!rc && fabs(g.b[i].eig[0] - top[0]) < 1e-4 * top[0],
	   "Gauss-Newton: the head's block is the Hessian's (logits linear in it): %g", rc ? 0 : g.b[i].eig[0]);
	ok(!rc && g.b[find_block(&g, SW_BLOCK_FFN)].eig[0] >= 0 && g.b[g.nblocks - 1].eig[0] > 0,
	   "Gauss-Newton's top eigenvalues are not negative");
	hessian_free(&g);

	o.gauss_newton = 0;
	o.preconditioned = 1;
	rc = hessian_run(ckpt, &sel, &o, NULL, NULL, &pr, &err);
	if (ok(rc == 0, "preconditioned%s%s", rc ? ": " : "", rc ? err.msg : "")) {
		struct optim op;
		struct run_state rs;
		struct model m;
		double *ds = malloc(V * C * sizeof *ds), bc2, lr;
		long head;
		modelio_load(ckpt, &m, &err);
		memset(&op, 0, sizeof op);
		modelio_load_state(ckpt, &m, &op, &rs, &err);
		head = model_find(&m, "lm_head", -1);
		bc2 = 1 - pow(op.cfg.beta2, (double)op.t);
		for (int k = 0; k < V * C; k++)
			ds[k] = 1 / sqrt(sqrt(op.v[m.tensors[head].offset + k] / bc2) + op.cfg.eps);
		head_hessian(ds, top, &tr);
		i = find_block(&pr, SW_BLOCK_OUT);
		lr = pr.b[i].lr;
		ok(fabs(pr.b[i].eig[0] - top[0]) < 1e-4 * top[0] && fabs(pr.b[i].eig[2] - top[2]) < 1e-4 * top[2],
		   "Adam's preconditioned head block against D H D: %g vs %g", pr.b[i].eig[0], top[0]);
		ok(fabs(pr.beta1 - op.cfg.beta1) < 1e-15 && isfinite(lr) &&
		   fabs(pr.b[i].eos - top[0] * lr * (1 - op.cfg.beta1) / (2 + 2 * op.cfg.beta1)) < 1e-4 * pr.b[i].eos,
		   "eos_adam = lambda_max eta (1 - beta1) / (2 + 2 beta1) with the tensor's lr %g", lr);
		optim_free(&op);
		model_free(&m);
		free(ds);
		hessian_free(&pr);
	}
	o.preconditioned = 0;

	/* the same run again: the same numbers */
	{
		struct hessian_result r2;
		int same = hessian_run(ckpt, &sel, &o, NULL, NULL, &r2, &err) == 0 && r2.nblocks == r.nblocks;
		for (int j = 0; same && j < r.nblocks; j++)
			same = !memcmp(r.b[j].eig, r2.b[j].eig, 3 * sizeof(double)) && r.b[j].trace == r2.b[j].trace;
		ok(same, "deterministic: a second run gives the same bits");
		hessian_free(&r2);
	}
	hessian_free(&r);

	/* plans: per layer, per tensor, and a selection that keeps nothing */
	o.max_steps = 2;
	o.probes = 1;
	o.by = HESSIAN_BY_LAYER;
	rc = hessian_run(ckpt, &sel, &o, NULL, NULL, &r, &err);
	/* emb(-1); qk, vo, ffn per layer (6); norm -1 and per layer (3); out; all */
	ok(!rc && r.nblocks == 12, "per layer: %d blocks (want 12)", r.nblocks);
	hessian_free(&r);
	o.by = HESSIAN_BY_TENSOR;
	select_add_layers(&sel, "1", &err);
	rc = hessian_run(ckpt, &sel, &o, NULL, NULL, &r, &err);
	ok(!rc && r.selected == 9 && r.nblocks == 10 && !strcmp(r.b[0].name, "model.layers.1.input_layernorm.weight"),
	   "per tensor of layer 1: 9 tensors in model order and all (%d blocks, first %s)", r.nblocks,
	   r.nblocks ? r.b[0].name : "");
	hessian_free(&r);
	select_init(&sel);
	select_add_blocks(&sel, "mult", &err);
	rc = hessian_run(ckpt, &sel, &o, NULL, NULL, &r, &err);
	ok(!rc && r.selected == 0 && r.nblocks == 0, "a selection that keeps nothing: no blocks");
	hessian_free(&r);
}

int main(void)
{
	char tmpl[] = "/tmp/t-hessian.XXXXXX";

	test_lanczos();
	dir = mkdtemp(tmpl);
	if (!ok(dir && write_inputs() == 0, "setup: a checkpoint with Adam's moments and a token file"))
		return tap_done();
	test_hessian();
	unlink(ckpt);
	unlink(data);
	rmdir(dir);
	return tap_done();
}
