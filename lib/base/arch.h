/*
 * arch.h - the Llama architecture: model config, what each tensor role is,
 * the shapes the config implies, Hugging Face tensor names, model order.
 *
 * Metadata comes from the architecture, never guessed from a name alone:
 * a role fixes the block type, the mup class, the layer group and the
 * norm type (Llama's input_layernorm, post_attention_layernorm and
 * model.norm are Input-Norms; q_norm/k_norm are Output-Norms; scale-vectors
 * paper, section 2.2). Both file readers, the writer and the trainer use
 * this one table.
 */
#ifndef SW_ARCH_H
#define SW_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

struct sw_config {
	char arch[32];          /* llama (also mistral, qwen2, qwen3 from HF) */
	int64_t vocab_size;     /* V */
	int64_t d_model;        /* D */
	int64_t n_layers;       /* L */
	int64_t n_heads;        /* H */
	int64_t n_kv_heads;     /* KV: H % KV == 0 (GQA) */
	int64_t head_dim;       /* hd: D / H unless given */
	int64_t d_ff;           /* F */
	int64_t seq_len;        /* T; 0 when unknown */
	double rope_theta;
	double norm_eps;
	int tie_embeddings;     /* no lm_head tensor: the head is embed^T */
	int qk_norm;
	char multipliers[16];   /* none | scalar | row | col */
	int norm_everywhere;    /* RMSNorm also before o_proj and down_proj */
	int scale_vectors;      /* RMSNorms have learnable gains (default 1) */
	char scale_design[48];  /* "" or arch_scale_design_parse's canonical form */
	char scale_reparam[32]; /* "" or arch_scale_reparam_parse's canonical form */
	/*
	 * What else a Hugging Face config says of the function (0 or "" in
	 * every field: Llama's default). RoPE's frequencies (rope_scaling,
	 * arch_rope_inv_freq): rope_type "" or "default" (none), "linear"
	 * (each frequency over rope_factor) or "llama3" (Llama 3.1's bands:
	 * rope_factor, rope_low_freq_factor, rope_high_freq_factor,
	 * rope_original_max); another type is kept by name, for
	 * arch_model_check to refuse (a listing needs no model).
	 */
	char rope_type[32];
	double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
	int64_t rope_original_max;      /* original_max_position_embeddings */
	double rope_partial;            /* partial_rotary_factor; 0: absent (1) */
	char hidden_act[32];            /* "" (silu) or the config's name */
	int64_t sliding_window;         /* 0: none; else each token sees the last W */
	int64_t max_window_layers;      /* Qwen2's: layers below it attend fully */
	int attention_bias;             /* Llama's, Qwen3's: q, k, v, o biases */
	int mlp_bias;                   /* Llama's: gate, up, down biases */
	/* Gemma2's: attn_logit_softcapping, final_logit_softcapping (0:
	 * none), query_pre_attn_scalar (0: head_dim, the scores' scale its
	 * -1/2 power) */
	double attn_softcap, final_softcap;
	double query_pre_attn_scalar;
	/* a config.json key set to what the step does not compute (GPT-2's
	 * scale_attn_by_inverse_layer_idx true, reorder_and_upcast_attn
	 * true, scale_attn_weights false; GPT-2's and Gemma's GGUF), by
	 * name, for arch_model_check to refuse ("" none; a listing needs no
	 * model) */
	char unsupported[96];
	/*
	 * A mixture of experts in the feed-forward sublayer (sw-train --moe;
	 * n_experts 0: dense). Layers from moe_dense_layers on route each
	 * token to n_experts_active of n_experts SwiGLU experts of width
	 * moe_d_ff (lib/model/moe.h): the router's softmax, its top k
	 * weights renormalized to sum 1 where moe_renorm (Mixtral) or not
	 * (Qwen2-MoE's norm_topk_prob false); n_shared_experts (0 or 1) a
	 * shared expert of width shared_d_ff beside them, scaled by the
	 * sigmoid of its gate (Qwen2-MoE). moe_aux_coef weighs the
	 * load-balancing loss in the training objective. The checkpoint
	 * names the experts as Mixtral's files (Qwen2-MoE's with a shared
	 * expert): family_role_name.
	 */
	int64_t n_experts, n_experts_active, n_shared_experts, moe_d_ff, shared_d_ff;
	int64_t moe_dense_layers;
	int moe_renorm;
	double moe_aux_coef;
};
/* Whether layer l of c is a mixture of experts */
static inline int arch_layer_is_moe(const struct sw_config *c, int64_t l)
{
	return c->n_experts > 0 && l >= c->moe_dense_layers;
}

