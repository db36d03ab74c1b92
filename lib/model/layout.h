/*
 * layout.h - the model's parameter layout: for a model's config (the
 * family's table in lib/base/family.c, each role's row in arch.c's),
 * which tensors it has, in model order, where each lies in the flat
 * blocks of parameters and gradients (struct model_tensor's offset),
 * its linear layers and their multipliers or gains, and the views
 * (struct model_ptrs) the step reads them by. Above the CPU kernels,
 * below the step; model_build (model.h) calls it.
 */
#ifndef SW_LAYOUT_H
#define SW_LAYOUT_H

#include <stddef.h>

#include "model.h"
#include "../base/status.h"

/* compiled with real = double (the unit tests that include model.c do),
 * the layout has another name, so that a test that forgets layout.c
 * fails to link rather than lay out doubles as floats */
#ifdef SW_REAL_DOUBLE
#define model_layout model_layout_f64
#endif

/* Lay out m's tensors for m->c, m->mult and m->design (set by
 * model_build): the tables, the zeroed blocks and the views. On failure
 * what it allocated stays in m, for model_free. */
int model_layout(struct model *m, struct sw_err *err);

/* Index of the tensor with role and layer (-1 outside layers), or -1. */
int model_find(const struct model *m, const char *role, int layer);

/* Layer l's views of `from` in `to`, each NULL where keep(m, its
 * tensor's index (-1: the model has none), ctx) is 0 (the R-operator's
 * views where its direction reaches). */
void model_layer_views_keep(const struct model *m, int l, const struct layer_ptrs *from,
			    struct layer_ptrs *to,
			    int (*keep)(const struct model *m, int tensor, const void *ctx),
			    const void *ctx);

/* Point layer l's views (m->p.layer[l]) at at_, where the tensor at
 * offset `from` of m->params is at at_[0] (paramstream.c's one layer in
 * memory); at_ NULL: every view NULL. m->params itself, where layer l's
 * values also have their place, is neither read nor written. */
void model_point_layer(struct model *m, int l, real *at_, size_t from);

#endif
