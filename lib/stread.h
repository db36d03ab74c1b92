/*
 * stread.h - the Hugging Face safetensors checkpoint reader: a back end of
 * the tensor source (ckpt.c), which is the only caller.
 *
 * A checkpoint is one .safetensors file or a model.safetensors.index.json
 * with its shards, and the config.json beside it (the architecture). Every
 * shard's header is validated by safetensors.c's parsers; each tensor gets
 * its role, block and layer from its Hugging Face name (arch.c). The
 * "__metadata__" of the shards, merged, is the checkpoint's attribute map
 * (attrmap.h): a model sw-convert exported keeps its step, tokens, losses
 * and per-tensor lr, wd and wd_mode there, and they are applied.
 */
#ifndef SW_STREAD_H
#define SW_STREAD_H

#include <stddef.h>

#include "attrmap.h"
#include "ckptsrc.h"

struct stsrc;

/* Open file (a .safetensors file or an index): fills meta (not head_tied)
 * and a malloc'ed array *info of the *n tensors in the files' order. */
int stsrc_open(const char *file, struct stsrc **out, struct ckpt_meta *meta,
	       struct sw_tensor_info **info, size_t *n, struct sw_err *err);
void stsrc_close(struct stsrc *s);

/* Tensor k (its index in *info; t = that info) as float32. */
int stsrc_load(struct stsrc *s, size_t k, const struct sw_tensor_info *t,
	       struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err);

/* The merged __metadata__. */
const struct attr_map *stsrc_attrs(const struct stsrc *s);

#endif
