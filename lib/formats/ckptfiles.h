/*
 * ckptfiles.h - the files a checkpoint named by a path may be read from,
 * for the writers that must never replace one (atomic_check_output): the
 * path itself, and the files a reader may read beside it (in the
 * directory given, or in the directory of the file given): the configs,
 * indexes and shards (*.json, *.safetensors, *.bin, *.pt, *.pth). Larger
 * than what one reader reads, on purpose: a file listed is only a file no
 * output may be.
 */
#ifndef SW_CKPTFILES_H
#define SW_CKPTFILES_H

#include <stddef.h>

#include "../base/status.h"

struct ckpt_files {
	char **name;            /* n names, each malloc'd */
	size_t n, cap;
};

/* Append path to f (zeroed at first) and, when path is a directory or
 * beside is 1 (a format read from several files, or one not known yet),
 * the files beside it. SW_ESOFTWARE when out of memory; a directory that
 * cannot be read adds nothing. */
int ckpt_files_add(struct ckpt_files *f, const char *path, int beside, struct sw_err *err);

/* Append one name as it is (a --data file, "-"). */
int ckpt_files_add_one(struct ckpt_files *f, const char *name, struct sw_err *err);

void ckpt_files_free(struct ckpt_files *f);

#endif
