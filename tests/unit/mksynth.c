/*
 * mksynth - writes a synthetic checkpoint whose Q/K scales, output-layer
 * norms and sweep metadata are known by construction, for the tests of
 * sw-qkdrift and sw-transfer (not a test itself: the Makefile builds it
 * beside the unit tests, prove never runs it).
 *
 *   mksynth [options] PATH
 *
 * The model (llama, vocab V, d_model D, L layers, H heads, KV KV heads,
 * head_dim hd = D/H) holds only what the two tools read: the embedding,
 * per layer attn_norm, q, k (and their multipliers, q_norm, k_norm), the
 * final norm and the head. With s = 2^(R (1 + g + 2l) step/1000) for
 * layer l and KV head g (g = 0 where a scale is shared by all heads:
 * scalar and column multipliers, QK-norm gains of hd entries):
 *
 *   attn_norm, final_norm  gamma_j = 0.5 (j even), 1.5 (j odd): RMS sqrt(1.25)
 *   q rows of head h       +-qa(h), qa(h) = 0.5 + h/8, times s unless the
 *                          multipliers or the QK-norm gains carry s
 *   k rows of KV head g    +-ka(g), ka(g) = 0.25 + g/8, divided by s likewise
 *   q_mult, k_mult         every entry s and 1/s (--mult)
 *   q_norm, k_norm         every entry 1.25 s and 0.8/s (--qk-norm)
 *   lm_head (the embedding with --tie)  row i = (N/D)(1 - i/(2V)) in
 *                          every entry: ||W||_{RMS->inf} = N, folded with
 *                          gamma N sqrt(1.25)
 *
 * so that, from the matrices, q_rms = qa s sqrt(1.25), k_rms = ka sqrt(1.25)/s,
 * log2_ratio = log2(qa/ka) + 2 log2 s, product = 1.25 qa ka, whatever the
 * step. Signs are pseudo-random from a fixed seed, the same in every file.
 *
 * Options:
 *   -D D -L L -H H -K KV -V V   sizes (16, 2, 4, 2, 32)
 *   --mult MODE     none | scalar | row | col: the multipliers carry s
 *   --qk-norm       QK-norm; its gains carry s
 *   --no-gains      no norm gains at all (scale_vectors 0)
 *   --tie           tied head
 *   --rate R        (0.25)
 *   --step S        root step (0); --tokens N (S * 1024)
 *   --lr X --batch B   /optim lr_max (and lr = X/10, the decayed value)
 *                   and batch_size; --no-optim: no /optim group
 *   --val-loss X --train-loss X   /metrics (absent unless given)
 *   --out-norm N    (2)
 *   --nan           a NaN in layer 0's q projection
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/arch.h"
#include "../../lib/formats/h5write.h"
#include "../../lib/base/rng.h"

struct opts {
	int64_t D, L, H, KV, V;
	char mult[16];
	int qk_norm, gains, tie, optim, nan;
	double rate, lr, batch, val_loss, train_loss, out_norm;
	int64_t step, tokens;
};

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "mksynth: %s: %s\n", what, msg);
	exit(1);
}

static double number(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end)
		die(opt, "not a number");
	return v;
}

/* Write tensor role at layer, shape rows (x cols when cols > 0). */
static void put(struct h5w *w, const struct sw_config *c, const char *role, int layer,
		int64_t rows, int64_t cols, const float *data)
{
	struct sw_tensor_info t;
	struct sw_err err;

	memset(&t, 0, sizeof t);
	if (arch_info_for_role(c, role, layer, &t) < 0)
		die(role, "unknown role");
	t.rank = cols > 0 ? 2 : 1;
	t.shape[0] = rows;
	t.shape[1] = cols;
	t.numel = rows * (cols > 0 ? cols : 1);
	t.kind = sw_kind_of_shape(t.rank, t.shape);
	t.dtype = SW_DTYPE_F32;
	strcpy(t.dtype_name, "F32");
	t.lr = 1e-3;
	t.wd = 0;
	t.wd_mode = SW_WD_NONE;
	if (h5w_write_tensor(w, "/params", &t, data, 1, &err))
		die(role, err.msg);
}

static float *vec(int64_t n)
{
	float *v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
	if (!v)
		die("calloc", strerror(errno));
	return v;
}

