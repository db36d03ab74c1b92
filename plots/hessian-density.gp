# hessian-density.gp - the spectral density of the loss Hessian per block
# type, log scale (Zhang et al., "Why transformers need Adam: a Hessian
# perspective", their per-block figures), one curve per block: SLQ's
# Gaussian-smoothed density from sw-hessian --density --grid.
#   sw-hessian --data corpus.txt --density --grid 400 run/ckpt-002000.h5 > d.tsv
#   gnuplot -e "in='d.tsv'; out='hessian-density.png'" plots/hessian-density.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

set logscale y
set format y "10^{%L}"
# six decades below the highest peak: the Gaussian tails fall to 0 beyond
_mx = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"density\") c = i; next } c && $c + 0 > hi { hi = $c + 0 } END { printf \"%%.17g\", (hi > 0 ? hi : 1) }' '%s'", in))
set yrange [real(_mx) * 1e-6:real(_mx) * 3]
set xlabel "eigenvalue λ of the block's Hessian"
set ylabel "density (SLQ, Gaussian-smoothed)"
set key title "block"
call DIR."grouped.gp" "lambda" "density" "block" "lines"
