/* Unit tests of lib/model/optim.c: schedules, per-tensor hparams, Newton-Schulz;
 * optim_grad_norm and optim_step on a tiny model (every kind of tensor, row
 * multipliers with their own lr and wd): the gradient norm and the clipping
 * leave the multipliers out (sw-train(1), --grad-clip), and two steps of
 * AdamW, Muon, Scion, Lion and Adam-mini give the parameters the
 * documented formulas give, computed here in double from the man page, not
 * from optim.c; Adam-mini's state one v a block, Lion's none, and a shard
 * of Adam-mini's (ZeRO-1) steps as the whole does. */
#include <stdlib.h>
#include <string.h>

#include "../../lib/analysis/linalg.h"
#include "../../lib/model/model.h"
#include "../../lib/model/optim.h"
#include "../../lib/base/rng.h"
#include "tap.h"

static struct sw_tensor_info tinfo(enum sw_block b, enum sw_kind k, enum sw_group g,
				   enum sw_norm_type nt)
{
	struct sw_tensor_info t;
	memset(&t, 0, sizeof t);
	t.block = b;
	t.kind = k;
	t.group = g;
	t.norm_type = nt;
	return t;
}

/* ---- optim_step against formulas in double ----------------------------- */

/* What sw-train(1) says each tensor is, from its role alone. */
static int role_is_mult(const char *role) { return strstr(role, "_mult") != NULL; }
static int role_is_hidden(const char *role)
{
	static const char *const hidden[] = {"q", "k", "v", "o", "gate", "up", "down"};
	for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
		if (!strcmp(role, hidden[i]))
			return 1;
	return 0;
}

/* The reference optimizer's state: parameters and moments in double. */
struct ref {
	double *p, *m, *v;              /* (nparams) */
	int64_t t;
};

/* X = NS5(G) (rows x cols) in double: on the transpose when tall,
 * X = G/||G||_F, then 5 times X <- a X + (b A + c A A) X, A = X X^T. */
static void ns5(double *X, const double *G, int rows, int cols)
{
	const double a = 3.4445, b = -4.7750, c = 2.0315;
	int tr = rows > cols, r = tr ? cols : rows, n = tr ? rows : cols;
	double *Y = malloc(sizeof(double) * (size_t)(r * n)), *Z = malloc(sizeof(double) * (size_t)(r * n));
	double *A = malloc(sizeof(double) * (size_t)(r * r)), *B = malloc(sizeof(double) * (size_t)(r * r));
	double nrm = 0;

	for (int i = 0; i < r; i++)
		for (int j = 0; j < n; j++)
			Y[i * n + j] = tr ? G[j * cols + i] : G[i * cols + j];
	for (int k = 0; k < r * n; k++)
		nrm += Y[k] * Y[k];
	for (int k = 0; k < r * n; k++)
		Y[k] /= sqrt(nrm);
	for (int s = 0; s < 5; s++) {
		for (int i = 0; i < r; i++)
			for (int j = 0; j < r; j++) {
				A[i * r + j] = 0;
				for (int k = 0; k < n; k++)
					A[i * r + j] += Y[i * n + k] * Y[j * n + k];
			}
		for (int i = 0; i < r; i++)
			for (int j = 0; j < r; j++) {
				double aa = 0;
				for (int k = 0; k < r; k++)
					aa += A[i * r + k] * A[k * r + j];
				B[i * r + j] = b * A[i * r + j] + c * aa;
			}
		for (int i = 0; i < r; i++)
			for (int j = 0; j < n; j++) {
				Z[i * n + j] = a * Y[i * n + j];
				for (int k = 0; k < r; k++)
					Z[i * n + j] += B[i * r + k] * Y[k * n + j];
			}
		memcpy(Y, Z, sizeof(double) * (size_t)(r * n));
	}
	for (int i = 0; i < r; i++)
		for (int j = 0; j < n; j++)
			X[tr ? j * cols + i : i * cols + j] = Y[i * n + j];
	free(Y);
	free(Z);
	free(A);
	free(B);
}

