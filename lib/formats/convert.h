/*
 * convert.h - scalewatch HDF5 checkpoints to Hugging Face safetensors and
 * back: the work of sw-convert.
 *
 * HDF5 (or, with --to safetensors, any format the tools read) -> a
 * directory that transformers' LlamaForCausalLM.from_pretrained
 * loads: config.json and model.safetensors, or, above a shard size, the
 * shards model-0000K-of-0000N.safetensors and model.safetensors.index.json;
 * F32 or BF16 (rounded to nearest even). Every scalar attribute of the
 * checkpoint (the root's step and tokens, /config, /optim, /metrics, each
 * /params dataset's block, role, lr, wd, ...) goes into the safetensors
 * "__metadata__" under a scalewatch.* key (scalewatch-format(5)).
 *
 * Safetensors (one file, a sharded set or their directory, config.json
 * beside), or any other format the tools read (PyTorch files, Meta's
 * layout) -> one scalewatch HDF5 v1 checkpoint with every attribute the
 * tools need, from config.json and the architecture (lib/base/arch.c), then
 * from the scalewatch.* metadata where present: so HDF5 -> safetensors ->
 * HDF5 gives back every tensor bit for bit (F32) and every attribute.
 * Optimizer state, gradients and Fisher estimates are not carried.
 *
 * GGUF and llama2.c files (read as the tools read them: Hugging Face
 * names, q/k rows in rotate-half order) go either way: to HDF5 when OUT
 * is named *.h5 or *.hdf5, else to a safetensors directory; their root
 * attributes source_format and qk_rows say where the tensors came from.
 *
 * Hugging Face Llama has no learnable multipliers, no norm-everywhere
 * norms and no gain-less RMSNorm: such a model is refused (SW_EDATA)
 * naming the tensor (or the /config option), never exported wrong.
 *
 * One tensor in memory at a time. Outputs appear whole or not at all: the
 * HDF5 file through h5io's temporary name, the directory built under a
 * temporary name beside OUT and renamed into place; an existing OUT is
 * replaced only with force, and never when it (or a file the export
 * replaces in it) is IN or one of IN's files (atomic_check_output,
 * ckptfiles.h), nor when it is a symbolic link.
 */
#ifndef SW_CONVERT_H
#define SW_CONVERT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ckptsrc.h"
#include "../base/status.h"
#include "../base/tensor.h"

/* What OUT is: named (sw-convert --to), or chosen by convert_to_hdf5. */
enum convert_to { CONVERT_TO_AUTO, CONVERT_TO_HDF5, CONVERT_TO_SAFETENSORS };

struct convert_opts {
	enum convert_to to;
	enum sw_dtype dtype;    /* safetensors out: SW_DTYPE_F32 or SW_DTYPE_BF16 */
	uint64_t shard_size;    /* safetensors out: most tensor bytes in one file */
	int force;              /* replace an existing OUT (never an input) */
};

struct convert_result {
	int to_safetensors;     /* the direction IN's format chose */
	size_t tensors;
	int shards;             /* safetensors files written (1: model.safetensors) */
	uint64_t bytes;         /* tensor data written */
	char culprit[PATH_MAX]; /* on failure: the file the message is about */
};

/* F32, 5 GB shards (save_pretrained's default), no force. */
void convert_opts_init(struct convert_opts *o);

/* Convert in to out (o->to). On failure err says
 * what is wrong and r->culprit which file (in, out, or a file under out). */
/* The direction: the one `to` names; else HDF5 in becomes safetensors,
 * safetensors HDF5, and any other format (PyTorch, GGUF, llama2.c) HDF5
 * when out's name ends in .h5 or .hdf5, else a safetensors directory.
 * 1: to HDF5. */
int convert_to_hdf5(enum convert_to to, enum ckpt_format in, const char *out);
int convert_run(const char *in, const char *out, const struct convert_opts *o,
		struct convert_result *r, struct sw_err *err);

/* 1 if Hugging Face's class for arch (llama, mistral, qwen2, qwen3) has a
 * tensor of this role, 0 if not (multipliers, norm-everywhere norms, ...). */
int convert_hf_has_role(const char *arch, const char *role);

/* "10MB" (10^6), "2GiB" (2^30), "4096", "1.5GB" -> bytes; -1 if bad. */
int convert_parse_size(const char *s, uint64_t *bytes);

#endif
