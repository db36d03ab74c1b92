/* jsonstrict.c - JSON as the reference readers read it (see jsonstrict.h). */
#include "jsonstrict.h"

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

struct scan {
	const unsigned char *start, *p, *end;
	const char *why;        /* the first fault, NULL if none */
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

static int string(struct scan *s)
{
	s->p++;                 /* the opening quote */
	while (s->p < s->end) {
		unsigned char c = *s->p;
		unsigned u, lo;
		int n;

		if (c == '"') {
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return fault(s, "a control byte inside a string");
		if (c != '\\') {
			if (!(n = jsonstrict_utf8_len(s->p, (size_t)(s->end - s->p))))
				return fault(s, "invalid UTF-8");
			s->p += n;
			continue;
		}
		if (++s->p == s->end)
			break;
		c = *s->p++;
		if (strchr("\"\\/bfnrt", c) && c)
			continue;
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
		}
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

static int value(struct scan *s, int depth);

/* '{' or '[' already seen: the members up to the closing bracket */
static int container(struct scan *s, int depth)
{
	unsigned char close = *s->p == '{' ? '}' : ']';

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
			if (string(s) < 0)
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
			return 0;
		}
		if (*s->p != ',')
			return fault(s, "a missing ',' between members");
		s->p++;
	}
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
		return string(s);
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

/* ---- keys unique in every object ------------------------------------ */

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* keys: a buffer reused from object to object, grown as needed */
struct keybuf {
	const char **k;
	size_t cap;
};

static int unique_keys(const cJSON *j, struct keybuf *kb, const char *what, struct sw_err *err)
{
	const cJSON *c;
	size_t n = 0;
	int rc;

	if (!cJSON_IsObject(j) && !cJSON_IsArray(j))
		return SW_OK;
	if (cJSON_IsObject(j) && j->child && j->child->next) {   /* two keys or more */
		for (c = j->child; c; c = c->next)
			n++;
		if (n > kb->cap) {
			const char **k = realloc(kb->k, n * sizeof *k);
			if (!k)
				return sw_fail(err, SW_ESOFTWARE, "out of memory");
			kb->k = k;
			kb->cap = n;
		}
		n = 0;
		for (c = j->child; c; c = c->next)
			kb->k[n++] = c->string;
		qsort(kb->k, n, sizeof *kb->k, cmp_key);
		for (size_t i = 1; i < n; i++)
			if (!strcmp(kb->k[i - 1], kb->k[i]))
				return sw_fail(err, SW_EDATA, "%s: key '%.100s' appears twice", what,
					       kb->k[i]);
	}
	for (c = j->child; c; c = c->next)
		if ((rc = unique_keys(c, kb, what, err)))
			return rc;
	return SW_OK;
}

int jsonstrict_parse(const char *buf, size_t len, const char *what, cJSON **out,
		     struct sw_err *err)
{
	struct scan s = {(const unsigned char *)buf, (const unsigned char *)buf,
			 (const unsigned char *)buf + len, NULL};
	struct keybuf kb = {NULL, 0};
	cJSON *root;
	int rc;

	*out = NULL;
	if (value(&s, 0) == 0) {
		skip_ws(&s);
		if (s.p != s.end)
			fault(&s, "bytes after the JSON value");
	}
	if (s.why)
		return sw_fail(err, SW_EDATA, "%s is not valid JSON (byte %zu: %s)", what,
			       (size_t)(s.p - s.start), s.why);
	root = cJSON_ParseWithLength(buf, len);
	if (!root)      /* valid JSON that cJSON cannot hold: out of memory */
		return sw_fail(err, SW_ESOFTWARE, "%s: out of memory parsing JSON", what);
	rc = unique_keys(root, &kb, what, err);
	free(kb.k);
	if (rc) {
		cJSON_Delete(root);
		return rc;
	}
	*out = root;
	return SW_OK;
}
