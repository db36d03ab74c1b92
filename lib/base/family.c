/* family.c - the families' tensor names (family.h). */
#include "family.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/*
 * The names, as each family's transformers class writes them
 * (save_pretrained). Gemma's norms multiply by 1 + weight: their gains
 * are the weights plus the offset of gain_offsets[] below.
 */
#define L "model.layers.{L}."
#define EMBED_HEAD \
	{"model.embed_tokens.weight", "embed"}, {"model.norm.weight", "final_norm"}, \
	{"lm_head.weight", "lm_head"}
#define ATTN \
	{L "self_attn.q_proj.weight", "q"}, {L "self_attn.k_proj.weight", "k"}, \
	{L "self_attn.v_proj.weight", "v"}, {L "self_attn.o_proj.weight", "o"}
#define MLP \
	{L "mlp.gate_proj.weight", "gate"}, {L "mlp.up_proj.weight", "up"}, \
	{L "mlp.down_proj.weight", "down"}
#define PRE_NORMS \
	{L "input_layernorm.weight", "attn_norm"}, \
	{L "post_attention_layernorm.weight", "ffn_norm"}
#define QK_NORMS \
	{L "self_attn.q_norm.weight", "q_norm"}, {L "self_attn.k_norm.weight", "k_norm"}

static const struct family_name gemma[] = {
	EMBED_HEAD, PRE_NORMS, ATTN, MLP,
};
/* Gemma2 normalizes each sublayer's input and its output; Gemma3 adds
 * QK-norm, per head */
#define GEMMA2_NORMS \
	{L "input_layernorm.weight", "attn_norm"}, \
	{L "post_attention_layernorm.weight", "attn_post_norm"}, \
	{L "pre_feedforward_layernorm.weight", "ffn_norm"}, \
	{L "post_feedforward_layernorm.weight", "ffn_post_norm"}
static const struct family_name gemma2[] = {
	EMBED_HEAD, ATTN, MLP, GEMMA2_NORMS,
};
static const struct family_name gemma3[] = {
	EMBED_HEAD, ATTN, MLP, GEMMA2_NORMS, QK_NORMS,
};
#undef GEMMA2_NORMS
static const struct family_name phi3[] = {
	EMBED_HEAD, PRE_NORMS,
	{L "self_attn.o_proj.weight", "o"}, {L "mlp.down_proj.weight", "down"},
};
/* GPT-2 (GPT2LMHeadModel): Conv1D stores its linear weights [in, out],
 * read transposed (layouts[] below); c_attn is q, k, v fused by rows
 * (splits[] below) */
#define G2 "transformer.h.{L}."
static const struct family_name gpt2[] = {
	{"transformer.wte.weight", "embed"}, {"transformer.wpe.weight", "pos_embed"},
	{"transformer.ln_f.weight", "final_norm"}, {"transformer.ln_f.bias", "final_norm_bias"},
	{"lm_head.weight", "lm_head"},
	{G2 "ln_1.weight", "attn_norm"}, {G2 "ln_1.bias", "attn_norm_bias"},
	{G2 "attn.c_proj.weight", "o"}, {G2 "attn.c_proj.bias", "o_bias"},
	{G2 "ln_2.weight", "ffn_norm"}, {G2 "ln_2.bias", "ffn_norm_bias"},
	{G2 "mlp.c_fc.weight", "up"}, {G2 "mlp.c_fc.bias", "up_bias"},
	{G2 "mlp.c_proj.weight", "down"}, {G2 "mlp.c_proj.bias", "down_bias"},
};
/* How a family's files from a source store a tensor where it is not
 * PyTorch's [out, in]: transformers' GPT2LMHeadModel in Conv1D, nanoGPT's
 * GPT (the same names) in nn.Linear, as the model sees it. */
