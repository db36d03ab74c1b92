/* device.c - the names of the devices and precisions (device.h). */
#include "device.h"

#include <string.h>

static const char *const device_names[] = {"cpu", "cuda", "emu"};
static const char *const precision_names[] = {"fp32", "bf16"};

const char *sw_device_name(enum sw_device d) { return device_names[d]; }
const char *sw_precision_name(enum sw_precision p) { return precision_names[p]; }

int sw_device_parse(const char *s, enum sw_device *out)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, device_names[i])) {
			*out = (enum sw_device)i;
			return 0;
		}
	return -1;
}

int sw_precision_parse(const char *s, enum sw_precision *out)
{
	for (int i = 0; i < 2; i++)
		if (!strcmp(s, precision_names[i])) {
			*out = (enum sw_precision)i;
			return 0;
		}
	return -1;
}
