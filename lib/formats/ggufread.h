/*
 * ggufread.h - the GGUF checkpoint reader (llama.cpp's files): a back end
 * of the tensor source (ckpt.c), which is the only caller.
 *
 * The file is validated by gguf.c's parser; the architecture comes from
 * its llama.* metadata (general.architecture must be llama):
 * embedding_length, block_count, attention.head_count, head_count_kv,
 * feed_forward_length, context_length, attention.layer_norm_rms_epsilon,
 * rope.freq_base (default 10000), attention.key_length (head_dim), the
 * vocabulary from llama.vocab_size, the tokenizer's token list or the
 * embedding's rows. llama.cpp's tensor names are mapped to Hugging Face's
 * (token_embd -> model.embed_tokens, blk.N.attn_q -> model.layers.N.
 * self_attn.q_proj, ffn_gate, ffn_up, ffn_down, attn_norm, ffn_norm,
 * output_norm, output -> lm_head; no output: a tied head), GGUF's dims
 * (fastest first) to PyTorch's [out, in], and the q and k rows, which
 * llama.cpp's converter permuted to interleaved RoPE pairs, back to
 * rotate-half (ropeperm.h). F32, F16, BF16, F64 and the quantizations
 * (Q4_0 ... Q8_0, Q2_K ... Q6_K: gguf.h) are read as float32 (F32 in
 * place); any other type is refused at open, by name.
 */
#ifndef SW_GGUFREAD_H
#define SW_GGUFREAD_H

#include <stdint.h>

#include "ckptsrc.h"

/* 1 if the open file fd (size bytes) starts with GGUF's magic. */
int ggufsrc_sniff(int fd, uint64_t size);

/* The format entry ckpt.c dispatches through (ckptsrc.h). */
extern const struct ckpt_format_ops ggufsrc_format;

#endif
