#!/bin/sh
# The test scripts keep the exit status of every tool they run (git's t/
# rule): no tool's output piped into another command, no tool inside
# $(...) or backquotes, no tool followed by "|| true" or by ";" that drops
# its status, no loop or group piped. A tool is sw-*, the helpers the
# build makes (mktrace, mksynth, mklogits, the fuzz replays, and the
# variables $MKTRACE, $SYNTH, $LOGITS naming them) and any shell function a
# script defines that runs one. A deliberate pipe that keeps the status
# (e.g. "{ tool; echo $? >status; } | head") is marked by a comment line
# "# pipe-ok: why" just above it. The guard is tried first on a script
# made to break every rule.
. "$(dirname "$0")/../lib/tap.sh"

# hygiene FILE...: "FILE:LINE: what" for each place that loses a status
hygiene() {
	for f in "$@"; do
		awk -v file="$f" '
		{ line[NR] = $0 }
		# a tool name where a command word may start and end
		function tool_at(s, re,   p, before, after) {
			while (match(s, re)) {
				p = RSTART
				before = p == 1 ? " " : substr(s, p - 1, 1)
				after = substr(s, p + RLENGTH, 1)
				if (before ~ /[ \t"'\''\/({`=;|&\\]/ && (after == "" || after ~ /[ \t"'\'');|&<>\\]/)) {
					TSTART = tstart + p; TLEN = RLENGTH
					return 1
				}
				tstart += p + RLENGTH - 1
				s = substr(s, p + RLENGTH)
			}
			return 0
		}
		function report(n, what) {
			printf "%s:%d: %s\n", file, n, what
		}
		END {
			base = "sw-[a-z][a-z-]*|mktrace|mksynth|mklogits|replay-[a-z-]+|\\$\\{?(MKTRACE|SYNTH|LOGITS)\\}?"
			# shell functions that run a tool are tools too
			names = base
			for (i = 1; i <= NR; i++) {
				if (line[i] !~ /^[ \t]*[A-Za-z_][A-Za-z0-9_]*\(\)[ \t]*\{/)
					continue
				fn = line[i]; sub(/^[ \t]*/, "", fn); sub(/\(.*/, "", fn)
				runs = 0
				for (j = i; j <= NR; j++) {
					tstart = 0
					if (tool_at(j == i ? substr(line[j], index(line[j], "{")) : line[j], "(" base ")"))
						runs = 1
					if (line[j] ~ /^[ \t]*\}[ \t]*$/ || (j == i && line[j] ~ /(^|[;&][ \t]*)\}[ \t]*(&&|;)?[ \t]*$/))
						break
				}
				if (runs)
					names = names "|" fn
			}
			re = "(" names ")"
			marked = 0
			for (i = 1; i <= NR; i++) {
				# a here-document is data, not commands
				if (eof != "") {
					t = line[i]; if (strip_tabs) sub(/^\t*/, "", t)
					if (t == eof) eof = ""
					continue
				}
				start = i; s = line[i]
				while (s ~ /\\$/ && i < NR) { sub(/\\$/, " ", s); s = s line[++i] }
				if (s ~ /^[ \t]*#/) {
					marked = s ~ /^[ \t]*#[ \t]*pipe-ok/
					continue
				}
				ok = marked; marked = 0
				# a test title is no command
				sub(/^[ \t]*(test_expect_success|test_skip)[ \t]+('\''[^'\'']*'\''|"([^"\\]|\\.)*")/, "", s)
				if (match(s, /<<-?[ \t]*\\?['\''"]?[A-Za-z_]+/)) {
					eof = substr(s, RSTART + 2, RLENGTH - 2)
					strip_tabs = eof ~ /^-/
					gsub(/[-\\'\''" \t]/, "", eof)
				}
				if (!ok && s ~ /(^|[ \t;])(done|\})[ \t]*\|([ \t]|$)/)
					report(start, "a loop or group piped (its status is lost)")
				rest = s
				while (1) {
					tstart = 0
					if (!tool_at(rest, re))
						break
					tool = substr(rest, TSTART, TLEN)
					before = substr(rest, 1, TSTART - 1)
					after = substr(rest, TSTART + TLEN)
					rest = after
					sub(/"?[^ \t()"'\''`]*$/, "", before)
					if (before ~ /(\$\(|`)[ \t]*$/) {
						report(start, tool " inside $(...) or backquotes")
						continue
					}
					# where the command ends: &&, ||, |, ;, &
					op = ""; a = after
					quote = ""
					while (a != "") {
						c = substr(a, 1, 1); c2 = substr(a, 1, 2)
						if (c == "\\") { prev = substr(a, 2, 1); a = substr(a, 3); continue }
						if (quote != "") {
							if (c == quote) quote = ""
							prev = c; a = substr(a, 2)
							continue
						}
						if (c == "\"" || c == "'\''") { quote = c; prev = c; a = substr(a, 2); continue }
						if (c2 == "&&" || c2 == "||" || c2 == ";;") { op = c2; break }
						if (c == "|" && (prev == " " || prev == "\t")) { op = c; break }
						if (c == ";") { op = c; break }
						if (c == "&" && prev != ">" && prev != "<") { op = c; break }
						prev = c; a = substr(a, 2)
					}
					prev = ""
					tail = substr(a, length(op) + 1)
					if (op == "|" && !ok)
						report(start, tool " piped (its status is lost)")
					else if (op == "||" && tail ~ /^[ \t]*(true|:)([ \t;)}]|$)/)
						report(start, tool " followed by || true")
					else if (op == ";" && tail !~ /^[ \t]*((then|do|done|fi|esac|\})([ \t;]|$)|echo \\?\$\? *>|[A-Za-z_]+=\\?\$\?)/)
						report(start, tool " followed by ; (its status is lost)")
				}
			}
		}' "$f"
	done
}

