#!/bin/sh
# The man pages: mandoc -Tlint clean, a page for every tool, and every
# EXAMPLES command (.Dl lines) runs, every command of its pipelines exits 0
# (bash -o pipefail) and it prints something (or, when its output goes to
# a file, >FILE at its end, that file is not empty) and no error (nothing
# on stderr but progress lines, "TOOL: [N s] ...", which a run that takes
# over 10 s prints off a terminal). A page's
# examples run in order (a later one may use what an earlier one made, as a
# reader going down the page would) in a fresh copy of a directory laid out
# as they assume: corpus.txt (any text) and what setup.sh below makes of it
# with the tools alone. Each page's EXAMPLES open with a paragraph saying
# what they assume and how to make it: its displays (.Bd -literal) must be
# commands of setup.sh, as written there. A .Dl line ending in a backslash
# goes on in the next, as in a shell. Every .Dl and display line is at
# most 67 characters (mandoc lays a page out in 78 columns on an 80-column
# terminal and indents them by 11: a wrapped command breaks when pasted),
# and renders as the test runs it.
. "$(dirname "$0")/../lib/tap.sh"

MAN=$SW_TOP/man

if command -v mandoc >/dev/null 2>&1; then
	test_expect_success 'mandoc -Tlint -W warning: clean' '
		mandoc -Tlint -W warning "$MAN"/*.1 "$MAN"/*.5 "$MAN"/*.7 >lint 2>&1 &&
		test_line_count = 0 lint
	'
else
	test_skip 'mandoc -Tlint' 'mandoc not installed'
fi

test_expect_success 'every tool has a man page and --help' '
	for t in "$SW_BIN"/sw-*; do
		n=$(basename "$t") &&
		case $n in sw-gen-fixtures) continue ;; esac &&
		test -f "$MAN/$n.1" && "$t" --help >/dev/null || { echo "no page or --help for $n"; exit 1; }
	done
'

# What the examples assume besides corpus.txt, one command a logical line
# (a trailing backslash goes on), as the pages show them.
cat >setup.sh <<'EOF'
sw-train --data corpus.txt --out run --steps 200 \
    --ckpt-every 100 --fisher-every 100 --d-model 32
sw-convert run/ckpt-000200.h5 hf-model
sw-sweep --out sweep --lr 1e-3,3e-3,1e-2 --wd 0.01,0.1 \
    --d-model 16,32 --tokens 4096 -- --data corpus.txt --seq-len 16
for lr in 0.001 0.01; do for b in 4 8; do s=$((128 / b)); \
    sw-train --data corpus.txt --out lr-sweep/lr$lr-b$b --lr $lr \
    --batch $b --steps $s --ckpt-every $((s / 2)) \
    --eval-every $((s / 2)) --trace-every $((s / 2)) \
    --d-model 16 --seq-len 16; done; done
sw-train --data corpus.txt --out mult --steps 40 --ckpt-every 10 \
    --trace-every 5 --d-model 16 --seq-len 16 \
    --multipliers row --mult-wd 0
EOF

test_expect_success 'setup: corpus.txt and what setup.sh makes of it (in setup/)' '
	mkdir setup && cd setup &&
	cp "$FIX/corpus.txt" corpus.txt &&
	sh -e ../setup.sh >/dev/null &&
	ls run/ckpt-*.h5 sweep/*/ckpt-*.h5 lr-sweep/*/ckpt-*.h5 mult/ckpt-*.h5 >../ckpts &&
	test_line_count = 26 ../ckpts &&
	test -f run/trace.h5 && test -f hf-model/model.safetensors
'

# mdoc escapes undone
unescape() {
	sed -e "s/\\\\-/-/g" -e "s/\\\\(dq/\"/g" -e "s/\\\\(aq/'/g" -e 's/\\e/\\/g' -e 's/\\&//g'
}

# The .Dl lines of EXAMPLES.
dl_lines() {
	awk '/^\.Sh EXAMPLES/ { on = 1; next } /^\.Sh / { on = 0 } on && /^\.Dl / { sub(/^\.Dl /, ""); print }' "$1" |
	unescape
}

# The examples: .Dl lines, one ending in a backslash going on in the next.
examples() {
	dl_lines "$1" | awk '{ line = line $0 } /\\$/ { sub(/\\$/, "", line); next } { print line; line = "" }
		END { if (line != "") print line }'
}

# The lines of the displays (.Bd -literal) of EXAMPLES.
displays() {
	awk '/^\.Sh EXAMPLES/ { on = 1; next } /^\.Sh / { on = 0 }
		on && /^\.Ed/ { d = 0 } d { print } on && /^\.Bd -literal/ { d = 1 }' "$1" |
	unescape
}

# Shell text as logical lines, blanks squeezed: what setup.sh runs.
logical() {
	awk '{ line = line $0 } /\\$/ { sub(/\\$/, "", line); line = line " "; next }
		{ gsub(/[ \t]+/, " ", line); sub(/^ /, "", line); sub(/ $/, "", line); print line; line = "" }' "$@"
}

logical setup.sh >setup.logical

for page in "$MAN"/sw-*.1 "$MAN"/scalewatch.7; do
	name=$(basename "$page")
	dl_lines "$page" >"$name.dl"
	examples "$page" >"$name.examples"
	displays "$page" >"$name.displays"
	n=$(wc -l <"$name.examples")
	test_expect_success "$name: EXAMPLES lines fit, its displays are setup.sh" '
		cat "$name.dl" "$name.displays" | awk "length > 67" >long &&
		test_line_count = 0 long &&
		logical "$name.displays" >"$name.logical" &&
		while IFS= read -r cmd; do
			grep -Fqx -e "$cmd" setup.logical || { echo "not in setup.sh: $cmd"; exit 1; }
		done <"$name.logical"
	'
	# What a reader sees is what runs: mdoc moves a lone ? : ; , . ( )
	# in a .Dl line (write \&? for a literal one).
	if command -v mandoc >/dev/null 2>&1; then
		test_expect_success "$name: EXAMPLES render as they run" '
			mandoc -Tascii -Owidth=78 "$page" | sed "s/.$(printf "\b")//g" |
			sed -n "/^EXAMPLES/,/^[A-Z]/s/^           \([^ ]\)/\1/p" >rendered &&
			while IFS= read -r line; do
				grep -Fqx -e "$line" rendered || { echo "renders otherwise: $line"; exit 1; }
			done <"$name.dl"
		'
	fi
	if ! command -v bash >/dev/null 2>&1; then
		test_skip "$name: its $n EXAMPLES" "bash (for pipefail) not installed"
		continue
	fi
	test_expect_success "$name: its $n EXAMPLES, in order: each exits 0, prints, no error" '
		rm -rf "ex-$name" && cp -R setup "ex-$name" && cd "ex-$name" &&
		test_line_count -gt 0 "../$name.examples" &&
		failed=0 &&
		while IFS= read -r cmd; do
			# >FILE at the end: the output is that file
			to=${cmd##*>} && to=${to# } &&
			case $to in "$cmd" | "" | /* | *[!A-Za-z0-9._/-]*) to=../$name.out ;; esac &&
			if ! bash -o pipefail -c "$cmd" </dev/null >"../$name.out" 2>"../$name.err" ||
			   ! test -s "$to" ||
			   grep -qv "^sw-[a-z-]*: \[[0-9]* s\] " "../$name.err"; then
				echo "failed: $cmd" && cat "../$name.err" && failed=1
			fi
		done <"../$name.examples" &&
		test $failed = 0
	'
done

test_done
