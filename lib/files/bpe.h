/*
 * bpe.h - a byte-level BPE tokenizer: pre-tokenization, training with
 * incremental pair counts, the tokenizer file, encoding and decoding.
 *
 * Tokens 0..255 are the bytes. Token 256 + k is merge k: the concatenation
 * of the bytes of its left and right tokens, both earlier than it. So every
 * byte string has an encoding and decoding is the concatenation of the
 * tokens' bytes: any input (invalid UTF-8, NUL bytes, nothing at all)
 * round-trips exactly. At most 65536 tokens: llm.c token files hold uint16.
 *
 * Pre-tokenization cuts the input into pieces that merges never cross.
 * BPE_PRETOK_WORDS (the default) is GPT-2's split done on bytes, with no
 * locale: bytes are letters (A-Z, a-z and every byte >= 0x80, so UTF-8
 * text of any script stays in its word), digits, white space (space, \t,
 * \n, \v, \f, \r) or other. A piece is a run of letters, of digits or of
 * other bytes, with at most one space (0x20) before it; or a run of white
 * space, less its last byte when that is a space followed by a non-space
 * (which then starts the next piece). "Hi,  you\n" is "Hi" "," " " " you"
 * "\n". BPE_PRETOK_NONE: each input (file) is one piece. The pieces always
 * concatenate back to the input; inputs (files) never share a piece.
 *
 * Training (bpe_trainer_*) counts the distinct pieces, then repeatedly
 * merges the most frequent adjacent pair of tokens. A pair's count is the
 * number of positions where it stands, over every piece of the corpus
 * (overlaps counted: "aaa" holds "a a" twice); among pairs of equal count
 * the smallest (left id, right id) wins. The merge replaces the pair in
 * every piece from left to right ("aaa" becomes "[aa] a"). It stops at the
 * vocabulary size asked for, or earlier when the best count is below 2 or
 * the tokens' bytes would exceed BPE_MAX_TOKEN_BYTES in all. Pair counts
 * and each pair's occurrences are kept up to date around every merged
 * occurrence (a max-heap picks the next pair): the corpus is not rescanned.
 *
 * Encoding applies the merges by rank: within each piece, repeatedly merge
 * the adjacent pair with the lowest merge index, leftmost first - the same
 * tokens as replaying every merge in order over the piece, hence the same
 * as the trainer's final segmentation of its own corpus.
 *
 * The tokenizer file (text, ASCII, '\n' line ends, nothing else):
 *
 *     scalewatch-bpe 1
 *     pretokenizer words
 *     vocab 259
 *     merges 3
 *     256 97 97
 *     257 97 98
 *     258 256 257
 *
 * The merge lines are "ID LEFT RIGHT" with ID = 256, 257, ... in order,
 * LEFT and RIGHT < ID, no pair twice; vocab = 256 + merges, 256..65536.
 * Numbers are decimal without leading zeros, fields one space apart.
 * Anything else is refused as SW_EDATA with the line that is wrong.
 */
#ifndef SW_BPE_H
#define SW_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

#define BPE_FORMAT_MAGIC "scalewatch-bpe"
#define BPE_FORMAT_VERSION 1
#define BPE_MIN_VOCAB 256           /* no merges: the bytes */
#define BPE_MAX_VOCAB 65536         /* token ids are uint16 */
#define BPE_MAX_TOKEN_BYTES (1u << 28)  /* the bytes of all tokens, summed */
#define BPE_MAX_FILE_BYTES (16u << 20)  /* a tokenizer file; ~1.2 MB at most when valid */

enum bpe_pretok { BPE_PRETOK_WORDS, BPE_PRETOK_NONE };

struct bpe_merge {
	uint16_t left, right;   /* token ids, both below the merged token's */
};

struct bpe;             /* a tokenizer: immutable once built */
struct bpe_trainer;     /* the distinct pieces of a corpus and their counts */
struct bpe_encoder;     /* a tokenizer's encoding state: scratch and cache */

/* "words" / "none"; -1 for another name. */
int bpe_pretok_parse(const char *name);
const char *bpe_pretok_name(enum bpe_pretok p);

/*
 * The end of the piece that starts at s[i] (i < n). A piece that ends
 * before n is final whatever bytes follow s[n - 1]; one that ends at n may
 * grow with more input.
 */
size_t bpe_pretok_next(enum bpe_pretok p, const unsigned char *s, size_t n, size_t i);

/* ---- the tokenizer ---- */

/* Build from merges (checked as the file reader checks them). */
int bpe_from_merges(enum bpe_pretok p, const struct bpe_merge *m, size_t n,
		    struct bpe **out, struct sw_err *err);
/* Parse and check a tokenizer file held in buf (any bytes: never reads
 * past len, never crashes; SW_EDATA with the line when malformed). */
