/*
 * mkhvp - Hessian- and Gauss-Newton-vector products of a checkpoint on a
 * batch, for tests/e2e/t0280-hessian-torch.t to check against PyTorch:
 *
 *     mkhvp CKPT DATA BATCH_TOKENS SEQ_LEN SEED OUT.h5
 *
 * The batch is the one sw-hessian --seed SEED draws (blocksharp_setup,
 * then data_train_batch from the seed), in one pass; v is a Gaussian
 * vector over every parameter (from SEED + 1). OUT.h5 holds /tokens,
 * /targets and, per tensor, /v/NAME, /hv/NAME (H v) and /gv/NAME (G v),
 * float32, of the mean loss over the batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/runs/blocksharp.h"
#include "../../lib/formats/h5write.h"
#include "../../lib/model/modelhvp.h"
#include "../../lib/base/rng.h"

static int write_vec(struct h5w *w, const char *group, const struct model *m, const real *x,
		     struct sw_err *err)
{
	int rc = SW_OK;

	for (int i = 0; i < m->ntensors && !rc; i++)
		rc = h5w_write_tensor(w, group, &m->tensors[i].info, x + m->tensors[i].offset, 0, err);
	return rc;
}

int main(int argc, char **argv)
{
	struct blocksharp_opts o = {0};
	struct blocksharp_setup su;
	struct model rm;
	struct sw_rng r;
	struct sw_err err;
	struct h5w *w;
	real *hv = NULL, *gv = NULL;
	int *tok, *tgt, rc;

	if (argc != 7) {
		fprintf(stderr, "usage: mkhvp CKPT DATA BATCH_TOKENS SEQ_LEN SEED OUT.h5\n");
		return 64;
	}
	o.data = argv[2];
	o.batch_tokens = atoll(argv[3]);
	o.seq_len = atoi(argv[4]);
	o.seed = (uint64_t)atoll(argv[5]);
	o.micro = 0;
	struct ckpt *ck;
	if ((rc = ckpt_open(argv[1], &ck, &err)) || (rc = blocksharp_setup(ck, &o, 2, &su, &err))) {
		fprintf(stderr, "mkhvp: %s\n", err.msg);
		return rc;
	}
	tok = malloc((size_t)su.B * su.T * sizeof *tok);
	tgt = malloc((size_t)su.B * su.T * sizeof *tgt);
	hv = malloc(su.m.nparams * sizeof *hv);
	gv = malloc(su.m.nparams * sizeof *gv);
	rng_seed(&r, o.seed);
	if (!tok || !tgt || !hv || !gv || (rc = data_train_batch(&su.d, &r, su.B, su.T, tok, tgt, &err)) ||
	    (rc = model_alloc_acts(&su.m, su.B, su.T, &err)) || (rc = model_rop_build(&rm, &su.m, &err))) {
		fprintf(stderr, "mkhvp: %s\n", rc ? err.msg : "out of memory");
		return rc ? rc : 70;
	}
	rng_seed(&r, o.seed + 1);
	for (size_t k = 0; k < su.m.nparams; k++)
		rm.params[k] = (real)rng_normal(&r);
	for (int gn = 0; gn < 2; gn++) {
		model_forward(&su.m, tok, tgt, su.B, su.T);
		model_zero_grad(&rm);
		model_rop_forward(&su.m, &rm, tok, NULL);
		model_rop_backward(&su.m, &rm, tok, tgt, 1.0, gn, NULL, NULL, NULL);
		memcpy(gn ? gv : hv, rm.grads, su.m.nparams * sizeof *hv);
	}
	if ((rc = h5w_create(argv[6], "hvp", &w, &err)))
		goto out;
	if ((rc = h5w_write_i32(w, "/", "tokens", su.B, su.T, tok, &err)) ||
	    (rc = h5w_write_i32(w, "/", "targets", su.B, su.T, tgt, &err)) ||
	    (rc = write_vec(w, "/v", &su.m, rm.params, &err)) || (rc = write_vec(w, "/hv", &su.m, hv, &err)) ||
	    (rc = write_vec(w, "/gv", &su.m, gv, &err))) {
		h5w_abort(w);
		goto out;
	}
	rc = h5w_commit(w, &err);
out:
	if (rc)
		fprintf(stderr, "mkhvp: %s\n", err.msg);
	free(tok);
	free(tgt);
	free(hv);
	free(gv);
	model_free(&rm);
	blocksharp_setup_free(&su);
	ckpt_close(ck);
	return rc;
}
