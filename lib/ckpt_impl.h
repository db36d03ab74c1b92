/*
 * ckpt_impl.h - private to the tensor source: struct ckpt and the entry
 * points of its two back ends (h5io.c for scalewatch HDF5, safetensors.c
 * for Hugging Face safetensors). Tools include ckpt.h, never this.
 */
#ifndef SW_CKPT_IMPL_H
#define SW_CKPT_IMPL_H

#include <hdf5.h>
#include <limits.h>

#include "ckpt.h"
#include "safetensors.h"

struct ckpt_loc {               /* where tensor i's bytes are */
	int shard;              /* safetensors: index into shards */
	uint64_t offset;        /* safetensors: absolute file offset */
	uint64_t nbytes;
};

struct ckpt_shard {
	char path[PATH_MAX];
	int fd;
	uint64_t size;
};

struct ckpt {
	char path[PATH_MAX];
	struct ckpt_meta meta;
	size_t n;
	struct sw_tensor_info *info;    /* (n) in model order */
	struct ckpt_loc *loc;           /* (n) */
	/* HDF5 */
	hid_t h5;
	int h5fd;
	uint64_t h5size;
	int h5_userblock;               /* nonzero: never mmap */
	/* safetensors */
	struct ckpt_shard *shards;
	int nshards;
	struct st_meta st_meta;         /* __metadata__ of every shard, merged */
	/* the reused conversion buffer */
	float *scratch;
	size_t scratch_cap;
	int scratch_busy;
};

int h5ckpt_open(struct ckpt *ck, struct sw_err *err);
int h5ckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err);
void h5ckpt_close(struct ckpt *ck);

int stckpt_open(struct ckpt *ck, struct sw_err *err);
int stckpt_load(struct ckpt *ck, size_t i, struct ckpt_view *v, struct sw_err *err);
void stckpt_close(struct ckpt *ck);

/* Shared by the back ends (ckpt.c). */
int ckpt_map(int fd, uint64_t file_size, uint64_t offset, uint64_t len,
	     struct ckpt_view *v, const void **bytes, struct sw_err *err);
int ckpt_buffer(struct ckpt *ck, int64_t numel, struct ckpt_view *v,
		float **buf, struct sw_err *err);
/* Sort info (and loc alongside) into model order; reject two tensors
 * claiming the same known role and layer. */
int ckpt_sort_and_check(struct ckpt *ck, struct sw_err *err);

#endif