static const struct {
	const char *type;
	enum family_source source;
	const char *pattern;
	enum family_layout layout;
} layouts[] = {
	{"gpt2", FAMILY_FROM_HF, G2 "attn.c_attn.weight", FAMILY_TRANSPOSED},
	{"gpt2", FAMILY_FROM_HF, G2 "attn.c_proj.weight", FAMILY_TRANSPOSED},
	{"gpt2", FAMILY_FROM_HF, G2 "mlp.c_fc.weight", FAMILY_TRANSPOSED},
	{"gpt2", FAMILY_FROM_HF, G2 "mlp.c_proj.weight", FAMILY_TRANSPOSED},
};
/*
 * How a family stores a tensor that holds several roles, or every expert
 * of a layer, and how its rows are grouped (family.h's parts), from
 * transformers' modeling files (4.47.1):
 *   RUNS      each part a run of rows after the one before: GPT-2's
 *             c_attn (modeling_gpt2.py: split(split_size = n_embd) of its
 *             output, after the Conv1D transpose), Phi-3's qkv_proj
 *             (modeling_phi3.py: q the first n_heads hd rows, k the next
 *             n_kv_heads hd, v the rest) and gate_up_proj (chunk(2):
 *             gate, then up)
 *   PER_HEAD  the rows of each head in turn, each part's head_dim rows
 *             of it: GPT-NeoX's query_key_value (modeling_gpt_neox.py's
 *             GPTNeoXAttention views its output as [n_heads, 3 head_size]
 *             and takes q = [..., :head_size], k the next head_size, v the
 *             last: head h's q is rows h 3 hd .. h 3 hd + hd)
 *   EXPERTS   a stack [E, out, in], a part per expert: the ffn_*_exps of
 *             llama.cpp's GGUF for Mixtral (general.architecture llama
 *             with llama.expert_count, read as mixtral: ggufread.c;
 *             gguf-py's constants.py, MODEL_TENSOR.FFN_*_EXP)
 * A part's size in the config's symbols: SZ_D d_model, SZ_Q n_heads
 * head_dim, SZ_KV n_kv_heads head_dim, SZ_F d_ff, SZ_HD head_dim.
 */
enum split_rows { SPLIT_RUNS, SPLIT_PER_HEAD, SPLIT_EXPERTS };
enum split_size { SZ_D, SZ_Q, SZ_KV, SZ_F, SZ_HD };
#define SPLIT_PARTS_MAX 3
#define QKV(q, k, v, size_q, size_kv) \
	{{"q", q, size_q}, {"k", k, size_kv}, {"v", v, size_kv}}
#define NX "gpt_neox.layers.{L}.attention.query_key_value."
/* a stack's parts are sized by its own dims, not the config's */
#define EXPS(type, what, role) \
	{type, "blk.{L}.ffn_" what "_exps.weight", SPLIT_EXPERTS, 3, {{NULL, role, SZ_D}}}
#define EXPERTS(type) \
	EXPS(type, "gate", "expert_gate"), EXPS(type, "up", "expert_up"), \
	EXPS(type, "down", "expert_down")
static const struct split {
	const char *type, *pattern;
	enum split_rows rows;
	int rank;                       /* the stored tensor's */
	struct { const char *suffix, *role; enum split_size size; } part[SPLIT_PARTS_MAX];
} splits[] = {
	{"gpt2", G2 "attn.c_attn.weight", SPLIT_RUNS, 2, QKV("q", "k", "v", SZ_D, SZ_D)},
	{"gpt2", G2 "attn.c_attn.bias", SPLIT_RUNS, 1, QKV("q_bias", "k_bias", "v_bias", SZ_D, SZ_D)},
	{"phi3", L "self_attn.qkv_proj.weight", SPLIT_RUNS, 2, QKV("q", "k", "v", SZ_Q, SZ_KV)},
	{"phi3", L "mlp.gate_up_proj.weight", SPLIT_RUNS, 2, {{"gate", "gate", SZ_F}, {"up", "up", SZ_F}}},
	{"gpt_neox", NX "weight", SPLIT_PER_HEAD, 2, QKV("q", "k", "v", SZ_HD, SZ_HD)},
	{"gpt_neox", NX "bias", SPLIT_PER_HEAD, 1, QKV("q_bias", "k_bias", "v_bias", SZ_HD, SZ_HD)},
	EXPERTS("mixtral"),
	/* llama.cpp's GGUF (convert_hf_to_gguf.py): Phi-3's qkv_proj and
	 * gate_up_proj kept whole as attn_qkv and ffn_up (its phi3 graph
	 * takes gate as the first half of ffn_up's output, as the Hugging
	 * Face class does); GPT-2's c_attn as attn_qkv, turned to [out, in]
	 * by the converter (no layouts[] row); the experts of Qwen2-MoE and
	 * Qwen3-MoE stacked as Mixtral's */
	{"phi3", "blk.{L}.attn_qkv.weight", SPLIT_RUNS, 2, QKV("q", "k", "v", SZ_Q, SZ_KV)},
	{"phi3", "blk.{L}.ffn_up.weight", SPLIT_RUNS, 2, {{"gate", "gate", SZ_F}, {"up", "up", SZ_F}}},
	{"gpt2", "blk.{L}.attn_qkv.weight", SPLIT_RUNS, 2, QKV("q", "k", "v", SZ_D, SZ_D)},
	{"gpt2", "blk.{L}.attn_qkv.bias", SPLIT_RUNS, 1, QKV("q_bias", "k_bias", "v_bias", SZ_D, SZ_D)},
	EXPERTS("qwen2_moe"), EXPERTS("qwen3_moe"), EXPERTS("olmoe"),
	/* GPT-NeoX's query_key_value reordered by GPTNeoXModel from per head
	 * to q, k, v of all heads in turn: split as GPT-2's */
	{"gpt_neox", "blk.{L}.attn_qkv.weight", SPLIT_RUNS, 2, QKV("q", "k", "v", SZ_D, SZ_D)},
	{"gpt_neox", "blk.{L}.attn_qkv.bias", SPLIT_RUNS, 1,
	 QKV("q_bias", "k_bias", "v_bias", SZ_D, SZ_D)},
};
#undef EXPERTS
#undef EXPS
#undef NX
#undef QKV
#undef G2
/* The families whose norms multiply by 1 + weight (Gemma's RMSNorm:
 * x / rms(x) * (1 + w)), as transformers' classes store them: every norm
 * gain is the weight plus 1 (llama.cpp's GGUF converter stores 1 + w
 * itself: not from that source). */