/* s of layer l, KV head g at the step */
static double scale(const struct opts *o, int l, int64_t g)
{
	return exp2(o->rate * (double)(1 + g + 2 * l) * (double)o->step / 1000.0);
}

/* gamma_j = 0.5, 1.5, 0.5, ... */
static void put_gain(struct h5w *w, const struct sw_config *c, const char *role, int layer)
{
	float *g = vec(c->d_model);

	for (int64_t j = 0; j < c->d_model; j++)
		g[j] = j % 2 ? 1.5f : 0.5f;
	put(w, c, role, layer, c->d_model, 0, g);
	free(g);
}

/* The head (or tied embedding): row i all (N/D)(1 - i/(2V)). */
static void put_head(struct h5w *w, const struct sw_config *c, const char *role, double N)
{
	int64_t V = c->vocab_size, D = c->d_model;
	float *m = vec(V * D);

	for (int64_t i = 0; i < V; i++)
		for (int64_t j = 0; j < D; j++)
			m[i * D + j] = (float)(N / (double)D * (1.0 - (double)i / (2.0 * (double)V)));
	put(w, c, role, -1, V, D, m);
	free(m);
}

static void put_layer(struct h5w *w, const struct sw_config *c, const struct opts *o,
		      struct sw_rng *r, int l)
{
	int64_t D = c->d_model, hd = c->head_dim, H = c->n_heads, KV = c->n_kv_heads;
	int mult = strcmp(o->mult, "none") != 0, shared = !strcmp(o->mult, "scalar") ||
							  !strcmp(o->mult, "col") || o->qk_norm;
	int matrices_carry = !mult && !o->qk_norm;
	float *q = vec(H * hd * D), *k = vec(KV * hd * D);

	if (o->gains)
		put_gain(w, c, "attn_norm", l);
	for (int64_t i = 0; i < H * hd; i++) {
		int64_t h = i / hd, g = h / (H / KV);
		double a = (0.5 + (double)h / 8) * (matrices_carry ? scale(o, l, g) : 1.0);
		for (int64_t j = 0; j < D; j++)
			q[i * D + j] = (float)(rng_next(r) % 2 ? a : -a);
	}
	for (int64_t i = 0; i < KV * hd; i++) {
		int64_t g = i / hd;
		double a = (0.25 + (double)g / 8) / (matrices_carry ? scale(o, l, g) : 1.0);
		for (int64_t j = 0; j < D; j++)
			k[i * D + j] = (float)(rng_next(r) % 2 ? a : -a);
	}
	if (o->nan && l == 0)
		q[D + 3] = NAN;
	put(w, c, "q", l, H * hd, D, q);
	put(w, c, "k", l, KV * hd, D, k);
	if (mult) {
		/* every entry s (q) and 1/s (k); a row multiplier per KV group */
		int64_t nq = !strcmp(o->mult, "scalar") ? 1 : !strcmp(o->mult, "row") ? H * hd : D;
		int64_t nk = !strcmp(o->mult, "scalar") ? 1 : !strcmp(o->mult, "row") ? KV * hd : D;
		float *mq = vec(nq), *mk = vec(nk);
		for (int64_t i = 0; i < nq; i++)
			mq[i] = (float)scale(o, l, shared ? 0 : i / hd / (H / KV));
		for (int64_t i = 0; i < nk; i++)
			mk[i] = (float)(1.0 / scale(o, l, shared ? 0 : i / hd));
		put(w, c, "q_mult", l, nq, 0, mq);
		put(w, c, "k_mult", l, nk, 0, mk);
		free(mq);
		free(mk);
	}
	if (o->qk_norm && o->gains) {
		float *gq = vec(hd), *gk = vec(hd);
		for (int64_t i = 0; i < hd; i++) {
			gq[i] = (float)(1.25 * scale(o, l, 0));
			gk[i] = (float)(0.8 / scale(o, l, 0));
		}
		put(w, c, "q_norm", l, hd, 0, gq);
		put(w, c, "k_norm", l, hd, 0, gk);
		free(gq);
		free(gk);
	}
	free(q);
	free(k);
}

