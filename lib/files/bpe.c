/* bpe.c - the tokenizer: pre-tokenization, the file, encoding, decoding
 * (see bpe.h; training is bpe_train.c). */
#include "bpe_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/atomicfile.h"
#include "../base/grow.h"

/* ---- shared helpers (bpe_impl.h) ---- */

int bpe_strset_init(struct bpe_strset *s)
{
	memset(s, 0, sizeof *s);
	s->mask = 1023;
	if (!(s->slot = malloc((s->mask + 1) * sizeof *s->slot)))
		return -1;
	memset(s->slot, 0xff, (s->mask + 1) * sizeof *s->slot);
	return 0;
}

void bpe_strset_free(struct bpe_strset *s)
{
	free(s->slot);
	free(s->ent);
	free(s->arena);
	memset(s, 0, sizeof *s);
}

void bpe_strset_clear(struct bpe_strset *s)
{
	memset(s->slot, 0xff, (s->mask + 1) * sizeof *s->slot);
	s->n = 0;
	s->arena_len = 0;
}

int32_t bpe_strset_find(const struct bpe_strset *s, const unsigned char *p, size_t n, uint64_t h)
{
	for (size_t i = h & s->mask;; i = (i + 1) & s->mask) {
		const struct bpe_strslot *sl = &s->slot[i];
		if (sl->id < 0)
			return -1;
		if (sl->hash == (uint32_t)(h >> 32) && s->ent[sl->id].len == n &&
		    !memcmp(s->arena + s->ent[sl->id].off, p, n))
			return sl->id;
	}
}

/* Double the slots; the entries keep their ids. */
static int strset_rehash(struct bpe_strset *s)
{
	size_t mask = s->mask * 2 + 1;
	struct bpe_strslot *slot = malloc((mask + 1) * sizeof *slot);

	if (!slot)
		return -1;
	memset(slot, 0xff, (mask + 1) * sizeof *slot);
	for (size_t id = 0; id < s->n; id++) {
		const struct bpe_strent *e = &s->ent[id];
		uint64_t h = bpe_hash(s->arena + e->off, e->len);
		size_t i = h & mask;
		while (slot[i].id >= 0)
			i = (i + 1) & mask;
		slot[i].hash = (uint32_t)(h >> 32);
		slot[i].id = (int32_t)id;
	}
	free(s->slot);
	s->slot = slot;
	s->mask = mask;
	return 0;
}

int32_t bpe_strset_add(struct bpe_strset *s, const unsigned char *p, size_t n, uint64_t h,
		       int *added)
{
	int32_t id = bpe_strset_find(s, p, n, h);
	size_t i;

	*added = 0;
	if (id >= 0)
		return id;
	if (s->n >= INT32_MAX - 1 || ((s->n + 1) * 2 > s->mask + 1 && strset_rehash(s)))
		return -1;
	if (sw_grow(&s->ent, &s->ent_cap, s->n + 1, sizeof *s->ent) ||
	    n > SIZE_MAX - s->arena_len ||
	    sw_grow(&s->arena, &s->arena_cap, s->arena_len + n, 1))
		return -1;
	memcpy(s->arena + s->arena_len, p, n);
	s->ent[s->n].off = s->arena_len;
	s->ent[s->n].len = n;
	s->arena_len += n;
	for (i = h & s->mask; s->slot[i].id >= 0; i = (i + 1) & s->mask)
		;
	s->slot[i].hash = (uint32_t)(h >> 32);
	s->slot[i].id = (int32_t)s->n;
	*added = 1;
	return (int32_t)s->n++;
}

/* ---- pre-tokenization ---- */

enum { C_SPACE, C_LETTER, C_DIGIT, C_OTHER };

