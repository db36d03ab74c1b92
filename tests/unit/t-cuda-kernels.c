/*
 * The CUDA kernels of lib/model/cuda/kernels.h, run by the host emulation
 * (lib/model/cuda/gpu_emu.c: every block, phase and thread of the grid the GPU
 * would run) against the CPU reference's kernels, which this file
 * compiles in from lib/model/cpukern.c (as t-gradcheck does), and sharpness.c's.
 * Where a kernel's arithmetic is the CPU's in the CPU's order (elementwise
 * kernels, the scatter-add run serially, the multipliers' serial sums,
 * the label sampler) the results must be bit for bit equal; where the
 * kernel sums a row in per-thread shares (RMSNorm, softmax, the sums) to
 * 1e-6 relative. Also: the emulation refuses what a GPU or cuBLAS would
 * (a grid too large, a leading dimension too small, a matrix out of its
 * allocation, a copy from the wrong side), so its checks cannot pass by
 * accident. Sizes are odd on purpose: rows longer than a block, partial
 * warps, partial chunks. The R-operator's tangent kernels of the other
 * families (LayerNorm's, the activations', the soft-caps') are checked
 * against float64 central differences of their primal written here from
 * the definitions (the CPU's tangents are modelhvp.c's, compared with
 * the device's in t-cuda-model).
 */
#include "../../lib/model/cpukern.c"
#include "../../lib/model/model.h"

#include "../../lib/model/cuda/gpu.h"
#include "../../lib/model/sharpness.h"
#include "tap.h"

#include <stdlib.h>

static struct gpu *G;

static float *dev(size_t n)
{
	void *p;
	struct sw_err err;
	if (G->ops->alloc(G, &p, n * sizeof(float), &err))
		return NULL;
	return p;
}

static void fill(float *x, size_t n, struct sw_rng *r, double scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(scale * rng_normal(r));
}

static int same(const float *a, const float *b, size_t n)
{
	return !memcmp(a, b, n * sizeof(float));
}

/* max |a - b| / max |b| */
static double rel(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return m > 0 ? d / m : d;
}

static int launched(int rc, const struct sw_err *err, const char *what)
{
	if (rc)
		diag("%s: %s", what, err->msg);
	return rc == SW_OK;
}

static void test_encoder(struct sw_rng *r)
{
	enum { V = 11, C = 300, N = 37 };
	int tok[N];
	float *embed = malloc(sizeof(float) * V * C), *dout = malloc(sizeof(float) * N * C);
	float *cpu = calloc(N * C, sizeof(float)), *dcpu = calloc(V * C, sizeof(float));
	float *out = dev(N * C), *dembed = dev(V * C), *dvals = dev(N * C), *demb = dev(V * C);
	int *dtok = (int *)dev(N);
	struct sw_err err;
	int rc;

	for (int n = 0; n < N; n++)
		tok[n] = (n * 7) % 5;          /* tokens repeat: rows shared */
	fill(embed, V * C, r, 1);
	fill(dout, N * C, r, 1);
	model_encoder_forward(cpu, tok, embed, N, C);
	model_encoder_backward(dcpu, dout, tok, N, C);
	G->ops->upload(G, dtok, tok, sizeof tok, &err);
	G->ops->upload(G, demb, embed, sizeof(float) * V * C, &err);
	G->ops->upload(G, dvals, dout, sizeof(float) * N * C, &err);
	G->ops->zero(G, dembed, sizeof(float) * V * C, &err);
	rc = gk_launch_encoder_forward(G, &(struct gk_encoder){
		.grid = gk_elems(N * C), .out = out, .embed = demb, .tok = dtok, .n = N * C, .C = C}, &err);
	ok(launched(rc, &err, "encoder_forward") && same(out, cpu, N * C),
	   "encoder_forward: the token rows, as model.c");
	rc = gk_launch_encoder_backward(G, &(struct gk_encoder){
		.grid = gk_elems(N * C), .dembed = dembed, .dout = dvals, .tok = dtok, .n = N * C, .C = C}, &err);
	ok(launched(rc, &err, "encoder_backward") && same(dembed, dcpu, V * C),
	   "encoder_backward: the scatter-add with shared rows, serial on the host: bit for bit model.c's");
	free(embed), free(dout), free(cpu), free(dcpu);
}

/* rows x C with a gain, and per-head rows of hd (QK-norm's shape) */
static void test_rmsnorm(struct sw_rng *r, int rows, int C, int with_gain)
{
	size_t n = (size_t)rows * C;
	float *x = malloc(n * sizeof(float)), *dy = malloc(n * sizeof(float)), *g = malloc(C * sizeof(float));
	float *y = malloc(n * sizeof(float)), *rs = malloc(rows * sizeof(float));
	float *dx = calloc(n, sizeof(float)), *dg = calloc(C, sizeof(float));
	float *dx0 = malloc(n * sizeof(float)), *dg0 = malloc(C * sizeof(float));
	float *d_x = dev(n), *d_y = dev(n), *d_r = dev(rows), *d_g = dev(C), *d_dy = dev(n), *d_dx = dev(n),
	      *d_dg = dev(C), *d_part = dev(((size_t)rows + GK_CHUNK - 1) / GK_CHUNK * C);
	struct sw_err err;
	int rc;

	fill(x, n, r, 2);
	fill(dy, n, r, 1);
	for (int i = 0; i < C; i++)
		g[i] = (float)(1 + 0.3 * rng_normal(r));
	/* the backward adds into what is there */
	fill(dx0, n, r, 0.1);
	fill(dg0, C, r, 0.1);
	memcpy(dx, dx0, n * sizeof(float));
	memcpy(dg, dg0, C * sizeof(float));
	model_rmsnorm_forward(y, rs, x, with_gain ? g : NULL, rows, C, 1e-5);
	model_rmsnorm_backward(dx, with_gain ? dg : NULL, dy, x, with_gain ? g : NULL, rs, rows, C);
	G->ops->upload(G, d_x, x, n * sizeof(float), &err);
	G->ops->upload(G, d_dy, dy, n * sizeof(float), &err);
	G->ops->upload(G, d_g, g, C * sizeof(float), &err);
	G->ops->upload(G, d_dx, dx0, n * sizeof(float), &err);
	G->ops->upload(G, d_dg, dg0, C * sizeof(float), &err);
	rc = gk_launch_rmsnorm_forward(G, &(struct gk_rmsnorm){
		.grid = gk_rows(rows, C), .out = d_y, .rstd = d_r, .inp = d_x, .gain = with_gain ? d_g : NULL,
		.rows = rows, .C = C, .eps = 1e-5}, &err);
	ok(launched(rc, &err, "rmsnorm_forward") && rel(d_y, y, n) < 1e-6 && rel(d_r, rs, rows) < 1e-6,
	   "rmsnorm_forward %d x %d%s: y and r as model.c (%.2g)", rows, C, with_gain ? "" : " no gain",
	   rel(d_y, y, n));
	rc = gk_launch_rmsnorm_backward(G, &(struct gk_rmsnorm){
		.grid = gk_rows(rows, C), .out = d_dx, .rstd = d_r, .inp = d_x, .dout = d_dy,
		.gain = with_gain ? d_g : NULL, .rows = rows, .C = C}, &err);
	ok(launched(rc, &err, "rmsnorm_backward") && rel(d_dx, dx, n) < 1e-6,
	   "rmsnorm_backward %d x %d: dx added as model.c (%.2g)", rows, C, rel(d_dx, dx, n));
	if (with_gain) {
		int64_t chunks = (rows + GK_CHUNK - 1) / GK_CHUNK;
		struct gk_colsum a = {
			.grid = gk_elems(chunks * C), .partial = d_part, .out = d_dg, .a = d_dy, .b = d_x,
			.rstd = d_r, .rows = rows, .chunks = chunks, .C = C};
		rc = gk_launch_colsum_partial(G, &a, &err);
		a.grid = gk_elems(C);
		rc = rc ? rc : gk_launch_colsum_finish(G, &a, &err);
		ok(launched(rc, &err, "colsum") && rel(d_dg, dg, C) < 1e-5,
		   "rmsnorm dgain %d x %d: column sums in chunks of %d rows, as model.c (%.2g)", rows, C,
		   GK_CHUNK, rel(d_dg, dg, C));
	}
	free(x), free(dy), free(g), free(y), free(rs), free(dx), free(dg), free(dx0), free(dg0);
}

