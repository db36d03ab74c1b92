# compare.gp - how each layer's matrices changed between checkpoints, from
# sw-compare: a column of its table (rel_change, ||B - A||_F / ||A||_F,
# by default) against the layer, a curve per role, a panel per pair of
# checkpoints compared (step A -> step B, the table's order), the panels
# on one value axis (logarithmic when the values are positive and span
# more than a decade). The matrices outside the layers (the embedding,
# the head: layer -1) are drawn at the left, at the tick "none".
#   sw-compare run/ckpt-000100.h5 run/ckpt-000500.h5 run/ckpt-001000.h5 > c.tsv
#   gnuplot -e "in='c.tsv'; out='compare.png'" plots/compare.gp
# ycol: the number of the column drawn (sw-plot --column gives it from its
# name); without it, rel_change.
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# the column by its number (only numbers go into the commands below), its
# name from the header through awk (a string gnuplot shows, never runs)
_yc = exists("ycol") ? int(ycol) : 0
if (_yc <= 0) { _yc = int(system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"rel_change\") k = i; print k + 0; exit }' '%s'", in))) }
if (_yc <= 0) { print "no column rel_change in the table (sw-compare prints it)"; exit status 65 }
_yname = system(sprintf("awk -F'\t' -v n=%d 'NR == 1 { print $n; exit }' '%s'", _yc, in))
_isrel = int(system(sprintf("awk -F'\t' -v n=%d 'NR == 1 { print ($n == \"rel_change\") + 0; exit }' '%s'", _yc, in)))
# the values' and layers' extent
_mm = system(sprintf("awk -F'\t' -v y=%d 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $y != \"\" && $y == $y + 0 { v = $y + 0; l = $c[\"layer\"] + 0; if (!n++) { lo = v; hi = v; l0 = l; l1 = l } if (v < lo) lo = v; if (v > hi) hi = v; if (l < l0) l0 = l; if (l > l1) l1 = l } END { printf \"%%d %%.17g %%.17g %%d %%d\", n, lo, hi, l0, l1 }' '%s'", _yc, in))
if (int(word(_mm, 1)) == 0) { print "no rows with a value to plot"; exit status 65 }
_ylo = real(word(_mm, 2)); _yhi = real(word(_mm, 3)); _l0 = int(word(_mm, 4)); _l1 = int(word(_mm, 5))
# the pairs compared (their labels) and the roles, in order of appearance
_lines = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { k = $c[\"file_a\"] SUBSEP $c[\"file_b\"]; if (!(k in s)) { s[k] = 1; a = $c[\"step_a\"]; b = $c[\"step_b\"]; fa = $c[\"file_a\"]; fb = $c[\"file_b\"]; sub(\"^.*/\", \"\", fa); sub(\"^.*/\", \"\", fb); print (a != \"\" && b != \"\" ? \"step \" a \" → \" b : fa \" → \" fb) } } END { print \"#\" }' '%s'", in))
call DIR."lines.gp" "PV"
_lines = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } !s[$c[\"role\"]]++ { print $c[\"role\"] } END { print \"#\" }' '%s'", in))
call DIR."lines.gp" "RV"
_np = PV_n
_nc = _np <= 3 ? _np : (_np <= 4 ? 2 : 3)
_nr = int(ceil(real(_np) / _nc))
call DIR."valaxis.gp" "y" _ylo _yhi
set xrange [_l0 - 0.5:_l1 + 0.5]
set xtics 1
if (_l1 - _l0 > 8) { set xtics int(ceil((_l1 - _l0) / 8.0)) }
if (_l0 < 0) { set xtics add ("none" -1) }
set multiplot layout _nr,_nc margins 0.09,0.84,0.12,0.88 spacing 0.06,0.17 \
	title (_isrel ? "relative change of each matrix, ‖B − A‖_F / ‖A‖_F" : _yname." of each matrix, B against A") noenhanced
do for [_p = 1:_np] {
	if (_p == 1) {
		set key at screen 0.99, screen 0.88 top right title "role" noenhanced
	} else {
		unset key
	}
	set title PV[_p] noenhanced
	set xlabel (_p + _nc > _np ? "layer" : "")
	if ((_p - 1) % _nc == 0) {
		set ylabel (_isrel ? "‖B − A‖_F / ‖A‖_F" : _yname) noenhanced
		set format y VA_FMT
	} else {
		unset ylabel
		set format y ""
	}
	# each role's rows of this pair: layer, value
	plot for [_i = 1:RV_n] sprintf("< awk -F'\t' -v p=%d -v r=%d -v y=%d 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { k = $c[\"file_a\"] SUBSEP $c[\"file_b\"]; if (!(k in P)) P[k] = ++np; if (!($c[\"role\"] in R)) R[$c[\"role\"]] = ++nr; if (P[k] == p && R[$c[\"role\"]] == r) print $c[\"layer\"] \"\t\" $y }' '%s'", _p, _i, _yc, in) \
		using 1:2 with linespoints linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title RV[_i]
	call DIR."check.gp" "compare" (VA_LOG ? "y" : "-")
}
unset multiplot
