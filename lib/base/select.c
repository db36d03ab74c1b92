/* select.c - the shared tensor selection options (see select.h). */
#include "select.h"
#include "arch.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void select_init(struct sw_select *s)
{
	memset(s, 0, sizeof *s);
}

void select_tool_roles(struct sw_select *s, const char *const *roles)
{
	s->tool_roles = roles;
}

/* Keep "--opt arg" in the description, "..." at its end when full. */
static void describe(struct sw_select *s, const char *opt, const char *arg)
{
	size_t n = strlen(s->desc), room = sizeof s->desc - n;
	int w = snprintf(s->desc + n, room, "%s%s %s", n ? " " : "", opt, arg);

	if (w < 0 || (size_t)w >= room)
		strcpy(s->desc + sizeof s->desc - 4, "...");
}

/* Call fn on each comma-separated item of arg. */
static int each_item(struct sw_select *s, const char *arg, const char *what,
		     int (*fn)(struct sw_select *, const char *, struct sw_err *),
		     struct sw_err *err)
{
	char item[SW_NAME_MAX];
	const char *p = arg;

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int rc;

		if (len == 0 || len >= sizeof item)
			return sw_fail(err, SW_EUSAGE, "bad %s list '%s'", what, arg);
		memcpy(item, p, len);
		item[len] = '\0';
		if ((rc = fn(s, item, err)))
			return rc;
		if (!comma)
			return SW_OK;
		p = comma + 1;
	}
}

static int add_block(struct sw_select *s, const char *item, struct sw_err *err)
{
	enum sw_block b;

	if (sw_block_parse(item, &b) < 0)
		return sw_fail(err, SW_EUSAGE,
			       "unknown block '%s' (emb, qk, vo, ffn, norm, out, mult, other)", item);
	s->blocks |= 1u << b;
	return SW_OK;
}

/* A role --role takes: one of the architecture's table, other, or the
 * tool's own. A typo would otherwise select nothing, silently. */
static int role_known(const struct sw_select *s, const char *role)
{
	if (arch_role_find(role) || !strcmp(role, ARCH_ROLE_OTHER))
		return 1;
	for (const char *const *r = s->tool_roles; r && *r; r++)
		if (!strcmp(*r, role))
			return 1;
	return 0;
}

/* "embed, embed_mult, ..., other" and the tool's own roles; the
 * reparameterized gains' directions and magnitudes (one pair per gain,
 * arch.h) said once at the end, so that the line stays readable */
static void role_list(const struct sw_select *s, char *buf, size_t len)
{
	const struct arch_role *r;
	char gain[SW_ROLE_MAX];
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; (r = arch_role_at(i)) && n < len; i++)
		if (!arch_reparam_base(r->name, gain, sizeof gain))
			n += (size_t)snprintf(buf + n, len - n, "%s, ", r->name);
	for (const char *const *t = s->tool_roles; t && *t && n < len; t++)
		n += (size_t)snprintf(buf + n, len - n, "%s, ", *t);
	if (n < len)
		snprintf(buf + n, len - n, "%s, and G_dir, G_mag of each gain G", ARCH_ROLE_OTHER);
}

static int add_role(struct sw_select *s, const char *item, struct sw_err *err)
{
	if (!role_known(s, item)) {
		char valid[960];
		role_list(s, valid, sizeof valid);
		return sw_fail(err, SW_EUSAGE, "unknown role '%.40s' (%s)", item, valid);
	}
	if (s->nroles == SELECT_MAX || strlen(item) >= SW_ROLE_MAX)
		return sw_fail(err, SW_EUSAGE, "too many roles, or role '%s' too long", item);
	strcpy(s->roles[s->nroles++], item);
	return SW_OK;
}

/* A layer number: -1 or 0..999999, digits only. */
static int parse_layer_num(const char *p, const char *end, int *v)
{
	long x = 0;
	int neg = 0;

	if (p < end && *p == '-') {
		neg = 1;
		p++;
	}
	if (p == end)
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || x > 999999)
			return -1;
		x = x * 10 + (*p - '0');
	}
	if (neg && x != 1)
		return -1;
	*v = neg ? -1 : (int)x;
	return 0;
}