/* a linear's bias over rows x n: y += b bit for bit model_bias's (one
 * addition each); its gradient, dy's column sums in chunks of GK_CHUNK
 * rows (rows past one chunk, the last partial) added into what is
 * there, to float32 rounding */
static void test_bias(struct sw_rng *r, int rows, int n)
{
	size_t m = (size_t)rows * n;
	int64_t chunks = (rows + GK_CHUNK - 1) / GK_CHUNK;
	float *y = malloc(m * sizeof(float)), *b = malloc(n * sizeof(float)), *db = malloc(n * sizeof(float));
	float *d_y = dev(m), *d_b = dev(n), *d_db = dev(n), *d_part = dev((size_t)chunks * n);
	struct sw_err err;
	int rc;

	fill(y, m, r, 1);
	fill(b, n, r, 1);
	fill(db, n, r, 0.1);
	G->ops->upload(G, d_y, y, m * sizeof(float), &err);
	G->ops->upload(G, d_b, b, n * sizeof(float), &err);
	G->ops->upload(G, d_db, db, n * sizeof(float), &err);
	model_bias(y, b, rows, n, 0);
	rc = gk_launch_bias_forward(G, &(struct gk_bias){
		.grid = gk_elems((int64_t)m), .y = d_y, .b = d_b, .count = (int64_t)m, .n = n}, &err);
	ok(launched(rc, &err, "bias_forward") && same(d_y, y, m),
	   "bias_forward %d x %d: y + b bit for bit model.c's", rows, n);
	model_bias(y, db, rows, n, 1);
	struct gk_colsum a = {
		.grid = gk_elems(chunks * n), .partial = d_part, .out = d_db, .a = d_y,
		.rows = rows, .chunks = chunks, .C = n};
	rc = gk_launch_colsum_partial(G, &a, &err);
	a.grid = gk_elems(n);
	rc = rc ? rc : gk_launch_colsum_finish(G, &a, &err);
	ok(launched(rc, &err, "bias colsum") && rel(d_db, db, n) < 1e-5,
	   "bias gradient %d x %d: dy's column sums in chunks of %d rows, as model.c (%.2g)",
	   rows, n, GK_CHUNK, rel(d_db, db, n));
	free(y), free(b), free(db);
}

static void test_rope(struct sw_rng *r)
{
	enum { B = 3, T = 7, nh = 5, hd = 12 };
	size_t n = (size_t)B * T * nh * hd;
	float *x = malloc(n * sizeof(float)), *x2 = malloc(n * sizeof(float)), *cs = malloc(T * hd / 2 * sizeof(float)),
	      *sn = malloc(T * hd / 2 * sizeof(float));
	float *d_x = dev(n), *d_c = dev(T * hd / 2), *d_s = dev(T * hd / 2);
	struct sw_err err;
	int rc;

	fill(x, n, r, 1);
	for (int i = 0; i < T * hd / 2; i++) {
		cs[i] = (float)cos(0.1 * i);
		sn[i] = (float)sin(0.1 * i);
	}
	G->ops->upload(G, d_x, x, n * sizeof(float), &err);
	G->ops->upload(G, d_c, cs, sizeof(float) * T * hd / 2, &err);
	G->ops->upload(G, d_s, sn, sizeof(float) * T * hd / 2, &err);
	memcpy(x2, x, n * sizeof(float));
	model_rope_forward(x, cs, sn, B, T, nh, hd);
	struct gk_rope a = {.grid = gk_elems((int64_t)n / 2), .x = d_x, .cos_ = d_c, .sin_ = d_s,
			    .n = (int64_t)n / 2, .T = T, .nh = nh, .hd = hd};
	rc = gk_launch_rope(G, &a, &err);
	ok(launched(rc, &err, "rope_forward") && same(d_x, x, n), "rope_forward: bit for bit model.c's");
	model_rope_backward(x, cs, sn, B, T, nh, hd);
	a.backward = 1;
	rc = gk_launch_rope(G, &a, &err);
	ok(launched(rc, &err, "rope_backward") && same(d_x, x, n) && rel(d_x, x2, n) < 1e-6,
	   "rope_backward: bit for bit model.c's, and the rotation back");
	free(x), free(x2), free(cs), free(sn);
}

/* Causal softmax of the attention's scores: scores from the CPU's own
 * attention_forward inputs, probabilities against its saved att. */
static void test_attention_softmax(struct sw_rng *r)
{
	enum { B = 2, T = 300, H = 2, KV = 1, hd = 4 };
	size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, na = (size_t)B * H * T * T;
	float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float)), *v = malloc(nk * sizeof(float));
	float *out = malloc(nq * sizeof(float)), *att = malloc(na * sizeof(float)), *s = malloc(na * sizeof(float));
	float *d_s = dev(na);
	struct sw_err err;
	int rc;

	fill(q, nq, r, 1);
	fill(k, nk, r, 1);
	fill(v, nk, r, 1);
	model_attention_forward(out, att, NULL, q, k, v, B, T, H, KV, hd, (float)(1 / sqrt(hd)), 0);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, (float)(1 / sqrt(hd)),
				    q + (size_t)b * T * H * hd + h * hd, H * hd, k + (size_t)b * T * KV * hd, KV * hd,
				    0, s + ((size_t)b * H + h) * T * T, T);
	G->ops->upload(G, d_s, s, na * sizeof(float), &err);
	rc = gk_launch_softmax_forward(G, &(struct gk_softmax){
		.grid = gk_rows((int64_t)B * H * T, T), .p = d_s, .rows = (int64_t)B * H * T, .width = T,
		.causal = 1}, &err);
	ok(launched(rc, &err, "softmax_forward") && rel(d_s, att, na) < 1e-6,
	   "softmax_forward, causal, rows of %d > a block: model.c's probabilities (%.2g)", T, rel(d_s, att, na));

	/* backward of one head against the formula: d = P (dP - sum P dP) scale */
	float *dp = malloc((size_t)B * T * T * sizeof(float)), *want = malloc((size_t)B * T * T * sizeof(float));
	float *d_dp = dev((size_t)B * T * T);
	int h = 1;
	fill(dp, (size_t)B * T * T, r, 1);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			const float *p = att + ((size_t)b * H + h) * T * T + (size_t)t * T;
			const float *d = dp + ((size_t)b * T + t) * T;
			double sum = 0;
			for (int u = 0; u <= t; u++)
				sum += (double)p[u] * d[u];
			for (int u = 0; u < T; u++)
				want[((size_t)b * T + t) * T + u] = u <= t ? (float)(p[u] * (d[u] - sum) * 0.5) : 0;
		}
	G->ops->upload(G, d_dp, dp, sizeof(float) * B * T * T, &err);
	G->ops->upload(G, d_s, att, na * sizeof(float), &err);
	rc = gk_launch_softmax_backward(G, &(struct gk_softmax_back){
		.grid = gk_rows((int64_t)B * T, T), .d = d_dp, .p = d_s + (size_t)h * T * T, .rows = (int64_t)B * T,
		.p_bstride = (int64_t)H * T * T, .d_bstride = (int64_t)T * T, .T = T, .scale = 0.5f}, &err);
	ok(launched(rc, &err, "softmax_backward") && rel(d_dp, want, (size_t)B * T * T) < 1e-5,
	   "softmax_backward of head 1 of 2: P (dP - sum P dP) scale, 0 above the diagonal (%.2g)",
	   rel(d_dp, want, (size_t)B * T * T));
	free(q), free(k), free(v), free(out), free(att), free(s), free(dp), free(want);
}

