/*
 * The pieces of data parallelism that one process can check (lib/model/dp.c,
 * lib/base/comm.c, model_backward's hook, optim_shard); the exchange itself
 * is tests/cli/t0066-sw-train-mpi.t's, under mpirun.
 *   - model_backward tells grads_ready each layer, from the output end,
 *     once: L, L-1, ..., 0, -1; with multipliers all at the end;
 *   - when told, the gradients of that layer's bucket are final: equal,
 *     bit for bit, to those at the end of the pass;
 *   - the buckets tile the flat block;
 *   - dp_slice splits B rows into contiguous parts that make up the
 *     batch, sizes differing by at most one;
 *   - the ZeRO-1 shards are whole tensors tiling the block, and an
 *     optimizer sharded in two, each shard's step taken, gives the
 *     unsharded step bit for bit (AdamW, Muon, Scion);
 *   - comm without MPI: one rank, agree passes a status through, a
 *     process a launcher started as one of several is refused.
 */
#include "../../lib/base/comm.h"
#include "../../lib/model/dp.h"
#include "../../lib/model/model.h"
#include "../../lib/model/optim.h"

#include <stdlib.h>
#include <string.h>

#include "tap.h"

struct seen {
	struct dp *d;
	int order[64], n;
	real *snap;             /* the bucket's gradients when told */
	int final_ok;           /* filled after the pass */
};

static void record(void *ctx, int layer)
{
	struct seen *s = ctx;
	int b = layer + 1;

	if (s->n < 64)
		s->order[s->n++] = layer;
	memcpy(s->snap + s->d->lo[b], s->d->m->grads + s->d->lo[b], (s->d->hi[b] - s->d->lo[b]) * sizeof(real));
}

static void hook_variant(const char *what, struct sw_config c)
{
	enum { B = 3, T = 6 };
	int tok[B * T], tgt[B * T], L = (int)c.n_layers, in_order = 1;
	struct model m;
	struct dp d;
	struct seen s = {0};
	struct sw_err err;
	size_t covered = 0;

	if (model_build(&m, &c, &err) || model_alloc_acts(&m, B, T, &err) || dp_open(&d, NULL, &m, 0, &err)) {
		ok(0, "%s: build: %s", what, err.msg);
		return;
	}
	model_init(&m, 5);
	for (int i = 0; i < B * T; i++) {
		tok[i] = (i * 7 + 3) % (int)c.vocab_size;
		tgt[i] = (i * 5 + 1) % (int)c.vocab_size;
	}
	s.d = &d;
	s.snap = calloc(m.nparams, sizeof *s.snap);
	m.grads_ready = record;
	m.grads_ready_ctx = &s;
	model_zero_grad(&m);
	model_forward(&m, tok, tgt, B, T);
	model_backward(&m, tok, tgt, 1.0);
	for (int k = 0; k < s.n; k++)
		in_order &= s.order[k] == L - k;
	ok(s.n == L + 2 && in_order, "%s: told %d times, layer %d down to -1", what, s.n, L);
	ok(!memcmp(s.snap, m.grads, m.nparams * sizeof(real)),
	   "%s: each layer's gradients, when told, are the final ones", what);
	for (int b = 0; b < d.nbuckets; b++)
		covered += d.hi[b] - d.lo[b];
	ok(covered == m.nparams, "%s: the %d buckets tile the %zu parameters", what, d.nbuckets, m.nparams);
	free(s.snap);
	dp_close(&d);
	model_free(&m);
}

/* One AdamW/Muon/Scion step unsharded, and sharded in two (each shard
 * stepped, then the parameters put together): the same bits. */
