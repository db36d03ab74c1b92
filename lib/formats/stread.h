/*
 * stread.h - the Hugging Face safetensors checkpoint reader: a back end of
 * the tensor source (ckpt.c), which is the only caller.
 *
 * A checkpoint is one .safetensors file or a model.safetensors.index.json
 * with its shards, and the config.json beside it (the architecture): the
 * directory's rules are hfdir.h's, shared with the PyTorch reader. Every
 * shard's header is validated by safetensors.c's parsers; each tensor gets
 * its role, block and layer from its Hugging Face name (arch.c). The
 * "__metadata__" of the shards, merged, is the checkpoint's attribute map
 * (attrmap.h): a model sw-convert exported keeps its step, tokens, losses
 * and per-tensor lr, wd and wd_mode there, and they are applied (a key
 * two shards give different values is refused).
 *
 * Only regular files are opened (a FIFO is never waited on); a shard the
 * index names that is a symlink must not lead out of the index's
 * directory (hfdir_check_link); a shard that is also an HDF5 file is
 * refused.
 */
#ifndef SW_STREAD_H
#define SW_STREAD_H

#include <stddef.h>
#include <stdint.h>

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

/*
 * What the bytes of the open file fd (size bytes) look like, read with
 * pread: 1 if it starts as a safetensors file does (a header length that
 * fits the file and the 100 MB cap, then '{'). A shard that is also an
 * HDF5 file (ckptsrc_sniff_hdf5) is refused (open_shard).
 */
int stsrc_sniff(int fd, uint64_t size);

/* The format entry ckpt.c dispatches through (ckptsrc.h): a .safetensors
 * file or an index, told apart by their bytes. */
extern const struct ckpt_format_ops stsrc_format;

/* The merged __metadata__. */
const struct attr_map *stsrc_attrs(const struct stsrc *s);

#endif
