/*
 * gpu.cu - gpu.h on a CUDA GPU: the first device, one stream, one cuBLAS
 * handle. Built by nvcc into the shared library libswcuda.so with
 * status.c, linked with cuBLAS and the CUDA runtime; cudaload.c loads it
 * when a run asks for the GPU and calls gpu_cuda_backend_open. Each kernel of kernels.h is a thin __global__ wrapper that runs
 * its body's phases with __syncthreads() between them; every CUDA and
 * cuBLAS status is checked, and a failure is "cuda: what: the message"
 * (SW_ESOFTWARE, exit 70); no usable device is SW_EUNAVAILABLE (69).
 *
 * Built by nvcc with -fmad=false: the shared per-element functions of
 * elemmath.h are not contracted into FMAs, as gcc does not contract them
 * on the CPU (cuBLAS's products are cuBLAS's). Not yet run on hardware:
 * see README.md, "The CUDA trainer".
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../../base/status.h"
#include "../../base/tensor.h"
}
#include "gpu.h"

struct cuda {
	struct gpu base;
	int device;
	cudaStream_t stream;
	cublasHandle_t blas;
};

static struct cuda *cuda_of(struct gpu *g)
{
	return (struct cuda *)g;
}

static int cuda_fail(struct sw_err *err, const char *what, cudaError_t e)
{
	return sw_fail(err, SW_ESOFTWARE, "cuda: %s: %s", what, cudaGetErrorString(e));
}

static int blas_fail(struct sw_err *err, const char *what, cublasStatus_t s)
{
	return sw_fail(err, SW_ESOFTWARE, "cuda: %s: %s", what, cublasGetStatusName(s));
}

/* ---- the kernels: a __global__ wrapper per body ---------------------------- */

#define GK_NAME(name, A, phases) #name,
static const char *const kernel_names[GK_COUNT] = {GK_KERNELS(GK_NAME)};
#undef GK_NAME

#define GK_GLOBAL(name, A, phases)                                               \
	__global__ void gk_##name##_kernel(A a)                                  \
	{                                                                        \
		extern __shared__ double gk_shm[];                               \
		for (int p = 0; p < (phases); p++) {                             \
			gk_##name(p, blockIdx.x, threadIdx.x, blockDim.x, gk_shm, &a); \
			if ((phases) > 1)                                        \
				__syncthreads();                                 \
		}                                                                \
	}
GK_KERNELS(GK_GLOBAL)
#undef GK_GLOBAL

static int cuda_launch(struct gpu *g, enum gk_id id, const void *args, struct sw_err *err)
{
	struct cuda *c = cuda_of(g);
	char what[96];
	cudaError_t e;

	switch (id) {
#define GK_CASE(name, A, phases)                                                            \
	case GK_ID_##name: {                                                                \
		const A *a = (const A *)args;                                               \
		if (a->grid.blocks == 0)                                                    \
			return SW_OK;                                                       \
		gk_##name##_kernel<<<(unsigned)a->grid.blocks, (unsigned)a->grid.threads,  \
				      (size_t)a->grid.shm * sizeof(double), c->stream>>>(*a); \
		break;                                                                      \
	}
	GK_KERNELS(GK_CASE)
#undef GK_CASE
	default:
		return sw_fail(err, SW_ESOFTWARE, "cuda: unknown kernel %d", (int)id);
	}
	if ((e = cudaGetLastError()) != cudaSuccess) {
		snprintf(what, sizeof what, "kernel %s", kernel_names[id]);
		return cuda_fail(err, what, e);
	}
	return SW_OK;
}

/* ---- memory ------------------------------------------------------------------ */

static void cuda_close(struct gpu *g)
{
	struct cuda *c = cuda_of(g);

	if (c->blas)
		cublasDestroy(c->blas);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
}

static int cuda_alloc(struct gpu *g, void **p, size_t bytes, struct sw_err *err)
{
	cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
	char what[96];

	(void)g;
	if (e != cudaSuccess) {
		*p = NULL;
		snprintf(what, sizeof what, "cudaMalloc of %.3g GB", (double)bytes / 1e9);
		return cuda_fail(err, what, e);
	}
	return SW_OK;
}

static void cuda_free(struct gpu *g, void *p)
{
	(void)g;
	if (p)
		cudaFree(p);
}

static int cuda_zero(struct gpu *g, void *p, size_t bytes, struct sw_err *err)
{
	cudaError_t e = cudaMemsetAsync(p, 0, bytes, cuda_of(g)->stream);

	return e == cudaSuccess ? SW_OK : cuda_fail(err, "cudaMemsetAsync", e);
}

/* From pageable host memory: the call returns once src is staged, so the
 * caller may reuse it. */
static int cuda_upload(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err)
{
	cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_of(g)->stream);

	return e == cudaSuccess ? SW_OK : cuda_fail(err, "copy to the GPU", e);
}

/* Waits for the stream: what was queued before, and the copy. */
static int cuda_download(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err)
{
	struct cuda *c = cuda_of(g);
	cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream);

	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->stream);
	return e == cudaSuccess ? SW_OK : cuda_fail(err, "copy from the GPU", e);
}

static int cuda_copy(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err)
{
	cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_of(g)->stream);

	return e == cudaSuccess ? SW_OK : cuda_fail(err, "copy on the GPU", e);
}

static int cuda_sync(struct gpu *g, struct sw_err *err)
{
	cudaError_t e = cudaStreamSynchronize(cuda_of(g)->stream);

	return e == cudaSuccess ? SW_OK : cuda_fail(err, "cudaStreamSynchronize", e);
}

/* ---- products ------------------------------------------------------------------ */