/* A number or range of --layer or --expert (what) into r. */
static int add_range(struct select_ranges *r, const char *item, const char *what,
		     struct sw_err *err)
{
	const char *end = item + strlen(item), *dash = strchr(item + 1, '-');
	int lo, hi;

	if (r->n == SELECT_MAX)
		return sw_fail(err, SW_EUSAGE, "too many %s ranges", what);
	if (dash && item[0] != '-') {
		if (parse_layer_num(item, dash, &lo) < 0 || parse_layer_num(dash + 1, end, &hi) < 0 ||
		    lo < 0 || hi < lo)
			return sw_fail(err, SW_EUSAGE, "bad %s range '%s'", what, item);
	} else {
		if (parse_layer_num(item, end, &lo) < 0)
			return sw_fail(err, SW_EUSAGE, "bad %s '%s' (a number, a range A-B, or -1)",
				       what, item);
		hi = lo;
	}
	r->lo[r->n] = lo;
	r->hi[r->n++] = hi;
	return SW_OK;
}

static int add_layer(struct sw_select *s, const char *item, struct sw_err *err)
{
	return add_range(&s->layers, item, "layer", err);
}

static int add_expert(struct sw_select *s, const char *item, struct sw_err *err)
{
	return add_range(&s->experts, item, "expert", err);
}

/* v in one of r's ranges, or r empty */
static int in_ranges(const struct select_ranges *r, int v)
{
	for (int i = 0; i < r->n; i++)
		if (v >= r->lo[i] && v <= r->hi[i])
			return 1;
	return r->n == 0;
}

/* One option's values, described when all were good. */
static int add_option(struct sw_select *s, const char *opt, const char *arg, const char *what,
		      int (*fn)(struct sw_select *, const char *, struct sw_err *),
		      struct sw_err *err)
{
	int rc = each_item(s, arg, what, fn, err);

	if (!rc)
		describe(s, opt, arg);
	return rc;
}

int select_add_blocks(struct sw_select *s, const char *arg, struct sw_err *err)
{
	return add_option(s, "--block", arg, "block", add_block, err);
}

int select_add_roles(struct sw_select *s, const char *arg, struct sw_err *err)
{
	return add_option(s, "--role", arg, "role", add_role, err);
}

int select_add_layers(struct sw_select *s, const char *arg, struct sw_err *err)
{
	return add_option(s, "--layer", arg, "layer", add_layer, err);
}

int select_add_experts(struct sw_select *s, const char *arg, struct sw_err *err)
{
	return add_option(s, "--expert", arg, "expert", add_expert, err);
}

int select_add_name(struct sw_select *s, const char *glob, struct sw_err *err)
{
	if (s->nglobs == SELECT_MAX || strlen(glob) >= SW_NAME_MAX || !glob[0])
		return sw_fail(err, SW_EUSAGE, "too many --name patterns, or pattern empty or too long");
	strcpy(s->globs[s->nglobs++], glob);
	describe(s, "--name", glob);
	return SW_OK;
}

int select_given(const struct sw_select *s)
{
	return s->blocks || s->nroles || s->layers.n || s->experts.n || s->nglobs;
}

const char *select_describe(const struct sw_select *s)
{
	return s->desc;
}

int select_match(const struct sw_select *s, const char *name,
		 enum sw_block block, const char *role, int layer, int expert)
{
	int ok;

	if (s->blocks && !(s->blocks & (1u << block)))
		return 0;
	if (s->nroles) {
		ok = 0;
		for (int i = 0; i < s->nroles && !ok; i++)
			ok = !strcmp(s->roles[i], role);
		if (!ok)
			return 0;
	}
	if (!in_ranges(&s->layers, layer) || !in_ranges(&s->experts, expert))
		return 0;
	if (s->nglobs) {
		ok = 0;
		for (int i = 0; i < s->nglobs && !ok; i++)
			ok = fnmatch(s->globs[i], name, 0) == 0;
		if (!ok)
			return 0;
	}
	return 1;
}

int select_match_info(const struct sw_select *s, const struct sw_tensor_info *t)
{
	return select_match(s, t->name, t->block, t->role, t->layer, t->expert);
}
