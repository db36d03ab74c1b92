# sharpness-steps.gp - average sharpness per block type over training
# (the sharpness paper's Fig. 3), the types in Principle (1)'s order as in
# sharpness.gp (emb, qk, ffn, vo, norm, then out).
#   sw-sharpness run/ckpt-*.h5 > s.tsv
#   gnuplot -e "in='s.tsv'; out='sharpness-steps.png'" plots/sharpness-steps.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# (stats skip points outside a range already set: first)
stats in using "step" name "SX" nooutput
set logscale y
set format y "10^{%L}"
# the y range fitted to S over every block and step (not gnuplot's whole
# decades, which left half the panel empty), four or more labelled ticks
# and one beyond the data at either end
_mm = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"mean\") c = i; next } c && $c + 0 > 0 { if (!n++ || $c + 0 < lo) lo = $c + 0; if ($c + 0 > hi) hi = $c + 0 } END { printf \"%%.17g %%.17g\", n ? lo : 1e-4, n ? hi : 1e-2 }' '%s'", in))
# over a few decades in units of 10^e (e from the largest: ticks 0.1, 0.2,
# 0.5, 1, 2), over more at powers of ten
_se = floor(log10(real(word(_mm, 2))))
_ylo = real(word(_mm, 1)) / 10.0**_se; _yhi = real(word(_mm, 2)) / 10.0**_se
call DIR."logtics.gp" "y" _ylo _yhi
if (LT_SET == 1) {
	_se = 0; _ylo = real(word(_mm, 1)); _yhi = real(word(_mm, 2)); LT_BELOW = _ylo; LT_ABOVE = _yhi
}
set yrange [(_ylo / 1.2 < LT_BELOW ? _ylo / 1.2 : LT_BELOW):(_yhi * 1.2 > LT_ABOVE ? _yhi * 1.2 : LT_ABOVE)]
# x from the first checkpoint, not from 0
_dx = SX_max > SX_min ? 0.04 * (SX_max - SX_min) : 1
set xrange [SX_min - _dx:SX_max + _dx]
set xlabel "step"
set ylabel (_se == 0 ? "sharpness S (mean of h)" : sprintf("sharpness S (mean of h, ×10^{%d})", _se))
set key title "block"
_lines = blockorder("block")
call DIR."lines.gp" "GO"
_lines = groups("block")
call DIR."lines.gp" "GV"
if (GV_n == 0) { print "no rows to plot"; exit status 65 }
plot for [_i = 1:GV_n] blocks("block", "step mean", int(real(GO[_i]))) using 1:($2 / 10.0**_se) \
	with linespoints linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title GV[int(real(GO[_i]))]
call DIR."check.gp" "mean" "y"
