/*
 * ckpt.h - the tensor source: one checkpoint, whatever its file format.
 * This is the only way lib/ and the tools read a checkpoint.
 *
 * ckpt_open resolves a directory to the file a model directory is read
 * from, then gives the file to the one reader in ckpt.c's table of formats
 * whose sniff claims its bytes (ckptsrc.h: scalewatch HDF5, safetensors,
 * PyTorch, GGUF, llama2.c; an index goes to the format of its shards).
 * Every reader stands behind the same interface, so what follows holds for
 * all of them. Tensors come in model order (embedding, layers 0..L-1
 * numerically, final norm, head).
 *
 * ckpt_load gives one tensor's data as float32 without copying where it
 * can: contiguous float32 data is mmapped in place; other data (bf16, f16,
 * strided, permuted, chunked or compressed) is converted into a buffer.
 * Release each view before loading the next large one: peak memory tracks
 * the largest tensor, not the checkpoint.
 */
#ifndef SW_CKPT_H
#define SW_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "attrmap.h"
#include "ckptsrc.h"
#include "../base/status.h"
#include "../base/tensor.h"

struct ckpt;

/* Open and validate. SW_ENOINPUT if it cannot be opened, SW_EDATA if it is
 * not a valid checkpoint, SW_EIO on read errors. */
int ckpt_open(const char *path, struct ckpt **out, struct sw_err *err);
void ckpt_close(struct ckpt *ck);

const struct ckpt_meta *ckpt_meta(const struct ckpt *ck);
/* What the file is, for a message: "a safetensors file", "a GGUF file",
 * ... (its reader's name, the one place each is written). */
const char *ckpt_format_name(const struct ckpt *ck);
/* The file opened: the path given, or the file found in a directory. */
const char *ckpt_path(const struct ckpt *ck);
size_t ckpt_count(const struct ckpt *ck);
const struct sw_tensor_info *ckpt_info(const struct ckpt *ck, size_t i);

/* Index of the tensor with this role (and layer, -1 outside layers), or -1. */
long ckpt_find_role(const struct ckpt *ck, const char *role, int layer);
/* The same of a mixture of experts' expert (-1: a tensor of no expert's),
 * the index a model's tensor is read from. */
long ckpt_find_expert(const struct ckpt *ck, const char *role, int layer, int expert);

/*
 * Every scalewatch attribute of the checkpoint as one map of
 * scalewatch-format(5) keys (attrmap.h): "scalewatch.step",
 * "scalewatch.optim.lr_max", "scalewatch.params.NAME.lr", ... From an
 * HDF5 checkpoint the attributes of /, /config, /optim, /metrics,
 * /optim_state and every /params dataset (read on first use); from
 * safetensors the shards' "__metadata__", merged (every key, not only the
 * scalewatch ones); from the other formats what their readers record
 * (source_format, source_name, the RoPE permutation done). ckpt_open
 * already took step, tokens, the losses and each tensor's lr, wd and
 * wd_mode from it.
 */
int ckpt_attrs(struct ckpt *ck, const struct attr_map **out, struct sw_err *err);

/*
 * One attribute of it: obj "/", "/optim", "/params/NAME", ...; *present
 * says whether it is there (NULL: it must be, else SW_EDATA). A number
 * (integer: an integer) or a string (SW_EDATA when of the other type).
 */
int ckpt_attr_number(struct ckpt *ck, const char *obj, const char *attr, int integer,
		     double *v, int *present, struct sw_err *err);
int ckpt_attr_integer(struct ckpt *ck, const char *obj, const char *attr, int64_t *v,
		      int *present, struct sw_err *err);
int ckpt_attr_string(struct ckpt *ck, const char *obj, const char *attr, char *buf,
		     size_t len, int *present, struct sw_err *err);

int ckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err);
/*
 * The same, for the passes that read BF16 and F16 themselves (gram.h):
 * such data stored contiguous (safetensors) is given in place, v->raw of
 * v->raw_dtype, with no float32 copy (half the memory, half the bytes read
 * per pass); anything else as ckpt_load gives it, v->raw = v->data, F32.
 */
int ckpt_load_raw(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err);
void ckpt_release(struct ckpt *ck, struct ckpt_view *v);

/*
 * Companions of tensor i in a scalewatch HDF5 checkpoint: group/<name>
 * for group "fisher" (the trainer's GNB estimate), "grads", or
 * "optim_state/m" and "optim_state/v" (the optimizer's moments). has: 1
 * if there, 0 if not (always 0 for the other formats). load: its numel values
 * into out. aux_attr: an integer attribute of it (batch_tokens, draws),
 * -1 if absent.
 */
int ckpt_has_aux(const struct ckpt *ck, const char *group, size_t i);
int ckpt_load_aux(const struct ckpt *ck, const char *group, size_t i, float *out,
		  struct sw_err *err);
int64_t ckpt_aux_attr(const struct ckpt *ck, const char *group, size_t i, const char *attr);
/* As ckpt_load_aux, a companion of n values (not the tensor's numel):
 * Adam-mini's second moments, one per block. */
int ckpt_load_aux_n(const struct ckpt *ck, const char *group, size_t i, int64_t n, float *out,
		    struct sw_err *err);

#endif
