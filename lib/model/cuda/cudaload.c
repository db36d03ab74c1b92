/*
 * cudaload.c - gpu_cuda_open (gpu.h) in a build with nvcc. The CUDA back
 * end (gpu.cu, with cuBLAS and the CUDA runtime) is a shared library,
 * libswcuda.so in lib/scalewatch/ beside the tool's bin/ directory (the
 * same in the build tree and under PREFIX), loaded only when a run asks
 * for the GPU: the tools start without loading cuBLAS (half a gigabyte of
 * library, 0.4 s at every start), and a tool built with CUDA runs where
 * CUDA is not installed, saying so when asked for the GPU (exit 69).
 */
#include "gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gpu_cuda_open(struct gpu **g, struct sw_err *err)
{
	char exe[PATH_MAX], path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	int (*backend_open)(struct gpu **, struct sw_err *);
	void *lib;

	*g = NULL;
	if (n < 0)
		return sw_fail(err, SW_EUNAVAILABLE, "cuda: no usable GPU: /proc/self/exe: %s", strerror(errno));
	exe[n] = '\0';
	snprintf(path, sizeof path, "%s/../lib/scalewatch/libswcuda.so", dirname(exe));
	/* kept loaded for the life of the process, as cuBLAS expects */
	if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
		return sw_fail(err, SW_EUNAVAILABLE, "cuda: no usable GPU: %s", dlerror());
	*(void **)&backend_open = dlsym(lib, "gpu_cuda_backend_open");
	if (!backend_open)
		return sw_fail(err, SW_EUNAVAILABLE, "cuda: no usable GPU: %s", dlerror());
	return backend_open(g, err);
}
