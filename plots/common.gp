# common.gp - what every scalewatch figure shares; loaded by each script
# (plots/*.gp) after it found its own directory.
#
#   in    the TSV a scalewatch tool printed (one header line)
#   out   the figure: .png, .pdf or .svg picks the terminal (cairo)
#   to    optional: where to write it instead of out (sw-plot passes
#         /dev/stdout and writes the bytes itself, to catch a full disk)
#
# Paper style: sans-serif at readable sizes, the Okabe-Ito palette (safe
# for colour-blind readers) in a fixed order, keys outside the data.
#
# Safety: gnuplot substitutes `backquotes` and @macros in every command
# line, eval'd strings included, runs a data file named "<cmd" and an
# output named "|cmd" through a shell. So the scripts never splice a value
# read from the data into a command (eval and sprintf'd commands take only
# integers and the scripts' own literals), data values are only compared,
# printed as titles (noenhanced) or kept in data blocks, and the names
# below are checked. sw-plot passes fixed names (in='data.tsv' in a
# private directory), never the user's.

if (!exists("in") || !exists("out")) {
	print "usage: gnuplot -e \"in='DATA.tsv'; out='FIG.png'\" SCRIPT.gp"
	exit status 64
}
if (strstrt(in, "'") > 0 || strstrt(in, "<") == 1 || in eq "-" || in eq "" || in[1:1] eq "+") {
	print "in: a file name starting with <, + or -, or holding a single quote, is refused (sw-plot takes any name)"
	exit status 64
}
if (strstrt(out, "|") == 1 || (exists("to") && strstrt(to, "|") == 1)) {
	print "out: a name starting with | is refused"
	exit status 64
}
_n = strlen(out)
_ext = _n > 4 ? out[_n-3:_n] : ""
set encoding utf8
if (_ext eq ".png") {
	set terminal pngcairo size 1400,900 font "Sans,18" linewidth 2 enhanced
} else { if (_ext eq ".pdf") {
	set terminal pdfcairo size 7in,4.5in font "Sans,11" linewidth 2 enhanced
} else { if (_ext eq ".svg") {
	set terminal svg size 1400,900 font "Sans,18" linewidth 2 dynamic enhanced
} else {
	print "out must end in .png, .pdf or .svg: ".out
	exit status 64
} } }
set output (exists("to") ? to : out)
set datafile separator "\t"
set datafile missing "nan"
set datafile commentschars ""
set border 3 linewidth 1
set tics nomirror out
set grid linetype 0 linecolor rgb "#cccccc"
set key outside right top vertical reverse Left samplen 2 noenhanced
set style fill solid 0.85 border -1
set pointsize 1.2

# check=1 on gnuplot's command line (never from sw-plot): each panel says
# how it came out, on stderr (check.gp), for the tests.
CHECK = exists("check") ? (check ? 1 : 0) : 0

# Okabe & Ito (2008): blue, orange, bluish green, vermillion, reddish
# purple, sky blue, black, yellow
array PAL[8] = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
do for [i = 1:8] {
	set linetype i linecolor rgb PAL[i] linewidth 2 pointtype (i % 7 + 4) dashtype 1
}
# filled markers that stay apart in print: circle, square, triangle up,
# diamond, triangle down, pentagon
array MARK[6] = [7, 5, 9, 13, 11, 15]

# The output layer's norm, as every figure writes it.
OUTNORM = "‖W_{out}‖_{RMS→∞}"

# gnuplot's own reading of a data file is lossy for strings (a cell with a
# double quote is cut there, leading blanks and backslashes go), so the
# scripts compare no string that gnuplot read: the strings (group values,
# labels, titles) come from awk through system() as lines ending in a line
# "#", split into an array by lines.gp; gnuplot reads only numbers, from
# in or from a blocks() pipe.

# The distinct values of column NAME of in, in order of first appearance.
groups(name) = system(sprintf("awk -F'\t' -v c='%s' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } k && !s[$k]++ { print $k } END { print \"#\" }' '%s'", name, in))

# The same values sorted as numbers.
sorted(name) = system(sprintf("awk -F'\t' -v c='%s' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } k && !s[$k]++ { print $k }' '%s' | sort -g; echo '#'", name, in))

# A data source for plot: the columns COLS (names, space-separated) of
# the rows of in in group K (from 1), the groups being the distinct values
# of the columns GROUP (names, space-separated) in order of first
# appearance: the order of groups(GROUP) and of curves(). Only numbers
# are meant to be read from it.
_blocks_awk = "NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; ng = split(g, G, \" \"); nc = split(cols, W, \" \"); next } " \
	. "{ v = $c[G[1]]; for (j = 2; j <= ng; j++) v = v SUBSEP $c[G[j]]; if (!(v in r)) r[v] = ++n; " \
	. "  if (r[v] == k) { l = $c[W[1]]; for (j = 2; j <= nc; j++) l = l \"\t\" $c[W[j]]; print l } }"
blocks(group, cols, k) = sprintf("< awk -F'\t' -v g='%s' -v cols='%s' -v k=%d '%s' '%s'", group, cols, k, _blocks_awk, in)

