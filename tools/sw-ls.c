/*
 * sw-ls - list a checkpoint's tensors with what the tools know of them:
 * block type, role, layer, kind, stored dtype and shape. "h5ls that knows
 * what a transformer is." The work is in lib/formats/ckpt.c; this prints.
 */
#include <stdlib.h>
#include <string.h>

#include "../lib/formats/ckpt.h"
#include "common.h"

static const char usage[] =
	"sw-ls [--json] [--summary] [--block LIST] [--expert LIST] [--layer LIST]\n"
	"             [--name GLOB] [--role LIST] [FILE ...]";
static const char help[] =
	"List the tensors of scalewatch HDF5, Hugging Face safetensors, PyTorch, GGUF\n"
	"and llama2.c checkpoints (FILE:KEY: the dict KEY inside a PyTorch file) in\n"
	"model order: file name block role layer kind dtype shape numel expert\n"
	"(expert: a mixture of experts' expert, -1 for every other tensor).\n"
	"\n"
	"  --summary      parameter counts per block type instead\n"
	TOOL_SELECT_HELP
	"See sw-ls(1).\n";

static const char *const list_cols[] = {
	"file", "name", "block", "role", "layer", "kind", "dtype", "shape", "numel", "expert"
};
static const char *const summary_cols[] = {
	"file", "block", "tensors", "params", "fraction"
};

static void list_row(struct table *tb, const char *file, const struct sw_tensor_info *t,
		     const char *dtype, int64_t numel)
{
	table_str(tb, file);
	table_str(tb, t->name);
	table_str(tb, sw_block_name(t->block));
	table_str(tb, t->role);
	table_int(tb, t->layer);
	table_str(tb, sw_kind_name(t->kind));
	table_str(tb, dtype);
	table_shape(tb, t->rank, t->shape);
	table_int(tb, numel);
	table_int(tb, t->expert);
	table_end_row(tb);
}

/* The tied head as a row of its own: the embedding, no parameters. */
static void tied_head_info(const struct ckpt *ck, struct sw_tensor_info *h)
{
	long e = ckpt_find_role(ck, "embed", -1);

	*h = *ckpt_info(ck, (size_t)e);
	arch_info_for_role(&ckpt_meta(ck)->config, "lm_head", -1, h);
}

/* The rows listed. */
static size_t list_file(struct tool *tl, struct table *tb, const char *file, struct ckpt *ck)
{
	size_t n = 0;

	for (size_t i = 0; i < ckpt_count(ck); i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		if (select_match_info(&tl->sel, t)) {
			list_row(tb, file, t, t->dtype_name, t->numel);
			n++;
		}
	}
	if (ckpt_meta(ck)->head_tied && ckpt_find_role(ck, "embed", -1) >= 0) {
		struct sw_tensor_info h;
		tied_head_info(ck, &h);
		if (select_match_info(&tl->sel, &h)) {
			list_row(tb, file, &h, "tied", 0);
			n++;
		}
	}
	return n;
}

/* The tensors counted. */
static size_t summary_file(struct tool *tl, struct table *tb, const char *file, struct ckpt *ck)
{
	int64_t count[SW_BLOCK_COUNT] = {0}, params[SW_BLOCK_COUNT] = {0}, total = 0, ntotal = 0;

	for (size_t i = 0; i < ckpt_count(ck); i++) {
		const struct sw_tensor_info *t = ckpt_info(ck, i);
		if (!select_match_info(&tl->sel, t))
			continue;
		count[t->block]++;
		params[t->block] += t->numel;
		total += t->numel;
		ntotal++;
	}
	for (int b = 0; b < SW_BLOCK_COUNT; b++) {
		if (!count[b])
			continue;
		table_str(tb, file);
		table_str(tb, sw_block_name((enum sw_block)b));
		table_int(tb, count[b]);
		table_int(tb, params[b]);
		table_num(tb, total ? (double)params[b] / (double)total : 0.0);
		table_end_row(tb);
	}
	table_str(tb, file);
	table_str(tb, "total");
	table_int(tb, ntotal);
	table_int(tb, total);
	table_num(tb, total ? 1.0 : 0.0);
	table_end_row(tb);
	return (size_t)ntotal;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_COMMON_OPTIONS,
		{"summary", no_argument, NULL, OPT_TOOL_FIRST},
		{NULL, 0, NULL, 0}
	};
	struct tool tl;
	struct table tb;
	struct ckpt *ck;
	const char *file;
	int opt, summary = 0;

	tool_init(&tl, "sw-ls", usage, help, argc, argv);
	tl.run_dirs = TOOL_RUN_DIRS_CKPTS;      /* a run directory: its checkpoints */
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (tool_common_option(&tl, opt, optarg))
			continue;
		if (opt == OPT_TOOL_FIRST)
			summary = 1;
	}
	tool_files_begin(&tl, optind);
	if (summary)
		table_init(&tb, stdout, tl.fmt, summary_cols, TOOL_NCOLS(summary_cols));
	else
		table_init(&tb, stdout, tl.fmt, list_cols, TOOL_NCOLS(list_cols));
	table_header(&tb);
	while ((ck = tool_next_ckpt(&tl, &file))) {
		tool_selected(&tl, file, summary ? summary_file(&tl, &tb, file, ck)
						 : list_file(&tl, &tb, file, ck), "tensor");
		ckpt_close(ck);
	}
	return tool_finish(&tl);
}
