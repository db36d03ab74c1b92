/*
 * Unit tests of lib/formats/ropeperm.c beyond t-gguf.c's: the row map is a
 * permutation within each head, it is the strided view (head, pair i,
 * component j) -> row head*hd + j*hd/2 + i that the PyTorch reader once
 * wrote apart, and the rows it needs are checked.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/formats/ropeperm.h"
#include "tap.h"

int main(void)
{
	struct sw_err err;
	int all = 1;

	for (int64_t hd = 2; hd <= 128; hd *= 2) {
		int64_t rows = 3 * hd;
		unsigned char *hit = calloc((size_t)rows, 1);
		if (!hit)
			return 1;
		for (int64_t r = 0; r < rows; r++) {
			int64_t s = ropeperm_source_row(r, hd);
			all &= s >= 0 && s < rows && s / hd == r / hd && !hit[s];
			if (s >= 0 && s < rows)
				hit[s] = 1;
		}
		/* interleaved row (head, i, j) = head*hd + 2i + j becomes
		 * rotate-half row head*hd + j*hd/2 + i */
		for (int64_t h = 0; h < 3; h++)
			for (int64_t i = 0; i < hd / 2; i++)
				for (int64_t j = 0; j < 2; j++)
					all &= ropeperm_source_row(h * hd + j * hd / 2 + i, hd) ==
					       h * hd + 2 * i + j;
		free(hit);
	}
	ok(all, "a permutation within each head, the (head, i, j) strided view, head_dim 2..128");

	ok(ropeperm_check_rows(64, 8, &err) == SW_OK && ropeperm_check_rows(0, 8, &err) == SW_OK,
	   "whole heads of an even head_dim pass");
	ok(ropeperm_check_rows(12, 8, &err) == SW_EDATA &&
	   !strcmp(err.msg, "12 rows are no whole number of heads of an even size 8: "
			    "the RoPE pairs cannot be reordered"), "part of a head refused: %s", err.msg);
	ok(ropeperm_check_rows(15, 5, &err) == SW_EDATA && ropeperm_check_rows(8, 0, &err) == SW_EDATA &&
	   ropeperm_check_rows(8, -2, &err) == SW_EDATA, "an odd, zero or negative head_dim refused");
	return tap_done();
}
