#!/bin/sh
# The command-line grammar every tool shares ([cli]): --help and --version
# on all fifteen, creating nothing; --threads N on every tool that
# computes, one spelling and one range, and the same rows whatever N;
# --log on the tools that may run for minutes; --json on every tool that
# reads checkpoints, traces or tokenizers (its objects the TSV's rows), and
# their file names from stdin; step and tokens under one name everywhere.
. "$(dirname "$0")/../lib/tap.sh"

TOOLS="sw-compare sw-convert sw-gen-fixtures sw-hessian sw-ls sw-norms sw-plot sw-qkdrift sw-sharpness
	sw-spectrum sw-sweep sw-tokenize sw-trace sw-train sw-transfer"
COMPUTE="sw-compare sw-hessian sw-norms sw-sharpness sw-spectrum sw-train"

for tool in $TOOLS; do
	test_expect_success "$tool --help: the usage on stdout, exit 0, nothing created, 80 columns" '
		mkdir help-$tool && (cd help-$tool && $tool --help >../out 2>../err) &&
		test_line_count = 0 err && head -n 1 out >first &&
		grep -q "^usage: $tool" first && test -z "$(ls help-$tool)" &&
		awk "length > 80" out >long && test_line_count = 0 long
	'
	test_expect_success "$tool --version: the version first, exit 0" '
		$tool --version >out 2>err && test_line_count = 0 err && head -n 1 out >first &&
		grep -q "^$tool (scalewatch) [0-9]" first
	'
done

for tool in $TOOLS; do
	case $tool in sw-gen-fixtures) continue ;; esac
	test_expect_success "$tool --no-such-option: exit 64, one line naming it as the tool, then the usage" '
		case $tool in sw-tokenize) set -- info --no-such-option ;; *) set -- --no-such-option ;; esac &&
		test_expect_code 64 $tool "$@" >out 2>err && test_line_count = 0 out &&
		head -n 1 err >first &&
		echo "$tool: '"'"'--no-such-option'"'"': an unknown option, or one missing its value" >expect &&
		test_cmp expect first && sed -n 2p err >second && grep -q "^usage: $tool" second
	'
done

test_expect_success 'sw-gen-fixtures: a directory named like an option is refused, nothing made' '
	mkdir gen && cd gen &&
	test_expect_code 64 sw-gen-fixtures --hepl >../out 2>../err &&
	grep -q "^sw-gen-fixtures: .--hepl. is not an option it takes" ../err &&
	test_expect_code 64 sw-gen-fixtures --sweep -x >../out 2>../err && test -z "$(ls)"
'

for tool in $COMPUTE; do
	test_expect_success "$tool --threads 0 and --threads x: exit 64, the range named" '
		test_expect_code 64 $tool --threads 0 "$FIX/tiny.h5" >out 2>err &&
		grep -q "^$tool: --threads: .0. is not an integer in 1..1024" err &&
		test_expect_code 64 $tool --threads x "$FIX/tiny.h5" >out 2>err &&
		grep -q "^$tool: --threads: .x. is not an integer in 1..1024" err
	'
	test_expect_success "$tool --help names --threads as the grammar does" '
		$tool --help >out && grep -q "^  --threads N    threads, for OpenMP and OpenBLAS alike" out
	'
done

# float32 sums split among threads add in another order: each value moves
# by a few ulps of the sums behind it (2^-24 each, times at most a few
# hundred terms here), far below 1e-5 relative
test_expect_success 'sw-norms --threads 1 and 2: the same rows (to 1e-5)' '
	sw-norms --threads 1 "$FIX/wide.h5" >one &&
	sw-norms --threads 2 "$FIX/wide.h5" >two &&
	test_line_count = 11 one && numbers_close 1e-5 one two
'

# sigma_min and the condition number left out: the fixture's matrices have
# few directions: their smallest values sit at float32's rounding floor
# (1e-6 sigma_max), noise that the order of the sums moves at will
test_expect_success 'sw-spectrum --threads 1 and 2: the same values (to 1e-5)' '
	sw-spectrum --summary --threads 1 "$FIX/wide.h5" >out && cut -f1-7,9,10,12,13 out >one &&
	sw-spectrum --summary --threads 2 "$FIX/wide.h5" >out && cut -f1-7,9,10,12,13 out >two &&
	test_line_count = 10 one && numbers_close 1e-5 one two
