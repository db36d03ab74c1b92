/*
 * family.h - the architecture families whose checkpoints the tools name:
 * per family, the Hugging Face tensor names of each role, and whether
 * the model computes it.
 *
 * The Llama family (llama, mistral, qwen2, qwen3) is what the model
 * computes under arch.c's names, GPT-2, Gemma and Gemma2 under their
 * own tables. Every other family here is read for its matrices (sw-ls,
 * sw-norms, sw-spectrum, sw-qkdrift): a table of
 * name patterns gives each tensor its role, layer and expert, and the
 * role its block, class and norm type (arch.c's one table of roles). An
 * architecture no table knows is read too, every tensor block and role
 * other; the model's builders refuse both by name.
 */
#ifndef SW_FAMILY_H
#define SW_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "status.h"
#include "tensor.h"

/* One pattern: a tensor name with {L} (the layer) and {E} (the expert)
 * where the name holds those numbers, and the role it has. */
struct family_name {
	const char *pattern;
	const char *role;
};

/* What the model computes of a family (struct arch_family's model): the
 * Llama step, and where the family's math differs, the operations it
 * adds (lib/model/step.c). */
enum {
	FAMILY_MODEL = 1,               /* the Llama step */
	FAMILY_QKV_BIAS = 2,            /* biases on the q, k, v products (Qwen2: the bias op) */
	FAMILY_QK_NORM = 4,             /* an RMSNorm of each head's q and k (Qwen3) */
	FAMILY_LAYERNORM = 8,           /* LayerNorm with a bias for the block and final norms */
	FAMILY_POS_EMBED = 16,          /* learned position embeddings, no RoPE */
	FAMILY_PLAIN_MLP = 32,          /* down(act(up(x))): no gate (GPT-2) */
	FAMILY_LINEAR_BIAS = 64,        /* biases on every linear but the head (GPT-2) */
	FAMILY_EMBED_SCALE = 128,       /* the embedding times sqrt(d_model) (Gemma) */
	FAMILY_POST_NORMS = 256,        /* a norm on each sublayer's output (Gemma2) */
};
/* family's flags for the architecture named (0 for one the model does
 * not compute) */
int family_model_flags(const char *named);
/* Whether the model computes the architecture named: the Llama family
 * (same tensors and math; qwen2 adds q/k/v biases, qwen3 QK-norm), GPT-2,
 * Gemma and Gemma2 (the flags above), the rows of families[] with a
 * model flag; the list for messages (t-arch holds it to the table). */
#define FAMILY_COMPUTED_LIST "llama, mistral, qwen2, qwen3, gpt2, gemma, gemma2"
int family_computed(const char *named);

struct arch_family {
	const char *type;               /* config.json's model_type: gemma2 */
	const char *hf_class;           /* its architectures[0]: Gemma2ForCausalLM */
	int model;                      /* 0: read for its matrices; else what the model
					   computes (family_computed): FAMILY_MODEL's */
	int tie_default;                /* tie_word_embeddings config.json may leave out */
	const struct family_name *names;        /* NULL: arch.c's Llama names */
	size_t n_names;
};

/* The families read for their matrices, and those the model computes. */
#define FAMILY_LISTED "gemma3_text, phi3, olmo2, gpt_neox, mixtral, qwen2_moe, qwen3_moe, " \
	"olmoe"

/* The family config.json names (its architectures[0] or model_type), or
 * NULL for an architecture no table knows. */
const struct arch_family *family_find(const char *named);
/* The i-th family, NULL past the end (to list them, and test them). */
const struct arch_family *family_at(size_t i);

/*
 * A tensor's role, layer and expert from its name, as c's family names
 * it (c->arch: a family's type, or an unknown architecture's name), with
 * the role's metadata (arch_info_for_role); a name the family does not
 * have, or every name of an unknown architecture, is block and role
 * other (with its layer where the name holds one in the family's
 * layers). 0, or -1 for a layer number past c->n_layers (when known).
 */
int family_tensor_info(const struct sw_config *c, const char *name, struct sw_tensor_info *t);

/*
 * llama.cpp's GGUF files: per general.architecture, the family it holds
 * and a table of its tensor names (gguf-py's constants.py, TENSOR_NAMES
 * of each MODEL_TENSORS list: "blk.{L}.attn_q.weight"), each with its
 * role, read as a family's Hugging Face names are. A tensor two roles
 * share (Phi-3's attn_qkv, GPT-2's attn_qkv and its bias, Phi-3's ffn_up
 * holding gate and up) or a stack of experts (ffn_*_exps) is in no row:
 * family.c's splits[] cut it into parts by its GGUF name.
 */
struct family_gguf {
	const char *arch;               /* general.architecture: qwen2moe */
	const char *type;               /* the family: qwen2_moe */
	int rope_permuted;              /* q and k stored permuted for GGML's RoPE (llama:
					   convert_hf_to_gguf.py's LlamaModel), read back */
	const struct family_name *names;
	size_t n_names;
};
/* The GGUF architecture named, or NULL for one no table knows; the list
 * of those known, for a message. */
const struct family_gguf *family_gguf_find(const char *arch);
#define FAMILY_GGUF_LIST "llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, gpt2, gptneox, " \
	"olmo2, olmoe, qwen2moe, qwen3moe"
