# tap.sh - the shell side of the test suite, after git's t/test-lib.sh.
#
#   . "$(dirname "$0")/../lib/tap.sh"
#   test_expect_success 'title' '
#           sw-norms "$FIX/tiny.h5" >actual &&
#           test_line_count = 88 actual
#   '
#   test_done
#
# Each script runs in a fresh scratch directory ($TRASH); each test is an
# &&-chain evaluated in a subshell; output is TAP for prove. SW_BIN names
# the tools under test (build/bin, or build-asan/bin for check-asan).

set -u
SW_TOP=${SW_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
SW_BIN=${SW_BIN:-$SW_TOP/build/bin}
FIX=$SW_TOP/fixtures
PATH=$SW_BIN:$PATH
export PATH SW_TOP SW_BIN FIX
PY=${SW_PYTHON:-/usr/bin/python3}

test_count=0
test_failed=0
TRASH=$(mktemp -d "${TMPDIR:-/tmp}/sw-test.XXXXXX") || exit 1
chmod 755 "$TRASH"
cd "$TRASH" || exit 1

test_expect_success() {
	test_count=$((test_count + 1))
	if (eval "$2") >"$TRASH/.log" 2>&1; then
		printf "ok %d - %s\n" "$test_count" "$1"
	else
		printf "not ok %d - %s\n" "$test_count" "$1"
		sed 's/^/# /' "$TRASH/.log"
		test_failed=$((test_failed + 1))
	fi
}

test_skip() {
	test_count=$((test_count + 1))
	printf "ok %d - %s # SKIP %s\n" "$test_count" "$1" "$2"
}

# test_expect_code CODE command...: the exact exit status, never "!"
# (which would also pass on a crash)
test_expect_code() {
	want=$1
	shift
	"$@"
	got=$?
	if [ "$got" != "$want" ]; then
		echo "exit status $got, expected $want: $*"
		return 1
	fi
}

# test_status CODE FILE: FILE holds the exit status CODE, which a command
# whose output goes into a pipe saved there ({ cmd; echo $? >FILE; } | ...),
# since the shell keeps only the last command's
test_status() {
	got=$(cat "$2") || return 1
	if [ "$got" != "$1" ]; then
		echo "exit status $got, expected $1 (saved in $2)"
		return 1
	fi
}

# test_closed_quietly FILE: the status saved in FILE is 0 or death by
# SIGPIPE (128 + 13), the two ways a filter ends when its reader leaves
# early; anything else (an error, a crash) fails
test_closed_quietly() {
	got=$(cat "$1") || return 1
	case $got in
	0 | 141) return 0 ;;
	*) echo "exit status $got, expected 0 or 141 (SIGPIPE), saved in $1"; return 1 ;;
	esac
}

# test_line_count OP N FILE
test_line_count() {
	n=$(wc -l <"$3")
	if ! [ "$n" "$1" "$2" ]; then
		echo "$3 has $n lines, expected $1 $2:"
		cat "$3"
		return 1
	fi
}

# test_one_error TOOL FILE: stderr ("err") is one line "TOOL: FILE: ..."
test_one_error() {
	test_line_count = 1 err &&
	case $(cat err) in
	"$1: $2: "*) return 0 ;;
	*) echo "unexpected message: $(cat err)"; return 1 ;;
	esac
}

# test_cmp EXPECT ACTUAL
test_cmp() {
	diff -u "$1" "$2"
}

# numbers_close TOL A B: two TSV files with the same shape whose numeric
# cells agree to TOL relative (text cells must be equal)
numbers_close() {
	awk -F'\t' -v tol="$1" '
		NR == FNR { a[FNR] = $0; n = FNR; next }
		{
			if (!(FNR in a)) { print "extra line " FNR; bad = 1; next }
			k = split(a[FNR], x, "\t");
			if (k != NF) { print "line " FNR ": " k " vs " NF " fields"; bad = 1; next }
			for (i = 1; i <= NF; i++) {
				if (x[i] == $i) continue;
				if (x[i] ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ && $i ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) {
					d = x[i] - $i; if (d < 0) d = -d;
					m = x[i] < 0 ? -x[i] : x[i];
					if (d <= tol * m) continue;
				}
				print "line " FNR " field " i ": " x[i] " vs " $i; bad = 1
			}
		}
		END { if (FNR != n) { print "line counts differ"; bad = 1 } exit bad }' "$2" "$3"
}

# wait_lines N FILE: until FILE has N lines (10 s at most), for a
# background writer's progress. Its ">FILE" happens when it starts, not
# when the shell goes on: give each writer a FILE of its own, never one
# that held lines before.
wait_lines() {
	i=0
	while [ "$(cat "$2" 2>/dev/null | wc -l)" -lt "$1" ]; do
		i=$((i + 1))
		if [ $i -gt 200 ]; then
			echo "timed out waiting for $1 lines in $2"
			return 1
		fi
		sleep 0.05
	done
}

have_python_modules() {
	[ -x "$PY" ] && "$PY" -c "import $1" 2>/dev/null
}

test_done() {
	echo "1..$test_count"
	cd / && rm -rf "$TRASH"
	[ "$test_failed" = 0 ]
	exit $?
}
