/* modelio.c - models and training state in checkpoints (see modelio.h). */
#include "modelio.h"
#include "layout.h"
#include "../formats/ckpt.h"
#include "../formats/h5write.h"
#include "../analysis/scalevec.h"
#include "../base/dtype.h"
#include "../base/family.h"
#include "../base/par.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* /optim: the optimizer's configuration, enough to rebuild it on resume. */
static int write_optim(struct h5w *w, const struct optim_config *oc, const struct run_state *rs,
		       struct sw_err *err)
{
	char key[64];
	int rc;

	if ((rc = h5w_set_str(w, "/optim", "optimizer", optim_kind_name(oc->kind), err)) ||
	    (rc = h5w_set_f64(w, "/optim", "lr", optim_lr_at(oc, optim_last_update(rs->step)), err)) ||
	    (rc = h5w_set_f64(w, "/optim", "lr_max", oc->lr, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "lr_min", isnan(oc->lr_min) ? -1 : oc->lr_min, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "wd", oc->wd, err)) ||
	    (rc = h5w_set_str(w, "/optim", "wd_mode", sw_wd_mode_name(oc->wd_mode), err)) ||
	    (rc = h5w_set_str(w, "/optim", "norm_wd", optim_norm_wd_name(oc->norm_wd), err)) ||
	    (rc = h5w_set_i64(w, "/optim", "width_base", oc->width_base, err)) ||
	    (rc = h5w_set_str(w, "/optim", "wd_scaling", optim_wd_scaling_name(oc->wd_scaling), err)) ||
	    (rc = h5w_set_f64(w, "/optim", "beta1", oc->beta1, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "beta2", oc->beta2, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "eps", oc->eps, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "momentum", oc->momentum, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "mult_lr_ratio", oc->mult_lr_ratio, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "mult_wd", oc->mult_wd, err)) ||
	    (rc = h5w_set_i64(w, "/optim", "blockwise_lr", oc->blockwise, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "grad_clip", oc->grad_clip, err)) ||
	    (rc = h5w_set_str(w, "/optim", "schedule", optim_sched_name(oc->sched), err)) ||
	    (rc = h5w_set_i64(w, "/optim", "warmup", oc->warmup, err)) ||
	    (rc = h5w_set_i64(w, "/optim", "steps", oc->steps, err)) ||
	    (rc = h5w_set_f64(w, "/optim", "decay_frac", oc->decay_frac, err)) ||
	    (rc = h5w_set_i64(w, "/optim", "batch_size", (int64_t)rs->batch * rs->grad_accum, err)) ||
	    (rc = h5w_set_i64(w, "/optim", "micro_batch", rs->batch, err)) ||
	    (rc = h5w_set_i64(w, "/optim", "grad_accum", rs->grad_accum, err)) ||
	    (rc = h5w_set_i64(w, "/optim", "seq_len", rs->seq_len, err)) ||
	    (rc = h5w_set_i64(w, "/optim", "seed", (int64_t)rs->seed, err)))
		return rc;
	for (int b = 0; b < SW_BLOCK_COUNT; b++) {
		snprintf(key, sizeof key, "block_ratio_%s", sw_block_name((enum sw_block)b));
		if ((rc = h5w_set_f64(w, "/optim", key, oc->block_ratio[b], err)))
			return rc;
	}
	for (int g = 1; g < SW_GROUP_COUNT; g++) {
		snprintf(key, sizeof key, "group_ratio_%s", sw_group_name((enum sw_group)g));
		if ((rc = h5w_set_f64(w, "/optim", key, oc->group_ratio[g], err)))
			return rc;
	}
	return SW_OK;
}

int modelio_save(const char *path, const struct model *m, const struct optim *o,
		 const struct run_state *rs, const struct modelio_extras *x,
		 struct sw_err *err)
{
	int64_t last = optim_last_update(rs->step);     /* the update that made it */
	struct h5w *w;
	int rc;

