#!/bin/sh
# The examples of README.md and docs/*.md are a test: every "$ " line of a
# file's code blocks runs, in order, as one shell session (one per file)
# from a fresh checkout's top directory (a
# copy of fixtures/ and build/), and prints exactly what the README shows
# (tests/lib/readme-run.sh; the rules and the markers for what varies, in
# tests/lib/readme-extract.awk and readme-check.awk). First the runner on
# small Markdown files whose outcome is known, then README.md and docs/.
#
# After a tool's output changed, SW_README_UPDATE=1 also writes
# $SW_TOP/README.md.actual (docs-guide.md.actual, ...), each page with
# every example's output as printed now, to review (diff README.md
# README.md.actual) and copy over by hand; the same without prove:
# sh tests/lib/readme-run.sh -u README.actual README.md
. "$(dirname "$0")/../lib/tap.sh"

RUN=$SW_TOP/tests/lib/readme-run.sh

test_expect_success 'runner: a session in order, state carried, output and no-eol matched' '
	cat >ok.md <<-\EOF &&
	# A title

	Prose, then an indented block:

	    $ x=3; mkdir d && cd d
	    $ echo "x is $x"; pwd | sed "s,.*/,,"
	    x is 3
	    d
	    $ printf "a\n\nb"
	    a

	    b (no-eol)

	A block without a dollar line is not run:

	    touch not-run

	A fenced one, a command over two lines, a failure shown:

	```
	$ test -e not-run; echo "exit $?"
	exit 1
	$ echo "two
	> lines" && ls ..
	two
	lines
	build
	d
	fixtures
	```
	EOF
	sh "$RUN" ok.md >out 2>&1 &&
	echo "ok.md: commands run: 5, not as shown: 0" >expect &&
	test_cmp expect out &&
	sed "s/^fixtures\$/fixture/" ok.md >ok2.md &&
	test_expect_code 1 sh "$RUN" ok2.md >out 2>&1 &&
	grep "^ok2.md:23: prints something else than its line 29 shows" out
'

test_expect_success 'runner: a line that differs fails, naming the line, with a diff' '
	cat >differ.md <<-\EOF &&
	Text

	    $ echo one; echo two
	    one
	    three
	    $ echo fine
	    fine
	EOF
	test_expect_code 1 sh "$RUN" differ.md >out 2>&1 &&
	cat >expect <<-\EOF &&
	differ.md:3: prints something else than its line 5 shows
	--- differ.md, the first command that fails (line 3): shown, then printed
	@@ -1,2 +1,2 @@
	 one
	-three
	+two
	differ.md: commands run: 2, not as shown: 1
	EOF
	test_cmp expect out
'

test_expect_success 'runner: output the README does not show, and a nonzero status not shown, fail' '
	cat >status.md <<-\EOF &&
	Text

	    $ ls no-such-file
	    $ echo after
	    after
	    $ false
	EOF
	test_expect_code 1 sh "$RUN" status.md >out 2>&1 &&
	grep "^status.md:" out >got &&
	cat >expect <<-\EOF &&
	status.md:3: prints what the file does not show
	status.md:3: exit status 2 (a command that fails shows it: CMD; echo "exit $?")
	status.md:6: exit status 1 (a command that fails shows it: CMD; echo "exit $?")
	status.md: commands run: 3, not as shown: 2
	EOF
	test_cmp expect got
'

test_expect_success 'runner: the tools are on PATH only when the file puts them there' '
	cat >nopath.md <<-\EOF &&
	Text

	    $ sw-ls --version >/dev/null 2>&1; echo "exit $?"
	    exit 0
	EOF
	test_expect_code 1 sh "$RUN" nopath.md >out 2>&1 &&
	grep "^nopath.md:3: prints something else than its line 4 shows" out &&
	grep "^+exit 127" out &&
	cat >path.md <<-\EOF &&
	Text

	    $ export PATH=$PWD/build/bin:$PATH
	    $ sw-ls --version >/dev/null 2>&1; echo "exit $?"
	    exit 0
	EOF
	sh "$RUN" path.md >out 2>&1 &&
	grep "^path.md: commands run: 2, not as shown: 0" out
'

test_expect_success 'runner: (glob) and (re) lines match what varies, and only that' '
	cat >vary.md <<-\EOF &&
	Text

	    $ echo "took 12.5 s"; echo "a*b"; date +%Y
	    took * s (glob)
	    a\*b (glob)
	    2[0-9]+ (re)
	EOF
	sh "$RUN" vary.md >out 2>&1 &&
	grep "^vary.md: commands run: 1, not as shown: 0" out &&
	cat >vary2.md <<-\EOF &&
	Text

	    $ echo "took 12.5 s"; echo "a*b"
	    took * s (glob)
	    a\*c (glob)
	EOF
	test_expect_code 1 sh "$RUN" vary2.md >out 2>&1 &&
	grep "^vary2.md:3: prints something else than its line 5 shows" out
'

test_expect_success 'runner: decimals within 1e-5 relative or one unit of their last digit match' '
	cat >num.md <<-\EOF &&
	Text

	    $ echo "loss 4.269700651988387  norm 2.25e-4 step 1000 x"
	    loss 4.269700650591403 norm 2.24e-4 step 1000 x
	    $ echo "layers.0.attn 1.50000"
	    layers.0.attn 1.50001
	EOF
	sh "$RUN" num.md >out 2>&1 &&
	grep "^num.md: commands run: 2, not as shown: 0" out
