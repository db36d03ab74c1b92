/*
 * sw-convert - a scalewatch HDF5 checkpoint to a Hugging Face safetensors
 * directory (config.json, model.safetensors or shards and their index),
 * and safetensors to scalewatch HDF5; PyTorch, GGUF and llama2.c files to
 * either (by OUT's name); --to names the direction. The work is in
 * lib/formats/convert.c; this parses and reports.
 */
#include <stdlib.h>
#include <string.h>

#include "../lib/formats/convert.h"
#include "common.h"

static const char usage[] =
	"sw-convert [--dtype f32 | bf16] [--force] [--json] [--shard-size SIZE]\n"
	"                  [--to hdf5 | safetensors] IN {-o OUT | OUT}";
static const char help[] =
	"Convert a scalewatch HDF5 checkpoint IN to a Hugging Face safetensors\n"
	"directory OUT (config.json, model.safetensors or\n"
	"model-0000K-of-0000N.safetensors and model.safetensors.index.json), or Hugging\n"
	"Face safetensors IN (a file, an index, or their directory, config.json beside)\n"
	"to a scalewatch HDF5 checkpoint OUT. A PyTorch (.pt, .pth, pytorch_model.bin,\n"
	"Meta's consolidated.NN.pth), GGUF or llama2.c file IN becomes HDF5 when OUT\n"
	"ends in .h5 or .hdf5, else a safetensors directory; --to names the direction.\n"
	"The scalewatch attributes travel in the safetensors metadata.\n"
	"\n"
	"  --dtype T         safetensors out: f32 (default, exact) or bf16 (nearest even)\n"
	"  --force           replace an existing OUT (never IN or a file of it)\n"
	"  --json            report what was written as one JSON object on stdout:\n"
	"                    in, out, to, tensors, shards, bytes (silent otherwise)\n"
	"  -o, --output OUT  the output, as the second operand would name it\n"
	"  --shard-size SIZE safetensors out: at most SIZE bytes of tensors per file\n"
	"                    (10MB, 2GiB, 4096; default 5GB)\n"
	"  --to F            what OUT is: hdf5 or safetensors (default: safetensors\n"
	"                    for an HDF5 IN, HDF5 for safetensors, by OUT's name for\n"
	"                    the others)\n"
	"  --help, --version\n"
	"See sw-convert(1).\n";

enum { O_DTYPE = OPT_TOOL_FIRST, O_SHARD_SIZE, O_TO };

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"dtype", required_argument, NULL, O_DTYPE},
		TOOL_FORCE_OPTION,
		{"shard-size", required_argument, NULL, O_SHARD_SIZE},
		{"to", required_argument, NULL, O_TO},
		{"output", required_argument, NULL, 'o'},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0}
	};
	struct convert_opts o;
	struct convert_result r;
	struct sw_err err;
	struct tool tl;
	const char *out = NULL, *in;
	int opt;

	tool_init(&tl, "sw-convert", usage, help, argc, argv);
	convert_opts_init(&o);
	while ((opt = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
		switch (opt) {
		case O_DTYPE:
			if (!strcmp(optarg, "f32") || !strcmp(optarg, "F32"))
				o.dtype = SW_DTYPE_F32;
			else if (!strcmp(optarg, "bf16") || !strcmp(optarg, "BF16"))
				o.dtype = SW_DTYPE_BF16;
			else
				tool_usage_error(&tl, "--dtype: '%s' is not f32 or bf16", optarg);
			break;
		case 'o': out = optarg; break;
		case OPT_JSON: tl.fmt = TABLE_JSON; break;
		case OPT_FORCE: tool_common_option(&tl, opt, optarg); break;
		case O_SHARD_SIZE:
			if (convert_parse_size(optarg, &o.shard_size) < 0)
				tool_usage_error(&tl, "--shard-size: '%s' is not a size like 10MB, 2GiB or 4096",
						 optarg);
			break;
		case O_TO:
			if (!strcmp(optarg, "hdf5"))
				o.to = CONVERT_TO_HDF5;
			else if (!strcmp(optarg, "safetensors"))
				o.to = CONVERT_TO_SAFETENSORS;
			else
				tool_usage_error(&tl, "--to: '%s' is not hdf5 or safetensors", optarg);
			break;
		default:
			tool_common_option(&tl, opt, optarg);
			tool_usage_error(&tl, "unknown option");
		}
	}
	if (argc - optind != (out ? 1 : 2))
		tool_usage_error(&tl, out ? "needs IN (and -o OUT, not a second OUT)" : "needs IN and OUT");
	o.force = tl.force;
	in = argv[optind];
	if (!out)
		out = argv[optind + 1];
	if (convert_run(in, out, &o, &r, &err)) {
		tool_error(&tl, r.culprit[0] ? r.culprit : in, &err);
	} else if (tl.fmt == TABLE_JSON) {
		static const char *const cols[] = {"in", "out", "to", "tensors", "shards", "bytes"};
		struct table tb;
		table_init(&tb, stdout, TABLE_JSON, cols, 6);
		table_str(&tb, in);
		table_str(&tb, out);
		table_str(&tb, r.to_safetensors ? "safetensors" : "hdf5");
		table_int(&tb, (int64_t)r.tensors);
		if (r.to_safetensors)
			table_int(&tb, r.shards);
		else
			table_empty(&tb);
		table_int(&tb, (int64_t)r.bytes);
		table_end_row(&tb);
	}
	return tool_finish(&tl);
}