/* The learnable multipliers' kinds (sw_config.multipliers), the one
 * list: 0 none, 1 scalar, 2 row, 3 col, 4 rowcol (a row and a column
 * multiplier, the roles X_mult and X_mult_col); -1 for another name. */
#define ARCH_MULTIPLIERS_LIST "none, scalar, row, col or rowcol"
int arch_multipliers_parse(const char *s);

/*
 * The scale-vectors paper's designs (section 3) for the gains of a
 * Pre-Norm and the matrices that read its output, per block kind: attn
 * (attn_norm; q, k, v), ffn (ffn_norm; gate, up), head (final_norm;
 * lm_head). Per kind one of
 *   pre    the standard: one gain shared by the readers, W (g . Norm(x))
 *   hg     heterogeneous: a gain per reader, W (g_W . Norm(x)) (eq. 4):
 *          X_gain_in, no shared gain
 *   ap     after placement: g_W . (W Norm(x)) (eq. 5): X_gain_out
 *   dp     dual placement: g_W . (W (g . Norm(x))) (eq. 6): the shared
 *          gain and X_gain_out
 *   hg+dp  both sides per reader: g_W . (W (g'_W . Norm(x))): X_gain_in
 *          and X_gain_out, no shared gain
 *   dnp    dual normalized placement: g_W . Norm(W (g . Norm(x))) (eq. 7):
 *          the shared gain, and an RMSNorm of each reader's output with
 *          its gain (Output-Norm type): per head on q, k, v (on q and k
 *          that is QK-norm: q_norm, k_norm; v_norm), over d_ff on gate and
 *          up (gate_norm, up_norm); not for the head
 *   hg+dnp the same with a gain per reader's input (X_gain_in) instead of
 *          the shared one
 * A spec is "" (pre everywhere), one design for every kind ("hg"), or
 * KIND=DESIGN pairs joined by commas ("attn=hg,ffn=dp"; "dnp" alone is
 * attn=dnp,ffn=dnp); the canonical
 * form (what sw_config.scale_design holds) lists the kinds not at pre in
 * the order attn, ffn, head. Every gain starts at 1.
 */
enum arch_sv_kind { ARCH_SV_ATTN, ARCH_SV_FFN, ARCH_SV_HEAD, ARCH_SV_KINDS };
struct arch_scale_design {
	/* per kind: the shared Pre-Norm gain kept, the readers' input and
	 * output gains, the readers' outputs normalized (DNP) */
	unsigned char shared[ARCH_SV_KINDS], in[ARCH_SV_KINDS], out[ARCH_SV_KINDS],
		dnp[ARCH_SV_KINDS];
};
#define ARCH_SCALE_DESIGNS "pre, hg, ap, dp, hg+dp, dnp or hg+dnp"
/* Parse spec into d and, with canon non-NULL, its canonical form
 * (len >= sizeof sw_config.scale_design). 0, or -1 with a reason in why
 * (a short phrase, len >= 64). */
int arch_scale_design_parse(const char *spec, struct arch_scale_design *d, char *canon, size_t len,
			    char *why);
/*
 * The scale-vectors paper's reparameterizations (section 3.3) of the
 * gains of a block kind (arch_gain_kind: each norm's, and a design's
 * X_gain_in, X_gain_out): the gain gamma (n values) is no longer trained
 * itself but computed from a direction alpha (X_dir, n values) and a
 * magnitude beta (X_mag, one):
 *   or   gamma = beta alpha / rms(alpha)        (beta Norm(alpha), eq. 8)
 *   er   gamma = e^beta e^(alpha - mean alpha)  (eq. 9)
 * rms(a) = sqrt(mean a^2). Both start at gamma = 1: or from alpha = 1,
 * beta = 1; er from alpha = 0, beta = 0. The checkpoint keeps alpha, beta
 * and gamma (gamma as the gain's role, so that readers see the gain the
 * model uses). A spec is "" (none), one for every kind ("or"), or
 * KIND=R pairs ("attn=or,ffn=er"; kinds not named keep their gains);
 * the canonical form (sw_config.scale_reparam) is the single name when
 * every kind has the same, else the pairs in the order attn, ffn, head.
 * Parse spec into mode[kind] and, with canon non-NULL, its canonical
 * form (len >= sizeof sw_config.scale_reparam): 0, or -1 with a reason
 * in why (len >= 64).
 */
enum arch_reparam { ARCH_REPARAM_NONE, ARCH_REPARAM_OR, ARCH_REPARAM_ER };
#define ARCH_SCALE_REPARAMS "or, er, or KIND=R,... over attn, ffn, head"
int arch_scale_reparam_parse(const char *spec, unsigned char mode[3], char *canon, size_t len,
			     char *why);