'

for tool in sw-compare sw-hessian sw-norms sw-sharpness sw-spectrum sw-qkdrift sw-transfer sw-tokenize; do
	test_expect_success "$tool --help names --log and --quiet as the grammar does" '
		$tool --help >out && grep -q "^  --log          progress as lines on stderr" out &&
		grep -q "^  --quiet        no progress on stderr" out
	'
done

# the name comes 11 s after the start, so the progress said as the file is
# read comes past the 10 s a run takes before it says anything off a
# terminal (a sleep, no work: the two runs side by side)
test_expect_success 'off a terminal, a run past 10 s says where it is, stamped; --quiet silences it' '
	(sleep 11; echo "$FIX/tiny.h5") | sw-norms - >out 2>err &
	(sleep 11; echo "$FIX/tiny.h5") | sw-norms --quiet - >out-quiet 2>err-quiet &&
	wait &&
	test_line_count = 1 err && grep -q "^sw-norms: \[1[0-9] s\] .*fixtures/tiny.h5" err &&
	test_line_count = 0 err-quiet && test_cmp out out-quiet
'

test_expect_success '--log: progress lines on a stderr that is no terminal; none without it' '
	for tool in sw-norms sw-spectrum; do
		$tool --log "$FIX/tiny.h5" "$FIX/wide.h5" >out 2>err &&
		test_line_count -ge 1 err && head -n 1 err >first &&
		grep -q "^$tool: \[[0-9]* s\] .*fixtures/tiny.h5" first &&
		$tool "$FIX/tiny.h5" >out 2>err && test_line_count = 0 err || exit 1
	done
'

test_expect_success 'sw-sharpness and sw-hessian: one --batch-tokens default, the one they use' '
	sw-sharpness --help >h1 && sw-hessian --help >h2 &&
	sed -n "s/.*--batch-tokens N .*(\([0-9]*\)).*/\1/p" h1 >d1 &&
	sed -n "s/.*--batch-tokens N .*(\([0-9]*\)).*/\1/p" h2 >d2 &&
	test_line_count = 1 d1 && test_cmp d1 d2 &&
	sw-train --data "$FIX/corpus.txt" --out bt --steps 2 --d-model 16 --seq-len 16 --batch 2 \
		--n-layers 1 --n-heads 2 --threads 1 --trace "" >/dev/null &&
	# exact: the same binary, thread count and seed, with and without the option
	sw-sharpness --data "$FIX/corpus.txt" --seq-len 16 --threads 1 bt/ckpt-000002.h5 >dflt &&
	sw-sharpness --data "$FIX/corpus.txt" --seq-len 16 --threads 1 \
		--batch-tokens "$(cat d1)" bt/ckpt-000002.h5 >given && test_cmp dflt given &&
	sw-sharpness --data "$FIX/corpus.txt" --seq-len 16 --threads 1 \
		--batch-tokens 1024 bt/ckpt-000002.h5 >other && ! cmp -s dflt other
'

# col NAME FILE: the column NAME of a table, header dropped
col() {
	awk -F"\t" -v name="$1" "NR == 1 { for (i = 1; i <= NF; i++) if (\$i == name) c = i; if (!c) exit 1; next } { print \$c }" "$2"
}

# bt/ trained 2 steps of 2 sequences of 16 tokens: step 2, 64 tokens,
# known from the options; a Hugging Face directory (not ours) knows neither
test_expect_success 'step and tokens: the same names and values in every tool that reads a checkpoint' '
	sw-norms bt/ckpt-000002.h5 >norms &&
	sw-spectrum --summary bt/ckpt-000002.h5 >spectrum &&
	sw-sharpness --data "$FIX/corpus.txt" --seq-len 16 --batch-tokens 32 bt/ckpt-000002.h5 >sharpness &&
	sw-hessian --data "$FIX/corpus.txt" --seq-len 16 --batch-tokens 32 --max-steps 3 --probes 1 \
		bt/ckpt-000002.h5 >hessian 2>/dev/null &&
	sw-qkdrift bt/ckpt-000002.h5 >qkdrift &&
	for t in norms spectrum sharpness hessian qkdrift; do
		col step $t | sort -u >steps && echo 2 >expect && test_cmp expect steps &&
		col tokens $t | sort -u >tokens && echo 64 >expect && test_cmp expect tokens || exit 1
	done &&
	sw-spectrum --summary "$FIX/tiny-hf" >spectrum && sw-norms "$FIX/tiny-hf" >norms &&
	for t in norms spectrum; do
		col step $t | sort -u >steps && echo >expect && test_cmp expect steps &&
		col tokens $t | sort -u >tokens && test_cmp expect tokens || exit 1
	done