int main(int argc, char **argv)
{
	struct opts o = {16, 2, 4, 2, 32, "none", 0, 1, 0, 1, 0, 0.25, 1e-3, 8, NAN, NAN, 2.0, 0, -1};
	struct sw_config c;
	struct sw_rng r;
	struct sw_err err;
	struct h5w *w;
	const char *path = NULL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && (v ? 1 : (die(name, "needs a value"), 0)) && ++i)
		if (ARG("-D")) o.D = (int64_t)number(a, v);
		else if (ARG("-L")) o.L = (int64_t)number(a, v);
		else if (ARG("-H")) o.H = (int64_t)number(a, v);
		else if (ARG("-K")) o.KV = (int64_t)number(a, v);
		else if (ARG("-V")) o.V = (int64_t)number(a, v);
		else if (ARG("--mult")) snprintf(o.mult, sizeof o.mult, "%s", v);
		else if (!strcmp(a, "--qk-norm")) o.qk_norm = 1;
		else if (!strcmp(a, "--no-gains")) o.gains = 0;
		else if (!strcmp(a, "--tie")) o.tie = 1;
		else if (!strcmp(a, "--no-optim")) o.optim = 0;
		else if (!strcmp(a, "--nan")) o.nan = 1;
		else if (ARG("--rate")) o.rate = number(a, v);
		else if (ARG("--step")) o.step = (int64_t)number(a, v);
		else if (ARG("--tokens")) o.tokens = (int64_t)number(a, v);
		else if (ARG("--lr")) o.lr = number(a, v);
		else if (ARG("--batch")) o.batch = number(a, v);
		else if (ARG("--val-loss")) o.val_loss = number(a, v);
		else if (ARG("--train-loss")) o.train_loss = number(a, v);
		else if (ARG("--out-norm")) o.out_norm = number(a, v);
		else if (a[0] == '-' || path) die(a, "unknown option, or a second PATH");
		else path = a;
#undef ARG
	}
	if (!path)
		die("usage", "mksynth [options] PATH");
	if (o.tokens < 0)
		o.tokens = o.step * 1024;
	memset(&c, 0, sizeof c);
	snprintf(c.arch, sizeof c.arch, "llama");
	c.vocab_size = o.V;
	c.d_model = o.D;
	c.n_layers = o.L;
	c.n_heads = o.H;
	c.n_kv_heads = o.KV;
	c.head_dim = o.D / o.H;
	c.d_ff = 32;
	c.seq_len = 16;
	c.rope_theta = 10000;
	c.norm_eps = 1e-5;
	c.tie_embeddings = o.tie;
	c.qk_norm = o.qk_norm;
	snprintf(c.multipliers, sizeof c.multipliers, "%s", o.mult);
	c.scale_vectors = o.gains;
	rng_seed(&r, 7);
	if (h5w_create(path, "checkpoint", &w, &err) ||
	    h5w_set_i64(w, "/", "step", o.step, &err) ||
	    h5w_set_i64(w, "/", "tokens", o.tokens, &err) ||
	    h5w_write_config(w, &c, &err))
		die(path, err.msg);
	if (o.optim && (h5w_set_str(w, "/optim", "optimizer", "adamw", &err) ||
			h5w_set_f64(w, "/optim", "lr_max", o.lr, &err) ||
			h5w_set_f64(w, "/optim", "lr", o.lr / 10, &err) ||
			h5w_set_i64(w, "/optim", "batch_size", (int64_t)o.batch, &err)))
		die(path, err.msg);
	if ((!isnan(o.val_loss) && h5w_set_f64(w, "/metrics", "val_loss", o.val_loss, &err)) ||
	    (!isnan(o.train_loss) && h5w_set_f64(w, "/metrics", "train_loss", o.train_loss, &err)))
		die(path, err.msg);
	if (o.tie) {
		put_head(w, &c, "embed", o.out_norm);
	} else {
		float *e = vec(o.V * o.D);
		for (int64_t i = 0; i < o.V * o.D; i++)
			e[i] = 0.01f;
		put(w, &c, "embed", -1, o.V, o.D, e);
		free(e);
	}
	for (int l = 0; l < o.L; l++)
		put_layer(w, &c, &o, &r, l);
	if (o.gains)
		put_gain(w, &c, "final_norm", -1);
	if (!o.tie)
		put_head(w, &c, "lm_head", o.out_norm);
	if (h5w_commit(w, &err))
		die(path, err.msg);
	return 0;
}
