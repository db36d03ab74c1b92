# sharpness.gp - average sharpness per block type (the sharpness paper's
# Fig. 1 left): bars of S = mean of the diagonal Gauss-Newton estimate h
# (eq. 4), log scale, with the median and 10-90% range of h per type.
#   sw-sharpness run/ckpt-002000.h5 > s.tsv
#   gnuplot -e "in='s.tsv'; out='sharpness.png'" plots/sharpness.gp
# (the first file of the table)
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

_f = word(groups("file"), 1)
set logscale y
set format y "10^{%L}"
set ylabel "sharpness"
set xlabel "block type"
set xrange [-0.6:*]
set boxwidth 0.6
set title "step ".system(sprintf("awk -F'\t' 'NR == 2 { print $2 }' '%s'", in)) noenhanced
plot in using 0:(strcol("file") eq _f ? column("mean") : NaN):xtic(strcol("block")) \
	with boxes linetype 1 title "S (mean of h)", \
     in using 0:(strcol("file") eq _f ? 10**column("median_log10") : NaN):(10**column("q10_log10")):(10**column("q90_log10")) \
	with yerrorbars linetype 2 pointtype 7 title "median, 10-90% of h"
