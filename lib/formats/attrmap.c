/* attrmap.c - a checkpoint's attributes as typed texts (see attrmap.h). */
#include "attrmap.h"
#include "../base/grow.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void attrmap_init(struct attr_map *m)
{
	memset(m, 0, sizeof *m);
}

void attrmap_free(struct attr_map *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->kv[i].key);
		free(m->kv[i].value);
	}
	free(m->kv);
	free(m->slot);
	attrmap_init(m);
}

/* FNV-1a: keys are short texts */
static size_t hash_key(const char *key)
{
	uint64_t h = 1469598103934665603ULL;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (size_t)h;
}

/* The slot that holds key, or the empty slot where it would go. */
static size_t find_slot(const struct attr_map *m, const char *key)
{
	size_t mask = m->nslots - 1, s = hash_key(key) & mask;

	while (m->slot[s] && strcmp(m->kv[m->slot[s] - 1].key, key))
		s = (s + 1) & mask;
	return s;
}

/* Keep the index at most half full: grow it and rehash. */
static int grow_index(struct attr_map *m)
{
	size_t nslots = m->nslots ? 2 * m->nslots : 64, *old = m->slot;

	m->slot = calloc(nslots, sizeof *m->slot);
	if (!m->slot) {
		m->slot = old;
		return -1;
	}
	free(old);
	m->nslots = nslots;
	for (size_t i = 0; i < m->n; i++)
		m->slot[find_slot(m, m->kv[i].key)] = i + 1;
	return 0;
}

const char *attrmap_get(const struct attr_map *m, const char *key)
{
	size_t s;

	if (!m->nslots)
		return NULL;
	s = find_slot(m, key);
	return m->slot[s] ? m->kv[m->slot[s] - 1].value : NULL;
}

