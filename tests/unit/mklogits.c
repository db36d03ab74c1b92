/*
 * mklogits - scalewatch's own forward pass on a checkpoint, for the
 * PyTorch cross-check of sw-convert's export (tests/e2e/t0240): loads
 * CKPT with the project's model code (lib/model/modelio.c, any format the tools
 * read), runs model_forward on the tokens given and prints the logits,
 * one line of V tab-separated values per position (not a test itself:
 * the Makefile builds it beside the unit tests, prove never runs it).
 *
 *   mklogits CKPT TOKEN...
 *
 * model_forward leaves softmax probabilities, not logits, in m.logits;
 * the logits are the last step of that same pass, the head applied to
 * the final RMSNorm's output (m.nf), which is computed here in double.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../lib/model/modelio.h"

int main(int argc, char **argv)
{
	struct model m;
	struct sw_err err;
	int T = argc - 2, *tok;

	if (argc < 3) {
		fprintf(stderr, "usage: mklogits CKPT TOKEN...\n");
		return 64;
	}
	if (modelio_load(argv[1], &m, &err)) {
		fprintf(stderr, "mklogits: %s: %s\n", argv[1], err.msg);
		return err.code;
	}
	tok = malloc((size_t)T * sizeof *tok);
	if (!tok || T > m.c.seq_len || model_alloc_acts(&m, 1, T, &err)) {
		fprintf(stderr, "mklogits: %d tokens: too many or out of memory\n", T);
		return 70;
	}
	for (int t = 0; t < T; t++) {
		tok[t] = atoi(argv[2 + t]);
		if (tok[t] < 0 || tok[t] >= m.c.vocab_size) {
			fprintf(stderr, "mklogits: token %s outside the vocabulary\n", argv[2 + t]);
			return 65;
		}
	}
	model_forward(&m, tok, NULL, 1, T);
	for (int t = 0; t < T; t++) {
		const real *x = m.nf + (size_t)t * m.c.d_model;     /* (C) */
		for (int64_t v = 0; v < m.c.vocab_size; v++) {
			const real *w = m.p.lm_head + v * m.c.d_model;  /* (C) */
			double s = 0;
			for (int64_t c = 0; c < m.c.d_model; c++)
				s += (double)x[c] * (double)w[c];
			printf("%s%.17g", v ? "\t" : "", s);
		}
		putchar('\n');
	}
	free(tok);
	model_free(&m);
	return fflush(stdout) ? 74 : 0;
}