/* The block kind a gain role belongs to (attn: attn_norm, the q, k, v
 * gains, q_norm, k_norm, v_norm, o_in_norm; ffn: ffn_norm, the gate and
 * up gains, gate_norm, up_norm, down_in_norm; head: final_norm, the
 * head's gains), or -1 for another role. */
int arch_gain_kind(const char *role);
/* The reparameterization spec gives a gain role: ARCH_REPARAM_*, NONE for
 * a role that is no gain (or a spec that does not parse). */
enum arch_reparam arch_reparam_of(const char *spec, const char *role);
/* For a role X_dir (1) or X_mag (2), the gain X into base; 0 for another
 * role (or a base longer than len). */
int arch_reparam_base(const char *role, char *base, size_t len);


/* The kind whose Pre-Norm a linear role reads (q, k, v: attn; gate, up:
 * ffn; lm_head: head), or -1. */
int arch_sv_kind_of(const char *role);
/* "attn", "ffn", "head" */
const char *arch_sv_kind_name(enum arch_sv_kind k);

/* Ranges: everything positive, H % KV == 0, sizes < 2^31; multipliers and
 * scale_design known, and a scale design only with scale vectors, without
 * multipliers, with QK-norm under attn DNP and (for the head) with an
 * untied head. */
int arch_config_check(const struct sw_config *c, struct sw_err *err);

/*
 * What a model needs beyond arch_config_check: what the model computes
 * (lib/model, CPU and CUDA) is asked of the config, and a function it
 * does not compute is refused by name, SW_EDATA: an odd head_dim (RoPE
 * rotates pairs), a rope_type other than default, linear and llama3,
 * partial_rotary_factor other than 1, hidden_act other than silu (or
 * swish, its other name), attention_bias or mlp_bias (Qwen2's q, k, v
 * biases are its own, not these); and the parameters of those it computes out
 * of range (a factor that is no finite positive number, llama3's bands
 * not 0 < low_freq_factor < high_freq_factor, its original context not
 * a size; a negative sliding_window). The readers accept these (a
 * listing or a norm needs no model); the model's builders call this.
 */
#define ARCH_ROPE_TYPES "default, linear and llama3"
int arch_model_check(const struct sw_config *c, struct sw_err *err);
/*
 * A sliding window (Mistral's sliding_window) is not computed: attention
 * over sequences of T tokens, T <= the window, is the same without it,
 * and longer ones are refused (SW_EDATA, naming both).
 */
int arch_window_check(const struct sw_config *c, int64_t T, struct sw_err *err);
/*
 * RoPE's inverse frequencies, head_dim/2 of them, in float32 as Hugging
 * Face's modeling_rope_utils.py computes them, the one place the model,
 * its R-operator and the CUDA kernels take them from: inv_i =
 * 1/rope_theta^(2i/head_dim) (in double, rounded once); linear: inv_i /
 * factor; llama3: with wavelength w_i = 2 pi / inv_i, the original
 * context N = rope_original_max, low = N / low_freq_factor, high = N /
 * high_freq_factor: inv_i where w_i < high, inv_i / factor where w_i >
 * low, and between them (1 - s) inv_i / factor + s inv_i, s = (N / w_i -
 * low_freq_factor) / (high_freq_factor - low_freq_factor), each step in
 * float32 as torch computes it. 0, or -1 for a rope_type it does not
 * compute (arch_model_check refuses those first).
 */
int arch_rope_inv_freq(const struct sw_config *c, float *inv);

/*
 * The defaults of the sizes a format or a command line may leave out, the
 * one place each is written. head_dim: d_model / n_heads, which must then
 * divide (SW_EDATA otherwise, in scalewatch's names: callers prefix their
 * format's). d_ff: Llama's SwiGLU width, 2/3 of 4 d_model rounded up to a
 * multiple of 8.
 */
int arch_default_head_dim(struct sw_config *c, struct sw_err *err);
int64_t arch_default_d_ff(int64_t d_model);

/* How an attention projection's heads lie: none; one head_dim block of
 * rows each, RoPE-rotated (q, k: the rows the GGUF and llama2.c layouts
 * permute) or not (v); one block of columns each (o). */
enum arch_heads { ARCH_HEADS_NONE, ARCH_HEADS_ROWS_ROPE, ARCH_HEADS_ROWS, ARCH_HEADS_COLS };

/*
 * A role's shape in the config's sizes: V vocab_size, D d_model, F d_ff,
 * hd head_dim, H n_heads, KV n_kv_heads, and the products H*hd (all of
 * q's heads) and KV*hd (all of k's or v's). arch_dim_value gives a
 * symbol's value under a config (0 for NONE).
 */
