#!/bin/sh
# readme-run.sh - run the "$ " examples of a Markdown file (README.md) as
# one shell session and check that each prints what the file shows.
#
#   SW_TOP=. SW_BIN=build/bin sh tests/lib/readme-run.sh [-k] [-u OUT] FILE.md
#
# The session starts from a clean state that stands for the top of a fresh
# checkout after make: an empty scratch directory holding a copy of
# $SW_TOP/fixtures and build, a link to the build directory of $SW_BIN. It
# runs under sh, with LC_ALL=C, stdin from /dev/null, and a PATH without
# $SW_BIN: the file's own lines put the tools on PATH. Commands run in order,
# so what one does (cd, files, variables) the next sees. Each prints stdout
# and stderr together, in the order they reach the terminal's stand-in (a
# file: a tool writes its table when it ends, its errors at once).
#
# What counts as a match, and the markers for what varies from run to run
# (" (glob)", " (re)"), are in readme-check.awk; the blocks and commands,
# in readme-extract.awk. An example that writes into fixtures/ fails too:
# in a user's checkout it would change the committed files.
#
#   -u OUT  also write FILE.md with each command's output as printed to OUT
#           (to update the file after a tool's messages changed: diff, then
#           copy it over by hand); FILE.md itself is never written
#   -k      keep the scratch directory, and say where it is
#
# Exit status: 0 every example as shown; 1 some differ or fail (the first
# named with a diff, then one line for each other); 2 usage or a malformed
# example.

usage() {
	echo "usage: readme-run.sh [-k] [-u OUT] FILE.md" >&2
	exit 2
}

keep=0
update=
while getopts ku: opt; do
	case $opt in
	k) keep=1 ;;
	u) update=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || usage
md=$1
lib=$(cd "$(dirname "$0")" && pwd)
SW_TOP=${SW_TOP:-$(cd "$lib/../.." && pwd)}
SW_BIN=${SW_BIN:-$SW_TOP/build/bin}
[ -r "$md" ] || { echo "readme-run.sh: $md: cannot read it" >&2; exit 2; }
build=$(cd "$SW_BIN/.." && pwd) || exit 2
case $update in
"" | /*) ;;
*) update=$PWD/$update ;;
esac

scratch=$(mktemp -d "${TMPDIR:-/tmp}/sw-readme.XXXXXX") || exit 2
cleanup() {
	if [ "$keep" = 1 ]; then
		echo "readme-run.sh: the session ran in $scratch/top" >&2
	else
		rm -rf "$scratch"
	fi
}
trap cleanup EXIT
trap 'exit 2' HUP INT TERM

salt=SW-README-$$-$(date +%s)
awk -v script="$scratch/session.sh" -v expect="$scratch/expect" -v salt="$salt" \
	-f "$lib/readme-extract.awk" "$md" || exit 2
: >>"$scratch/session.sh"
: >>"$scratch/expect"

mkdir "$scratch/top" "$scratch/diff" &&
	cp -R "$SW_TOP/fixtures" "$scratch/top/fixtures" &&
	ln -s "$build" "$scratch/top/build" || exit 2

# the PATH a user has before following the file: without the tools
session_path=$(printf '%s\n' "$PATH" | tr ':' '\n' | grep -vxF -e "$SW_BIN" -e "$build/bin" | paste -sd: -)

# a command that hangs ends the session: the rest reads "never ran"
limit=
command -v timeout >/dev/null 2>&1 && limit="timeout ${SW_README_TIMEOUT:-1800}"
(
	cd "$scratch/top" &&
	unset CDPATH ENV &&
	PATH=$session_path LC_ALL=C exec $limit sh "$scratch/session.sh"
) </dev/null >"$scratch/actual.raw" 2>&1

awk -v salt="$salt" -v md="$md" -v dir="$scratch/diff" -v update="$update" \
	-f "$lib/readme-check.awk" "$scratch/expect" "$scratch/actual.raw" ${update:+"$md"}
rc=$?
if [ -s "$scratch/diff/first" ]; then
	: >>"$scratch/diff/expected"
	: >>"$scratch/diff/actual"
	echo "--- $md, the first command that fails (line $(cat "$scratch/diff/first")): shown, then printed"
	diff -u "$scratch/diff/expected" "$scratch/diff/actual" | sed 1,2d
fi
if ! diff -r "$SW_TOP/fixtures" "$scratch/top/fixtures" >"$scratch/fixtures.diff" 2>&1; then
	echo "$md: an example changed fixtures/ (in a checkout, the committed files):"
	cat "$scratch/fixtures.diff"
	rc=1
fi
cat "$scratch/diff/summary" 2>/dev/null
[ "$rc" -le 1 ] || rc=2
exit "$rc"