static inline int byte_class(unsigned char c)
{
	if (c == ' ' || (c >= '\t' && c <= '\r'))
		return C_SPACE;
	if (c >= 0x80 || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
		return C_LETTER;
	if (c >= '0' && c <= '9')
		return C_DIGIT;
	return C_OTHER;
}

int bpe_pretok_parse(const char *name)
{
	if (!strcmp(name, "words"))
		return BPE_PRETOK_WORDS;
	if (!strcmp(name, "none"))
		return BPE_PRETOK_NONE;
	return -1;
}

const char *bpe_pretok_name(enum bpe_pretok p)
{
	return p == BPE_PRETOK_NONE ? "none" : "words";
}

size_t bpe_pretok_next(enum bpe_pretok p, const unsigned char *s, size_t n, size_t i)
{
	size_t j = i + 1;
	int c;

	if (p == BPE_PRETOK_NONE)
		return n;
	c = byte_class(s[i]);
	if (c == C_SPACE) {
		if (s[i] == ' ' && j < n && byte_class(s[j]) != C_SPACE) {
			c = byte_class(s[j++]);     /* " word": the space leads */
		} else {
			while (j < n && byte_class(s[j]) == C_SPACE)
				j++;
			/* leave the last space to the word that follows */
			if (j < n && j - i >= 2 && s[j - 1] == ' ')
				j--;
			return j;
		}
	}
	while (j < n && byte_class(s[j]) == c)
		j++;
	return j;
}

/* ---- the tokenizer ---- */

void bpe_free(struct bpe *b)
{
	if (!b)
		return;
	free(b->merge);
	free(b->tok_off);
	free(b->tok_len);
	free(b->bytes);
	free(b->rank_key);
	free(b->rank_val);
	free(b);
}

int bpe_vocab(const struct bpe *b)
{
	return b->vocab;
}

enum bpe_pretok bpe_pretokenizer(const struct bpe *b)
{
	return b->pretok;
}

struct bpe_merge bpe_merge_at(const struct bpe *b, int k)
{
	return b->merge[k];
}

size_t bpe_token_len(const struct bpe *b, int id)
{
	return b->tok_len[id];
}

/*
 * Check and index the merges. On SW_EDATA *bad is the index of the merge
 * at fault (so the file reader can name its line), else n.
 */
static int build(enum bpe_pretok p, const struct bpe_merge *m, size_t n, struct bpe **out,
		 size_t *bad, struct sw_err *err)
{
	struct bpe *b;
	uint64_t total = 256, flat = 256;
	uint32_t cap = 64;
	uint16_t *depth = NULL;
	int rc = SW_ESOFTWARE;

	*out = NULL;
	*bad = n;
	if (p != BPE_PRETOK_WORDS && p != BPE_PRETOK_NONE)
		return sw_fail(err, SW_EDATA, "unknown pre-tokenizer %d", (int)p);
	if (n > BPE_MAX_VOCAB - 256)
		return sw_fail(err, SW_EDATA, "%zu merges: at most %d fit in 16-bit token ids",
			       n, BPE_MAX_VOCAB - 256);
	while (cap < 4 * n)
		cap *= 2;
	if (!(b = calloc(1, sizeof *b)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	b->pretok = p;
	b->vocab = (int)(256 + n);
	b->rank_mask = cap - 1;
	b->merge = malloc((n ? n : 1) * sizeof *b->merge);
	b->tok_off = malloc((size_t)b->vocab * sizeof *b->tok_off);
	b->tok_len = malloc((size_t)b->vocab * sizeof *b->tok_len);
	b->rank_key = malloc((size_t)cap * sizeof *b->rank_key);
	b->rank_val = malloc((size_t)cap * sizeof *b->rank_val);
	depth = calloc((size_t)b->vocab, sizeof *depth);
	if (!b->merge || !b->tok_off || !b->tok_len || !b->rank_key || !b->rank_val || !depth) {
		sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	memcpy(b->merge, m, n * sizeof *m);
	memset(b->rank_key, 0xff, (size_t)cap * sizeof *b->rank_key);
	for (int id = 0; id < 256; id++) {
		b->tok_off[id] = (uint32_t)id;
		b->tok_len[id] = 1;
	}
	for (size_t k = 0; k < n; k++) {
		uint32_t id = (uint32_t)(256 + k), l = m[k].left, r = m[k].right;
		uint32_t key = bpe_pair_key(l, r), i = bpe_key_slot(key, b->rank_mask);

		if (l >= id || r >= id) {
			*bad = k;
			rc = sw_fail(err, SW_EDATA, "token %u merges %u and %u: both must be earlier tokens",
				     id, l, r);
			goto fail;
		}
		while (b->rank_key[i] != BPE_NO_KEY && b->rank_key[i] != key)
			i = (i + 1) & b->rank_mask;
		if (b->rank_key[i] == key) {
			*bad = k;
			rc = sw_fail(err, SW_EDATA, "token %u merges %u and %u again (token %d does)",
				     id, l, r, 256 + b->rank_val[i]);
			goto fail;
		}
		b->rank_key[i] = key;
		b->rank_val[i] = (int32_t)k;
		b->tok_len[id] = b->tok_len[l] + b->tok_len[r];   /* both <= 2^28 */
		total += b->tok_len[id];
		if (total > BPE_MAX_TOKEN_BYTES) {
			*bad = k;
			rc = sw_fail(err, SW_EDATA, "token %u: the tokens' bytes add up to more than %u",
				     id, BPE_MAX_TOKEN_BYTES);
			goto fail;
		}
		/* both halves are earlier, so their depths are known */
		depth[id] = (uint16_t)(1 + (depth[l] > depth[r] ? depth[l] : depth[r]));
		b->max_depth = depth[id] > b->max_depth ? depth[id] : b->max_depth;
		b->tok_off[id] = (uint32_t)flat;
		if (b->tok_len[id] <= BPE_FLAT_MAX)
			flat += b->tok_len[id];
	}
	if (!(b->bytes = malloc(flat))) {
		sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto fail;
	}
	for (int id = 0; id < 256; id++)
		b->bytes[id] = (unsigned char)id;
	/* a short token's halves are shorter still: their bytes are there */
	for (size_t k = 0; k < n; k++) {
		uint32_t id = (uint32_t)(256 + k), l = m[k].left, r = m[k].right;
		if (b->tok_len[id] > BPE_FLAT_MAX)
			continue;
		memcpy(b->bytes + b->tok_off[id], b->bytes + b->tok_off[l], b->tok_len[l]);
		memcpy(b->bytes + b->tok_off[id] + b->tok_len[l], b->bytes + b->tok_off[r], b->tok_len[r]);
	}
	free(depth);
	*out = b;
	return SW_OK;
fail:
	free(depth);
	bpe_free(b);
	return rc;
}

int bpe_from_merges(enum bpe_pretok p, const struct bpe_merge *m, size_t n,
		    struct bpe **out, struct sw_err *err)
{
	size_t bad;

	return build(p, m, n, out, &bad, err);
}

/* ---- the file ---- */

struct cursor {
	const char *p, *end;
	size_t line;            /* of the line last read */
};

/* The next line (without '\n') in s[0, *n): 1; 0 at the end of the
 * buffer; -1 (err set) when the last line has no newline. */
static int next_line(struct cursor *c, const char **s, size_t *n, struct sw_err *err)
{
	const char *q;

	if (c->p == c->end)
		return 0;
	c->line++;
	if (!(q = memchr(c->p, '\n', (size_t)(c->end - c->p)))) {
		sw_fail(err, SW_EDATA, "line %zu: no newline at the end of the file", c->line);
		return -1;
	}
	*s = c->p;
	*n = (size_t)(q - c->p);
	c->p = q + 1;
	return 1;
}

/* A decimal number <= max at s[*i], no leading zero, no sign; 0 or -1. */
static int parse_num(const char *s, size_t n, size_t *i, uint32_t max, uint32_t *v)
{
	size_t j = *i;
	uint64_t x = 0;

	if (j >= n || s[j] < '0' || s[j] > '9' || (s[j] == '0' && j + 1 < n && s[j + 1] >= '0' &&
						    s[j + 1] <= '9'))
		return -1;
	for (; j < n && s[j] >= '0' && s[j] <= '9'; j++) {
		x = x * 10 + (uint64_t)(s[j] - '0');
		if (x > max)
			return -1;
	}
	*v = (uint32_t)x;
	*i = j;
	return 0;
}

/* "KEY NUMBER" exactly, the number in lo..hi. */
static int keyed_num(struct cursor *c, const char *key, uint32_t lo, uint32_t hi, uint32_t *v,
		     struct sw_err *err)
{
	size_t n = 0, k = strlen(key), i = k + 1;
	const char *s = NULL;
	int rc;

	if ((rc = next_line(c, &s, &n, err)) < 0)
		return SW_EDATA;
	if (rc == 0)
		return sw_fail(err, SW_EDATA, "the file ends before the '%s' line", key);
	if (n < i || memcmp(s, key, k) || s[k] != ' ' || parse_num(s, n, &i, hi, v) || i != n || *v < lo)
		return sw_fail(err, SW_EDATA, "line %zu: expected '%s N' with N in %u..%u", c->line,
			       key, lo, hi);
	return SW_OK;
}

int bpe_load_from_memory(const char *buf, size_t len, struct bpe **out, struct sw_err *err)
{
	static const char magic[] = BPE_FORMAT_MAGIC " ";
	struct cursor c = {buf, buf + len, 0};
	struct bpe_merge *m = NULL;
	uint32_t vocab, merges;
	const char *s = NULL;
	size_t n = 0, bad;
	int rc, pretok;

	*out = NULL;
	if (len == 0)
		return sw_fail(err, SW_EDATA, "empty file: not a scalewatch BPE tokenizer");
	if (len < sizeof magic - 1 || memcmp(buf, magic, sizeof magic - 1))
		return sw_fail(err, SW_EDATA, "not a scalewatch BPE tokenizer (the first line is not '%s %d')",
			       BPE_FORMAT_MAGIC, BPE_FORMAT_VERSION);
	if (next_line(&c, &s, &n, err) < 0)
		return SW_EDATA;
	/* "scalewatch-bpe 1": the magic, a space, the version's one digit */
	if (n != sizeof magic || s[n - 1] != '0' + BPE_FORMAT_VERSION) {
		size_t i = sizeof magic - 1;
		uint32_t v;
		if (!parse_num(s, n, &i, 1000000, &v) && i == n)
			return sw_fail(err, SW_EDATA, "tokenizer format version %u: this reader knows version %d",
				       v, BPE_FORMAT_VERSION);
		return sw_fail(err, SW_EDATA, "line 1: expected '%s %d'", BPE_FORMAT_MAGIC,
			       BPE_FORMAT_VERSION);
	}
	if ((rc = next_line(&c, &s, &n, err)) < 0)
		return SW_EDATA;
	if (rc == 0)
		return sw_fail(err, SW_EDATA, "the file ends before the 'pretokenizer' line");
	{
		char name[16];
		/* a NUL would end the name early: "words\0" is not "words" */
		if (n < 13 || memcmp(s, "pretokenizer ", 13) || n - 13 >= sizeof name ||
		    memchr(s + 13, '\0', n - 13))
			return sw_fail(err, SW_EDATA, "line %zu: expected 'pretokenizer words' or 'pretokenizer none'",
				       c.line);
		memcpy(name, s + 13, n - 13);
		name[n - 13] = '\0';
		if ((pretok = bpe_pretok_parse(name)) < 0)
			return sw_fail(err, SW_EDATA, "line %zu: expected 'pretokenizer words' or 'pretokenizer none'",
				       c.line);
	}
	if ((rc = keyed_num(&c, "vocab", BPE_MIN_VOCAB, BPE_MAX_VOCAB, &vocab, err)) ||
	    (rc = keyed_num(&c, "merges", 0, BPE_MAX_VOCAB - 256, &merges, err)))
		return rc;
	if (merges != vocab - 256)
		return sw_fail(err, SW_EDATA, "line %zu: %u merges, but vocab %u needs %u (256 + merges)",
			       c.line, merges, vocab, vocab - 256);
	if (!(m = malloc((merges ? merges : 1) * sizeof *m)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	for (uint32_t k = 0; k < merges; k++) {
		uint32_t id, v[2];
		size_t i = 0;
		if ((rc = next_line(&c, &s, &n, err)) < 0) {
			rc = SW_EDATA;
			goto out;
		}
		if (rc == 0) {
			rc = sw_fail(err, SW_EDATA, "the file ends after %u of its %u merges", k, merges);
			goto out;
		}
		if (parse_num(s, n, &i, BPE_MAX_VOCAB, &id) || i >= n || s[i++] != ' ' ||
		    parse_num(s, n, &i, BPE_MAX_VOCAB, &v[0]) || i >= n || s[i++] != ' ' ||
		    parse_num(s, n, &i, BPE_MAX_VOCAB, &v[1]) || i != n) {
			rc = sw_fail(err, SW_EDATA, "line %zu: expected 'ID LEFT RIGHT' (three token ids)",
				     c.line);
			goto out;
		}
		if (id != 256 + k) {
			rc = sw_fail(err, SW_EDATA, "line %zu: token %u where token %u comes", c.line, id,
				     256 + k);
			goto out;
		}
		if (v[0] >= id || v[1] >= id) {
			rc = sw_fail(err, SW_EDATA, "line %zu: token %u merges %u and %u: both must be earlier tokens",
				     c.line, id, v[0], v[1]);
			goto out;
		}
		m[k].left = (uint16_t)v[0];
		m[k].right = (uint16_t)v[1];
	}
	if (c.p != c.end) {
		rc = sw_fail(err, SW_EDATA, "line %zu: more than the %u merges announced", c.line + 1,
			     merges);
		goto out;
	}
	if ((rc = build((enum bpe_pretok)pretok, m, merges, out, &bad, err)) && bad < merges)
		sw_err_prefix(err, "line %zu", (size_t)5 + bad);
out:
	free(m);
	return rc;
}

int bpe_load(const char *path, struct bpe **out, struct sw_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = sw_fail(err, SW_EIO, "%s", strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = sw_fail(err, SW_ENOINPUT, "is a directory");
		goto out;
	}
	/* read to the end (a pipe has no size), refusing what is too large */
	for (size_t cap = 0;;) {
		ssize_t r;
		if (len == cap) {
			if (cap > BPE_MAX_FILE_BYTES) {
				rc = sw_fail(err, SW_EDATA, "larger than %u bytes: not a tokenizer file",
					     BPE_MAX_FILE_BYTES);
				goto out;
			}
			if (sw_grow(&buf, &cap, cap + 65536, 1)) {
				rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
				goto out;
			}
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = sw_fail(err, sw_errno_status(errno), "read: %s", strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	rc = bpe_load_from_memory(buf, len, out, err);
out:
	free(buf);
	close(fd);
	return rc;
}

int bpe_format(const struct bpe *b, char **buf, size_t *len, struct sw_err *err)
{
	/* the header, then at most "65535 65534 65534\n" per merge */
	size_t cap = 128 + (size_t)(b->vocab - 256) * 18, n;
	char *s = malloc(cap);

	*buf = NULL;
	*len = 0;
	if (!s)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	n = (size_t)snprintf(s, cap, "%s %d\npretokenizer %s\nvocab %d\nmerges %d\n", BPE_FORMAT_MAGIC,
			     BPE_FORMAT_VERSION, bpe_pretok_name(b->pretok), b->vocab, b->vocab - 256);
	for (int k = 0; k < b->vocab - 256; k++)
		n += (size_t)snprintf(s + n, cap - n, "%d %u %u\n", 256 + k, b->merge[k].left,
				      b->merge[k].right);
	*buf = s;
	*len = n;
	return SW_OK;
}

int bpe_write_fd(const struct bpe *b, int fd, const char *what, struct sw_err *err)
{
	char *text;
	size_t len;
	int rc;

	if ((rc = bpe_format(b, &text, &len, err)))
		return rc;
	rc = atomic_write_all(fd, text, len, what, err);
	free(text);
	return rc;
}

int bpe_save(const struct bpe *b, const char *path, struct sw_err *err)
{
	char tmp[PATH_MAX + 64];
	int fd, rc;

	if ((rc = atomic_create(path, tmp, sizeof tmp, &fd, err)))
		return rc;
	return atomic_finish(fd, tmp, path, bpe_write_fd(b, fd, path, err), err);
}

/* ---- encoding ---- */

/* Pieces up to this long are encoded by a scan, longer ones by a heap. */
#define SHORT_PIECE 64

/*
 * The cache of short pieces seen: one 64-byte line per piece, key and
 * tokens inline, so that a hit costs one cache miss. Pieces of more than
 * CACHE_KEY bytes or CACHE_TOK tokens are not cached. When half full it
 * starts afresh (bounded memory; the output does not depend on it).
 */
#define CACHE_SLOTS (1u << 18)
#define CACHE_KEY 40
#define CACHE_TOK 11

struct cache_slot {
	uint8_t len;                    /* bytes of the piece; 0: empty */
	uint8_t ntok;
	uint16_t tok[CACHE_TOK];
	unsigned char key[CACHE_KEY];
};

struct bpe_encoder {
	const struct bpe *b;
	struct cache_slot *cache;       /* (CACHE_SLOTS), allocated when first needed */
	size_t cached;
	/* a long piece: linked list of symbols and a heap of (rank, position) */
	int32_t *sym, *next, *prev;     /* (scratch_cap) */
	size_t scratch_cap;
	uint64_t *heap;
	size_t heap_n, heap_cap;
	struct bpe_tokens *out;         /* where bpe_encode appends */
};

int bpe_encoder_new(const struct bpe *b, struct bpe_encoder **out, struct sw_err *err)
{
	struct bpe_encoder *e = calloc(1, sizeof *e);

	*out = NULL;
	if (!e)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	e->b = b;
	*out = e;
	return SW_OK;
}

void bpe_encoder_free(struct bpe_encoder *e)
{
	if (!e)
		return;
	free(e->cache);
	free(e->sym);
	free(e->next);
	free(e->prev);
	free(e->heap);
	free(e);
}

static int push_tokens(struct bpe_tokens *t, const uint16_t *id, size_t n)
{
	if (sw_grow(&t->id, &t->cap, t->n + n, sizeof *t->id))
		return -1;
	memcpy(t->id + t->n, id, n * sizeof *id);
	t->n += n;
	return 0;
}

/*
 * A short piece: scan for the lowest-ranked pair (the leftmost among
 * equals), merge it, repeat. rk[k] is the rank of (id[k], id[k + 1]).
 */
static size_t encode_short(const struct bpe *b, const unsigned char *s, size_t n, uint16_t *id)
{
	int32_t rk[SHORT_PIECE];

	for (size_t k = 0; k < n; k++)
		id[k] = s[k];
	for (size_t k = 0; k + 1 < n; k++)
		if ((rk[k] = bpe_rank(b, id[k], id[k + 1])) < 0)
			rk[k] = INT32_MAX;
	while (n > 1) {
		int32_t best = INT32_MAX;
		size_t at = 0;
		for (size_t k = 0; k + 1 < n; k++)
			if (rk[k] < best) {
				best = rk[k];
				at = k;
			}
		if (best == INT32_MAX)
			break;
		id[at] = (uint16_t)(256 + best);
		memmove(id + at + 1, id + at + 2, (n - at - 2) * sizeof *id);
		memmove(rk + at + 1, rk + at + 2, (n - at - 2) * sizeof *rk);
		n--;
		if (at > 0 && (rk[at - 1] = bpe_rank(b, id[at - 1], id[at])) < 0)
			rk[at - 1] = INT32_MAX;
		if (at + 1 < n && (rk[at] = bpe_rank(b, id[at], id[at + 1])) < 0)
			rk[at] = INT32_MAX;
	}
	return n;
}

static void heap_push(struct bpe_encoder *e, uint64_t v)
{
	size_t i = e->heap_n++;

	while (i > 0 && e->heap[(i - 1) / 2] > v) {
		e->heap[i] = e->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	e->heap[i] = v;
}

static uint64_t heap_pop(struct bpe_encoder *e)
{
	uint64_t top = e->heap[0], v = e->heap[--e->heap_n];
	size_t i = 0, n = e->heap_n;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && e->heap[c + 1] < e->heap[c])
			c++;
		if (e->heap[c] >= v)
			break;
		e->heap[i] = e->heap[c];
		i = c;
	}
	e->heap[i] = v;
	return top;
}

static void push_pair(struct bpe_encoder *e, int32_t k, int32_t j)
{
	int32_t r = bpe_rank(e->b, (uint32_t)e->sym[k], (uint32_t)e->sym[j]);

	if (r >= 0)
		heap_push(e, (uint64_t)r << 32 | (uint32_t)k);
}

/*
 * A long piece: the symbols as a linked list, the mergeable pairs in a
 * min-heap keyed by (rank, position), so merges go in rank order and, for
 * one rank, left to right; entries made stale by a neighbour's merge are
 * recognized when popped (their pair is no longer there). A merge makes a
 * token newer than its rank's, and every merge involving it ranks later,
 * so no pair of the rank being merged appears behind the scan.
 */
static int encode_long(struct bpe_encoder *e, const unsigned char *s, size_t n)
{
	size_t cap = e->scratch_cap;
	int32_t k;

	if (n > INT32_MAX)
		return SW_EDATA;
	if (cap < n) {
		if (sw_grow(&e->sym, &cap, n, sizeof *e->sym))
			return SW_ESOFTWARE;
		cap = e->scratch_cap;
		if (sw_grow(&e->next, &cap, n, sizeof *e->next))
			return SW_ESOFTWARE;
		cap = e->scratch_cap;
		if (sw_grow(&e->prev, &cap, n, sizeof *e->prev))
			return SW_ESOFTWARE;
		e->scratch_cap = cap;
	}
	if (sw_grow(&e->heap, &e->heap_cap, n, sizeof *e->heap))
		return SW_ESOFTWARE;
	e->heap_n = 0;
	for (size_t i = 0; i < n; i++) {
		e->sym[i] = s[i];
		e->next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
		e->prev[i] = (int32_t)i - 1;
	}
	for (size_t i = 0; i + 1 < n; i++)
		push_pair(e, (int32_t)i, (int32_t)i + 1);
	/* at most n - 1 merges, each pushing at most 2 after popping 1: the
	 * heap never holds more than n entries */
	while (e->heap_n > 0) {
		uint64_t top = heap_pop(e);
		int32_t r = (int32_t)(top >> 32), j, nn, p;
		k = (int32_t)(uint32_t)top;
		if (e->sym[k] < 0 || (j = e->next[k]) < 0 ||
		    bpe_rank(e->b, (uint32_t)e->sym[k], (uint32_t)e->sym[j]) != r)
			continue;
		e->sym[k] = 256 + r;
		e->sym[j] = -1;
		nn = e->next[j];
		e->next[k] = nn;
		if (nn >= 0)
			e->prev[nn] = k;
		if ((p = e->prev[k]) >= 0)
			push_pair(e, p, k);
		if (nn >= 0)
			push_pair(e, k, nn);
	}
	for (k = 0; k >= 0; k = e->next[k]) {
		uint16_t id = (uint16_t)e->sym[k];
		if (push_tokens(e->out, &id, 1))
			return SW_ESOFTWARE;
	}
	return SW_OK;
}

static int encode_piece(void *ctx, const unsigned char *s, size_t n)
{
	struct bpe_encoder *e = ctx;
	struct cache_slot *c = NULL;
	uint16_t id[SHORT_PIECE];
	size_t m, h = 0;

	if (n == 1) {
		id[0] = s[0];
		return push_tokens(e->out, id, 1) ? SW_ESOFTWARE : 0;
	}
	if (n > SHORT_PIECE)
		return encode_long(e, s, n);
	if (n <= CACHE_KEY) {
		if (!e->cache && !(e->cache = calloc(CACHE_SLOTS, sizeof *e->cache)))
			return SW_ESOFTWARE;
		h = bpe_hash(s, n) & (CACHE_SLOTS - 1);
		for (size_t i = h;; i = (i + 1) & (CACHE_SLOTS - 1)) {
			c = &e->cache[i];
			if (c->len == 0)
				break;
			if (c->len == n && !memcmp(c->key, s, n))
				return push_tokens(e->out, c->tok, c->ntok) ? SW_ESOFTWARE : 0;
		}
	}
	m = encode_short(e->b, s, n, id);
	if (push_tokens(e->out, id, m))
		return SW_ESOFTWARE;
	if (c && m <= CACHE_TOK) {
		if (e->cached >= CACHE_SLOTS / 2) {     /* start afresh */
			memset(e->cache, 0, CACHE_SLOTS * sizeof *e->cache);
			e->cached = 0;
			c = &e->cache[h];
		}
		c->len = (uint8_t)n;
		c->ntok = (uint8_t)m;
		memcpy(c->key, s, n);
		memcpy(c->tok, id, m * sizeof *id);
		e->cached++;
	}
	return 0;
}

int bpe_encode(struct bpe_encoder *e, const void *buf, size_t len, int final,
	       size_t *consumed, struct bpe_tokens *out, struct sw_err *err)
{
	int rc;

	e->out = out;
	rc = bpe_walk_pieces(e->b->pretok, buf, len, final, consumed, encode_piece, e);
	e->out = NULL;
	if (rc == SW_EDATA)
		return sw_fail(err, rc, "a piece of more than %d bytes (pre-tokenizer none?)", INT32_MAX);
	if (rc)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

int bpe_decode_stream(const struct bpe *b, const uint16_t *id, size_t n, bpe_emit_fn emit,
		      void *ctx, struct sw_err *err)
{
	unsigned char *buf = malloc(BPE_DECODE_CHUNK);
	uint16_t *stack = malloc(((size_t)b->max_depth + 1) * sizeof *stack);
	size_t used = 0;
	int rc = SW_OK;

	if (!buf || !stack) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		size_t sp = 0;
		if (id[i] >= b->vocab) {
			rc = sw_fail(err, SW_EDATA, "token %zu: id %u is not below the vocabulary size %d",
				     i, id[i], b->vocab);
			break;
		}
		/*
		 * The token's merge tree, left to right, down to short tokens:
		 * each pop pushes at most one pending right half per level, so
		 * the stack holds max_depth + 1 ids at most, and the bytes go
		 * out a chunk at a time, however long the token.
		 */
		stack[sp++] = id[i];
		while (sp && !rc) {
			uint16_t t = stack[--sp];
			uint32_t len = b->tok_len[t];
			if (len > BPE_FLAT_MAX) {
				stack[sp++] = b->merge[t - 256].right;
				stack[sp++] = b->merge[t - 256].left;
				continue;
			}
			if (used + len > BPE_DECODE_CHUNK) {
				rc = emit(ctx, buf, used, err);
				used = 0;
			}
			memcpy(buf + used, b->bytes + b->tok_off[t], len);
			used += len;
		}
	}
	if (!rc && used)
		rc = emit(ctx, buf, used, err);
out:
	free(buf);
	free(stack);
	return rc;
}

static int append_bytes(void *ctx, const void *p, size_t len, struct sw_err *err)
{
	struct bpe_bytes *out = ctx;

	if (sw_grow(&out->p, &out->cap, out->n + len, 1))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	memcpy(out->p + out->n, p, len);
	out->n += len;
	return SW_OK;
}

int bpe_decode(const struct bpe *b, const uint16_t *id, size_t n, struct bpe_bytes *out,
	       struct sw_err *err)
{
	return bpe_decode_stream(b, id, n, append_bytes, out, err);
}

void bpe_tokens_free(struct bpe_tokens *t)
{
	free(t->id);
	memset(t, 0, sizeof *t);
}

void bpe_bytes_free(struct bpe_bytes *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}
