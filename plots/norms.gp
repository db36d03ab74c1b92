# norms.gp - the output layer's RMS->inf norm over training, raw and with
# the final norm gain folded in (W_out.diag(gamma), the optimal-norm
# paper's quantity).
#   sw-norms --role lm_head run/ckpt-*.h5 > n.tsv
#   gnuplot -e "in='n.tsv'; out='norms.png'" plots/norms.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

set logscale y 2
set format y "2^{%L}"
# the axes fitted to the data: x from the first checkpoint (not from 0),
# y with ticks at whole or fractional powers of two, four or more on the
# data and one beyond it at either end
stats in using "step" name "SX" nooutput
stats in using "rms_to_inf" name "SY" nooutput
_dx = SX_max > SX_min ? 0.04 * (SX_max - SX_min) : 1
set xrange [SX_min - _dx:SX_max + _dx]
if (SY_min > 0) {
	call DIR."log2tics.gp" "y" SY_min SY_max
	set yrange [(SY_min / 1.1 < LT_BELOW ? SY_min / 1.1 : LT_BELOW):(SY_max * 1.1 > LT_ABOVE ? SY_max * 1.1 : LT_ABOVE)]
}
set xlabel "step"
set ylabel OUTNORM
set key inside bottom right
# the key in words: sw-norms calls them by role
_lines = groups("role")
call DIR."lines.gp" "GV"
array GT[GV_n > 0 ? GV_n : 1]
do for [_i = 1:GV_n] {
	GT[_i] = GV[_i] eq "lm_head" ? "raw" : GV[_i] eq "lm_head_folded" ? "γ-folded: W_out·diag(γ)" : GV[_i]
}
GT_OWN = 1
call DIR."grouped.gp" "step" "rms_to_inf" "role" "linespoints"
call DIR."check.gp" "norms" "y"