static void test_crossentropy(struct sw_rng *r)
{
	enum { N = 9, V = 1000 };
	int tgt[N];
	float *logits = malloc(sizeof(float) * N * V), *p = malloc(sizeof(float) * N * V);
	float *loss = malloc(sizeof(float) * N);
	float *d_p = dev(N * V), *d_loss = dev(N);
	int *d_t = (int *)dev(N), labels[N], d_labels_host[N], *d_labels = (int *)dev(N);
	double u[N], *d_u = (double *)dev(2 * N);
	struct sw_rng r1, r2;
	struct sw_err err;
	int rc;

	fill(logits, N * V, r, 3);
	for (int n = 0; n < N; n++)
		tgt[n] = (n * 131) % V;
	memcpy(p, logits, sizeof(float) * N * V);
	model_softmax_crossentropy_forward(loss, p, tgt, N, V);
	G->ops->upload(G, d_p, logits, sizeof(float) * N * V, &err);
	G->ops->upload(G, d_t, tgt, sizeof tgt, &err);
	rc = gk_launch_softmax_forward(G, &(struct gk_softmax){
		.grid = gk_rows(N, V), .p = d_p, .losses = d_loss, .targets = d_t, .rows = N, .width = V}, &err);
	ok(launched(rc, &err, "softmax_forward") && rel(d_p, p, N * V) < 1e-6 && rel(d_loss, loss, N) < 1e-6,
	   "softmax_forward over V = %d: probabilities and losses as model.c (%.2g, %.2g)", V,
	   rel(d_p, p, N * V), rel(d_loss, loss, N));

	/* the sampled labels of sw-sharpness, from the same probabilities and uniforms */
	G->ops->upload(G, d_p, p, sizeof(float) * N * V, &err);
	rng_seed(&r1, 5);
	rng_seed(&r2, 5);
	gnb_sample_labels(p, N, V, &r1, labels);
	for (int n = 0; n < N; n++)
		u[n] = rng_uniform(&r2);
	G->ops->upload(G, d_u, u, sizeof u, &err);
	rc = gk_launch_sample_labels(G, &(struct gk_sample){
		.grid = gk_elems(N), .labels = d_labels, .p = d_p, .u = d_u, .rows = N, .V = V}, &err);
	memcpy(d_labels_host, d_labels, sizeof labels);
	ok(launched(rc, &err, "sample_labels") && !memcmp(d_labels_host, labels, sizeof labels),
	   "sample_labels: gnb_sample_labels's labels from the same uniforms");

	model_softmax_crossentropy_backward(p, tgt, N, V, 0.125f);
	rc = gk_launch_xent_backward(G, &(struct gk_xent_back){
		.grid = gk_elems(N * V), .p = d_p, .targets = d_t, .n = N * V, .V = V, .scale = 0.125f}, &err);
	ok(launched(rc, &err, "xent_backward") && same(d_p, p, N * V), "xent_backward: bit for bit model.c's");

	/* h += N g^2 */
	float *h = malloc(sizeof(float) * N * V), *d_h = dev(N * V);
	fill(h, N * V, r, 1);
	G->ops->upload(G, d_h, h, sizeof(float) * N * V, &err);
	gnb_square_into(h, p, N * V, 37);
	rc = gk_launch_gnb_square(G, &(struct gk_square){
		.grid = gk_elems(N * V), .h = d_h, .g = d_p, .n = N * V, .scale = 37}, &err);
	ok(launched(rc, &err, "gnb_square") && same(d_h, h, N * V), "gnb_square: bit for bit sharpness.c's");
	free(logits), free(p), free(loss), free(h);
}

static void test_pointwise(struct sw_rng *r)
{
	enum { n = 1000 };
	float a[n], b[n], dh[n], out[n], dg[n], du[n], dg0[n], du0[n];
	float *d_a = dev(n), *d_b = dev(n), *d_dh = dev(n), *d_out = dev(n), *d_dg = dev(n), *d_du = dev(n);
	struct sw_err err;
	int rc;

	fill(a, n, r, 2);
	fill(b, n, r, 1);
	fill(dh, n, r, 1);
	fill(dg0, n, r, 1);
	fill(du0, n, r, 1);
	G->ops->upload(G, d_a, a, sizeof a, &err);
	G->ops->upload(G, d_b, b, sizeof b, &err);
	G->ops->upload(G, d_dh, dh, sizeof dh, &err);
	G->ops->upload(G, d_dg, dg0, sizeof dg0, &err);
	G->ops->upload(G, d_du, du0, sizeof du0, &err);
	model_swiglu_forward(out, a, b, n, ELEM_ACT_SILU);
	rc = gk_launch_swiglu_forward(G, &(struct gk_pointwise){
		.grid = gk_elems(n), .out = d_out, .a = d_a, .b = d_b, .n = n}, &err);
	ok(launched(rc, &err, "swiglu_forward") && same(d_out, out, n), "swiglu_forward: bit for bit model.c's");
	memcpy(dg, dg0, sizeof dg);
	memcpy(du, du0, sizeof du);
	model_swiglu_backward(dg, du, dh, a, b, n, ELEM_ACT_SILU);
	rc = gk_launch_swiglu_backward(G, &(struct gk_pointwise){
		.grid = gk_elems(n), .out = d_dg, .out2 = d_du, .a = d_dh, .b = d_a, .c = d_b, .n = n}, &err);
	ok(launched(rc, &err, "swiglu_backward") && same(d_dg, dg, n) && same(d_du, du, n),
	   "swiglu_backward: bit for bit model.c's");
	model_residual_forward(out, a, b, n);
	rc = gk_launch_residual_forward(G, &(struct gk_pointwise){
		.grid = gk_elems(n), .out = d_out, .a = d_a, .b = d_b, .n = n}, &err);
	ok(launched(rc, &err, "residual_forward") && same(d_out, out, n), "residual_forward: bit for bit");
}

