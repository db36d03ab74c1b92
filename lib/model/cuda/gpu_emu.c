/*
 * gpu_emu.c - the host emulation of gpu.h (see there): each kernel body of
 * kernels.h runs in host loops (every block; in it every phase; in that
 * every thread, which is what __syncthreads between phases guarantees),
 * each product is OpenBLAS's column-major sgemm. It checks what a GPU or
 * cuBLAS would refuse: a grid beyond CUDA's limits, shared memory beyond
 * 48 KiB, a leading dimension too small, a matrix or a copy reaching out
 * of the allocation it starts in. Serial and slow: for tests, and for
 * `sw-train --device emu` on tiny models.
 */
#include "gpu.h"
#include "../../base/dtype.h"
#include "../../base/grow.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#define GK_NAME(name, A, phases) #name,
const char *const gk_names[GK_COUNT] = {GK_KERNELS(GK_NAME)};
#undef GK_NAME

struct emu_block {
	char *p;
	size_t bytes;
};

struct emu {
	struct gpu base;
	struct emu_block *blocks;       /* the allocations, to check ranges */
	size_t nblocks, cap;
	double *shm;                    /* the shared memory of the block running */
	size_t shm_cap;
	float *bf16_a, *bf16_b;         /* the products' operands rounded to bf16 */
	size_t bf16_cap;
};

static struct emu *emu_of(struct gpu *g)
{
	return (struct emu *)g;
}

static int emu_fail(struct sw_err *err, const char *what)
{
	return sw_fail(err, SW_ESOFTWARE, "cuda (emulated): %s", what);
}

/* Does [p, p + bytes) lie inside one allocation? */
static int inside(const struct emu *e, const void *p, size_t bytes)
{
	const char *c = p;

	for (size_t i = 0; i < e->nblocks; i++)
		if (c >= e->blocks[i].p && c <= e->blocks[i].p + e->blocks[i].bytes &&
		    bytes <= (size_t)(e->blocks[i].p + e->blocks[i].bytes - c))
			return 1;
	return 0;
}

static void emu_close(struct gpu *g)
{
	struct emu *e = emu_of(g);

	for (size_t i = 0; i < e->nblocks; i++)
		free(e->blocks[i].p);
	free(e->blocks);
	free(e->shm);
	free(e->bf16_a);
	free(e->bf16_b);
	free(e);
}

static int emu_alloc(struct gpu *g, void **p, size_t bytes, struct sw_err *err)
{
	struct emu *e = emu_of(g);

	*p = NULL;
	if (SW_GROW(e->blocks, &e->cap, e->nblocks + 1) < 0)
		return emu_fail(err, "out of memory");
	/* not zeroed, as cudaMalloc's memory is not */
	if (!(*p = malloc(bytes ? bytes : 1)))
		return sw_fail(err, SW_ESOFTWARE, "cuda (emulated): out of memory for %zu bytes", bytes);
	e->blocks[e->nblocks].p = *p;
	e->blocks[e->nblocks++].bytes = bytes;
	return SW_OK;
}

static void emu_free(struct gpu *g, void *p)
{
	struct emu *e = emu_of(g);

	for (size_t i = 0; p && i < e->nblocks; i++)
		if (e->blocks[i].p == p) {
			free(p);
			e->blocks[i] = e->blocks[--e->nblocks];
			return;
		}
}

static int emu_zero(struct gpu *g, void *p, size_t bytes, struct sw_err *err)
{
	if (!inside(emu_of(g), p, bytes))
		return emu_fail(err, "memset outside an allocation");
	memset(p, 0, bytes);
	return SW_OK;
}

static int emu_upload(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err)
{
	if (!inside(emu_of(g), dst, bytes) || (bytes && inside(emu_of(g), src, bytes)))
		return emu_fail(err, "upload: the destination is not device memory, or the source is");
	memcpy(dst, src, bytes);
	return SW_OK;
}

static int emu_download(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err)
{
	if (!inside(emu_of(g), src, bytes) || (bytes && inside(emu_of(g), dst, bytes)))
		return emu_fail(err, "download: the source is not device memory, or the destination is");
	memcpy(dst, src, bytes);
	return SW_OK;
}

static int emu_copy(struct gpu *g, void *dst, const void *src, size_t bytes, struct sw_err *err)
{
	if (!inside(emu_of(g), dst, bytes) || !inside(emu_of(g), src, bytes))
		return emu_fail(err, "device copy outside an allocation");
	memmove(dst, src, bytes);
	return SW_OK;
}

/* What cudaLaunchKernel would refuse. */
static int check_grid(struct emu *e, const struct gk_grid *gr, enum gk_id id, struct sw_err *err)
{
	if (gr->blocks < 0 || gr->blocks > 2147483647 || gr->threads < 1 || gr->threads > 1024 ||
	    gr->shm < 0 || (size_t)gr->shm * sizeof(double) > 48 * 1024)
		return sw_fail(err, SW_ESOFTWARE,
			       "cuda (emulated): kernel %s: invalid launch (%lld blocks of %d threads, %d doubles shared)",
			       gk_names[id], (long long)gr->blocks, gr->threads, gr->shm);
	if (SW_GROW(e->shm, &e->shm_cap, (size_t)gr->shm) < 0)
		return emu_fail(err, "out of memory");
	return SW_OK;
}

