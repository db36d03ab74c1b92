/*
 * cuda-info - the GPU bench/train-cuda runs on, from the device's own
 * properties (lib/model/cuda/gpu.cu's info): one TSV row of name, compute
 * capability, SMs, peak SM clock (Hz), memory (bytes), and the peak dense
 * FLOP/s in fp32 and in bf16 tensor-core products (SMs x clock x the
 * architecture's FLOPs per clock per SM; nan for an architecture gpu.cu
 * has no rate for). Exit 69 without a usable GPU, saying why.
 *
 * usage: cuda-info
 */
#include <stdio.h>

#include "../lib/model/cuda/gpu.h"

int main(void)
{
	struct gpu *g;
	struct gpu_info info;
	struct sw_err err;
	int rc;

	if ((rc = gpu_cuda_open(&g, &err)) || (rc = g->ops->info(g, &info, &err))) {
		fprintf(stderr, "cuda-info: %s\n", err.msg);
		return rc;
	}
	printf("name\tcompute\tsms\tclock_hz\tmemory\tpeak_fp32\tpeak_bf16\n");
	printf("%s\t%d.%d\t%d\t%.6g\t%.6g\t%.6g\t%.6g\n", info.name, info.sm_major, info.sm_minor, info.sms,
	       info.clock_hz, info.mem_total, info.peak_fp32, info.peak_bf16);
	gpu_close(g);
	return fflush(stdout) ? 74 : 0;
}
