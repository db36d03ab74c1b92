/* trainopts.c - sw-train's options, one table (see trainopts.h). */
#include "trainopts.h"
#include "../base/tensor.h"
#include "../model/device.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(field) offsetof(struct trainopts, field)
#define NUM(n, k, field, lo, hi) {n, TRAINOPT_VALUE, k, AT(field), lo, hi}
#define STR(n, field) {n, TRAINOPT_VALUE, TRAINOPT_STRING, AT(field), 0, 0}
#define SWITCH(n, k, field) {n, TRAINOPT_NONE, k, AT(field), 0, 0}
#define WORDS(n, a) {n, a, TRAINOPT_WORDS, 0, 0, 0}
#define P2(e) ((double)(1LL << (e)))

/* sw-train(1) describes each; the bounds are sw-train's, the one place */
const struct trainopt trainopts_table[TRAINOPT_COUNT] = {
	[TRAINOPT_DATA] = STR("data", tc.data_path),
	[TRAINOPT_DATA_FORMAT] = WORDS("data-format", TRAINOPT_VALUE),
	[TRAINOPT_VOCAB] = NUM("vocab", TRAINOPT_INT64, tc.model.vocab_size, 2, P2(20)),
	[TRAINOPT_VAL_FRACTION] = NUM("val-fraction", TRAINOPT_DOUBLE, tc.val_fraction, 0, 0.9),
	[TRAINOPT_EVAL_EVERY] = NUM("eval-every", TRAINOPT_INT64, tc.eval_every, 0, P2(40)),
	[TRAINOPT_EVAL_BATCHES] = NUM("eval-batches", TRAINOPT_INT, tc.eval_batches, 1, P2(20)),
	[TRAINOPT_D_MODEL] = NUM("d-model", TRAINOPT_INT64, tc.model.d_model, 2, P2(16)),
	[TRAINOPT_N_LAYERS] = NUM("n-layers", TRAINOPT_INT64, tc.model.n_layers, 1, 1024),
	[TRAINOPT_N_HEADS] = NUM("n-heads", TRAINOPT_INT64, tc.model.n_heads, 1, 1024),
	[TRAINOPT_N_KV_HEADS] = NUM("n-kv-heads", TRAINOPT_INT64, n_kv_heads, 1, 1024),
	[TRAINOPT_HEAD_DIM] = NUM("head-dim", TRAINOPT_INT64, head_dim, 2, 4096),
	[TRAINOPT_D_FF] = NUM("d-ff", TRAINOPT_INT64, d_ff, 1, P2(20)),
	[TRAINOPT_SEQ_LEN] = NUM("seq-len", TRAINOPT_INT64, tc.model.seq_len, 1, P2(16)),
	[TRAINOPT_ROPE_THETA] = NUM("rope-theta", TRAINOPT_DOUBLE, tc.model.rope_theta, 1, 1e12),
	[TRAINOPT_NORM_EPS] = NUM("norm-eps", TRAINOPT_DOUBLE, tc.model.norm_eps, 0, 1),
	[TRAINOPT_ARCH] = WORDS("arch", TRAINOPT_VALUE),
	[TRAINOPT_TIE] = SWITCH("tie", TRAINOPT_ON, tc.model.tie_embeddings),
	[TRAINOPT_QK_NORM] = SWITCH("qk-norm", TRAINOPT_ON, tc.model.qk_norm),
	[TRAINOPT_MULTIPLIERS] = WORDS("multipliers", TRAINOPT_VALUE),
	[TRAINOPT_NO_SCALE_VECTORS] = SWITCH("no-scale-vectors", TRAINOPT_OFF, tc.model.scale_vectors),
	[TRAINOPT_SCALE_DESIGN] = WORDS("scale-design", TRAINOPT_VALUE),
	[TRAINOPT_SCALE_REPARAM] = WORDS("scale-reparam", TRAINOPT_VALUE),
	[TRAINOPT_NORM_EVERYWHERE] = SWITCH("norm-everywhere", TRAINOPT_ON, tc.model.norm_everywhere),
	[TRAINOPT_STEPS] = NUM("steps", TRAINOPT_INT64, tc.optim.steps, 0, P2(40)),
	[TRAINOPT_BATCH] = NUM("batch", TRAINOPT_INT, tc.batch, 1, P2(16)),
	[TRAINOPT_GRAD_ACCUM] = NUM("grad-accum", TRAINOPT_INT, tc.grad_accum, 1, P2(16)),
	[TRAINOPT_SEED] = NUM("seed", TRAINOPT_UINT64, tc.seed, 0, P2(62)),
	[TRAINOPT_OPTIMIZER] = WORDS("optimizer", TRAINOPT_VALUE),
	[TRAINOPT_LR] = NUM("lr", TRAINOPT_DOUBLE, tc.optim.lr, 0, 1e3),
	[TRAINOPT_LR_MIN] = NUM("lr-min", TRAINOPT_DOUBLE, tc.optim.lr_min, 0, 1e3),
	[TRAINOPT_WARMUP] = NUM("warmup", TRAINOPT_INT64, tc.optim.warmup, 0, P2(40)),
	[TRAINOPT_SCHEDULE] = WORDS("schedule", TRAINOPT_VALUE),
	[TRAINOPT_DECAY_FRAC] = NUM("decay-frac", TRAINOPT_DOUBLE, tc.optim.decay_frac, 0, 1),
	[TRAINOPT_BETA1] = NUM("beta1", TRAINOPT_DOUBLE, tc.optim.beta1, 0, 0.999999),
	[TRAINOPT_BETA2] = NUM("beta2", TRAINOPT_DOUBLE, tc.optim.beta2, 0, 0.999999),
	[TRAINOPT_EPS] = NUM("eps", TRAINOPT_DOUBLE, tc.optim.eps, 0, 1),
	[TRAINOPT_MOMENTUM] = NUM("momentum", TRAINOPT_DOUBLE, tc.optim.momentum, 0, 0.999999),
	[TRAINOPT_WD] = NUM("wd", TRAINOPT_DOUBLE, tc.optim.wd, 0, 1e3),
	[TRAINOPT_WD_MODE] = WORDS("wd-mode", TRAINOPT_VALUE),
	[TRAINOPT_NORM_WD] = WORDS("norm-wd", TRAINOPT_VALUE),
	[TRAINOPT_WIDTH_BASE] = NUM("width-base", TRAINOPT_INT64, tc.optim.width_base, 1, P2(20)),
	[TRAINOPT_WD_SCALING] = WORDS("wd-scaling", TRAINOPT_VALUE),
	[TRAINOPT_MULT_LR] = NUM("mult-lr", TRAINOPT_DOUBLE, tc.optim.mult_lr_ratio, 0, 1e6),
	[TRAINOPT_MULT_WD] = NUM("mult-wd", TRAINOPT_DOUBLE, tc.optim.mult_wd, 0, 1e3),
	[TRAINOPT_BLOCKWISE_LR] = WORDS("blockwise-lr", TRAINOPT_OPTIONAL),
	[TRAINOPT_GROUP_LR] = WORDS("group-lr", TRAINOPT_VALUE),
	[TRAINOPT_GRAD_CLIP] = NUM("grad-clip", TRAINOPT_DOUBLE, tc.optim.grad_clip, 0, 1e12),
	[TRAINOPT_OUT] = STR("out", tc.out_dir),
	[TRAINOPT_CKPT_EVERY] = NUM("ckpt-every", TRAINOPT_INT64, tc.ckpt_every, 0, P2(40)),
	[TRAINOPT_TRACE] = STR("trace", tc.trace_path),
	[TRAINOPT_TRACE_EVERY] = NUM("trace-every", TRAINOPT_INT64, tc.trace_every, 0, P2(40)),
	[TRAINOPT_SAVE_GRADS] = SWITCH("save-grads", TRAINOPT_ON, tc.save_grads),
	[TRAINOPT_FISHER_EVERY] = NUM("fisher-every", TRAINOPT_INT64, tc.fisher_every, 0, P2(40)),
	[TRAINOPT_RESUME] = STR("resume", tc.resume),
	[TRAINOPT_FORCE] = SWITCH("force", TRAINOPT_ON, tc.force),
	[TRAINOPT_LOG] = SWITCH("log", TRAINOPT_ON, log),
	/* the tool sets the thread count (tools/common.c): the same bounds */
	[TRAINOPT_THREADS] = NUM("threads", TRAINOPT_INT, threads, 1, 1024),
	[TRAINOPT_ZERO1] = SWITCH("zero1", TRAINOPT_ON, tc.zero1),
	[TRAINOPT_DEVICE] = WORDS("device", TRAINOPT_VALUE),
	[TRAINOPT_PRECISION] = WORDS("precision", TRAINOPT_VALUE),
	[TRAINOPT_TIMING] = SWITCH("timing", TRAINOPT_ON, tc.timing),
	/* Gemma2's (0: none; the scalar 0: head_dim) */
	[TRAINOPT_ATTN_SOFTCAP] = NUM("attn-softcap", TRAINOPT_DOUBLE, tc.model.attn_softcap, 0, 1e6),
	[TRAINOPT_FINAL_SOFTCAP] = NUM("final-softcap", TRAINOPT_DOUBLE, tc.model.final_softcap, 0, 1e6),
	[TRAINOPT_QUERY_PRE_ATTN_SCALAR] = NUM("query-pre-attn-scalar", TRAINOPT_DOUBLE,
					       tc.model.query_pre_attn_scalar, 0, 1e9),
	[TRAINOPT_INIT] = STR("init", tc.init),
	/* a mixture of experts (moe.h) */
	[TRAINOPT_MOE] = WORDS("moe", TRAINOPT_VALUE),
	[TRAINOPT_MOE_FFN] = NUM("moe-ffn", TRAINOPT_INT64, moe_ffn, 1, P2(20)),
	[TRAINOPT_MOE_SHARED_FFN] = NUM("moe-shared-ffn", TRAINOPT_INT64, moe_shared_ffn, 1, P2(20)),
	[TRAINOPT_MOE_RENORM] = WORDS("moe-renorm", TRAINOPT_VALUE),
	[TRAINOPT_MOE_AUX_COEF] = NUM("moe-aux-coef", TRAINOPT_DOUBLE, tc.model.moe_aux_coef, 0, 1e3),
	[TRAINOPT_MOE_DENSE_LAYERS] = NUM("moe-dense-layers", TRAINOPT_INT64, tc.model.moe_dense_layers,
					  0, 1024),
};