static const struct {
	const char *type;
	enum family_source source;
	double offset;
} gain_offsets[] = {
	{"gemma", FAMILY_FROM_HF, 1.0},
	{"gemma2", FAMILY_FROM_HF, 1.0},
	{"gemma3_text", FAMILY_FROM_HF, 1.0},
};
/* OLMo2 normalizes each sublayer's output, not its input; its q_norm and
 * k_norm span all heads */
static const struct family_name olmo2[] = {
	EMBED_HEAD, ATTN, MLP, QK_NORMS,
	{L "post_attention_layernorm.weight", "attn_post_norm"},
	{L "post_feedforward_layernorm.weight", "ffn_post_norm"},
};
#define NX "gpt_neox.layers.{L}."
static const struct family_name gpt_neox[] = {
	{"gpt_neox.embed_in.weight", "embed"}, {"embed_out.weight", "lm_head"},
	{"gpt_neox.final_layer_norm.weight", "final_norm"},
	{"gpt_neox.final_layer_norm.bias", "final_norm_bias"},
	{NX "input_layernorm.weight", "attn_norm"}, {NX "input_layernorm.bias", "attn_norm_bias"},
	{NX "post_attention_layernorm.weight", "ffn_norm"},
	{NX "post_attention_layernorm.bias", "ffn_norm_bias"},
	{NX "attention.dense.weight", "o"}, {NX "attention.dense.bias", "o_bias"},
	{NX "mlp.dense_h_to_4h.weight", "up"}, {NX "mlp.dense_h_to_4h.bias", "up_bias"},
	{NX "mlp.dense_4h_to_h.weight", "down"}, {NX "mlp.dense_4h_to_h.bias", "down_bias"},
};
#undef NX
static const struct family_name mixtral[] = {
	EMBED_HEAD, PRE_NORMS, ATTN,
	{L "block_sparse_moe.gate.weight", "router"},
	{L "block_sparse_moe.experts.{E}.w1.weight", "expert_gate"},
	{L "block_sparse_moe.experts.{E}.w3.weight", "expert_up"},
	{L "block_sparse_moe.experts.{E}.w2.weight", "expert_down"},
};
#define MOE_EXPERTS \
	{L "mlp.gate.weight", "router"}, \
	{L "mlp.experts.{E}.gate_proj.weight", "expert_gate"}, \
	{L "mlp.experts.{E}.up_proj.weight", "expert_up"}, \
	{L "mlp.experts.{E}.down_proj.weight", "expert_down"}
/* Qwen2-MoE: a shared expert beside the routed ones, scaled by a gate of
 * its own; layers in mlp_only_layers keep a dense MLP */
static const struct family_name qwen2_moe[] = {
	EMBED_HEAD, PRE_NORMS, ATTN, MLP, MOE_EXPERTS,
	{L "self_attn.q_proj.bias", "q_bias"}, {L "self_attn.k_proj.bias", "k_bias"},
	{L "self_attn.v_proj.bias", "v_bias"},
	{L "mlp.shared_expert_gate.weight", "shared_router"},
	{L "mlp.shared_expert.gate_proj.weight", "shared_gate"},
	{L "mlp.shared_expert.up_proj.weight", "shared_up"},
	{L "mlp.shared_expert.down_proj.weight", "shared_down"},
};
static const struct family_name olmoe[] = {
	EMBED_HEAD, PRE_NORMS, ATTN, QK_NORMS, MOE_EXPERTS,
};
/* Qwen3-MoE: QK-norm per head, routed experts and no shared one; the
 * layers mlp_only_layers names, and those decoder_sparse_step skips,
 * keep a dense MLP */
static const struct family_name qwen3_moe[] = {
	EMBED_HEAD, PRE_NORMS, ATTN, QK_NORMS, MLP, MOE_EXPERTS,
};
#undef L

