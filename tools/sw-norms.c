/*
 * sw-norms - operator norms of every weight matrix of checkpoints: the
 * output layer's RMS->inf norm above all (the optimal-norm paper), the
 * hidden layers' RMS->RMS, the input layer's 1->RMS, and the spectral,
 * Frobenius, RMS and max norms. Computed in lib/norms.c (norms_summarize,
 * norms_of_operator); this reads the files and prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/ckpt.h"
#include "../lib/norms.h"
#include "common.h"

static const char usage[] =
	"sw-norms [--json] [--block LIST] [--layer LIST] [--name GLOB] [--role LIST]\n"
	"                [FILE ...]";
static const char help[] =
	"Operator norms of every weight matrix, one row per matrix per file:\n"
	"file step tokens name block role layer rows cols rms_to_inf rms_to_rms\n"
	"one_to_rms spectral frobenius rms max_abs. rows and cols are the operator's\n"
	"d_out and d_in (the embedding acts as its transpose). The output head gets\n"
	"a second row, role lm_head_folded, for W_out.diag(final norm gain); a tied\n"
	"head is listed as lm_head.weight computed from the embedding.\n"
	"\n"
	TOOL_SELECT_HELP
	"See sw-norms(1).\n";

static const char *const cols[] = {
	"file", "step", "tokens", "name", "block", "role", "layer", "rows", "cols",
	"rms_to_inf", "rms_to_rms", "one_to_rms", "spectral", "frobenius", "rms", "max_abs"
};

struct run {
	struct tool *tl;
	struct table *tb;
	const char *file;
	struct ckpt *ck;
};

static void print_row(struct run *r, const char *name, enum sw_block block,
		      const char *role, int layer, const struct op_norms *n)
{
	const struct ckpt_meta *m = ckpt_meta(r->ck);

	table_str(r->tb, r->file);
	if (m->has_step) {
		table_int(r->tb, m->step);
		table_int(r->tb, m->tokens);
	} else {
		table_empty(r->tb);
		table_empty(r->tb);
	}
	table_str(r->tb, name);
	table_str(r->tb, sw_block_name(block));
	table_str(r->tb, role);
	table_int(r->tb, layer);
	table_int(r->tb, n->d_out);
	table_int(r->tb, n->d_in);
	table_num(r->tb, n->rms_to_inf);
	table_num(r->tb, n->rms_to_rms);
	table_num(r->tb, n->one_to_rms);
	table_num(r->tb, n->spectral);
	table_num(r->tb, n->frobenius);
	table_num(r->tb, n->rms);
	table_num(r->tb, n->max_abs);
	table_end_row(r->tb);
}

/* Load tensor i and summarize it (its columns scaled by gamma if given). */
static int summarize(struct run *r, size_t i, const float *gamma,
		     struct mat_summary *s, struct sw_err *err)
{
	const struct sw_tensor_info *t = ckpt_info(r->ck, i);
	struct ckpt_view v;
	int rc;

	if ((rc = ckpt_load(r->ck, i, &v, err)))
		return rc;
	rc = norms_summarize(v.data, t->shape[0], t->shape[1], gamma, s, err);
	ckpt_release(r->ck, &v);
	if (rc && !strstr(err->msg, t->name))
		sw_err_prefix(err, "%s", t->name);
	return rc;
}

/*
 * The head with the final RMSNorm gain folded in: W_out.diag(gamma), the
 * operator that maps the normalized residual to the logits.
 */