/* The run's own options a checkpoint records (/optim_state's attribute
 * of each), for --resume; all fields of train_config. */
static const struct run_opt {
	int id;
	const char *attr;
} run_opts[] = {
	{TRAINOPT_CKPT_EVERY, "ckpt_every"}, {TRAINOPT_EVAL_EVERY, "eval_every"},
	{TRAINOPT_EVAL_BATCHES, "eval_batches"}, {TRAINOPT_TRACE_EVERY, "trace_every"},
	{TRAINOPT_FISHER_EVERY, "fisher_every"}, {TRAINOPT_SAVE_GRADS, "save_grads"},
	{TRAINOPT_VAL_FRACTION, "val_fraction"}, {TRAINOPT_DATA_FORMAT, "data_format"},
};
_Static_assert(sizeof run_opts / sizeof *run_opts <= TRAINOPTS_RUN_MAX, "TRAINOPTS_RUN_MAX");

/* Option id's field in tc (a number or a switch: not the words) */
static void *run_field(const struct train_config *tc, int id)
{
	return (char *)tc + (trainopts_table[id].offset - offsetof(struct trainopts, tc));
}

int trainopts_run_attrs(const struct train_config *tc, struct modelio_attr *out)
{
	int n = 0;

	for (size_t k = 0; k < sizeof run_opts / sizeof *run_opts; k++, n++) {
		const struct trainopt *t = &trainopts_table[run_opts[k].id];
		const void *f = t->kind == TRAINOPT_WORDS ? NULL : run_field(tc, run_opts[k].id);
		struct modelio_attr *a = &out[n];

		memset(a, 0, sizeof *a);
		a->name = run_opts[k].attr;
		a->integer = t->kind != TRAINOPT_DOUBLE;
		switch (t->kind) {
		case TRAINOPT_INT: case TRAINOPT_ON: a->value = *(const int *)f; break;
		case TRAINOPT_INT64: a->value = (double)*(const int64_t *)f; break;
		case TRAINOPT_DOUBLE: a->value = *(const double *)f; break;
		default: a->text = data_format_name(tc->data_format); break;    /* the one word */
		}
	}
	return n;
}

