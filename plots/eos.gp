# eos.gp - how close training is to the edge of stability, per block type
# over training: the ratio sw-hessian prints (eos_gd = lambda_1 eta / 2
# for gradient descent, Cohen et al. 2021; eos_adam = lambda_1(P^-1 H) eta
# (1 - beta_1) / (2 + 2 beta_1) for Adam, Cohen et al. 2022), 1 at the
# edge, a curve per type in Principle (1)'s order as hessian.gp, the edge
# drawn as a dashed line. Log y when the ratios span more than a decade;
# a ratio that is empty (the block's tensors had different learning
# rates) or not positive is not drawn.
#   sw-hessian --preconditioned --data corpus.txt run/ckpt-*.h5 > h.tsv
#   gnuplot -e "in='h.tsv'; out='eos.png'" plots/eos.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

_adam = hascol("eos_adam")
_col = _adam ? "eos_adam" : "eos_gd"
stats in using "step" name "SX" nooutput
# the ratios' extent over the positive ones, the edge (1) always in view
_mm = system(sprintf("awk -F'\t' -v c='%s' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } k && $k != \"\" && $k + 0 > 0 { if (!n++ || $k + 0 < lo) lo = $k + 0; if ($k + 0 > hi) hi = $k + 0 } END { printf \"%%d %%.17g %%.17g\", n, n ? lo : 1, n ? hi : 1 }' '%s'", _col, in))
if (int(word(_mm, 1)) == 0) { print "no positive ".(_col)." to plot (the lr column empty?)"; exit status 65 }
_ylo = real(word(_mm, 2)); _yhi = real(word(_mm, 3))
_ylo = _ylo < 1 ? _ylo : 1; _yhi = _yhi > 1 ? _yhi : 1
_dx = SX_max > SX_min ? 0.04 * (SX_max - SX_min) : 1
set xrange [SX_min - _dx:SX_max + _dx]
set xlabel "step"
if (SX_max == SX_min) { set xtics (int(SX_min)) } else { call DIR."steptics.gp" "x" SX_min SX_max 8 }
call DIR."valaxis.gp" "y" _ylo _yhi
if (!VA_LOG) { set yrange [0:_yhi * 1.1] }
set ylabel (_adam ? "λ_1(P^{-1}H) η (1 − β_1) / (2 + 2β_1)" : "λ_1 η / 2")
set title (_adam ? "Adam's edge of stability per block type (1: the edge)" : "gradient descent's edge of stability per block type (1: the edge)")
set key outside right top title "block"
_lines = blockorder("block")
call DIR."lines.gp" "GO"
_lines = groups("block")
call DIR."lines.gp" "GV"
if (GV_n == 0) { print "no rows to plot"; exit status 65 }
plot for [_i = 1:GV_n] blocks("block", "step ".(_col), int(real(GO[_i]))) using 1:($2 > 0 ? $2 : NaN) \
	with linespoints linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title GV[int(real(GO[_i]))], \
     1 with lines linetype 7 dashtype 2 linewidth 1.5 title "the edge"
call DIR."check.gp" "eos" (VA_LOG ? "y" : "-")
