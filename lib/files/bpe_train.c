/*
 * bpe_train.c - BPE training with incremental pair counts (see bpe.h).
 *
 * The distinct pieces of the corpus (with their counts) are laid end to
 * end as positions 0..N-1; pos holds a token, the links to its live
 * neighbours within its piece, and its piece's count as a weight. Every
 * live position with a right neighbour is one occurrence of a pair, and
 * sits in that pair's doubly linked list of occurrences; the pair's count
 * is the sum of the weights in its list. Merging (a, b) visits only its
 * occurrences: each one retires the pairs around it - (p, a), (a, b),
 * (b, n) - and creates (p, X), (X, n). A max-heap of (count, key)
 * entries, ordered by count, then smaller key, gives the next merge: after
 * each merge every pair whose count moved gets an entry with its new
 * count; an entry whose count is no longer its pair's is stale and dropped
 * when it comes to the top (lazy deletion: the heap stays a heap).
 */
#include "bpe_impl.h"
#include "../base/grow.h"

#include <stdlib.h>

struct pair {
	uint32_t key;           /* left << 16 | right */
	int32_t head;           /* first occurrence (position), -1: none */
	int32_t dirty;          /* its count changed during this merge */
	int64_t count;          /* weighted occurrences */
};

/* A heap entry: pair's count when it was pushed. */
struct entry {
	int64_t count;
	uint32_t key;
	int32_t pair;
};

struct bpe_trainer {
	enum bpe_pretok pretok;
	struct bpe_strset pieces;       /* distinct pieces of 2 bytes or more */
	uint64_t *count;                /* (pieces.n) occurrences of each */
	size_t count_cap;
	unsigned char single[256];      /* the 1-byte pieces seen */
	struct bpe_train_stats st;
	int spent;

	/* the positions, during bpe_trainer_run: (npos) each */
	int32_t *sym;                   /* token at pos, -1 once merged away */
	int32_t *next, *prev;           /* live neighbours in the piece, -1: none */
	int32_t *onext, *oprev;         /* the occurrence list of pair pidx[pos] */
	int32_t *pidx;                  /* the pair (sym[pos], sym[next[pos]]) */
	uint32_t *w;                    /* the piece's count */
	size_t npos;

	struct pair *pair;
	size_t npair, pair_cap;
	int32_t *map;                   /* key -> pair index, open addressing, -1 */
	size_t map_mask;
	struct entry *heap;
	size_t nheap, heap_cap;
	int32_t *dirty;                 /* pairs whose count moved this merge */
	size_t ndirty, dirty_cap;
	int32_t *occ;                   /* the occurrences being merged */
	size_t occ_cap;
};