enum arch_dim {
	ARCH_DIM_NONE, ARCH_DIM_V, ARCH_DIM_D, ARCH_DIM_F, ARCH_DIM_HD, ARCH_DIM_H, ARCH_DIM_KV,
	ARCH_DIM_HHD, ARCH_DIM_KVHD
};
int64_t arch_dim_value(const struct sw_config *c, enum arch_dim d);

/* The kinds of shape arch_check_shape knows, over the symbols a and b:
 *   NONE     not checked (another family's roles: their sizes are not
 *            the config's)
 *   LINEAR   [a, b]: a matrix W, an operator from b to a (PyTorch's
 *            [out, in])
 *   LOOKUP   [a, b]: a table of a rows looked up by token (the embedding),
 *            as an operator the transpose, from one-hot a to b
 *   VECTOR   [a]
 *   EITHER   [a] or [b] (QK-norm: per head, or over all heads as OLMo2)
 *   MULT     a learnable multiplier of an a x b operator: one value, [a]
 *            (per row) or [b] (per column)
 *   MULT_COL [b]: rowcol's column multiplier of an a x b operator
 *   ONE      one value (a reparameterized gain's magnitude)
 */
enum arch_shape_kind {
	ARCH_SHAPE_NONE, ARCH_SHAPE_LINEAR, ARCH_SHAPE_LOOKUP, ARCH_SHAPE_VECTOR,
	ARCH_SHAPE_EITHER, ARCH_SHAPE_MULT, ARCH_SHAPE_MULT_COL, ARCH_SHAPE_ONE
};
struct arch_shape {
	enum arch_shape_kind kind;
	enum arch_dim a, b;
};

/* When a Llama-family model has the role (what brings it):
 *   OTHER   never: another family's role (lib/base/family.c names it)
 *   ALWAYS  every model
 *   GAIN    with scale vectors (sw_config.scale_vectors), where the scale
 *           design keeps the Pre-Norm's shared gain
 *   UNTIED  with an untied head (tie_embeddings 0)
 *   QKV_BIAS Qwen2's attention biases (arch qwen2)
 *   QK_NORM qk_norm (Qwen3's), with scale vectors
 *   NORM_EVERYWHERE norm_everywhere, with scale vectors
 *   DESIGN  the scale design (scale_design: its gains, DNP's norms)
 *   MULT    learnable multipliers (multipliers; _mult_col: rowcol)
 *   REPARAM a reparameterized gain (scale_reparam) */
enum arch_when {
	ARCH_WHEN_OTHER, ARCH_WHEN_ALWAYS, ARCH_WHEN_GAIN, ARCH_WHEN_UNTIED, ARCH_WHEN_QKV_BIAS,
	ARCH_WHEN_QK_NORM, ARCH_WHEN_NORM_EVERYWHERE, ARCH_WHEN_DESIGN, ARCH_WHEN_MULT,
	ARCH_WHEN_REPARAM
};

/* How tensor parallelism splits a matrix into slices (fairscale's
 * layers, as Meta's consolidated.NN.pth store them): not at all (each
 * slice holds it whole: the norms); by rows, its outputs
 * (ColumnParallelLinear); by columns, its inputs (RowParallelLinear); or,
 * for the embedding, by columns (Llama 2's ParallelEmbedding) or by rows
 * (Llama 3's VocabParallelEmbedding), which a slice's shape tells. */
enum arch_split { ARCH_SPLIT_NONE, ARCH_SPLIT_ROWS, ARCH_SPLIT_COLS, ARCH_SPLIT_EMBED };

/* Where a gain sits (the placement column of sw-norms' scale vectors):
 * a Pre-Norm's (pre, also any role that is no gain), QK-norm's (qk), a DNP
 * norm of a reader's output (dnp), norm_everywhere's before o_proj and
 * down_proj (in), a reader's input gain (before: X_gain_in) or output
 * gain (after: X_gain_out), or a norm of a sublayer's output before the
 * residual add (post: OLMo2's and Gemma2's post-norms). A reparameterized
 * gain's direction and magnitude sit where it does. */
enum arch_place {
	ARCH_PLACE_PRE, ARCH_PLACE_QK, ARCH_PLACE_DNP, ARCH_PLACE_IN, ARCH_PLACE_BEFORE,
	ARCH_PLACE_AFTER, ARCH_PLACE_POST
};

