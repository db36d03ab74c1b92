/*
 * fuzz-tokenizer - the tokenizer file reader (bpe_load_from_memory), then
 * the tokenizer it accepted at work. The input is the file; a file that is
 * read must write back byte for byte (the format has one spelling of each
 * tokenizer), and must encode a text made from the file's own bytes into
 * ids below its vocabulary that decode back to exactly that text.
 */
#include <string.h>

#include "../../lib/files/bpe.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpe *b;
	struct bpe_encoder *e;
	struct bpe_tokens tok = {0};
	struct bpe_bytes back = {0};
	struct sw_err err;
	char *text;
	size_t len, consumed, sample;

	if (bpe_load_from_memory((const char *)data, size, &b, &err))
		return 0;
	FUZZ_ASSERT(bpe_vocab(b) >= BPE_MIN_VOCAB && bpe_vocab(b) <= BPE_MAX_VOCAB);
	FUZZ_ASSERT(bpe_format(b, &text, &len, &err) == SW_OK);
	FUZZ_ASSERT(len == size && !memcmp(text, data, size));
	free(text);

	/* the sample: the file's own bytes (digits, spaces, newlines) */
	sample = size < 4096 ? size : 4096;
	FUZZ_ASSERT(bpe_encoder_new(b, &e, &err) == SW_OK);
	FUZZ_ASSERT(bpe_encode(e, data, sample, 1, &consumed, &tok, &err) == SW_OK);
	FUZZ_ASSERT(consumed == sample);
	for (size_t i = 0; i < tok.n; i++)
		FUZZ_ASSERT(tok.id[i] < bpe_vocab(b));
	FUZZ_ASSERT(bpe_decode(b, tok.id, tok.n, &back, &err) == SW_OK);
	FUZZ_ASSERT(back.n == sample && !memcmp(back.p, data, sample));
	bpe_tokens_free(&tok);
	bpe_bytes_free(&back);
	bpe_encoder_free(e);
	bpe_free(b);
	return 0;
}
