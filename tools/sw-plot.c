/*
 * sw-plot - a paper-ready figure from a TSV a scalewatch tool printed.
 * The work is in lib/files/plot.c: the table is checked and copied into a
 * private directory, gnuplot runs plots/KIND.gp there on that copy and
 * prints the figure, which is written here under a temporary name and
 * renamed into place once complete (gnuplot itself says nothing when its
 * output hits a full disk). No name given here ever reaches gnuplot.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../lib/base/atomicfile.h"
#include "../lib/files/plot.h"
#include "common.h"

static const char usage[] = "sw-plot [--force] [--column NAME] KIND IN.tsv -o OUT.png|OUT.pdf|OUT.svg\n"
	"       sw-plot --list";
static const char help[] =
	"Make a figure of kind KIND from a TSV a scalewatch tool printed, with gnuplot\n"
	"(plots/KIND.gp); the extension of OUT picks PNG, PDF or SVG. IN.tsv '-' is\n"
	"stdin.\n"
	"\n"
	"  --column NAME      the value column drawn, for the kinds that take one\n"
	"                     (esd-layers: alpha, compare: rel_change, unless NAME)\n"
	"  --force            replace an existing OUT (never IN)\n"
	"  -o, --output OUT   the figure\n"
	"  --list             the kinds, the columns each needs, the command for its TSV\n"
	"  --help, --version\n"
	"\n"
	"Environment: SW_PLOTS_DIR, where the scripts are (default: found beside the\n"
	"program); TMPDIR, where the private copy of the table goes. See sw-plot(1).\n";

static int list_kinds(struct tool *tl)
{
	static const char *const cols[] = {"kind", "columns", "figure", "tsv_from"};
	struct table tb;

	table_init(&tb, stdout, TABLE_TSV, cols, 4);
	for (size_t i = 0; i < plot_nkinds; i++) {
		table_str(&tb, plot_kinds[i].name);
		table_str(&tb, plot_kinds[i].columns);
		table_str(&tb, plot_kinds[i].what);
		table_str(&tb, plot_kinds[i].source);
		if (table_end_row(&tb) < 0)
			break;
	}
	return tool_finish(tl);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, OPT_HELP}, {"version", no_argument, NULL, OPT_VERSION},
		{"output", required_argument, NULL, 'o'}, {"list", no_argument, NULL, OPT_TOOL_FIRST},
		{"column", required_argument, NULL, OPT_TOOL_FIRST + 1},
		TOOL_FORCE_OPTION,
		{NULL, 0, NULL, 0}
	};
	struct tool tl;
	struct sw_err err;
	struct plot_stage st;
	const struct plot_kind *k;
	const char *out = NULL, *in, *format, *column = NULL;
	char dir[PATH_MAX], script[PATH_MAX + 64], tmp[PATH_MAX + 64];
	int opt, list = 0, fd, rc;

	tool_init(&tl, "sw-plot", usage, help, argc, argv);
	while ((opt = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
		if (opt == 'o')
			out = optarg;
		else if (opt == OPT_TOOL_FIRST)
			list = 1;
		else if (opt == OPT_TOOL_FIRST + 1)
			column = optarg;
		else
			tool_common_option(&tl, opt, optarg);
	}
	if (list)
		return list_kinds(&tl);
	if (argc - optind != 2 || !out)
		tool_usage_error(&tl, "needs KIND, IN.tsv and -o OUT");
	if (!(k = plot_kind_find(argv[optind])))
		tool_usage_error(&tl, "unknown kind '%s' (sw-plot --list names them)", argv[optind]);
	if (column && !k->column)
		tool_usage_error(&tl, "--column: the %s figure draws fixed columns (sw-plot --list)", k->name);
	in = argv[optind + 1];
	if (!(format = plot_format(out)))
		tool_usage_error(&tl, "%s: the output must end in .png, .pdf or .svg", out);
	if (!plot_have_gnuplot()) {
		sw_fail(&err, SW_ESOFTWARE, "gnuplot not found in PATH (Debian: apt-get install gnuplot-nox)");
		tool_error(&tl, NULL, &err);
		return tool_finish(&tl);
	}
	if (plot_scripts_dir(dir, sizeof dir, &err)) {
		tool_error(&tl, NULL, &err);
		return tool_finish(&tl);
	}
	snprintf(script, sizeof script, "%s/%s.gp", dir, k->name);
	if (tool_check_output(&tl, out, &in, 1))
		return tool_finish(&tl);
	if (plot_stage_table(in, k, column, &st, &err)) {
		tool_error(&tl, strcmp(in, "-") ? in : "stdin", &err);
		return tool_finish(&tl);
	}
	if (atomic_create(out, tmp, sizeof tmp, &fd, &err)) {
		tool_error(&tl, NULL, &err);
	} else {
		rc = plot_render(&st, script, format, fd, out, &err);
		if (atomic_finish(fd, tmp, out, rc, &err))
			tool_error(&tl, rc == SW_EDATA ? (strcmp(in, "-") ? in : "stdin") : NULL, &err);
	}
	plot_unstage(&st);
	return tool_finish(&tl);
}