/*
 * One step of the reference at step (0-based) with the clipping factor
 * clip: oc's schedule is constant with a linear warmup, no Blockwise LR,
 * group ratios 1, gains without weight decay. Per sw-train(1): matrices
 * get lr and wd, multipliers lr x mult-lr and mult-wd and no clipping
 * (unless clip_mults, to show the test would see it), gains lr and no wd;
 * coupled decay W <- W (1 - lr wd) first. AdamW (PyTorch's); Muon: hidden
 * matrices buf <- mom buf + (1 - mom) g, u = NS5((1 - mom) g + mom buf)
 * sqrt(max(1, rows/cols)), AdamW for the rest; Scion: M <- mom M +
 * (1 - mom) g, hidden matrices sqrt(rows/cols) NS5(M), the embedding's
 * rows to RMS 1, the head sign(M)/d_in, vectors sign(M); Lion (Chen et al.
 * 2023): u = sign(b1 m + (1 - b1) g), then m <- b2 m + (1 - b2) g (beta2
 * 0.99 unless given); Adam-mini (Zhang et al. 2024): AdamW with v one per
 * block, b2 v + (1 - b2) mean(g^2): q and k a head each (head_dim 2 rows
 * of the tiny model), any other matrix a row, a vector one block; its v
 * kept here per element (each the block's).
 */
static void ref_step(struct ref *r, const struct model *m, const struct optim_config *oc,
		     int64_t step, double clip, int clip_mults)
{
	double f = step < oc->warmup ? (double)(step + 1) / (double)oc->warmup : 1;
	double mom = isnan(oc->momentum) ? (oc->kind == OPT_MUON ? 0.95 : 0) : oc->momentum;
	double b1 = oc->beta1, b2 = isnan(oc->beta2) ? (oc->kind == OPT_LION ? 0.99 : 0.95) : oc->beta2;

	r->t++;
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		const char *role = mt->info.role;
		int mult = role_is_mult(role), hidden = role_is_hidden(role);
		int matrix = hidden || !strcmp(role, "embed") || !strcmp(role, "lm_head");
		int rows = (int)mt->info.shape[0], cols = mt->info.rank == 2 ? (int)mt->info.shape[1] : 1;
		size_t n = mt->numel, o = mt->offset;
		double lr = oc->lr * f * (mult ? oc->mult_lr_ratio : 1);
		double wd = mult ? oc->mult_wd : matrix ? oc->wd : 0;
		double decay = 1 - lr * wd, c = mult && !clip_mults ? 1 : clip;
		double *p = r->p + o, *mm = r->m + o, *v = r->v + o;
		double *u = malloc(sizeof(double) * n), *g = malloc(sizeof(double) * n);

		for (size_t k = 0; k < n; k++)
			g[k] = m->grads[o + k] * c;
		if (oc->kind == OPT_ADAMW || (oc->kind == OPT_MUON && !hidden)) {
			double bc1 = 1 - pow(b1, (double)r->t), bc2 = 1 - pow(b2, (double)r->t);
			for (size_t k = 0; k < n; k++) {
				mm[k] = b1 * mm[k] + (1 - b1) * g[k];
				v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k];
				u[k] = (mm[k] / bc1) / (sqrt(v[k] / bc2) + oc->eps);
			}
		} else if (oc->kind == OPT_LION) {
			for (size_t k = 0; k < n; k++) {
				double x = b1 * mm[k] + (1 - b1) * g[k];
				u[k] = x > 0 ? 1 : x < 0 ? -1 : 0;
				mm[k] = b2 * mm[k] + (1 - b2) * g[k];
			}
		} else if (oc->kind == OPT_ADAM_MINI) {
			double bc1 = 1 - pow(b1, (double)r->t), bc2 = 1 - pow(b2, (double)r->t);
			size_t bn = mt->info.rank != 2 ? n : !strcmp(role, "q") || !strcmp(role, "k") ? 2 * (size_t)cols
										   : (size_t)cols;
			for (size_t b0 = 0; b0 < n; b0 += bn) {
				double s = 0;
				for (size_t k = b0; k < b0 + bn; k++)
					s += g[k] * g[k];
				for (size_t k = b0; k < b0 + bn; k++) {
					mm[k] = b1 * mm[k] + (1 - b1) * g[k];
					v[k] = b2 * v[k] + (1 - b2) * s / (double)bn;
					u[k] = (mm[k] / bc1) / (sqrt(v[k] / bc2) + oc->eps);
				}
			}
		} else if (oc->kind == OPT_MUON) {
			for (size_t k = 0; k < n; k++) {
				mm[k] = mom * mm[k] + (1 - mom) * g[k];
				g[k] = (1 - mom) * g[k] + mom * mm[k];
			}
			ns5(u, g, rows, cols);
			for (size_t k = 0; k < n; k++)
				u[k] *= sqrt(rows > cols ? (double)rows / cols : 1);
		} else {
			for (size_t k = 0; k < n; k++)
				mm[k] = mom * mm[k] + (1 - mom) * g[k];
			if (hidden) {
				ns5(u, mm, rows, cols);
				for (size_t k = 0; k < n; k++)
					u[k] *= sqrt((double)rows / cols);
			} else if (!strcmp(role, "embed")) {
				for (int row = 0; row < rows; row++) {
					double s = 0;
					for (int j = 0; j < cols; j++)
						s += mm[row * cols + j] * mm[row * cols + j];
					for (int j = 0; j < cols; j++)
						u[row * cols + j] = mm[row * cols + j] / sqrt(s / cols);
				}
			} else {
				double scale = !strcmp(role, "lm_head") ? 1.0 / cols : 1;
				for (size_t k = 0; k < n; k++)
					u[k] = mm[k] > 0 ? scale : mm[k] < 0 ? -scale : 0;
			}
		}
		for (size_t k = 0; k < n; k++)
			p[k] = p[k] * decay - lr * u[k];
		free(u);
		free(g);
	}
}