static void shard_variant(const char *what, enum opt_kind kind, struct sw_config c)
{
	struct model m1, m2;
	struct optim o1, o2a, o2b;
	struct optim_config oc;
	struct sw_err err;
	int split = 0, same;

	optim_defaults(&oc);
	oc.kind = kind;
	if (model_build(&m1, &c, &err) || model_build(&m2, &c, &err)) {
		ok(0, "%s: build: %s", what, err.msg);
		return;
	}
	model_init(&m1, 9);
	model_init(&m2, 9);
	for (size_t k = 0; k < m1.nparams; k++)
		m1.grads[k] = m2.grads[k] = (real)(0.01 * ((double)(k % 97) - 48));
	optim_init(&o1, &oc, &m1, &err);
	optim_init(&o2a, &oc, &m2, &err);
	optim_init(&o2b, &oc, &m2, &err);
	while (split < m2.ntensors && m2.tensors[split].offset < m2.nparams / 2)
		split++;
	if (optim_shard(&o2a, &m2, 0, split, &err) || optim_shard(&o2b, &m2, split, m2.ntensors - split, &err)) {
		ok(0, "%s: shard: %s", what, err.msg);
		return;
	}
	for (int step = 0; step < 2; step++) {
		real *keep = malloc(m2.nparams * sizeof *keep);
		optim_step(&o1, &m1, step, 0.5);
		/* shard a updates its tensors, b its own, from the same parameters */
		memcpy(keep, m2.params, m2.nparams * sizeof *keep);
		optim_step(&o2a, &m2, step, 0.5);
		real *after_a = malloc(m2.nparams * sizeof *after_a);
		memcpy(after_a, m2.params, m2.nparams * sizeof *after_a);
		memcpy(m2.params, keep, m2.nparams * sizeof *keep);
		optim_step(&o2b, &m2, step, 0.5);
		/* the gather: a's part from a */
		size_t cut = split < m2.ntensors ? m2.tensors[split].offset : m2.nparams;
		memcpy(m2.params, after_a, cut * sizeof *after_a);
		free(keep);
		free(after_a);
	}
	same = !memcmp(m1.params, m2.params, m1.nparams * sizeof(real));
	ok(same && split > 0 && split < m2.ntensors,
	   "%s: sharded in two at tensor %d, two steps: the unsharded parameters, bit for bit", what, split);
	optim_free(&o1);
	optim_free(&o2a);
	optim_free(&o2b);
	model_free(&m1);
	model_free(&m2);
}

int main(void)
{
	const struct sw_config base = {
		.arch = "llama", .vocab_size = 13, .d_model = 8, .n_layers = 3, .n_heads = 2,
		.n_kv_heads = 1, .head_dim = 4, .d_ff = 12, .seq_len = 8, .rope_theta = 10000,
		.norm_eps = 1e-5, .tie_embeddings = 0, .multipliers = "none", .scale_vectors = 1,
	};
	struct sw_config c;
	struct sw_err err;
	struct comm *cm = (struct comm *)&err;
	int who, ok_split = 1;

	hook_variant("untied head", base);
	c = base; c.tie_embeddings = 1;
	hook_variant("tied head", c);
	c = base; strcpy(c.multipliers, "row"); c.qk_norm = 1;
	hook_variant("row multipliers, QK-norm (told at the end)", c);
	c = base; c.norm_everywhere = 1; c.scale_vectors = 0;
	hook_variant("norm-everywhere, no gains", c);

	shard_variant("adamw", OPT_ADAMW, base);
	shard_variant("muon", OPT_MUON, base);
	shard_variant("scion", OPT_SCION, base);

	/* dp_slice over 1..7 ranks of 1..20 rows */
	for (int size = 1; size <= 7; size++)
		for (int rows = size; rows <= 20; rows++) {
			struct dp d = {.rank = 0, .size = size};
			int next = 0;
			for (int r = 0; r < size; r++) {
				int r0, r1;
				d.rank = r;
				dp_slice(&d, rows, &r0, &r1);
				ok_split &= r0 == next && r1 - r0 >= rows / size && r1 - r0 <= rows / size + 1;
				next = r1;
			}
			ok_split &= next == rows;
		}
	ok(ok_split, "dp_slice: contiguous parts that make up the batch, sizes within one");

	ok(comm_init(NULL, NULL, &cm, &err) == SW_OK && cm == NULL && comm_rank(cm) == 0 && comm_size(cm) == 1,
	   "comm: started alone, one process of rank 0");
	ok(comm_agree(NULL, SW_EIO, &who) == SW_EIO && who == 0 && comm_agree(NULL, 0, &who) == 0 && who == -1,
	   "comm_agree, one process: the status itself, reported by rank 0");
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_RANK", "1", 1);
	ok(comm_init(NULL, NULL, &cm, &err) == SW_EUSAGE && strstr(err.msg, "built without MPI"),
	   "comm without MPI, started as one of 2 processes: refused (%s)", err.msg);
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("OMPI_COMM_WORLD_RANK");
	return tap_done();
}
