#!/bin/sh
# lib/'s layers, as the Layout table of docs/internals.md gives them: every module is
# in the table once, and includes only modules of its own layer or of the
# layers above it in the table (lower layers first). A module that reaches
# up a layer fails here, naming the file and the include.
. "$(dirname "$0")/../lib/tap.sh"

# "module layer" per line, from the table's rows: | layer | `mod` (...), `mod` ... |
layers() {
	awk -F'|' '/^lib\/ by layer/ { on = 1 } on && /^\| [a-z]/ && $2 !~ /layer/ {
		n++; s = $3
		while (match(s, /`[a-z_0-9]+(\.h)?`/)) {
			m = substr(s, RSTART + 1, RLENGTH - 2); sub(/\.h$/, "", m)
			print m, n; s = substr(s, RSTART + RLENGTH)
		}
	} on && /^$/ && n { exit }' "$SW_TOP/docs/internals.md"
}

# reaches_up TABLE MODULE FILE: the includes of FILE (module MODULE) that
# are of a higher layer in TABLE, one line each; status 1 if any
reaches_up() {
	sed -n "s/^#include \"\([a-z_0-9]*\)\.h\".*/\1/p" "$3" >incs &&
	awk -v me="$2" -v file="$3" 'NR == FNR { layer[$1] = $2; next }
		($1 in layer) && layer[$1] > layer[me] {
			print file " includes " $1 ".h, a higher layer"; bad = 1 }
		END { exit bad }' "$1" incs
}

test_expect_success 'setup: the table read from docs/internals.md' '
	layers >table && test_line_count -gt 30 table
'

test_expect_success 'every module of lib/ is in the table, once' '
	for f in "$SW_TOP"/lib/*.[ch]; do b=$(basename "$f"); echo "${b%.?}"; done >all &&
	sort -u all >modules &&
	cut -d" " -f1 table | sort >listed &&
	sort -u listed >listed-once && test_cmp listed listed-once &&
	test_cmp modules listed-once
'

test_expect_success 'no module includes one of a higher layer' '
	for f in "$SW_TOP"/lib/*.[ch]; do
		b=$(basename "$f") && reaches_up table "${b%.?}" "$f" || exit 1
	done
'

test_expect_success 'the check sees a module that reaches up (linalg -> train)' '
	printf "linalg 1\ntrain 2\n" >t2 &&
	printf "#include \"linalg.h\"\n#include \"train.h\"\n" >linalg.c &&
	test_expect_code 1 reaches_up t2 linalg linalg.c >found &&
	echo "linalg.c includes train.h, a higher layer" >expect && test_cmp expect found
'

test_done