	if ((rc = h5w_create(path, "checkpoint", &w, err)))
		return rc;
	if ((rc = h5w_set_i64(w, "/", "step", rs->step, err)) ||
	    (rc = h5w_set_i64(w, "/", "tokens", rs->tokens, err)) ||
	    (rc = h5w_write_config(w, &m->c, err)))
		goto fail;
	if (!isnan(rs->train_loss) && (rc = h5w_set_f64(w, "/metrics", "train_loss", rs->train_loss, err)))
		goto fail;
	if (!isnan(rs->val_loss) && (rc = h5w_set_f64(w, "/metrics", "val_loss", rs->val_loss, err)))
		goto fail;
	/* the load-balancing loss of the step's last micro-batch, unweighted */
	if (m->c.n_experts && !isnan(rs->aux_loss) &&
	    (rc = h5w_set_f64(w, "/metrics", "aux_loss", rs->aux_loss, err)))
		goto fail;
	if (o && (rc = write_optim(w, &o->cfg, rs, err)))
		goto fail;
	for (int i = 0; i < m->ntensors; i++) {
		struct sw_tensor_info t = m->tensors[i].info;
		const real *p = m->params + m->tensors[i].offset;
		if (o)
			optim_tensor_hparams(&o->cfg, &t, last, &t.lr, &t.wd, &t.wd_mode);
		if ((rc = h5w_write_tensor(w, "/params", &t, p, 1, err)))
			goto fail;
		if (scalevec_is_scale_vector(&t)) {
			/* the scale-vectors paper's classification beside norm_type */
			char path[SW_NAME_MAX + 16];
			snprintf(path, sizeof path, "/params/%s", t.name);
			if ((rc = h5w_obj_str(w, path, "branch", scalevec_branch(t.role), err)) ||
			    (rc = h5w_obj_str(w, path, "placement", scalevec_placement(&t), err)) ||
			    (rc = h5w_obj_str(w, path, "param", scalevec_param(&t, m->tensors[i].derived), err)))
				goto fail;
		}
		if (x && x->save_grads &&
		    (rc = h5w_write_tensor(w, "/grads", &t, m->grads + m->tensors[i].offset, 0, err)))
			goto fail;
		if (x && x->fisher) {
			char path[SW_NAME_MAX + 16];
			snprintf(path, sizeof path, "/fisher/%s", t.name);
			if ((rc = h5w_write_tensor(w, "/fisher", &t, x->fisher + m->tensors[i].offset, 0, err)) ||
			    (rc = h5w_obj_str(w, path, "estimator", "gnb", err)) ||
			    (rc = h5w_obj_i64(w, path, "batch_tokens", x->fisher_batch_tokens, err)) ||
			    (rc = h5w_obj_i64(w, path, "draws", x->fisher_draws, err)) ||
			    (rc = h5w_obj_i64(w, path, "seed", (int64_t)x->fisher_seed, err)))
				goto fail;
		}
	}
	if (x && x->save_grads && x->tokens &&
	    ((rc = h5w_write_i32(w, "/batch", "tokens", x->rows, x->T, x->tokens, err)) ||
	     (rc = h5w_write_i32(w, "/batch", "targets", x->rows, x->T, x->targets, err))))
		goto fail;
	if (o) {
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_tensor *mt = &m->tensors[i];
			/* float moments, written through the float32 path; Lion
			 * has no v, Adam-mini one per block (a vector of
			 * optim_block_count, its block_numel beside it) */
			struct sw_tensor_info vt = mt->info;
			int mini = o->cfg.kind == OPT_ADAM_MINI;
			if (mini) {
				vt.rank = 1;
				vt.shape[0] = vt.numel = optim_block_count(&mt->info);
			}
			if ((rc = h5w_write_tensor(w, "/optim_state/m", &mt->info, o->m + mt->offset, 0, err)) ||
			    (optim_has_v(o->cfg.kind) &&
			     (rc = h5w_write_tensor(w, "/optim_state/v", &vt, o->v + o->voff[i], 0, err))))
				goto fail;
			if (mini) {
				char path[SW_NAME_MAX + 16];
				snprintf(path, sizeof path, "/optim_state/v/%s", vt.name);
				if ((rc = h5w_obj_i64(w, path, "block_numel", optim_block_numel(&mt->info), err)))
					goto fail;
			}
		}
		if ((rc = h5w_set_i64(w, "/optim_state", "t", o->t, err)) ||
		    (rc = h5w_set_i64(w, "/optim_state", "rng0", (int64_t)rs->rng.s[0], err)) ||
		    (rc = h5w_set_i64(w, "/optim_state", "rng1", (int64_t)rs->rng.s[1], err)) ||
		    (rc = h5w_set_i64(w, "/optim_state", "rng2", (int64_t)rs->rng.s[2], err)) ||
		    (rc = h5w_set_i64(w, "/optim_state", "rng3", (int64_t)rs->rng.s[3], err)))
			goto fail;
		for (int i = 0; x && i < x->nrun; i++) {
			const struct modelio_attr *a = &x->run[i];
			rc = a->text ? h5w_set_str(w, "/optim_state", a->name, a->text, err)
			     : a->integer ? h5w_set_i64(w, "/optim_state", a->name, (int64_t)a->value, err)
			     : h5w_set_f64(w, "/optim_state", a->name, a->value, err);
			if (rc)
				goto fail;
		}
	}
	return h5w_commit(w, err);
