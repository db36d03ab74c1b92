/* paramstream.c - layers read from the checkpoint as the passes reach them
 * (see paramstream.h). */
#include "paramstream.h"
#include "modelio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct param_stream {
	struct ckpt *ck;
	struct model *m;
	int L;
	int *first, *end;               /* (L) layer l's tensors: [first, end) of m->tensors */
	int loaded;                     /* the layer whose values are in params, or -1 */
	size_t page;
	double resident;
	int rc;                         /* the first failure during the passes */
	struct sw_err err;
};

/* layer l's values into params, read again (and checked again: it costs
 * little beside the widening) */
static int reload(struct param_stream *ps, int l, struct sw_err *err)
{
	int rc = SW_OK;

	for (int i = ps->first[l]; i < ps->end[l] && !rc; i++)
		rc = modelio_load_tensor(ps->ck, ps->m, i, err);
	return rc;
}

/* the whole pages of layer l's values back to the system: they read as
 * zeros until loaded again */
static int drop(struct param_stream *ps, int l, struct sw_err *err)
{
	const struct model *m = ps->m;
	const struct model_tensor *a = &m->tensors[ps->first[l]], *b = &m->tensors[ps->end[l] - 1];
	uintptr_t lo = (uintptr_t)(m->params + a->offset), hi = (uintptr_t)(m->params + b->offset + b->numel);

	lo = (lo + ps->page - 1) / ps->page * ps->page;
	hi = hi / ps->page * ps->page;
	if (hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED))
		return sw_fail(err, SW_ESOFTWARE, "layer %d: madvise: %s", l, strerror(errno));
	return SW_OK;
}

/* m's layer_weights: the layer asked for replaces the one in memory,
 * which stays until another is asked for (the backward starts with the
 * layer the forward ended with) */
static void layer_weights(void *ctx, int l)
{
	struct param_stream *ps = ctx;

	if (ps->rc || ps->loaded == l)
		return;
	if (ps->loaded >= 0 && (ps->rc = drop(ps, ps->loaded, &ps->err)))
		return;
	ps->loaded = -1;
	if (!(ps->rc = reload(ps, l, &ps->err)))
		ps->loaded = l;
}

int param_stream_open(const char *path, struct model *m, struct param_stream **out,
		      struct sw_err *err)
{
	struct param_stream *ps = calloc(1, sizeof *ps);
	int rc;

	*out = NULL;
	if (!ps)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	ps->loaded = -1;
	ps->page = (size_t)sysconf(_SC_PAGESIZE);
	if ((rc = ckpt_open(path, &ps->ck, err))) {
		free(ps);
		return rc;
	}
	if ((rc = modelio_build(ps->ck, m, err)))
		goto fail_built;
	ps->m = m;
	ps->L = (int)m->c.n_layers;
	if (m->eff || m->nreparams) {
		rc = sw_fail(err, SW_EUSAGE, "a model with multipliers, gains or reparameterized gains "
			     "needs every layer at once: not with --low-memory");
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
			if ((rc = modelio_load_tensor(ps->ck, m, i, err)))
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
	/* every layer read once, checked, and dropped */
	double largest = 0;
	for (int l = 0; l < ps->L; l++) {
		double bytes = 0;
		if (ps->first[l] < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "layer %d has no tensors", l);
			goto fail;
		}
		for (int i = ps->first[l]; i < ps->end[l]; i++)
			bytes += (double)m->tensors[i].numel * sizeof(real);
		if ((rc = reload(ps, l, err)) || (rc = drop(ps, l, err)))
			goto fail;
		largest = bytes > largest ? bytes : largest;
	}
	ps->resident += largest;
	m->layer_weights = layer_weights;
	m->layer_weights_ctx = ps;
	*out = ps;
	return SW_OK;
fail:
	model_free(m);
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
	ckpt_close(ps->ck);
	free(ps->first);
	free(ps->end);
	free(ps);
}
