/*
 * ckptsrc.h - the interface between ckpt.c, the tensor source, and the
 * checkpoint readers, one per file format: what a reader is (struct
 * ckpt_format_ops, an entry of ckpt.c's table of formats), what it hands
 * up (struct ckpt_meta, the description of a checkpoint; struct
 * ckpt_view, one tensor's data as float32: a range of the file mapped in
 * place, or a buffer the data was converted into) and the helpers every
 * reader makes its views with.
 *
 * The readers (h5read.c, stread.c, ptread.c, ggufread.c, llama2c.c)
 * depend on this module, on their formats' parsers and on what formats
 * share (hfdir.c, a Hugging Face directory's rules; ropeperm.c, the RoPE
 * row permutation), never on another reader or on ckpt.c, which sits on
 * top.
 */
#ifndef SW_CKPTSRC_H
#define SW_CKPTSRC_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "../base/family.h"
#include "../base/mapguard.h"
#include "../base/status.h"
#include "../base/tensor.h"

enum ckpt_format { CKPT_HDF5, CKPT_SAFETENSORS, CKPT_PYTORCH, CKPT_GGUF, CKPT_LLAMA2C,
		   CKPT_LLMC_GPT2 };

struct ckpt_meta {
	enum ckpt_format format;
	struct sw_config config;
	enum family_source source;      /* who wrote the tensors (FAMILY_FROM_HF: 0) */
	int has_step;           /* step and tokens known (HDF5 always); tokens -1:
				   the step alone (a PyTorch file's step key) */
	int64_t step, tokens;
	double train_loss, val_loss;  /* NaN: unknown */
	int head_tied;          /* no lm_head tensor: the head is the embedding */
	/* a shard of a set opened alone (its index beside it lists it): its
	 * layers are some of the config's, not all (ckpt.c checks all else) */
	int one_shard;
	/* in: the dict a FILE:KEY name selects inside the file ("" none), set
	 * by ckpt.c before open, and only for a format that reads_key */
	char key[SW_NAME_MAX];
};

struct ckpt_view {
	const float *data;      /* numel float32 values, valid until release
				 * (NULL when raw is in place of them) */
	int64_t numel;
	int mapped;             /* 1: read in place from the file */
	/* ckpt_load_raw: the values as stored, float32, BF16 or F16, in
	 * place where the reader can (raw_ok is its request to the reader),
	 * else raw = data and raw_dtype F32 */
	int raw_ok;
	const void *raw;
	enum sw_dtype raw_dtype;
	/* private to ckptsrc.c */
	struct mapguard map;    /* the range of the file mapped, if any */
	int shrank;             /* the file shrank while its data was converted */
	float *owned;
	struct ckpt_scratch *scratch;   /* the buffer lent to this view, or NULL */
};

/* The conversion buffer of one checkpoint, reused from tensor to tensor;
 * a second view while it is lent gets a buffer of its own. */
struct ckpt_scratch {
	float *buf;
	size_t cap;
	int busy;
};

/*
 * A checkpoint file format: what the tensor source (ckpt.c) needs of a
 * reader. ckpt.c asks every format's sniff about the open file; exactly
 * one must claim it (two: refused as ambiguous, docs/trust.md); then
 * open takes it over.
 *
 *   sniff     1 if the open file fd (size bytes) is of this format, from
 *             its bytes alone (pread; never the name)
 *   open      validate path (fd open on it, size bytes; open owns fd from
 *             here, closing it on failure), fill meta (not head_tied) and
 *             a malloc'ed array *info of the *n tensors in file order
 *   load      tensor k of that order (t its info) as float32 into v; or,
 *             when v->raw_ok, BF16/F16 data in place (v->raw, v->raw_dtype,
 *             v->data NULL) where it is stored contiguous and aligned
 *   attrs     the checkpoint's attributes (attrmap.h): fill scratch and
 *             point *out at it, or point *out at a map the reader keeps
 *   close     everything open frees (NULL is fine)
 *   has_aux, load_aux, aux_attr
 *             companions such as /fisher and /grads (NULL: the format has
 *             none; see ckpt.h)
 *   reads_index
 *             1: open also takes a JSON index naming shards of this
 *             format (model.safetensors.index.json, pytorch_model.bin.
 *             index.json): ckpt.c gives an index to the format its first
 *             shard's bytes claim
 *   reads_key 1: open takes meta->key, a dict inside the file (PyTorch);
 *             FILE:KEY is refused for the other formats
 */
struct attr_map;
struct ckpt_format_ops {
	const char *name;               /* for messages: "an HDF5 file" */
	int (*sniff)(int fd, uint64_t size);
	int (*open)(const char *path, int fd, uint64_t size, void **src, struct ckpt_meta *meta,
		    struct sw_tensor_info **info, size_t *n, struct sw_err *err);
	int (*load)(void *src, size_t k, const struct sw_tensor_info *t,
		    struct ckpt_scratch *scratch, struct ckpt_view *v, struct sw_err *err);
	int (*attrs)(void *src, const struct sw_tensor_info *info, size_t n,
		     struct attr_map *scratch, const struct attr_map **out, struct sw_err *err);
	void (*close)(void *src);
	int (*has_aux)(const void *src, const char *group, const char *name);
	int (*load_aux)(const void *src, const char *group, const struct sw_tensor_info *t,
			float *out, struct sw_err *err);
	int64_t (*aux_attr)(const void *src, const char *group, const char *name, const char *attr);
	int reads_index, reads_key;
};

/* 1 if HDF5's signature is where HDF5 looks for its superblock in the
 * open file fd (size bytes): 0, 512, 1024, 2048, ... (a userblock may
 * come first) */
int ckptsrc_sniff_hdf5(int fd, uint64_t size);

/*
 * Map len bytes at offset of the open file fd (file_size bytes) into v;
 * *bytes points at them. SW_EDATA if the range lies outside the file. fd
 * stays open until the view is released. The mapping survives the file
 * shrinking meanwhile (lib/base/mapguard.h): ckptsrc_check says so.
 */
int ckptsrc_map(int fd, uint64_t file_size, uint64_t offset, uint64_t len,
		struct ckpt_view *v, const void **bytes, struct sw_err *err);

/* A buffer of numel floats for v: the scratch buffer when free. */
int ckptsrc_buffer(struct ckpt_scratch *s, int64_t numel, struct ckpt_view *v,
		   float **buf, struct sw_err *err);

/* Unmap the range of v, if any, once its bytes were converted (whether the
 * file shrank meanwhile is kept for ckptsrc_check). */
void ckptsrc_unmap(struct ckpt_view *v);
/* numel values of dtype at src (inside v's mapping) into dst as float32, a
 * chunk at a time, each chunk's pages of the mapping dropped once
 * converted: the peak is the float32 copy, not the copy and the file. */
int ckptsrc_convert(enum sw_dtype dtype, const void *src, float *dst, int64_t numel,
		    struct ckpt_view *v, struct sw_err *err);

/*
 * After a view's data was used, before anything computed from it is
 * trusted: SW_EIO "the file shrank while it was read" if the file was
 * truncated while v's range was mapped (the data read as zeros), whether
 * the view reads the mapping in place or was converted from it.
 */
int ckptsrc_check(const struct ckpt_view *v, struct sw_err *err);

/* Give back what v holds (mapping, buffer); v is zeroed. */
void ckptsrc_release(struct ckpt_view *v);

void ckptsrc_scratch_free(struct ckpt_scratch *s);

#endif
