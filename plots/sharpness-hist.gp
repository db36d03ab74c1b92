# sharpness-hist.gp - the distribution of log10 h per block type (the
# sharpness paper's Fig. 2 right).
#   sw-sharpness --hist 60 run/ckpt-002000.h5 > h.tsv
#   gnuplot -e "in='h.tsv'; out='sharpness-hist.png'" plots/sharpness-hist.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

set xlabel "log_{10} h"
set ylabel "fraction of the type's nonzero entries"
set key title "block"
call DIR."grouped.gp" "bin_lo" "fraction" "block" "steps"
