/* arch.c - the Llama architecture's roles, names, shapes, order (arch.h). */
#include "arch.h"
#include "family.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V SW_MUP_VECTOR_LIKE
#define M SW_MUP_MATRIX_LIKE
#define GI SW_GROUP_INPUT
#define GH SW_GROUP_HIDDEN
#define GO SW_GROUP_OUTPUT
#define NN SW_NORM_NONE
#define NI SW_NORM_INPUT
#define NO SW_NORM_OUTPUT
#define HN ARCH_HEADS_NONE
#define HR ARCH_HEADS_ROWS_ROPE
#define HV ARCH_HEADS_ROWS
#define HC ARCH_HEADS_COLS
#define SN -1
#define SA ARCH_SV_ATTN
#define SF ARCH_SV_FFN
#define SH ARCH_SV_HEAD
/* shapes over the config's sizes (ARCH_DIM_*: V, D, F, HD, HHD = H*hd, KVHD = KV*hd) */
#define LINEAR(a, b) {ARCH_SHAPE_LINEAR, ARCH_DIM_##a, ARCH_DIM_##b}
#define LOOKUP(a, b) {ARCH_SHAPE_LOOKUP, ARCH_DIM_##a, ARCH_DIM_##b}
#define VEC(a) {ARCH_SHAPE_VECTOR, ARCH_DIM_##a, ARCH_DIM_NONE}
#define EITHER(a, b) {ARCH_SHAPE_EITHER, ARCH_DIM_##a, ARCH_DIM_##b}
#define MUL(a, b) {ARCH_SHAPE_MULT, ARCH_DIM_##a, ARCH_DIM_##b}
#define MULCOL(a, b) {ARCH_SHAPE_MULT_COL, ARCH_DIM_##a, ARCH_DIM_##b}
#define ONE {ARCH_SHAPE_ONE, ARCH_DIM_NONE, ARCH_DIM_NONE}
#define WO ARCH_WHEN_OTHER
#define WA ARCH_WHEN_ALWAYS
#define WG ARCH_WHEN_GAIN
#define WU ARCH_WHEN_UNTIED
#define WB ARCH_WHEN_QKV_BIAS
#define WQ ARCH_WHEN_QK_NORM
#define WE ARCH_WHEN_NORM_EVERYWHERE
#define WD ARCH_WHEN_DESIGN
#define WM ARCH_WHEN_MULT
#define XR ARCH_SPLIT_ROWS
#define XC ARCH_SPLIT_COLS
#define XE ARCH_SPLIT_EMBED
#define PP ARCH_PLACE_PRE
#define PQ ARCH_PLACE_QK
#define PD ARCH_PLACE_DNP
#define PI ARCH_PLACE_IN
#define PB ARCH_PLACE_BEFORE
#define PA ARCH_PLACE_AFTER

/*
 * The roles, in model order. order < 50: before the layers, 50..99: inside
 * a layer, >= 100: after the layers. hf: the Hugging Face name, inside
 * "model.layers.N." for in-layer roles. The multiplier names, the
 * norm-everywhere norms (o_in_norm before o_proj, down_in_norm before
 * down_proj: the optimal-norm paper's RMSNorm before every linear layer)
 * and the scale-vector designs' gains of a Pre-Norm's readers (X_gain_in
 * on X's input side, X_gain_out on its output side: sw_config's
 * scale_design) are ours: Hugging Face Llama has none of them. The gains
 * are Input-Norm type: each can be absorbed into its matrix, so, like a
 * Pre-Norm's gain, it shapes the optimization and not what the model can
 * express (scale-vectors paper, sections 2.2 and 3.4). The columns after
 * tied are named (.shape, .when, ...; arch.h): a row leaves out those
 * that are none (no shape checked, no heads, never in a Llama-family
 * model, not split, placement pre, gives no size).
 */
