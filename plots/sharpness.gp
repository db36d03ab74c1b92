# sharpness.gp - average sharpness per block type (the sharpness paper's
# Fig. 1 left), for the first file of the table. Left: S = mean of the
# diagonal Gauss-Newton estimate h (eq. 4) as points (a bar on a log axis
# has no baseline to start from; S is one number, its spread of h is on
# the right) in Principle (1)'s order emb, qk, ffn, vo, norm (then out,
# mult: outside it), on a log axis fitted to S with ticks beyond it at
# either end, the title saying the expected and the observed order.
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
set multiplot layout 1,2 margins 0.09,0.97,0.13,0.81 spacing 0.1 \
	title sprintf("Principle (1): S(emb) ≪ S(qk) < S(ffn) < S(vo) ≪ S(norm)\nat step %s: %s: %s", \
		P[1], P[2], P[3]) noenhanced

# left: S per type as points, the axis fitted to the values with a tick
# beyond them at either end; over a few
# decades in units of 10^e (e from the largest, so the ticks read 0.2, 0.5,
# 1, 2), over more at powers of ten
_se = S_max > 0 ? floor(log10(S_max)) : 0
_slo = S_min / 10.0**_se; _shi = S_max / 10.0**_se
set logscale y
set format y "10^{%L}"
call DIR."logtics.gp" "y" _slo _shi
if (LT_SET == 1) {
	_se = 0; _slo = S_min; _shi = S_max; LT_BELOW = S_min; LT_ABOVE = S_max
}
set yrange [(_slo / 1.3 < LT_BELOW ? _slo / 1.3 : LT_BELOW):(_shi * 1.3 > LT_ABOVE ? _shi * 1.3 : LT_ABOVE)]
set xlabel "block type"
set ylabel (_se == 0 ? "sharpness S = mean of h" : sprintf("sharpness S = mean of h (×10^{%d})", _se))
# the keys above the panels, clear of the data
set key at graph 0, graph 1.01 left bottom
plot _rows using ($2 > 0.5 ? $1 : NaN):($3 / 10.0**_se) with points linetype 1 pointtype 7 pointsize 2.2 title "in Principle (1)", \
     _rows using ($2 > 0.5 ? NaN : $1):($3 / 10.0**_se) with points linecolor rgb "#777777" pointtype 5 pointsize 2 title "not in Principle (1)"
call DIR."check.gp" "mean" "y"

# right: the spread of h within each type, the axis fitted to it
set ytics autofreq
set format y "10^{%L}"
set yrange [LO_min / 2:HI_max * 2]
set ylabel "h of one entry (nonzero entries)"
set key at graph 1, graph 1.01 right bottom
plot _rows using 1:(10**$4):(10**$5):(10**$6) \
	with yerrorbars linetype 2 pointtype 7 pointsize 1.5 title "median, 10-90%"
call DIR."check.gp" "spread" "y"
unset multiplot