static void test_multipliers(struct sw_rng *r, enum mult_mode mode)
{
	enum { dout = 70, din = 300 };
	size_t n = (size_t)dout * din, nm = mode == MULT_SCALAR ? 1 : mode == MULT_COL ? din : dout;
	float *w = malloc(n * sizeof(float)), *weff = malloc(n * sizeof(float)), *dweff = malloc(n * sizeof(float));
	float *dw = malloc(n * sizeof(float)), mult[din], dmult[din], col[din], dcol[din];
	float *d_w = dev(n), *d_weff = dev(n), *d_dweff = dev(n), *d_dw = dev(n), *d_m = dev(nm), *d_dm = dev(nm);
	float *d_c = dev(din), *d_dc = dev(din);
	double *rowsum = (double *)dev(2 * dout);
	struct mult_view v;
	real *drow, *dc;
	struct sw_err err;
	int rc;

	fill(w, n, r, 1);
	fill(dweff, n, r, 1);
	fill(dw, n, r, 0.1);
	fill(mult, nm, r, 1);
	fill(dmult, nm, r, 0.1);
	fill(col, din, r, 1);
	fill(dcol, din, r, 0.1);
	G->ops->upload(G, d_w, w, n * sizeof(float), &err);
	G->ops->upload(G, d_dweff, dweff, n * sizeof(float), &err);
	G->ops->upload(G, d_dw, dw, n * sizeof(float), &err);
	G->ops->upload(G, d_m, mult, nm * sizeof(float), &err);
	G->ops->upload(G, d_dm, dmult, nm * sizeof(float), &err);
	G->ops->upload(G, d_c, col, din * sizeof(float), &err);
	G->ops->upload(G, d_dc, dcol, din * sizeof(float), &err);
	v = model_mult_view(mode, mult, col);
	drow = mode == MULT_COL ? NULL : dmult;
	dc = mode == MULT_COL ? dmult : mode == MULT_ROWCOL ? dcol : NULL;
	model_mult_apply(weff, w, v, dout, din);
	model_mult_backward(dw, drow, dc, dweff, w, v, dout, din);
	struct gk_mult a = {.grid = gk_elems((int64_t)n), .weff = d_weff, .dw = d_dw, .dmult = d_dm,
			    .dcol = mode == MULT_ROWCOL ? d_dc : NULL, .rowsum = rowsum, .w = d_w,
			    .mult = d_m, .col = mode == MULT_ROWCOL ? d_c : NULL, .dweff = d_dweff,
			    .dout = dout, .din = din, .mode = (int)mode};
	rc = gk_launch_mult_apply(G, &a, &err);
	rc = rc ? rc : gk_launch_mult_dw(G, &a, &err);
	if (mode == MULT_COL || mode == MULT_ROWCOL) {
		a.grid = gk_elems(din);
		rc = rc ? rc : gk_launch_mult_dcol(G, &a, &err);
	}
	if (mode != MULT_COL) {
		a.grid = gk_elems(dout);
		rc = rc ? rc : gk_launch_mult_drow(G, &a, &err);
		a.grid = gk_elems(1);
		if (mode == MULT_SCALAR)
			rc = rc ? rc : gk_launch_mult_dscalar(G, &a, &err);
	}
	ok(launched(rc, &err, "mult") && same(d_weff, weff, n) && same(d_dw, dw, n) && same(d_dm, dmult, nm) &&
	   (mode != MULT_ROWCOL || same(d_dc, dcol, din)),
	   "multipliers (%s): W_eff, dW and the multipliers' gradients bit for bit model.c's",
	   mode == MULT_SCALAR ? "scalar" : mode == MULT_ROW ? "row" : mode == MULT_COL ? "col" : "rowcol");
	free(w), free(weff), free(dweff), free(dw);
}

static void test_sums_and_transpose(struct sw_rng *r)
{
	size_t n = 3 * GK_SUM_CHUNK + 1234;
	int64_t chunks = (int64_t)((n + GK_SUM_CHUNK - 1) / GK_SUM_CHUNK);
	float *x = malloc(n * sizeof(float)), *d_x = dev(n);
	double *part = (double *)dev(2 * (size_t)chunks), *out = (double *)dev(2), want = 0, want_sq = 0;
	struct sw_err err;
	int rc;

	fill(x, n, r, 1);
	for (size_t i = 0; i < n; i++) {
		want += x[i];
		want_sq += (double)x[i] * x[i];
	}
	G->ops->upload(G, d_x, x, n * sizeof(float), &err);
	struct gk_sum a = {.grid = gk_rows(chunks, GK_SUM_CHUNK), .partial = part, .out = out, .x = d_x,
			   .n = (int64_t)n, .chunks = chunks, .squares = 1};
	rc = gk_launch_sum_partial(G, &a, &err);
	a.grid = gk_elems(1);
	rc = rc ? rc : gk_launch_sum_finish(G, &a, &err);
	ok(launched(rc, &err, "sum") && close_rel(out[0], want_sq, 1e-12), "sum of squares over %zu values", n);
	a.grid = gk_rows(chunks, GK_SUM_CHUNK);
	a.squares = 0;
	rc = gk_launch_sum_partial(G, &a, &err);
	a.grid = gk_elems(1);
	rc = rc ? rc : gk_launch_sum_finish(G, &a, &err);
	ok(launched(rc, &err, "sum") && fabs(out[0] - want) < 1e-9 * sqrt(want_sq), "sum over %zu values", n);

	enum { R = 37, Cc = 53 };
	float *t = dev(R * Cc), *t2 = dev(R * Cc);
	G->ops->upload(G, t, x, sizeof(float) * R * Cc, &err);
	struct gk_opt o = {.grid = gk_elems(R * Cc), .out = t2, .x = t, .n = R * Cc, .rows = R, .cols = Cc};
	rc = gk_launch_transpose(G, &o, &err);
	int good = 1;
	for (int i = 0; i < R; i++)
		for (int j = 0; j < Cc; j++)
			good &= t2[j * R + i] == x[i * Cc + j];
	ok(launched(rc, &err, "transpose") && good, "transpose %d x %d", R, Cc);
	free(x);
}

/* LayerNorm rows x C (gain and bias, or neither) against model.c's: y,
 * mean and rstd (the row's sums in double, in per-thread shares here, in
 * order there: 1e-6), dx added into what is there (1e-6), dgain and dbias
 * as column sums in chunks of GK_CHUNK rows (float sums in another order:
 * 1e-5) */
static void test_layernorm(struct sw_rng *r, int rows, int C, int affine)
{
	size_t n = (size_t)rows * C;
	int64_t chunks = (rows + GK_CHUNK - 1) / GK_CHUNK;
	float *x = malloc(n * sizeof(float)), *dy = malloc(n * sizeof(float)), *g = malloc(C * sizeof(float));
	float *b = malloc(C * sizeof(float)), *y = malloc(n * sizeof(float)), *mu = malloc(rows * sizeof(float));
	float *rs = malloc(rows * sizeof(float)), *dx = malloc(n * sizeof(float)), *dg = malloc(C * sizeof(float));
	float *db = malloc(C * sizeof(float));
	float *d_x = dev(n), *d_y = dev(n), *d_mu = dev(rows), *d_r = dev(rows), *d_g = dev(C), *d_b = dev(C),
	      *d_dy = dev(n), *d_dx = dev(n), *d_dg = dev(C), *d_db = dev(C), *d_part = dev((size_t)chunks * C);
	struct sw_err err;
	int rc;

	fill(x, n, r, 2);
	for (size_t i = 0; i < n; i++)
		x[i] += 3;      /* an offset the mean takes out */
	fill(dy, n, r, 1);
	fill(g, C, r, 0.3);
	for (int i = 0; i < C; i++)
		g[i] += 1;
	fill(b, C, r, 1);
	fill(dx, n, r, 0.1);
	fill(dg, C, r, 0.1);
	fill(db, C, r, 0.1);
	memcpy(d_x, x, n * sizeof(float));
	memcpy(d_dy, dy, n * sizeof(float));
	memcpy(d_g, g, C * sizeof(float));
	memcpy(d_b, b, C * sizeof(float));
	memcpy(d_dx, dx, n * sizeof(float));
	memcpy(d_dg, dg, C * sizeof(float));
	memcpy(d_db, db, C * sizeof(float));
	model_layernorm_forward(y, mu, rs, x, affine ? g : NULL, affine ? b : NULL, rows, C, 1e-5);
	model_layernorm_backward(dx, affine ? dg : NULL, affine ? db : NULL, dy, x, affine ? g : NULL, mu,
				 rs, rows, C);
	struct gk_layernorm a = {.grid = gk_rows(rows, C), .out = d_y, .mean = d_mu, .rstd = d_r,
				 .inp = d_x, .dout = d_dy, .gain = affine ? d_g : NULL,
				 .bias = affine ? d_b : NULL, .rows = rows, .C = C, .eps = 1e-5};
	rc = gk_launch_layernorm_forward(G, &a, &err);
	ok(launched(rc, &err, "layernorm_forward") && rel(d_y, y, n) < 1e-6 && rel(d_mu, mu, rows) < 1e-6 &&
		   rel(d_r, rs, rows) < 1e-6,
	   "layernorm_forward %d x %d%s: y, mean and rstd as model.c (%.2g)", rows, C,
	   affine ? "" : " no gain or bias", rel(d_y, y, n));
	a.out = d_dx;
	rc = gk_launch_layernorm_backward(G, &a, &err);
	ok(launched(rc, &err, "layernorm_backward") && rel(d_dx, dx, n) < 1e-6,
	   "layernorm_backward %d x %d: dx added as model.c (%.2g)", rows, C, rel(d_dx, dx, n));
	if (affine) {
		struct gk_colsum cs = {.grid = gk_elems(chunks * C), .partial = d_part, .out = d_dg, .a = d_dy,
				       .b = d_x, .rstd = d_r, .mean = d_mu, .rows = rows, .chunks = chunks, .C = C};
		rc = gk_launch_colsum_partial(G, &cs, &err);
		cs.grid = gk_elems(C);
		rc = rc ? rc : gk_launch_colsum_finish(G, &cs, &err);
		cs = (struct gk_colsum){.grid = gk_elems(chunks * C), .partial = d_part, .out = d_db, .a = d_dy,
					.rows = rows, .chunks = chunks, .C = C};
		rc = rc ? rc : gk_launch_colsum_partial(G, &cs, &err);
		cs.grid = gk_elems(C);
		rc = rc ? rc : gk_launch_colsum_finish(G, &cs, &err);
		ok(launched(rc, &err, "layernorm colsum") && rel(d_dg, dg, C) < 1e-5 && rel(d_db, db, C) < 1e-5,
		   "layernorm dgain, dbias %d x %d: column sums in chunks of %d rows, as model.c (%.2g, %.2g)",
		   rows, C, GK_CHUNK, rel(d_dg, dg, C), rel(d_db, db, C));
	}
	free(x), free(dy), free(g), free(b), free(y), free(mu), free(rs), free(dx), free(dg), free(db);
}

