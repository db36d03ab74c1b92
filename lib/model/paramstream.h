/*
 * paramstream.h - a model whose layers' parameters are read from the
 * checkpoint as the passes reach them, so that at most one layer has its
 * float32 copy in memory (one buffer the layers take turns in, the
 * layer's views pointed there) beside the tensors outside the layers
 * (the embedding, the final norm, the head), which stay. For passes that only
 * read the parameters, over a checkpoint larger than memory allows in
 * float32 (sw-sharpness --low-memory): what grows with the model is then
 * the gradient alone. The values are the file's, widened exactly (BF16,
 * F16) as modelio_load gives them; each layer is read and widened again
 * on every pass, the file's pages coming from the page cache.
 */
#ifndef SW_PARAMSTREAM_H
#define SW_PARAMSTREAM_H

#include "model.h"
#include "../formats/ckpt.h"

struct param_stream;

/*
 * Build m from the open checkpoint ck as modelio_read does (the stream
 * reads ck again for each layer: ck stays open until the stream is
 * closed, and its caller closes it), every tensor
 * read once and checked (its size, no NaN or Inf), but keep in m->params
 * only the tensors outside the layers (the layers' places there are never
 * written); m's layer_weights loads a layer into the stream's buffer when
 * the passes need it, the previous one's views set to NULL. SW_EUSAGE for a
 * model with multipliers, gains or a reparameterization (the effective
 * weights are computed from every layer at once).
 */
int param_stream_open(struct ckpt *ck, struct model *m, struct param_stream **out,
		      struct sw_err *err);

/* Bytes of m->params in memory at once: the tensors outside the layers
 * and the largest layer. */
double param_stream_resident_bytes(const struct param_stream *ps);

/* SW_OK, or the first failure reading a layer again during the passes
 * (the file shrank, a read failed) into err: the passes after it ran on
 * wrong weights and their result is to be discarded. */
int param_stream_status(const struct param_stream *ps, struct sw_err *err);

/* Close the checkpoint and unhook m (which stays built, its views in
 * m->params again, where the layers read as zeros; model_free it). */
void param_stream_close(struct param_stream *ps);

#endif