/* The largest |model - reference| over the parameters, and where. */
static double worst_diff(const struct model *m, const struct ref *r, const char **where)
{
	double worst = 0;

	*where = "";
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		for (size_t k = 0; k < mt->numel; k++) {
			double d = fabs((double)m->params[mt->offset + k] - r->p[mt->offset + k]);
			if (d > worst) {
				worst = d;
				*where = mt->info.name;
			}
		}
	}
	return worst;
}

/* Gradients: scale N(0, 1), the multipliers' 20 scale N(0, 1), so that
 * they would dominate the global norm if it counted them. */
static void set_grads(struct model *m, struct sw_rng *rng, double scale)
{
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		double s = role_is_mult(mt->info.role) ? 20 * scale : scale;
		for (size_t k = 0; k < mt->numel; k++)
			m->grads[mt->offset + k] = (real)(s * rng_normal(rng));
	}
}

/* The tiny model: V 7, C 4, 1 layer, 2 heads of 2, 1 KV head, F 6, an
 * untied head, row multipliers (q, k: 4x4 and 2x4 wide; gate 6x4 tall). */
static int tiny_model(struct model *m, struct sw_rng *rng)
{
	struct sw_config c = {
		.arch = "llama", .vocab_size = 7, .d_model = 4, .n_layers = 1, .n_heads = 2,
		.n_kv_heads = 1, .head_dim = 2, .d_ff = 6, .seq_len = 4, .rope_theta = 10000,
		.norm_eps = 1e-5, .multipliers = "row", .scale_vectors = 1,
	};
	struct sw_err err;

	if (model_build(m, &c, &err)) {
		ok(0, "tiny model: %s", err.msg);
		return -1;
	}
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		int matrix = mt->info.rank == 2;
		for (size_t k = 0; k < mt->numel; k++)
			m->params[mt->offset + k] = (real)(matrix ? 0.3 * rng_normal(rng) : 1 + 0.2 * rng_normal(rng));
	}
	return 0;
}