static const struct role_row {
	struct arch_role r;
	const char *hf;
} roles[] = {
/* A gain's reparameterization (sw_config.scale_reparam): its direction
 * X_dir (alpha, the gain's shape) and magnitude X_mag (beta, one value),
 * of the gain's kind, beside it in model order; the gain X is what they
 * give (arch.h). */
#define REPARAM(role, hf, group, nt, in_layer, order, shape_, place_) \
	{{role "_dir", SW_BLOCK_NORM, V, group, nt, in_layer, order, HN, SN, NULL, \
	  .shape = shape_, .when = ARCH_WHEN_REPARAM, .place = place_}, hf ".direction"}, \
	{{role "_mag", SW_BLOCK_NORM, V, group, nt, in_layer, order, HN, SN, NULL, \
	  .shape = ONE, .when = ARCH_WHEN_REPARAM, .place = place_}, hf ".magnitude"}
	{{"embed", SW_BLOCK_EMB, V, GI, NN, 0, 0, HN, SN, NULL,
	  .shape = LOOKUP(V, D), .when = WA, .split = XE, .gives = ARCH_DIM_V},
	 "model.embed_tokens.weight"},
	{{"embed_mult", SW_BLOCK_MULT, V, GI, NN, 0, 1, HN, SN, NULL,
	  .shape = MUL(D, V), .when = WM}, "model.embed_tokens.multiplier"},
	{{"embed_mult_col", SW_BLOCK_MULT, V, GI, NN, 0, 1, HN, SN, NULL,
	  .shape = MULCOL(D, V), .when = WM}, "model.embed_tokens.multiplier_col"},
	{{"attn_norm", SW_BLOCK_NORM, V, GH, NI, 1, 50, HN, SN, NULL,
	  .shape = VEC(D), .when = WG}, "input_layernorm.weight"},
	REPARAM("attn_norm", "input_layernorm", GH, NI, 1, 50, VEC(D), PP),
	{{"q", SW_BLOCK_QK, M, GH, NN, 1, 51, HR, SA, NULL,
	  .shape = LINEAR(HHD, D), .n_heads = ARCH_DIM_H, .when = WA, .split = XR},
	 "self_attn.q_proj.weight"},
	{{"q_bias", SW_BLOCK_QK, V, GH, NN, 1, 52, HN, SN, NULL,
	  .shape = VEC(HHD), .n_heads = ARCH_DIM_H, .when = WB}, "self_attn.q_proj.bias"},
	{{"q_gain_in", SW_BLOCK_NORM, V, GH, NI, 1, 53, HN, SN, NULL,
	  .shape = VEC(D), .when = WD, .place = PB}, "self_attn.q_proj.gain_in"},
	REPARAM("q_gain_in", "self_attn.q_proj.gain_in", GH, NI, 1, 53, VEC(D), PB),
	{{"q_gain_out", SW_BLOCK_NORM, V, GH, NI, 1, 53, HN, SN, NULL,
	  .shape = VEC(HHD), .when = WD, .place = PA}, "self_attn.q_proj.gain_out"},
	REPARAM("q_gain_out", "self_attn.q_proj.gain_out", GH, NI, 1, 53, VEC(HHD), PA),
	{{"q_mult", SW_BLOCK_MULT, V, GH, NN, 1, 53, HN, SN, NULL,
	  .shape = MUL(HHD, D), .when = WM}, "self_attn.q_proj.multiplier"},
	{{"q_mult_col", SW_BLOCK_MULT, V, GH, NN, 1, 53, HN, SN, NULL,
	  .shape = MULCOL(HHD, D), .when = WM}, "self_attn.q_proj.multiplier_col"},
	{{"k", SW_BLOCK_QK, M, GH, NN, 1, 54, HR, SA, NULL,
	  .shape = LINEAR(KVHD, D), .n_heads = ARCH_DIM_KV, .when = WA, .split = XR},
	 "self_attn.k_proj.weight"},
	{{"k_bias", SW_BLOCK_QK, V, GH, NN, 1, 55, HN, SN, NULL,
	  .shape = VEC(KVHD), .n_heads = ARCH_DIM_KV, .when = WB}, "self_attn.k_proj.bias"},
	{{"k_gain_in", SW_BLOCK_NORM, V, GH, NI, 1, 56, HN, SN, NULL,
	  .shape = VEC(D), .when = WD, .place = PB}, "self_attn.k_proj.gain_in"},
	REPARAM("k_gain_in", "self_attn.k_proj.gain_in", GH, NI, 1, 56, VEC(D), PB),
	{{"k_gain_out", SW_BLOCK_NORM, V, GH, NI, 1, 56, HN, SN, NULL,
	  .shape = VEC(KVHD), .when = WD, .place = PA}, "self_attn.k_proj.gain_out"},
	REPARAM("k_gain_out", "self_attn.k_proj.gain_out", GH, NI, 1, 56, VEC(KVHD), PA),
	{{"k_mult", SW_BLOCK_MULT, V, GH, NN, 1, 56, HN, SN, NULL,
	  .shape = MUL(KVHD, D), .when = WM}, "self_attn.k_proj.multiplier"},
	{{"k_mult_col", SW_BLOCK_MULT, V, GH, NN, 1, 56, HN, SN, NULL,
	  .shape = MULCOL(KVHD, D), .when = WM}, "self_attn.k_proj.multiplier_col"},
	{{"v", SW_BLOCK_VO, M, GH, NN, 1, 57, HV, SA, NULL,
	  .shape = LINEAR(KVHD, D), .n_heads = ARCH_DIM_KV, .when = WA, .split = XR},
	 "self_attn.v_proj.weight"},
	{{"v_bias", SW_BLOCK_VO, V, GH, NN, 1, 58, HN, SN, NULL,
	  .shape = VEC(KVHD), .n_heads = ARCH_DIM_KV, .when = WB}, "self_attn.v_proj.bias"},
	{{"v_gain_in", SW_BLOCK_NORM, V, GH, NI, 1, 59, HN, SN, NULL,
	  .shape = VEC(D), .when = WD, .place = PB}, "self_attn.v_proj.gain_in"},
	REPARAM("v_gain_in", "self_attn.v_proj.gain_in", GH, NI, 1, 59, VEC(D), PB),
	{{"v_gain_out", SW_BLOCK_NORM, V, GH, NI, 1, 59, HN, SN, NULL,
	  .shape = VEC(KVHD), .when = WD, .place = PA}, "self_attn.v_proj.gain_out"},
	REPARAM("v_gain_out", "self_attn.v_proj.gain_out", GH, NI, 1, 59, VEC(KVHD), PA),
	{{"v_mult", SW_BLOCK_MULT, V, GH, NN, 1, 59, HN, SN, NULL,
	  .shape = MUL(KVHD, D), .when = WM}, "self_attn.v_proj.multiplier"},
	{{"v_mult_col", SW_BLOCK_MULT, V, GH, NN, 1, 59, HN, SN, NULL,
	  .shape = MULCOL(KVHD, D), .when = WM}, "self_attn.v_proj.multiplier_col"},
	{{"q_norm", SW_BLOCK_NORM, V, GH, NO, 1, 60, HN, SN, NULL,
	  .shape = EITHER(HD, HHD), .when = WQ, .place = PQ}, "self_attn.q_norm.weight"},
	REPARAM("q_norm", "self_attn.q_norm", GH, NO, 1, 60, EITHER(HD, HHD), PQ),
	{{"k_norm", SW_BLOCK_NORM, V, GH, NO, 1, 61, HN, SN, NULL,
	  .shape = EITHER(HD, KVHD), .when = WQ, .place = PQ}, "self_attn.k_norm.weight"},
	REPARAM("k_norm", "self_attn.k_norm", GH, NO, 1, 61, EITHER(HD, KVHD), PQ),
	{{"v_norm", SW_BLOCK_NORM, V, GH, NO, 1, 61, HN, SN, NULL,
	  .shape = VEC(HD), .when = WD, .place = PD}, "self_attn.v_norm.weight"},
	REPARAM("v_norm", "self_attn.v_norm", GH, NO, 1, 61, VEC(HD), PD),
	{{"o_in_norm", SW_BLOCK_NORM, V, GH, NI, 1, 62, HN, SN, NULL,
	  .shape = VEC(HHD), .when = WE, .place = PI}, "self_attn.o_in_norm.weight"},
	REPARAM("o_in_norm", "self_attn.o_in_norm", GH, NI, 1, 62, VEC(HHD), PI),
	{{"o", SW_BLOCK_VO, M, GH, NN, 1, 63, HC, SN, NULL,
	  .shape = LINEAR(D, HHD), .n_heads = ARCH_DIM_H, .when = WA, .split = XC},
	 "self_attn.o_proj.weight"},
	{{"o_bias", SW_BLOCK_VO, V, GH, NN, 1, 64, HN, SN, NULL,
	  .shape = VEC(D), .when = WO}, "self_attn.o_proj.bias"},
	{{"o_mult", SW_BLOCK_MULT, V, GH, NN, 1, 65, HN, SN, NULL,
	  .shape = MUL(D, HHD), .when = WM}, "self_attn.o_proj.multiplier"},
	{{"o_mult_col", SW_BLOCK_MULT, V, GH, NN, 1, 65, HN, SN, NULL,
	  .shape = MULCOL(D, HHD), .when = WM}, "self_attn.o_proj.multiplier_col"},
	{{"ffn_norm", SW_BLOCK_NORM, V, GH, NI, 1, 70, HN, SN, NULL,
	  .shape = VEC(D), .when = WG}, "post_attention_layernorm.weight"},
	REPARAM("ffn_norm", "post_attention_layernorm", GH, NI, 1, 70, VEC(D), PP),
	{{"gate", SW_BLOCK_FFN, M, GH, NN, 1, 71, HN, SF, NULL,
	  .shape = LINEAR(F, D), .when = WA, .split = XR, .gives = ARCH_DIM_F},
	 "mlp.gate_proj.weight"},
	{{"gate_bias", SW_BLOCK_FFN, V, GH, NN, 1, 72, HN, SN, NULL,
	  .shape = VEC(F), .when = WO}, "mlp.gate_proj.bias"},
	{{"gate_gain_in", SW_BLOCK_NORM, V, GH, NI, 1, 73, HN, SN, NULL,
	  .shape = VEC(D), .when = WD, .place = PB}, "mlp.gate_proj.gain_in"},
	REPARAM("gate_gain_in", "mlp.gate_proj.gain_in", GH, NI, 1, 73, VEC(D), PB),
	{{"gate_gain_out", SW_BLOCK_NORM, V, GH, NI, 1, 73, HN, SN, NULL,
	  .shape = VEC(F), .when = WD, .place = PA}, "mlp.gate_proj.gain_out"},
	REPARAM("gate_gain_out", "mlp.gate_proj.gain_out", GH, NI, 1, 73, VEC(F), PA),
	{{"gate_mult", SW_BLOCK_MULT, V, GH, NN, 1, 73, HN, SN, NULL,
	  .shape = MUL(F, D), .when = WM}, "mlp.gate_proj.multiplier"},
	{{"gate_mult_col", SW_BLOCK_MULT, V, GH, NN, 1, 73, HN, SN, NULL,
	  .shape = MULCOL(F, D), .when = WM}, "mlp.gate_proj.multiplier_col"},
	{{"up", SW_BLOCK_FFN, M, GH, NN, 1, 74, HN, SF, NULL,
	  .shape = LINEAR(F, D), .when = WA, .split = XR}, "mlp.up_proj.weight"},
	{{"up_bias", SW_BLOCK_FFN, V, GH, NN, 1, 75, HN, SN, NULL,
	  .shape = VEC(F), .when = WO}, "mlp.up_proj.bias"},
	{{"up_gain_in", SW_BLOCK_NORM, V, GH, NI, 1, 76, HN, SN, NULL,
	  .shape = VEC(D), .when = WD, .place = PB}, "mlp.up_proj.gain_in"},
	REPARAM("up_gain_in", "mlp.up_proj.gain_in", GH, NI, 1, 76, VEC(D), PB),
	{{"up_gain_out", SW_BLOCK_NORM, V, GH, NI, 1, 76, HN, SN, NULL,
	  .shape = VEC(F), .when = WD, .place = PA}, "mlp.up_proj.gain_out"},
	REPARAM("up_gain_out", "mlp.up_proj.gain_out", GH, NI, 1, 76, VEC(F), PA),
	{{"up_mult", SW_BLOCK_MULT, V, GH, NN, 1, 76, HN, SN, NULL,
	  .shape = MUL(F, D), .when = WM}, "mlp.up_proj.multiplier"},
	{{"up_mult_col", SW_BLOCK_MULT, V, GH, NN, 1, 76, HN, SN, NULL,
	  .shape = MULCOL(F, D), .when = WM}, "mlp.up_proj.multiplier_col"},
	{{"gate_norm", SW_BLOCK_NORM, V, GH, NO, 1, 76, HN, SN, NULL,
	  .shape = VEC(F), .when = WD, .place = PD}, "mlp.gate_norm.weight"},
	REPARAM("gate_norm", "mlp.gate_norm", GH, NO, 1, 76, VEC(F), PD),
	{{"up_norm", SW_BLOCK_NORM, V, GH, NO, 1, 76, HN, SN, NULL,
	  .shape = VEC(F), .when = WD, .place = PD}, "mlp.up_norm.weight"},
	REPARAM("up_norm", "mlp.up_norm", GH, NO, 1, 76, VEC(F), PD),
	{{"down_in_norm", SW_BLOCK_NORM, V, GH, NI, 1, 77, HN, SN, NULL,
	  .shape = VEC(F), .when = WE, .place = PI}, "mlp.down_in_norm.weight"},
	REPARAM("down_in_norm", "mlp.down_in_norm", GH, NI, 1, 77, VEC(F), PI),
	{{"down", SW_BLOCK_FFN, M, GH, NN, 1, 78, HN, SN, NULL,
	  .shape = LINEAR(D, F), .when = WA, .split = XC}, "mlp.down_proj.weight"},
	{{"down_bias", SW_BLOCK_FFN, V, GH, NN, 1, 79, HN, SN, NULL,
	  .shape = VEC(D), .when = WO}, "mlp.down_proj.bias"},
	{{"down_mult", SW_BLOCK_MULT, V, GH, NN, 1, 80, HN, SN, NULL,
	  .shape = MUL(D, F), .when = WM}, "mlp.down_proj.multiplier"},
	{{"down_mult_col", SW_BLOCK_MULT, V, GH, NN, 1, 80, HN, SN, NULL,
	  .shape = MULCOL(D, F), .when = WM}, "mlp.down_proj.multiplier_col"},
	{{"final_norm", SW_BLOCK_NORM, V, GO, NI, 0, 100, HN, SN, NULL,
	  .shape = VEC(D), .when = WG}, "model.norm.weight"},
	REPARAM("final_norm", "model.norm", GO, NI, 0, 100, VEC(D), PP),
	/* Roles of other families (lib/base/family.c names their tensors;
	 * Hugging Face Llama has none of them): LayerNorm's biases (a fused
	 * projection, q, k and v in one matrix or gate and up, is read as
	 * its parts with the roles above: family.c's splits[]); the output
	 * norms after attention and the MLP (Gemma2, OLMo2);
	 * a mixture of experts' router, its experts' projections and the
	 * shared expert with its gate (Qwen2-MoE) */
	{{"pos_embed", SW_BLOCK_EMB, V, GI, NN, 0, 2, HN, SN, NULL, .when = WO}, NULL},
	{{"attn_norm_bias", SW_BLOCK_NORM, V, GH, NN, 1, 50, HN, SN, NULL, .when = WO}, NULL},
	{{"attn_post_norm", SW_BLOCK_NORM, V, GH, NO, 1, 66, HN, SN, NULL, .when = WO, .place = ARCH_PLACE_POST}, NULL},
	{{"ffn_norm_bias", SW_BLOCK_NORM, V, GH, NN, 1, 70, HN, SN, NULL, .when = WO}, NULL},
	{{"router", SW_BLOCK_FFN, M, GH, NN, 1, 81, HN, SN, NULL, .when = WO}, NULL},
	{{"expert_gate", SW_BLOCK_FFN, M, GH, NN, 1, 82, HN, SN, NULL, .when = WO}, NULL},
	{{"expert_up", SW_BLOCK_FFN, M, GH, NN, 1, 83, HN, SN, NULL, .when = WO}, NULL},
	{{"expert_down", SW_BLOCK_FFN, M, GH, NN, 1, 84, HN, SN, NULL, .when = WO}, NULL},
	{{"shared_router", SW_BLOCK_FFN, M, GH, NN, 1, 85, HN, SN, NULL, .when = WO}, NULL},
	{{"shared_gate", SW_BLOCK_FFN, M, GH, NN, 1, 86, HN, SN, NULL, .when = WO}, NULL},
	{{"shared_up", SW_BLOCK_FFN, M, GH, NN, 1, 87, HN, SN, NULL, .when = WO}, NULL},
	{{"shared_down", SW_BLOCK_FFN, M, GH, NN, 1, 88, HN, SN, NULL, .when = WO}, NULL},
	{{"ffn_post_norm", SW_BLOCK_NORM, V, GH, NO, 1, 89, HN, SN, NULL, .when = WO, .place = ARCH_PLACE_POST}, NULL},
	{{"final_norm_bias", SW_BLOCK_NORM, V, GO, NN, 0, 100, HN, SN, NULL, .when = WO}, NULL},
	{{"lm_head", SW_BLOCK_OUT, V, GO, NN, 0, 110, HN, SH, "embed",
	  .shape = LINEAR(V, D), .when = WU, .split = XR}, "lm_head.weight"},
	{{"lm_head_gain_in", SW_BLOCK_NORM, V, GO, NI, 0, 111, HN, SN, NULL,
	  .shape = VEC(D), .when = WD, .place = PB}, "lm_head.gain_in"},
	REPARAM("lm_head_gain_in", "lm_head.gain_in", GO, NI, 0, 111, VEC(D), PB),
	{{"lm_head_gain_out", SW_BLOCK_NORM, V, GO, NI, 0, 111, HN, SN, NULL,
	  .shape = VEC(V), .when = WD, .place = PA}, "lm_head.gain_out"},
	REPARAM("lm_head_gain_out", "lm_head.gain_out", GO, NI, 0, 111, VEC(V), PA),
	{{"lm_head_mult", SW_BLOCK_MULT, V, GO, NN, 0, 111, HN, SN, NULL,
	  .shape = MUL(V, D), .when = WM}, "lm_head.multiplier"},
	{{"lm_head_mult_col", SW_BLOCK_MULT, V, GO, NN, 0, 111, HN, SN, NULL,
	  .shape = MULCOL(V, D), .when = WM}, "lm_head.multiplier_col"},
#undef REPARAM
};
#define NROLES (sizeof roles / sizeof roles[0])