static void folded_head_row(struct run *r, size_t head, const struct sw_tensor_info *h)
{
	long g = ckpt_find_role(r->ck, "final_norm", -1);
	struct ckpt_view gv;
	struct mat_summary s;
	struct op_norms n;
	struct sw_err err;
	int rc;

	if (g < 0 || !(select_match(&r->tl->sel, h->name, h->block, "lm_head_folded", -1) ||
		       select_match(&r->tl->sel, h->name, h->block, "lm_head", -1)))
		return;
	if (ckpt_info(r->ck, (size_t)g)->numel != h->shape[1]) {
		sw_fail(&err, SW_EDATA, "final norm gain has %lld entries, the head %lld columns",
			(long long)ckpt_info(r->ck, (size_t)g)->numel, (long long)h->shape[1]);
		tool_error(r->tl, r->file, &err);
		return;
	}
	if ((rc = ckpt_load(r->ck, (size_t)g, &gv, &err))) {
		tool_error(r->tl, r->file, &err);
		return;
	}
	rc = summarize(r, head, gv.data, &s, &err);
	ckpt_release(r->ck, &gv);
	if (rc) {
		tool_error(r->tl, r->file, &err);
		return;
	}
	norms_of_operator(&s, 0, &n);
	print_row(r, h->name, h->block, "lm_head_folded", -1, &n);
}

static void norms_file(struct run *r)
{
	const struct ckpt_meta *m = ckpt_meta(r->ck);
	size_t count = ckpt_count(r->ck);
	long embed = ckpt_find_role(r->ck, "embed", -1);
	struct sw_tensor_info tied;
	struct mat_summary embed_s;
	int want_tied = 0, have_embed_s = 0;

	if (m->head_tied && embed >= 0) {
		tied = *ckpt_info(r->ck, (size_t)embed);
		arch_info_for_role(&m->config, "lm_head", -1, &tied);
		want_tied = select_match_info(&r->tl->sel, &tied) ||
			    select_match(&r->tl->sel, tied.name, tied.block, "lm_head_folded", -1);
	}
	for (size_t i = 0; i < count && !tool_stdout_broken(r->tl); i++) {
		const struct sw_tensor_info *t = ckpt_info(r->ck, i);
		int is_embed = (long)i == embed, is_head = !strcmp(t->role, "lm_head");
		struct mat_summary s;
		struct op_norms n;
		struct sw_err err;

		if (t->kind != SW_KIND_MATRIX || !select_match_info(&r->tl->sel, t))
			continue;
		tool_progress(r->tl, "%s [%zu/%zu] %s", r->file, i + 1, count, t->name);
		if (summarize(r, i, NULL, &s, &err)) {
			tool_error(r->tl, r->file, &err);
			continue;
		}
		if (is_embed) {
			embed_s = s;
			have_embed_s = 1;
		}
		norms_of_operator(&s, is_embed, &n);
		print_row(r, t->name, t->block, t->role, t->layer, &n);
		if (is_head)
			folded_head_row(r, i, t);
	}
	if (want_tied && !tool_stdout_broken(r->tl)) {
		/* the tied head: the embedding as the map d_model -> vocab */
		struct mat_summary s;
		struct op_norms n;
		struct sw_err err;

		tool_progress(r->tl, "%s: tied lm_head", r->file);
		if (select_match_info(&r->tl->sel, &tied)) {
			if (have_embed_s) {
				s = embed_s;    /* one tensor, two operators */
			} else if (summarize(r, (size_t)embed, NULL, &s, &err)) {
				tool_error(r->tl, r->file, &err);
				return;
			}
			norms_of_operator(&s, 0, &n);
			print_row(r, tied.name, tied.block, tied.role, -1, &n);
		}
		folded_head_row(r, (size_t)embed, &tied);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		{NULL, 0, NULL, 0}
	};
	struct tool tl;
	struct table tb;
	const char *file;
	int opt;

	tool_runtime(argv);
	tool_init(&tl, "sw-norms", usage, help, argc, argv);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1)
		tool_common_option(&tl, opt, optarg);
	tool_files_begin(&tl, optind);
	table_init(&tb, stdout, tl.fmt, cols, (int)(sizeof cols / sizeof cols[0]));
	table_header(&tb);
	while ((file = tool_next_file(&tl)) && !tool_stdout_broken(&tl)) {
		struct run r = {&tl, &tb, file, NULL};
		struct sw_err err;

		if (ckpt_open(file, &r.ck, &err)) {
			tool_error(&tl, file, &err);
			continue;
		}
		norms_file(&r);
		ckpt_close(r.ck);
	}
	return tool_finish(&tl);
}