int trainopts_resume(struct train_config *tc, struct ckpt *ck, char *said, size_t len,
		     struct sw_err *err)
{
	size_t used = 0;
	int rc;

	said[0] = '\0';
	if (ckpt_meta(ck)->format != CKPT_HDF5)
		return SW_OK;
	for (size_t k = 0; k < sizeof run_opts / sizeof *run_opts; k++) {
		const struct trainopt *t = &trainopts_table[run_opts[k].id];
		const char *attr = run_opts[k].attr;
		char text[32], opt[40];
		double v = 0;
		int present = 0, changed = 0;

		if (tc->run_given & (1u << k))
			continue;
		snprintf(opt, sizeof opt, "/optim_state %s", attr);
		if (t->kind == TRAINOPT_WORDS) {
			enum data_format f;
			if ((rc = ckpt_attr_string(ck, "/optim_state", attr, text, sizeof text, &present, err)))
				return rc;
			if (present && data_format_parse(text, &f) < 0)
				return sw_fail(err, SW_EDATA, "%s: '%s' is no --%s", opt, text, t->name);
			if (present && (changed = f != tc->data_format))
				tc->data_format = f;
		} else {
			void *f = run_field(tc, run_opts[k].id);
			double lo = t->kind == TRAINOPT_ON ? 0 : t->lo, hi = t->kind == TRAINOPT_ON ? 1 : t->hi;
			if ((rc = ckpt_attr_number(ck, "/optim_state", attr, t->kind != TRAINOPT_DOUBLE, &v,
						   &present, err)))
				return rc;
			if (present && !(v >= lo && v <= hi))
				return sw_fail(err, SW_EDATA, "%s: %.17g is not in %.15g..%.15g", opt, v, lo, hi);
			if (!present)
				continue;
			if (t->kind == TRAINOPT_DOUBLE) {
				changed = *(double *)f != v;
				*(double *)f = v;
				/* the shortest text that reads back as v */
				for (int prec = 1; prec <= 17; prec++) {
					snprintf(text, sizeof text, "%.*g", prec, v);
					if (strtod(text, NULL) == v)
						break;
				}
			} else if (t->kind == TRAINOPT_INT64) {
				changed = *(int64_t *)f != (int64_t)v;
				*(int64_t *)f = (int64_t)v;
				snprintf(text, sizeof text, "%lld", (long long)v);
			} else {
				changed = *(int *)f != (int)v;
				*(int *)f = (int)v;
				snprintf(text, sizeof text, "%d", (int)v);
			}
		}
		if (!changed)
			continue;
		/* a switch is said by its name alone */
		used += (size_t)snprintf(said + used, used < len ? len - used : 0, "%s--%s%s%s",
					 used ? " " : "", t->name, t->kind == TRAINOPT_ON ? "" : " ",
					 t->kind == TRAINOPT_ON ? "" : text);
		if (used >= len)
			return sw_fail(err, SW_ESOFTWARE, "the resumed options do not fit in %zu bytes", len);
	}
	return SW_OK;
}

