/*
 * llmcgpt2.h - llm.c's GPT-2 checkpoints (karpathy/llm.c's
 * gpt2_124M.bin, gpt2_124M_bf16.bin, what train_gpt2.py's write_model
 * and the C trainers write): the header's parser and the reader, a back
 * end of the tensor source (ckpt.c).
 *
 * The header is 256 int32 (1024 bytes): the magic 20240326, the version
 * (3: float32 weights; 5: bfloat16), block_size (the learned positions'
 * length), vocab_size, n_layer, n_head, n_embd, and the vocabulary padded
 * to a multiple of 128 (the embedding's stored rows); the rest zero.
 * Then the weights, in nn.Linear's [out, in], every layer's of one kind
 * together: wte (padded_vocab x C), wpe (block_size x C), ln_1's weights
 * and biases, c_attn's weights (3C x C: q, k, v) and biases, attention
 * c_proj's weights and biases, ln_2's, mlp c_fc's (4C x C), mlp c_proj's
 * (C x 4C), then ln_f's weight and bias; the head is wte. The reader
 * lists them under nanoGPT's names (its model is nanoGPT's), c_attn
 * split into q, k and v by the tensor source, the embedding as its first
 * vocab_size rows (the padding rows are no token's and the loss never
 * reads them). GELU is the tanh form (llm.c's gelu), LayerNorm's eps
 * 1e-5. The file holds no step. Versions 1, 2 and 4 (unpadded or older
 * exports) are refused by number; a file whose size is not the header's
 * is refused, saying the size it needs.
 */
#ifndef SW_LLMCGPT2_H
#define SW_LLMCGPT2_H

#include <stddef.h>
#include <stdint.h>

#include "ckptsrc.h"

#define LLMC_GPT2_MAGIC 20240326
#define LLMC_GPT2_HEADER 1024

struct llmc_gpt2_header {
	int version;                    /* 3 or 5 */
	int64_t block_size, vocab_size, n_layers, n_heads, d_model, padded_vocab;
	uint64_t bytes;                 /* the whole file the header needs */
};

/*
 * The header at the start of a file of size bytes, buf holding its first
 * len bytes: SW_OK if it is llm.c's GPT-2 checkpoint of exactly that size
 * (h filled); SW_EDATA saying why not otherwise (err may be NULL).
 */
int llmc_gpt2_parse_header(const unsigned char *buf, size_t len, uint64_t size,
			   struct llmc_gpt2_header *h, struct sw_err *err);

/* The format entry ckpt.c dispatches through (ckptsrc.h): every file
 * with the magic (its version and sizes are checked by open). */
extern const struct ckpt_format_ops llmc_gpt2_format;

#endif
