/* jsonstrict.c - JSON as the reference readers read it (see jsonstrict.h). */
#include "jsonstrict.h"
#include "grow.h"

#include <stdlib.h>
#include <string.h>

int jsonstrict_utf8_len(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xBF;
	int n;

	if (c < 0x80)
		return 1;
	if (c < 0xC2)                   /* a continuation byte, or an overlong 2-byte form */
		return 0;
	if (c < 0xE0) {
		n = 2;
	} else if (c < 0xF0) {
		n = 3;
		if (c == 0xE0)
			lo = 0xA0;      /* overlong */
		else if (c == 0xED)
			hi = 0x9F;      /* U+D800..DFFF, the surrogates */
	} else if (c < 0xF5) {
		n = 4;
		if (c == 0xF0)
			lo = 0x90;      /* overlong */
		else if (c == 0xF4)
			hi = 0x8F;      /* past U+10FFFF */
	} else {
		return 0;
	}
	if (avail < (size_t)n || s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return n;
}

/* ---- the RFC 8259 check, one pass ----------------------------------- */

/*
 * With keys on, the scan also decodes each object's keys into arena (grown
 * as needed: a decoded key never takes more than its quoted text, so the
 * room left must be the rest of the document's length at most) and, when
 * the object closes, checks them unique.
 * The keys of the objects still open lie on a stack (key), so the check is
 * one pass whatever the nesting.
 */
struct scan {
	const unsigned char *start, *p, *end;
	const char *why;        /* the first fault, NULL if none */
	int keys;               /* decode and check the keys */
	char *arena;
	size_t arena_len, arena_cap;
	size_t *key, nkey, key_cap;     /* arena offsets of the open objects' keys */
	size_t *slot, slot_cap;         /* a hash index, for an object's keys */
	const char *dup;                /* the key found twice */
	int oom;
};

static int fault(struct scan *s, const char *why)
{
	s->why = why;
	return -1;
}

static void skip_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int hex4(struct scan *s, unsigned *v)
{
	*v = 0;
	if (s->end - s->p < 4)
		return fault(s, "a cut \\u escape");
	for (int i = 0; i < 4; i++) {
		unsigned char c = *s->p++;
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') :
			     c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) :
			     c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
		if (d == 16)
			return fault(s, "a \\u escape that is not 4 hex digits");
		*v = *v << 4 | d;
	}
	return 0;
}