/*
 * llama.cpp's GGUF names (gguf-py 0.19.0, constants.py: TENSOR_NAMES of
 * each architecture's MODEL_TENSORS), a ".weight" or ".bias" after each,
 * and the roles they hold. What the converter (convert_hf_to_gguf.py)
 * changed on the way is undone where it matters: LlamaModel permutes q
 * and k for GGML's RoPE (read back: rope_permuted), no other family
 * here is permuted; GemmaModel, Gemma2Model and Gemma3Model store every
 * norm as 1 + w, the gain (no gain_offsets[] row for FAMILY_FROM_GGUF);
 * GPT2Model stores c_attn, c_proj and c_fc turned to [out, in];
 * GPTNeoXModel query_key_value as q, k, v of all heads in turn.
 */
#define B "blk.{L}."
#define GG_EMBED_HEAD \
	{"token_embd.weight", "embed"}, {"output_norm.weight", "final_norm"}, \
	{"output.weight", "lm_head"}
#define GG_NORMS {B "attn_norm.weight", "attn_norm"}, {B "ffn_norm.weight", "ffn_norm"}
#define GG_ATTN \
	{B "attn_q.weight", "q"}, {B "attn_k.weight", "k"}, {B "attn_v.weight", "v"}, \
	{B "attn_output.weight", "o"}
#define GG_QKV_BIAS \
	{B "attn_q.bias", "q_bias"}, {B "attn_k.bias", "k_bias"}, {B "attn_v.bias", "v_bias"}
#define GG_QK_NORMS {B "attn_q_norm.weight", "q_norm"}, {B "attn_k_norm.weight", "k_norm"}
#define GG_MLP \
	{B "ffn_gate.weight", "gate"}, {B "ffn_up.weight", "up"}, {B "ffn_down.weight", "down"}
#define GG_ROUTER {B "ffn_gate_inp.weight", "router"}
#define GG_POST_NORMS \
	{B "post_attention_norm.weight", "attn_post_norm"}, \
	{B "post_ffw_norm.weight", "ffn_post_norm"}
/* Llama, and Mixtral under it (llama.expert_count): the router, the
 * experts stacked (splits[]) or, as llama.cpp wrote them before the
 * stack, one tensor each, blk.N.ffn_gate.E.weight */
static const struct family_name gg_llama[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_MLP, GG_ROUTER,
	{B "ffn_gate.{E}.weight", "expert_gate"}, {B "ffn_up.{E}.weight", "expert_up"},
	{B "ffn_down.{E}.weight", "expert_down"},
};
static const struct family_name gg_qwen2[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_QKV_BIAS, GG_MLP,
};
static const struct family_name gg_qwen3[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_QK_NORMS, GG_MLP,
};
static const struct family_name gg_gemma[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_MLP,
};
/* Gemma2's attn_norm, post_attention_norm, ffn_norm, post_ffw_norm are
 * its input_layernorm, post_attention_layernorm, pre_ and
 * post_feedforward_layernorm */
static const struct family_name gg_gemma2[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_MLP, GG_POST_NORMS,
};
static const struct family_name gg_gemma3[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_MLP, GG_POST_NORMS, GG_QK_NORMS,
};
/* attn_qkv and ffn_up (gate and up) are split (splits[]) */
static const struct family_name gg_phi3[] = {
	GG_EMBED_HEAD, GG_NORMS, {B "attn_output.weight", "o"}, {B "ffn_down.weight", "down"},
};
/* GPT-2's and GPT-NeoX's layers: norms and linears with biases;
 * attn_qkv and its bias are split (splits[]) */
#define GG_GPT_LAYER \
	{"output_norm.bias", "final_norm_bias"}, \
	GG_NORMS, {B "attn_norm.bias", "attn_norm_bias"}, {B "ffn_norm.bias", "ffn_norm_bias"}, \
	{B "attn_output.weight", "o"}, {B "attn_output.bias", "o_bias"}, \
	{B "ffn_up.weight", "up"}, {B "ffn_up.bias", "up_bias"}, \
	{B "ffn_down.weight", "down"}, {B "ffn_down.bias", "down_bias"}
static const struct family_name gg_gpt2[] = {
	GG_EMBED_HEAD, {"position_embd.weight", "pos_embed"}, GG_GPT_LAYER,
};
static const struct family_name gg_gpt_neox[] = {
	GG_EMBED_HEAD, GG_GPT_LAYER,
};
#undef GG_GPT_LAYER
/* OLMo2 normalizes each sublayer's output (post_attention_norm,
 * post_ffw_norm), its QK-norm over all heads; OLMoE its input, with
 * QK-norm and the experts stacked */
static const struct family_name gg_olmo2[] = {
	GG_EMBED_HEAD, GG_ATTN, GG_QK_NORMS, GG_MLP, GG_POST_NORMS,
};
static const struct family_name gg_olmoe[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_QK_NORMS, GG_ROUTER,
};
/* the routed experts stacked (splits[]); Qwen2-MoE's shared expert and
 * its gate, *_shexp; a dense MLP (a layer of mlp_only_layers, or one
 * decoder_sparse_step skips) under a dense model's names */