int attrmap_set(struct attr_map *m, const char *key, const char *value, struct sw_err *err)
{
	char *v, *k;
	size_t s;

	if ((2 * (m->n + 1) > m->nslots) && grow_index(m) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	s = find_slot(m, key);
	if (!(v = strdup(value)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	if (m->slot[s]) {
		free(m->kv[m->slot[s] - 1].value);
		m->kv[m->slot[s] - 1].value = v;
		return SW_OK;
	}
	if (SW_GROW(m->kv, &m->cap, m->n + 1) < 0 || !(k = strdup(key))) {
		free(v);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	m->kv[m->n].key = k;
	m->kv[m->n].value = v;
	m->slot[s] = ++m->n;
	return SW_OK;
}

/* text is a whole decimal integer that fits int64 */
static int parse_int_text(const char *text, int64_t *v)
{
	char *end;
	long long x;

	if (!(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
		return -1;
	errno = 0;
	x = strtoll(text, &end, 10);
	if (errno || *end || end == text || (text[0] == '-' && !text[1]))
		return -1;
	*v = x;
	return 0;
}

/* text is a whole real number (strtod's syntax, no leading space) */
static int parse_real_text(const char *text, double *v)
{
	char *end;

	if (!text[0] || text[0] == ' ' || (text[0] >= '\t' && text[0] <= '\r'))
		return -1;
	*v = strtod(text, &end);
	return *end ? -1 : 0;
}

void attrmap_decode(const char *text, struct attr_value *v)
{
	memset(v, 0, sizeof *v);
	if (text[0] == '\'') {
		v->type = ATTR_STR;
		v->s = text + 1;
	} else if (parse_int_text(text, &v->i) == 0) {
		v->type = ATTR_INT;
	} else if (parse_real_text(text, &v->d) == 0) {
		v->type = ATTR_REAL;
	} else {
		v->type = ATTR_STR;
		v->s = text;
	}
}
int attrmap_encode(const struct attr_value *v, char *buf, size_t len)
{
	int n;

	if (v->type == ATTR_INT) {
		n = snprintf(buf, len, "%lld", (long long)v->i);
	} else if (v->type == ATTR_REAL) {
		/* 17 significant digits round-trip every double */
		if (isnan(v->d))
			n = snprintf(buf, len, "nan");
		else if (isinf(v->d))
			n = snprintf(buf, len, v->d > 0 ? "inf" : "-inf");
		else
			n = snprintf(buf, len, "%.17g", v->d);
		if (n > 0 && (size_t)n < len && strspn(buf, "-0123456789") == (size_t)n)
			n = snprintf(buf + n, len - (size_t)n, ".0") + n;
	} else {
		struct attr_value back;
		attrmap_decode(v->s, &back);
		n = snprintf(buf, len, "%s%s", back.type == ATTR_STR && back.s == v->s ? "" : "'", v->s);
	}
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int attrmap_key(const char *obj, const char *attr, char *buf, size_t len)
{
	int n;

	if (!strcmp(obj, "/"))
		n = snprintf(buf, len, ATTRMAP_PREFIX "%s", attr);
	else if (!strncmp(obj, "/params/", 8))
		n = snprintf(buf, len, ATTRMAP_PREFIX "params.%s.%s", obj + 8, attr);
	else
		n = snprintf(buf, len, ATTRMAP_PREFIX "%s.%s", obj[0] == '/' ? obj + 1 : obj, attr);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int attrmap_parse_key(const char *key, char *obj, size_t olen, char *attr,
			   size_t alen)
{
	const char *rest, *dot, *last;
	int n;

	if (strncmp(key, ATTRMAP_PREFIX, strlen(ATTRMAP_PREFIX)))
		return -1;
	rest = key + strlen(ATTRMAP_PREFIX);
	dot = strchr(rest, '.');
	if (!dot) {                     /* a root attribute */
		n = snprintf(obj, olen, "/");
		last = rest - 1;
	} else if (!strncmp(rest, "params.", 7)) {
		last = strrchr(rest, '.');
		if (last <= rest + 7)   /* no tensor name */
			return -1;
		n = snprintf(obj, olen, "/params/%.*s", (int)(last - rest - 7), rest + 7);
	} else {
		if (strchr(dot + 1, '.') || dot == rest)
			return -1;
		last = dot;
		n = snprintf(obj, olen, "/%.*s", (int)(dot - rest), rest);
	}
	if (n < 0 || (size_t)n >= olen || !last[1] || strlen(last + 1) >= alen)
		return -1;
	strcpy(attr, last + 1);
	return 0;
}

/* What a getter wants: a number, an integer, a string. */
enum want { WANT_NUMBER, WANT_INTEGER, WANT_STRING };

/* The decoded value of attribute attr of obj; *found 0 when absent. */
static int lookup(const struct attr_map *m, const char *obj, const char *attr, enum want want,
		  struct attr_value *x, int *found, int *present, struct sw_err *err)
{
	static const char *const what[] = {"a number", "an integer", "a string"};
	char key[512];
	const char *text;

	if (attrmap_key(obj, attr, key, sizeof key) < 0)
		return sw_fail(err, SW_ESOFTWARE, "%s: attribute name too long", obj);
	text = attrmap_get(m, key);
	*found = text != NULL;
	if (present)
		*present = *found;
	if (!text)
		return present ? SW_OK : sw_fail(err, SW_EDATA, "missing %s", key);
	attrmap_decode(text, x);
	if (want == WANT_STRING ? x->type != ATTR_STR :
	    want == WANT_INTEGER ? x->type != ATTR_INT : x->type == ATTR_STR)
		return sw_fail(err, SW_EDATA, "%s = '%.40s' is not %s", key, text, what[want]);
	return SW_OK;
}

int attrmap_number(const struct attr_map *m, const char *obj, const char *attr, int integer,
		   double *v, int *present, struct sw_err *err)
{
	struct attr_value x;
	int rc, found;

	if ((rc = lookup(m, obj, attr, integer ? WANT_INTEGER : WANT_NUMBER, &x, &found, present,
			 err)) || !found)
		return rc;
	*v = x.type == ATTR_INT ? (double)x.i : x.d;
	return SW_OK;
}

int attrmap_integer(const struct attr_map *m, const char *obj, const char *attr,
		    int64_t *v, int *present, struct sw_err *err)
{
	struct attr_value x;
	int rc, found;

	if ((rc = lookup(m, obj, attr, WANT_INTEGER, &x, &found, present, err)) || !found)
		return rc;
	*v = x.i;
	return SW_OK;
}

int attrmap_check_rate(const char *obj, const char *attr, double v, struct sw_err *err)
{
	if (!(isfinite(v) && v >= 0))
		return sw_fail(err, SW_EDATA, "%s: %s = %g is not a finite nonnegative number",
			       obj, attr, v);
	return SW_OK;
}

int attrmap_string(const struct attr_map *m, const char *obj, const char *attr, char *buf,
		   size_t len, int *present, struct sw_err *err)
{
	struct attr_value x;
	int rc, found;

	if ((rc = lookup(m, obj, attr, WANT_STRING, &x, &found, present, err)) || !found)
		return rc;
	if (strlen(x.s) >= len)
		return sw_fail(err, SW_EDATA, "%s of %s: '%.40s' is longer than %zu bytes", attr, obj,
			       x.s, len - 1);
	strcpy(buf, x.s);
	return SW_OK;
}
