/*
 * The passes in bounded memory (lib/model/step.c's recompute and
 * layer_weights, lib/model/paramstream.c):
 *   - recomputing each layer's activations in the backward pass from
 *     its products' outputs gives the gradients and the loss of keeping
 *     them all, bit for bit (the same operations on the same inputs),
 *     over every model variant, in less memory for activations;
 *   - the passes tell layer_weights before each layer: 0 .. L-1
 *     forward, L-1 .. 0 backward;
 *   - a stream keeps the tensors outside the layers, reads every layer
 *     once to check it, gives a layer's values back bit for bit when it
 *     is needed, in one buffer the layers take turns in: the views of
 *     the others are NULL, and the layers' places in m->params are never
 *     written;
 *   - a forward and backward pass over the stream gives modelio_load's
 *     model's gradients bit for bit;
 *   - a file that shrinks while the passes run is a failure the stream
 *     reports, not a silent result; a model with multipliers is refused.
 */
#include "../../lib/model/layout.h"
#include "../../lib/model/model.h"
#include "../../lib/model/modelio.h"
#include "../../lib/model/optim.h"
#include "../../lib/model/paramstream.h"
#include "../../lib/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_variants.h"
#include "tap.h"

enum { B = 2, T = 6 };

static void batch(int V, int *tok, int *tgt, int n)
{
	for (int i = 0; i < n; i++) {
		tok[i] = (i * 7 + 3) % V;
		tgt[i] = (i * 5 + 1) % V;
	}
}

/* forward and backward with recompute as asked: the gradients (a copy)
 * and the loss */
static real *grads_of(const struct sw_config *c, int recompute, double *loss, struct sw_err *err)
{
	struct model m;
	int tok[B * T], tgt[B * T];
	real *g = NULL;

	if (model_build(&m, c, err))
		return NULL;
	m.recompute = recompute;
	if (model_alloc_acts(&m, B, T, err)) {
		model_free(&m);
		return NULL;
	}
	model_init(&m, 11);
	batch((int)c->vocab_size, tok, tgt, B * T);
	model_zero_grad(&m);
	model_forward(&m, tok, tgt, B, T);
	model_backward(&m, tok, tgt, 1.0);
	*loss = m.loss;
	if ((g = malloc(m.nparams * sizeof *g)))
		memcpy(g, m.grads, m.nparams * sizeof *g);
	model_free(&m);
	return g;
}

static void recompute_variant(const char *what, struct sw_config c)
{
	struct sw_err err;
	double l0 = NAN, l1 = NAN;
	real *g0 = grads_of(&c, 0, &l0, &err), *g1 = grads_of(&c, 1, &l1, &err);
	struct model m;
	size_t n = 0;

	if (!model_build(&m, &c, &err)) {
		n = m.nparams;
		model_free(&m);
	}
	ok(g0 && g1 && n && !memcmp(g0, g1, n * sizeof *g0) && l0 == l1,
	   "%s: recomputed activations give the same gradients and loss, bit for bit", what);
	free(g0);
	free(g1);
}

/* ---- the hook's calls ------------------------------------------------ */

struct calls {
	int layer[64], n;
};

static void note(void *ctx, int layer)
{
	struct calls *k = ctx;

	if (k->n < 64)
		k->layer[k->n++] = layer;
}

static void test_hook_order(void)
{
	struct sw_config c = variant_base;
	struct model m;
	struct calls k = {0};
	struct sw_err err;
	int tok[B * T], tgt[B * T], L, right = 1;

	c.n_layers = 3;
	L = (int)c.n_layers;
	if (model_build(&m, &c, &err) || model_alloc_acts(&m, B, T, &err)) {
		ok(0, "hook: build: %s", err.msg);
		return;
	}
	model_init(&m, 2);
	m.layer_weights = note;
	m.layer_weights_ctx = &k;
	batch((int)c.vocab_size, tok, tgt, B * T);
	model_forward(&m, tok, tgt, B, T);
	model_backward(&m, tok, tgt, 1.0);
	right = k.n == 2 * L;
	for (int i = 0; right && i < L; i++)
		right = k.layer[i] == i && k.layer[L + i] == L - 1 - i;
	ok(right, "layer_weights told of layers 0..%d forward, then %d..0 backward (%d calls)",
	   L - 1, L - 1, k.n);
	model_free(&m);
}

/* ---- the stream ------------------------------------------------------ */

