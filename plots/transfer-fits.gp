# transfer-fits.gp - the loss-optimal learning rate eta*(D) and batch size
# B*(D) against the horizon D, log-log, one colour per model size, with the
# power laws sw-transfer --summary fits drawn through them: one exponent
# shared by every model size (least squares of log y on log D, an
# intercept per size), printed on each panel with its standard error.
# Only the groups whose optimal learning rate is bracketed (the table's
# bracketed column: a smaller and a larger lr beside it) are fitted: an
# optimum at the edge of the grid is a bound, drawn open and named in the
# key (with every group bracketed the exponents are --summary's). No line
# is drawn where nothing is left to fit or where the optimum is the same
# at every horizon of every size (a grid value: an exponent 0 ± 0 says
# nothing).
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

# The fit of lib/analysis/fit.c's fit_line_grouped, in awk, over the bracketed
# groups (all where the table has no bracketed column): the common slope b
# of log y on log D from the deviations from each size's means; line 1
# "b se n groups flat unbracketed", then "d_model intercept" per size
# (natural logs), then "#". se is nan where no degree of freedom is left;
# b nan where D does not vary; flat 1 where y does not vary within any
# size. Numbers only ("nan" printed as a word: awks differ on %g of it).
_fit_awk = "NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " \
	. "(\"bracketed\" in c) && $c[\"bracketed\"] != \"\" && $c[\"bracketed\"] + 0 != 1 { nu++; next } " \
	. "$c[\"tokens\"] > 0 && $c[y] > 0 { n++; g = $c[\"d_model\"] + 0; if (!(g in cnt)) G[++ng] = g; " \
	. "  X[n] = log($c[\"tokens\"]); Y[n] = log($c[y]); K[n] = g; cnt[g]++; sx[g] += X[n]; sy[g] += Y[n] } " \
	. "END { for (i = 1; i <= n; i++) { g = K[i]; dx = X[i] - sx[g] / cnt[g]; dy = Y[i] - sy[g] / cnt[g]; sxx += dx * dx; sxy += dx * dy; syy += dy * dy } " \
	. "  if (sxx > 0) b = sxy / sxx; " \
	. "  if (sxx > 0) for (i = 1; i <= n; i++) { g = K[i]; r = (Y[i] - sy[g] / cnt[g]) - b * (X[i] - sx[g] / cnt[g]); rss += r * r } " \
	. "  printf(\"%s %s %d %d %d %d\\n\", (sxx > 0 ? sprintf(\"%.17g\", b) : \"nan\"), " \
	. "    (sxx > 0 && n > ng + 1 ? sprintf(\"%.17g\", sqrt(rss / (n - ng - 1) / sxx)) : \"nan\"), n, ng, (n > 0 && syy == 0), nu); " \
	. "  for (j = 1; j <= ng; j++) { g = G[j]; printf(\"%.17g %s\\n\", g, (sxx > 0 ? sprintf(\"%.17g\", sy[g] / cnt[g] - b * sx[g] / cnt[g]) : \"nan\")) } print \"#\" }"
# a row's bracketed: 1, 0, or 1 where the table says nothing (an empty
# cell is read as missing: the point is then not drawn at all)
_hasbr = int(system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"bracketed\") k = 1; print k + 0; exit }' '%s'", in)))
br(dummy) = _hasbr ? (column("bracketed") == 0 ? 0 : 1) : 1

