/*
 * stwrite.h - writing Hugging Face safetensors: a streaming writer of
 * one file (atomically: temporary name, fsync, rename), config.json for
 * the families the model computes and the shard index. sw-convert's
 * export.
 */
#ifndef SW_STWRITE_H
#define SW_STWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "attrmap.h"
#include "../base/status.h"
#include "../base/tensor.h"

struct stw;

/* Start final_path with these tensors (names, shapes), every one stored as
 * dtype (F32 or BF16); the data follows in the same order. */
int stw_create(const char *final_path, const struct sw_tensor_info *t, size_t n,
	       enum sw_dtype dtype, struct stw **out, struct sw_err *err);
/* The same with a __metadata__ map (NULL: none). */
int stw_create_meta(const char *final_path, const struct sw_tensor_info *t, size_t n,
		    enum sw_dtype dtype, const struct attr_map *meta, struct stw **out,
		    struct sw_err *err);
/* The next tensor's numel float32 values, converted to the file's dtype. */
int stw_write(struct stw *w, const float *data, int64_t numel, struct sw_err *err);
int stw_commit(struct stw *w, struct sw_err *err);
void stw_abort(struct stw *w);

/* Write a Hugging Face config.json for c: its family's class
 * (family.c's hf_class) with its keys (LlamaConfig's, with Gemma's and
 * Gemma2's own, or GPT2Config's). */
int st_write_config(const char *final_path, const struct sw_config *c,
		    const char *torch_dtype, struct sw_err *err);

/* Write model.safetensors.index.json: metadata.total_size (bytes of
 * tensor data in all shards) and the weight_map name[i] -> shard[i]. */
int st_write_index(const char *final_path, uint64_t total_size,
		   const char *const *name, const char *const *shard, size_t n,
		   struct sw_err *err);

#endif
