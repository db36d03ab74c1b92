/*
 * nocuda.c - gpu_cuda_open (gpu.h) in a build without nvcc: there is no
 * CUDA device to open, and it says so (SW_EUNAVAILABLE, exit 69) rather
 * than running anywhere else. The host emulation (gpu_emu.c) is there in
 * every build, and only when asked for by name (--device emu).
 */
#include "gpu.h"

#include <stddef.h>

int gpu_cuda_open(struct gpu **g, struct sw_err *err)
{
	*g = NULL;
	return sw_fail(err, SW_EUNAVAILABLE,
		       "cuda: built without CUDA (no nvcc was found when it was built): no GPU to run on");
}
