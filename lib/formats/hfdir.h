/*
 * hfdir.h - the rules of a Hugging Face model directory, one home for
 * every reader of one (safetensors, lib/formats/stread.c; PyTorch, lib/formats/ptread.c):
 *
 *   - config.json beside the checkpoint gives its architecture
 *     (safetensors.h parses it);
 *   - a shard index (model.safetensors.index.json, pytorch_model.bin.
 *     index.json) maps each tensor name to its shard, a plain file name in
 *     the index's directory (safetensors.h parses it): the shards are the
 *     files it names, each once, in order of first appearance; every
 *     tensor a shard holds must be listed for that shard;
 *   - a shard that is a symlink must not lead out of the checkpoint's
 *     directory (a downloaded checkpoint must not read the user's files).
 *
 * Only regular files are opened (a FIFO is refused, never waited on), and
 * a JSON file is read whole only up to a size that bounds what a hostile
 * one can cost.
 */
#ifndef SW_HFDIR_H
#define SW_HFDIR_H

#include <stddef.h>
#include <stdint.h>

#include "../base/arch.h"
#include "safetensors.h"
#include "../base/status.h"

#define HFDIR_CONFIG_MAX (16u << 20)    /* bytes of a config.json */
#define HFDIR_INDEX_MAX (64u << 20)     /* bytes of an index */

/* Open path (a file of the checkpoint) for reading if it is a regular
 * file: *fd and its *size; errors name path ("PATH: not a regular file"). */
int hfdir_open_regular(const char *path, int *fd, uint64_t *size, struct sw_err *err);

/* The whole of a small file (config.json, an index, params.json) of at
 * most max bytes: a malloc'ed *buf of *len bytes and a NUL after them;
 * errors name path. */
int hfdir_read_small(const char *path, size_t max, char **buf, size_t *len, struct sw_err *err);

/* The architecture and sizes from dir/config.json; SW_ENOINPUT "no
 * config.json beside it" when there is none. */
int hfdir_config(const char *dir, struct sw_config *c, struct sw_err *err);

/* 1 if the open file fd (size bytes) is JSON text that opens an object,
 * as an index does (read with pread; JSON's blanks may come first, a
 * UTF-8 byte order mark may not). */
int hfdir_sniff_index(int fd, uint64_t size);

/* An index, read. */
struct hfdir_index {
	struct st_index idx;    /* its entries, sorted by tensor name */
	const char **shard;     /* (nshards) the shard file names, each once, in
				 * order of first appearance (in idx's pool) */
	size_t nshards;
};

/* Read and parse the index at path into ix (zeroed on failure). */
int hfdir_index_open(const char *path, struct hfdir_index *ix, struct sw_err *err);

/*
 * Tensor name, found in the shard file named shard (at path, for the
 * message), must be listed there: SW_EDATA "PATH holds NAME, which the
 * index does not list there" otherwise. at (NULL: not wanted): its entry
 * in ix->idx.e, for a caller marking the entries found.
 */
int hfdir_index_holds(const struct hfdir_index *ix, const char *shard, const char *path,
		      const char *name, size_t *at, struct sw_err *err);

void hfdir_index_free(struct hfdir_index *ix);

/* dir/shard into path (len bytes); -1 if it does not fit. */
int hfdir_shard_path(char *path, size_t len, const char *dir, const char *shard);

/*
 * A shard at path that is a symlink must stay in the directory dir of
 * the file naming it (index), or in the directory that file itself
 * links into (the Hugging Face cache: snapshots/REV/NAME ->
 * ../../blobs/HASH); SW_EDATA otherwise. For every file a checkpoint
 * names beside it: an index's shards, Meta's *.pth slices.
 */
int hfdir_check_link(const char *path, const char *dir, const char *index, struct sw_err *err);

#endif
