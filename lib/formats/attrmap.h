/*
 * attrmap.h - a checkpoint's attributes as one map of typed texts,
 * whatever the file format.
 *
 * Keys follow scalewatch-format(5): "scalewatch.step" for an attribute of
 * the root, "scalewatch.optim.lr_max" for one of /optim (any group),
 * "scalewatch.params.NAME.lr" for one of the tensor /params/NAME. A
 * safetensors file's "__metadata__" is such a map as it stands; ckpt.c
 * builds the same map from an HDF5 checkpoint's attributes, so sw-convert
 * carries them across and every reader of /optim reads it in one way.
 *
 * A value is text that keeps its type (attrmap_encode): an integer is its
 * decimal digits ("1200"); a real is %.17g, with ".0" added when that
 * looks like an integer ("10000.0", "0.001", "nan", "inf"); a string is
 * itself, unless it would read as a number or starts with a quote, then it
 * gets one leading "'" ("'1").
 *
 * Lookups and insertions are O(1) on average (a hash index beside the
 * entries, which stay in insertion order), so a header of a million keys
 * parses in linear time.
 */
#ifndef SW_ATTRMAP_H
#define SW_ATTRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

#define ATTRMAP_PREFIX "scalewatch."

struct attr_kv {
	char *key, *value;
};

struct attr_map {
	struct attr_kv *kv;     /* (n) in insertion order */
	size_t n, cap;
	size_t *slot;           /* (nslots) open-addressing index: kv position + 1, 0 empty */
	size_t nslots;
};

void attrmap_init(struct attr_map *m);
void attrmap_free(struct attr_map *m);
/* Set key to value (copies; replaces an earlier value of key). */
int attrmap_set(struct attr_map *m, const char *key, const char *value, struct sw_err *err);
/* The value of key, or NULL. */
const char *attrmap_get(const struct attr_map *m, const char *key);

enum attr_type { ATTR_STR, ATTR_INT, ATTR_REAL };
struct attr_value {
	enum attr_type type;
	int64_t i;
	double d;
	const char *s;          /* ATTR_STR: points into the decoded text */
};
/* 0, or -1 if buf (len bytes) is too small. */
int attrmap_encode(const struct attr_value *v, char *buf, size_t len);
void attrmap_decode(const char *text, struct attr_value *v);

/*
 * The key of attribute attr of object obj ("/", "/optim", "/params/NAME"):
 * 0, or -1 if buf is too small. attrmap_parse_key is its inverse: -1 if key
 * is no such key.
 */
int attrmap_key(const char *obj, const char *attr, char *buf, size_t len);
int attrmap_parse_key(const char *key, char *obj, size_t olen, char *attr, size_t alen);

/*
 * A number of the map: key = attrmap_key(obj, attr). *present says
 * whether it is there (v unchanged when not; present NULL: it must be,
 * else SW_EDATA); SW_EDATA when it is there but not a number (integer:
 * not an integer). attrmap_integer gives an integer exactly (64 bits).
 */
int attrmap_number(const struct attr_map *m, const char *obj, const char *attr, int integer,
		   double *v, int *present, struct sw_err *err);
int attrmap_integer(const struct attr_map *m, const char *obj, const char *attr,
		    int64_t *v, int *present, struct sw_err *err);
/*
 * A tensor's lr or wd, whatever the file it came from: finite and
 * nonnegative (sw-spectrum divides by sqrt(lr/wd)); SW_EDATA naming obj
 * and attr otherwise. The one check of both readers (h5read.c, stread.c).
 */
int attrmap_check_rate(const char *obj, const char *attr, double v, struct sw_err *err);
/* A string of at most len - 1 bytes into buf. */
int attrmap_string(const struct attr_map *m, const char *obj, const char *attr, char *buf,
		   size_t len, int *present, struct sw_err *err);

#endif
