/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput once on every
 * file named, or on every file of each directory named (in name order):
 * the committed seeds and regressions, under gcc and the ordinary test
 * suite, without clang. A failed invariant aborts, as under libFuzzer.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    !(buf = malloc(len ? (size_t)len : 1)) || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		if (f)
			fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	/* an exactly sized copy: ASan sees a read past the input */
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

static int run_dir(const char *dir, long *count)
{
	struct dirent **ent;
	char path[4096];
	int n = scandir(dir, &ent, NULL, alphasort), rc = 0;

	if (n < 0) {
		fprintf(stderr, "replay: %s: cannot list\n", dir);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, ent[i]->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			rc |= run_file(path);
			++*count;
		}
		free(ent[i]);
	}
	free(ent);
	return rc;
}

int main(int argc, char **argv)
{
	long count = 0;
	int rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: replay FILE|DIR ...\n");
		return 64;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			rc |= run_dir(argv[i], &count);
		} else {
			rc |= run_file(argv[i]);
			count++;
		}
	}
	printf("replay: %ld inputs\n", count);
	return rc ? 66 : 0;
}
