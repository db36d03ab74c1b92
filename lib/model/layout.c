/*
 * layout.c - the model's parameter layout (layout.h): which tensors the
 * model has for its config, in model order, where each lies in the flat
 * blocks, and the views (struct model_ptrs) the step reads them by.
 */
#include "layout.h"
#include "../base/family.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the activation a config's hidden_act names: "" is silu (Llama's
 * default); GPT-2's gelu_new and Gemma's gelu_pytorch_tanh are the tanh
 * approximation, gelu the exact erf form (nanoGPT's nn.GELU());
 * arch_model_check has refused the rest */
static enum model_act act_of(const char *name)
{
	if (!strcmp(name, "gelu_new") || !strcmp(name, "gelu_pytorch_tanh"))
		return MODEL_ACT_GELU_TANH;
	if (!strcmp(name, "gelu"))
		return MODEL_ACT_GELU;
	return MODEL_ACT_SILU;
}

struct model_arch model_arch_of(const struct sw_config *c)
{
	int f = family_model_flags(c->arch);
	double qscale = c->query_pre_attn_scalar > 0 ? c->query_pre_attn_scalar : (double)c->head_dim;
	struct model_arch a = {
		.layernorm = !!(f & FAMILY_LAYERNORM),
		.pos_embed = !!(f & FAMILY_POS_EMBED),
		.gated = !(f & FAMILY_PLAIN_MLP),
		.act = act_of(c->hidden_act),
		.qkv_bias = !!(f & (FAMILY_QKV_BIAS | FAMILY_LINEAR_BIAS)),
		.linear_bias = !!(f & FAMILY_LINEAR_BIAS),
		/* Gemma's normalizer, a tensor of the hidden states' dtype */
		.embed_scale = f & FAMILY_EMBED_SCALE ? (double)(float)sqrt((double)c->d_model) : 0,
		.post_norms = !!(f & FAMILY_POST_NORMS),
		.attn_scale = 1.0 / sqrt(qscale),
		.attn_softcap = c->attn_softcap,
		.final_softcap = c->final_softcap,
	};
	return a;
}

/* The next tensor; while model_layout counts (no tensors yet), only counted. */
static int add_tensor(struct model *m, const char *role, int layer, int rank,
		      int64_t d0, int64_t d1, struct sw_err *err)
{
	struct model_tensor *t;

	if (!m->tensors) {
		m->ntensors++;
		return SW_OK;
	}
	if (m->ntensors >= m->tensors_cap)
		return sw_fail(err, SW_ESOFTWARE, "model: more tensors than counted (%d)", m->tensors_cap);
	t = &m->tensors[m->ntensors];
	memset(t, 0, sizeof *t);
	/* named as the family's files name it (GPT-2's c_attn parts,
	 * Gemma2's post-norms) */
	if (family_info_for_role(&m->c, role, layer, &t->info) < 0)
		return sw_fail(err, SW_ESOFTWARE, "model: role %s has no name", role);
	t->info.rank = rank;
	t->info.shape[0] = d0;
	t->info.shape[1] = d1;
	sw_shape_numel(rank, t->info.shape, &t->info.numel);
	t->info.kind = sw_kind_of_shape(rank, t->info.shape);
	t->info.dtype = SW_DTYPE_F32;
	strcpy(t->info.dtype_name, "F32");
	t->info.lr = t->info.wd = NAN;
	t->numel = (size_t)t->info.numel;
	t->offset = m->nparams;
	t->linear = -1;
	m->nparams += t->numel;
	m->ntensors++;
	return SW_OK;
}

/* A gain of n values (a norm's, or a design's X_gain_in or X_gain_out)
 * and, under a reparameterization, its direction and magnitude after it
 * (arch.h); its index in *index. */
static int add_gain(struct model *m, const char *role, int layer, int64_t n, int *index,
		    struct sw_err *err)
{
	enum arch_reparam mode = arch_reparam_of(m->c.scale_reparam, role);
	char r[SW_ROLE_MAX];
	int rc;

	*index = m->ntensors;
	if ((rc = add_tensor(m, role, layer, 1, n, 0, err)) || !mode)
		return rc;
	snprintf(r, sizeof r, "%s_dir", role);
	if ((rc = add_tensor(m, r, layer, 1, n, 0, err)))
		return rc;
	snprintf(r, sizeof r, "%s_mag", role);
	if ((rc = add_tensor(m, r, layer, 1, 1, 0, err)))
		return rc;
	if (m->reparams) {
		struct model_reparam *p = &m->reparams[m->nreparams];
		p->gain = *index;
		p->dir = *index + 1;
		p->mag = *index + 2;
		p->mode = mode;
		m->tensors[p->gain].derived = 1;
	}
	m->nreparams++;
	return SW_OK;
}

/* The multiplier mode of linear `role`: the learnable multipliers' (every
 * linear but the embedding), or the scale design's gains of a Pre-Norm's
 * reader (in: a column gain, out: a row gain, both: rowcol). */
static enum mult_mode linear_mode(const struct model *m, const char *role)
{
	int k = arch_sv_kind_of(role);

	if (m->mult != MULT_NONE)
		return m->mult;
	if (k < 0 || (!m->design.in[k] && !m->design.out[k]))
		return MULT_NONE;
	return m->design.in[k] && m->design.out[k] ? MULT_ROWCOL : m->design.in[k] ? MULT_COL : MULT_ROW;
}

/* A linear layer and its multipliers or gains: the row side (or a
 * scalar, or col mode's column) in mult_tensor, rowcol's column in
 * col_tensor. The gains are added in their names' order, gain_in first. */
static int add_linear(struct model *m, const char *role, int layer, int64_t dout,
		      int64_t din, struct sw_err *err)
{
	enum mult_mode mode = linear_mode(m, role);
	int gains = m->mult == MULT_NONE;
	char mrole[SW_ROLE_MAX];
	/* while model_layout counts, the layer's fields go nowhere */
	struct model_linear counting, *l = m->tensors ? &m->linears[m->nlinears] : &counting;
	int rc;

	if (m->tensors && m->nlinears >= m->linears_cap)
		return sw_fail(err, SW_ESOFTWARE, "model: more linear layers than counted (%d)",
			       m->linears_cap);
	if ((rc = add_tensor(m, role, layer, 2, dout, din, err)))
		return rc;
	l->tensor = m->ntensors - 1;
	l->mult_tensor = l->col_tensor = -1;
	l->mode = mode;
	l->dout = dout;
	l->din = din;
	if (m->tensors)
		m->tensors[l->tensor].linear = m->nlinears;
	if (gains && (mode == MULT_COL || mode == MULT_ROWCOL)) {
		snprintf(mrole, sizeof mrole, "%s_gain_in", role);
		if ((rc = add_gain(m, mrole, layer, din,
				   mode == MULT_COL ? &l->mult_tensor : &l->col_tensor, err)))
			return rc;
	}
	if (gains && (mode == MULT_ROW || mode == MULT_ROWCOL)) {
		snprintf(mrole, sizeof mrole, "%s_gain_out", role);
		if ((rc = add_gain(m, mrole, layer, dout, &l->mult_tensor, err)))
			return rc;
	}
	if (!gains) {
		int64_t n = mode == MULT_SCALAR ? 1 : mode == MULT_COL ? din : dout;
		snprintf(mrole, sizeof mrole, "%s_mult", role);
		if ((rc = add_tensor(m, mrole, layer, 1, n, 0, err)))
			return rc;
		l->mult_tensor = m->ntensors - 1;
	}
	if (!gains && mode == MULT_ROWCOL) {
		snprintf(mrole, sizeof mrole, "%s_mult_col", role);
		if ((rc = add_tensor(m, mrole, layer, 1, din, 0, err)))
			return rc;
		l->col_tensor = m->ntensors - 1;
	}
	m->nlinears++;
	return SW_OK;
}

/* A linear's bias of n values (zero at model_init). */
static int add_bias(struct model *m, const char *role, int layer, int64_t n, struct sw_err *err)
{
	int rc = add_tensor(m, role, layer, 1, n, 0, err);

	if (!rc && m->tensors)
		m->tensors[m->ntensors - 1].bias = 1;
	return rc;
}

/* An expert's linear (expert -1: the router's, the shared expert's),
 * named by its number (family_info_for_expert) */
static int add_expert_linear(struct model *m, const char *role, int layer, int expert,
			     int64_t dout, int64_t din, struct sw_err *err)
{
	int rc = add_linear(m, role, layer, dout, din, err);

	if (!rc && m->tensors) {
		struct sw_tensor_info *t = &m->tensors[m->ntensors - 1].info;
		t->expert = expert;
		if (family_expert_role_name(&m->c, role, layer, expert, t->name, sizeof t->name) < 0)
			return sw_fail(err, SW_ESOFTWARE, "model: role %s has no name", role);
	}
	return rc;
}

/* A mixture of experts' layer l in place of the MLP (moe.h): the
 * router, each expert's gate, up and down in turn, the shared expert
 * and its gate */
static int add_moe(struct model *m, int l, struct sw_err *err)
{
	const struct sw_config *c = &m->c;
	int64_t C = c->d_model, F = c->moe_d_ff, FS = c->shared_d_ff;
	int rc = add_expert_linear(m, "router", l, -1, c->n_experts, C, err);

	for (int e = 0; !rc && e < c->n_experts; e++)
		if ((rc = add_expert_linear(m, "expert_gate", l, e, F, C, err)) ||
		    (rc = add_expert_linear(m, "expert_up", l, e, F, C, err)) ||
		    (rc = add_expert_linear(m, "expert_down", l, e, C, F, err)))
			return rc;
	if (!rc && c->n_shared_experts &&
	    ((rc = add_expert_linear(m, "shared_gate", l, -1, FS, C, err)) ||
	     (rc = add_expert_linear(m, "shared_up", l, -1, FS, C, err)) ||
	     (rc = add_expert_linear(m, "shared_down", l, -1, C, FS, err)) ||
	     (rc = add_expert_linear(m, "shared_router", l, -1, 1, C, err))))
		return rc;
	return rc;
}

static int enumerate(struct model *m, struct sw_err *err)
{
	const struct sw_config *c = &m->c;
	int64_t C = c->d_model, Q = c->n_heads * c->head_dim, K = c->n_kv_heads * c->head_dim;
	int gains = c->scale_vectors, rc = SW_OK, i;
	/* the Pre-Norms' shared gains, unless the scale design moved them to
	 * the readers */
	int attn_gain = gains && m->design.shared[ARCH_SV_ATTN],
	    ffn_gain = gains && m->design.shared[ARCH_SV_FFN],
	    final_gain = gains && m->design.shared[ARCH_SV_HEAD];
	const struct model_arch *a = &m->arch;
	/* LayerNorm's bias beside its gain (none without scale vectors) */
	int norm_bias = a->layernorm && gains;

	rc = add_tensor(m, "embed", -1, 2, c->vocab_size, C, err);
	if (!rc && a->pos_embed)
		rc = add_tensor(m, "pos_embed", -1, 2, c->seq_len, C, err);
	for (int l = 0; l < c->n_layers && !rc; l++) {
		if (attn_gain && (rc = add_gain(m, "attn_norm", l, C, &i, err)))
			break;
		if (attn_gain && norm_bias && (rc = add_bias(m, "attn_norm_bias", l, C, err)))
			break;
		if ((rc = add_linear(m, "q", l, Q, C, err)) || (rc = add_linear(m, "k", l, K, C, err)) ||
		    (rc = add_linear(m, "v", l, K, C, err)))
			break;
		/* Qwen2's and GPT-2's q, k, v biases, after the three (kept adjacent) */
		if (a->qkv_bias && ((rc = add_bias(m, "q_bias", l, Q, err)) ||
				 (rc = add_bias(m, "k_bias", l, K, err)) ||
				 (rc = add_bias(m, "v_bias", l, K, err))))
			break;
		if (c->qk_norm && gains &&
		    ((rc = add_gain(m, "q_norm", l, c->head_dim, &i, err)) ||
		     (rc = add_gain(m, "k_norm", l, c->head_dim, &i, err))))
			break;
		if (m->design.dnp[ARCH_SV_ATTN] && (rc = add_gain(m, "v_norm", l, c->head_dim, &i, err)))
			break;
		if (c->norm_everywhere && gains && (rc = add_gain(m, "o_in_norm", l, Q, &i, err)))
			break;
		if ((rc = add_linear(m, "o", l, C, Q, err)))
			break;
		if (a->linear_bias && (rc = add_bias(m, "o_bias", l, C, err)))
			break;
		if (a->post_norms && gains && (rc = add_gain(m, "attn_post_norm", l, C, &i, err)))
			break;
		if (ffn_gain && (rc = add_gain(m, "ffn_norm", l, C, &i, err)))
			break;
		if (ffn_gain && norm_bias && (rc = add_bias(m, "ffn_norm_bias", l, C, err)))
			break;
		if (arch_layer_is_moe(c, l)) {
			if ((rc = add_moe(m, l, err)))
				break;
			continue;
		}
		if ((a->gated && (rc = add_linear(m, "gate", l, c->d_ff, C, err))) ||
		    (rc = add_linear(m, "up", l, c->d_ff, C, err)))
			break;
		if (a->linear_bias && (rc = add_bias(m, "up_bias", l, c->d_ff, err)))
			break;
		if (m->design.dnp[ARCH_SV_FFN] &&
		    ((rc = add_gain(m, "gate_norm", l, c->d_ff, &i, err)) ||
		     (rc = add_gain(m, "up_norm", l, c->d_ff, &i, err))))
			break;
		if (c->norm_everywhere && gains &&
		    (rc = add_gain(m, "down_in_norm", l, c->d_ff, &i, err)))
			break;
		if ((rc = add_linear(m, "down", l, C, c->d_ff, err)))
			break;
		if (a->linear_bias && (rc = add_bias(m, "down_bias", l, C, err)))
			break;
		if (a->post_norms && gains && (rc = add_gain(m, "ffn_post_norm", l, C, &i, err)))
			break;
	}
	if (!rc && final_gain)
		rc = add_gain(m, "final_norm", -1, C, &i, err);
	if (!rc && final_gain && norm_bias)
		rc = add_bias(m, "final_norm_bias", -1, C, err);
	if (!rc && !c->tie_embeddings)
		rc = add_linear(m, "lm_head", -1, c->vocab_size, C, err);
	return rc;
}

int model_find(const struct model *m, const char *role, int layer)
{
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].info.layer == layer && !strcmp(m->tensors[i].info.role, role))
			return i;
	return -1;
}