/* --moe E:K[:S]: E experts (2..4096), K active (1..E), S shared (0 or 1) */
static int moe_spec(const char *arg, struct sw_config *c, struct sw_err *err)
{
	long long v[3] = {0, 0, 0};
	int n = 0;
	const char *s = arg;

	while (n < 3) {
		char *end;
		errno = 0;
		if (*s < '0' || *s > '9')
			break;
		v[n++] = strtoll(s, &end, 10);
		if (errno)
			break;
		s = end;
		/* a colon only between two numbers */
		if (*s != ':' || s[1] < '0' || s[1] > '9')
			break;
		s++;
	}
	if (*s || n < 2 || v[0] < 2 || v[0] > 4096 || v[1] < 1 || v[1] > v[0] || v[2] > 1)
		return sw_fail(err, SW_EUSAGE, "--moe: '%s' is not E:K[:S] (E experts 2..4096, K "
			       "active 1..E, S shared experts 0 or 1)", arg);
	c->n_experts = v[0];
	c->n_experts_active = v[1];
	c->n_shared_experts = v[2];
	return SW_OK;
}

void trainopts_init(struct trainopts *o)
{
	memset(o, 0, sizeof *o);
	train_config_defaults(&o->tc);
}

int trainopts_find(const char *name)
{
	for (int i = 0; i < TRAINOPT_COUNT; i++)
		if (!strcmp(trainopts_table[i].name, name))
			return i;
	return -1;
}

int trainopts_int(const char *opt, const char *arg, long long lo, long long hi, long long *v,
		  struct sw_err *err)
{
	char *end;

	errno = 0;
	*v = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || *v < lo || *v > hi)
		return sw_fail(err, SW_EUSAGE, "%s: '%s' is not an integer in %lld..%lld", opt, arg, lo, hi);
	return SW_OK;
}

int trainopts_double(const char *opt, const char *arg, double lo, double hi, double *v,
		     struct sw_err *err)
{
	char *end;

	/* ERANGE: an overflow, or a value below the normal range */
	errno = 0;
	*v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(*v) || *v < lo || *v > hi)
		return sw_fail(err, SW_EUSAGE, "%s: '%s' is not a number in %g..%g", opt, arg, lo, hi);
	return SW_OK;
}

/* "emb=10,qk=8" into the block ratios */
static int block_ratios(const char *arg, double *ratio, struct sw_err *err)
{
	char buf[256], *save = NULL;
	int rc;

	if (strlen(arg) >= sizeof buf)
		return sw_fail(err, SW_EUSAGE, "--blockwise-lr: too long");
	strcpy(buf, arg);
	for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(it, '=');
		enum sw_block b;
		if (!eq)
			return sw_fail(err, SW_EUSAGE, "--blockwise-lr: '%s' is not BLOCK=RATIO", it);
		*eq = '\0';
		if (sw_block_parse(it, &b) < 0)
			return sw_fail(err, SW_EUSAGE, "--blockwise-lr: unknown block '%s'", it);
		if ((rc = trainopts_double("--blockwise-lr", eq + 1, 0, 1e6, &ratio[b], err)))
			return rc;
	}
	return SW_OK;
}