static const struct role_row *row_of(const char *s)
{
	for (size_t i = 0; i < NROLES; i++)
		if (strcmp(roles[i].r.name, s) == 0)
			return &roles[i];
	return NULL;
}

const struct arch_role *arch_role_find(const char *s)
{
	const struct role_row *row = row_of(s);
	return row ? &row->r : NULL;
}

enum arch_heads arch_role_heads(const char *role)
{
	const struct role_row *row = row_of(role);
	return row ? row->r.heads : ARCH_HEADS_NONE;
}

/* The projections whose output is added into the residual stream, a
 * sublayer's last (a table of its own beside roles[]) */
static const char *const residual_roles[] = {"o", "down", "expert_down", "shared_down"};

int arch_role_writes_residual(const char *role)
{
	for (size_t i = 0; i < sizeof residual_roles / sizeof residual_roles[0]; i++)
		if (!strcmp(role, residual_roles[i]))
			return 1;
	return 0;
}

const struct arch_role *arch_role_at(size_t i)
{
	return i < NROLES ? &roles[i].r : NULL;
}

int arch_multipliers_parse(const char *s)
{
	static const char *const names[] = {"none", "scalar", "row", "col", "rowcol"};

	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static const char *const sv_kind_names[ARCH_SV_KINDS] = {"attn", "ffn", "head"};
static const char *const reparam_names[] = {"none", "or", "er"};

static int reparam_find(const char *s, size_t n)
{
	for (int i = 1; i < 3; i++)
		if (strlen(reparam_names[i]) == n && !strncmp(s, reparam_names[i], n))
			return i;
	return -1;
}

int arch_scale_reparam_parse(const char *spec, unsigned char mode[3], char *canon, size_t len,
			     char *why)
{
	const char *p = spec;
	int seen[3] = {0, 0, 0};
	size_t used = 0;

	mode[0] = mode[1] = mode[2] = ARCH_REPARAM_NONE;
	if (*p && !strchr(p, '=')) {    /* one for every kind */
		int r = reparam_find(p, strlen(p));
		if (r < 0) {
			snprintf(why, 64, "'%.8s' is no reparameterization (or, er)", p);
			return -1;
		}
		mode[0] = mode[1] = mode[2] = (unsigned char)r;
	}
	while (*p && strchr(p, '=')) {
		const char *end = strchr(p, ','), *eq = strchr(p, '=');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		int k = -1, r;
		if (eq > p + n) {
			snprintf(why, 64, "'%.*s' is no KIND=R pair", (int)n > 12 ? 12 : (int)n, p);
			return -1;
		}
		for (int j = 0; j < ARCH_SV_KINDS; j++)
			if ((size_t)(eq - p) == strlen(sv_kind_names[j]) &&
			    !strncmp(p, sv_kind_names[j], (size_t)(eq - p)))
				k = j;
		if (k < 0 || seen[k]) {
			snprintf(why, 64, k < 0 ? "'%.*s' is no block kind (attn, ffn, head)" : "%.*s is given twice",
				 (int)(eq - p) > 12 ? 12 : (int)(eq - p), p);
			return -1;
		}
		if ((r = reparam_find(eq + 1, n - (size_t)(eq + 1 - p))) < 0) {
			snprintf(why, 64, "'%.*s' is no reparameterization (or, er)",
				 (int)(n - (size_t)(eq + 1 - p)) > 8 ? 8 : (int)(n - (size_t)(eq + 1 - p)), eq + 1);
			return -1;
		}
		seen[k] = 1;
		mode[k] = (unsigned char)r;
		p += n;
		if (*p == ',' && !*++p) {
			snprintf(why, 64, "a comma ends the list");
			return -1;
		}
		if (*p && !strchr(p, '=')) {
			snprintf(why, 64, "'%.12s' is no KIND=R pair", p);
			return -1;
		}
	}
	if (!canon)
		return 0;
	canon[0] = '\0';
	if (mode[0] == mode[1] && mode[1] == mode[2]) {
		snprintf(canon, len, "%s", mode[0] ? reparam_names[mode[0]] : "");
		return 0;
	}
	for (int j = 0; j < 3; j++) {
		int w;
		if (!mode[j])
			continue;
		w = snprintf(canon + used, len - used, "%s%s=%s", used ? "," : "", sv_kind_names[j],
			     reparam_names[mode[j]]);
		if (w < 0 || (size_t)w >= len - used) {
			snprintf(why, 64, "too long");
			return -1;
		}
		used += (size_t)w;
	}
	return 0;
}

int arch_gain_kind(const char *role)
{
	static const struct {
		const char *role;
		int kind;
	} gains[] = {
		{"attn_norm", ARCH_SV_ATTN}, {"q_norm", ARCH_SV_ATTN}, {"k_norm", ARCH_SV_ATTN},
		{"v_norm", ARCH_SV_ATTN}, {"o_in_norm", ARCH_SV_ATTN}, {"ffn_norm", ARCH_SV_FFN},
		{"gate_norm", ARCH_SV_FFN}, {"up_norm", ARCH_SV_FFN}, {"down_in_norm", ARCH_SV_FFN},
		{"final_norm", ARCH_SV_HEAD},
	};
	char base[SW_ROLE_MAX];
	size_t n = strlen(role);

	for (size_t i = 0; i < sizeof gains / sizeof gains[0]; i++)
		if (!strcmp(role, gains[i].role))
			return gains[i].kind;
	/* a design's gain of a reader: its reader's kind */
	if ((n > 8 && !strcmp(role + n - 8, "_gain_in")) || (n > 9 && !strcmp(role + n - 9, "_gain_out")))
		return arch_base_role(role, base, sizeof base) ? -1 : arch_sv_kind_of(base);
	return -1;
}

enum arch_reparam arch_reparam_of(const char *spec, const char *role)
{
	unsigned char mode[3];
	char why[64];
	int k = arch_gain_kind(role);

	if (k < 0 || !*spec || arch_scale_reparam_parse(spec, mode, NULL, 0, why))
		return ARCH_REPARAM_NONE;
	return (enum arch_reparam)mode[k];
}

int arch_reparam_base(const char *role, char *base, size_t len)
{
	size_t n = strlen(role);
	int which = n > 4 && !strcmp(role + n - 4, "_dir") ? 1 :
		    n > 4 && !strcmp(role + n - 4, "_mag") ? 2 : 0;

	if (!which || n - 4 >= len)
		return 0;
	memcpy(base, role, n - 4);
	base[n - 4] = '\0';
	return which;
}

static const struct {
	const char *name;
	unsigned char shared, in, out, dnp;
} sv_designs[] = {
	{"pre", 1, 0, 0, 0}, {"hg", 0, 1, 0, 0}, {"ap", 0, 0, 1, 0}, {"dp", 1, 0, 1, 0},
	{"hg+dp", 0, 1, 1, 0}, {"dnp", 1, 0, 0, 1}, {"hg+dnp", 0, 1, 0, 1},
};
#define NDESIGNS (sizeof sv_designs / sizeof sv_designs[0])

const char *arch_sv_kind_name(enum arch_sv_kind k)
{
	return sv_kind_names[k];
}

int arch_sv_kind_of(const char *role)
{
	const struct role_row *row = row_of(role);
	return row ? row->r.sv_kind : -1;
}

static int sv_design_find(const char *s, size_t n)
{
	for (size_t i = 0; i < NDESIGNS; i++)
		if (strlen(sv_designs[i].name) == n && !strncmp(s, sv_designs[i].name, n))
			return (int)i;
	return -1;
}

int arch_scale_design_parse(const char *spec, struct arch_scale_design *d, char *canon, size_t len,
			    char *why)
{
	int design[ARCH_SV_KINDS] = {0, 0, 0}, seen[ARCH_SV_KINDS] = {0, 0, 0};
	const char *p = spec;
	size_t used = 0;

	while (*p) {
		const char *end = strchr(p, ','), *eq;
		size_t n = end ? (size_t)(end - p) : strlen(p);
		int k = -1, i;

		eq = memchr(p, '=', n);
		if (eq) {
			for (int j = 0; j < ARCH_SV_KINDS; j++)
				if ((size_t)(eq - p) == strlen(sv_kind_names[j]) &&
				    !strncmp(p, sv_kind_names[j], (size_t)(eq - p)))
					k = j;
			if (k < 0) {
				snprintf(why, 64, "'%.*s' is no block kind (attn, ffn, head)",
					 (int)(eq - p) > 20 ? 20 : (int)(eq - p), p);
				return -1;
			}
			if (seen[k]) {
				snprintf(why, 64, "%s is given twice", sv_kind_names[k]);
				return -1;
			}
			n -= (size_t)(eq + 1 - p);
			p = eq + 1;
		} else if (p != spec || end) {
			snprintf(why, 64, "a design for every kind stands alone");
			return -1;
		}
		if ((i = sv_design_find(p, n)) < 0) {
			snprintf(why, 64, "'%.*s' is no design (" ARCH_SCALE_DESIGNS ")",
				 (int)n > 8 ? 8 : (int)n, p);
			return -1;
		}
		if (k == ARCH_SV_HEAD && sv_designs[i].dnp) {
			snprintf(why, 64, "no DNP for the head (its output is the logits)");
			return -1;
		}
		/* one design for every kind: DNP's only for attn and ffn */
		for (int j = 0; j < ARCH_SV_KINDS; j++)
			if ((k < 0 && !(j == ARCH_SV_HEAD && sv_designs[i].dnp)) || j == k) {
				design[j] = i;
				seen[j] = 1;
			}
		p += n;
		if (*p == ',' && !*++p) {
			snprintf(why, 64, "a comma ends the list");
			return -1;
		}
	}
	for (int j = 0; j < ARCH_SV_KINDS; j++) {
		d->shared[j] = sv_designs[design[j]].shared;
		d->in[j] = sv_designs[design[j]].in;
		d->out[j] = sv_designs[design[j]].out;
		d->dnp[j] = sv_designs[design[j]].dnp;
	}
	if (canon) {
		canon[0] = '\0';
		for (int j = 0; j < ARCH_SV_KINDS; j++) {
			int w;
			if (!design[j])
				continue;
			w = snprintf(canon + used, len - used, "%s%s=%s", used ? "," : "",
				     sv_kind_names[j], sv_designs[design[j]].name);
			if (w < 0 || (size_t)w >= len - used) {
				snprintf(why, 64, "too long");
				return -1;
			}
			used += (size_t)w;
		}
	}
	return 0;
}

static int rope_type_is(const struct sw_config *c, const char *type)
{
	return !strcmp(c->rope_type, type);
}

/* The parameters of the rope types computed, and the other keys' ranges:
 * what a model is built from must be a function. Not the readers' check:
 * the keys do not change the matrices a listing reads. */
static int check_function_keys(const struct sw_config *c, struct sw_err *err)
{
	const int64_t big = (int64_t)1 << 31;

	if (rope_type_is(c, "linear") || rope_type_is(c, "llama3")) {
		if (!(isfinite(c->rope_factor) && c->rope_factor > 0))
			return sw_fail(err, SW_EDATA, "config: rope_scaling %s: factor = %g is not a "
				       "finite positive number", c->rope_type, c->rope_factor);
	}
	if (rope_type_is(c, "llama3")) {
		if (!(isfinite(c->rope_low_freq_factor) && c->rope_low_freq_factor > 0 &&
		      isfinite(c->rope_high_freq_factor) &&
		      c->rope_high_freq_factor > c->rope_low_freq_factor))
			return sw_fail(err, SW_EDATA, "config: rope_scaling llama3: low_freq_factor = %g "
				       "and high_freq_factor = %g (0 < low < high expected)",
				       c->rope_low_freq_factor, c->rope_high_freq_factor);
		if (c->rope_original_max <= 0 || c->rope_original_max >= big)
			return sw_fail(err, SW_EDATA, "config: rope_scaling llama3: "
				       "original_max_position_embeddings = %lld is out of range",
				       (long long)c->rope_original_max);
	}
	if (!(isfinite(c->rope_partial) && c->rope_partial >= 0 && c->rope_partial <= 1))
		return sw_fail(err, SW_EDATA, "config: partial_rotary_factor = %g is not in (0, 1]",
			       c->rope_partial);
	if (c->sliding_window < 0 || c->sliding_window >= big)
		return sw_fail(err, SW_EDATA, "config: sliding_window = %lld is out of range",
			       (long long)c->sliding_window);
	if (c->max_window_layers < 0 || c->max_window_layers >= big)
		return sw_fail(err, SW_EDATA, "config: max_window_layers = %lld is out of range",
			       (long long)c->max_window_layers);
	return SW_OK;
}

/* The activations the step computes (layout.c's act_of): SiLU (swish
 * its other name), the tanh GELU by GPT-2's and Gemma's names, the exact
 * one; transformers' Llama, Mistral and Qwen classes take ACT2FN of
 * hidden_act too, so any family takes any of them */
#define ARCH_ACTS "silu, gelu_new, gelu_pytorch_tanh or gelu"
static int act_computed(const char *name)
{
	static const char *const acts[] = {"silu", "swish", "gelu_new", "gelu_pytorch_tanh", "gelu"};

	for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
		if (!strcmp(name, acts[i]))
			return 1;
	return 0;
}

/* a soft-cap or query_pre_attn_scalar: 0 (none, head_dim's) or a
 * finite positive number */
static int check_positive(const char *key, double v, struct sw_err *err)
{
	if (!(isfinite(v) && v >= 0))
		return sw_fail(err, SW_EDATA, "config: %s = %g is not a finite positive number", key, v);
	return SW_OK;
}

/* what the families' steps need of the config: GPT-2's positions a
 * length, its MLP no gate for a design to normalize */
static int check_family_keys(const struct sw_config *c, struct sw_err *err)
{
	int f = family_model_flags(c->arch), rc;
	struct arch_scale_design d;

	if ((rc = check_positive("attn_logit_softcapping", c->attn_softcap, err)) ||
	    (rc = check_positive("final_logit_softcapping", c->final_softcap, err)) ||
	    (rc = check_positive("query_pre_attn_scalar", c->query_pre_attn_scalar, err)))
		return rc;
	if ((f & FAMILY_POS_EMBED) && c->seq_len <= 0)
		return sw_fail(err, SW_EDATA, "%s learns its positions: seq_len (n_positions) is "
			       "needed", c->arch);
	if ((f & FAMILY_PLAIN_MLP) && c->scale_design[0] &&
	    !arch_scale_design_parse(c->scale_design, &d, NULL, 0, (char[64]){0}) &&
	    d.dnp[ARCH_SV_FFN])
		return sw_fail(err, SW_EDATA, "scale design ffn=dnp is not supported for %s (its MLP "
			       "has no gate: DNP normalizes gate and up)", c->arch);
	return SW_OK;
}

/* What the mixture of experts is computed with: the Llama step's gated
 * MLP without biases or post-norms, no multipliers, no norm before down,
 * the ffn kind's Pre-Norm gain where the scale design keeps it */
static int moe_check(const struct sw_config *c, struct sw_err *err)
{
	int f = family_model_flags(c->arch);
	struct arch_scale_design d;

	if (!c->n_experts)
		return SW_OK;
	if (f & (FAMILY_PLAIN_MLP | FAMILY_LINEAR_BIAS | FAMILY_POST_NORMS | FAMILY_LAYERNORM))
		return sw_fail(err, SW_EDATA, "a mixture of experts is not supported for %s (the "
			       "Llama family's is)", c->arch);
	if (strcmp(c->multipliers, "none") && c->multipliers[0])
		return sw_fail(err, SW_EDATA, "a mixture of experts with multipliers (%s) is not "
			       "supported yet", c->multipliers);
	if (c->norm_everywhere)
		return sw_fail(err, SW_EDATA, "a mixture of experts with norm_everywhere is not "
			       "supported yet");
	if (c->scale_design[0] && !arch_scale_design_parse(c->scale_design, &d, NULL, 0, (char[64]){0}) &&
	    (!d.shared[ARCH_SV_FFN] || d.in[ARCH_SV_FFN] || d.out[ARCH_SV_FFN] || d.dnp[ARCH_SV_FFN]))
		return sw_fail(err, SW_EDATA, "a mixture of experts with the scale design ffn=%s is "
			       "not supported yet (ffn=pre is)", c->scale_design);
	return SW_OK;
}

int arch_model_check(const struct sw_config *c, struct sw_err *err)
{
	int rc;

	if (c->head_dim % 2 && !(family_model_flags(c->arch) & FAMILY_POS_EMBED))
		return sw_fail(err, SW_EDATA, "head_dim %lld is odd: RoPE rotates pairs",
			       (long long)c->head_dim);
	/* Meta's params.json names the scaling but not its factor (metallama.h) */
	if (rope_type_is(c, "use_scaled_rope"))
		return sw_fail(err, SW_EDATA, "use_scaled_rope without rope_scaling_factor is not "
			       "supported (the factor is not in the file: Llama 3.1's is 8, 3.2's 32)");
	if (c->rope_type[0] && !rope_type_is(c, "default") && !rope_type_is(c, "linear") &&
	    !rope_type_is(c, "llama3"))
		return sw_fail(err, SW_EDATA, "rope_scaling type '%s' is not supported (" ARCH_ROPE_TYPES
			       " are)", c->rope_type);
	if (c->rope_partial != 0 && c->rope_partial != 1)
		return sw_fail(err, SW_EDATA, "partial_rotary_factor %g is not supported (RoPE on "
			       "every dimension of a head is)", c->rope_partial);
	if (c->hidden_act[0] && !act_computed(c->hidden_act))
		return sw_fail(err, SW_EDATA, "hidden_act '%s' is not supported (" ARCH_ACTS " are)",
			       c->hidden_act);
	if (c->attention_bias || c->mlp_bias)
		return sw_fail(err, SW_EDATA, "%s is not supported (biases on %s are not computed)",
			       c->attention_bias ? "attention_bias" : "mlp_bias",
			       c->attention_bias ? "q, k, v and o" : "gate, up and down");
	if (c->unsupported[0])
		return sw_fail(err, SW_EDATA, "%s is not supported", c->unsupported);
	if ((rc = moe_check(c, err)))
		return rc;
	if ((rc = check_family_keys(c, err)))
		return rc;
	return check_function_keys(c, err);
}

int arch_window_check(const struct sw_config *c, int64_t T, struct sw_err *err)
{
	if (c->sliding_window && T > c->sliding_window)
		return sw_fail(err, SW_EDATA, "sliding_window %lld is shorter than the sequences of %lld "
			       "tokens (attention over a window is not computed; sequences of at most "
			       "%lld tokens are the same without it)", (long long)c->sliding_window,
			       (long long)T, (long long)c->sliding_window);
	return SW_OK;
}

int arch_rope_inv_freq(const struct sw_config *c, float *inv)
{
	size_t half = (size_t)c->head_dim / 2;

	if (c->rope_type[0] && !rope_type_is(c, "default") && !rope_type_is(c, "linear") &&
	    !rope_type_is(c, "llama3"))
		return -1;
	/* the default: Hugging Face's float32 1/theta^(2i/hd), here in double
	 * and rounded once (what every checkpoint so far was computed with) */
	for (size_t i = 0; i < half; i++)
		inv[i] = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / (double)c->head_dim));
	if (rope_type_is(c, "linear"))
		for (size_t i = 0; i < half; i++)
			inv[i] = inv[i] / (float)c->rope_factor;
	if (rope_type_is(c, "llama3")) {
		/* _compute_llama3_parameters: its Python numbers (the band edges,
		 * high - low) in double, then each tensor step in float32, as
		 * torch rounds them; 2 pi / t is t.reciprocal() * 2 pi there */
		const float factor = (float)c->rope_factor, lo = (float)c->rope_low_freq_factor,
			    n = (float)c->rope_original_max, two_pi = (float)(2 * M_PI),
			    low_wavelen = (float)((double)c->rope_original_max / c->rope_low_freq_factor),
			    high_wavelen = (float)((double)c->rope_original_max / c->rope_high_freq_factor),
			    span = (float)(c->rope_high_freq_factor - c->rope_low_freq_factor);
		for (size_t i = 0; i < half; i++) {
			float w = (1.0f / inv[i]) * two_pi;
			float f = w > low_wavelen ? inv[i] / factor : inv[i];
			if (!(w < high_wavelen) && !(w > low_wavelen)) {
				float s = ((1.0f / w) * n - lo) / span;
				f = (1.0f - s) * f / factor + s * f;
			}
			inv[i] = f;
		}
	}
	return 0;
}

