/*
 * family.h - the architecture families whose checkpoints the tools name:
 * per family, the Hugging Face tensor names of each role, and whether
 * the model computes it.
 *
 * The Llama family (llama, mistral, qwen2, qwen3) is what the model
 * computes; its names are arch.c's. Every other family here is read for
 * its matrices (sw-ls, sw-norms, sw-spectrum, sw-qkdrift): a table of
 * name patterns gives each tensor its role, layer and expert, and the
 * role its block, class and norm type (arch.c's one table of roles). An
 * architecture no table knows is read too, every tensor block and role
 * other; the model's builders refuse both by name.
 */
#ifndef SW_FAMILY_H
#define SW_FAMILY_H

#include <stddef.h>

#include "arch.h"
#include "status.h"
#include "tensor.h"

/* One pattern: a tensor name with {L} (the layer) and {E} (the expert)
 * where the name holds those numbers, and the role it has. */
struct family_name {
	const char *pattern;
	const char *role;
};

struct arch_family {
	const char *type;               /* config.json's model_type: gemma2 */
	const char *hf_class;           /* its architectures[0]: Gemma2ForCausalLM */
	int model;                      /* 1: the model computes it (arch_supported) */
	int tie_default;                /* tie_word_embeddings config.json may leave out */
	const struct family_name *names;        /* NULL: arch.c's Llama names */
	size_t n_names;
};

/* The families read for their matrices, and those the model computes. */
#define FAMILY_LISTED "gemma, gemma2, gemma3_text, phi3, olmo2, gpt_neox, mixtral, qwen2_moe, " \
	"qwen3_moe, olmoe, gpt2"

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

/* How a tensor is stored: as the model sees it (PyTorch's [out, in]), or
 * transposed ([in, out], GPT-2's Conv1D), which the tensor source
 * (ckpt.c) turns to [out, in] for every tool. */
enum family_layout { FAMILY_AS_STORED, FAMILY_TRANSPOSED };
enum family_layout family_tensor_layout(const struct sw_config *c, const char *name);

/* arch_check_shape for a family the model computes; a family read for
 * its matrices has its shapes as stored (nothing is computed from the
 * config). */
int family_check_shape(const struct sw_config *c, const struct sw_tensor_info *t,
		       struct sw_err *err);

#endif