/* The tolerance on a parameter after two steps: float32 parameters and
 * moments against double (|p| < 2, lr <= 3e-2), Newton-Schulz in float. */
#define STEP_TOL 2e-6

static void check_grad_norm(void)
{
	struct model m;
	struct sw_rng rng;
	double without = 0, with = 0, gn;

	rng_seed(&rng, 11);
	if (tiny_model(&m, &rng))
		return;
	set_grads(&m, &rng, 0.1);
	for (int i = 0; i < m.ntensors; i++)
		for (size_t k = 0; k < m.tensors[i].numel; k++) {
			double g = m.grads[m.tensors[i].offset + k];
			with += g * g;
			if (!role_is_mult(m.tensors[i].info.role))
				without += g * g;
		}
	gn = optim_grad_norm(&m);
	ok(close_rel(gn, sqrt(without), 1e-12) && sqrt(with) > 2 * sqrt(without),
	   "optim_grad_norm: %.9g, the norm without the multipliers %.9g (with them %.9g)",
	   gn, sqrt(without), sqrt(with));
	for (int i = 0; i < m.ntensors; i++)
		if (role_is_mult(m.tensors[i].info.role))
			for (size_t k = 0; k < m.tensors[i].numel; k++)
				m.grads[m.tensors[i].offset + k] *= 1000;
	ok(optim_grad_norm(&m) == gn, "optim_grad_norm: the multipliers' gradients x 1000 change nothing");
	model_free(&m);
}

/* Two steps (step 0 and 1 of a 2-step warmup: lr/2, then lr) of oc on the
 * tiny model, clipped to grad_clip as sw-train clips (the first step's
 * gradients are clipped, the second's, 5 times smaller, are not), each
 * against the reference; then whether the reference that clips the
 * multipliers too would have been told apart (for Scion's sign(M), only a
 * momentum over steps clipped differently can show it). */
static void check_steps(const char *what, struct optim_config oc)
{
	struct model m;
	struct optim o;
	struct ref r = {0}, wrong = {0};
	struct sw_rng rng;
	struct sw_err err;
	const char *where;
	double worst[2], worst_wrong = 0, clip[2];

	rng_seed(&rng, 29);
	if (tiny_model(&m, &rng))
		return;
	if (optim_init(&o, &oc, &m, &err)) {
		ok(0, "%s: optim_init: %s", what, err.msg);
		model_free(&m);
		return;
	}
	r.p = calloc(m.nparams, sizeof(double));
	r.m = calloc(m.nparams, sizeof(double));
	r.v = calloc(m.nparams, sizeof(double));
	wrong.p = calloc(m.nparams, sizeof(double));
	wrong.m = calloc(m.nparams, sizeof(double));
	wrong.v = calloc(m.nparams, sizeof(double));
	for (size_t k = 0; k < m.nparams; k++)
		r.p[k] = wrong.p[k] = m.params[k];
	for (int64_t step = 0; step < 2; step++) {
		double gn;
		const char *w;
		set_grads(&m, &rng, step == 0 ? 0.1 : 0.02);
		gn = optim_grad_norm(&m);
		clip[step] = gn > oc.grad_clip ? oc.grad_clip / gn : 1;
		ref_step(&r, &m, &oc, step, clip[step], 0);
		ref_step(&wrong, &m, &oc, step, clip[step], 1);
		optim_step(&o, &m, step, clip[step]);
		worst[step] = worst_diff(&m, &r, &where);
		ok(worst[step] <= STEP_TOL, "%s, step %d (clip factor %.3f): every parameter as the formulas give, "
		   "within %g (worst %.3g, %s)", what, (int)step + 1, clip[step], STEP_TOL, worst[step], where);
		double ww = worst_diff(&m, &wrong, &w);
		worst_wrong = ww > worst_wrong ? ww : worst_wrong;
	}
	ok(clip[0] < 0.9 && clip[1] == 1 && worst_wrong > 100 * STEP_TOL,
	   "%s: clipping the multipliers too would have been seen (off by %.3g)", what, worst_wrong);
	free(r.p);
	free(r.m);
	free(r.v);
	free(wrong.p);
	free(wrong.m);
	free(wrong.v);
	optim_free(&o);
	model_free(&m);
}

