# transfer-fits.gp - the loss-optimal learning rate eta*(D) and batch size
# B*(D) against the horizon D, log-log, one colour per model size, with the
# power laws sw-transfer --summary fits drawn through them: one exponent
# shared by every model size (least squares of log y on log D, an
# intercept per size), printed on each panel with its standard error.
#   sw-transfer sweep/*/ckpt-*.h5 > g.tsv
#   gnuplot -e "in='g.tsv'; out='transfer-fits.png'" plots/transfer-fits.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

_lines = sorted("d_model")
call DIR."lines.gp" "M"
_nm = M_n
if (_nm < 1) { print "no rows to plot"; exit status 65 }
# (stats skip points outside a set range: all of them first)
stats in using "tokens" name "D" nooutput
stats in using "lr" name "Y1" nooutput
stats in using "batch" name "Y2" nooutput

# The fit of lib/fit.c's fit_line_grouped, in awk: the common slope b of
# log y on log D from the deviations from each size's means; line 1
# "b se n groups", then "d_model intercept" per size (natural logs), then
# "#". se is nan where no degree of freedom is left; b nan where D does
# not vary. Numbers only.
_fit_awk = "NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " \
	. "$c[\"tokens\"] > 0 && $c[y] > 0 { n++; g = $c[\"d_model\"] + 0; if (!(g in cnt)) G[++ng] = g; " \
	. "  X[n] = log($c[\"tokens\"]); Y[n] = log($c[y]); K[n] = g; cnt[g]++; sx[g] += X[n]; sy[g] += Y[n] } " \
	. "END { for (i = 1; i <= n; i++) { g = K[i]; dx = X[i] - sx[g] / cnt[g]; dy = Y[i] - sy[g] / cnt[g]; sxx += dx * dx; sxy += dx * dy } " \
	. "  b = sxx > 0 ? sxy / sxx : \"nan\"; " \
	. "  if (sxx > 0) for (i = 1; i <= n; i++) { g = K[i]; r = (Y[i] - sy[g] / cnt[g]) - b * (X[i] - sx[g] / cnt[g]); rss += r * r } " \
	. "  se = sxx > 0 && n > ng + 1 ? sqrt(rss / (n - ng - 1) / sxx) : \"nan\"; " \
	. "  printf(\"%.17g %.17g %d %d\\n\", b, se, n, ng); " \
	. "  for (j = 1; j <= ng; j++) { g = G[j]; printf(\"%.17g %.17g\\n\", g, (sxx > 0 ? sy[g] / cnt[g] - b * sx[g] / cnt[g] : \"nan\")) } print \"#\" }"

set multiplot layout 1,2 margins 0.1,0.86,0.14,0.92 spacing 0.12
set logscale x 2
set format x "2^{%L}"
set xrange [D_min / 1.3:D_max * 1.3]
set xlabel "horizon D (tokens)"
do for [_p = 1:2] {
	_y = _p == 1 ? "lr" : "batch"
	_lines = system(sprintf("awk -F'\t' -v y='%s' '%s' '%s'", _y, _fit_awk, in))
	call DIR."lines.gp" "F"
	_b = real(word(F[1], 1)); _se = real(word(F[1], 2))
	# each size's line: its intercept, found by its d_model
	icpt(d) = sum [_j = 2:F_n] (real(word(F[_j], 1)) == d ? real(word(F[_j], 2)) : 0)
	has(d) = sum [_j = 2:F_n] (real(word(F[_j], 1)) == d ? 1 : 0)
	_lo = (_p == 1 ? Y1_min : Y2_min) / 1.5; _hi = (_p == 1 ? Y1_max : Y2_max) * 1.5
	set yrange [_lo:_hi]
	set logscale y (_p == 1 ? 10 : 2)
	# ticks at the values found, when few enough to be read
	_lines = sorted(_y)
	call DIR."lines.gp" "V"
	if (V_n <= 6) {
		set ytics ()
		do for [_j = 1:V_n] { set ytics add (gprintf("%.3g", real(V[_j])) real(V[_j])) }
	} else {
		set ytics autofreq
		call DIR."logtics.gp" "y" _lo _hi
	}
	set ylabel (_p == 1 ? "optimal learning rate η*" : "optimal batch size B*")
	unset label
	if (_b == _b) {
		set label 1 sprintf("%s ∝ D^{%.2f ± %s}", _p == 1 ? "η*" : "B*", _b, _se == _se ? sprintf("%.2f", _se) : "?") \
			at graph 0.05, graph 0.07 left front
	} else {
		set label 1 "no power law: one horizon per size" at graph 0.05, graph 0.07 left front
	}
	if (_p == 2) { set key at screen 0.88, 0.92 left top title "d_model" noenhanced } else { unset key }
	plot for [_i = 1:_nm] in using (column("d_model") == real(M[_i]) ? column("tokens") : NaN):(column(_y)) \
		with points linetype (_i - 1) % 8 + 1 pointtype 7 pointsize 1.6 title M[_i], \
	     for [_i = 1:_nm] (_b == _b && has(real(M[_i])) ? exp(icpt(real(M[_i]))) * x**_b : NaN) \
		with lines linetype (_i - 1) % 8 + 1 notitle
}
unset multiplot