'

test_expect_success 'runner: integers, text, and decimals beyond the tolerance do not match' '
	for pair in "step 1001|step 1000" "layers.1.attn 1.5|layers.0.attn 1.5" "x 1.50|x 1.52" \
		"a 4.2697|b 4.2697" "v 1.0000|v 1.0002" "n 12 3.5|n 12" "2.0e-4|2.2e-4"; do
		printf "Text\n\n    \$ echo \"%s\"\n    %s\n" "${pair%%|*}" "${pair#*|}" >far.md &&
		test_expect_code 1 sh "$RUN" far.md >out 2>&1 &&
		grep "^far.md:3: prints something else than its line 4 shows" out || exit 1
	done
'

test_expect_success 'runner: (exact) compares the text; (tol X) widens the tolerance to X' '
	cat >marks.md <<-\EOF &&
	Text

	    $ echo "bits 1.2345"
	    bits 1.2345 (exact)
	    $ echo "eta 0.00927 exponent -0.08"
	    eta 0.00903 exponent -0.10 (tol 0.3)
	EOF
	sh "$RUN" marks.md >out 2>&1 &&
	grep "^marks.md: commands run: 2, not as shown: 0" out &&
	cat >marks2.md <<-\EOF &&
	Text

	    $ echo "bits 1.23450001"
	    bits 1.2345 (exact)
	    $ echo "eta 0.00927"
	    eta 0.00803 (tol 0.1)
	EOF
	test_expect_code 1 sh "$RUN" marks2.md >out 2>&1 &&
	grep "^marks2.md:3: prints something else than its line 4 shows" out &&
	grep "^marks2.md:5: prints something else than its line 6 shows" out
'

test_expect_success 'runner: an example that writes into fixtures/ fails' '
	printf "Text\n\n    \$ echo x >fixtures/corpus.txt\n" >fix.md &&
	test_expect_code 1 sh "$RUN" fix.md >out 2>&1 &&
	grep "^fix.md: an example changed fixtures/" out &&
	grep "corpus.txt" out
'

test_expect_success 'runner: a session cut short names the first command that never ran' '
	printf "Text\n\n    \$ echo \"unclosed\n    \$ echo after\n    after\n" >cut.md &&
	test_expect_code 1 sh "$RUN" cut.md >out 2>&1 &&
	grep "^cut.md:3: never ran: the session ended before it" out
'

test_expect_success 'runner: malformed examples are refused (exit 2)' '
	printf "Text\n\n    \$ echo a \\\\\n      b\n" >cont.md &&
	test_expect_code 2 sh "$RUN" cont.md 2>err &&
	grep "ends in .* but no \"> \" line continues it" err &&
	printf "Text\n\n    prose\n    \$ echo a\n" >pre.md &&
	test_expect_code 2 sh "$RUN" pre.md 2>err &&
	grep "must begin with one" err &&
	printf "Text\n\n\`\`\`\n\$ echo a\n" >fence.md &&
	test_expect_code 2 sh "$RUN" fence.md 2>err &&
	grep "never closed" err
'

test_expect_success 'runner: -u writes the file with the output as printed, patterns kept' '
	cat >upd.md <<-\EOF &&
	Text

	    $ echo new; echo "12 s"
	    old
	    * s (glob)

	More text.

	    $ echo added
	EOF
	cp upd.md upd.orig &&
	test_expect_code 1 sh "$RUN" -u upd.actual upd.md >out 2>&1 &&
	test_cmp upd.orig upd.md &&
	cat >expect <<-\EOF &&
	Text

	    $ echo new; echo "12 s"
	    new
	    * s (glob)

	More text.

	    $ echo added
	    added
	EOF
	test_cmp expect upd.actual &&
	sh "$RUN" upd.actual >out 2>&1 &&
	grep "^upd.actual: commands run: 2, not as shown: 0" out
'

# README.md itself, and every page of docs/ with examples, each its own
# session. Their examples use gnuplot (sw-plot) and h5dump.
if ! command -v gnuplot >/dev/null 2>&1 || ! command -v h5dump >/dev/null 2>&1; then
	test_skip "README.md and docs/: every example prints what it shows" 'gnuplot or h5dump not installed'
	test_done
fi

# docs/guide.md runs mpirun: under the sanitizers OpenMPI's own leaks
# (libmpi, its plugins) are suppressed as in t0066, nothing of ours
if [ -n "${SW_SANITIZED:-}" ]; then
	LSAN_OPTIONS=suppressions=$SW_TOP/tests/lib/lsan-mpi.supp:print_suppressions=0
	ASAN_OPTIONS=${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0
	export LSAN_OPTIONS ASAN_OPTIONS
fi

for page in README.md $(cd "$SW_TOP" && ls docs/*.md); do
	grep -q "^ *\$ " "$SW_TOP/$page" || continue
	update=
	[ -n "${SW_README_UPDATE:-}" ] && update=$SW_TOP/$(echo "$page" | tr / -).actual
	test_expect_success "$page: every example prints what it shows" '
		(cd "$SW_TOP" && sh "$RUN" ${update:+-u "$update"} "$page") >out 2>&1 ||
			{ cat out; false; } &&
		n=$(grep -c "^ *\$ " "$SW_TOP/$page") && test "$n" -gt 0 &&
		echo "$page: commands run: $n, not as shown: 0" >expect &&
		test_cmp expect out
	'
done

test_done
