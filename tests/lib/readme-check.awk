# readme-check.awk - compare what a session printed with what the Markdown
# file shows (tests/lib/readme-run.sh).
#
#   awk -v salt=MARK -v md=NAME -v dir=D [-v update=OUT] -f readme-check.awk \
#       EXPECT ACTUAL [FILE.md]
#
# EXPECT is readme-extract.awk's; ACTUAL the session's stdout and stderr,
# with its marker lines. A line of the file's output matches the same line
# printed, or, when it ends in " (glob)", the rest as a shell pattern (* any
# characters, ? one, \ quotes the next), or, when it ends in " (re)", the
# rest as an awk extended regular expression of the whole line. A last line
# printed without a newline reads "TEXT (no-eol)". Every command must also
# exit 0: a failure is shown by the command itself (; echo "exit $?").
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

function line_matches(shown, printed) {
	if (shown == printed)
		return 1
	if (shown ~ / \(glob\)$/)
		return printed ~ glob_re(substr(shown, 1, length(shown) - 7))
	if (shown ~ / \(re\)$/)
		return printed ~ ("^(" substr(shown, 1, length(shown) - 5) ")$")
	return 0
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