int arch_default_head_dim(struct sw_config *c, struct sw_err *err)
{
	if (c->n_heads <= 0)
		return sw_fail(err, SW_EDATA, "n_heads is %lld", (long long)c->n_heads);
	if (c->d_model % c->n_heads)
		return sw_fail(err, SW_EDATA, "d_model %lld is not a multiple of n_heads %lld, "
			       "and no head_dim is given", (long long)c->d_model, (long long)c->n_heads);
	c->head_dim = c->d_model / c->n_heads;
	return SW_OK;
}

int64_t arch_default_d_ff(int64_t d_model)
{
	return ((d_model * 8 / 3 + 7) / 8) * 8;
}

int arch_config_check(const struct sw_config *c, struct sw_err *err)
{
	const int64_t big = (int64_t)1 << 31;
	const struct { const char *name; int64_t v; } dims[] = {
		{"vocab_size", c->vocab_size}, {"d_model", c->d_model},
		{"n_layers", c->n_layers}, {"n_heads", c->n_heads},
		{"n_kv_heads", c->n_kv_heads}, {"head_dim", c->head_dim},
		{"d_ff", c->d_ff},
	};

	for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
		if (dims[i].v <= 0 || dims[i].v >= big)
			return sw_fail(err, SW_EDATA,
				       "config: %s = %lld is out of range",
				       dims[i].name, (long long)dims[i].v);
	if (c->seq_len < 0 || c->seq_len >= big)
		return sw_fail(err, SW_EDATA, "config: seq_len = %lld is out of range",
			       (long long)c->seq_len);
	if (c->n_heads % c->n_kv_heads != 0)
		return sw_fail(err, SW_EDATA,
			       "config: n_heads = %lld is not a multiple of n_kv_heads = %lld",
			       (long long)c->n_heads, (long long)c->n_kv_heads);
	if (c->n_heads * c->head_dim >= big)
		return sw_fail(err, SW_EDATA, "config: n_heads*head_dim is out of range");
	/* config.json's reader already refuses Inf; an HDF5 attribute can hold it */
	if (!(isfinite(c->norm_eps) && c->norm_eps >= 0))
		return sw_fail(err, SW_EDATA, "config: norm_eps = %g is not a finite nonnegative number",
			       c->norm_eps);
	/* RoPE's angles are positions over rope_theta^(2i/d): a base of 0
	 * (or 1) gives infinite (or no) rotation */
	if (!(isfinite(c->rope_theta) && c->rope_theta > 1))
		return sw_fail(err, SW_EDATA, "config: rope_theta = %g is not a finite number above 1",
			       c->rope_theta);
	if (arch_multipliers_parse(c->multipliers) < 0)
		return sw_fail(err, SW_EDATA, "config: multipliers = '%s' (expected "
			       ARCH_MULTIPLIERS_LIST ")", c->multipliers);
	{
		unsigned char mode[3];
		char why[64];
		if (arch_scale_reparam_parse(c->scale_reparam, mode, NULL, 0, why))
			return sw_fail(err, SW_EDATA, "config: scale_reparam = '%s': %s", c->scale_reparam, why);
	}
	if (c->scale_reparam[0] && !c->scale_vectors)
		return sw_fail(err, SW_EDATA, "config: scale_reparam = '%s' without scale vectors",
			       c->scale_reparam);
	if (c->n_experts) {
		/* the mixture of experts' sizes (sw_config) */
		if (c->n_experts < 0 || c->n_experts > 4096)
			return sw_fail(err, SW_EDATA, "config: n_experts = %lld is out of range (1..4096)",
				       (long long)c->n_experts);
		if (c->n_experts_active < 1 || c->n_experts_active > c->n_experts)
			return sw_fail(err, SW_EDATA, "config: n_experts_active = %lld is not in 1..%lld",
				       (long long)c->n_experts_active, (long long)c->n_experts);
		if (c->n_shared_experts < 0 || c->n_shared_experts > 1)
			return sw_fail(err, SW_EDATA, "config: n_shared_experts = %lld (0 or 1 are "
				       "supported)", (long long)c->n_shared_experts);
		if (c->moe_d_ff <= 0 || c->moe_d_ff >= big ||
		    (c->n_shared_experts && (c->shared_d_ff <= 0 || c->shared_d_ff >= big)))
			return sw_fail(err, SW_EDATA, "config: an expert's width (moe_d_ff %lld, "
				       "shared_d_ff %lld) is out of range", (long long)c->moe_d_ff,
				       (long long)c->shared_d_ff);
		if (c->moe_dense_layers < 0 || c->moe_dense_layers > c->n_layers)
			return sw_fail(err, SW_EDATA, "config: moe_dense_layers = %lld is not in 0..%lld",
				       (long long)c->moe_dense_layers, (long long)c->n_layers);
		if (!(isfinite(c->moe_aux_coef) && c->moe_aux_coef >= 0))
			return sw_fail(err, SW_EDATA, "config: moe_aux_coef = %g is not a finite "
				       "nonnegative number", c->moe_aux_coef);
	}
	if (c->scale_design[0]) {
		struct arch_scale_design d;
		char why[64];
		if (arch_scale_design_parse(c->scale_design, &d, NULL, 0, why))
			return sw_fail(err, SW_EDATA, "config: scale_design = '%s': %s",
				       c->scale_design, why);
		if (!c->scale_vectors)
			return sw_fail(err, SW_EDATA, "config: scale_design = '%s' without scale vectors",
				       c->scale_design);
		if (strcmp(c->multipliers, "none"))
			return sw_fail(err, SW_EDATA, "config: scale_design = '%s' with multipliers = %s "
				       "(one or the other)", c->scale_design, c->multipliers);
		if (d.dnp[ARCH_SV_ATTN] && !c->qk_norm)
			return sw_fail(err, SW_EDATA, "config: scale_design = '%s' without qk_norm "
				       "(DNP on q and k is QK-norm)", c->scale_design);
		if (c->tie_embeddings && (d.in[ARCH_SV_HEAD] || d.out[ARCH_SV_HEAD]))
			return sw_fail(err, SW_EDATA, "config: scale_design = '%s' has gains on the head, "
				       "which is tied to the embedding", c->scale_design);
	}
	return SW_OK;
}

