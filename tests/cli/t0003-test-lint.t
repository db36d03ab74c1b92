#!/bin/sh
# The test scripts' names (git's t/ test-lint-duplicates): every script
# prove runs, in tests/cli, tests/e2e and tests/fuzz, is named
# tNNNN-what.t, and no two of them share a number, whatever their
# folders (the numbers are one sequence: cli 00xx and 05xx, e2e 01xx-02xx,
# fuzz 03xx). The checks are tried first on a scratch folder made to break
# each rule.
. "$(dirname "$0")/../lib/tap.sh"

# lint_names DIR...: "DIR/NAME: not named tNNNN-*.t" for each script
# (*.t) of the DIRs named otherwise; status 1 if any
lint_names() {
	bad=0
	for d in "$@"; do
		for f in "$d"/*.t; do
			[ -e "$f" ] || continue
			case ${f##*/} in
			t[0-9][0-9][0-9][0-9]-?*.t) ;;
			*) echo "$f: not named tNNNN-*.t"; bad=1 ;;
			esac
		done
	done
	return $bad
}

# lint_dups DIR...: "tNNNN: FILE FILE..." for each number that two
# scripts of the DIRs share; status 1 if any
lint_dups() {
	for d in "$@"; do
		for f in "$d"/t[0-9][0-9][0-9][0-9]-*.t; do
			if [ -e "$f" ]; then echo "${f##*/}" "$f"; fi
		done
	done >numbered &&
	awk '
		{ n = substr($1, 1, 5); files[n] = files[n] " " $2; count[n]++ }
		END {
			for (n in count)
				if (count[n] > 1) {
					print n ":" files[n]; bad = 1
				}
			exit bad
		}' numbered >dups
	status=$?
	sort dups
	return $status
}

DIRS="$SW_TOP/tests/cli $SW_TOP/tests/e2e $SW_TOP/tests/fuzz"

test_expect_success 'the checks find a misnamed script and a shared number' '
	mkdir -p s/a s/b &&
	for f in a/t0001-one.t a/t0002-two.t a/bad-input.t a/t12-short.t \
		a/t0003.t a/helper.py b/t0002-again.t b/t0004-four.t; do
		: >s/$f || exit 1
	done &&
	test_expect_code 1 lint_names s/a s/b >found &&
	printf "s/a/bad-input.t: not named tNNNN-*.t\n" >expect &&
	printf "s/a/t0003.t: not named tNNNN-*.t\n" >>expect &&
	printf "s/a/t12-short.t: not named tNNNN-*.t\n" >>expect &&
	test_cmp expect found &&
	test_expect_code 1 lint_dups s/a s/b >found &&
	echo "t0002: s/a/t0002-two.t s/b/t0002-again.t" >expect &&
	test_cmp expect found &&
	test_expect_code 0 lint_dups s/a >found &&
	test_line_count = 0 found &&
	rm s/a/bad-input.t s/a/t12-short.t s/a/t0003.t &&
	test_expect_code 0 lint_names s/a s/b >found &&
	test_line_count = 0 found
'

test_expect_success 'every script of tests/cli, tests/e2e and tests/fuzz is named tNNNN-*.t' '
	lint_names $DIRS
'

test_expect_success 'no two scripts of tests/cli, tests/e2e, tests/fuzz share a number' '
	lint_dups $DIRS
'

test_done