/* The views of a layer (struct layer_ptrs): the role each field points
 * at, NULL where the model has no such tensor */
static const struct {
	const char *role;
	size_t field;
} layer_views[] = {
#define VIEW(role, field) {role, offsetof(struct layer_ptrs, field)}
	VIEW("attn_norm", attn_norm), VIEW("attn_norm_bias", attn_norm_bias), VIEW("q", wq),
	VIEW("k", wk), VIEW("v", wv), VIEW("o", wo),
	VIEW("q_bias", q_bias), VIEW("k_bias", k_bias), VIEW("v_bias", v_bias),
	VIEW("o_bias", o_bias), VIEW("attn_post_norm", attn_post_norm),
	VIEW("ffn_norm_bias", ffn_norm_bias), VIEW("up_bias", up_bias),
	VIEW("down_bias", down_bias), VIEW("ffn_post_norm", ffn_post_norm),
	VIEW("q_norm", q_norm), VIEW("k_norm", k_norm), VIEW("v_norm", v_norm),
	VIEW("gate_norm", gate_norm), VIEW("up_norm", up_norm), VIEW("o_in_norm", o_in_norm),
	VIEW("ffn_norm", ffn_norm), VIEW("gate", wgate), VIEW("up", wup), VIEW("down", wdown),
	VIEW("down_in_norm", down_in_norm), VIEW("router", router), VIEW("expert_gate", experts),
	VIEW("shared_gate", shared_gate), VIEW("shared_up", shared_up),
	VIEW("shared_down", shared_down), VIEW("shared_router", shared_router),
#undef VIEW
};