static const struct family_name gg_qwen2_moe[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_QKV_BIAS, GG_MLP, GG_ROUTER,
	{B "ffn_gate_inp_shexp.weight", "shared_router"},
	{B "ffn_gate_shexp.weight", "shared_gate"}, {B "ffn_up_shexp.weight", "shared_up"},
	{B "ffn_down_shexp.weight", "shared_down"},
};
static const struct family_name gg_qwen3_moe[] = {
	GG_EMBED_HEAD, GG_NORMS, GG_ATTN, GG_QK_NORMS, GG_MLP, GG_ROUTER,
};
#undef GG_POST_NORMS
#undef GG_ROUTER
#undef GG_MLP
#undef GG_QK_NORMS
#undef GG_QKV_BIAS
#undef GG_ATTN
#undef GG_NORMS
#undef GG_EMBED_HEAD
#undef B

#define NAMES(a) a, sizeof a / sizeof a[0]
static const struct arch_family families[] = {
	{"llama", "LlamaForCausalLM", FAMILY_MODEL, 0, NULL, 0},
	{"mistral", "MistralForCausalLM", FAMILY_MODEL, 0, NULL, 0},
	{"qwen2", "Qwen2ForCausalLM", FAMILY_MODEL | FAMILY_QKV_BIAS, 0, NULL, 0},
	{"qwen3", "Qwen3ForCausalLM", FAMILY_MODEL | FAMILY_QK_NORM, 0, NULL, 0},
	{"gemma", "GemmaForCausalLM", FAMILY_MODEL | FAMILY_EMBED_SCALE, 1, NAMES(gemma)},
	{"gemma2", "Gemma2ForCausalLM", FAMILY_MODEL | FAMILY_EMBED_SCALE | FAMILY_POST_NORMS, 1,
	 NAMES(gemma2)},
	/* Gemma3's text model: its q_norm and k_norm are (1 + w) norms too */
	{"gemma3_text", "Gemma3ForCausalLM", 0, 1, NAMES(gemma3)},
	{"phi3", "Phi3ForCausalLM", 0, 0, NAMES(phi3)},
	{"olmo2", "Olmo2ForCausalLM", 0, 0, NAMES(olmo2)},
	{"gpt_neox", "GPTNeoXForCausalLM", 0, 0, NAMES(gpt_neox)},
	{"mixtral", "MixtralForCausalLM", 0, 0, NAMES(mixtral)},
	{"qwen2_moe", "Qwen2MoeForCausalLM", 0, 0, NAMES(qwen2_moe)},
	{"olmoe", "OlmoeForCausalLM", 0, 0, NAMES(olmoe)},
	{"qwen3_moe", "Qwen3MoeForCausalLM", 0, 0, NAMES(qwen3_moe)},
	{"gpt2", "GPT2LMHeadModel", FAMILY_MODEL | FAMILY_LAYERNORM | FAMILY_POS_EMBED |
	 FAMILY_PLAIN_MLP | FAMILY_LINEAR_BIAS, 1, NAMES(gpt2)},
};
static const struct family_gguf gguf_families[] = {
	{"llama", "llama", 1, NAMES(gg_llama)},
	{"qwen2", "qwen2", 0, NAMES(gg_qwen2)},
	{"qwen3", "qwen3", 0, NAMES(gg_qwen3)},
	{"gemma", "gemma", 0, NAMES(gg_gemma)},
	{"gemma2", "gemma2", 0, NAMES(gg_gemma2)},
	{"gemma3", "gemma3_text", 0, NAMES(gg_gemma3)},
	{"phi3", "phi3", 0, NAMES(gg_phi3)},
	{"gpt2", "gpt2", 0, NAMES(gg_gpt2)},
	{"gptneox", "gpt_neox", 0, NAMES(gg_gpt_neox)},
	{"olmo2", "olmo2", 0, NAMES(gg_olmo2)},
	{"olmoe", "olmoe", 0, NAMES(gg_olmoe)},
	{"qwen2moe", "qwen2_moe", 0, NAMES(gg_qwen2_moe)},
	{"qwen3moe", "qwen3_moe", 0, NAMES(gg_qwen3_moe)},
};
#undef NAMES
#define NFAMILIES (sizeof families / sizeof families[0])

const struct arch_family *family_find(const char *named)
{
	for (size_t i = 0; named && i < NFAMILIES; i++)
		if (!strcmp(named, families[i].type) || !strcmp(named, families[i].hf_class))
			return &families[i];
	return NULL;
}