'

# A run with a trace and a checkpoint (step 4), and a tokenizer: the files
# every reading tool below takes
test_expect_success 'setup: a run with its trace, a tokenizer' '
	sw-train --data "$FIX/corpus.txt" --out tr --steps 4 --eval-every 2 --d-model 16 --seq-len 16 \
		--batch 2 --n-layers 1 --n-heads 2 --threads 1 >/dev/null 2>&1 &&
	test -f tr/trace.h5 && test -f tr/ckpt-000004.h5 &&
	sw-tokenize train --vocab 300 -o tok "$FIX/corpus.txt" >/dev/null
'

DATA="--data $FIX/corpus.txt --seq-len 16 --batch-tokens 32 --threads 1"
# "tool options...@operand": every tool that reads checkpoints, traces or
# tokenizers, as a user runs it
READERS="sw-ls@tr/ckpt-000004.h5
sw-norms@tr/ckpt-000004.h5
sw-norms --scale-vectors@tr/ckpt-000004.h5
sw-spectrum --summary@tr/ckpt-000004.h5
sw-qkdrift@tr/ckpt-000004.h5
sw-sharpness $DATA@tr/ckpt-000004.h5
sw-hessian $DATA --max-steps 3 --probes 1@tr/ckpt-000004.h5
sw-trace@tr/trace.h5
sw-transfer@tr
sw-tokenize info@tok"

# json_matches TSV JSON: every line of JSON a JSON object whose keys are
# the TSV's header, in order, one object a row
json_matches() {
	"$PY" -c "
import json, sys
head = open(sys.argv[1]).readline().rstrip(chr(10)).split(chr(9))
rows = open(sys.argv[1]).read().count(chr(10)) - 1
objs = [json.loads(l) for l in open(sys.argv[2])]
bad = [o for o in objs if not isinstance(o, dict) or list(o) != head]
sys.exit(1 if bad or len(objs) != rows or rows < 1 else 0)
" "$1" "$2"
}

while IFS="@" read -r cmd file; do
	tool=${cmd%% *}
	test_expect_success "$tool --json: JSON Lines, an object a row, the TSV header as its keys" '
		$cmd "$file" >tsv 2>/dev/null && $cmd --json "$file" >json 2>/dev/null &&
		json_matches tsv json
	'
done <<EOF
$READERS
EOF

# sw-trace and sw-tokenize name the file in a first column once the names
# come from stdin (as with several files): compared past it
while IFS="@" read -r cmd file; do
	tool=${cmd%% *}
	test_expect_success "$tool: the file names from stdin (-), the same rows" '
		$cmd "$file" >args 2>/dev/null && echo "$file" | $cmd - >stdin 2>/dev/null &&
		case $tool in
		sw-trace) cut -f2- stdin >s && mv s stdin ;;
		esac &&
		test_cmp args stdin
	'
done <<EOF
$READERS
EOF

test_expect_success 'sw-convert --json: its report, one object' '
	sw-convert --json tr/ckpt-000004.h5 hf >report &&
	"$PY" -c "import json, sys; o = json.load(open(sys.argv[1])); sys.exit(o[\"tensors\"] != 12)" report
'

test_expect_success 'sw-train --threads 1: a run (the option taken where it was before)' '
	sw-train --threads 1 --data "$FIX/corpus.txt" --out run --steps 2 --d-model 16 \
		--seq-len 16 --batch 2 --n-layers 1 --n-heads 2 --trace "" >/dev/null &&
	test -f run/ckpt-000002.h5
'

test_done