/* Where the tensor of role at layer is, with the tensor at offset
 * `from` of the block at block[0]: a linear with multipliers or gains
 * at its effective weight in eblock, the rest as stored; NULL if the
 * model has none. */
static real *view(const struct model *m, real *block, size_t from, real *eblock, const char *role,
		  int layer)
{
	int i = model_find(m, role, layer);
	const struct model_tensor *t;

	if (i < 0)
		return NULL;
	t = &m->tensors[i];
	if (t->linear >= 0 && m->linears[t->linear].mode != MULT_NONE)
		return eblock + m->eff_offset[t->linear];
	return block + (t->offset - from);
}

static void set_layer_ptrs(const struct model *m, struct layer_ptrs *lp, int l, real *block,
			   size_t from, real *eblock)
{
	for (size_t i = 0; i < sizeof layer_views / sizeof layer_views[0]; i++)
		*(real **)((char *)lp + layer_views[i].field) =
			view(m, block, from, eblock, layer_views[i].role, l);
}

void model_layer_views_keep(const struct model *m, int l, const struct layer_ptrs *from,
			    struct layer_ptrs *to,
			    int (*keep)(const struct model *m, int tensor, const void *ctx),
			    const void *ctx)
{
	for (size_t i = 0; i < sizeof layer_views / sizeof layer_views[0]; i++) {
		size_t f = layer_views[i].field;
		real *p = *(real *const *)((const char *)from + f);
		*(real **)((char *)to + f) = keep(m, model_find(m, layer_views[i].role, l), ctx) ? p : NULL;
	}
}