/* "1:0.125:1" into the group ratios */
static int group_ratios(const char *arg, double *ratio, struct sw_err *err)
{
	char buf[128], *a, *b;
	int rc;

	if (strlen(arg) >= sizeof buf)
		return sw_fail(err, SW_EUSAGE, "--group-lr: too long");
	strcpy(buf, arg);
	a = strchr(buf, ':');
	b = a ? strchr(a + 1, ':') : NULL;
	if (!a || !b)
		return sw_fail(err, SW_EUSAGE, "--group-lr: INPUT:HIDDEN:OUTPUT, e.g. 1:0.125:1");
	*a = *b = '\0';
	if ((rc = trainopts_double("--group-lr", buf, 0, 1e6, &ratio[SW_GROUP_INPUT], err)) ||
	    (rc = trainopts_double("--group-lr", a + 1, 0, 1e6, &ratio[SW_GROUP_HIDDEN], err)))
		return rc;
	return trainopts_double("--group-lr", b + 1, 0, 1e6, &ratio[SW_GROUP_OUTPUT], err);
}

/*
 * The families --arch builds (family.c's flags say what each step
 * computes), with what a run takes from transformers' config classes
 * (4.47.1) where sw-train's options leave it: the activation (hidden_act:
 * "" is silu), the norms' eps (Gemma's rms_norm_eps 1e-6), a tied head
 * (GPT-2 and Gemma always), GPT-2's d_ff (n_inner: 4 d_model) and no
 * RoPE, Gemma2's soft-caps (50, 30) with query_pre_attn_scalar head_dim
 * (Gemma2Config's 256 is its head_dim's). "ours": the options of the
 * Llama step only (multipliers, scale designs, ...), which Hugging Face's
 * classes of the others have no place for.
 */
static const struct train_arch {
	const char *name, *act;
	double eps;
	int tied, gpt, softcaps, ours;
} train_archs[] = {
	{"llama", "", 1e-5, 0, 0, 0, 1},
	{"qwen2", "", 1e-5, 0, 0, 0, 1},
	{"gpt2", "gelu_new", 1e-5, 1, 1, 0, 0},
	{"gemma", "gelu_pytorch_tanh", 1e-6, 1, 0, 0, 0},
	{"gemma2", "gelu_pytorch_tanh", 1e-6, 1, 0, 1, 0},
};
#define TRAIN_ARCHS "llama, qwen2, gpt2, gemma or gemma2"

static const struct train_arch *train_arch_of(const char *name)
{
	for (size_t i = 0; i < sizeof train_archs / sizeof *train_archs; i++)
		if (!strcmp(name, train_archs[i].name))
			return &train_archs[i];
	return NULL;
}

