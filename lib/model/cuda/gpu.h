/*
 * gpu.h - the device the CUDA trainer runs on: memory, copies, the
 * kernels of kernels.h, matrix products. Two implementations behind one
 * table of operations:
 *
 *   gpu_cuda_open   a real GPU (CUDA runtime, cuBLAS): lib/model/cuda/gpu.cu,
 *                   built when nvcc is found into a shared library that
 *                   lib/model/cuda/cudaload.c loads on first use (the tools start
 *                   without cuBLAS); without nvcc, lib/model/cuda/nocuda.c says
 *                   "built without CUDA" (SW_EUNAVAILABLE, exit 69).
 *   gpu_emu_open    lib/model/cuda/gpu_emu.c: the host emulation. "Device"
 *                   memory is host memory, each kernel's body runs in host
 *                   loops over its grid, each product is OpenBLAS's sgemm
 *                   with cuBLAS's arguments (column-major), checked as
 *                   cuBLAS checks them. The CUDA trainer's code above this
 *                   interface runs unchanged on it: the unit tests and
 *                   `sw-train --device emu` use it on machines without a GPU.
 *
 * Every operation runs in order on one stream; a kernel's failure may
 * surface at the next copy to the host. Errors are SW_ESOFTWARE with
 * "cuda: what failed: the runtime's message" (exit 70), SW_EUNAVAILABLE
 * when there is no usable GPU. Letters as in model.h.
 */
#ifndef SW_CUDA_GPU_H
#define SW_CUDA_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/status.h"
#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * C = alpha op(A) op(B) + beta C, column-major, `batch` times with the
 * given strides (cublasGemmStridedBatchedEx): op(A) m x k, op(B) k x n,
 * C m x n. bf16: the products in bf16 with float accumulation
 * (CUBLAS_COMPUTE_32F_FAST_16BF; the emulation rounds A and B to bf16);
 * otherwise plain float (CUBLAS_COMPUTE_32F, no TF32).
 */
struct gpu_gemm {
	int transa, transb;
	int m, n, k;
	float alpha, beta;
	const float *A, *B;
	float *C;
	int lda, ldb, ldc;
	int64_t stride_a, stride_b, stride_c;
	int batch;
	int bf16;
};

/* What the device is: for messages and bench/train-cuda's MFU. */
struct gpu_info {
	char name[256];
	int sm_major, sm_minor, sms;
	double clock_hz;                /* the SMs' peak clock */
	double mem_total, mem_free;     /* bytes */
	/* peak dense FLOP/s: SMs x clock x the architecture's FLOPs per clock
	 * per SM (NaN for an architecture not known here) */
	double peak_fp32, peak_bf16;
};

struct gpu;

struct gpu_ops {
	void (*close)(struct gpu *g);
	int (*alloc)(struct gpu *g, void **p, size_t bytes, struct sw_err *err);
	void (*free)(struct gpu *g, void *p);
	int (*zero)(struct gpu *g, void *p, size_t bytes, struct sw_err *err);
	int (*upload)(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err);
	int (*download)(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err);
	int (*copy)(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err);
	int (*launch)(struct gpu *g, enum gk_id k, const void *args, struct sw_err *err);
	int (*gemm)(struct gpu *g, const struct gpu_gemm *mm, struct sw_err *err);
	int (*sync)(struct gpu *g, struct sw_err *err);
	int (*info)(struct gpu *g, struct gpu_info *info, struct sw_err *err);
};

/* Every implementation's handle starts with its table. */
struct gpu {
	const struct gpu_ops *ops;
};

/* The first usable CUDA device; SW_EUNAVAILABLE (69) when there is none,
 * the build has no CUDA or its back end cannot be loaded (cudaload.c). */
int gpu_cuda_open(struct gpu **g, struct sw_err *err);

/* The same, in the back end's shared library (gpu.cu). */
int gpu_cuda_backend_open(struct gpu **g, struct sw_err *err);

/* The host emulation. */
int gpu_emu_open(struct gpu **g, struct sw_err *err);

/* The kernels' names, for messages: gk_names[GK_ID_rmsnorm_forward] */
extern const char *const gk_names[GK_COUNT];

static inline void gpu_close(struct gpu *g)
{
	if (g)
		g->ops->close(g);
}

/* Typed launchers: gk_launch_rmsnorm_forward(g, &args, err) */
#define GK_LAUNCHER(name, A, phases) \
	static inline int gk_launch_##name(struct gpu *g, const A *a, struct sw_err *err) \
	{ \
		return g->ops->launch(g, GK_ID_##name, a, err); \
	}
GK_KERNELS(GK_LAUNCHER)
#undef GK_LAUNCHER

#ifdef __cplusplus
}
#endif

#endif