/* What a role means. */
struct arch_role {
	const char *name;
	enum sw_block block;
	enum sw_mup mup;
	enum sw_group group;
	enum sw_norm_type norm_type;
	int in_layer;           /* 1: lives in model.layers.N */
	int order;              /* position in model order (see below) */
	enum arch_heads heads;  /* how its attention heads lie */
	int sv_kind;            /* the scale-vector kind of a reader of a Pre-Norm, or -1 */
	const char *tied;       /* the role it may share its weights with (tie_word_embeddings), or NULL */
	/* (below: given by name in the table's rows; 0 where a row names none) */
	struct arch_shape shape;        /* its shape in the config's sizes */
	enum arch_dim n_heads;  /* H or KV: the heads its info's n_heads, head_dim count */
	enum arch_when when;    /* when a model has it */
	enum arch_split split;  /* how tensor parallelism slices it */
	enum arch_place place;  /* where a gain sits */
	enum arch_dim gives;    /* the size its rows give a format that leaves it out (V, F) */
};

/* The role of a tensor the architecture does not know (block other). */
#define ARCH_ROLE_OTHER "other"

/* The role named s, or NULL if the architecture has no such role. */
const struct arch_role *arch_role_find(const char *s);
/* role's heads column (ARCH_HEADS_NONE for an unknown role). */
enum arch_heads arch_role_heads(const char *role);
/* The shape role's tensor has under c (its shape column), into shape:
 * its rank (2 or 1), or -1 where the table gives no one shape (another
 * family's role, QK-norm's two, a multiplier's three, a magnitude). */
int arch_role_shape(const struct sw_config *c, const char *role, int64_t shape[2]);
/* A size a format may leave out (0 in c), taken from the stored rows of
 * the role that gives it (the gives column: embed's are vocab_size,
 * gate's d_ff); nothing for another role or a size c has. */
void arch_size_from_rows(struct sw_config *c, const char *role, int64_t rows);
/* 1 if role is a projection whose output is added into the residual
 * stream (o, down, an expert's or the shared expert's down: those the
 * reference inits scale by 1/sqrt(2L)), else 0. */
int arch_role_writes_residual(const char *role);
/* The projection a bias or multiplier role belongs to ("q" for q_bias,
 * q_mult and q_mult_col) into base: 0, or -1 for another role or a base
 * that does not fit len. */
int arch_base_role(const char *role, char *base, size_t len);

/* The i-th role of the table in model order, or NULL when i is past the
 * end: to list the roles (--role's valid values) from this one source. */
const struct arch_role *arch_role_at(size_t i);

/*
 * Fill t's metadata (block, mup, group, norm_type, n_heads, head_dim, name
 * in Hugging Face naming) for a known role at a layer; shape, dtype, lr, wd
 * are left as they are. Returns 0, or -1 for an unknown role.
 */
int arch_info_for_role(const struct sw_config *c, const char *role, int layer,
		       struct sw_tensor_info *t);

/*
 * Parse a Hugging Face Llama-family tensor name into role and layer and
 * fill the metadata as arch_info_for_role does. Names the architecture
 * does not know (rotary buffers, extra heads) become block other, role
 * other. Returns 0, or -1 if the layer number is out of range.
 */
int arch_info_from_hf_name(const struct sw_config *c, const char *name,
			   struct sw_tensor_info *t);

/* A tensor the architecture does not know, named name (in layer, or -1):
 * block and role other, vector-like, no group, no norm type. Returns 0. */
int arch_info_other(const char *name, int layer, struct sw_tensor_info *t);

/* The Hugging Face name of a role at a layer. Returns 0, -1 if unknown. */
int arch_hf_name(const char *role, int layer, char *buf, size_t len);

/*
 * Check a tensor's shape (and n_heads/head_dim) against the config, as
 * its role's shape column says; roles not in the table, and those with no
 * shape (another family's), are not checked. SW_EDATA with a message
 * naming the shapes on disagreement.
 */
int arch_check_shape(const struct sw_config *c, const struct sw_tensor_info *t,
		     struct sw_err *err);

/*
 * Model order: embedding, then layers 0..L-1 in numeric order (q, k, v
 * before o; the norms before the projections they feed), then the final
 * norm, the head, anything else; ties by name. A qsort comparator over
 * struct sw_tensor_info.
 */
int arch_model_order_cmp(const void *a, const void *b);
/* The same order as a key computed once per tensor (a role lookup), so a
 * sort of many tensors compares integers, then names. */
struct arch_order_key {
	int section, layer, order, expert;   /* experts by index, not by name */
};
void arch_model_order_key(const struct sw_tensor_info *t, struct arch_order_key *k);
int arch_model_order_key_cmp(const struct arch_order_key *a, const struct arch_order_key *b);

#endif