int family_model_flags(const char *named)
{
	const struct arch_family *f = family_find(named);

	return f ? f->model : 0;
}

int family_computed(const char *named)
{
	return (family_model_flags(named) & FAMILY_MODEL) != 0;
}

const struct arch_family *family_at(size_t i)
{
	return i < NFAMILIES ? &families[i] : NULL;
}

/* Strict decimal number, as arch.c reads a layer: digits only, at most
 * 1000000; -1 if none. */
static long read_number(const char **s)
{
	long v = 0;

	if (**s < '0' || **s > '9')
		return -1;
	while (**s >= '0' && **s <= '9') {
		v = v * 10 + (**s - '0');
		if (v > 1000000)
			return -1;
		(*s)++;
	}
	return v;
}

/* name as pattern has it: 1 with *layer and *expert (-1 where pattern
 * has none), else 0 */
static int name_matches(const char *pattern, const char *name, long *layer, long *expert)
{
	*layer = *expert = -1;
	while (*pattern) {
		if (!strncmp(pattern, "{L}", 3) || !strncmp(pattern, "{E}", 3)) {
			long v = read_number(&name);
			if (v < 0)
				return 0;
			*(pattern[1] == 'L' ? layer : expert) = v;
			pattern += 3;
		} else if (*pattern++ != *name++) {
			return 0;
		}
	}
	return *name == '\0';
}

const struct family_gguf *family_gguf_find(const char *arch)
{
	for (size_t i = 0; arch && i < sizeof gguf_families / sizeof gguf_families[0]; i++)
		if (!strcmp(arch, gguf_families[i].arch))
			return &gguf_families[i];
	return NULL;
}

const char *family_gguf_role(const struct family_gguf *g, const char *name, long *layer,
			     long *expert)
{
	for (size_t i = 0; i < g->n_names; i++)
		if (name_matches(g->names[i].pattern, name, layer, expert))
			return g->names[i].role;
	*layer = *expert = -1;
	return NULL;
}

/* The layer an unknown name of family f holds: the number after the
 * prefix of its first pattern with {L} ("model.layers."); -1 if none. */
static long layer_of_other(const struct arch_family *f, const char *name)
{
	for (size_t i = 0; i < f->n_names; i++) {
		const char *at = strstr(f->names[i].pattern, "{L}");
		size_t n = at ? (size_t)(at - f->names[i].pattern) : 0;
		if (at && !strncmp(name, f->names[i].pattern, n)) {
			const char *s = name + n;
			long v = read_number(&s);
			return v >= 0 && *s == '.' ? v : -1;
		}
	}
	return -1;
}

/* Where a Llama-family config has a mixture of experts (sw-train's),
 * the family whose files name its router and experts: Mixtral's, or
 * Qwen2-MoE's with a shared expert (which Mixtral has not); NULL for a
 * dense config or a family with names of its own */
static const struct arch_family *moe_names(const struct sw_config *c)
{
	const struct arch_family *f = family_find(c->arch);

	if (!c->n_experts || (f && f->names))
		return NULL;
	return family_find(c->n_shared_experts ? "qwen2_moe" : "mixtral");
}

int family_tensor_info(const struct sw_config *c, const char *name, struct sw_tensor_info *t)
{
	const struct arch_family *f = family_find(c->arch);
	long layer, expert;

	if (f && !f->names) {
		int rc = arch_info_from_hf_name(c, name, t);
		/* a mixture of experts' router and experts by their family's
		 * names (moe_names); another name stays the Llama reading's */
		if (rc || strcmp(t->role, ARCH_ROLE_OTHER) || !(f = moe_names(c)))
			return rc;
		for (size_t i = 0; i < f->n_names; i++)
			if (name_matches(f->names[i].pattern, name, &layer, &expert) && layer >= 0 &&
			    layer < c->n_layers) {
				arch_info_for_role(c, f->names[i].role, (int)layer, t);
				snprintf(t->name, sizeof t->name, "%s", name);
				t->expert = (int)expert;
				return 0;
			}
		return rc;
	}
	if (!f)
		return arch_info_other(name, -1, t);
	for (size_t i = 0; i < f->n_names; i++) {
		if (!name_matches(f->names[i].pattern, name, &layer, &expert))
			continue;
		if (c->n_layers > 0 && layer >= c->n_layers)
			return -1;
		arch_info_for_role(c, f->names[i].role, (int)layer, t);
		snprintf(t->name, sizeof t->name, "%s", name);
		t->expert = (int)expert;
		return 0;
	}
	layer = layer_of_other(f, name);
	if (c->n_layers > 0 && layer >= c->n_layers)
		return -1;
	return arch_info_other(name, (int)layer, t);
}

