# readme-check.awk - compare what a session printed with what the Markdown
# file shows (tests/lib/readme-run.sh).
#
#   awk -v salt=MARK -v md=NAME -v dir=D [-v update=OUT] [-v tol=T] -f readme-check.awk \
#       EXPECT ACTUAL [FILE.md]
#
# EXPECT is readme-extract.awk's; ACTUAL the session's stdout and stderr,
# with its marker lines. A line of the file's output matches the line
# printed when
#   - it ends in " (glob)": the rest as a shell pattern (* any characters,
#     ? one, \ quotes the next);
#   - it ends in " (re)": the rest as an awk extended regular expression of
#     the whole line;
#   - it ends in " (exact)": the rest, character for character (for the
#     numbers the project promises to the bit on any machine);
#   - otherwise, numerically (numbers_match below): the same text around the
#     numbers (runs of spaces counted as one, as a table's padding follows
#     its numbers' widths), the same integers, and decimals that agree to a
#     relative tolerance: tol (default 1e-5), or X where the line ends in
#     " (tol X)", the mark of a number that depends on a training run.
# A last line printed without a newline reads "TEXT (no-eol)". Every
# command must also exit 0: a failure is shown by the command itself
# (; echo "exit $?").
#
# Why numbers are not text: a float32 sum in another order (another BLAS
# kernel, SIMD width or thread count) rounds differently, so a value
# computed in float32 agrees across machines only to a few ulps times the
# square root of the terms summed - about 1e-6 for the README's norms and
# losses over thousands of terms - and a printed value of d digits moves by
# one unit of its last digit when the value crosses a rounding boundary.
# Training amplifies the first: a loss after k steps differs in its 3rd to
# 6th digit, a fitted optimum in its 2nd; those lines say so with (tol X).
#
# Prints "NAME:LINE: what is wrong" for every command that fails (and for
# the first one writes D/expected and D/actual, for diff, and its line to
# D/first); how many commands ran and failed goes to D/summary. With update=OUT, FILE.md is copied to OUT with each command's
# output replaced by what it printed (lines that matched kept as written).
# Exit status: 0 all match, 1 some do not.

function glob_re(p,    r, c, i) {
	r = ""
	for (i = 1; i <= length(p); i++) {
		c = substr(p, i, 1)
		if (c == "\\" && i < length(p)) {
			c = substr(p, ++i, 1)
			r = r (c ~ /[A-Za-z0-9 ]/ ? c : "\\" c)
		} else if (c == "*")
			r = r ".*"
		else if (c == "?")
			r = r "."
		else if (c ~ /[][\\.^$+(){}|\/]/)
			r = r "\\" c
		else
			r = r c
	}
	return "^" r "$"
}

# NUMBER: an integer, or a decimal (a fraction, an exponent or both)
function split_numbers(s, text, num,    k, re) {
	re = "-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?"
	k = 0
	while (match(s, re)) {
		text[k] = squeeze(substr(s, 1, RSTART - 1))
		num[++k] = substr(s, RSTART, RLENGTH)
		s = substr(s, RSTART + RLENGTH)
	}
	text[k] = squeeze(s)
	return k
}

function squeeze(s) {
	gsub(/  +/, " ", s)
	return s
}

function is_decimal(x) {
	return x ~ /[.eE]/
}

# one unit of the last digit written: 10^(exponent - digits after the point)
function last_unit(x,    e, d) {
	e = 0
	if (match(x, /[eE][-+]?[0-9]+$/)) {
		e = substr(x, RSTART + 1) + 0
		x = substr(x, 1, RSTART - 1)
	}
	d = index(x, ".") ? length(x) - index(x, ".") : 0
	return 10 ^ (e - d)
}

function abs(x) {
	return x < 0 ? -x : x
}

# Decimals a and b as printed agree when |a - b| <= tol max(|a|, |b|) plus
# one unit of the coarser last digit (two values within tol round to
# printed values that far apart). Integers (counts, shapes, steps, exit
# statuses) must be equal.
function numbers_match(shown, printed, tol,    ns, np, ts, tp, xs, xp, i, d, m, u) {
	ns = split_numbers(shown, ts, xs)
	np = split_numbers(printed, tp, xp)
	if (ns != np || ts[0] != tp[0])
		return 0
	for (i = 1; i <= ns; i++) {
		if (ts[i] != tp[i])
			return 0
		if (xs[i] == xp[i])
			continue
		if (!is_decimal(xs[i]) || !is_decimal(xp[i]))
			return 0
		d = abs(xs[i] - xp[i])
		m = abs(xs[i]) > abs(xp[i]) ? abs(xs[i]) : abs(xp[i])
		u = last_unit(xs[i]) > last_unit(xp[i]) ? last_unit(xs[i]) : last_unit(xp[i])
		if (d > tol * m + u)
			return 0
	}
	return 1
}