/* The second moments each optimizer keeps (sw-train(1)'s partition for
 * Adam-mini: q and k a head of 2 rows, any other matrix a row, a vector
 * one), and a shard of Adam-mini's tensors [2, 7) updated as the whole
 * optimizer updates them, bit for bit. */
static void check_state(void)
{
	struct model m, m2;
	struct optim whole, shard, adamw, lion;
	struct optim_config oc;
	struct sw_rng rng;
	struct sw_err err;
	size_t blocks = 0, first, end;
	int same = 1;

	rng_seed(&rng, 5);
	if (tiny_model(&m, &rng))
		return;
	rng_seed(&rng, 5);
	if (tiny_model(&m2, &rng))
		return;
	for (int i = 0; i < m.ntensors; i++) {
		const struct sw_tensor_info *t = &m.tensors[i].info;
		blocks += t->rank != 2 ? 1 : !strcmp(t->role, "q") || !strcmp(t->role, "k") ? (size_t)t->shape[0] / 2
											 : (size_t)t->shape[0];
	}
	optim_defaults(&oc);
	oc.kind = OPT_ADAMW;
	if (optim_init(&adamw, &oc, &m, &err))
		return (void)ok(0, "optim_init: %s", err.msg);
	oc.kind = OPT_LION;
	if (optim_init(&lion, &oc, &m, &err))
		return (void)ok(0, "optim_init: %s", err.msg);
	oc.kind = OPT_ADAM_MINI;
	if (optim_init(&whole, &oc, &m, &err) || optim_init(&shard, &oc, &m, &err) ||
	    optim_shard(&shard, &m, 2, 5, &err))
		return (void)ok(0, "optim_init: %s", err.msg);
	ok(optim_v_count(&adamw) == m.nparams && optim_v_count(&lion) == 0 && optim_v_count(&whole) == blocks,
	   "second moments: AdamW %zu (the parameters), Lion 0, Adam-mini %zu (the blocks: %zu)",
	   optim_v_count(&adamw), optim_v_count(&whole), blocks);
	for (int step = 0; step < 2; step++) {
		set_grads(&m, &rng, 0.1);
		memcpy(m2.grads, m.grads, m.nparams * sizeof *m.grads);
		optim_step(&whole, &m, step, 1);
		optim_step(&shard, &m2, step, 1);
	}
	first = m.tensors[2].offset;
	end = m.tensors[6].offset + m.tensors[6].numel;
	same = !memcmp(m.params + first, m2.params + first, (end - first) * sizeof *m.params) &&
	       !memcmp(whole.v + whole.voff[2], shard.v, (whole.voff[7] - whole.voff[2]) * sizeof *shard.v) &&
	       !memcmp(whole.m + first, shard.m, (end - first) * sizeof *shard.m);
	ok(same && shard.vbase == whole.voff[2],
	   "Adam-mini sharded (tensors 2..6): the whole optimizer's parameters, m and v, bit for bit");
	optim_free(&adamw);
	optim_free(&lion);
	optim_free(&whole);
	optim_free(&shard);
	model_free(&m);
	model_free(&m2);
}