fail:
	h5w_abort(w);
	return rc;
}

int modelio_build(struct ckpt *ck, struct model *m, struct sw_err *err)
{
	int rc;

	if ((rc = model_build(m, &ckpt_meta(ck)->config, err)))
		return rc;
	/* every checkpoint tensor must have its place (ckpt.c refused two
	 * of one role and layer), and every model tensor must be found with
	 * its size */
	for (size_t i = 0; i < ckpt_count(ck); i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		if (model_find(m, t->role, t->layer) < 0) {
			rc = sw_fail(err, SW_EDATA, "%s (role %s) has no place in the model", t->name, t->role);
			goto out;
		}
	}
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		long k = ckpt_find_expert(ck, mt->info.role, mt->info.layer, mt->info.expert);
		if (k < 0) {
			rc = sw_fail(err, SW_EDATA, "missing tensor %s", mt->info.name);
			goto out;
		}
		if ((int64_t)mt->numel != ckpt_info(ck, (size_t)k)->numel) {
			rc = sw_fail(err, SW_EDATA, "%s: %lld values, the model needs %zu",
				     mt->info.name, (long long)ckpt_info(ck, (size_t)k)->numel, mt->numel);
			goto out;
		}
	}
out:
	if (rc)
		model_free(m);
	return rc;
}

int modelio_load_tensor(struct ckpt *ck, const struct model *m, int i, real *dst,
			struct sw_err *err)
{
	const struct model_tensor *mt = &m->tensors[i];
	long k = ckpt_find_expert(ck, mt->info.role, mt->info.layer, mt->info.expert);
	struct ckpt_view v;
	int64_t n = (int64_t)mt->numel, bad = 0;
	/* the gain the model applies, where the file holds w of (1 + w)
	 * (Gemma's norms as transformers stores them: family.c) */
	real offset = (real)family_gain_offset(&ckpt_meta(ck)->config, ckpt_meta(ck)->source,
					       ckpt_info(ck, (size_t)k));
	int rc;

	/* BF16 and F16 widened here, on every thread, from the file's bytes
	 * in place (paramstream.c reads a layer on every pass) */
	memset(&v, 0, sizeof v);
	if ((rc = ckpt_load_raw(ck, (size_t)k, &v, err)))
		return rc;
	/* a forward pass through a NaN gives NaN everywhere: say where */
	if (v.raw_dtype == SW_DTYPE_BF16) {
		const uint16_t *src = v.raw;
#pragma omp parallel for simd schedule(static) reduction(+ : bad) PAR_IF(n)
		for (int64_t j = 0; j < n; j++) {
			dst[j] = (real)sw_bf16_to_f32(src[j]);
			bad += !isfinite(dst[j]);
		}
	} else if (v.raw_dtype == SW_DTYPE_F16) {
		const uint16_t *src = v.raw;
#pragma omp parallel for schedule(static) reduction(+ : bad) PAR_IF(n)
		for (int64_t j = 0; j < n; j++) {
			dst[j] = (real)sw_f16_to_f32(src[j]);
			bad += !isfinite(dst[j]);
		}
	} else {
#pragma omp parallel for simd schedule(static) reduction(+ : bad) PAR_IF(n)
		for (int64_t j = 0; j < n; j++) {
			dst[j] = (real)v.data[j];
			bad += !isfinite(v.data[j]);
		}
	}
	/* a file that shrank meanwhile: the values are not the file's */
	rc = ckptsrc_check(&v, err);
	ckpt_release(ck, &v);
	if (rc) {
		sw_err_prefix(err, "%s", ckpt_info(ck, (size_t)k)->name);
		return rc;
	}
	if (bad)
		return sw_fail(err, SW_EDATA, "%s: %lld of %zu values are NaN or Inf",
			       ckpt_info(ck, (size_t)k)->name, (long long)bad, mt->numel);
	for (int64_t j = 0; offset != 0 && j < n; j++)
		dst[j] += offset;
	return SW_OK;
}