# a title above, the two panels, the key right beside them
set multiplot title "loss-optimal learning rate η* and batch size B* against the horizon D"
set tmargin at screen 0.9
set bmargin at screen 0.14
unset key
set logscale x 2
set format x "2^{%L}"
set xrange [D_min / 1.3:D_max * 1.3]
set xlabel "horizon D (tokens)"
_anyunb = 0; _anyfit = 0
do for [_p = 1:2] {
	_y = _p == 1 ? "lr" : "batch"
	if (_p == 1) { set lmargin at screen 0.1; set rmargin at screen 0.41 } \
	else { set lmargin at screen 0.54; set rmargin at screen 0.85 }
	_lines = system(sprintf("awk -F'\t' -v y='%s' '%s' '%s'", _y, _fit_awk, in))
	call DIR."lines.gp" "F"
	_b = real(word(F[1], 1)); _se = real(word(F[1], 2)); _fn = int(real(word(F[1], 3)))
	_flat = int(real(word(F[1], 5))); _nu = int(real(word(F[1], 6)))
	if (_nu > 0) { _anyunb = 1 }
	# each size's line: its intercept, found by its d_model
	icpt(d) = sum [_j = 2:F_n] (real(word(F[_j], 1)) == d ? real(word(F[_j], 2)) : 0)
	has(d) = sum [_j = 2:F_n] (real(word(F[_j], 1)) == d ? 1 : 0)
	_draw = _b == _b && !_flat
	if (_draw) { _anyfit = 1 }
	# the learning rate in units of 10^e (e from the largest), so the tick
	# labels are short: 1.5, 2, 3, 5 (×10^-3)
	_sc = _p == 1 ? 10.0**floor(log10(Y1_max)) : 1
	_lo = (_p == 1 ? Y1_min : Y2_min) / _sc / 1.5; _hi = (_p == 1 ? Y1_max : Y2_max) / _sc * 1.5
	set logscale y (_p == 1 ? 10 : 2)
	if (_p == 1) {
		# four or more labelled ticks
		set ytics autofreq
		set format y "%g"
		call DIR."logtics.gp" "y" _lo _hi
	} else {
		# batch sizes: at least three octaves, ticks at 2^k and 3·2^(k-1)
		# (2, 3, 4, 6, 8, ...) where whole powers alone are too few
		if (_hi / _lo < 8) { _c = sqrt(_hi * _lo); _lo = _c / sqrt(8.0); _hi = _c * sqrt(8.0) }
		set ytics ()
		_bk = floor(log(_hi) / log(2) + 1e-9) - ceil(log(_lo) / log(2) - 1e-9) + 1
		do for [_k = floor(log(_lo) / log(2)):ceil(log(_hi) / log(2))] {
			set ytics add (sprintf("%g", 2.0**_k) 2.0**_k)
			if (_bk < 4) { set ytics add (sprintf("%g", 1.5 * 2.0**_k) 1.5 * 2.0**_k) }
		}
	}
	set yrange [_lo:_hi]
	set ylabel (_p == 2 ? "optimal batch size B*" : _sc == 1 ? "optimal learning rate η*" \
		: sprintf("optimal learning rate η* (×10^{%d})", floor(log10(Y1_max))))
	unset label
	_sym = _p == 1 ? "η*" : "B*"
	if (_nu > 0 && _p == 1) {
		set label 2 sprintf("open: η* at the lr grid's\nedge, a bound (%d not fitted)", _nu) at graph 0.97, graph 0.95 right front
	}
	if (_draw) {
		set label 1 sprintf("%s ∝ D^{%.2f ± %s}%s", _sym, _b, _se == _se ? sprintf("%.2f", _se) : "?", \
			_nu > 0 ? sprintf("\nover the %d bracketed optima (filled)", _fn) : "") at graph 0.05, graph 0.1 left front
	} else {
		if (_fn == 0) {
			set label 1 "no optimum bracketed:\nno power law" at graph 0.05, graph 0.1 left front
		} else { if (_flat) {
			set label 1 sprintf("%s the same at every horizon\n(a grid value): no power law", _sym) \
				at graph 0.05, graph 0.1 left front
		} else {
			set label 1 "one horizon per size:\nno power law" at graph 0.05, graph 0.1 left front
		} }
	}
	plot for [_i = 1:_nm] in using (column("d_model") == real(M[_i]) && br(0) ? column("tokens") : NaN):(column(_y) / _sc) \
		with points linetype (_i - 1) % 8 + 1 pointtype 7 pointsize 1.6 notitle, \
	     for [_i = 1:_nm] in using (column("d_model") == real(M[_i]) && !br(0) ? column("tokens") : NaN):(column(_y) / _sc) \
		with points linetype (_i - 1) % 8 + 1 pointtype 6 pointsize 1.8 notitle, \
	     for [_i = 1:_nm] (_draw && has(real(M[_i])) ? exp(icpt(real(M[_i]))) * x**_b / _sc : NaN) \
		with lines linetype (_i - 1) % 8 + 1 notitle
	call DIR."check.gp" _y "xy"
}
# the key, beside the panels (an empty plot over the figure): a colour
# per model size, the open marker for an optimum that is only a bound (the
# η* panel's label says which), the line for the fit
unset label
unset border
unset tics
unset xlabel
unset ylabel
unset grid
unset logscale
set lmargin at screen 0.86
set rmargin at screen 0.99
set xrange [0:1]
set yrange [0:1]
set key at screen 0.86, 0.9 left top vertical title "d_model" left noenhanced
plot for [_i = 1:_nm] NaN with points linetype (_i - 1) % 8 + 1 pointtype 7 pointsize 1.6 title M[_i], \
     for [_u = 1:_anyunb] NaN with points linecolor rgb "#000000" pointtype 6 pointsize 1.8 title "not fitted", \
     for [_u = 1:_anyfit] NaN with lines linecolor rgb "#000000" title "fit"
unset multiplot