int arch_hf_name(const char *role, int layer, char *buf, size_t len)
{
	const struct role_row *row = row_of(role);
	int n;

	if (!row || !row->hf)
		return -1;
	if (row->r.in_layer)
		n = snprintf(buf, len, "model.layers.%d.%s", layer, row->hf);
	else
		n = snprintf(buf, len, "%s", row->hf);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int arch_base_role(const char *role, char *base, size_t len)
{
	static const char *const suffixes[] = {"_bias", "_mult", "_mult_col", "_gain_in", "_gain_out"};
	size_t n = strlen(role);
	const char *us = NULL;

	for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
		size_t k = strlen(suffixes[i]);
		if (n > k && !strcmp(role + n - k, suffixes[i]))
			us = role + n - k;
	}
	if (!us)
		return -1;
	if ((size_t)(us - role) >= len)
		return -1;
	memcpy(base, role, (size_t)(us - role));
	base[us - role] = '\0';
	return 0;
}

int64_t arch_dim_value(const struct sw_config *c, enum arch_dim d)
{
	switch (d) {
	case ARCH_DIM_NONE: return 0;
	case ARCH_DIM_V: return c->vocab_size;
	case ARCH_DIM_D: return c->d_model;
	case ARCH_DIM_F: return c->d_ff;
	case ARCH_DIM_HD: return c->head_dim;
	case ARCH_DIM_H: return c->n_heads;
	case ARCH_DIM_KV: return c->n_kv_heads;
	case ARCH_DIM_HHD: return c->n_heads * c->head_dim;
	case ARCH_DIM_KVHD: return c->n_kv_heads * c->head_dim;
	}
	return 0;
}

