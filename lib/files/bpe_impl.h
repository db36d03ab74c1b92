/*
 * bpe_impl.h - what bpe.c (the tokenizer, its file, encoding) and
 * bpe_train.c (training) share and nothing else sees: the tokenizer's
 * struct, the byte-string hash, a set of byte strings (the trainer's
 * distinct pieces, the encoder's cache), the pair -> value hash map, and
 * the walk over the pieces of a buffer.
 */
#ifndef SW_BPE_IMPL_H
#define SW_BPE_IMPL_H

#include <stdint.h>
#include <string.h>

#include "bpe.h"

struct bpe {
	enum bpe_pretok pretok;
	int vocab;                      /* 256 + n_merges */
	struct bpe_merge *merge;        /* (vocab - 256) */
	uint32_t *tok_len;              /* (vocab) each token's length in bytes */
	/* The bytes of the short tokens (length <= BPE_FLAT_MAX) at tok_off
	 * in bytes; a longer token is its merge's two halves, expanded when
	 * decoded: a tokenizer's memory does not grow with its tokens'
	 * lengths (26 doubling merges make a token of 2^26 bytes). */
	uint32_t *tok_off;              /* (vocab) */
	unsigned char *bytes;
	int max_depth;                  /* the deepest merge tree: a byte 0, a merge 1 + its halves' */
	/* merge rank by pair: open addressing, key = left << 16 | right */
	uint32_t *rank_key;             /* (rank_mask + 1), BPE_NO_KEY when empty */
	int32_t *rank_val;
	uint32_t rank_mask;
};

#define BPE_FLAT_MAX 64

/* No merge has this key: its ids would be 65535, but merges only refer to
 * tokens below their own id, at most 65535. */
#define BPE_NO_KEY 0xffffffffu

static inline uint32_t bpe_pair_key(uint32_t left, uint32_t right)
{
	return left << 16 | right;
}

static inline uint32_t bpe_key_slot(uint32_t key, uint32_t mask)
{
	return (key * 0x9e3779b1u ^ key >> 15) & mask;
}

/* The merge index of (left, right), or -1. */
static inline int32_t bpe_rank(const struct bpe *b, uint32_t left, uint32_t right)
{
	uint32_t key = bpe_pair_key(left, right), i = bpe_key_slot(key, b->rank_mask);

	for (;; i = (i + 1) & b->rank_mask) {
		if (b->rank_key[i] == key)
			return b->rank_val[i];
		if (b->rank_key[i] == BPE_NO_KEY)
			return -1;
	}
}

/* A 64-bit hash of a byte string (for hash tables only; never stored). */
static inline uint64_t bpe_hash(const unsigned char *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n, v;

	for (; n >= 8; s += 8, n -= 8) {
		memcpy(&v, s, 8);
		h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	v = 0;
	memcpy(&v, s, n);
	h = (h ^ v) * 0x94d049bb133111ebull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ h >> 32;
}

/* A set of byte strings, each with an id 0, 1, ... in order of insertion. */
struct bpe_strset {
	struct bpe_strslot { uint32_t hash; int32_t id; } *slot;   /* id -1: empty */
	size_t mask;
	struct bpe_strent { size_t off, len; } *ent;               /* (n) */
	size_t n, ent_cap;
	unsigned char *arena;
	size_t arena_len, arena_cap;
};

int bpe_strset_init(struct bpe_strset *s);
void bpe_strset_free(struct bpe_strset *s);
void bpe_strset_clear(struct bpe_strset *s);
/* The id of s[0, n) (hash h = bpe_hash(p, n)), added if absent: *added
 * says so. -1 when out of memory. */
int32_t bpe_strset_add(struct bpe_strset *s, const unsigned char *p, size_t n, uint64_t h,
		       int *added);
/* The id of p[0, n), or -1. */
int32_t bpe_strset_find(const struct bpe_strset *s, const unsigned char *p, size_t n, uint64_t h);

/*
 * Call fn on each piece of buf[0, len) in order (see bpe_trainer_feed for
 * final and consumed). Stops at fn's first nonzero return and returns it.
 */
static inline int bpe_walk_pieces(enum bpe_pretok p, const unsigned char *s, size_t len,
				  int final, size_t *consumed,
				  int (*fn)(void *ctx, const unsigned char *piece, size_t n),
				  void *ctx)
{
	size_t i = 0;
	int rc;

	while (i < len) {
		size_t j = bpe_pretok_next(p, s, len, i);
		if (j == len && !final)
			break;
		if ((rc = fn(ctx, s + i, j - i))) {
			*consumed = i;
			return rc;
		}
		i = j;
	}
	*consumed = i;
	return 0;
}

#endif
