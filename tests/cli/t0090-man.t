#!/bin/sh
# The man pages: mandoc -Tlint clean, a page for every tool, and every
# EXAMPLES command (.Dl lines) runs, every command of its pipelines exits 0
# (bash -o pipefail) and it prints something and no error. A page's
# examples run in order (a later one may use what an earlier one made, as a
# reader going down the page would) in a fresh copy of a directory laid out
# as they assume: run/ (a training run: ckpt-*.h5 and its
# trace, trace.h5), hf-model/ (a Hugging Face model), corpus.txt,
# fisher-run/ (checkpoints with /fisher), sweep/ (a synthetic lr/wd x width
# sweep, sw-gen-fixtures --sweep), lr-sweep/ (a tiny sweep made with
# sw-train: lr 0.001, 0.01 x batch 4, 8, checkpoints and trace rows at
# 1024 and 2048 tokens) and mult/ (a run with row multipliers without
# weight decay, four checkpoints).
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

test_expect_success 'setup: a run, a Hugging Face model, a corpus, a sweep (in setup/)' '
	mkdir setup && cd setup &&
	mkdir run &&
	cp "$FIX/corpus.txt" corpus.txt &&
	cp "$FIX/tiny.h5" run/ckpt-000100.h5 &&
	cp "$FIX/tiny.h5" run/ckpt-000200.h5 &&
	"$SW_BIN/../tests/unit/mktrace" -n 12 run/trace.h5 >/dev/null &&
	cp -r "$FIX/tiny-hf" hf-model &&
	sw-gen-fixtures --sweep sweep &&
	"$SW_BIN/sw-train" --data corpus.txt --out fisher-run --steps 40 --ckpt-every 20 \
		--fisher-every 20 --eval-every 20 --trace-every 5 --batch 4 --seq-len 32 --d-model 32 \
		--n-layers 2 >/dev/null &&
	tiny="--d-model 16 --seq-len 16" &&
	mkdir lr-sweep && for lr in 0.001 0.01; do for b in 4 8; do
		s=$((2048 / (b * 16))) &&
		eval sw-train --data corpus.txt --out lr-sweep/lr$lr-b$b $tiny --n-layers 1 --n-heads 2 \
			--batch $b --lr $lr --steps $s --ckpt-every $((s / 2)) --eval-every $((s / 2)) \
			--trace-every $((s / 2)) >/dev/null || exit 1
	done; done &&
	eval sw-train --data corpus.txt --out mult $tiny --n-layers 2 --n-heads 4 --n-kv-heads 2 \
		--batch 4 --lr 3e-3 --steps 40 --ckpt-every 10 --eval-every 10 --multipliers row \
		--mult-wd 0 --trace \"\" >/dev/null &&
	ls lr-sweep/*/ckpt-*.h5 mult/ckpt-*.h5 >ckpts && test_line_count = 12 ckpts
'

# The .Dl lines of EXAMPLES, with mdoc escapes undone.
examples() {
	awk '/^\.Sh EXAMPLES/ { on = 1; next } /^\.Sh / { on = 0 } on && /^\.Dl / { sub(/^\.Dl /, ""); print }' "$1" |
	sed -e "s/\\\\-/-/g" -e "s/\\\\(dq/\"/g" -e "s/\\\\(aq/'/g" -e 's/\\e/\\/g' -e 's/\\&//g'
}

for page in "$MAN"/sw-*.1 "$MAN"/scalewatch.7; do
	name=$(basename "$page")
	examples "$page" >"$name.examples"
	n=$(wc -l <"$name.examples")
	if ! command -v bash >/dev/null 2>&1; then
		test_skip "$name: its $n EXAMPLES" "bash (for pipefail) not installed"
		continue
	fi
	test_expect_success "$name: its $n EXAMPLES, in order: each exits 0, prints, no error" '
		rm -rf "ex-$name" && cp -R setup "ex-$name" && cd "ex-$name" &&
		test_line_count -gt 0 "../$name.examples" &&
		failed=0 &&
		while IFS= read -r cmd; do
			if ! bash -o pipefail -c "$cmd" </dev/null >"../$name.out" 2>"../$name.err" ||
			   ! test -s "../$name.out" || test -s "../$name.err"; then
				echo "failed: $cmd" && cat "../$name.err" && failed=1
			fi
		done <"../$name.examples" &&
		test $failed = 0
	'
done

test_done