/* The elementwise kernels of the other families, one elemmath.h function
 * per element as model.c calls it: bit for bit. GPT-2's activation and
 * its backward (added into what is there), GeGLU, Gemma's scale, the
 * final logits' soft-cap and its backward. */
static void test_family_pointwise(struct sw_rng *r, int act)
{
	enum { n = 1000 };
	float x[n], u[n], dh[n], out[n], o2[n], t[n], dg[n], du[n];
	float *d_x = dev(n), *d_u = dev(n), *d_dh = dev(n), *d_out = dev(n), *d_o2 = dev(n), *d_t = dev(n);
	const char *name = act == ELEM_ACT_GELU ? "GELU" : "tanh GELU";
	struct sw_err err;
	int rc;

	fill(x, n, r, 2);
	fill(u, n, r, 1);
	fill(dh, n, r, 1);
	fill(o2, n, r, 1);
	memcpy(d_x, x, sizeof x);
	memcpy(d_u, u, sizeof u);
	memcpy(d_dh, dh, sizeof dh);
	memcpy(d_o2, o2, sizeof o2);
	model_act_forward(out, x, n, act);
	model_act_backward(o2, dh, x, n, act);
	struct gk_pointwise a = {.grid = gk_elems(n), .out = d_out, .a = d_x, .n = n, .act = act};
	rc = gk_launch_act_forward(G, &a, &err);
	a.out = d_o2, a.a = d_dh, a.b = d_x;
	rc = rc ? rc : gk_launch_act_backward(G, &a, &err);
	ok(launched(rc, &err, "act") && same(d_out, out, n) && same(d_o2, o2, n),
	   "act_forward, act_backward (%s): bit for bit model.c's", name);
	model_swiglu_forward(out, x, u, n, act);
	memcpy(dg, o2, sizeof dg);
	memcpy(du, dh, sizeof du);
	memcpy(d_o2, o2, sizeof o2);
	memcpy(d_t, dh, sizeof dh);
	model_swiglu_backward(dg, du, dh, x, u, n, act);
	a = (struct gk_pointwise){.grid = gk_elems(n), .out = d_out, .a = d_x, .b = d_u, .n = n, .act = act};
	rc = gk_launch_swiglu_forward(G, &a, &err);
	a = (struct gk_pointwise){.grid = gk_elems(n), .out = d_o2, .out2 = d_t, .a = d_dh, .b = d_x,
				  .c = d_u, .n = n, .act = act};
	rc = rc ? rc : gk_launch_swiglu_backward(G, &a, &err);
	ok(launched(rc, &err, "geglu") && same(d_out, out, n) && same(d_o2, dg, n) && same(d_t, du, n),
	   "swiglu_forward, _backward as GeGLU (%s): bit for bit model.c's", name);
	if (act != ELEM_ACT_GELU_TANH)
		return;
	memcpy(d_out, x, sizeof x);
	memcpy(out, x, sizeof x);
	model_scale(out, n, 4.8989797f);
	rc = gk_launch_scale(G, &(struct gk_opt){.grid = gk_elems(n), .out = d_out, .n = n,
						 .scale = 4.8989797f}, &err);
	ok(launched(rc, &err, "scale") && same(d_out, out, n), "scale: Gemma's sqrt(C), bit for bit model.c's");
	memcpy(d_out, x, sizeof x);
	memcpy(out, x, sizeof x);
	model_softcap_forward(out, t, n, 1.5f);
	struct gk_softcap sc = {.grid = gk_elems(n), .x = d_out, .th = d_t, .n = n, .cap = 1.5f};
	rc = gk_launch_softcap_forward(G, &sc, &err);
	ok(launched(rc, &err, "softcap_forward") && same(d_out, out, n) && same(d_t, t, n),
	   "softcap_forward: capped values and tanh bit for bit model.c's");
	memcpy(d_out, dh, sizeof dh);
	memcpy(out, dh, sizeof dh);
	model_softcap_backward(out, t, n);
	rc = gk_launch_softcap_backward(G, &sc, &err);
	ok(launched(rc, &err, "softcap_backward") && same(d_out, out, n),
	   "softcap_backward: bit for bit model.c's");
}

/* Gemma2's soft-capped attention scores: the scores (as
 * test_attention_softmax forms them) capped in place on and below the
 * diagonal only, then the causal softmax: model.c's probabilities and
 * tanh (the scores' products summed in another order: 1e-6); the
 * softmax's backward through the cap against its formula in double, P
 * (dP - sum P dP) (1 - t^2) scale (1e-5) */
