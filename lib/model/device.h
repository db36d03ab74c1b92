/*
 * device.h - where a run computes, and at which precision: the choice
 * sw-train and sw-sharpness take as --device and --precision, named and
 * parsed here for every caller. The devices themselves are in cuda/ (the
 * GPU, its emulation on the host, or neither where nvcc was not found).
 */
#ifndef SW_DEVICE_H
#define SW_DEVICE_H

enum sw_device { SW_DEVICE_CPU, SW_DEVICE_CUDA, SW_DEVICE_EMU };
enum sw_precision { SW_PRECISION_FP32, SW_PRECISION_BF16 };

/* "cpu", "cuda", "emu"; "fp32", "bf16". The parsers return -1 for an
 * unknown name. */
const char *sw_device_name(enum sw_device d);
int sw_device_parse(const char *s, enum sw_device *out);
const char *sw_precision_name(enum sw_precision p);
int sw_precision_parse(const char *s, enum sw_precision *out);

#endif