enum family_layout family_tensor_layout(const struct sw_config *c, enum family_source src,
					const char *name)
{
	const struct arch_family *f = family_find(c->arch);
	long layer, expert;

	for (size_t i = 0; f && i < sizeof layouts / sizeof layouts[0]; i++)
		if (!strcmp(f->type, layouts[i].type) && src == layouts[i].source &&
		    name_matches(layouts[i].pattern, name, &layer, &expert))
			return layouts[i].layout;
	return FAMILY_AS_STORED;
}

/* The split of name in c's family, its layer in *layer; NULL if none. */
static const struct split *split_of(const struct sw_config *c, const char *name, long *layer)
{
	const struct arch_family *f = family_find(c->arch);
	long expert;

	for (size_t i = 0; f && i < sizeof splits / sizeof splits[0]; i++)
		if (!strcmp(f->type, splits[i].type) &&
		    name_matches(splits[i].pattern, name, layer, &expert))
			return &splits[i];
	return NULL;
}

static int64_t split_size(const struct sw_config *c, enum split_size s)
{
	switch (s) {
	case SZ_D: return c->d_model;
	case SZ_Q: return c->n_heads * c->head_dim;
	case SZ_KV: return c->n_kv_heads * c->head_dim;
	case SZ_F: return c->d_ff;
	case SZ_HD: return c->head_dim;
	}
	return 0;
}

static size_t split_count(const struct split *s)
{
	size_t n = 0;

	while (n < SPLIT_PARTS_MAX && s->part[n].role)
		n++;
	return n;
}

int family_tensor_parts(const struct sw_config *c, const struct sw_tensor_info *t, size_t *n,
			struct sw_err *err)
{
	long layer = -1;
	const struct split *s = split_of(c, t->name, &layer);
	char roles[64] = "", sizes[96] = "";
	int64_t want = 0, heads = s && s->rows == SPLIT_PER_HEAD ? c->n_heads : 1;
	size_t np, rl = 0, sl = 0;
	int known = heads > 0;

	*n = 0;
	if (!s)
		return SW_OK;
	if (t->rank != s->rank)
		return sw_fail(err, SW_EDATA, "%s: rank %d, not the %d its family stores it in",
			       t->name, t->rank, s->rank);
	if (c->n_layers > 0 && layer >= c->n_layers)
		return sw_fail(err, SW_EDATA, "%s: layer %ld is outside 0..%lld", t->name, layer,
			       (long long)c->n_layers - 1);
	if (s->rows == SPLIT_EXPERTS) {
		if (t->shape[0] < 1 || t->shape[0] > INT_MAX || t->shape[1] < 1)
			return sw_fail(err, SW_EDATA, "%s: a stack of %lld experts of %lld rows",
				       t->name, (long long)t->shape[0], (long long)t->shape[1]);
		*n = (size_t)t->shape[0];
		return SW_OK;
	}
	np = split_count(s);
	for (size_t p = 0; p < np; p++) {
		int64_t z = split_size(c, s->part[p].size);
		known &= z > 0;
		want += z;
		rl += (size_t)snprintf(roles + rl, sizeof roles - rl, "%s%s", p ? ", " : "",
				       s->part[p].role);
		sl += (size_t)snprintf(sizes + sl, sizeof sizes - sl, "%s%lld", p ? " + " : "",
				       (long long)z);
	}
	/* a config that does not give the sizes cannot split it: refused
	 * as a mismatch, never guessed */
	if (!known || t->shape[0] != want * heads) {
		if (s->rows == SPLIT_PER_HEAD)
			return sw_fail(err, SW_EDATA, "%s: %lld rows, not the %lld of %s per head "
				       "the config gives (%lld heads x (%s))", t->name,
				       (long long)t->shape[0], (long long)(want * heads), roles,
				       (long long)heads, sizes);
		return sw_fail(err, SW_EDATA, "%s: %lld rows, not the %lld of %s the config gives "
			       "(%s)", t->name, (long long)t->shape[0], (long long)want, roles, sizes);
	}
	*n = np;
	return SW_OK;
}

void family_tensor_part(const struct sw_config *c, const struct sw_tensor_info *t, size_t p,
			struct family_part *out)
{
	long layer = -1;
	const struct split *s = split_of(c, t->name, &layer);
	int64_t before = 0, all = 0;

	memset(out, 0, sizeof *out);
	out->layer = (int)layer;
	out->expert = -1;
	out->groups = 1;
	if (!s)
		return;
	if (s->rows == SPLIT_EXPERTS) {
		out->role = s->part[0].role;
		out->expert = (int)p;
		out->len = t->shape[1];
		out->first = (int64_t)p * t->shape[1];
		return;
	}
	for (size_t q = 0; q < split_count(s); q++) {
		int64_t z = split_size(c, s->part[q].size);
		before += q < p ? z : 0;
		all += z;
	}
	out->suffix = s->part[p].suffix;
	out->role = s->part[p].role;
	out->first = before;
	out->len = split_size(c, s->part[p].size);
	if (s->rows == SPLIT_PER_HEAD) {
		out->stride = all;
		out->groups = c->n_heads;
	}
}