/* The options that are a word or a list of their own. */
static int set_words(struct trainopts *o, int id, const char *arg, struct sw_err *err)
{
	struct train_config *tc = &o->tc;
	struct sw_config *c = &tc->model;
	char why[64];

	switch (id) {
	case TRAINOPT_DATA_FORMAT:
		if (data_format_parse(arg, &tc->data_format) < 0)
			return sw_fail(err, SW_EUSAGE, "--data-format: auto, llmc, uint16 or bytes");
		return SW_OK;
	case TRAINOPT_ARCH:
		if (!train_arch_of(arg))
			return sw_fail(err, SW_EUSAGE, "--arch: " TRAIN_ARCHS);
		snprintf(c->arch, sizeof c->arch, "%s", arg);
		return SW_OK;
	case TRAINOPT_MULTIPLIERS:
		if (arch_multipliers_parse(arg) < 0)
			return sw_fail(err, SW_EUSAGE, "--multipliers: " ARCH_MULTIPLIERS_LIST);
		snprintf(c->multipliers, sizeof c->multipliers, "%s", arg);
		return SW_OK;
	case TRAINOPT_SCALE_DESIGN: {
		struct arch_scale_design d;
		if (arch_scale_design_parse(arg, &d, c->scale_design, sizeof c->scale_design, why))
			return sw_fail(err, SW_EUSAGE, "--scale-design: %s", why);
		/* DNP on the attention's q and k is QK-norm */
		if (d.dnp[ARCH_SV_ATTN])
			c->qk_norm = 1;
		return SW_OK;
	}
	case TRAINOPT_SCALE_REPARAM: {
		unsigned char mode[3];
		if (!*arg || arch_scale_reparam_parse(arg, mode, c->scale_reparam, sizeof c->scale_reparam, why))
			return sw_fail(err, SW_EUSAGE, "--scale-reparam: %s", *arg ? why : ARCH_SCALE_REPARAMS);
		return SW_OK;
	}
	case TRAINOPT_OPTIMIZER:
		if (optim_kind_parse(arg, &tc->optim.kind) < 0)
			return sw_fail(err, SW_EUSAGE, "--optimizer: " OPTIM_KINDS);
		return SW_OK;
	case TRAINOPT_SCHEDULE:
		if (optim_sched_parse(arg, &tc->optim.sched) < 0)
			return sw_fail(err, SW_EUSAGE, "--schedule: constant, cosine or wsd");
		return SW_OK;
	case TRAINOPT_WD_MODE:
		/* of the modes a file may record, the two a run trains with */
		if (sw_wd_mode_parse(arg, &tc->optim.wd_mode) < 0 ||
		    (tc->optim.wd_mode != SW_WD_COUPLED && tc->optim.wd_mode != SW_WD_INDEPENDENT))
			return sw_fail(err, SW_EUSAGE, "--wd-mode: coupled or independent");
		return SW_OK;
	case TRAINOPT_NORM_WD:
		if (optim_norm_wd_parse(arg, &tc->optim.norm_wd) < 0)
			return sw_fail(err, SW_EUSAGE, "--norm-wd: none, all or iwd");
		return SW_OK;
	case TRAINOPT_WD_SCALING:
		if (optim_wd_scaling_parse(arg, &tc->optim.wd_scaling) < 0)
			return sw_fail(err, SW_EUSAGE, "--wd-scaling: fixed, sqrt or linear");
		return SW_OK;
	case TRAINOPT_BLOCKWISE_LR:
		tc->optim.blockwise = 1;
		return arg ? block_ratios(arg, tc->optim.block_ratio, err) : SW_OK;
	case TRAINOPT_GROUP_LR:
		return group_ratios(arg, tc->optim.group_ratio, err);
	case TRAINOPT_DEVICE:
		if (sw_device_parse(arg, &tc->device) < 0)
			return sw_fail(err, SW_EUSAGE, "--device: cpu, cuda or emu");
		return SW_OK;
	case TRAINOPT_MOE:
		return moe_spec(arg, c, err);
	case TRAINOPT_MOE_RENORM:
		if (strcmp(arg, "yes") && strcmp(arg, "no"))
			return sw_fail(err, SW_EUSAGE, "--moe-renorm: yes (Mixtral) or no (Qwen2-MoE)");
		c->moe_renorm = !strcmp(arg, "yes");
		return SW_OK;
	case TRAINOPT_PRECISION:
		if (sw_precision_parse(arg, &tc->precision) < 0)
			return sw_fail(err, SW_EUSAGE, "--precision: fp32 or bf16");
		return SW_OK;
	default:
		return sw_fail(err, SW_ESOFTWARE, "--%s: no parser", trainopts_table[id].name);
	}
}

int trainopts_set(struct trainopts *o, int id, const char *arg, struct sw_err *err)
{
	const struct trainopt *t = &trainopts_table[id];
	char *field = (char *)o + t->offset, opt[40];
	long long i = 0;
	double d = 0;
	int rc = SW_OK;

	snprintf(opt, sizeof opt, "--%s", t->name);
	switch (t->kind) {
	case TRAINOPT_INT: case TRAINOPT_INT64: case TRAINOPT_UINT64:
		if ((rc = trainopts_int(opt, arg, (long long)t->lo, (long long)t->hi, &i, err)))
			return rc;
		if (t->kind == TRAINOPT_INT)
			*(int *)field = (int)i;
		else if (t->kind == TRAINOPT_INT64)
			*(int64_t *)field = i;
		else
			*(uint64_t *)field = (uint64_t)i;
		break;
	case TRAINOPT_DOUBLE:
		if ((rc = trainopts_double(opt, arg, t->lo, t->hi, &d, err)))
			return rc;
		*(double *)field = d;
		break;
	case TRAINOPT_STRING: *(const char **)field = arg; break;
	case TRAINOPT_ON: *(int *)field = 1; break;
	case TRAINOPT_OFF: *(int *)field = 0; break;
	case TRAINOPT_WORDS:
		if ((rc = set_words(o, id, arg, err)))
			return rc;
		break;
	}
	if (id == TRAINOPT_STEPS)
		o->tc.steps_given = 1;  /* with --resume: --steps overrides */
	for (size_t k = 0; k < sizeof run_opts / sizeof *run_opts; k++)
		if (run_opts[k].id == id)
			o->tc.run_given |= 1u << k;     /* with --resume: kept */
	o->given[id]++;
	o->value[id] = arg;
	return SW_OK;
}

/* What --arch A takes from transformers' class where no option says
 * (train_archs[]), and the options it has no place for, refused. */
