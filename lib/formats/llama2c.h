/*
 * llama2c.h - llama2.c's checkpoint files (karpathy/llama2.c, run.c and
 * export.py): the header's parser and the reader, a back end of the
 * tensor source (ckpt.c).
 *
 * Version 0 (legacy) is 7 int32, dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size (positive: the head is the embedding; negative:
 * an untied head of -vocab_size rows follows), seq_len, then float32
 * weights: the embedding, each layer's attention norms, wq, wk, wv, wo,
 * ffn norms, w1, w2, w3 (all layers of one kind together), the final
 * norm, the RoPE tables freq_cis_real and freq_cis_imag (seq_len x
 * head_dim/2 each; skipped, as run.c skips them), the head if untied.
 * Version 1 is "ak42" (uint32 0x616b3432), int32 1, the 7 int32 (vocab
 * positive), a byte 1 if the head is the embedding, zeros to byte 256,
 * then the weights: attention norms, ffn norms, final norm, embedding,
 * wq, wk, wv, wo, w1, w2, w3, the head if untied.
 *
 * A legacy file has no mark but its header: it is recognised only when
 * every size is positive and plausible (dim at most 65536, hidden_dim
 * 2^20, layers and heads 4096, |vocab| 2^24, seq_len 2^24; dim a multiple
 * of n_heads with an even head_dim, n_heads of n_kv_heads) and the bytes
 * the weights need are exactly the file's size, with the RoPE tables or
 * without. A header that is plausible but disagrees with the file's size
 * is refused, saying what it needs (l2c_misfit_format). llama2.c's q and
 * k rows are in interleaved RoPE order: they are read in rotate-half
 * order (ropeperm.h); w1, w2, w3 are gate, down, up; rope_theta is 10000
 * and norm_eps 1e-5, as run.c computes.
 */
#ifndef SW_LLAMA2C_H
#define SW_LLAMA2C_H

#include <stddef.h>
#include <stdint.h>

#include "ckptsrc.h"

#define L2C_MAGIC 0x616b3432u    /* "ak42" */
#define L2C_V1_HEADER 256
#define L2C_V0_HEADER 28

struct l2c_header {
	int version;                    /* 0 (legacy) or 1 */
	int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
	int shared;                     /* the head is the embedding */
	int freq_cis;                   /* legacy: the RoPE tables are there */
	uint64_t header_bytes;          /* 28 or 256 */
	uint64_t bytes;                 /* the whole file: header, weights, tables */
};

/*
 * The header at the start of a file of size bytes, buf holding its first
 * len bytes (len >= min(size, 256)): SW_OK if it is a llama2.c file of
 * exactly that size, with h filled; SW_EDATA saying why not otherwise
 * (err may be NULL). *plausible (when not NULL) says whether the bytes
 * read as a legacy header with plausible sizes, whatever the file size.
 * When only the size is wrong, h->bytes is the size the header needs
 * (legacy: without the RoPE tables).
 */
int l2c_parse_header(const unsigned char *buf, size_t len, uint64_t size, struct l2c_header *h,
		     int *plausible, struct sw_err *err);

/* The format entries ckpt.c dispatches through (ckptsrc.h): llama2.c
 * files; legacy headers whose sizes disagree with the file, refused. */
extern const struct ckpt_format_ops l2c_format;
extern const struct ckpt_format_ops l2c_misfit_format;

#endif