static int emu_launch(struct gpu *g, enum gk_id id, const void *args, struct sw_err *err)
{
	struct emu *e = emu_of(g);
	int rc;

	switch (id) {
#define GK_EMU_CASE(name, A, phases)                                                       \
	case GK_ID_##name: {                                                               \
		const A *a = args;                                                         \
		if ((rc = check_grid(e, &a->grid, id, err)))                               \
			return rc;                                                         \
		for (int64_t b = 0; b < a->grid.blocks; b++)                              \
			for (int p = 0; p < (phases); p++)                                 \
				for (int t = 0; t < a->grid.threads; t++)                  \
					gk_##name(p, b, t, a->grid.threads, e->shm, a);    \
		return SW_OK;                                                              \
	}
	GK_KERNELS(GK_EMU_CASE)
#undef GK_EMU_CASE
	default:
		return emu_fail(err, "unknown kernel");
	}
}

/* Is the column-major matrix of `rows` x `cols` with leading dimension ld,
 * batch times stride apart, inside one allocation? */
static int matrix_inside(const struct emu *e, const float *p, int rows, int cols, int ld,
			 int64_t stride, int batch)
{
	size_t last = (size_t)(cols - 1) * (size_t)ld + (size_t)rows;

	if (rows == 0 || cols == 0)
		return 1;
	return inside(e, p, (last + (size_t)(batch - 1) * (size_t)stride) * sizeof(float));
}

/* Rounded to bf16, as the tensor cores see an operand */
static const float *bf16_round(float **buf, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		(*buf)[i] = sw_bf16_to_f32(sw_f32_to_bf16(src[i]));
	return *buf;
}

static int emu_gemm(struct gpu *g, const struct gpu_gemm *mm, struct sw_err *err)
{
	struct emu *e = emu_of(g);
	int ar = mm->transa ? mm->k : mm->m, ac = mm->transa ? mm->m : mm->k;
	int br = mm->transb ? mm->n : mm->k, bc = mm->transb ? mm->k : mm->n;

	/* cuBLAS's CUBLAS_STATUS_INVALID_VALUE */
	if (mm->m < 0 || mm->n < 0 || mm->k < 0 || mm->batch < 1 || mm->lda < (ar > 1 ? ar : 1) ||
	    mm->ldb < (br > 1 ? br : 1) || mm->ldc < (mm->m > 1 ? mm->m : 1))
		return emu_fail(err, "gemm: CUBLAS_STATUS_INVALID_VALUE (sizes or leading dimensions)");
	if (!matrix_inside(e, mm->A, ar, ac, mm->lda, mm->stride_a, mm->batch) ||
	    !matrix_inside(e, mm->B, br, bc, mm->ldb, mm->stride_b, mm->batch) ||
	    !matrix_inside(e, mm->C, mm->m, mm->n, mm->ldc, mm->stride_c, mm->batch))
		return emu_fail(err, "gemm: a matrix reaches out of its allocation");
	for (int i = 0; i < mm->batch; i++) {
		const float *A = mm->A + i * mm->stride_a, *B = mm->B + i * mm->stride_b;
		float *C = mm->C + i * mm->stride_c;
		if (mm->bf16) {
			size_t na = (size_t)(ac - 1) * mm->lda + ar, nb = (size_t)(bc - 1) * mm->ldb + br;
			size_t need = na > nb ? na : nb;
			if (need > e->bf16_cap) {
				free(e->bf16_a);
				free(e->bf16_b);
				e->bf16_a = malloc(need * sizeof(float));
				e->bf16_b = malloc(need * sizeof(float));
				e->bf16_cap = e->bf16_a && e->bf16_b ? need : 0;
				if (!e->bf16_cap)
					return emu_fail(err, "out of memory");
			}
			A = bf16_round(&e->bf16_a, A, na);
			B = bf16_round(&e->bf16_b, B, nb);
		}
		if (mm->m && mm->n)
			cblas_sgemm(CblasColMajor, mm->transa ? CblasTrans : CblasNoTrans,
				    mm->transb ? CblasTrans : CblasNoTrans, mm->m, mm->n, mm->k, mm->alpha,
				    A, mm->lda, B, mm->ldb, mm->beta, C, mm->ldc);
	}
	return SW_OK;
}

static int emu_sync(struct gpu *g, struct sw_err *err)
{
	(void)g;
	(void)err;
	return SW_OK;
}

static int emu_info(struct gpu *g, struct gpu_info *info, struct sw_err *err)
{
	(void)g;
	(void)err;
	memset(info, 0, sizeof *info);
	strcpy(info->name, "host emulation");
	info->peak_fp32 = info->peak_bf16 = NAN;
	return SW_OK;
}

static const struct gpu_ops emu_ops = {
	emu_close, emu_alloc, emu_free, emu_zero, emu_upload, emu_download, emu_copy,
	emu_launch, emu_gemm, emu_sync, emu_info
};

int gpu_emu_open(struct gpu **g, struct sw_err *err)
{
	struct emu *e = calloc(1, sizeof *e);

	*g = NULL;
	if (!e)
		return emu_fail(err, "out of memory");
	e->base.ops = &emu_ops;
	*g = &e->base;
	return SW_OK;
}