static void check_optimizers(void)
{
	struct optim_config oc;

	check_grad_norm();
	check_state();
	optim_defaults(&oc);
	oc.lr = 1e-2;
	oc.sched = SCHED_CONSTANT;
	oc.warmup = 2;
	oc.wd = 0.1;
	oc.mult_lr_ratio = 3;
	oc.mult_wd = 0.05;
	oc.grad_clip = 0.7;
	/* an eps the size of the gradients: AdamW's update then depends on
	 * their scale, so clipping shows */
	oc.eps = 0.05;
	oc.kind = OPT_ADAMW;
	check_steps("AdamW", oc);
	oc.kind = OPT_MUON;
	check_steps("Muon", oc);
	oc.kind = OPT_LION;
	check_steps("Lion", oc);
	oc.kind = OPT_ADAM_MINI;
	check_steps("Adam-mini", oc);
	oc.kind = OPT_SCION;
	oc.momentum = 0.5;
	check_steps("Scion", oc);
}

int main(void)
{
	struct optim_config oc;
	double lr, wd;
	enum sw_wd_mode mode;
	struct sw_tensor_info q = tinfo(SW_BLOCK_QK, SW_KIND_MATRIX, SW_GROUP_HIDDEN, SW_NORM_NONE),
			      emb = tinfo(SW_BLOCK_EMB, SW_KIND_MATRIX, SW_GROUP_INPUT, SW_NORM_NONE),
			      in_norm = tinfo(SW_BLOCK_NORM, SW_KIND_VECTOR, SW_GROUP_HIDDEN, SW_NORM_INPUT),
			      out_norm = tinfo(SW_BLOCK_NORM, SW_KIND_VECTOR, SW_GROUP_HIDDEN, SW_NORM_OUTPUT),
			      mult = tinfo(SW_BLOCK_MULT, SW_KIND_SCALAR, SW_GROUP_HIDDEN, SW_NORM_NONE),
			      head = tinfo(SW_BLOCK_OUT, SW_KIND_MATRIX, SW_GROUP_OUTPUT, SW_NORM_NONE);

	optim_defaults(&oc);
	oc.lr = 1e-3;
	oc.warmup = 10;
	oc.steps = 110;
	ok(close_rel(optim_schedule(&oc, 0), 0.1, 1e-12) && close_rel(optim_schedule(&oc, 9), 1.0, 1e-12),
	   "linear warmup: 1/10 at step 0, 1 at step 9");
	ok(close_rel(optim_schedule(&oc, 10), 1.0, 1e-12), "cosine starts at lr_max after warmup");
	ok(close_rel(optim_schedule(&oc, 60), 0.05 + 0.95 * 0.5, 1e-12), "cosine half way: (1 + 1/20)/2");
	ok(close_rel(optim_schedule(&oc, 110), 0.05, 1e-12), "cosine ends at lr_max/20");
	oc.sched = SCHED_WSD;
	oc.decay_frac = 0.2;                    /* decay over steps 88..110 */
	ok(optim_schedule(&oc, 87) == 1 && close_rel(optim_schedule(&oc, 99), 0.5, 1e-12) &&
	   optim_schedule(&oc, 110) == 0, "WSD: stable, then linear to 0 over the last 20%%");
	oc.sched = SCHED_CONSTANT;
	ok(optim_schedule(&oc, 100) == 1, "constant after warmup");

	/* Blockwise LR (eq. 5): base during warmup, r x peak after, shared lr_min */
	optim_defaults(&oc);
	oc.lr = 1e-3;
	oc.warmup = 10;
	oc.steps = 110;
	oc.blockwise = 1;
	optim_tensor_hparams(&oc, &emb, 5, &lr, &wd, &mode);
	ok(close_rel(lr, 6e-4, 1e-12), "blockwise: base lr during warmup (%.3g)", lr);
	optim_tensor_hparams(&oc, &emb, 10, &lr, &wd, &mode);
	ok(close_rel(lr, 1e-2, 1e-12), "blockwise: Emb peak 10 x lr_max (%.3g)", lr);
	optim_tensor_hparams(&oc, &q, 10, &lr, &wd, &mode);
	ok(close_rel(lr, 8e-3, 1e-12), "blockwise: QK peak 8 x lr_max");
	optim_tensor_hparams(&oc, &in_norm, 10, &lr, &wd, &mode);
	ok(close_rel(lr, 1e-3, 1e-12), "blockwise: Norm keeps lr_max");
	optim_tensor_hparams(&oc, &emb, 110, &lr, &wd, &mode);
	ok(close_rel(lr, 5e-5, 1e-9), "blockwise: every block ends at the shared lr_min = lr_max/20");
	optim_tensor_hparams(&oc, &emb, 60, &lr, &wd, &mode);
	ok(close_rel(lr, 5e-5 + (1e-2 - 5e-5) * 0.5, 1e-9), "blockwise: half way, half way between r lr_max and lr_min");

	/* weight decay by kind; IWD; multipliers; group ratios */
	optim_defaults(&oc);
	oc.lr = 1e-3;
	oc.warmup = 0;
	oc.sched = SCHED_CONSTANT;
	optim_tensor_hparams(&oc, &q, 0, &lr, &wd, &mode);
	ok(wd == 0.1 && mode == SW_WD_COUPLED, "matrices get wd, coupled");
	optim_tensor_hparams(&oc, &in_norm, 0, &lr, &wd, &mode);
	ok(wd == 0 && mode == SW_WD_NONE, "gains: no wd by default");
	oc.norm_wd = NORM_WD_IWD;
	optim_tensor_hparams(&oc, &in_norm, 0, &lr, &wd, &mode);
	ok(wd == 0.1, "IWD: Input-Norm gains get wd");
	optim_tensor_hparams(&oc, &out_norm, 0, &lr, &wd, &mode);
	ok(wd == 0, "IWD: Output-Norm gains do not");
	oc.mult_lr_ratio = 3;
	optim_tensor_hparams(&oc, &mult, 0, &lr, &wd, &mode);
	ok(close_rel(lr, 3e-3, 1e-12) && wd == 2e-3, "multipliers: own lr ratio and wd 2e-3");
	oc.group_ratio[SW_GROUP_HIDDEN] = 0.125;
	optim_tensor_hparams(&oc, &q, 0, &lr, &wd, &mode);
	ok(close_rel(lr, 1.25e-4, 1e-12), "group lr 1:1/8:1: hidden at lr/8");
	optim_tensor_hparams(&oc, &head, 0, &lr, &wd, &mode);
	ok(close_rel(lr, 1e-3, 1e-12), "group lr: output at lr");
	oc.wd_mode = SW_WD_INDEPENDENT;
	optim_tensor_hparams(&oc, &q, 0, &lr, &wd, &mode);
	ok(mode == SW_WD_INDEPENDENT, "independent weight decay");

	/* Newton-Schulz: a tall and a wide matrix come out nearly orthogonal:
	 * every singular value in the quintic's band around 1 */
	{
		int shapes[2][2] = {{30, 12}, {12, 30}};
		struct sw_rng r;
		rng_seed(&r, 5);
		for (int s = 0; s < 2; s++) {
			int rows = shapes[s][0], cols = shapes[s][1], n = rows * cols, k = rows < cols ? rows : cols;
			real *G = malloc((size_t)n * sizeof *G), *X = malloc((size_t)n * sizeof *X);
			real *work = malloc((size_t)(3 * k * k + 2 * n) * sizeof *work);
			double sv[12];
			struct sw_err err;
			for (int i = 0; i < n; i++)
				G[i] = (real)(rng_normal(&r) * (i % 3 + 1));
			optim_newton_schulz(X, G, rows, cols, work);
			linalg_singular_values_dense(X, rows, cols, NULL, sv, &err);
			ok(sv[0] < 1.25 && sv[k - 1] > 0.6, "Newton-Schulz %dx%d: sigma in [%.3f, %.3f]",
			   rows, cols, sv[k - 1], sv[0]);
			free(G);
			free(X);
			free(work);
		}
	}
	check_optimizers();
	return tap_done();
}
