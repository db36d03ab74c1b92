/*
 * modelint.h - inside the model: the CPU as the step's back end, what
 * model.c shares with modelhvp.c (the R-operator), whose passes run the
 * CPU's step beside their own. Not for other modules: they use model.h
 * and modelhvp.h. Both functions are model.c's.
 */
#ifndef SW_MODELINT_H
#define SW_MODELINT_H

#include "model.h"
#include "step.h"

/* the CPU model as the step's back end (step.h) */
struct model_step model_cpu_step(struct model *m);
/* the attention backward's (B, KV, T, T) scratch in m's */
real *model_att_scratch(const struct model *m);

#endif
