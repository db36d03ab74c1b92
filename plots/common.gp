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

if (!exists("in") || !exists("out")) {
	print "usage: gnuplot -e \"in='DATA.tsv'; out='FIG.png'\" SCRIPT.gp"
	exit status 64
}
_n = strlen(out)
_ext = _n > 4 ? out[_n-3:_n] : ""
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
set border 3 linewidth 1
set tics nomirror out
set grid linetype 0 linecolor rgb "#cccccc"
set key outside right top vertical reverse Left samplen 2 noenhanced
set style fill solid 0.85 border -1
set pointsize 1.2

# Okabe & Ito (2008): black, orange, sky blue, bluish green, yellow,
# blue, vermillion, reddish purple
array PAL[8] = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
do for [i = 1:8] {
	set linetype i linecolor rgb PAL[i] linewidth 2 pointtype (i % 7 + 4) dashtype 1
}

# The distinct values of column NAME of in, in order of appearance (awk;
# in must not hold a single quote).
groups(name) = system(sprintf("awk -F'\t' -v c='%s' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } k && !s[$k]++ { print $k }' '%s' | tr '\\n' ' '", name, in))

# The same values, shortened for a key when NAME is "file": the path
# components every value shares, leading and trailing, are dropped, so
# run-a/ckpt-000600.h5 and run-b/ckpt-000600.h5 read "run-a" and "run-b".
labels(name) = name ne "file" ? groups(name) : system(sprintf("awk -F'\t' -v c='%s' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } k && !s[$k]++ { n++; m[n] = split($k, t, \"/\"); for (j = 1; j <= m[n]; j++) p[n, j] = t[j] } END { lo = 1; while (n > 1) { for (i = 1; i <= n; i++) if (lo >= m[i] || p[i, lo] != p[1, lo]) break; if (i <= n) break; lo++ } hi = 0; while (n > 1) { for (i = 1; i <= n; i++) if (m[i] - hi <= lo || p[i, m[i] - hi] != p[1, m[1] - hi]) break; if (i <= n) break; hi++ } for (i = 1; i <= n; i++) { a = n > 1 ? lo : m[i]; l = p[i, a]; for (j = a + 1; j <= m[i] - hi; j++) l = l \"/\" p[i, j]; print l } }' '%s' | tr '\\n' ' '", name, in))

# Which column NAME is (0 if none).
colnum(name) = int(system(sprintf("awk -F'\t' -v c='%s' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) { print i; exit } print 0; exit }' '%s'", name, in)))