/* Code point u as UTF-8 at out; the bytes written. */
static size_t put_utf8(char *out, unsigned u)
{
	if (u < 0x80) {
		out[0] = (char)u;
		return 1;
	}
	if (u < 0x800) {
		out[0] = (char)(0xC0 | u >> 6);
		out[1] = (char)(0x80 | (u & 0x3F));
		return 2;
	}
	if (u < 0x10000) {
		out[0] = (char)(0xE0 | u >> 12);
		out[1] = (char)(0x80 | (u >> 6 & 0x3F));
		out[2] = (char)(0x80 | (u & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | u >> 18);
	out[1] = (char)(0x80 | (u >> 12 & 0x3F));
	out[2] = (char)(0x80 | (u >> 6 & 0x3F));
	out[3] = (char)(0x80 | (u & 0x3F));
	return 4;
}

/* The string at s->p (its opening quote), checked; decoded into out with
 * a NUL when out is not NULL (room: the quoted text's length). */
static int string(struct scan *s, char *out)
{
	size_t n_out = 0;

	s->p++;                 /* the opening quote */
	while (s->p < s->end) {
		unsigned char c = *s->p;
		unsigned u, lo;
		int n;

		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {   /* the common case */
			if (out)
				out[n_out] = (char)c;
			n_out++;
			s->p++;
			continue;
		}
		if (c == '"') {
			s->p++;
			if (out)
				out[n_out] = '\0';
			return 0;
		}
		if (c < 0x20)
			return fault(s, "a control byte inside a string");
		if (c != '\\') {
			if (!(n = jsonstrict_utf8_len(s->p, (size_t)(s->end - s->p))))
				return fault(s, "invalid UTF-8");
			if (out)
				memcpy(out + n_out, s->p, (size_t)n);
			n_out += (size_t)n;
			s->p += n;
			continue;
		}
		if (++s->p == s->end)
			break;
		c = *s->p++;
		if (strchr("\"\\/bfnrt", c) && c) {
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
			if (out)
				out[n_out] = to[strchr(from, c) - from];
			n_out++;
			continue;
		}
		if (c != 'u')
			return fault(s, "an unknown escape");
		if (hex4(s, &u) < 0)
			return -1;
		/* a NUL would end the C string early: the tools would read
		 * another name than the reference readers */
		if (u == 0)
			return fault(s, "an escaped NUL (\\u0000)");
		if (u >= 0xDC00 && u <= 0xDFFF)
			return fault(s, "an unpaired surrogate escape");
		if (u >= 0xD800 && u <= 0xDBFF) {
			if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
				return fault(s, "an unpaired surrogate escape");
			s->p += 2;
			if (hex4(s, &lo) < 0)
				return -1;
			if (lo < 0xDC00 || lo > 0xDFFF)
				return fault(s, "an unpaired surrogate escape");
			u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
		}
		if (out)
			n_out += put_utf8(out + n_out, u);
		else
			n_out += 4;
	}
	return fault(s, "an unterminated string");
}

static int digits(struct scan *s)
{
	const unsigned char *from = s->p;

	while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
		s->p++;
	return s->p > from ? 0 : fault(s, "a malformed number");
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number(struct scan *s)
{
	if (*s->p == '-')
		s->p++;
	if (s->p < s->end && *s->p == '0')
		s->p++;
	else if (digits(s) < 0)
		return -1;
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		if (digits(s) < 0)
			return -1;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (digits(s) < 0)
			return -1;
	}
	return 0;
}

static int literal(struct scan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n))
		return fault(s, "an unexpected byte");
	s->p += n;
	return 0;
}

/* ---- keys unique in every object ------------------------------------ */

static size_t hash_key(const char *k)
{
	size_t h = 1469598103934665603ULL;      /* FNV-1a */

	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 1099511628211ULL;
	return h;
}

/* The keys key[from..nkey) of one object: a few compared pairwise, more
 * through a hash index (linear on average, whatever their number). */
static int check_unique(struct scan *s, size_t from)
{
	size_t n = s->nkey - from, mask;

	if (n <= 8) {
		for (size_t i = from; i < s->nkey; i++)
			for (size_t j = from; j < i; j++)
				if (!strcmp(s->arena + s->key[i], s->arena + s->key[j])) {
					s->dup = s->arena + s->key[i];
					return -1;
				}
		return 0;
	}
	for (mask = 16; mask < 2 * n; mask *= 2)
		;
	if (SW_GROW(s->slot, &s->slot_cap, mask) < 0) {
		s->oom = 1;
		return -1;
	}
	memset(s->slot, 0, mask * sizeof *s->slot);
	mask--;
	for (size_t i = from; i < s->nkey; i++) {
		const char *k = s->arena + s->key[i];
		size_t h = hash_key(k) & mask;
		for (; s->slot[h]; h = (h + 1) & mask)
			if (!strcmp(s->arena + s->key[s->slot[h] - 1], k)) {
				s->dup = k;
				return -1;
			}
		s->slot[h] = i + 1;
	}
	return 0;
}

/* An object key at s->p: checked, and with keys on decoded and pushed. */
static int object_key(struct scan *s)
{
	const unsigned char *at = s->p;
	size_t need;

	if (!s->keys)
		return string(s, NULL);
	if (SW_GROW(s->key, &s->key_cap, s->nkey + 1) < 0) {
		s->oom = 1;
		return -1;
	}
	/* checked first, so that the arena grows by what the key needs */
	if (string(s, NULL) < 0)
		return -1;
	need = (size_t)(s->p - at);     /* the quoted text: room for the key and its NUL */
	if (SW_GROW(s->arena, &s->arena_cap, s->arena_len + need) < 0) {
		s->oom = 1;
		return -1;
	}
	s->p = at;
	s->key[s->nkey] = s->arena_len;
	if (string(s, s->arena + s->arena_len) < 0)
		return -1;
	s->arena_len += strlen(s->arena + s->arena_len) + 1;
	s->nkey++;
	return 0;
}