static int cuda_gemm(struct gpu *g, const struct gpu_gemm *mm, struct sw_err *err)
{
	struct cuda *c = cuda_of(g);
	cublasOperation_t ta = mm->transa ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t tb = mm->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasComputeType_t ct = mm->bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
	cublasStatus_t s;

	if (mm->m == 0 || mm->n == 0)
		return SW_OK;
	if (mm->batch == 1)
		s = cublasGemmEx(c->blas, ta, tb, mm->m, mm->n, mm->k, &mm->alpha, mm->A, CUDA_R_32F,
				 mm->lda, mm->B, CUDA_R_32F, mm->ldb, &mm->beta, mm->C, CUDA_R_32F, mm->ldc,
				 ct, CUBLAS_GEMM_DEFAULT);
	else
		s = cublasGemmStridedBatchedEx(c->blas, ta, tb, mm->m, mm->n, mm->k, &mm->alpha, mm->A,
					       CUDA_R_32F, mm->lda, mm->stride_a, mm->B, CUDA_R_32F,
					       mm->ldb, mm->stride_b, &mm->beta, mm->C, CUDA_R_32F,
					       mm->ldc, mm->stride_c, mm->batch, ct, CUBLAS_GEMM_DEFAULT);
	return s == CUBLAS_STATUS_SUCCESS ? SW_OK
					  : blas_fail(err, mm->batch == 1 ? "cublasGemmEx" : "cublasGemmStridedBatchedEx", s);
}

/* ---- the device ----------------------------------------------------------------- */

/* Dense FLOPs per clock per SM of the architectures this build targets
 * (NVIDIA's A100 and H100 whitepapers: fp32 64 and 128 FMA units per SM;
 * bf16 tensor cores 1024 and 2048 FMA per clock per SM); NaN for others. */
static void peak_rates(int major, int minor, double *fp32, double *bf16)
{
	*fp32 = *bf16 = NAN;
	if (major == 8 && minor == 0) {
		*fp32 = 128;
		*bf16 = 2048;
	} else if (major == 9 && minor == 0) {
		*fp32 = 256;
		*bf16 = 4096;
	}
}

static int cuda_info(struct gpu *g, struct gpu_info *info, struct sw_err *err)
{
	struct cuda *c = cuda_of(g);
	struct cudaDeviceProp prop;
	size_t free_b, total_b;
	int clock_khz;
	double fp32, bf16;
	cudaError_t e;

	memset(info, 0, sizeof *info);
	if ((e = cudaGetDeviceProperties(&prop, c->device)) != cudaSuccess)
		return cuda_fail(err, "cudaGetDeviceProperties", e);
	if ((e = cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, c->device)) != cudaSuccess)
		return cuda_fail(err, "cudaDeviceGetAttribute", e);
	if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess)
		return cuda_fail(err, "cudaMemGetInfo", e);
	snprintf(info->name, sizeof info->name, "%s", prop.name);
	info->sm_major = prop.major;
	info->sm_minor = prop.minor;
	info->sms = prop.multiProcessorCount;
	info->clock_hz = clock_khz * 1e3;
	info->mem_total = (double)total_b;
	info->mem_free = (double)free_b;
	peak_rates(prop.major, prop.minor, &fp32, &bf16);
	info->peak_fp32 = info->sms * info->clock_hz * fp32;
	info->peak_bf16 = info->sms * info->clock_hz * bf16;
	return SW_OK;
}

static const struct gpu_ops cuda_ops = {
	cuda_close, cuda_alloc, cuda_free, cuda_zero, cuda_upload, cuda_download, cuda_copy,
	cuda_launch, cuda_gemm, cuda_sync, cuda_info
};

/* No device, no driver, or one this build has no code for: SW_EUNAVAILABLE. */
static int unavailable(struct sw_err *err, const char *what, cudaError_t e)
{
	/* the runtime says "driver version is insufficient" where there is no driver at all */
	const char *why = e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this CUDA runtime; " :
			  e == cudaErrorNoDevice ? "no CUDA device; " : "";
	return sw_fail(err, SW_EUNAVAILABLE, "cuda: no usable GPU: %s%s: %s", why, what, cudaGetErrorString(e));
}

extern "C" __attribute__((visibility("default"))) int gpu_cuda_backend_open(struct gpu **g,
									     struct sw_err *err)
{
	struct cudaDeviceProp prop;
	struct cuda *c;
	cublasStatus_t s;
	cudaError_t e;
	int n = 0;

	*g = NULL;
	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess)
		return unavailable(err, "cudaGetDeviceCount", e);
	if (n < 1)
		return sw_fail(err, SW_EUNAVAILABLE, "cuda: no usable GPU: no CUDA device");
	if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess)
		return unavailable(err, "cudaGetDeviceProperties", e);
	if (prop.major < 8)
		return sw_fail(err, SW_EUNAVAILABLE,
			       "cuda: no usable GPU: %s has compute capability %d.%d; this build runs on 8.0 and later",
			       prop.name, prop.major, prop.minor);
	if ((e = cudaSetDevice(0)) != cudaSuccess)
		return unavailable(err, "cudaSetDevice", e);
	if (!(c = (struct cuda *)calloc(1, sizeof *c)))
		return sw_fail(err, SW_ESOFTWARE, "cuda: out of memory");
	c->base.ops = &cuda_ops;
	c->device = 0;
	if ((e = cudaStreamCreate(&c->stream)) != cudaSuccess) {
		cuda_close(&c->base);
		return unavailable(err, "cudaStreamCreate", e);
	}
	if ((s = cublasCreate(&c->blas)) != CUBLAS_STATUS_SUCCESS ||
	    (s = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS) {
		cuda_close(&c->base);
		return blas_fail(err, "cublasCreate", s);
	}
	*g = &c->base;
	return SW_OK;
}
