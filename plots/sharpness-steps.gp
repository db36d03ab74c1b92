# sharpness-steps.gp - average sharpness per block type over training
# (the sharpness paper's Fig. 3).
#   sw-sharpness run/ckpt-*.h5 > s.tsv
#   gnuplot -e "in='s.tsv'; out='sharpness-steps.png'" plots/sharpness-steps.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

set logscale y
set format y "10^{%L}"
set xlabel "step"
set ylabel "sharpness S (mean of h)"
set key title "block"
call DIR."grouped.gp" "step" "mean" "block" "linespoints"