int bpe_trainer_new(enum bpe_pretok p, struct bpe_trainer **out, struct sw_err *err)
{
	struct bpe_trainer *t = calloc(1, sizeof *t);

	*out = NULL;
	if (!t || bpe_strset_init(&t->pieces)) {
		free(t);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	t->pretok = p;
	*out = t;
	return SW_OK;
}

void bpe_trainer_free(struct bpe_trainer *t)
{
	if (!t)
		return;
	bpe_strset_free(&t->pieces);
	free(t->count);
	free(t->sym);
	free(t->next);
	free(t->prev);
	free(t->onext);
	free(t->oprev);
	free(t->pidx);
	free(t->w);
	free(t->pair);
	free(t->map);
	free(t->heap);
	free(t->dirty);
	free(t->occ);
	free(t);
}

static int count_piece(void *ctx, const unsigned char *s, size_t n)
{
	struct bpe_trainer *t = ctx;
	int32_t id;
	int added;

	t->st.bytes += n;
	t->st.pieces++;
	if (n == 1) {
		t->st.distinct += !t->single[s[0]];
		t->single[s[0]] = 1;
		return 0;
	}
	if ((id = bpe_strset_add(&t->pieces, s, n, bpe_hash(s, n), &added)) < 0 ||
	    sw_grow(&t->count, &t->count_cap, (size_t)id + 1, sizeof *t->count))
		return SW_ESOFTWARE;
	if (added) {
		t->count[id] = 0;
		t->st.distinct++;
	}
	t->count[id]++;
	return 0;
}

int bpe_trainer_feed(struct bpe_trainer *t, const void *buf, size_t len, int final,
		     size_t *consumed, struct sw_err *err)
{
	if (t->spent)
		return sw_fail(err, SW_ESOFTWARE, "bpe_trainer_feed after bpe_trainer_run");
	if (bpe_walk_pieces(t->pretok, buf, len, final, consumed, count_piece, t))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

/* ---- pairs: the key map and the heap ---- */

/* The pair of key, created (count 0) if new; -1 when out of memory. */
static int32_t pair_of(struct bpe_trainer *t, uint32_t key)
{
	size_t i;

	if ((t->npair + 1) * 2 > t->map_mask + 1) {         /* keep the map half empty */
		size_t mask = t->map_mask * 2 + 1;
		int32_t *map = malloc((mask + 1) * sizeof *map);
		if (!map)
			return -1;
		memset(map, 0xff, (mask + 1) * sizeof *map);
		for (size_t p = 0; p < t->npair; p++) {
			for (i = bpe_key_slot(t->pair[p].key, (uint32_t)mask); map[i] >= 0; i = (i + 1) & mask)
				;
			map[i] = (int32_t)p;
		}
		free(t->map);
		t->map = map;
		t->map_mask = mask;
	}
	for (i = bpe_key_slot(key, (uint32_t)t->map_mask); t->map[i] >= 0; i = (i + 1) & t->map_mask)
		if (t->pair[t->map[i]].key == key)
			return t->map[i];
	if (sw_grow(&t->pair, &t->pair_cap, t->npair + 1, sizeof *t->pair))
		return -1;
	t->pair[t->npair] = (struct pair){key, -1, 0, 0};
	t->map[i] = (int32_t)t->npair;
	return (int32_t)t->npair++;
}

/* Does x go before y: a larger count, or the same and a smaller key? */
static inline int before(const struct entry *x, const struct entry *y)
{
	return x->count > y->count || (x->count == y->count && x->key < y->key);
}

static int heap_push(struct bpe_trainer *t, int32_t p)
{
	struct entry e = {t->pair[p].count, t->pair[p].key, p};
	size_t i = t->nheap;

	if (sw_grow(&t->heap, &t->heap_cap, t->nheap + 1, sizeof *t->heap))
		return -1;
	for (; i > 0 && before(&e, &t->heap[(i - 1) / 2]); i = (i - 1) / 2)
		t->heap[i] = t->heap[(i - 1) / 2];
	t->heap[i] = e;
	t->nheap++;
	return 0;
}

static void heap_pop(struct bpe_trainer *t)
{
	struct entry e = t->heap[--t->nheap];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= t->nheap)
			break;
		if (c + 1 < t->nheap && before(&t->heap[c + 1], &t->heap[c]))
			c++;
		if (!before(&t->heap[c], &e))
			break;
		t->heap[i] = t->heap[c];
		i = c;
	}
	t->heap[i] = e;
}

/* After a merge: an entry for every pair whose count moved (and is > 0). */
static int push_dirty(struct bpe_trainer *t)
{
	for (size_t k = 0; k < t->ndirty; k++) {
		int32_t p = t->dirty[k];
		t->pair[p].dirty = 0;
		if (t->pair[p].count > 0 && heap_push(t, p))
			return -1;
	}
	t->ndirty = 0;
	return 0;
}

static int mark_dirty(struct bpe_trainer *t, int32_t p)
{
	if (t->pair[p].dirty)
		return 0;
	if (sw_grow(&t->dirty, &t->dirty_cap, t->ndirty + 1, sizeof *t->dirty))
		return -1;
	t->pair[p].dirty = 1;
	t->dirty[t->ndirty++] = p;
	return 0;
}

