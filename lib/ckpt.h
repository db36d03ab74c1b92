/*
 * ckpt.h - the tensor source: one checkpoint, whatever its file format.
 *
 * ckpt_open reads and validates the metadata of a scalewatch HDF5 v1
 * checkpoint or of a Hugging Face safetensors checkpoint (one file, a
 * sharded set through model.safetensors.index.json, or a directory holding
 * either; config.json beside it gives the architecture). Tensors come in
 * model order (embedding, layers 0..L-1 numerically, final norm, head).
 *
 * ckpt_load gives one tensor's data as float32 without copying where it
 * can: contiguous float32 data is mmapped in place; other data (bf16, f16,
 * chunked or compressed HDF5) is converted into a buffer. Release each view
 * before loading the next large one: peak memory tracks the largest
 * tensor, not the checkpoint.
 */
#ifndef SW_CKPT_H
#define SW_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "status.h"
#include "tensor.h"

enum ckpt_format { CKPT_HDF5, CKPT_SAFETENSORS };

struct ckpt_meta {
	enum ckpt_format format;
	struct sw_config config;
	int has_step;           /* step and tokens known (HDF5 always) */
	int64_t step, tokens;
	double train_loss, val_loss;  /* NaN: unknown */
	int head_tied;          /* no lm_head tensor: the head is the embedding */
};

struct ckpt;

struct ckpt_view {
	const float *data;      /* numel float32 values, valid until release */
	int64_t numel;
	int mapped;             /* 1: read in place from the file */
	/* private to ckpt.c */
	void *map_base;
	size_t map_len;
	float *owned;
	int uses_scratch;
};

/* Open and validate. SW_ENOINPUT if it cannot be opened, SW_EDATA if it is
 * not a valid checkpoint, SW_EIO on read errors. */
int ckpt_open(const char *path, struct ckpt **out, struct sw_err *err);
void ckpt_close(struct ckpt *ck);

const struct ckpt_meta *ckpt_meta(const struct ckpt *ck);
size_t ckpt_count(const struct ckpt *ck);
const struct sw_tensor_info *ckpt_info(const struct ckpt *ck, size_t i);

/* Index of the tensor with this role (and layer, -1 outside layers), or -1. */
long ckpt_find_role(const struct ckpt *ck, const char *role, int layer);

/*
 * The safetensors "__metadata__" maps of every shard, merged (empty for
 * HDF5). When it holds the scalewatch.* keys sw-convert writes, ckpt_open
 * already took step, tokens and each tensor's lr, wd and wd_mode from it.
 */
struct st_meta;
const struct st_meta *ckpt_st_meta(const struct ckpt *ck);

int ckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err);
void ckpt_release(struct ckpt *ck, struct ckpt_view *v);

/*
 * Companions of a tensor in a scalewatch HDF5 checkpoint: group/<name>
 * for group "fisher" (the trainer's GNB estimate) or "grads". has: 1 if
 * there, 0 if not (always 0 for safetensors). load: its numel values into
 * out. The attribute reader gives an integer attribute of it (batch_tokens,
 * draws), -1 if absent.
 */
int ckpt_has_aux(const struct ckpt *ck, const char *group, size_t i);
int ckpt_load_aux(const struct ckpt *ck, const char *group, size_t i, float *out,
		  struct sw_err *err);
int64_t ckpt_aux_attr(const struct ckpt *ck, const char *group, size_t i, const char *attr);

#endif
