#!/bin/sh
# lib/'s layers, as the Layout table of docs/internals.md gives them: each
# layer is a folder of lib/ (the table's second column), and every file
# under lib/ is a module of the table, in its layer's folder, listed once;
# a module includes only modules of its own layer or of the layers above
# it in the table (lower layers first). A module is named by its path
# under lib/ (model/cuda/gpu for lib/model/cuda/gpu.h); .c, .cu and .h
# files are checked, and each quoted include is resolved from the
# including file's folder ("../../base/status.h" in lib/model/cuda/ is
# base/status). A module that reaches up a layer fails here, naming the
# file and the include; so does an include that names no module of the
# table, and a file in another layer's folder or outside the folders.
. "$(dirname "$0")/../lib/tap.sh"

# "folder/module layer" per line, from the table's rows:
# | layer | `lib/FOLDER/` | `mod` (...), `cuda/mod` (...) ... |
layers() {
	awk -F'|' '/^lib\/ by layer/ { on = 1 } on && /^\| [a-z]/ && $2 !~ /layer/ {
		n++; s = $4
		if (!match($3, /`lib\/[a-z]+\/`/)) { print "row " n ": no folder"; exit 1 }
		dir = substr($3, RSTART + 5, RLENGTH - 6)
		while (match(s, /`(cuda\/)?[a-z_0-9]+(\.h)?`/)) {
			m = substr(s, RSTART + 1, RLENGTH - 2); sub(/\.h$/, "", m)
			print dir m, n; s = substr(s, RSTART + RLENGTH)
		}
	} on && /^$/ && n { exit }' "$SW_TOP/docs/internals.md"
}

# lib_files: "module file" for each file under lib/, at any depth
lib_files() {
	find "$SW_TOP/lib" -type f | sort | while read -r f; do
		m=${f#"$SW_TOP"/lib/} && echo "${m%.*} $f"
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
	grep -q "^model/cuda/gpumodel 5$" table && grep -q "^base/status 1$" table
'

test_expect_success 'each layer has a folder of its own' '
	sed "s|/.* | |" table | sort -u >folders &&
	test_line_count = 6 folders &&
	cut -d" " -f1 folders | sort | uniq -d >twice && test_line_count = 0 twice
'

test_expect_success 'every file under lib/ is a module of the table, in its layer folder, once' '
	lib_files >files &&
	grep -q "^model/cuda/gpu " files && grep -q "^model/model " files &&
	cut -d" " -f1 files | sort -u >modules &&
	cut -d" " -f1 table | sort >listed &&
	sort -u listed >listed-once && test_cmp listed listed-once &&
	test_cmp modules listed-once
'

test_expect_success 'no module includes one of a higher layer' '
	test -s table && lib_files >files &&
	bad=0 &&
	while read -r m f; do
		reaches_up table "$m" "$f" || bad=1
	done <files &&
	test $bad = 0
'

test_expect_success 'the check sees a module that reaches up (linalg -> train)' '
	printf "analysis/linalg 4\nruns/train 6\n" >t2 &&
	printf "#include \"linalg.h\"\n#include \"../runs/train.h\"\n" >linalg.c &&
	test_expect_code 1 reaches_up t2 analysis/linalg linalg.c >found &&
	echo "linalg.c includes ../runs/train.h, a higher layer" >expect && test_cmp expect found
'

test_expect_success 'the check resolves includes across folders (model/cuda/gpumodel)' '
	printf "base/status 1\nmodel/cuda/gpu 5\nmodel/cuda/gpumodel 5\nmodel/model 5\nruns/train 6\n" >t3 &&
	printf "#include \"gpu.h\"\n#include \"../model.h\"\n#include <stdio.h>\n" >ok.c &&
	printf "# include \"./../../base/status.h\"\n" >>ok.c &&
	test_expect_code 0 reaches_up t3 model/cuda/gpumodel ok.c >found &&
	test_line_count = 0 found &&
	{ cat ok.c && printf "#include \"../../runs/train.h\"\n#include \"model.h\"\n"; } >up.cu &&
	test_expect_code 1 reaches_up t3 model/cuda/gpumodel up.cu >found &&
	echo "up.cu includes ../../runs/train.h, a higher layer" >expect &&
	echo "up.cu includes model.h, no module of the table" >>expect &&
	test_cmp expect found &&
	printf "#include \"../model/cuda/gpumodel.h\"\n" >train.h &&
	test_expect_code 0 reaches_up t3 runs/train train.h &&
	test_expect_code 1 reaches_up t3 base/status train.h >found &&
	echo "train.h includes ../model/cuda/gpumodel.h, a higher layer" >expect && test_cmp expect found
'

test_done
