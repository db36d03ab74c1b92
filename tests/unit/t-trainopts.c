/* Unit tests of lib/runs/trainopts.c: sw-train's one table of options,
 * its bounds at both ends, and the strict walk sw-sweep reads commands by. */
#include <stdio.h>
#include <string.h>

#include "../../lib/runs/trainopts.h"
#include "tap.h"

/* parse the words of line (split on blanks) into o; the status */
static int parse(struct trainopts *o, const char *line, struct sw_err *err)
{
	char buf[512], *args[32], *save = NULL;
	int n = 0;

	snprintf(buf, sizeof buf, "%s", line);
	for (char *w = strtok_r(buf, " ", &save); w && n < 32; w = strtok_r(NULL, " ", &save))
		args[n++] = w;
	trainopts_init(o);
	return trainopts_parse(o, args, n, err);
}

int main(void)
{
	struct trainopts o;
	struct sw_err err;
	int unique = 1, found = 1, bounds = 1;
	char arg[64];

	for (int i = 0; i < TRAINOPT_COUNT; i++) {
		found &= trainopts_table[i].name && trainopts_find(trainopts_table[i].name) == i;
		for (int j = 0; j < i; j++)
			unique &= strcmp(trainopts_table[i].name, trainopts_table[j].name) != 0;
	}
	ok(found && unique, "every option of the table found by its name, no name twice");
	ok(trainopts_find("ste") < 0 && trainopts_find("") < 0, "no option found by a prefix of its name");

	/* each number's bounds: both ends taken, one past either refused */
	for (int i = 0; i < TRAINOPT_COUNT; i++) {
		const struct trainopt *t = &trainopts_table[i];
		int integer = t->kind == TRAINOPT_INT || t->kind == TRAINOPT_INT64 || t->kind == TRAINOPT_UINT64;
		if (!integer && t->kind != TRAINOPT_DOUBLE)
			continue;
		long long lo = (long long)t->lo, hi = (long long)t->hi;
		char v[4][32];
		trainopts_init(&o);
		if (integer) {
			snprintf(v[0], 32, "%lld", lo);
			snprintf(v[1], 32, "%lld", hi);
			snprintf(v[2], 32, "%lld", lo - 1);
			snprintf(v[3], 32, "%lld", hi + 1);
		} else {
			snprintf(v[0], 32, "%.17g", t->lo);
			snprintf(v[1], 32, "%.17g", t->hi);
			snprintf(v[2], 32, "%.17g", t->lo - 1e-9);
			snprintf(v[3], 32, "%.17g", t->hi * 1.5);
		}
		for (int k = 0; k < 4; k++) {
			bounds &= trainopts_set(&o, i, v[k], &err) == (k < 2 ? SW_OK : SW_EUSAGE);
			snprintf(arg, sizeof arg, "%s", v[k]);
			if (!bounds)
				break;
		}
		if (!bounds) {
			diag("--%s at %s", t->name, arg);
			break;
		}
	}
	ok(bounds, "every number taken at both its bounds, refused one past either");

	ok(parse(&o, "--batch 1e1", &err) == SW_EUSAGE &&
	   !strcmp(err.msg, "--batch: '1e1' is not an integer in 1..65536"), "--batch 1e1 refused: %s", err.msg);
	ok(parse(&o, "--batch 4.0", &err) == SW_EUSAGE, "--batch 4.0 refused");
	ok(parse(&o, "--lr 1e-310", &err) == SW_EUSAGE &&
	   !strcmp(err.msg, "--lr: '1e-310' is not a number in 0..1000"), "--lr 1e-310 (below the normal range) refused");
	ok(parse(&o, "--lr 3e-3 --batch=16 --tie --blockwise-lr=emb=5 --trace= --data d", &err) == SW_OK &&
	   o.tc.optim.lr == 3e-3 && o.tc.batch == 16 && o.tc.model.tie_embeddings && o.tc.optim.blockwise &&
	   o.tc.optim.block_ratio[SW_BLOCK_EMB] == 5 && o.tc.trace_path && !o.tc.trace_path[0] &&
	   !strcmp(o.tc.data_path, "d") && o.given[TRAINOPT_LR] == 1 && !o.given[TRAINOPT_OUT],
	   "--name VALUE, --name=VALUE, a switch, an optional value, an empty one");
	ok(parse(&o, "--lr 1e-3 --lr 2e-3", &err) == SW_OK && o.tc.optim.lr == 2e-3 && o.given[TRAINOPT_LR] == 2 &&
	   !strcmp(o.value[TRAINOPT_LR], "2e-3"), "an option twice: the last value, as getopt gives it");
	ok(parse(&o, "--blockwise-lr emb=5", &err) == SW_EUSAGE && o.tc.optim.blockwise,
	   "an optional value only after '=' (the next word an operand, refused)");
	ok(parse(&o, "--ste 5", &err) == SW_EUSAGE && parse(&o, "--bogus", &err) == SW_EUSAGE &&
	   parse(&o, "-x", &err) == SW_EUSAGE && parse(&o, "--", &err) == SW_EUSAGE &&
	   parse(&o, "operand", &err) == SW_EUSAGE, "an abbreviation, an unknown option, an operand: refused");
	ok(parse(&o, "--tie=1", &err) == SW_EUSAGE && parse(&o, "--steps", &err) == SW_EUSAGE,
	   "a value for a switch, a missing value: refused");
	ok(parse(&o, "--optimizer sgd", &err) == SW_EUSAGE && parse(&o, "--wd-mode none", &err) == SW_EUSAGE &&
	   parse(&o, "--group-lr 1:2", &err) == SW_EUSAGE, "words and lists checked by their own parsers");

	ok(parse(&o, "--data d --out o", &err) == SW_OK && trainopts_finish(&o, &err) == SW_OK &&
	   o.tc.model.head_dim == 32 && o.tc.model.n_kv_heads == 4 && o.tc.model.d_ff > 0,
	   "finish: the model's derived sizes at sw-train's defaults");
	ok(parse(&o, "--data d", &err) == SW_OK && trainopts_finish(&o, &err) == SW_EUSAGE,
	   "finish: --out required");
	ok(parse(&o, "--data d --out o --d-model 30", &err) == SW_OK && trainopts_finish(&o, &err) == SW_EUSAGE &&
	   !strcmp(err.msg, "--d-model 30 is not a multiple of --n-heads 4 (or give --head-dim)"),
	   "finish: a width the heads do not divide");
	ok(parse(&o, "--data d --out o --wd-scaling sqrt", &err) == SW_OK && trainopts_finish(&o, &err) == SW_EUSAGE,
	   "finish: options that need each other");
	return tap_done();
}