/* a model whose layers span many pages, saved as an HDF5 checkpoint */
static const struct sw_config big = {
	.arch = "llama", .vocab_size = 50, .d_model = 64, .n_layers = 3, .n_heads = 4,
	.n_kv_heads = 2, .head_dim = 16, .d_ff = 192, .seq_len = 8, .rope_theta = 10000,
	.norm_eps = 1e-5, .tie_embeddings = 0, .multipliers = "none", .scale_vectors = 1,
};

static int save(const char *path, const struct sw_config *c, struct sw_err *err)
{
	struct model m;
	struct optim o;
	struct optim_config oc;
	struct run_state rs = {0};
	struct modelio_extras x = {0};
	int rc;

	if ((rc = model_build(&m, c, err)))
		return rc;
	model_init(&m, 4);
	optim_defaults(&oc);
	if ((rc = optim_init(&o, &oc, &m, err))) {
		model_free(&m);
		return rc;
	}
	rs.batch = B;
	rs.grad_accum = 1;
	rs.seq_len = T;
	rs.train_loss = rs.val_loss = NAN;
	rc = modelio_save(path, &m, &o, &rs, &x, err);
	optim_free(&o);
	model_free(&m);
	return rc;
}

/* whether layer l is in memory with ref's values (its views, every one
 * of them, read them bit for bit), or not (every view NULL: a pass that
 * reads it anyway fails loudly, not on zeros); either way its place in
 * m->params was never written (reads as zeros) */
static int layer_is(const struct model *m, const struct model *ref, int l, int loaded)
{
	const struct layer_ptrs *w = &m->p.layer[l], *r = &ref->p.layer[l];
	size_t C = (size_t)m->c.d_model, Q = (size_t)(m->c.n_heads * m->c.head_dim),
	       K = (size_t)(m->c.n_kv_heads * m->c.head_dim), F = (size_t)m->c.d_ff, zeros = 0, n = 0;
	const real *views[] = {w->attn_norm, w->wq, w->wk, w->wv, w->wo, w->ffn_norm, w->wgate, w->wup,
			       w->wdown};
	const real *refs[] = {r->attn_norm, r->wq, r->wk, r->wv, r->wo, r->ffn_norm, r->wgate, r->wup,
			      r->wdown};
	size_t len[] = {C, Q * C, K * C, K * C, C * Q, C, F * C, F * C, C * F};
	int same = 1, none = 1;

	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		if (t->info.layer != l)
			continue;
		for (size_t j = 0; j < t->numel; j++, n++)
			zeros += m->params[t->offset + j] == 0;
	}
	for (size_t k = 0; k < sizeof views / sizeof *views; k++) {
		none &= views[k] == NULL;
		same &= views[k] && !memcmp(views[k], refs[k], len[k] * sizeof(real));
	}
	return zeros == n && (loaded ? same : none);
}