int modelio_read(struct ckpt *ck, struct model *m, struct sw_err *err)
{
	int rc;

	if ((rc = modelio_build(ck, m, err)))
		return rc;
	for (int i = 0; i < m->ntensors && !rc; i++)
		rc = modelio_load_tensor(ck, m, i, m->params + m->tensors[i].offset, err);
	if (rc)
		goto out;
	/* the reparameterized gains from their directions and magnitudes: a
	 * direction of zeros (OR divides by its RMS) or a magnitude ER
	 * overflows gives no gain */
	model_update_gains(m);
	for (int i = 0; i < m->nreparams; i++) {
		const struct model_tensor *g = &m->tensors[m->reparams[i].gain];
		for (size_t j = 0; j < g->numel; j++)
			if (!isfinite(m->params[g->offset + j])) {
				rc = sw_fail(err, SW_EDATA, "%s: its direction and magnitude give a gain "
					     "that is not finite", g->info.name);
				goto out;
			}
	}
out:
	if (rc && m->tensors)
		model_free(m);
	return rc;
}

int modelio_load(const char *path, struct model *m, struct sw_err *err)
{
	struct ckpt *ck;
	int rc;

	if ((rc = ckpt_open(path, &ck, err)))
		return rc;
	rc = modelio_read(ck, m, err);
	ckpt_close(ck);
	return rc;
}

/* The optimizer's configuration and the run's shape from /optim. */
static int read_optim_config(struct ckpt *ck, struct optim_config *oc, struct run_state *rs,
			     struct sw_err *err)
{
	char s[32], key[64];
	double v;
	int64_t iv;
	int rc, present;

	if ((rc = ckpt_attr_string(ck, "/optim", "optimizer", s, sizeof s, &present, err)))
		return rc;
	if (!present)
		return sw_fail(err, SW_EDATA, "no /optim group: not a checkpoint of sw-train");
	optim_defaults(oc);
#define STR(name, dst, parse)                                                            \
	do {                                                                             \
		if ((rc = ckpt_attr_string(ck, "/optim", name, s, sizeof s, NULL, err)))  \
			return rc;                                                       \
		if (parse(s, &dst) < 0)                                                  \
			return sw_fail(err, SW_EDATA, "/optim: unknown %s '%s'", name, s);  \
	} while (0)
#define NUM(name, dst)                                                                   \
	do {                                                                             \
		if ((rc = ckpt_attr_number(ck, "/optim", name, 0, &v, NULL, err)))         \
			return rc;                                                       \
		dst = v;                                                                 \
	} while (0)
#define INT(name, dst)                                                                   \
	do {                                                                             \
		if ((rc = ckpt_attr_integer(ck, "/optim", name, &iv, NULL, err)))          \
			return rc;                                                       \
		dst = iv;                                                                \
	} while (0)
	STR("optimizer", oc->kind, optim_kind_parse);
	STR("schedule", oc->sched, optim_sched_parse);
	STR("norm_wd", oc->norm_wd, optim_norm_wd_parse);
	NUM("lr_max", oc->lr);
	NUM("lr_min", oc->lr_min);
	if (oc->lr_min < 0)
		oc->lr_min = NAN;
	NUM("wd", oc->wd);
	NUM("beta1", oc->beta1);
	NUM("beta2", oc->beta2);
	NUM("eps", oc->eps);
	NUM("momentum", oc->momentum);
	NUM("mult_lr_ratio", oc->mult_lr_ratio);
	NUM("mult_wd", oc->mult_wd);
	NUM("grad_clip", oc->grad_clip);
	NUM("decay_frac", oc->decay_frac);
	INT("blockwise_lr", oc->blockwise);
	INT("warmup", oc->warmup);
	INT("steps", oc->steps);
	INT("micro_batch", rs->batch);
	INT("grad_accum", rs->grad_accum);
	INT("seq_len", rs->seq_len);
	INT("seed", rs->seed);
	/* the width rules: absent from checkpoints older than them (off) */
	if ((rc = ckpt_attr_integer(ck, "/optim", "width_base", &iv, &present, err)))
		return rc;
	oc->width_base = present ? iv : 0;
	if ((rc = ckpt_attr_string(ck, "/optim", "wd_scaling", s, sizeof s, &present, err)))
		return rc;
	if (present && optim_wd_scaling_parse(s, &oc->wd_scaling) < 0)
		return sw_fail(err, SW_EDATA, "/optim: unknown wd_scaling '%s'", s);
	if (oc->width_base < 0)
		return sw_fail(err, SW_EDATA, "/optim: width_base %lld is negative", (long long)oc->width_base);
	if ((rc = ckpt_attr_string(ck, "/optim", "wd_mode", s, sizeof s, NULL, err)))
		return rc;
	if (sw_wd_mode_parse(s, &oc->wd_mode) < 0)
		return sw_fail(err, SW_EDATA, "/optim: unknown wd_mode '%s'", s);
	for (int b = 0; b < SW_BLOCK_COUNT; b++) {
		snprintf(key, sizeof key, "block_ratio_%s", sw_block_name((enum sw_block)b));
		NUM(key, oc->block_ratio[b]);
	}
	for (int gi = 1; gi < SW_GROUP_COUNT; gi++) {
		snprintf(key, sizeof key, "group_ratio_%s", sw_group_name((enum sw_group)gi));
		NUM(key, oc->group_ratio[gi]);
	}
#undef STR
#undef NUM
#undef INT
	return SW_OK;
}