/* Views for the forward/backward code: effective weights for the linear
 * layers, the gains as stored. */
static void set_ptrs(struct model *m, struct model_ptrs *p, real *block, real *eblock)
{
	p->embed = view(m, block, 0, eblock, "embed", -1);
	p->pos_embed = view(m, block, 0, eblock, "pos_embed", -1);
	p->final_norm = view(m, block, 0, eblock, "final_norm", -1);
	p->final_norm_bias = view(m, block, 0, eblock, "final_norm_bias", -1);
	p->lm_head = m->c.tie_embeddings ? p->embed : view(m, block, 0, eblock, "lm_head", -1);
	for (int l = 0; l < m->c.n_layers; l++)
		set_layer_ptrs(m, &p->layer[l], l, block, 0, eblock);
}

void model_point_layer(struct model *m, int l, real *at_, size_t from)
{
	if (!at_) {
		memset(&m->p.layer[l], 0, sizeof m->p.layer[l]);
		return;
	}
	set_layer_ptrs(m, &m->p.layer[l], l, at_, from, m->w_eff);
}

int model_layout(struct model *m, struct sw_err *err)
{
	const struct sw_config *c = &m->c;
	int rc;

	/* count the tensors and linear layers, then lay them out */
	if ((rc = enumerate(m, err)))
		return rc;
	m->tensors_cap = m->ntensors;
	m->linears_cap = m->nlinears;
	m->ntensors = m->nlinears = 0;
	m->tensors = calloc((size_t)m->tensors_cap + 1, sizeof *m->tensors);
	m->linears = calloc((size_t)m->linears_cap + 1, sizeof *m->linears);
	m->reparams = calloc((size_t)m->nreparams + 1, sizeof *m->reparams);
	m->nreparams = 0;
	m->p.layer = calloc((size_t)c->n_layers, sizeof *m->p.layer);
	m->g.layer = calloc((size_t)c->n_layers, sizeof *m->g.layer);
	if (!m->tensors || !m->linears || !m->reparams || !m->p.layer || !m->g.layer)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if ((rc = enumerate(m, err)))
		return rc;
	m->params = calloc(m->nparams, sizeof(real));
	m->grads = calloc(m->nparams, sizeof(real));
	for (int i = 0; i < m->nlinears; i++)
		m->eff |= m->linears[i].mode != MULT_NONE;
	if (m->eff && m->nlinears > 0) {
		/* a slot for each linear with multipliers or gains, in order */
		m->eff_offset = calloc((size_t)m->nlinears, sizeof *m->eff_offset);
		for (int i = 0; m->eff_offset && i < m->nlinears; i++) {
			m->eff_offset[i] = m->eff_size;
			if (m->linears[i].mode != MULT_NONE)
				m->eff_size += (size_t)(m->linears[i].dout * m->linears[i].din);
		}
		m->w_eff = calloc(m->eff_size, sizeof(real));
		m->dw_eff = calloc(m->eff_size, sizeof(real));
	}
	if (!m->params || !m->grads ||
	    (m->eff && (!m->eff_offset || !m->w_eff || !m->dw_eff))) {
		double bytes = 2.0 * ((double)m->nparams + (double)m->eff_size) * sizeof(real);
		return sw_fail(err, SW_ESOFTWARE,
			       "out of memory for %zu parameters (%.3g GB for them and their gradients)",
			       m->nparams, bytes / 1e9);
	}
	set_ptrs(m, &m->p, m->params, m->w_eff);
	set_ptrs(m, &m->g, m->grads, m->dw_eff);
	/* the backward's joined products (model_matmul_backward_parts) take q, k, v
	 * as one (Q + 2K, C) matrix and gate, up as one (2F, C), in the
	 * weights and their gradients: enumerate lays them out so */
	for (int l = 0; l < c->n_layers; l++)
		for (int side = 0; side < 2; side++) {
			const struct layer_ptrs *lp = side ? &m->g.layer[l] : &m->p.layer[l];
			size_t qc = (size_t)(c->n_heads * c->head_dim * c->d_model),
			       kc = (size_t)(c->n_kv_heads * c->head_dim * c->d_model),
			       fc = (size_t)(c->d_ff * c->d_model);
			size_t ec = (size_t)(3 * c->moe_d_ff * c->d_model);
			int i = model_find(m, "expert_gate", l);
			if (lp->wk != lp->wq + qc || lp->wv != lp->wk + kc ||
			    (m->arch.gated && !lp->router && lp->wup != lp->wgate + fc))
				return sw_fail(err, SW_ESOFTWARE, "model: layer %d's q, k, v or gate, up "
					       "are not adjacent", l);
			/* moe.c finds expert e's matrices at experts + e 3 Fe C */
			for (int e = 0; lp->router && i >= 0 && e < c->n_experts; e++)
				if (m->tensors[i + 3 * e].offset != m->tensors[i].offset + (size_t)e * ec ||
				    m->tensors[i + 3 * e].info.expert != e)
					return sw_fail(err, SW_ESOFTWARE, "model: layer %d's experts are not "
						       "adjacent", l);
		}
	return SW_OK;
}