int arch_role_shape(const struct sw_config *c, const char *role, int64_t shape[2])
{
	const struct role_row *row = row_of(role);

	if (!row)
		return -1;
	shape[0] = arch_dim_value(c, row->r.shape.a);
	shape[1] = arch_dim_value(c, row->r.shape.b);
	switch (row->r.shape.kind) {
	case ARCH_SHAPE_LINEAR:
	case ARCH_SHAPE_LOOKUP:
		return 2;
	case ARCH_SHAPE_VECTOR:
		return 1;
	default:
		return -1;
	}
}

void arch_size_from_rows(struct sw_config *c, const char *role, int64_t rows)
{
	const struct role_row *row = row_of(role);
	int64_t *size = NULL;

	switch (row ? row->r.gives : ARCH_DIM_NONE) {
	case ARCH_DIM_V: size = &c->vocab_size; break;
	case ARCH_DIM_F: size = &c->d_ff; break;
	default: break;
	}
	if (size && !*size)
		*size = rows;
}

int arch_info_for_role(const struct sw_config *c, const char *role, int layer,
		       struct sw_tensor_info *t)
{
	const struct role_row *row = row_of(role);

	if (!row)
		return -1;
	snprintf(t->role, sizeof t->role, "%s", role);
	t->block = row->r.block;
	t->mup = row->r.mup;
	t->group = row->r.group;
	t->norm_type = row->r.norm_type;
	t->layer = row->r.in_layer ? layer : -1;
	t->expert = -1;
	t->n_heads = (int)arch_dim_value(c, row->r.n_heads);
	t->head_dim = t->n_heads ? (int)c->head_dim : 0;
	/* another family's role: the caller names the tensor */
	return row->hf ? arch_hf_name(role, t->layer, t->name, sizeof t->name) : 0;
}