static void test_attention_softcap(struct sw_rng *r)
{
	enum { B = 2, T = 37, H = 2, KV = 1, hd = 4 };
	size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, na = (size_t)B * H * T * T;
	float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float)), *v = malloc(nk * sizeof(float));
	float *out = malloc(nq * sizeof(float)), *att = malloc(na * sizeof(float)), *th = malloc(na * sizeof(float));
	float *d_s = dev(na), *d_t = dev(na), *dp = dev((size_t)B * T * T), *want = malloc((size_t)B * T * T * sizeof(float));
	float scale = (float)(1 / sqrt(10.0)), cap = 0.5f;
	int good = 1, h = 1;
	struct sw_err err;
	int rc;

	fill(q, nq, r, 1);
	fill(k, nk, r, 1);
	fill(v, nk, r, 1);
	model_attention_forward(out, att, th, q, k, v, B, T, H, KV, hd, scale, cap);
	for (int b = 0; b < B; b++)
		for (int hh = 0; hh < H; hh++)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, scale,
				    q + (size_t)b * T * H * hd + hh * hd, H * hd, k + (size_t)b * T * KV * hd, KV * hd,
				    0, d_s + ((size_t)b * H + hh) * T * T, T);
	for (size_t i = 0; i < na; i++)
		d_t[i] = 7;     /* above the diagonal: left as it is */
	rc = gk_launch_softcap_forward(G, &(struct gk_softcap){
		.grid = gk_elems((int64_t)na), .x = d_s, .th = d_t, .n = (int64_t)na, .T = T, .cap = cap}, &err);
	rc = rc ? rc : gk_launch_softmax_forward(G, &(struct gk_softmax){
		.grid = gk_rows((int64_t)B * H * T, T), .p = d_s, .rows = (int64_t)B * H * T, .width = T,
		.causal = 1}, &err);
	for (size_t i = 0; i < na; i++) {
		size_t row = i / T, u = i % T;
		if (u <= row % T)
			good &= fabs(d_t[i] - th[i]) <= 1e-6;
		else
			good &= d_t[i] == 7;
	}
	ok(launched(rc, &err, "softcap attention") && rel(d_s, att, na) < 1e-6 && good,
	   "softcap_forward over causal scores, then softmax_forward: model.c's probabilities (%.2g) and tanh, "
	   "nothing above the diagonal touched", rel(d_s, att, na));

	fill(dp, (size_t)B * T * T, r, 1);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			const float *p = att + ((size_t)b * H + h) * T * T + (size_t)t * T;
			const float *tt = th + ((size_t)b * H + h) * T * T + (size_t)t * T;
			const float *d = dp + ((size_t)b * T + t) * T;
			double sum = 0;
			for (int u = 0; u <= t; u++)
				sum += (double)p[u] * d[u];
			for (int u = 0; u < T; u++)
				want[((size_t)b * T + t) * T + u] =
					u <= t ? (float)(p[u] * (d[u] - sum) * (1 - (double)tt[u] * tt[u]) * scale) : 0;
		}
	memcpy(d_s, att, na * sizeof(float));
	memcpy(d_t, th, na * sizeof(float));
	rc = gk_launch_softmax_backward(G, &(struct gk_softmax_back){
		.grid = gk_rows((int64_t)B * T, T), .d = dp, .p = d_s + (size_t)h * T * T,
		.th = d_t + (size_t)h * T * T, .rows = (int64_t)B * T, .p_bstride = (int64_t)H * T * T,
		.d_bstride = (int64_t)T * T, .T = T, .scale = scale}, &err);
	ok(launched(rc, &err, "softmax_backward capped") && rel(dp, want, (size_t)B * T * T) < 1e-5,
	   "softmax_backward through the cap: P (dP - sum P dP) (1 - t^2) scale (%.2g)",
	   rel(dp, want, (size_t)B * T * T));
	free(q), free(k), free(v), free(out), free(att), free(th), free(want);
}

/* ---- the tangent kernels against float64 central differences ----------------
 * Each tangent is d/de f(inputs + e directions) at e = 0: f written here in
 * double from its definition, differenced at e = +-1e-5 (the truncation
 * error e^2 f''' about 1e-10 of these values, the rounding 1e-16 / e); the
 * kernels compute in float32 from float32 inputs (the primal's saved mean
 * and rstd among them), so 1e-5 of the largest value, a few hundred float
 * roundings' worth, separates a right tangent from a wrong term. */

#define FD_E 1e-5

/* one LayerNorm row in double: y = g xhat + b (xhat too), and the
 * backward dx of dy (y, xhat, dx NULL: not wanted) */
static void ln_row_d(const double *x, const double *g, const double *b, const double *dy, int C,
		     double eps, double *y, double *xhat, double *dx)
{
	double mu = 0, var = 0, m1 = 0, m2 = 0, r;
	for (int i = 0; i < C; i++)
		mu += x[i] / C;
	for (int i = 0; i < C; i++)
		var += (x[i] - mu) * (x[i] - mu) / C;
	r = 1 / sqrt(var + eps);
	for (int i = 0; i < C; i++) {
		if (y)
			y[i] = g[i] * (x[i] - mu) * r + b[i];
		if (xhat)
			xhat[i] = (x[i] - mu) * r;
		m1 += dy ? dy[i] * g[i] / C : 0;
		m2 += dy ? dy[i] * g[i] * (x[i] - mu) * r / C : 0;
	}
	for (int i = 0; dx && i < C; i++)
		dx[i] = r * (dy[i] * g[i] - m1 - (x[i] - mu) * r * m2);
}

/* v + e dv, elementwise, in double */
static void along(double *out, const float *v, const float *dv, double e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = v[i] + e * (dv ? dv[i] : 0);
}

/* R{y}, R{dx} of a LayerNorm's rows against central differences of
 * ln_row_d along (R{x}, R{g}, R{b}, R{dy}); Gauss-Newton's R{dx} (no dy)
 * is the backward's map of R{dy}; R{dgain} the column sums of R{dy xhat} */
static void test_rop_layernorm(struct sw_rng *r, int rows, int C)
{
	size_t n = (size_t)rows * C;
	int64_t chunks = (rows + GK_CHUNK - 1) / GK_CHUNK;
	float *x = dev(n), *rx = dev(n), *dy = dev(n), *rdy = dev(n), *y = dev(n), *ry = dev(n);
	float *rdx = dev(n), *rdx_gn = dev(n), *g = dev(C), *rg = dev(C), *b = dev(C), *rb = dev(C);
	float *mean = dev(rows), *rstd = dev(rows), *rmean = dev(rows), *rrstd = dev(rows);
	float *rdg = dev(C), *part = dev((size_t)chunks * C);
	double *w1 = malloc(9 * (size_t)C * sizeof(double)), *want_y = malloc(n * sizeof(double));
	double *want_dx = malloc(n * sizeof(double)), *want_gn = malloc(n * sizeof(double));
	double *want_dg = calloc(C, sizeof(double));
	float *fy = malloc(n * sizeof(float)), *fdx = malloc(n * sizeof(float)), *fgn = malloc(n * sizeof(float));
	float *fdg = malloc(C * sizeof(float));
	struct sw_err err;
	int rc;

	fill(x, n, r, 2);
	fill(rx, n, r, 1);
	fill(dy, n, r, 1);
	fill(rdy, n, r, 1);
	fill(g, C, r, 0.3);
	fill(rg, C, r, 1);
	fill(b, C, r, 1);
	fill(rb, C, r, 1);
	for (int i = 0; i < C; i++)
		g[i] += 1;
	memset(rdx, 0, n * sizeof(float));
	memset(rdx_gn, 0, n * sizeof(float));
	memset(rdg, 0, C * sizeof(float));
	rc = gk_launch_layernorm_forward(G, &(struct gk_layernorm){
		.grid = gk_rows(rows, C), .out = y, .mean = mean, .rstd = rstd, .inp = x, .gain = g,
		.bias = b, .rows = rows, .C = C, .eps = 1e-5}, &err);
	struct gk_rop_layernorm a = {
		.grid = gk_rows(rows, C), .out = ry, .rmean = rmean, .rrstd = rrstd, .inp = x, .rinp = rx,
		.dout = dy, .rdout = rdy, .gain = g, .rgain = rg, .rbias = rb, .mean = mean, .rstd = rstd,
		.rows = rows, .C = C};
	rc = rc ? rc : gk_launch_rop_layernorm_forward(G, &a, &err);
	a.grid.shm += 2;
	a.out = rdx;
	rc = rc ? rc : gk_launch_rop_layernorm_backward(G, &a, &err);
	a.out = rdx_gn;
	a.dout = NULL;
	rc = rc ? rc : gk_launch_rop_layernorm_backward(G, &a, &err);
	struct gk_colsum cs = {
		.grid = gk_elems(chunks * C), .partial = part, .out = rdg, .a = rdy, .b = x, .rstd = rstd,
		.mean = mean, .c = dy, .d = rx, .rrstd = rrstd, .rmean = rmean, .rows = rows,
		.chunks = chunks, .C = C};
	rc = rc ? rc : gk_launch_rop_colsum_partial(G, &cs, &err);
	cs.grid = gk_elems(C);
	rc = rc ? rc : gk_launch_colsum_finish(G, &cs, &err);
	for (int k = 0; k < rows; k++) {
		size_t o = (size_t)k * C;
		double *xp = w1, *gp = xp + C, *bp = gp + C, *dp = bp + C, *yv = dp + C, *xh = yv + C;
		double *dxv = xh + C, *ym = dxv + C, *dxm = ym + C;
		for (int s = 1; s >= -1; s -= 2) {
			along(xp, x + o, rx + o, s * FD_E, C);
			along(gp, g, rg, s * FD_E, C);
			along(bp, b, rb, s * FD_E, C);
			along(dp, dy + o, rdy + o, s * FD_E, C);
			ln_row_d(xp, gp, bp, dp, C, 1e-5, s > 0 ? yv : ym, xh, s > 0 ? dxv : dxm);
			for (int i = 0; i < C; i++)     /* dgain's rows: dy xhat */
				want_dg[i] += s * dp[i] * xh[i] / (2 * FD_E);
		}
		for (int i = 0; i < C; i++) {
			want_y[o + i] = (yv[i] - ym[i]) / (2 * FD_E);
			want_dx[o + i] = (dxv[i] - dxm[i]) / (2 * FD_E);
		}
		along(xp, x + o, NULL, 0, C);
		along(gp, g, NULL, 0, C);
		along(dp, rdy + o, NULL, 0, C);
		ln_row_d(xp, gp, bp, dp, C, 1e-5, NULL, NULL, want_gn + o);
	}
	for (size_t i = 0; i < n; i++) {
		fy[i] = (float)want_y[i];
		fdx[i] = (float)want_dx[i];
		fgn[i] = (float)want_gn[i];
	}
	for (int i = 0; i < C; i++)
		fdg[i] = (float)want_dg[i];
	ok(launched(rc, &err, "rop_layernorm") && rel(ry, fy, n) < 1e-5,
	   "rop_layernorm_forward %d x %d: R{y} as float64 differences (%.2g)", rows, C, rel(ry, fy, n));
	ok(rel(rdx, fdx, n) < 1e-5, "rop_layernorm_backward %d x %d: R{dx} as float64 differences (%.2g)",
	   rows, C, rel(rdx, fdx, n));
	ok(rel(rdx_gn, fgn, n) < 1e-5,
	   "rop_layernorm_backward, Gauss-Newton: the backward's map of R{dy} (%.2g)", rel(rdx_gn, fgn, n));
	ok(rel(rdg, fdg, C) < 1e-5, "rop_colsum_partial, LayerNorm's R{dgain} over %d rows (%.2g)", rows,
	   rel(rdg, fdg, C));
	free(w1), free(want_y), free(want_dx), free(want_gn), free(want_dg), free(fy), free(fdx), free(fgn),
		free(fdg);
}

