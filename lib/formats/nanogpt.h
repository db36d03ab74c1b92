/*
 * nanogpt.h - nanoGPT's checkpoint as the tools see it: train.py's
 * ckpt.pt, torch.save({'model': the state dict, 'optimizer': ...,
 * 'model_args': {n_layer, n_head, n_embd, block_size, bias, vocab_size,
 * dropout}, 'iter_num': N, 'best_val_loss': ..., 'config': {...}}).
 *
 * The tensors (the dict 'model', found as any PyTorch file's: ptread.c)
 * have GPT-2's names, transformer.wte.weight, transformer.h.N.attn.
 * c_attn.weight, ..., in the gpt2 family's roles (family.c), but
 * nanoGPT's GPT keeps them in nn.Linear, [out, in] as stored (not
 * transposed as GPT2LMHeadModel's Conv1D: FAMILY_FROM_NANOGPT); under
 * torch.compile each name carries the prefix _orig_mod. (stripped by the
 * reader, as nanoGPT's sample.py strips it). There is no config.json:
 * the architecture is model_args'.
 */
#ifndef SW_NANOGPT_H
#define SW_NANOGPT_H

#include <stdint.h>

#include "../base/arch.h"
#include "../base/status.h"
#include "pickle.h"

struct nanogpt {
	int found;              /* the top dict holds a dict model_args */
	struct sw_config config;
	int has_step;           /* step known */
	int64_t step, tokens;   /* tokens -1: not known */
};

/*
 * From the pickle's top dict root: found 0 (and nothing else) when it
 * holds no dict model_args. Else the config, family gpt2: d_model n_embd,
 * n_heads and n_kv_heads n_head (head_dim n_embd / n_head, which must
 * divide, as nanoGPT asserts), n_layers n_layer, vocab_size, seq_len
 * block_size, d_ff 4 n_embd, norm_eps 1e-5 and hidden_act gelu (its
 * LayerNorm and nn.GELU), the head tied (nanoGPT's GPT ties lm_head to
 * wte; the reader unties it where the file keeps a head of its own);
 * each a size (an integer, 1 .. 2^31 - 1), bias true or false, or
 * SW_EDATA naming the key. The step is iter_num (the optimizer steps
 * taken), tokens iter_num times the tokens of an iteration as train.py
 * counts them, config's gradient_accumulation_steps x batch_size x
 * block_size; -1 (unknown) without those.
 *
 * Of any PyTorch file's top dict (nanoGPT's or not), the step is also
 * read from the keys training scripts save it under, iter_num, step,
 * global_step or iteration (the first that is an integer; a negative one
 * is SW_EDATA), the tokens then unknown (-1): a non-nanoGPT file gets
 * these alone (found 0).
 */
int nanogpt_read(const struct pk_value *root, struct nanogpt *ng, struct sw_err *err);

/* The prefix torch.compile gives every name (its OptimizedModule's
 * _orig_mod), which the names are read without. */
#define NANOGPT_COMPILED_PREFIX "_orig_mod."

#endif
