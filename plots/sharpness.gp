# sharpness.gp - average sharpness per block type (the sharpness paper's
# Fig. 1 left), for the first file of the table. Left: bars of S = mean of
# the diagonal Gauss-Newton estimate h (eq. 4) in Principle (1)'s order
# emb, qk, ffn, vo, norm (then out, mult: outside it), on a log axis
# fitted to S, the title saying the expected and the observed order.
# Right: the spread of h within each type (median, 10-90%), on its own axis.
#   sw-sharpness run/ckpt-002000.h5 > s.tsv
#   gnuplot -e "in='s.tsv'; out='sharpness.png'" plots/sharpness.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# awk, on the first file's rows: the types in display order, the five of
# Principle (1) first (ORDER), each type's position, S and quantiles
_sharp_awk = "NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " \
	. "f == \"\" { f = $c[\"file\"]; st = $c[\"step\"] } " \
	. "$c[\"file\"] == f { b = $c[\"block\"]; if (!(b in S)) B[++nb] = b; S[b] = $c[\"mean\"]; " \
	. "  Q[b] = $c[\"median_log10\"] \"\t\" $c[\"q10_log10\"] \"\t\" $c[\"q90_log10\"] } " \
	. "END { np = split(\"emb qk ffn vo norm out mult other\", P, \" \"); " \
	. "  for (i = 1; i <= np; i++) if (P[i] in S) D[++nd] = P[i]; " \
	. "  for (i = 1; i <= nb; i++) { for (j = 1; j <= np; j++) if (B[i] == P[j]) break; if (j > np) D[++nd] = B[i] } " \
	. "  for (i = 1; i <= 5; i++) if (P[i] in S) O[++n] = P[i]; else miss = miss \" \" P[i]; " \
	. "  for (i = 2; i <= n; i++) { x = O[i]; for (j = i - 1; j >= 1 && S[O[j]] + 0 > S[x] + 0; j--) O[j + 1] = O[j]; O[j + 1] = x } " \
	. "  o = \"\"; for (i = 1; i <= n; i++) o = o (i > 1 ? \" < \" : \"\") \"S(\" O[i] \")\"; " \
	. "  if (mode == \"rows\") { for (i = 1; i <= nd; i++) print i - 1 \"\t\" (i <= n) \"\t\" S[D[i]] \"\t\" Q[D[i]]; exit } " \
	. "  print st; print o; " \
	. "  print (n < 5 ? \"cannot be checked: no\" miss : o == \"S(emb) < S(qk) < S(ffn) < S(vo) < S(norm)\" ? \"holds\" : \"broken\"); " \
	. "  for (i = 1; i <= nd; i++) print D[i]; print \"#\" }"
_lines = system(sprintf("awk -F'\t' -v mode=list '%s' '%s'", _sharp_awk, in))
call DIR."lines.gp" "P"
_nb = P_n - 3
if (_nb < 1) { print "no rows to plot"; exit status 65 }
# one row per type: position, in Principle (1) (1/0), S, median, q10, q90 (log10)
_rows = sprintf("< awk -F'\t' -v mode=rows '%s' '%s'", _sharp_awk, in)

# (stats skip points outside a range already set: all of them first)
stats _rows using 3 name "S" nooutput
stats _rows using (10**$5) name "LO" nooutput
stats _rows using (10**$6) name "HI" nooutput

set xtics () noenhanced
do for [_j = 1:_nb] { set xtics add (P[_j + 3] _j - 1) }
set xrange [-0.6:_nb - 0.4]
set multiplot layout 1,2 margins 0.09,0.97,0.13,0.86 spacing 0.1 \
	title sprintf("Principle (1): S(emb) ≪ S(qk) < S(ffn) < S(vo) ≪ S(norm)\nat step %s: %s: %s", \
		P[1], P[2], P[3]) noenhanced

# left: S per type, the axis fitted to the values in whole decades
set logscale y
set format y "10^{%L}"
set yrange [10**floor(log10(S_min / 2)):10**ceil(log10(S_max * 2))]
set xlabel "block type"
set ylabel "sharpness S = mean of h"
set boxwidth 0.6
set key inside top left
plot _rows using ($2 > 0.5 ? $1 : NaN):3 with boxes linetype 1 title "in Principle (1)", \
     _rows using ($2 > 0.5 ? NaN : $1):3 with boxes linecolor rgb "#999999" title "not in Principle (1)"

# right: the spread of h within each type
set yrange [10**floor(log10(LO_min)):10**ceil(log10(HI_max))]
set ylabel "h of one entry (nonzero entries)"
set key inside bottom right
plot _rows using 1:(10**$4):(10**$5):(10**$6) \
	with yerrorbars linetype 2 pointtype 7 pointsize 1.5 title "median, 10-90%"
unset multiplot