test_expect_success 'the guard finds every way to lose a status, and only those' '
	cat >bad.t <<-\EOF &&
	test_expect_success "sw-norms | cut: a title is no command" "
		sw-norms x.h5 | cut -f2 >got &&
		n=$(sw-ls x.h5) && v=`sw-ls x.h5` &&
		sw-spectrum x.h5 >out || true
		sw-trace t.h5 >out; test -s out &&
		\"\$SW_BIN/sw-qkdrift\" a.h5 \
			--drift | sort >got &&
		for f in a b; do sw-ls \$f || exit 1; done | sort >all &&
		\"\$MKTRACE\" -n 3 t.h5 | tail -n 1 >last &&
		run_it | head -n 1 >first
	"
	run_it() {
		sw-transfer --table - <sweep.tsv
	}
	test_expect_success "what is fine" "
		sw-norms x.h5 >out && cut -f2 out | sort >got &&
		printf x | sw-ls --summary >a && test_one_error sw-norms x.h5 &&
		grep -q \"^sw-plot: x\\|y\" err && echo \"sw-trace: t.h5: gone; stopped\" >expect &&
		{ sw-plot x 2>err; rc=\$?; } && { sw-ls x; } &&
		# pipe-ok: the status is kept in status
		{ sw-norms x.h5; echo \$? >status; } | head -n 1 >out &&
		for f in a b; do sw-ls \$f >>all || exit 1; done &&
		if sw-ls x; then :; fi
	"
	EOF
	hygiene bad.t >found &&
	cat >expect <<-\EOF &&
	bad.t:2: sw-norms piped (its status is lost)
	bad.t:3: sw-ls inside $(...) or backquotes
	bad.t:3: sw-ls inside $(...) or backquotes
	bad.t:4: sw-spectrum followed by || true
	bad.t:5: sw-trace followed by ; (its status is lost)
	bad.t:6: sw-qkdrift piped (its status is lost)
	bad.t:8: a loop or group piped (its status is lost)
	bad.t:9: $MKTRACE piped (its status is lost)
	bad.t:10: run_it piped (its status is lost)
	EOF
	test_cmp expect found
'

test_expect_success 'every CLI, end-to-end and fuzz script keeps its tools exit status' '
	hygiene "$SW_TOP"/tests/cli/*.t "$SW_TOP"/tests/e2e/*.t "$SW_TOP"/tests/fuzz/*.t >found &&
	test_line_count = 0 found
'

test_done