/* pattern with {L} as layer, {E} as expert, and suffix after ':' where
 * given, into buf: 0, or -1 where it does not fit */
static int name_of(const char *pattern, int layer, int expert, const char *suffix, char *buf,
		   size_t len)
{
	size_t n = 0;

	for (const char *p = pattern; *p && n < len; ) {
		int k;
		if (!strncmp(p, "{L}", 3) || !strncmp(p, "{E}", 3)) {
			k = snprintf(buf + n, len - n, "%d", p[1] == 'L' ? layer : expert);
			p += 3;
		} else {
			k = snprintf(buf + n, len - n, "%c", *p++);
		}
		if (k < 0)
			return -1;
		n += (size_t)k;
	}
	if (n < len && suffix)
		n += (size_t)snprintf(buf + n, len - n, ":%s", suffix);
	if (n >= len)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* f's own name of role at layer (and expert) (its names, or a fused
 * tensor's part in its Hugging Face names: the GGUF ones are llama.cpp's,
 * "blk.") into buf: 1, 0 where its tables hold no such role (or f has
 * none of its own), -1 for a name longer than len */
static int own_name(const struct arch_family *f, const char *role, int layer, int expert,
		    char *buf, size_t len)
{
	for (size_t i = 0; f && f->names && i < f->n_names; i++)
		if (!strcmp(f->names[i].role, role))
			return name_of(f->names[i].pattern, layer, expert, NULL, buf, len) ? -1 : 1;
	for (size_t i = 0; f && f->names && i < sizeof splits / sizeof splits[0]; i++) {
		if (strcmp(f->type, splits[i].type) || !strncmp(splits[i].pattern, "blk.", 4) ||
		    splits[i].rows == SPLIT_EXPERTS)
			continue;
		for (size_t p = 0; p < split_count(&splits[i]); p++)
			if (!strcmp(splits[i].part[p].role, role))
				return name_of(splits[i].pattern, layer, expert,
					       splits[i].part[p].suffix, buf, len) ? -1 : 1;
	}
	return 0;
}

int family_expert_role_name(const struct sw_config *c, const char *role, int layer, int expert,
			    char *buf, size_t len)
{
	int rc = own_name(family_find(c->arch), role, layer, expert, buf, len);

	/* the router's and the experts' names: no Llama name (arch.c's) */
	if (!rc && arch_hf_name(role, layer, buf, len) < 0)
		rc = own_name(moe_names(c), role, layer, expert, buf, len);
	else if (!rc)
		return 0;
	return rc > 0 ? 0 : -1;
}

int family_role_name(const struct sw_config *c, const char *role, int layer, char *buf,
		     size_t len)
{
	return family_expert_role_name(c, role, layer, -1, buf, len);
}

int family_names_role(const char *arch, const char *role)
{
	const struct arch_family *f = family_find(arch);
	char name[SW_NAME_MAX];

	if (!f || !f->names)
		return -1;
	return own_name(f, role, 0, 0, name, sizeof name) != 0;
}

int family_info_for_role(const struct sw_config *c, const char *role, int layer,
			 struct sw_tensor_info *t)
{
	return family_info_for_expert(c, role, layer, -1, t);
}

int family_info_for_expert(const struct sw_config *c, const char *role, int layer, int expert,
			   struct sw_tensor_info *t)
{
	if (arch_info_for_role(c, role, layer, t) < 0)
		return -1;
	t->expert = expert;
	return family_expert_role_name(c, role, t->layer, expert, t->name, sizeof t->name);
}

double family_gain_offset(const struct sw_config *c, enum family_source src,
			  const struct sw_tensor_info *t)
{
	const struct arch_family *f = family_find(c->arch);

	for (size_t i = 0; f && t->block == SW_BLOCK_NORM && i < sizeof gain_offsets /
	     sizeof gain_offsets[0]; i++)
		if (!strcmp(f->type, gain_offsets[i].type) && src == gain_offsets[i].source)
			return gain_offsets[i].offset;
	return 0;
}

int family_check_shape(const struct sw_config *c, enum family_source src,
		       const struct sw_tensor_info *t, struct sw_err *err)
{
	const struct arch_family *f = family_find(c->arch);
	struct sw_tensor_info seen = *t;

	if (!f || !f->model)
		return SW_OK;
	if (t->rank == 2 && family_tensor_layout(c, src, t->name) == FAMILY_TRANSPOSED) {
		seen.shape[0] = t->shape[1];
		seen.shape[1] = t->shape[0];
	}
	return arch_check_shape(c, &seen, err);
}