static int value(struct scan *s, int depth);

/* '{' or '[' already seen: the members up to the closing bracket */
static int container(struct scan *s, int depth)
{
	unsigned char close = *s->p == '{' ? '}' : ']';
	size_t key_from = s->nkey, arena_from = s->arena_len;

	if (depth >= JSONSTRICT_MAX_DEPTH)
		return fault(s, "nesting deeper than 512 levels");
	s->p++;
	skip_ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		return 0;
	}
	for (;;) {
		skip_ws(s);
		if (close == '}') {
			if (s->p == s->end || *s->p != '"')
				return fault(s, "an object key that is not a string");
			if (object_key(s) < 0)
				return -1;
			skip_ws(s);
			if (s->p == s->end || *s->p != ':')
				return fault(s, "a key without ':'");
			s->p++;
		}
		if (value(s, depth + 1) < 0)
			return -1;
		skip_ws(s);
		if (s->p == s->end)
			return fault(s, "a cut document");
		if (*s->p == close) {
			s->p++;
			break;
		}
		if (*s->p != ',')
			return fault(s, "a missing ',' between members");
		s->p++;
	}
	if (s->keys && close == '}') {
		if (check_unique(s, key_from) < 0)
			return -1;
		s->nkey = key_from;
		s->arena_len = arena_from;
	}
	return 0;
}

static int value(struct scan *s, int depth)
{
	skip_ws(s);
	if (s->p == s->end)
		return fault(s, "a cut document");
	switch (*s->p) {
	case '{': case '[':
		return container(s, depth);
	case '"':
		return string(s, NULL);
	case 't':
		return literal(s, "true");
	case 'f':
		return literal(s, "false");
	case 'n':
		return literal(s, "null");
	default:
		if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))
			return number(s);
		return fault(s, "an unexpected byte");
	}
}

int jsonstrict_check(const char *buf, size_t len, const char *what, struct sw_err *err)
{
	struct scan s = {0};
	int rc = SW_OK;

	s.start = s.p = (const unsigned char *)buf;
	s.end = s.start + len;
	s.keys = 1;
	if (value(&s, 0) == 0) {
		skip_ws(&s);
		if (s.p != s.end)
			fault(&s, "bytes after the JSON value");
	}
	if (s.oom)
		rc = sw_fail(err, SW_ESOFTWARE, "%s: out of memory", what);
	else if (s.dup)
		rc = sw_fail(err, SW_EDATA, "%s: key '%.100s' appears twice", what, s.dup);
	else if (s.why)
		rc = sw_fail(err, SW_EDATA, "%s is not valid JSON (byte %zu: %s)", what,
			     (size_t)(s.p - s.start), s.why);
	free(s.arena);
	free(s.key);
	free(s.slot);
	return rc;
}

int jsonstrict_parse(const char *buf, size_t len, const char *what, cJSON **out,
		     struct sw_err *err)
{
	cJSON *root;
	int rc;

	*out = NULL;
	if ((rc = jsonstrict_check(buf, len, what, err)))
		return rc;
	root = cJSON_ParseWithLength(buf, len);
	if (!root)      /* valid JSON that cJSON cannot hold: out of memory */
		return sw_fail(err, SW_ESOFTWARE, "%s: out of memory parsing JSON", what);
	*out = root;
	return SW_OK;
}

/* ---- a cursor over a checked document -------------------------------- */

static struct scan cursor(const char *p, const char *end)
{
	struct scan s = {0};

	s.start = s.p = (const unsigned char *)p;
	s.end = (const unsigned char *)end;
	return s;
}

const char *jsonstrict_ws(const char *p, const char *end)
{
	struct scan s = cursor(p, end);

	skip_ws(&s);
	return (const char *)s.p;
}

const char *jsonstrict_skip(const char *p, const char *end)
{
	struct scan s = cursor(p, end);

	value(&s, 0);
	return (const char *)s.p;
}

const char *jsonstrict_string(const char *p, const char *end, char *out)
{
	struct scan s = cursor(p, end);

	string(&s, out);
	return (const char *)s.p;
}
