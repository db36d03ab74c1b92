# esd-layers.gp - a column of sw-spectrum --esd-fit against the layer, a
# panel per role (the roles that have layers, in the table's order), a
# curve per checkpoint (its step), the panels on one value axis: the
# heavy-tail exponent alpha by default, with its standard error as bars
# and WeightWatcher's range of well-trained layers, 2 to 6, dashed. Rows
# whose warn column is not empty (the fit is not to be trusted) are drawn
# with open markers. The embedding and the head (layer -1) are left out.
#   sw-spectrum --esd-fit run/ckpt-000100.h5 run/ckpt-001000.h5 > e.tsv
#   gnuplot -e "in='e.tsv'; out='esd-layers.png'" plots/esd-layers.gp
#   gnuplot -e "in='e.tsv'; out='esd-layers.png'; ycol=14" plots/esd-layers.gp
# ycol: the number of the column drawn (sw-plot --column gives it from the
# column's name); without it, alpha.
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# the column by its number (only numbers go into the commands below), its
# name from the header through awk (a string gnuplot shows, never runs)
_yc = exists("ycol") ? int(ycol) : 0
if (_yc <= 0) { _yc = int(system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"alpha\") k = i; print k + 0; exit }' '%s'", in))) }
if (_yc <= 0) { print "no column alpha in the table (sw-spectrum --esd-fit prints it)"; exit status 65 }
_yname = system(sprintf("awk -F'\t' -v n=%d 'NR == 1 { print $n; exit }' '%s'", _yc, in))
_isalpha = int(system(sprintf("awk -F'\t' -v n=%d 'NR == 1 { print ($n == \"alpha\") + 0; exit }' '%s'", _yc, in)))
_se = _isalpha && hascol("alpha_se")
_warn = hascol("warn")
# the layer rows' extent: layers, values (with the error bars)
_mm = system(sprintf("awk -F'\t' -v y=%d -v a=%d 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c[\"layer\"] + 0 >= 0 && $y != \"\" && $y == $y + 0 { v = $y + 0; e = (\"alpha_se\" in c && a && $c[\"alpha_se\"] != \"\") ? $c[\"alpha_se\"] + 0 : 0; l = $c[\"layer\"] + 0; if (!n++) { lo = v - e; hi = v + e; l0 = l; l1 = l } if (v - e < lo) lo = v - e; if (v + e > hi) hi = v + e; if (l < l0) l0 = l; if (l > l1) l1 = l } END { printf \"%%d %%.17g %%.17g %%d %%d\", n, lo, hi, l0, l1 }' '%s'", _yc, _isalpha, in))
if (int(word(_mm, 1)) == 0) { print "no rows of a layer's matrix with a value to plot"; exit status 65 }
_ylo = real(word(_mm, 2)); _yhi = real(word(_mm, 3)); _l0 = int(word(_mm, 4)); _l1 = int(word(_mm, 5))
# the roles that have layers, in order of first appearance, and the
# checkpoints (their labels: the step, or the file's name)
_lines = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c[\"layer\"] + 0 >= 0 && !s[$c[\"role\"]]++ { print $c[\"role\"] } END { print \"#\" }' '%s'", in))
call DIR."lines.gp" "RV"
_lines = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } !s[$c[\"file\"]]++ { n++; F[n] = $c[\"file\"]; S[n] = $c[\"step\"]; if (!(S[n] in st)) { st[S[n]] = 1; ns++ } } END { for (i = 1; i <= n; i++) { l = F[i]; sub(\"^.*/\", \"\", l); print (ns == n && S[i] != \"\" ? \"step \" S[i] : l) } print \"#\" }' '%s'", in))
call DIR."lines.gp" "FV"
_np = RV_n
_nc = _np <= 3 ? _np : (_np <= 4 ? 2 : (_np <= 8 ? int(ceil(_np / 2.0)) : int(ceil(_np / 3.0))))
_nr = int(ceil(real(_np) / _nc))
if (_isalpha) { _ylo = _ylo < 2 ? _ylo : 2; _yhi = _yhi > 6 ? _yhi : 6 }
_dy = _yhi > _ylo ? 0.08 * (_yhi - _ylo) : 1
set yrange [_ylo - _dy:_yhi + _dy]
set xrange [_l0 - 0.5:_l1 + 0.5]
set xtics 1
if (_l1 - _l0 > 8) { set xtics int(ceil((_l1 - _l0) / 8.0)) }
set multiplot layout _nr,_nc margins 0.08,0.84,0.12,0.88 spacing 0.05,0.17 \
	title (_isalpha ? "heavy-tail exponent α of each layer's matrices (WeightWatcher's 2–6 dashed)" : _yname." of each layer's matrices") noenhanced
do for [_p = 1:_np] {
	if (_p == 1) {
		set key at screen 0.99, screen 0.88 top right title "checkpoint" noenhanced
	} else {
		unset key
	}
	set title RV[_p] noenhanced
	set xlabel ((_p - 1) / _nc == _nr - 1 || _p + _nc > _np ? "layer" : "")
	if ((_p - 1) % _nc == 0) {
		set ylabel (_isalpha ? "α (bars: ± its standard error)" : _yname) noenhanced
		set format y "%g"
	} else {
		unset ylabel
		set format y ""
	}
	_rsel = sprintf("%d", _p)
	# each checkpoint's rows of this role: layer, value, error, warned
	plot for [_i = 1:FV_n] sprintf("< awk -F'\t' -v r=%d -v f=%d -v y=%d -v a=%d 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c[\"layer\"] + 0 >= 0 { if (!($c[\"role\"] in R)) R[$c[\"role\"]] = ++nr; if (!($c[\"file\"] in F)) F[$c[\"file\"]] = ++nf; if (R[$c[\"role\"]] == r && F[$c[\"file\"]] == f) print $c[\"layer\"] \"\t\" $y \"\t\" ((\"alpha_se\" in c && a) ? $c[\"alpha_se\"] : 0) \"\t\" ((\"warn\" in c && $c[\"warn\"] != \"\") ? 1 : 0) }' '%s'", _p, _i, _yc, _isalpha, in) \
		using 1:($4 == 0 ? $2 : NaN):($3 > 0 ? $3 : 0) with yerrorlines linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title FV[_i], \
	     for [_i = 1:FV_n] sprintf("< awk -F'\t' -v r=%d -v f=%d -v y=%d -v a=%d 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c[\"layer\"] + 0 >= 0 { if (!($c[\"role\"] in R)) R[$c[\"role\"]] = ++nr; if (!($c[\"file\"] in F)) F[$c[\"file\"]] = ++nf; if (R[$c[\"role\"]] == r && F[$c[\"file\"]] == f) print $c[\"layer\"] \"\t\" $y \"\t\" ((\"warn\" in c && $c[\"warn\"] != \"\") ? 1 : 0) }' '%s'", _p, _i, _yc, _isalpha, in) \
		using 1:($3 == 1 ? $2 : NaN) with points linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] - 1 notitle, \
	     (_isalpha ? 2 : NaN) with lines linetype 7 dashtype 2 linewidth 1 notitle, \
	     (_isalpha ? 6 : NaN) with lines linetype 7 dashtype 2 linewidth 1 notitle
	call DIR."check.gp" "esd-layers" "-"
}
unset multiplot