static void test_stream(const char *dir)
{
	char path[256];
	struct model ref, m;
	struct param_stream *ps = NULL;
	struct ckpt *ck = NULL;
	struct sw_err err;
	int tok[B * T], tgt[B * T], rc;

	snprintf(path, sizeof path, "%s/big.h5", dir);
	if (save(path, &big, &err) || modelio_load(path, &ref, &err)) {
		ok(0, "stream: a checkpoint: %s", err.msg);
		return;
	}
	if ((rc = ckpt_open(path, &ck, &err)) == SW_OK)
		rc = param_stream_open(ck, &m, &ps, &err);
	if (!ok(rc == SW_OK, "param_stream_open: %s", rc ? err.msg : "ok")) {
		ckpt_close(ck);
		model_free(&ref);
		return;
	}
	ok(!memcmp(m.params + m.tensors[0].offset, ref.params + ref.tensors[0].offset,
		   m.tensors[0].numel * sizeof(real)) &&
	   !memcmp(m.params + m.tensors[m.ntensors - 1].offset,
		   ref.params + ref.tensors[ref.ntensors - 1].offset,
		   m.tensors[m.ntensors - 1].numel * sizeof(real)),
	   "the tensors outside the layers stay, as modelio_load reads them");
	ok(layer_is(&m, &ref, 0, 0) && layer_is(&m, &ref, 1, 0) && layer_is(&m, &ref, 2, 1),
	   "after opening (every layer read and checked), the last layer read alone in memory");
	m.layer_weights(m.layer_weights_ctx, 1);
	const real *slot = m.p.layer[1].wq;
	ok(layer_is(&m, &ref, 1, 1) && layer_is(&m, &ref, 0, 0) && layer_is(&m, &ref, 2, 0),
	   "need: layer 1's values back, bit for bit, the others not in memory");
	m.layer_weights(m.layer_weights_ctx, 2);
	ok(layer_is(&m, &ref, 2, 1) && layer_is(&m, &ref, 1, 0) && m.p.layer[2].wq == slot,
	   "the next layer needed replaces it, in the same memory: one layer at a time");

	/* the whole pass over the stream, recomputing, against the loaded model */
	batch((int)big.vocab_size, tok, tgt, B * T);
	m.recompute = 1;
	if (!model_alloc_acts(&m, B, T, &err) && !model_alloc_acts(&ref, B, T, &err)) {
		model_zero_grad(&m);
		model_forward(&m, tok, tgt, B, T);
		model_backward(&m, tok, tgt, 1.0);
		model_zero_grad(&ref);
		model_forward(&ref, tok, tgt, B, T);
		model_backward(&ref, tok, tgt, 1.0);
		ok(param_stream_status(ps, &err) == SW_OK &&
		   !memcmp(m.grads, ref.grads, m.nparams * sizeof(real)) && m.loss == ref.loss,
		   "a pass over the stream gives the loaded model's gradients and loss, bit for bit");
		/* what the backward reads of layer 2 without running a product
		 * is its own; what it recomputes is layer 0's buffer */
		const struct layer_acts *a0 = &m.acts[0], *a2 = &m.acts[2];
		ok(a2->x_in != a0->x_in && a2->x_mid != a0->x_mid && a2->q_lin != a0->q_lin &&
		   a2->k_lin != a0->k_lin && a2->v != a0->v && a2->gate != a0->gate &&
		   a2->up != a0->up && a2->n1 == a0->n1 && a2->q == a0->q && a2->att == a0->att &&
		   a2->att_out == a0->att_out && a2->n2 == a0->n2 && a2->h == a0->h &&
		   model_acts_bytes(&big, B, T, 1) < model_acts_bytes(&big, B, T, 0),
		   "recomputing, each layer keeps its input, x_mid and products' outputs, and "
		   "shares the rest: %.0f bytes of activations against %.0f",
		   model_acts_bytes(&big, B, T, 1), model_acts_bytes(&big, B, T, 0));
	} else {
		ok(0, "activations: %s", err.msg);
	}

	/* the file shrinks between passes: the next read of a layer fails, and
	 * says so */
	if (truncate(path, 4096) == 0) {
		m.layer_weights(m.layer_weights_ctx, 1);
		rc = param_stream_status(ps, &err);
		ok(rc != SW_OK && err.msg[0], "a file that shrank meanwhile: status %d (%s)", rc,
		   rc ? err.msg : "none");
		/* the passes after it run to their end (on wrong values, which
		 * the status says to discard), not into a NULL view */
		model_forward(&m, tok, tgt, B, T);
		model_backward(&m, tok, tgt, 1.0);
		ok(param_stream_status(ps, NULL) == rc && m.p.layer[0].wq != NULL,
		   "a pass after the failure runs to its end; the status stays %d", rc);
	} else {
		ok(0, "truncate %s", path);
	}
	param_stream_close(ps);
	ckpt_close(ck);
	ck = NULL;
	ok(m.layer_weights == NULL && m.p.layer[1].wq == m.params + m.tensors[model_find(&m, "q", 1)].offset,
	   "closed: the model is unhooked, its views in its own params again");
	model_free(&m);
	model_free(&ref);
	unlink(path);

	/* multipliers compute their effective weights from every layer at once */
	struct sw_config c = big;
	strcpy(c.multipliers, "row");
	if (!save(path, &c, &err)) {
		if ((rc = ckpt_open(path, &ck, &err)) == SW_OK)
			rc = param_stream_open(ck, &m, &ps, &err);
		ok(rc == SW_EUSAGE && strstr(err.msg, "multipliers"), "multipliers refused: %s",
		   rc ? err.msg : "opened");
		if (rc == SW_OK) {
			param_stream_close(ps);
			model_free(&m);
		}
		ckpt_close(ck);
	} else {
		ok(0, "save with multipliers: %s", err.msg);
	}
	unlink(path);
}

int main(void)
{
	char tmpl[] = "/tmp/t-paramstream.XXXXXX";
	char *dir;

	for_each_model_variant(recompute_variant);
	for_each_reparam_variant(recompute_variant);
	test_hook_order();
	dir = mkdtemp(tmpl);
	if (ok(dir != NULL, "a scratch directory")) {
		test_stream(dir);
		rmdir(dir);
	}
	return tap_done();
}
