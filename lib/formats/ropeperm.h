/*
 * ropeperm.h - q and k projections from the interleaved RoPE layout to
 * Hugging Face's rotate-half layout, the one scalewatch's model and tools
 * use.
 *
 * Meta's Llama code, llama2.c and llama.cpp's GGUF files rotate each
 * attention head's dimensions in adjacent pairs (2i, 2i+1); Hugging Face
 * Llama pairs i with i + hd/2, with the same angles theta^(-2i/hd). The
 * same model stored the interleaved way has the rows of its q and k
 * projections permuted within each head: row h*hd + j*hd/2 + i of the
 * rotate-half matrix is row h*hd + 2i + j of the interleaved one (i <
 * hd/2, j = 0, 1). That undoes transformers' convert_llama_weights_to_hf
 * permute and llama.cpp's permute for GGUF. With its rows so permuted, the
 * rotate-half model computes exactly the attention of the original; every
 * row stays in its head, so per-head statistics are unchanged.
 *
 * This module is the one place the permutation is written
 * (ropeperm_source_row); every reader that undoes it goes through it. The
 * readers of such files (ggufread.c, llama2c.c) keep what they opened in
 * a struct ropeperm_src, load their tensors through ropeperm_load, and
 * say in their attributes that they did (ropeperm_record); the PyTorch
 * reader (ptread.c) reads Meta's q and k slices, which may be strided
 * views, a row at a time from ropeperm_source_row.
 */
#ifndef SW_ROPEPERM_H
#define SW_ROPEPERM_H

#include <stddef.h>
#include <stdint.h>

#include "attrmap.h"
#include "ckptsrc.h"
#include "../base/status.h"
#include "../base/tensor.h"

/* The interleaved row that becomes rotate-half row `row` (head_dim even):
 * in the same head, so a matrix of whole heads maps onto itself. */
int64_t ropeperm_source_row(int64_t row, int64_t head_dim);

/* SW_OK if rows is a whole number of heads of an even head_dim > 0, what
 * the permutation needs; SW_EDATA otherwise. */
int ropeperm_check_rows(int64_t rows, int64_t head_dim, struct sw_err *err);

/*
 * A rows x cols projection stored interleaved at src, row_bytes bytes a
 * row of dtype (sw_to_f32's: F32, F16, BF16, F64, a quantization: rows of
 * whole blocks), as float32 rows in rotate-half order at dst. rows must pass ropeperm_check_rows; errors
 * of the conversion as sw_to_f32 gives them.
 */
int ropeperm_to_f32(enum sw_dtype dtype, const unsigned char *src, size_t row_bytes,
		    int64_t rows, int64_t cols, int64_t head_dim, float *dst, struct sw_err *err);

/* Where tensor k of such a file is and how to read it. */
struct ropeperm_tensor {
	uint64_t offset, nbytes;        /* in the file */
	enum sw_dtype dtype;            /* as stored (sw_to_f32's) */
	int permute;                    /* a q or k projection: rows to rotate-half */
};

/* What a reader of such a file keeps once it has opened it. */
struct ropeperm_src {
	int fd;                         /* the file, open until ropeperm_close */
	uint64_t size;
	int64_t head_dim;
	struct ropeperm_tensor *t;      /* (n) in the reader's tensor order */
	size_t n;
	struct attr_map attrs;          /* ropeperm_record's */
};

/* A source of n tensors over the open file fd (size bytes), which it
 * owns from now on (closed here on failure). */
int ropeperm_src_new(int fd, uint64_t size, size_t n, struct ropeperm_src **out,
		     struct sw_err *err);

/*
 * The attributes of a checkpoint read from such a file: source_format =
 * source ("GGUF v3", "llama2.c v1") and qk_rows, the permutation done
 * (scalewatch-format(5)), as root attributes ("scalewatch.source_format").
 */
int ropeperm_record(struct ropeperm_src *s, const char *source, struct sw_err *err);

/*
 * The load, attrs and close of such a reader's format entry (ckptsrc.h):
 * tensor k (its shape [out, in] when permuted) as float32 into v, F32 at
 * an aligned address in place, anything else converted into a buffer,
 * the rows of a q or k projection put in rotate-half order (errors name
 * the tensor); the attributes ropeperm_record set; everything freed.
 */
int ropeperm_load(void *src, size_t k, const struct sw_tensor_info *t,
		  struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err);
int ropeperm_attrs(void *src, const struct sw_tensor_info *info, size_t n,
		   struct attr_map *scratch, const struct attr_map **out, struct sw_err *err);
void ropeperm_close(void *src);

#endif