# The curves of a table of sw-spectrum (columns file, step, name), one per
# distinct file and matrix in order of first appearance (blocks("file
# name", ...)): a line per curve, its label, then the key's title, the
# figure's title. The label says what differs between the curves and the
# title what they share: the run (the files' directories, shortened to
# the components that differ), the step, the matrix; so three checkpoints
# of one run read "step 250", "step 1000", and a sweep at one step reads
# "d128-lr0.003-wd0.3", ... under "model.layers.1.mlp.down_proj.weight,
# step 600".
_curves_awk = "NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " \
	. "{ f = $c[\"file\"]; m = $c[\"name\"]; s = $c[\"step\"]; k = f SUBSEP m; " \
	. "  if (!(k in seen)) { seen[k] = ++n; F[n] = f; M[n] = m; S[n] = s; d = f; " \
	. "    if (!sub(\"/[^/]*$\", \"\", d)) d = \".\"; D[n] = d; " \
	. "    if (!(d in ds)) { ds[d] = ++nd; DD[nd] = d } } " \
	. "  if (!(f in fs)) { fs[f] = 1; nf++ } " \
	. "  if (!(m in ms)) { ms[m] = 1; nm++ } " \
	. "  if (!(s in ss)) { ss[s] = 1; ns++ } } " \
	. "END { " \
	. "  for (j = 1; j <= nd; j++) { q[j] = split(DD[j], w, \"/\"); for (i = 1; i <= q[j]; i++) P[j, i] = w[i] } " \
	. "  lo = 1; while (nd > 1) { for (j = 1; j <= nd; j++) if (lo >= q[j] || P[j, lo] != P[1, lo]) break; if (j <= nd) break; lo++ } " \
	. "  hi = 0; while (nd > 1) { for (j = 1; j <= nd; j++) if (q[j] - hi <= lo || P[j, q[j] - hi] != P[1, q[1] - hi]) break; if (j <= nd) break; hi++ } " \
	. "  for (j = 1; j <= nd; j++) { r = P[j, lo]; for (i = lo + 1; i <= q[j] - hi; i++) r = r \"/\" P[j, i]; R[DD[j]] = r } " \
	. "  for (i = 1; i <= n; i++) { l = \"\"; " \
	. "    if (nd > 1) l = R[D[i]]; " \
	. "    if (ns > 1) l = l (l == \"\" ? \"\" : \", \") (S[i] == \"\" ? \"no step\" : \"step \" S[i]); " \
	. "    if (nm > 1) l = l (l == \"\" ? \"\" : \", \") M[i]; " \
	. "    if (l == \"\") { l = F[i]; sub(\"^.*/\", \"\", l) } " \
	. "    print l } " \
	. "  t = nm == 1 ? M[1] : \"\"; " \
	. "  if (ns == 1 && S[1] != \"\") t = t (t == \"\" ? \"\" : \", \") \"step \" S[1]; " \
	. "  print (nd > 1 && ns == 1 && nm == 1 ? \"run\" : \"\"); print t; print \"#\" }"
curves(file) = system(sprintf("awk -F'\t' '%s' '%s'", _curves_awk, file))

# The groups of column NAME (block types) in Principle (1)'s order, as
# sharpness.gp draws them: emb, qk, ffn, vo, norm, then out, mult, other,
# then any other value in order of first appearance; a line per group, its
# index in groups(NAME) (a number), then "#". For grouped.gp's GO.
_order_awk = "NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } " \
	. "k && !($k in s) { s[$k] = ++n; V[n] = $k } " \
	. "END { np = split(\"emb qk ffn vo norm out mult other\", P, \" \"); " \
	. "  for (i = 1; i <= np; i++) if (P[i] in s) { print s[P[i]]; d[P[i]] = 1 } " \
	. "  for (j = 1; j <= n; j++) if (!(V[j] in d)) print j; print \"#\" }"
blockorder(name) = system(sprintf("awk -F'\t' -v c='%s' '%s' '%s'", name, _order_awk, in))

# What the matrix of a table of sw-spectrum is, in words, when the table
# has one (column name) and it is a Llama matrix ("layer 1 MLP down
# projection" for model.layers.1.mlp.down_proj.weight), else an empty line;
# then "#".
_what_awk = "NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"name\") c = i; next } " \
	. "c && !($c in s) { s[$c] = 1; n++; m = $c } " \
	. "END { w = \"\"; " \
	. "  R[\"self_attn.q_proj\"] = \"attention query projection\"; R[\"self_attn.k_proj\"] = \"attention key projection\"; " \
	. "  R[\"self_attn.v_proj\"] = \"attention value projection\"; R[\"self_attn.o_proj\"] = \"attention output projection\"; " \
	. "  R[\"mlp.gate_proj\"] = \"MLP gate projection\"; R[\"mlp.up_proj\"] = \"MLP up projection\"; " \
	. "  R[\"mlp.down_proj\"] = \"MLP down projection\"; R[\"input_layernorm\"] = \"attention norm gain\"; " \
	. "  R[\"post_attention_layernorm\"] = \"MLP norm gain\"; " \
	. "  if (n == 1) { " \
	. "    if (m == \"model.embed_tokens.weight\") w = \"token embedding\"; " \
	. "    else if (m == \"lm_head.weight\") w = \"output layer (LM head)\"; " \
	. "    else if (m == \"model.norm.weight\") w = \"final norm gain\"; " \
	. "    else if (split(m, a, \".\") >= 5 && a[1] == \"model\" && a[2] == \"layers\" && a[3] ~ /^[0-9]+$/ && a[split(m, a, \".\")] == \"weight\") { " \
	. "      r = a[4]; for (i = 5; i < split(m, a, \".\"); i++) r = r \".\" a[i]; " \
	. "      if (r in R) w = \"layer \" a[3] \" \" R[r] } } " \
	. "  print w; print \"#\" }"
matrixwords(file) = system(sprintf("awk -F'\t' '%s' '%s'", _what_awk, file))

# 1 when the header of in has a column NAME (a literal of the script),
# else 0: sw-hessian says eos_adam for Adam's preconditioned Hessian.
hascol(name) = int(system(sprintf("awk -F'\t' -v c='%s' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = 1; print k + 0; exit }' '%s'", name, in)))