static int arch_defaults(struct trainopts *o, struct sw_err *err)
{
	static const int llama_only[] = {
		TRAINOPT_QK_NORM, TRAINOPT_MULTIPLIERS, TRAINOPT_NO_SCALE_VECTORS,
		TRAINOPT_SCALE_DESIGN, TRAINOPT_SCALE_REPARAM, TRAINOPT_NORM_EVERYWHERE,
	};
	static const int softcap_only[] = {
		TRAINOPT_ATTN_SOFTCAP, TRAINOPT_FINAL_SOFTCAP, TRAINOPT_QUERY_PRE_ATTN_SCALAR,
	};
	struct sw_config *c = &o->tc.model;
	const struct train_arch *a = train_arch_of(c->arch);

	if (!a)
		return sw_fail(err, SW_ESOFTWARE, "arch '%s' is none of --arch's", c->arch);
	for (size_t i = 0; !a->ours && i < sizeof llama_only / sizeof *llama_only; i++)
		if (o->given[llama_only[i]])
			return sw_fail(err, SW_EUSAGE, "--%s is for --arch llama and qwen2, not %s",
				       trainopts_table[llama_only[i]].name, c->arch);
	for (size_t i = 0; !a->softcaps && i < sizeof softcap_only / sizeof *softcap_only; i++)
		if (o->given[softcap_only[i]])
			return sw_fail(err, SW_EUSAGE, "--%s is Gemma2's: not for --arch %s",
				       trainopts_table[softcap_only[i]].name, c->arch);
	if (a->gpt && o->given[TRAINOPT_ROPE_THETA])
		return sw_fail(err, SW_EUSAGE, "--rope-theta: --arch gpt2 has learned positions, no RoPE");
	snprintf(c->hidden_act, sizeof c->hidden_act, "%s", a->act);
	if (!o->given[TRAINOPT_NORM_EPS])
		c->norm_eps = a->eps;
	c->tie_embeddings |= a->tied;
	if (a->softcaps && !o->given[TRAINOPT_ATTN_SOFTCAP])
		c->attn_softcap = 50;
	if (a->softcaps && !o->given[TRAINOPT_FINAL_SOFTCAP])
		c->final_softcap = 30;
	return SW_OK;
}

/* A mixture of experts' sizes and defaults (--moe's options without
 * --moe are refused): each expert d_ff / K wide (the active parameters a
 * dense layer's), the shared one d_ff wide (the scale-vectors paper's
 * LlamaMoE after Qwen-MoE: experts int(8 d / 3) / 4 wide, the shared one
 * int(8 d / 3), --moe 32:4:1); renormalized top-k weights
 * (Mixtral); the load-balancing loss weighed 0.001, transformers'
 * router_aux_loss_coef of MixtralConfig and Qwen2MoeConfig. What the
 * trainer does not compute with experts yet is refused here. */
static int moe_finish(struct trainopts *o, struct sw_err *err)
{
	static const int moe_only[] = {
		TRAINOPT_MOE_FFN, TRAINOPT_MOE_SHARED_FFN, TRAINOPT_MOE_RENORM, TRAINOPT_MOE_AUX_COEF,
		TRAINOPT_MOE_DENSE_LAYERS,
	};
	struct train_config *tc = &o->tc;
	struct sw_config *c = &tc->model;
	struct sw_err why;

	for (size_t i = 0; !c->n_experts && i < sizeof moe_only / sizeof *moe_only; i++)
		if (o->given[moe_only[i]])
			return sw_fail(err, SW_EUSAGE, "--%s is for a mixture of experts: give --moe",
				       trainopts_table[moe_only[i]].name);
	if (!c->n_experts)
		return SW_OK;
	if (o->given[TRAINOPT_MOE_SHARED_FFN] && !c->n_shared_experts)
		return sw_fail(err, SW_EUSAGE, "--moe-shared-ffn: --moe E:K:1 has a shared expert, not "
			       "E:K");
	c->moe_d_ff = o->moe_ffn ? o->moe_ffn : c->d_ff / c->n_experts_active;
	if (c->moe_d_ff < 1)
		c->moe_d_ff = 1;
	c->shared_d_ff = c->n_shared_experts ? (o->moe_shared_ffn ? o->moe_shared_ffn : c->d_ff) : 0;
	if (!o->given[TRAINOPT_MOE_RENORM])
		c->moe_renorm = 1;
	if (!o->given[TRAINOPT_MOE_AUX_COEF])
		c->moe_aux_coef = 0.001;
	if (c->moe_dense_layers > c->n_layers)
		return sw_fail(err, SW_EUSAGE, "--moe-dense-layers %lld: the model has %lld layers",
			       (long long)c->moe_dense_layers, (long long)c->n_layers);
	if (tc->device != SW_DEVICE_CPU)
		return sw_fail(err, SW_EUSAGE, "--moe with --device %s: not built yet (the CPU trains "
			       "a mixture of experts)", tc->device == SW_DEVICE_CUDA ? "cuda" : "emu");
	if (tc->zero1)
		return sw_fail(err, SW_EUSAGE, "--moe with --zero1: not built yet");
	if (tc->fisher_every)
		return sw_fail(err, SW_EUSAGE, "--moe with --fisher-every: not built yet (the GNB "
			       "estimate of a mixture of experts)");
	/* what the model computes with experts (arch_model_check's) */
	if (arch_model_check(c, &why))
		return sw_fail(err, SW_EUSAGE, "--moe: %s", why.msg);
	return SW_OK;
}

