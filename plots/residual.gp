# residual.gp - RMS of the residual stream (or of each attention or MLP
# output) per layer over training, the multipliers paper's Fig. 4b.
#   sw-trace --series residual_rms run/trace.h5 > r.tsv     (or attn_out_rms, mlp_out_rms)
#   gnuplot -e "in='r.tsv'; out='residual.png'" plots/residual.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

_nc = int(system(sprintf("head -n 1 '%s' | awk -F'\t' '{ print NF }'", in)))
_what = system(sprintf("head -n 1 '%s' | cut -f2 | sed 's/[.].*//'", in))
set xlabel "step"
set ylabel _what." (RMS)" noenhanced
set logscale y
set key title "layer"
plot for [i = 2:_nc] in using 1:i with lines linetype ((i - 2) % 8 + 1) title (columnhead(i)[strlen(_what) + 2:])
