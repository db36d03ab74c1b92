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