/* Strict decimal layer number: digits only, no sign, no overflow. */
static int parse_layer(const char *s, const char **end)
{
	long v = 0;

	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (*s - '0');
		if (v > 1000000)
			return -1;
		s++;
	}
	*end = s;
	return (int)v;
}

int arch_info_other(const char *name, int layer, struct sw_tensor_info *t)
{
	snprintf(t->name, sizeof t->name, "%s", name);
	snprintf(t->role, sizeof t->role, "%s", ARCH_ROLE_OTHER);
	t->block = SW_BLOCK_OTHER;
	t->mup = SW_MUP_VECTOR_LIKE;
	t->group = SW_GROUP_UNKNOWN;
	t->norm_type = SW_NORM_NONE;
	t->layer = layer;
	t->expert = -1;
	t->n_heads = t->head_dim = 0;
	return 0;
}

int arch_info_from_hf_name(const struct sw_config *c, const char *name,
			   struct sw_tensor_info *t)
{
	static const char prefix[] = "model.layers.";
	const size_t plen = sizeof prefix - 1;

	if (strncmp(name, prefix, plen) == 0) {
		const char *rest;
		int layer = parse_layer(name + plen, &rest);

		if (layer >= 0 && *rest == '.') {
			if (layer >= c->n_layers)
				return -1;
			for (size_t i = 0; i < NROLES; i++)
				if (roles[i].r.in_layer && roles[i].hf &&
				    strcmp(rest + 1, roles[i].hf) == 0) {
					arch_info_for_role(c, roles[i].r.name, layer, t);
					snprintf(t->name, sizeof t->name, "%s", name);
					return 0;
				}
			/* an unknown tensor inside a layer: keep its layer */
			return arch_info_other(name, layer, t);
		}
	}
	for (size_t i = 0; i < NROLES; i++)
		if (!roles[i].r.in_layer && roles[i].hf && strcmp(name, roles[i].hf) == 0) {
			arch_info_for_role(c, roles[i].r.name, -1, t);
			return 0;
		}
	return arch_info_other(name, -1, t);
}

