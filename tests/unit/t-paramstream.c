/*
 * The passes in bounded memory (lib/model/step.c's recompute and
 * layer_weights, lib/model/paramstream.c):
 *   - recomputing each layer's activations in the backward pass gives
 *     the gradients and the loss of keeping them, bit for bit (the same
 *     operations on the same inputs), over every model variant, in less
 *     memory for activations;
 *   - the passes tell layer_weights before each layer: 0 .. L-1
 *     forward, L-1 .. 0 backward;
 *   - a stream keeps the tensors outside the layers, drops the layers'
 *     whole pages after checking them (they read as zeros), gives a
 *     layer's values back bit for bit when it is needed, and at most one
 *     layer is in memory;
 *   - a forward and backward pass over the stream gives modelio_load's
 *     model's gradients bit for bit;
 *   - a file that shrinks while the passes run is a failure the stream
 *     reports, not a silent result; a model with multipliers is refused.
 */
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

/* whether layer l's whole pages read as zeros (dropped), or its values
 * equal ref's */
static int layer_is(const struct model *m, const struct model *ref, int l, int dropped)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), zeros = 0, same = 0, n = 0;

	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		if (t->info.layer != l)
			continue;
		for (size_t j = 0; j < t->numel; j++, n++) {
			const real *p = m->params + t->offset + j;
			zeros += *p == 0;
			same += !memcmp(p, ref->params + t->offset + j, sizeof *p);
		}
	}
	/* dropped: all but the two partial pages at its ends are zeros */
	return dropped ? zeros + 2 * page / sizeof(real) >= n && zeros > n / 2 : same == n;
}

static void test_stream(const char *dir)
{
	char path[256];
	struct model ref, m;
	struct param_stream *ps = NULL;
	struct sw_err err;
	int tok[B * T], tgt[B * T], rc;

	snprintf(path, sizeof path, "%s/big.h5", dir);
	if (save(path, &big, &err) || modelio_load(path, &ref, &err)) {
		ok(0, "stream: a checkpoint: %s", err.msg);
		return;
	}
	rc = param_stream_open(path, &m, &ps, &err);
	if (!ok(rc == SW_OK, "param_stream_open: %s", rc ? err.msg : "ok")) {
		model_free(&ref);
		return;
	}
	ok(!memcmp(m.params + m.tensors[0].offset, ref.params + ref.tensors[0].offset,
		   m.tensors[0].numel * sizeof(real)) &&
	   !memcmp(m.params + m.tensors[m.ntensors - 1].offset,
		   ref.params + ref.tensors[ref.ntensors - 1].offset,
		   m.tensors[m.ntensors - 1].numel * sizeof(real)),
	   "the tensors outside the layers stay, as modelio_load reads them");
	ok(layer_is(&m, &ref, 0, 1) && layer_is(&m, &ref, 1, 1) && layer_is(&m, &ref, 2, 1),
	   "after opening, every layer's whole pages are dropped");
	m.layer_weights(m.layer_weights_ctx, 1);
	ok(layer_is(&m, &ref, 1, 0) && layer_is(&m, &ref, 0, 1) && layer_is(&m, &ref, 2, 1),
	   "need: layer 1's values back, bit for bit, the others still dropped");
	m.layer_weights(m.layer_weights_ctx, 2);
	ok(layer_is(&m, &ref, 2, 0) && layer_is(&m, &ref, 1, 1),
	   "the next layer needed replaces it: one layer in memory");

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
		ok(model_acts_bytes(&big, B, T, 1) < model_acts_bytes(&big, B, T, 0) / 2,
		   "recomputing, the activations take %.0f bytes against %.0f",
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
	} else {
		ok(0, "truncate %s", path);
	}
	param_stream_close(ps);
	ok(m.layer_weights == NULL, "closed: the model is unhooked");
	model_free(&m);
	model_free(&ref);
	unlink(path);

	/* multipliers compute their effective weights from every layer at once */
	struct sw_config c = big;
	strcpy(c.multipliers, "row");
	if (!save(path, &c, &err)) {
		rc = param_stream_open(path, &m, &ps, &err);
		ok(rc == SW_EUSAGE && strstr(err.msg, "multipliers"), "multipliers refused: %s",
		   rc ? err.msg : "opened");
		if (rc == SW_OK) {
			param_stream_close(ps);
			model_free(&m);
		}
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
