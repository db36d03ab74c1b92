/* ckptfiles.c - the files of a checkpoint no output may be (see ckptfiles.h). */
#include "ckptfiles.h"

#include <dirent.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/grow.h"

/* A file a reader may read beside the checkpoint it opened: a config, an
 * index, a shard (safetensors, PyTorch, Meta's layout). */
static int is_beside(const char *name)
{
	static const char *const pats[] = {"*.json", "*.safetensors", "*.bin", "*.pt", "*.pth"};

	for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
		if (!fnmatch(pats[i], name, FNM_PERIOD))
			return 1;
	return 0;
}

static int add(struct ckpt_files *f, const char *dir, const char *name, struct sw_err *err)
{
	if (SW_GROW(f->name, &f->cap, f->n + 1) < 0 ||
	    asprintf(&f->name[f->n], "%s%s%s", dir ? dir : "", dir ? "/" : "", name) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	f->n++;
	return SW_OK;
}

int ckpt_files_add_one(struct ckpt_files *f, const char *name, struct sw_err *err)
{
	return add(f, NULL, name, err);
}

int ckpt_files_add(struct ckpt_files *f, const char *path, int beside, struct sw_err *err)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;
	struct dirent *de;
	DIR *d;
	int rc;

	if ((rc = add(f, NULL, path, err)))
		return rc;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(dir, sizeof dir, "%s", path);
	else if (!beside)
		return SW_OK;
	else
		snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
			 slash ? path : ".");
	if (!(d = opendir(dir)))
		return SW_OK;
	while (!rc && (de = readdir(d)))
		if (is_beside(de->d_name))
			rc = add(f, dir, de->d_name, err);
	closedir(d);
	return rc;
}

void ckpt_files_free(struct ckpt_files *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->name[i]);
	free(f->name);
	memset(f, 0, sizeof *f);
}
