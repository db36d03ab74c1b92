/*
 * h5read.h - the scalewatch HDF5 v1 checkpoint reader: a back end of the
 * tensor source (ckpt.c), which is the only caller.
 *
 * h5src_open validates the file (scalewatch-format(5)): the root's marks,
 * /config, /metrics, and every /params dataset's type, shape and
 * attributes against the config. Tensors come in the file's order (ckpt.c
 * sorts them into model order). Contiguous float32 data is mapped in
 * place; anything else is read into a buffer.
 */
#ifndef SW_H5READ_H
#define SW_H5READ_H

#include <stdint.h>

#include "attrmap.h"
#include "ckptsrc.h"

struct h5src;

/*
 * Open the checkpoint at path; fd is open on it (size bytes) and is the
 * reader's from now on, closed by h5src_close or on failure. Fills meta
 * (not head_tied) and a malloc'ed array *info of the *n tensors.
 */
int h5src_open(const char *path, int fd, uint64_t size, struct h5src **out,
	       struct ckpt_meta *meta, struct sw_tensor_info **info, size_t *n,
	       struct sw_err *err);
void h5src_close(struct h5src *s);

/* Tensor t's values as float32 (t one of the infos h5src_open gave). */
int h5src_load(struct h5src *s, const struct sw_tensor_info *t, struct ckpt_scratch *scratch,
	       struct ckpt_view *v, struct sw_err *err);

/* group/<name> beside /params/<name> ("fisher", "grads", "optim_state/m"):
 * there or not; its values (t->numel of them) into out; an integer
 * attribute of it, -1 if absent. */
int h5src_has_aux(const struct h5src *s, const char *group, const char *name);
int h5src_load_aux(const struct h5src *s, const char *group, const struct sw_tensor_info *t,
		   float *out, struct sw_err *err);
int64_t h5src_aux_attr(const struct h5src *s, const char *group, const char *name,
		       const char *attr);

/* The format entry ckpt.c dispatches through (ckptsrc.h). */
extern const struct ckpt_format_ops h5src_format;

/* Every scalar attribute of /, /config, /optim, /metrics, /optim_state
 * and of /params/<name> for the n tensors t, into map (attrmap.h keys). */
int h5src_attrs(const struct h5src *s, const struct sw_tensor_info *t, size_t n,
		struct attr_map *map, struct sw_err *err);

#endif