function line_matches(shown, printed,    t) {
	if (shown == printed)
		return 1
	if (shown ~ / \(glob\)$/)
		return printed ~ glob_re(substr(shown, 1, length(shown) - 7))
	if (shown ~ / \(re\)$/)
		return printed ~ ("^(" substr(shown, 1, length(shown) - 5) ")$")
	if (shown ~ / \(exact\)$/)
		return printed == substr(shown, 1, length(shown) - 8)
	t = tol == "" ? 1e-5 : tol
	if (match(shown, / \(tol [0-9.]+([eE][-+]?[0-9]+)?\)$/)) {
		t = substr(shown, RSTART + 6, RLENGTH - 7) + 0
		shown = substr(shown, 1, RSTART - 1)
	}
	return numbers_match(shown, printed, t)
}

function report(k, msg,    i) {
	printf "%s:%d: %s\n", md, line[k], msg
	if (!(k in failed)) {
		failed[k] = 1
		nfail++
	}
	nbad++
	if (nbad > 1)
		return
	print line[k] >(dir "/first")
	for (i = 1; i <= nwant[k]; i++)
		print want[k, i] >(dir "/expected")
	for (i = 1; i <= nact[k]; i++)
		print act[k, i] >(dir "/actual")
	close(dir "/expected")
	close(dir "/actual")
	close(dir "/first")
}

# EXPECT
FILENAME == ARGV[1] {
	if ($1 == "@@") {
		n++
		line[n] = $2; last[n] = $3; out1[n] = $4; out2[n] = $5; plen[n] = $6
		nwant[n] = 0
		at[$2] = n
		starts[$2] = n
		ends[$3] = n
	} else
		want[n, ++nwant[n]] = substr($0, 2)
	next
}

# ACTUAL: the marker ends each command's output
FILENAME == ARGV[2] {
	if (index($0, salt " ")) {
		pre = substr($0, 1, index($0, salt " ") - 1)
		split(substr($0, index($0, salt " ") + length(salt) + 1), f, " ")
		k = at[f[1]]
		if (!k || k <= done)
			next
		if (pre != "")
			act[k, ++nact[k]] = pre " (no-eol)"
		status[k] = f[2]
		ran[k] = 1
		done = k
		next
	}
	cur = done + 1
	act[cur, ++nact[cur]] = $0
	next
}

# FILE.md, to update
update != "" {
	if (skip_to && FNR <= skip_to)
		next
	skip_to = 0
	print >update
	if (FNR in starts)
		cmd_src[starts[FNR]] = $0
	if (FNR in ends) {
		k = ends[FNR]
		pre = substr(cmd_src[k], 1, plen[k])
		for (i = 1; i <= nact[k]; i++)
			print (act[k, i] == "" ? "" : pre) (i <= nwant[k] && line_matches(want[k, i], act[k, i]) ? want[k, i] : act[k, i]) >update
		if (out2[k] >= out1[k])
			skip_to = out2[k]
	}
}

function check(    k, i, ok) {
	for (k = 1; k <= n; k++) {
		if (!ran[k]) {
			report(k, "never ran: the session ended before it (an exit, or an unclosed quote or here-document above)")
			return
		}
		ok = nwant[k] == nact[k]
		for (i = 1; ok && i <= nwant[k]; i++)
			ok = line_matches(want[k, i], act[k, i])
		if (!ok) {
			for (i = 1; i <= nwant[k] && i <= nact[k] && line_matches(want[k, i], act[k, i]); i++)
				;
			report(k, nwant[k] == 0 ? "prints what the file does not show" : \
			    nwant[k] < i ? "prints more than the file shows (after its line " out2[k] ")" : \
			    "prints something else than its line " (out1[k] + i - 1) " shows")
		}
		if (status[k] != 0)
			report(k, "exit status " status[k] " (a command that fails shows it: CMD; echo \"exit $?\")")
	}
}

END {
	check()
	printf "%s: commands run: %d, not as shown: %d\n", md, n, nfail >(dir "/summary")
	exit nbad > 0
}