int trainopts_finish(struct trainopts *o, struct sw_err *err)
{
	struct train_config *tc = &o->tc;
	struct sw_config *c = &tc->model;
	const struct train_arch *a;
	int rc;

	if (!tc->data_path || !tc->out_dir)
		return sw_fail(err, SW_EUSAGE, "--data and --out are required");
	if (tc->init && tc->resume)
		return sw_fail(err, SW_EUSAGE, "--init starts a run, --resume goes on with one: not both");
	if (tc->optim.wd_scaling != WD_SCALING_FIXED && !tc->optim.width_base)
		return sw_fail(err, SW_EUSAGE, "--wd-scaling scales from a base width: give --width-base");
	if (c->scale_design[0] && !c->scale_vectors)
		return sw_fail(err, SW_EUSAGE, "--scale-design places scale vectors: not with --no-scale-vectors");
	if (c->scale_reparam[0] && !c->scale_vectors)
		return sw_fail(err, SW_EUSAGE,
			       "--scale-reparam reparameterizes scale vectors: not with --no-scale-vectors");
	if (c->scale_design[0] && strcmp(c->multipliers, "none"))
		return sw_fail(err, SW_EUSAGE, "--scale-design and --multipliers: one or the other");
	if (c->scale_design[0] && c->tie_embeddings && strstr(c->scale_design, "head="))
		return sw_fail(err, SW_EUSAGE, "--scale-design: the head's gains need an untied head (no --tie)");
	if ((rc = arch_defaults(o, err)))
		return rc;
	a = train_arch_of(c->arch);
	c->n_kv_heads = o->n_kv_heads ? o->n_kv_heads : c->n_heads;
	c->head_dim = o->head_dim;
	if (!o->head_dim && arch_default_head_dim(c, err))
		return sw_fail(err, SW_EUSAGE, "--d-model %lld is not a multiple of --n-heads %lld (or give --head-dim)",
			       (long long)c->d_model, (long long)c->n_heads);
	c->d_ff = o->d_ff ? o->d_ff : a->gpt ? 4 * c->d_model : arch_default_d_ff(c->d_model);
	if (c->n_heads % c->n_kv_heads)
		return sw_fail(err, SW_EUSAGE, "--n-heads must be a multiple of --n-kv-heads");
	if (a->gpt && c->n_kv_heads != c->n_heads)
		return sw_fail(err, SW_EUSAGE, "--arch gpt2: every head has its keys and values "
			       "(no --n-kv-heads below --n-heads)");
	if (!a->gpt && c->head_dim % 2)
		return sw_fail(err, SW_EUSAGE, "the head dimension must be even (RoPE rotates pairs)");
	if (a->softcaps && !o->given[TRAINOPT_QUERY_PRE_ATTN_SCALAR])
		c->query_pre_attn_scalar = (double)c->head_dim;
	if ((rc = moe_finish(o, err)))
		return rc;
	if (tc->precision == SW_PRECISION_BF16 && tc->device == SW_DEVICE_CPU)
		return sw_fail(err, SW_EUSAGE, "--precision bf16 is for a GPU (--device cuda); the CPU computes in fp32");
	return SW_OK;
}

int trainopts_parse(struct trainopts *o, char *const *args, int n, struct sw_err *err)
{
	for (int i = 0; i < n; i++) {
		const char *a = args[i], *eq = strchr(a, '='), *val = NULL;
		char name[64];
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		int id, rc;

		if (strncmp(a, "--", 2) || len - 2 >= sizeof name || len == 2)
			return sw_fail(err, SW_EUSAGE, "'%s' is not a sw-train option (each in full: --name VALUE)", a);
		memcpy(name, a + 2, len - 2);
		name[len - 2] = '\0';
		if ((id = trainopts_find(name)) < 0)
			return sw_fail(err, SW_EUSAGE, "'--%s' is not a sw-train option (each in full: --name VALUE)",
				       name);
		if (eq && trainopts_table[id].arg == TRAINOPT_NONE)
			return sw_fail(err, SW_EUSAGE, "--%s takes no value", name);
		if (eq)
			val = eq + 1;
		else if (trainopts_table[id].arg == TRAINOPT_VALUE) {
			if (i + 1 == n)
				return sw_fail(err, SW_EUSAGE, "--%s: its value is missing", name);
			val = args[++i];
		}
		if ((rc = trainopts_set(o, id, val, err)))
			return rc;
	}
	return SW_OK;
}
