/* Unit tests of lib/base/select.c and lib/base/table.c. */
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/select.h"
#include "../../lib/base/table.h"
#include "tap.h"

static char *render(enum table_format fmt)
{
	static const char *const cols[] = {"name", "n", "x", "shape", "empty"};
	static const int64_t shape[2] = {4096, 1024};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct table t;

	table_init(&t, f, fmt, cols, 5);
	table_str(&t, "a\tb\"c\n");
	table_int(&t, -1);
	table_num(&t, 0.1f);
	table_shape(&t, 2, shape);
	table_empty(&t);
	table_end_row(&t);
	table_str(&t, "z");
	table_int(&t, 7);
	table_num(&t, NAN);
	table_shape(&t, 0, shape);
	table_num(&t, 1e300);
	table_end_row(&t);
	fclose(f);
	return buf;
}

int main(void)
{
	struct sw_select s;
	struct sw_err err;
	char *out;

	select_init(&s);
	ok(select_match(&s, "x", SW_BLOCK_QK, "q", 3, -1), "empty selection matches everything");
	ok(select_add_blocks(&s, "qk,vo", &err) == 0, "--block qk,vo");
	ok(select_match(&s, "x", SW_BLOCK_VO, "v", 3, -1) && !select_match(&s, "x", SW_BLOCK_FFN, "up", 3, -1),
	   "blocks: vo in, ffn out");
	ok(select_add_layers(&s, "0,3-5", &err) == 0, "--layer 0,3-5");
	ok(select_match(&s, "x", SW_BLOCK_QK, "q", 4, -1) && !select_match(&s, "x", SW_BLOCK_QK, "q", 2, -1) &&
	   !select_match(&s, "x", SW_BLOCK_QK, "q", -1, -1), "layer ranges");
	ok(select_add_name(&s, "*.q_proj.*", &err) == 0, "--name glob");
	ok(select_match(&s, "model.layers.4.self_attn.q_proj.weight", SW_BLOCK_QK, "q", 4, -1) &&
	   !select_match(&s, "model.layers.4.self_attn.k_proj.weight", SW_BLOCK_QK, "k", 4, -1),
	   "every option must match");
	select_init(&s);
	ok(select_add_layers(&s, "-1", &err) == 0 && select_match(&s, "x", SW_BLOCK_EMB, "embed", -1, -1) &&
	   !select_match(&s, "x", SW_BLOCK_QK, "q", 0, -1), "--layer -1: outside the layers");
	ok(select_add_blocks(&s, "attention", &err) == SW_EUSAGE && strstr(err.msg, "attention"),
	   "unknown block is a usage error: %s", err.msg);
	ok(select_add_layers(&s, "5-3", &err) == SW_EUSAGE, "backwards range refused");
	ok(select_add_layers(&s, "1x", &err) == SW_EUSAGE, "junk layer refused");
	ok(select_add_roles(&s, "q,,k", &err) == SW_EUSAGE, "empty list item refused");
	ok(select_add_layers(&s, "-2", &err) == SW_EUSAGE, "layer -2 refused");
	select_init(&s);
	ok(select_add_experts(&s, "1,4-6", &err) == 0 && select_given(&s) &&
	   !strcmp(select_describe(&s), "--expert 1,4-6"), "--expert 1,4-6 kept as given");
	ok(select_match(&s, "x", SW_BLOCK_FFN, "expert_up", 0, 5) &&
	   select_match(&s, "x", SW_BLOCK_FFN, "expert_up", 0, 1) &&
	   !select_match(&s, "x", SW_BLOCK_FFN, "expert_up", 0, 3) &&
	   !select_match(&s, "x", SW_BLOCK_QK, "q", 0, -1), "expert ranges; a tensor of no expert out");
	select_init(&s);
	ok(select_add_experts(&s, "-1", &err) == 0 && select_match(&s, "x", SW_BLOCK_QK, "q", 0, -1) &&
	   !select_match(&s, "x", SW_BLOCK_FFN, "expert_up", 0, 0), "--expert -1: the tensors of no expert");
	ok(select_add_experts(&s, "2-1", &err) == SW_EUSAGE && strstr(err.msg, "bad expert range"),
	   "backwards expert range refused: %s", err.msg);
	ok(select_add_experts(&s, "x", &err) == SW_EUSAGE && strstr(err.msg, "bad expert 'x'"),
	   "junk expert refused: %s", err.msg);

	out = render(TABLE_TSV);
	if (!ok(!strcmp(out, "name\tn\tx\tshape\tempty\n"
			     "a\\tb\"c\\n\t-1\t0.100000001\t4096x1024\t\n"
			     "z\t7\t\t\t1e+300\n"), "TSV: header, escapes, %%.9g, empty cell, NaN empty"))
		diag("got: %s", out);
	free(out);
	out = render(TABLE_JSON);
	if (!ok(!strcmp(out, "{\"name\": \"a\\tb\\\"c\\n\", \"n\": -1, \"x\": 0.100000001, \"shape\": [4096, 1024], \"empty\": null}\n"
			     "{\"name\": \"z\", \"n\": 7, \"x\": null, \"shape\": [], \"empty\": 1e+300}\n"),
		"JSON Lines: same fields, NaN as null"))
		diag("got: %s", out);
	free(out);
	return tap_done();
}