/* The role of GGUF tensor name in g's table, with its *layer and
 * *expert (-1 where the name has none); NULL if no row names it. */
const char *family_gguf_role(const struct family_gguf *g, const char *name, long *layer,
			     long *expert);

/* Who wrote a file's tensors under the family's names: transformers'
 * classes (save_pretrained, and the Llama files of every other reader),
 * nanoGPT's GPT (train.py's ckpt.pt, GPT-2's names in nn.Linear),
 * llama.cpp's GGUF converter, or scalewatch's HDF5 (sw-train, sw-convert:
 * every matrix [out, in], fused ones as their parts, each gain the one
 * the model applies). How a tensor is stored depends on it. */
enum family_source { FAMILY_FROM_HF, FAMILY_FROM_NANOGPT, FAMILY_FROM_GGUF, FAMILY_FROM_SW };

/*
 * The name a tensor of role at layer (-1 outside the layers) has in c's
 * family, as its Hugging Face files, nanoGPT's and scalewatch's name it:
 * the Llama family's arch.c names; another family's row of its names for
 * the role, or, for a part of a fused tensor, the stored name, ':' and
 * the part's suffix, as the tools list it
 * (transformer.h.0.attn.c_attn.weight:q); a role the family's files do
 * not hold (the multipliers, the scale designs' gains) its Llama name.
 * 0, or -1 for a role with no name or a name longer than len. The
 * model's layout and the writers name tensors by it.
 */
int family_role_name(const struct sw_config *c, const char *role, int layer, char *buf,
		     size_t len);
/* family_role_name of an expert's role (expert >= 0: the number in its
 * name); a Llama-family config with n_experts names the router and the
 * experts as Mixtral's files do, as Qwen2-MoE's with a shared expert */
int family_expert_role_name(const struct sw_config *c, const char *role, int layer, int expert,
			    char *buf, size_t len);
/* Whether the Hugging Face files of the family arch names hold role
 * (its table's names, a fused tensor's parts): 1 or 0; -1 for a family
 * named as Llama is (arch.c's names: convert_hf_has_role says). */
int family_names_role(const char *arch, const char *role);
/* arch_info_for_role with t's name from family_role_name: 0, or -1 for
 * an unknown role or one with no name. */
int family_info_for_role(const struct sw_config *c, const char *role, int layer,
			 struct sw_tensor_info *t);

/* family_info_for_role of expert's tensor (-1: no expert's) */
int family_info_for_expert(const struct sw_config *c, const char *role, int layer, int expert,
			   struct sw_tensor_info *t);

/* How a tensor is stored: as the model sees it (PyTorch's [out, in]), or
 * transposed ([in, out], GPT2LMHeadModel's Conv1D; nanoGPT's nn.Linear
 * is as stored), which the tensor source (ckpt.c) turns to [out, in] for
 * every tool. */
enum family_layout { FAMILY_AS_STORED, FAMILY_TRANSPOSED };
enum family_layout family_tensor_layout(const struct sw_config *c, enum family_source src,
					const char *name);

/* What the model adds to a norm's stored weight to get the gain it
 * applies: 1 for Gemma's and Gemma2's norms as transformers stores them
 * (x / rms(x) * (1 + w)), 0 for every other tensor (t's block says
 * whether it is a norm's). The tools report the gain, w + offset. */
double family_gain_offset(const struct sw_config *c, enum family_source src,
			  const struct sw_tensor_info *t);

/*
 * A stored tensor that holds several roles (fused: GPT-2's c_attn, Phi-3's
 * qkv_proj and gate_up_proj, GPT-NeoX's query_key_value) or every expert
 * of a layer (stacked [E, out, in]: GGUF's ffn_*_exps) is seen by the
 * tools as its parts, one tensor each: part p takes, of the stored rows
 * (after the transpose, where stored so; a stack's E x out rows), groups
 * runs of len rows, run g from row first + g x stride, in that order.
 * Its name is the stored name, ':' and suffix (q, k, v, gate, up; a
 * stacked expert's number), its role, layer and expert as given.
 */
struct family_part {
	const char *suffix;             /* NULL: the expert's number */
	const char *role;
	int layer, expert;              /* expert: a stacked expert's index, else -1 */
	int64_t first, len, stride, groups;
};

/*
 * How many parts t (a stored tensor, its shape as seen: [out, in] where
 * transposed) splits into under c's family: 0 for a tensor that is one
 * as stored; SW_EDATA, naming t, where its rows do not give the parts
 * the config sizes (never split wrong). family_tensor_part: part p of
 * them (p below that count).
 */
int family_tensor_parts(const struct sw_config *c, const struct sw_tensor_info *t, size_t *n,
			struct sw_err *err);
void family_tensor_part(const struct sw_config *c, const struct sw_tensor_info *t, size_t p,
			struct family_part *out);

/* arch_check_shape for a family the model computes, of t's shape as the
 * tools see it (a matrix src stores transposed, family_tensor_layout,
 * turned to [out, in]); a family read for its matrices has its shapes as
 * stored (nothing is computed from the config). */
int family_check_shape(const struct sw_config *c, enum family_source src,
		       const struct sw_tensor_info *t, struct sw_err *err);

#endif
