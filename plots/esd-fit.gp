# esd-fit.gp - the empirical spectral density of a matrix's eigenvalues
# lambda = sigma^2 / max(rows, cols) on log-spaced bins, log-log, with the
# power law fitted to its tail (Clauset-Shalizi-Newman, from x_min on) and
# the Marchenko-Pastur bulk, as WeightWatcher draws them: a colour per file
# and matrix, the histogram outlined, the power law solid, the bulk dashed;
# several files or matrices get a panel each on shared axes (overlaid
# histograms hid each other), the key of each saying its alpha when the
# table has that column (sw-spectrum --esd-fit --hist prints it) and
# whether the fit was flagged (warn).
#   sw-spectrum --esd-fit --hist 40 --role down --layer 1 run/ckpt-002000.h5 > e.tsv
#   gnuplot -e "in='e.tsv'; out='esd-fit.png'" plots/esd-fit.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

_lines = curves(in)
call DIR."lines.gp" "C"
_nc = C_n - 2
if (_nc < 1) { print "no rows to plot"; exit status 65 }
stats in using "bin_lo" name "LO" nooutput
stats in using "bin_hi" name "HI" nooutput
# each curve's alpha (a number, or nan) and whether its fit was flagged
_ha = hascol("alpha"); _hw = hascol("warn")
_lines = system(sprintf("awk -F'\t' -v ha=%d -v hw=%d 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { k = $c[\"file\"] SUBSEP $c[\"name\"]; if (!(k in s)) { s[k] = 1; a = ha ? $c[\"alpha\"] : \"\"; w = hw ? $c[\"warn\"] : \"\"; printf \"%%s %%d\\n\", (a != \"\" && a == a + 0) ? a + 0 : \"nan\", w != \"\" } } END { print \"#\" }' '%s'", _ha, _hw, in))
call DIR."lines.gp" "AV"
array FITKEY[_nc]
do for [_i = 1:_nc] {
	_av = real(word(AV[_i], 1))
	FITKEY[_i] = _av == _av ? sprintf("power law, α = %.2f", _av) : "power law"
	if (int(word(AV[_i], 2))) { FITKEY[_i] = FITKEY[_i]." (warn)" }
}
set logscale xy
set format y "10^{%L}"
set xrange [LO_min:HI_max]
# in panels (half as wide or less) two labelled ticks are enough
_lmin = _nc > 1 ? 2 : 4
call DIR."logtics.gp" "x" LO_min HI_max _lmin
# one style for every x label: 10^n, or m×10^n between the powers of ten
if (LT_SET == 1) { set format x "10^{%L}" } else { set format x (LT_SET <= 3 ? "%.0t×10^{%T}" : "%.1t×10^{%T}") }
set xlabel "eigenvalue λ = σ² / max(rows, cols)"
set ylabel "density p(λ)"
# the bins drawn from a floor a decade below the smallest density
_mn = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"density\") c = i; next } c && $c + 0 > 0 && (!n++ || $c + 0 < lo) { lo = $c + 0 } END { printf \"%%.17g\", (n ? lo / 10 : 1e-3) }' '%s'", in))
FLOOR = real(_mn)
set yrange [FLOOR:*]
set style fill transparent solid 0.2 border
if (_nc > 1) {
	_cols = _nc <= 3 ? _nc : (_nc <= 4 ? 2 : 3)
	_rows = int(ceil(real(_nc) / _cols))
	set multiplot layout _rows,_cols margins 0.08,0.97,0.12,0.88 spacing 0.06,0.16 \
		title (C[_nc + 2] eq "" ? "eigenvalue densities" : C[_nc + 2]) noenhanced
	set key inside top right noenhanced noreverse Right samplen 1.5 font ",13"
	do for [_i = 1:_nc] {
		set title C[_i] noenhanced
		set xlabel ((_i + _cols > _nc) ? "eigenvalue λ = σ² / max(rows, cols)" : "")
		if ((_i - 1) % _cols == 0) { set ylabel "density p(λ)" } else { unset ylabel }
		plot blocks("file name", "bin_lo bin_hi density", _i) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN):1:2:(FLOOR):3 \
			with boxxyerror linetype (_i - 1) % 8 + 1 title "histogram", \
		     blocks("file name", "bin_lo bin_hi fit_density", _i) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN) \
			with lines linetype 7 linewidth 3 title FITKEY[_i], \
		     blocks("file name", "bin_lo bin_hi mp_density", _i) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN) \
			with lines linetype 7 dashtype 2 title "Marchenko-Pastur"
		call DIR."check.gp" "esd-fit" "xy"
	}
	unset multiplot
} else {
	set title C[_nc + 2] noenhanced
	set key inside top right noenhanced
	plot blocks("file name", "bin_lo bin_hi density", 1) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN):1:2:(FLOOR):3 \
		with boxxyerror linetype 1 title (C[1] eq "" ? "histogram" : "histogram: ".C[1]), \
	     blocks("file name", "bin_lo bin_hi fit_density", 1) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN) \
		with lines linetype 7 linewidth 3 title FITKEY[1], \
	     blocks("file name", "bin_lo bin_hi mp_density", 1) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN) \
		with lines linetype 7 dashtype 2 title "Marchenko-Pastur"
	call DIR."check.gp" "esd-fit" "xy"
}
