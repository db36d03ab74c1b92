/*
 * ptread.h - the PyTorch checkpoint reader, a back end of the tensor
 * source (ckpt.c, which is the only caller): files torch.save wrote
 * (.pt, .pth, pytorch_model.bin: a zip archive, lib/formats/ptzip.h, whose
 * data.pkl is run by the restricted unpickler, lib/formats/pickle.h), one file or
 * the shards a pytorch_model.bin.index.json names, and Meta's layout
 * (consolidated.NN.pth and params.json, lib/formats/metallama.h).
 *
 * The tensors are the values of one dict of the pickle: the dict a
 * FILE:KEY name selects (KEY a dot-separated path of keys), else the
 * value of the top dict's "state_dict" or "model" key when that is a
 * dict (not both), else the top dict; in it, dicts nested are walked,
 * their keys joined by '.', and what is neither a tensor nor a dict is
 * left out. A name twice, or a dict reached twice, is refused.
 *
 * Hugging Face names (model.layers.N.self_attn.q_proj.weight, ...) take
 * their architecture from the config.json beside the file (or index), by
 * the rules every reader of such a directory shares (hfdir.h);
 * Meta's names from params.json beside it, with every *.pth file of that
 * directory, sorted by name, as the model-parallel shards (what Meta's
 * llama code and transformers' converter read). Views are read wherever
 * their storage is: an offset into it and any strides (a transposed view
 * is gathered); every element inside the storage (lib/formats/pickle.c checks).
 * Contiguous float32 is mapped in place; the rest is converted into a
 * buffer; q and k of Meta's layout get their rows permuted to Hugging
 * Face's rotate-half order (ropeperm.h; recorded as the attribute
 * rope_permuted of each, beside source_name, Meta's name).
 *
 * A legacy file (torch < 1.6, a bare pickle) is refused by name; storages
 * must be stored uncompressed, each as long as its persistent id says.
 */
#ifndef SW_PTREAD_H
#define SW_PTREAD_H

#include <stdint.h>

#include "ckptsrc.h"

/* 1 if the open file starts as torch.save's zip archive or as its
 * legacy pickle (refused by open, by name). */
int ptsrc_sniff(int fd, uint64_t size);

/* The format entry ckpt.c dispatches through (ckptsrc.h). */
extern const struct ckpt_format_ops ptsrc_format;

#endif