int modelio_read_state(struct ckpt *ck, const struct model *m, struct optim *o,
		       struct run_state *rs, struct sw_err *err)
{
	struct optim_config oc;
	int64_t v;
	int rc, present;

	memset(rs, 0, sizeof *rs);
	if (ckpt_meta(ck)->format != CKPT_HDF5) {
		rc = sw_fail(err, SW_EDATA, "%s has no /optim_state: it cannot be resumed",
			     ckpt_format_name(ck));
		goto out;
	}
	rs->step = ckpt_meta(ck)->step;
	rs->tokens = ckpt_meta(ck)->tokens;
	if ((rc = read_optim_config(ck, &oc, rs, err)))
		goto out;
	if ((rc = optim_init(o, &oc, m, err)))
		goto out;
	if ((rc = ckpt_attr_integer(ck, "/optim_state", "t", &v, &present, err)))
		goto out;
	if (!present) {
		rc = sw_fail(err, SW_EDATA, "no /optim_state: this checkpoint cannot be resumed");
		goto out;
	}
	o->t = v;
	for (int i = 0; i < 4; i++) {
		char key[16];
		snprintf(key, sizeof key, "rng%d", i & 3);
		if ((rc = ckpt_attr_integer(ck, "/optim_state", key, &v, NULL, err)))
			goto out;
		rs->rng.s[i] = (uint64_t)v;
	}
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *mt = &m->tensors[i];
		long k = ckpt_find_expert(ck, mt->info.role, mt->info.layer, mt->info.expert);
		if (k < 0) {
			rc = sw_fail(err, SW_EDATA, "missing tensor %s", mt->info.name);
			goto out;
		}
		if ((rc = ckpt_load_aux(ck, "optim_state/m", (size_t)k, o->m + mt->offset, err)))
			goto out;
		if (oc.kind == OPT_ADAM_MINI) {
			/* one v per block: the blocks the checkpoint says are ours */
			int64_t bn = ckpt_aux_attr(ck, "optim_state/v", (size_t)k, "block_numel");
			if (bn != optim_block_numel(&mt->info)) {
				rc = sw_fail(err, SW_EDATA, "/optim_state/v/%s: block_numel %lld, Adam-mini's is %lld",
					     mt->info.name, (long long)bn,
					     (long long)optim_block_numel(&mt->info));
				goto out;
			}
			rc = ckpt_load_aux_n(ck, "optim_state/v", (size_t)k, optim_block_count(&mt->info),
					     o->v + o->voff[i], err);
		} else if (optim_has_v(oc.kind)) {
			rc = ckpt_load_aux(ck, "optim_state/v", (size_t)k, o->v + o->voff[i], err);
		}
		if (rc)
			goto out;
	}
	rs->train_loss = rs->val_loss = rs->aux_loss = NAN;
out:
	if (rc && o->m)
		optim_free(o);
	return rc;
}

int modelio_load_state(const char *path, const struct model *m, struct optim *o,
		       struct run_state *rs, struct sw_err *err)
{
	struct ckpt *ck;
	int rc;

	if ((rc = ckpt_open(path, &ck, err)))
		return rc;
	rc = modelio_read_state(ck, m, o, rs, err);
	ckpt_close(ck);
	return rc;
}