static int shape_is(const struct sw_tensor_info *t, int rank, int64_t a, int64_t b)
{
	if (t->rank != rank)
		return 0;
	return (rank < 1 || t->shape[0] == a) && (rank < 2 || t->shape[1] == b);
}

int arch_check_shape(const struct sw_config *c, const struct sw_tensor_info *t,
		     struct sw_err *err)
{
	const struct role_row *row = row_of(t->role);
	char got[96];
	int64_t a, b, dout, din, hd = c->head_dim;

	if (!row)
		return SW_OK;
	a = arch_dim_value(c, row->r.shape.a);
	b = arch_dim_value(c, row->r.shape.b);
	sw_shape_format(t->rank, t->shape, got, sizeof got);
	switch (row->r.shape.kind) {
	case ARCH_SHAPE_NONE:
		return SW_OK;
	case ARCH_SHAPE_LINEAR:
	case ARCH_SHAPE_LOOKUP:
		if (!shape_is(t, 2, a, b))
			return sw_fail(err, SW_EDATA,
				       "%s: shape %s disagrees with the config (%lldx%lld)",
				       t->name, got, (long long)a, (long long)b);
		/* the embedding, a lookup of rows, is the operator from one-hot a to b */
		dout = row->r.shape.kind == ARCH_SHAPE_LOOKUP ? b : a;
		din = row->r.shape.kind == ARCH_SHAPE_LOOKUP ? a : b;
		if (t->n_heads && (int64_t)t->n_heads * t->head_dim !=
		    (row->r.heads == ARCH_HEADS_COLS ? din : dout))
			return sw_fail(err, SW_EDATA,
				       "%s: n_heads %d x head_dim %d disagrees with its shape %s",
				       t->name, t->n_heads, t->head_dim, got);
		if (t->n_heads && t->head_dim != hd)
			return sw_fail(err, SW_EDATA,
				       "%s: head_dim %d disagrees with the config (%lld)",
				       t->name, t->head_dim, (long long)hd);
		return SW_OK;
	case ARCH_SHAPE_VECTOR:
		if (!shape_is(t, 1, a, 0))
			return sw_fail(err, SW_EDATA,
				       "%s: shape %s disagrees with the config (%lld)",
				       t->name, got, (long long)a);
		return SW_OK;
	case ARCH_SHAPE_EITHER:
		if (!shape_is(t, 1, a, 0) && !shape_is(t, 1, b, 0))
			return sw_fail(err, SW_EDATA,
				       "%s: shape %s disagrees with the config (%lld or %lld)",
				       t->name, got, (long long)a, (long long)b);
		return SW_OK;
	case ARCH_SHAPE_MULT_COL:
		if (!shape_is(t, 1, b, 0))
			return sw_fail(err, SW_EDATA, "%s: shape %s is not the column multiplier "
				       "of a %lldx%lld matrix", t->name, got, (long long)a,
				       (long long)b);
		return SW_OK;
	case ARCH_SHAPE_MULT:
		/* scalar, per row (d_out) or per column (d_in) */
		if (t->rank == 0 || shape_is(t, 1, 1, 0) || shape_is(t, 1, a, 0) ||
		    shape_is(t, 1, b, 0))
			return SW_OK;
		return sw_fail(err, SW_EDATA,
			       "%s: shape %s fits no multiplier of a %lldx%lld matrix",
			       t->name, got, (long long)a, (long long)b);
	case ARCH_SHAPE_ONE:
		if (t->rank == 0 || shape_is(t, 1, 1, 0))
			return SW_OK;
		return sw_fail(err, SW_EDATA, "%s: shape %s is not one value", t->name, got);
	}
	return SW_OK;
}

void arch_model_order_key(const struct sw_tensor_info *t, struct arch_order_key *k)
{
	const struct arch_role *r = arch_role_find(t->role);

	if (!r) {
		k->section = t->layer >= 0 ? 1 : 3;
		k->order = 99;
	} else {
		k->section = r->order < 50 ? 0 : r->order < 100 ? 1 : 2;
		k->order = r->order;
	}
	k->layer = k->section == 1 ? t->layer : 0;
	k->expert = t->expert;
}

int arch_model_order_key_cmp(const struct arch_order_key *a, const struct arch_order_key *b)
{
	if (a->section != b->section)
		return a->section < b->section ? -1 : 1;
	if (a->layer != b->layer)
		return a->layer < b->layer ? -1 : 1;
	if (a->order != b->order)
		return a->order < b->order ? -1 : 1;
	if (a->expert != b->expert)
		return a->expert < b->expert ? -1 : 1;
	return 0;
}

int arch_model_order_cmp(const void *pa, const void *pb)
{
	const struct sw_tensor_info *a = pa, *b = pb;
	struct arch_order_key ka, kb;
	int c;

	arch_model_order_key(a, &ka);
	arch_model_order_key(b, &kb);
	c = arch_model_order_key_cmp(&ka, &kb);
	return c ? c : strcmp(a->name, b->name);
}