/* the activations in double, from their definitions */
static double act_d(int act, double x)
{
	if (act == ELEM_ACT_GELU_TANH)
		return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	return 0.5 * x * (1 + erf(x / sqrt(2)));
}

/* act' from its definition: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2);
 * Phi(x) + x phi(x) */
static double act_d1(int act, double x)
{
	if (act == ELEM_ACT_GELU_TANH) {
		double k = sqrt(2 / M_PI), t = tanh(k * (x + 0.044715 * x * x * x));
		return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
	}
	return 0.5 * (1 + erf(x / sqrt(2))) + x * exp(-x * x / 2) / sqrt(2 * M_PI);
}

/* The plain MLP's and GeGLU's tangents, forward and backward, against
 * central differences of act_d: R{h}, R{dx} (act_backward's: dh act'(x))
 * and GeGLU's R{h}, R{dgate}, R{dup}; the soft-cap's backward tangent and
 * its Gauss-Newton form */
static void test_rop_pointwise(struct sw_rng *r, int act)
{
	enum { n = 777 };
	float *x = dev(n), *rx = dev(n), *u = dev(n), *ru = dev(n), *dh = dev(n), *rdh = dev(n);
	float *o1 = dev(n), *o2 = dev(n), *o3 = dev(n), *o4 = dev(n), *o5 = dev(n), *o6 = dev(n), *th = dev(n);
	float w1[n], w2[n], w3[n], w4[n], w5[n], w6[n];
	double cap = 0.7;
	struct sw_err err;
	int rc;

	fill(x, n, r, 2);
	fill(rx, n, r, 1);
	fill(u, n, r, 1);
	fill(ru, n, r, 1);
	fill(dh, n, r, 1);
	fill(rdh, n, r, 1);
	memset(o2, 0, n * sizeof(float));
	memset(o4, 0, n * sizeof(float));
	memset(o5, 0, n * sizeof(float));
	struct gk_rop_pointwise a = {.grid = gk_elems(n), .out = o1, .dh = dh, .rdh = rdh, .gate = x,
				     .up = u, .rgate = rx, .rup = ru, .n = n, .act = act};
	rc = gk_launch_rop_act_forward(G, &a, &err);
	a.out = o2;
	rc = rc ? rc : gk_launch_rop_act_backward(G, &a, &err);
	a.out = o3;
	rc = rc ? rc : gk_launch_rop_swiglu_forward(G, &a, &err);
	a.out = o4;
	a.out2 = o5;
	rc = rc ? rc : gk_launch_rop_swiglu_backward(G, &a, &err);
	for (int i = 0; i < n; i++) {
		double xp = x[i] + FD_E * rx[i], xm = x[i] - FD_E * rx[i], up = u[i] + FD_E * ru[i],
		       um = u[i] - FD_E * ru[i], dp = dh[i] + FD_E * rdh[i], dm = dh[i] - FD_E * rdh[i];
		w1[i] = (float)((act_d(act, xp) - act_d(act, xm)) / (2 * FD_E));
		w2[i] = (float)((dp * act_d1(act, xp) - dm * act_d1(act, xm)) / (2 * FD_E));
		w3[i] = (float)((act_d(act, xp) * up - act_d(act, xm) * um) / (2 * FD_E));
		w4[i] = (float)((dp * up * act_d1(act, xp) - dm * um * act_d1(act, xm)) / (2 * FD_E));
		w5[i] = (float)((dp * act_d(act, xp) - dm * act_d(act, xm)) / (2 * FD_E));
	}
	ok(launched(rc, &err, "rop pointwise") && rel(o1, w1, n) < 1e-5 && rel(o2, w2, n) < 1e-5,
	   "rop_act_forward, rop_act_backward (%s): R{h}, R{dx} as float64 differences (%.2g, %.2g)",
	   act == ELEM_ACT_GELU ? "GELU" : "tanh GELU", rel(o1, w1, n), rel(o2, w2, n));
	ok(rel(o3, w3, n) < 1e-5 && rel(o4, w4, n) < 1e-5 && rel(o5, w5, n) < 1e-5,
	   "rop_swiglu_forward, _backward (GeGLU, %s): R{h}, R{dgate}, R{dup} (%.2g, %.2g, %.2g)",
	   act == ELEM_ACT_GELU ? "GELU" : "tanh GELU", rel(o3, w3, n), rel(o4, w4, n), rel(o5, w5, n));

	/* the soft-cap: R{dx} of dx = dy (1 - tanh(x / cap)^2) along (R{x}, R{dy}) */
	for (int i = 0; i < n; i++) {
		double xp = x[i] + FD_E * rx[i], xm = x[i] - FD_E * rx[i], dp = dh[i] + FD_E * rdh[i],
		       dm = dh[i] - FD_E * rdh[i], tp = tanh(xp / cap), tm = tanh(xm / cap);
		th[i] = tanhf(x[i] / (float)cap);
		w6[i] = (float)((dp * (1 - tp * tp) - dm * (1 - tm * tm)) / (2 * FD_E));
		w1[i] = (float)(rdh[i] * (1 - (double)th[i] * th[i]));
	}
	memcpy(o5, rdh, n * sizeof(float));
	memcpy(o6, rdh, n * sizeof(float));
	struct gk_softcap sc = {.grid = gk_elems(n), .x = o5, .th = th, .dy = dh, .rx = rx, .n = n,
				.cap = (float)cap};
	rc = gk_launch_rop_softcap_backward(G, &sc, &err);
	sc.x = o6;
	sc.dy = NULL;
	rc = rc ? rc : gk_launch_rop_softcap_backward(G, &sc, &err);
	ok(launched(rc, &err, "rop_softcap_backward") && rel(o5, w6, n) < 1e-5 && rel(o6, w1, n) < 1e-6,
	   "rop_softcap_backward: R{dx} as float64 differences, Gauss-Newton's (1 - t^2) R{dy} (%.2g, %.2g)",
	   rel(o5, w6, n), rel(o6, w1, n));
}