/* ---- occurrences ---- */

/* pos (with a right neighbour) joins the list of its pair. */
static int occ_add(struct bpe_trainer *t, int32_t pos)
{
	int32_t p = pair_of(t, bpe_pair_key((uint32_t)t->sym[pos], (uint32_t)t->sym[t->next[pos]]));
	struct pair *pr;

	if (p < 0)
		return -1;
	pr = &t->pair[p];
	t->pidx[pos] = p;
	t->oprev[pos] = -1;
	t->onext[pos] = pr->head;
	if (pr->head >= 0)
		t->oprev[pr->head] = pos;
	pr->head = pos;
	pr->count += t->w[pos];
	return mark_dirty(t, p);
}

/* pos leaves the list of its pair. */
static int occ_del(struct bpe_trainer *t, int32_t pos)
{
	int32_t p = t->pidx[pos];
	struct pair *pr = &t->pair[p];

	if (t->oprev[pos] >= 0)
		t->onext[t->oprev[pos]] = t->onext[pos];
	else
		pr->head = t->onext[pos];
	if (t->onext[pos] >= 0)
		t->oprev[t->onext[pos]] = t->oprev[pos];
	pr->count -= t->w[pos];
	return mark_dirty(t, p);
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/*
 * Replace every occurrence of pair p by token x, left to right within a
 * piece; the tokens the corpus loses go to *merged (weighted).
 */
static int merge_pair(struct bpe_trainer *t, int32_t p, int32_t x, uint64_t *merged)
{
	int32_t a = (int32_t)(t->pair[p].key >> 16), b = (int32_t)(t->pair[p].key & 0xffff);
	size_t n = 0;

	for (int32_t pos = t->pair[p].head; pos >= 0; pos = t->onext[pos]) {
		if (sw_grow(&t->occ, &t->occ_cap, n + 1, sizeof *t->occ))
			return -1;
		t->occ[n++] = pos;
	}
	/* (a, a) occurrences overlap in runs: "aaa" must become "[aa] a" */
	if (a == b)
		qsort(t->occ, n, sizeof *t->occ, cmp_i32);
	for (size_t k = 0; k < n; k++) {
		int32_t i = t->occ[k], j, prev, nn;
		/* merged away, or its right neighbour was, by the previous one */
		if (t->sym[i] != a || (j = t->next[i]) < 0 || t->sym[j] != b)
			continue;
		prev = t->prev[i];
		nn = t->next[j];
		if ((prev >= 0 && occ_del(t, prev)) || occ_del(t, i) || (nn >= 0 && occ_del(t, j)))
			return -1;
		t->sym[i] = x;
		t->sym[j] = -1;
		t->next[i] = nn;
		if (nn >= 0)
			t->prev[nn] = i;
		if ((prev >= 0 && occ_add(t, prev)) || (nn >= 0 && occ_add(t, i)))
			return -1;
		*merged += t->w[i];
	}
	return 0;
}

/* Lay the distinct pieces out as positions, and count their pairs. */
static int setup(struct bpe_trainer *t, struct sw_err *err)
{
	size_t n = t->pieces.arena_len, pos = 0;

	if (n >= INT32_MAX)
		return sw_fail(err, SW_EDATA, "the distinct pieces of the corpus hold %zu bytes: "
			       "training handles less than 2 GiB", n);
	t->npos = n;
	n = n ? n : 1;
	t->sym = malloc(n * sizeof *t->sym);
	t->next = malloc(n * sizeof *t->next);
	t->prev = malloc(n * sizeof *t->prev);
	t->onext = malloc(n * sizeof *t->onext);
	t->oprev = malloc(n * sizeof *t->oprev);
	t->pidx = malloc(n * sizeof *t->pidx);
	t->w = malloc(n * sizeof *t->w);
	t->map_mask = 1023;
	t->map = malloc((t->map_mask + 1) * sizeof *t->map);
	if (!t->sym || !t->next || !t->prev || !t->onext || !t->oprev || !t->pidx || !t->w || !t->map)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	memset(t->map, 0xff, (t->map_mask + 1) * sizeof *t->map);
	for (size_t id = 0; id < t->pieces.n; id++) {
		const struct bpe_strent *e = &t->pieces.ent[id];
		const unsigned char *s = t->pieces.arena + e->off;
		if (t->count[id] > UINT32_MAX)
			return sw_fail(err, SW_EDATA, "a piece occurs more than %u times", UINT32_MAX);
		for (size_t k = 0; k < e->len; k++, pos++) {
			t->sym[pos] = s[k];
			t->prev[pos] = k > 0 ? (int32_t)pos - 1 : -1;
			t->next[pos] = k + 1 < e->len ? (int32_t)pos + 1 : -1;
			t->w[pos] = (uint32_t)t->count[id];
		}
	}
	for (pos = 0; pos < t->npos; pos++)
		if (t->next[pos] >= 0 && occ_add(t, (int32_t)pos))
			return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (push_dirty(t))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	return SW_OK;
}

int bpe_trainer_run(struct bpe_trainer *t, int vocab,
		    void (*progress)(void *ctx, int done, int wanted), void *ctx,
		    struct bpe **out, struct bpe_train_stats *stats, struct sw_err *err)
{
	struct bpe_merge *m = NULL;
	uint32_t *len = NULL;
	uint64_t total = 256, merged = 0;
	int nm = 0, wanted = vocab - 256, rc;

	*out = NULL;
	if (vocab < BPE_MIN_VOCAB + 1 || vocab > BPE_MAX_VOCAB)
		return sw_fail(err, SW_EUSAGE, "vocabulary size %d: it must be in %d..%d", vocab,
			       BPE_MIN_VOCAB + 1, BPE_MAX_VOCAB);
	if (t->spent)
		return sw_fail(err, SW_ESOFTWARE, "bpe_trainer_run twice");
	t->spent = 1;
	if ((rc = setup(t, err)))
		return rc;
	m = malloc((size_t)wanted * sizeof *m);
	len = malloc((size_t)vocab * sizeof *len);
	if (!m || !len) {
		rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
		goto out;
	}
	for (int i = 0; i < 256; i++)
		len[i] = 1;
	t->st.stop = BPE_STOP_VOCAB;
	while (nm < wanted) {
		int32_t p;
		uint32_t l, r;

		if (progress && nm % 64 == 0)
			progress(ctx, nm, wanted);
		while (t->nheap > 0 && t->heap[0].count != t->pair[t->heap[0].pair].count)
			heap_pop(t);            /* stale */
		if (t->nheap == 0 || t->heap[0].count < 2) {
			t->st.stop = BPE_STOP_NO_PAIR;
			break;
		}
		p = t->heap[0].pair;
		l = t->pair[p].key >> 16;
		r = t->pair[p].key & 0xffff;
		if (total + len[l] + len[r] > BPE_MAX_TOKEN_BYTES) {
			t->st.stop = BPE_STOP_TOKEN_BYTES;
			break;
		}
		if (merge_pair(t, p, 256 + nm, &merged)) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		if (t->pair[p].count != 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "internal error: merge %d left a count of %lld",
				     nm, (long long)t->pair[p].count);
			goto out;
		}
		heap_pop(t);
		if (push_dirty(t)) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			goto out;
		}
		m[nm] = (struct bpe_merge){(uint16_t)l, (uint16_t)r};
		len[256 + nm] = len[l] + len[r];
		total += len[256 + nm];
		nm++;
	}
	if (progress)
		progress(ctx, nm, wanted);
	t->st.vocab = 256 + nm;
	t->st.tokens = t->st.bytes - merged;
	if ((rc = bpe_from_merges(t->pretok, m, (size_t)nm, out, err)))
		goto out;
	if (stats)
		*stats = t->st;
out:
	free(m);
	free(len);
	return rc;
}
