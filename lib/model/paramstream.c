/* paramstream.c - layers read from the checkpoint as the passes reach them
 * (see paramstream.h). */
#include "paramstream.h"
#include "layout.h"
#include "modelio.h"

#include <stdlib.h>
#include <string.h>

struct param_stream {
	struct ckpt *ck;
	struct model *m;
	int L;
	int *first, *end;               /* (L) layer l's tensors: [first, end) of m->tensors */
	/* the one layer in memory: its tensors as laid out in m->params,
	 * from the first's offset; its pages stay mapped from one layer to
	 * the next (handing them back and faulting them in again, zeroed,
	 * cost twice the widening) */
	real *slot;
	int loaded;                     /* the layer whose values are in slot, or -1 */
	double resident;
	int rc;                         /* the first failure during the passes */
	struct sw_err err;
};

/* layer l's views pointed at the slot, the layer before's NULL; with
 * read, its values read into the slot again (and checked again: it costs
 * little beside the widening). Failing, the views are the slot's all the
 * same: the passes run on to their end, on wrong values, and the caller
 * discards what they give (param_stream_status). */
static int reload(struct param_stream *ps, int l, int read, struct sw_err *err)
{
	const struct model_tensor *t = ps->m->tensors;
	size_t from = t[ps->first[l]].offset;
	int rc = SW_OK;

	if (ps->loaded >= 0)
		model_point_layer(ps->m, ps->loaded, NULL, 0);
	for (int i = ps->first[l]; read && i < ps->end[l] && !rc; i++)
		rc = modelio_load_tensor(ps->ck, ps->m, i, ps->slot + (t[i].offset - from), err);
	model_point_layer(ps->m, l, ps->slot, from);
	ps->loaded = l;
	return rc;
}

/* m's layer_weights: the layer asked for replaces the one in memory,
 * which stays until another is asked for (the backward starts with the
 * layer the forward ended with); after a failure, nothing is read */
static void layer_weights(void *ctx, int l)
{
	struct param_stream *ps = ctx;

	if (ps->loaded != l) {
		int rc = reload(ps, l, !ps->rc, &ps->err);
		ps->rc = ps->rc ? ps->rc : rc;
	}
}

int param_stream_open(struct ckpt *ck, struct model *m, struct param_stream **out,
		      struct sw_err *err)
{
	struct param_stream *ps = calloc(1, sizeof *ps);
	int rc;

	*out = NULL;
	if (!ps)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	ps->loaded = -1;
	ps->ck = ck;
	if ((rc = modelio_build(ps->ck, m, err)))
		goto fail_built;
	ps->m = m;
	ps->L = (int)m->c.n_layers;
	if (m->eff || m->nreparams) {
		rc = sw_fail(err, SW_EUSAGE, "a model with multipliers, gains or reparameterized gains "
			     "needs every layer at once: not with --low-memory");
		goto fail;
	}
	/* m is built only now: the check of its config comes here */
	if (m->c.n_experts) {
		rc = sw_fail(err, SW_EUSAGE, "streaming a mixture of experts' layers is not built yet");
		goto fail;
	}
	ps->first = malloc(((size_t)ps->L + 1) * sizeof *ps->first);
	ps->end = calloc((size_t)ps->L + 1, sizeof *ps->end);
	if (!ps->first || !ps->end) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	for (int l = 0; l < ps->L; l++)
		ps->first[l] = -1;
	/* model_build lays each layer's tensors out together, in order */
	for (int i = 0; i < m->ntensors; i++) {
		int l = m->tensors[i].info.layer;
		if (l < 0) {
			ps->resident += (double)m->tensors[i].numel * sizeof(real);
			if ((rc = modelio_load_tensor(ps->ck, m, i, m->params + m->tensors[i].offset, err)))
				goto fail;
			continue;
		}
		if (ps->first[l] < 0)
			ps->first[l] = i;
		else if (ps->end[l] != i) {
			rc = sw_fail(err, SW_ESOFTWARE, "layer %d's tensors are not together", l);
			goto fail;
		}
		ps->end[l] = i + 1;
	}
	/* the slot: the largest layer, from its first tensor to its last's end */
	size_t largest = 0;
	for (int l = 0; l < ps->L; l++) {
		const struct model_tensor *a, *b;
		if (ps->first[l] < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "layer %d has no tensors", l);
			goto fail;
		}
		a = &m->tensors[ps->first[l]];
		b = &m->tensors[ps->end[l] - 1];
		largest = b->offset + b->numel - a->offset > largest ? b->offset + b->numel - a->offset
								  : largest;
	}
	if (!(ps->slot = malloc(largest * sizeof(real)))) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory for a layer (%zu values)", largest);
		goto fail;
	}
	/* every layer read once and checked; m->params's places for the
	 * layers are never written, so their pages are never in memory */
	for (int l = 0; l < ps->L; l++)
		if ((rc = reload(ps, l, 1, err)))
			goto fail;
	ps->resident += (double)largest * sizeof(real);
	m->layer_weights = layer_weights;
	m->layer_weights_ctx = ps;
	*out = ps;
	return SW_OK;
fail:
	param_stream_close(ps);
	model_free(m);
	return rc;
fail_built:
	param_stream_close(ps);
	return rc;
}

double param_stream_resident_bytes(const struct param_stream *ps)
{
	return ps->resident;
}

int param_stream_status(const struct param_stream *ps, struct sw_err *err)
{
	if (ps->rc && err)
		*err = ps->err;
	return ps->rc;
}

void param_stream_close(struct param_stream *ps)
{
	if (!ps)
		return;
	if (ps->m && ps->m->layer_weights_ctx == ps) {
		ps->m->layer_weights = NULL;
		ps->m->layer_weights_ctx = NULL;
	}
	/* the views back in m->params, where the layers read as zeros */
	if (ps->m && ps->m->p.layer)
		for (int l = 0; l < ps->L; l++)
			model_point_layer(ps->m, l, ps->m->params, 0);
	free(ps->slot);
	free(ps->first);
	free(ps->end);
	free(ps);
}
