/* Unit tests of lib/optim.c: schedules, per-tensor hparams, Newton-Schulz,
 * clipping's exclusion of multipliers; values computed by hand. */
#include <stdlib.h>
#include <string.h>

#include "../../lib/linalg.h"
#include "../../lib/optim.h"
#include "../../lib/rng.h"
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
	return tap_done();
}
