/*
 * metallama.h - Meta's own Llama layout (consolidated.NN.pth and
 * params.json, as Meta's releases and its llama code write them), turned
 * into the Hugging Face roles the tools know.
 *
 * Names: tok_embeddings -> embed, layers.N.attention.wq/wk/wv/wo -> q, k,
 * v, o, layers.N.feed_forward.w1/w2/w3 -> gate, down, up,
 * layers.N.attention_norm -> attn_norm, layers.N.ffn_norm -> ffn_norm,
 * norm -> final_norm, output -> lm_head; rope.freqs (the rotary
 * frequencies, a buffer params.json already fixes) is dropped.
 *
 * RoPE: Meta rotates the pairs of adjacent rows (2i, 2i+1) of each head
 * of wq and wk; Hugging Face (and lib/model/model.c) pairs row i with row
 * i + head_dim/2. The reader permutes those rows when loading, as
 * transformers' convert_llama_weights_to_hf.py does, so per-head slices
 * and the model built from the weights are right: Hugging Face row
 * j*head_dim/2 + i of a head is Meta's row 2i + j.
 *
 * Model-parallel shards (several consolidated.NN.pth, fairscale's slices)
 * are concatenated along the dimension Meta's code split them: wq, wk,
 * wv, w1, w3 and output (column-parallel) along dim 0, wo and w2
 * (row-parallel) along dim 1, tok_embeddings along dim 1 (Llama 1 and 2,
 * ParallelEmbedding) or dim 0 (Llama 3, VocabParallelEmbedding: told by
 * the slices' shapes); the norms are replicated: shard 0's are taken.
 */
#ifndef SW_METALLAMA_H
#define SW_METALLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "../base/status.h"

/* 1 if name is one of Meta's (tok_embeddings.weight, layers.N.attention.*,
 * ...): a state dict holding one is in Meta's layout. */
int meta_is_meta_name(const char *name);

/*
 * The role and layer of a Meta name: 1 and role set (Hugging Face's role
 * names, arch.h), 0 for a name to drop (rope.freqs), -1 for a name
 * Meta's layout does not have (kept as role other). Layer -1 outside the
 * layers.
 */
int meta_role(const char *name, char *role, size_t len, int *layer);

/*
 * params.json's bytes into c: dim, n_layers, n_heads, n_kv_heads
 * (default n_heads), norm_eps (default 1e-5), rope_theta (default
 * 10000), max_seq_len (default 0: unknown); the vocabulary and d_ff are
 * left 0 for the tensors' shapes to give (*vocab: params' vocab_size, -1
 * when it says -1, as Llama 1 and 2 do); use_scaled_rope as Hugging
 * Face's llama3 RoPE scaling (metallama.c says with which factor). Other
 * keys are ignored (multiple_of, ffn_dim_multiplier: the shapes say
 * what they would; see scalewatch-format(5)).
 */
int meta_parse_params(const char *json, size_t len, struct sw_config *c, int64_t *vocab,
		      struct sw_err *err);

/* The dimension model-parallel shards of role are concatenated along
 * (arch.h's split column): 0, 1, or -1 (replicated: the norms). The
 * embedding's: 1 (Llama 2), or 0 where a slice of it (rank, shape) has
 * all d_model columns (Llama 3). */
int meta_split_dim(const char *role, int rank, const int64_t *shape, int64_t d_model);

#endif
