#!/bin/sh
# lib/'s layers, as the Layout table of docs/internals.md gives them: every module is
# in the table once, and includes only modules of its own layer or of the
# layers above it in the table (lower layers first). A module that reaches
# up a layer fails here, naming the file and the include. lib/cuda/ is
# read too: its modules are named by their path under lib/ (cuda/gpumodel
# for lib/cuda/gpumodel.[ch]), its .c, .cu and .h files are checked, and
# each quoted include is resolved from the including file's folder
# ("../model.h" in lib/cuda/ is model, "cuda/gpumodel.h" in lib/ is
# cuda/gpumodel); a quoted include that names no module of the table fails.
. "$(dirname "$0")/../lib/tap.sh"

# "module layer" per line, from the table's rows: | layer | `mod` (...), `cuda/mod` ... |
layers() {
	awk -F'|' '/^lib\/ by layer/ { on = 1 } on && /^\| [a-z]/ && $2 !~ /layer/ {
		n++; s = $3
		while (match(s, /`(cuda\/)?[a-z_0-9]+(\.h)?`/)) {
			m = substr(s, RSTART + 1, RLENGTH - 2); sub(/\.h$/, "", m)
			print m, n; s = substr(s, RSTART + RLENGTH)
		}
	} on && /^$/ && n { exit }' "$SW_TOP/docs/internals.md"
}

# lib_files: "module file" for each source file of lib/ and lib/cuda/
lib_files() {
	for f in "$SW_TOP"/lib/*.[ch] "$SW_TOP"/lib/cuda/*.c "$SW_TOP"/lib/cuda/*.cu \
		"$SW_TOP"/lib/cuda/*.h; do
		if [ -e "$f" ]; then
			m=${f#"$SW_TOP"/lib/} && echo "${m%.*} $f" || return 1
		fi
	done
}

# reaches_up TABLE MODULE FILE: the quoted includes of FILE (module MODULE,
# whose folder under lib/ the includes are relative to) that are of a
# higher layer in TABLE, or of none, one line each; status 1 if any
reaches_up() {
	sed -n 's/^[ 	]*#[ 	]*include[ 	]*"\([^"]*\)".*/\1/p' "$3" >incs &&
	awk -v me="$2" -v file="$3" '
		NR == FNR { layer[$1] = $2; next }
		!(me in layer) { print file ": module " me " is not in the table"; bad = 1; exit }
		{
			dir = me; if (!sub(/\/[^\/]*$/, "", dir)) dir = ""
			n = split((dir == "" ? "" : dir "/") $1, part, "/"); k = 0
			for (i = 1; i <= n; i++)
				if (part[i] == "..") { if (k > 0 && path[k] != "..") k--; else path[++k] = ".." }
				else if (part[i] != "." && part[i] != "") path[++k] = part[i]
			m = ""; for (i = 1; i <= k; i++) m = m (i > 1 ? "/" : "") path[i]
			sub(/\.h$/, "", m)
			if (!(m in layer)) { print file " includes " $1 ", no module of the table"; bad = 1 }
			else if (layer[m] > layer[me]) { print file " includes " $1 ", a higher layer"; bad = 1 }
		}
		END { exit bad }' "$1" incs
}

test_expect_success 'setup: the table read from docs/internals.md' '
	layers >table && test_line_count -gt 30 table &&
	grep -q "^cuda/gpumodel " table
'

test_expect_success 'every module of lib/ and lib/cuda/ is in the table, once' '
	lib_files >files &&
	grep -q "^cuda/gpu " files && grep -q "^model " files &&
	cut -d" " -f1 files | sort -u >modules &&
	cut -d" " -f1 table | sort >listed &&
	sort -u listed >listed-once && test_cmp listed listed-once &&
	test_cmp modules listed-once
'

test_expect_success 'no module includes one of a higher layer' '
	lib_files >files &&
	bad=0 &&
	while read -r m f; do
		reaches_up table "$m" "$f" || bad=1
	done <files &&
	test $bad = 0
'

test_expect_success 'the check sees a module that reaches up (linalg -> train)' '
	printf "linalg 1\ntrain 2\n" >t2 &&
	printf "#include \"linalg.h\"\n#include \"train.h\"\n" >linalg.c &&
	test_expect_code 1 reaches_up t2 linalg linalg.c >found &&
	echo "linalg.c includes train.h, a higher layer" >expect && test_cmp expect found
'

test_expect_success 'the check resolves lib/cuda/ includes (cuda/gpumodel -> ../train.h)' '
	printf "status 1\ncuda/gpu 2\ncuda/gpumodel 2\nmodel 2\ntrain 3\n" >t3 &&
	printf "#include \"gpu.h\"\n#include \"../model.h\"\n#include <stdio.h>\n" >ok.c &&
	printf "# include \"./../status.h\"\n" >>ok.c &&
	test_expect_code 0 reaches_up t3 cuda/gpumodel ok.c >found &&
	test_line_count = 0 found &&
	{ cat ok.c && printf "#include \"../train.h\"\n#include \"model.h\"\n"; } >up.cu &&
	test_expect_code 1 reaches_up t3 cuda/gpumodel up.cu >found &&
	echo "up.cu includes ../train.h, a higher layer" >expect &&
	echo "up.cu includes model.h, no module of the table" >>expect &&
	test_cmp expect found &&
	printf "#include \"cuda/gpumodel.h\"\n" >train.h &&
	test_expect_code 0 reaches_up t3 train train.h &&
	test_expect_code 1 reaches_up t3 status train.h >found &&
	echo "train.h includes cuda/gpumodel.h, a higher layer" >expect && test_cmp expect found
'

test_done