/* one causal row (t + 1 scores) through the cap and the softmax, in
 * double: P, and dS = P (dP - sum P dP) (1 - tanh^2) scale */
static void capped_row_d(const double *s, const double *d, int n, double cap, double scale,
			 double *p, double *ds)
{
	double m = -INFINITY, sum = 0, dot = 0;
	for (int u = 0; u < n; u++)
		m = fmax(m, cap * tanh(s[u] / cap));
	for (int u = 0; u < n; u++)
		sum += p[u] = exp(cap * tanh(s[u] / cap) - m);
	for (int u = 0; u < n; u++)
		dot += (p[u] /= sum) * d[u];
	for (int u = 0; u < n; u++)
		ds[u] = p[u] * (d[u] - dot) * (1 - tanh(s[u] / cap) * tanh(s[u] / cap)) * scale;
}

/* Attention's softmax backward through the cap and its tangent
 * (rop_softmax_backward with th and R{S}): dS and R{dS} against
 * capped_row_d and its central differences along (R{S}, R{dP}), R{P}
 * given as its difference too */
static void test_rop_softmax_softcap(struct sw_rng *r)
{
	enum { T = 29 };
	double cap = 0.5, scale = 0.3, sp[T], sm[T], dpp[T], dpm[T], pp[T], pm[T], dsp[T], dsm[T];
	float *s = dev(T * T), *rs = dev(T * T), *d = dev(T * T), *rd = dev(T * T), *p = dev(T * T),
	      *rp = dev(T * T), *th = dev(T * T), *wd = malloc(T * T * sizeof(float)),
	      *wrd = malloc(T * T * sizeof(float));
	struct sw_err err;
	int rc;

	fill(s, T * T, r, 1);
	fill(rs, T * T, r, 1);
	fill(d, T * T, r, 1);
	fill(rd, T * T, r, 1);
	for (int t = 0; t < T; t++) {
		size_t o = (size_t)t * T;
		for (int k = 1; k >= -1; k -= 2) {
			for (int u = 0; u <= t; u++) {
				(k > 0 ? sp : sm)[u] = s[o + u] + k * FD_E * rs[o + u];
				(k > 0 ? dpp : dpm)[u] = d[o + u] + k * FD_E * rd[o + u];
			}
			capped_row_d(k > 0 ? sp : sm, k > 0 ? dpp : dpm, t + 1, cap, scale, k > 0 ? pp : pm,
				     k > 0 ? dsp : dsm);
		}
		for (int u = 0; u < T; u++) {
			rp[o + u] = u <= t ? (float)((pp[u] - pm[u]) / (2 * FD_E)) : 0;
			wrd[o + u] = u <= t ? (float)((dsp[u] - dsm[u]) / (2 * FD_E)) : 0;
			th[o + u] = tanhf(s[o + u] / (float)cap);
		}
		for (int u = 0; u <= t; u++) {
			sp[u] = s[o + u];
			dpp[u] = d[o + u];
		}
		capped_row_d(sp, dpp, t + 1, cap, scale, pp, dsp);
		for (int u = 0; u < T; u++) {
			p[o + u] = u <= t ? (float)pp[u] : 0;
			wd[o + u] = u <= t ? (float)dsp[u] : 0;
		}
	}
	rc = gk_launch_rop_softmax_backward(G, &(struct gk_rop_softmax_back){
		.grid = gk_rows(T, T), .d = d, .rd = rd, .p = p, .rp = rp, .th = th, .rs = rs, .rows = T,
		.p_bstride = T * T, .d_bstride = T * T, .T = T, .scale = (float)scale, .cap = (float)cap}, &err);
	ok(launched(rc, &err, "rop_softmax_backward") && rel(d, wd, T * T) < 1e-5 && rel(rd, wrd, T * T) < 1e-5,
	   "rop_softmax_backward through the cap: dS and R{dS} as float64 differences (%.2g, %.2g)",
	   rel(d, wd, T * T), rel(rd, wrd, T * T));
	free(wd), free(wrd);
}

/* The emulation refuses what CUDA and cuBLAS refuse. */
static void test_emulation_checks(void)
{
	float *a = dev(64), host[64] = {0};
	struct sw_err err;
	struct gpu_gemm mm = {.m = 8, .n = 8, .k = 8, .alpha = 1, .A = a, .B = a, .C = a, .lda = 8,
			      .ldb = 8, .ldc = 8, .batch = 1};

	ok(G->ops->gemm(G, &mm, &err) == SW_OK, "emulation: an 8 x 8 product in its allocation runs");
	mm.lda = 7;
	ok(G->ops->gemm(G, &mm, &err) == SW_ESOFTWARE && strstr(err.msg, "INVALID_VALUE"),
	   "emulation: lda below the rows is cuBLAS's INVALID_VALUE");
	mm.lda = 8;
	mm.n = 9;
	ok(G->ops->gemm(G, &mm, &err) == SW_ESOFTWARE && strstr(err.msg, "out of its allocation"),
	   "emulation: a matrix reaching past its allocation is refused");
	ok(gk_launch_scale(G, &(struct gk_opt){.grid = {1, 2048, 0}, .out = a, .n = 1, .scale = 1}, &err) ==
		   SW_ESOFTWARE && strstr(err.msg, "invalid launch"),
	   "emulation: 2048 threads per block is an invalid launch");
	ok(G->ops->upload(G, host, a, sizeof host, &err) == SW_ESOFTWARE &&
		   G->ops->download(G, a, host, sizeof host, &err) == SW_ESOFTWARE,
	   "emulation: copies the wrong way round are refused");
}

int main(void)
{
	struct sw_err err;
	struct sw_rng r;

	if (gpu_emu_open(&G, &err)) {
		ok(0, "gpu_emu_open: %s", err.msg);
		return tap_done();
	}
	rng_seed(&r, 11);
	test_encoder(&r);
	test_rmsnorm(&r, 37, 300, 1);
	test_rmsnorm(&r, 600, 8, 1);    /* QK-norm: many rows of a head */
	test_rmsnorm(&r, 5, 45, 0);
	test_bias(&r, 600, 24);         /* three chunks, the last partial */
	test_bias(&r, 5, 45);
	test_rope(&r);
	test_attention_softmax(&r);
	test_crossentropy(&r);
	test_pointwise(&r);
	test_multipliers(&r, MULT_SCALAR);
	test_multipliers(&r, MULT_ROW);
	test_multipliers(&r, MULT_COL);
	test_multipliers(&r, MULT_ROWCOL);
	test_sums_and_transpose(&r);
	/* GPT-2's, Gemma's and Gemma2's kernels */
	test_layernorm(&r, 37, 300, 1);
	test_layernorm(&r, 600, 24, 1); /* three chunks of rows, the last partial */
	test_layernorm(&r, 5, 45, 0);
	test_family_pointwise(&r, ELEM_ACT_GELU_TANH);
	test_family_pointwise(&r, ELEM_ACT_GELU);
	test_attention_softcap(&r);
	test_rop_layernorm(&r, 37, 300);
	test_rop_layernorm(&r, 600, 24);
	test_rop_pointwise(&r, ELEM_ACT_GELU_TANH);
	test_rop_pointwise(&r, ELEM_ACT_GELU);
	test_rop_softmax_softcap(&r);
	test_emulation_checks();
	gpu_close(G);
	return tap_done();
}
