# readme-extract.awk - the "$ " examples of a Markdown file, as a shell
# session and what each command should print (tests/lib/readme-run.sh).
#
#   awk -v script=S -v expect=E -v salt=MARK -f readme-extract.awk FILE.md
#
# A code block is indented (four spaces or a tab, after a blank line) or
# fenced (``` or ~~~). In a block, "$ CMD" starts a command, "> MORE" lines
# continue it (the shell's PS2), and the lines after it, up to the next
# "$ " or the block's end, are what it prints (blank lines at the end
# dropped). Blocks without a "$ " line are prose and not run.
#
# S gets each command followed by a marker line that prints MARK, the
# command's line in FILE.md and its exit status. E gets, per command,
# "@@ LINE LAST FIRST_OUT LAST_OUT PREFIX_LEN" (its first and last line,
# the lines of its output, LAST_OUT < FIRST_OUT when none, the length of
# the indentation before "$"), then each expected line after a space.
# A malformed example is one message on stderr and exit status 2.

function fail(msg) {
	printf "%s:%d: %s\n", FILENAME, FNR, msg >"/dev/stderr"
	failed = 1
	exit 2
}

function close_command() {
	if (cmd_line == 0)
		return
	if (cmd ~ /(^|[^\\])(\\\\)*\\$/)
		fail("the command of line " cmd_line " ends in \\ but no \"> \" line continues it")
	printf "%s\nprintf '%%s %%d %%d\\n' %s %d \"$?\"\n", cmd, salt, cmd_line >script
	printf "@@ %d %d %d %d %d\n", cmd_line, cmd_last, cmd_last + 1, out_last, cmd_plen >expect
	for (i = 1; i <= nout; i++)
		printf " %s\n", out[i] >expect
	cmd_line = 0
	nout = 0
}

# A line of a code block, its indentation (plen characters) removed.
function code_line(text, plen) {
	if (text ~ /^\$ / || text == "$") {
		if (block_pre)
			fail("a code block with \"$ \" commands must begin with one")
		close_command()
		cmd = substr(text, 3)
		cmd_line = cmd_last = out_last = FNR
		cmd_plen = plen
		block_has_cmd = 1
		blanks = 0
		return
	}
	if (cmd_line && out_last == cmd_last && (text ~ /^> / || text == ">")) {
		cmd = cmd "\n" substr(text, 3)
		cmd_last = out_last = FNR
		return
	}
	if (!cmd_line) {
		if (!block_has_cmd && text != "")
			block_pre = 1
		return
	}
	if (text == "") {
		blanks++
		return
	}
	for (; blanks > 0; blanks--)
		out[++nout] = ""
	out[++nout] = text
	out_last = FNR
}

function end_block() {
	close_command()
	in_block = in_fence = block_pre = block_has_cmd = blanks = 0
}

BEGIN {
	if (script == "" || expect == "" || salt == "") {
		print "usage: awk -v script=S -v expect=E -v salt=MARK -f readme-extract.awk FILE.md" >"/dev/stderr"
		failed = 1
		exit 2
	}
	prev_blank = 1
}

{
	sub(/\r$/, "")
	if (in_fence) {
		if (substr($0, 1, fence_plen) ~ /^ *$/ && substr($0, fence_plen + 1) ~ ("^" fence_mark))
			end_block()
		else {
			text = $0
			for (n = 0; n < fence_plen && substr(text, 1, 1) == " "; n++)
				text = substr(text, 2)
			code_line(text, n)
		}
		prev_blank = 0
		next
	}
	if (in_block) {
		if ($0 ~ /^[ \t]*$/) {
			code_line("", 0)
			next
		}
		if ($0 ~ /^(    |\t)/) {
			plen = substr($0, 1, 1) == "\t" ? 1 : 4
			code_line(substr($0, plen + 1), plen)
			next
		}
		end_block()
	}
	if ($0 ~ /^ ? ? ?(```|~~~)/) {
		end_block()
		in_fence = 1
		match($0, /^ */)
		fence_plen = RLENGTH
		fence_mark = substr($0, fence_plen + 1, 3)
		prev_blank = 0
		next
	}
	if (prev_blank && $0 ~ /^(    |\t)/ && $0 !~ /^[ \t]*$/) {
		in_block = 1
		plen = substr($0, 1, 1) == "\t" ? 1 : 4
		code_line(substr($0, plen + 1), plen)
		next
	}
	prev_blank = $0 ~ /^[ \t]*$/
}

END {
	if (failed)
		exit 2
	if (in_fence)
		fail("a code fence opened and never closed")
	end_block()
}