int bpe_load_from_memory(const char *buf, size_t len, struct bpe **out,
			 struct sw_err *err);
/* Read a tokenizer file (SW_ENOINPUT/SW_EIO when it cannot be read). */
int bpe_load(const char *path, struct bpe **out, struct sw_err *err);
/* The file's text in a malloc'd buffer (*len bytes, not NUL-terminated). */
int bpe_format(const struct bpe *b, char **buf, size_t *len, struct sw_err *err);
/* Write the file's text to fd (what names it in messages). */
int bpe_write_fd(const struct bpe *b, int fd, const char *what, struct sw_err *err);
/* Write the file under a temporary name and rename it to path. */
int bpe_save(const struct bpe *b, const char *path, struct sw_err *err);
void bpe_free(struct bpe *b);

int bpe_vocab(const struct bpe *b);                 /* 256 + merges */
enum bpe_pretok bpe_pretokenizer(const struct bpe *b);
/* Merge k (token 256 + k), k < vocab - 256. */
struct bpe_merge bpe_merge_at(const struct bpe *b, int k);
/* The length in bytes of token id (< vocab); bpe_decode_stream gives its
 * bytes. */
size_t bpe_token_len(const struct bpe *b, int id);

/* ---- training ---- */

enum bpe_stop {
	BPE_STOP_VOCAB,         /* reached the vocabulary size */
	BPE_STOP_NO_PAIR,       /* no pair occurs twice */
	BPE_STOP_TOKEN_BYTES,   /* the next merge would pass BPE_MAX_TOKEN_BYTES */
};

struct bpe_train_stats {
	int vocab;              /* reached */
	enum bpe_stop stop;
	uint64_t bytes;         /* fed */
	uint64_t pieces;        /* pre-token pieces fed */
	uint64_t distinct;      /* distinct pieces */
	uint64_t tokens;        /* the corpus in the final tokens */
};

int bpe_trainer_new(enum bpe_pretok p, struct bpe_trainer **out, struct sw_err *err);
/*
 * Count the pieces of buf[0, len), one input's bytes in order. Unless
 * final (the input's end), the last piece, which more input might extend,
 * is left: *consumed is where it starts; pass it again with what follows.
 */
int bpe_trainer_feed(struct bpe_trainer *t, const void *buf, size_t len, int final,
		     size_t *consumed, struct sw_err *err);
/*
 * Learn merges until the vocabulary is vocab (257..65536) or no pair
 * occurs twice. progress, if not NULL, is called now and then with the
 * merges done and wanted. The trainer is spent afterwards.
 */
int bpe_trainer_run(struct bpe_trainer *t, int vocab,
		    void (*progress)(void *ctx, int done, int wanted), void *ctx,
		    struct bpe **out, struct bpe_train_stats *stats, struct sw_err *err);
void bpe_trainer_free(struct bpe_trainer *t);

/* ---- encoding and decoding ---- */

struct bpe_tokens {
	uint16_t *id;
	size_t n, cap;
};

struct bpe_bytes {
	unsigned char *p;
	size_t n, cap;
};

int bpe_encoder_new(const struct bpe *b, struct bpe_encoder **out, struct sw_err *err);
void bpe_encoder_free(struct bpe_encoder *e);
/*
 * Append the tokens of buf[0, len) to out; final and consumed as in
 * bpe_trainer_feed (pieces of one input, in order).
 */
int bpe_encode(struct bpe_encoder *e, const void *buf, size_t len, int final,
	       size_t *consumed, struct bpe_tokens *out, struct sw_err *err);
/*
 * The bytes of the tokens id[0, n), in order, handed to emit in pieces of
 * at most BPE_DECODE_CHUNK bytes; emit's failure stops it. Memory is
 * bounded by a constant (the chunk and a stack of the deepest merge
 * tree), not by how long the tokens are: a token of 2^26 bytes is never
 * held whole. SW_EDATA for an id >= vocab (the tokens before it were
 * emitted).
 */
#define BPE_DECODE_CHUNK 65536
typedef int (*bpe_emit_fn)(void *ctx, const void *bytes, size_t len, struct sw_err *err);
int bpe_decode_stream(const struct bpe *b, const uint16_t *id, size_t n, bpe_emit_fn emit,
		      void *ctx, struct sw_err *err);

/* Append the bytes of the tokens to out (which grows to hold them all);
 * SW_EDATA for an id >= vocab. */
int bpe_decode(const struct bpe *b, const uint16_t *id, size_t n, struct bpe_bytes *out,
	       struct sw_err *err);

void bpe_tokens_free(struct bpe_tokens *t);
void bpe_bytes_free(struct bpe_bytes *b);

#endif
