# sharpness-steps.gp - average sharpness per block type over training
# (the sharpness paper's Fig. 3).
#   sw-sharpness run/ckpt-*.h5 > s.tsv
#   gnuplot -e "in='s.tsv'; out='sharpness-steps.png'" plots/sharpness-steps.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

set logscale y
set format y "10^{%L}"
# the y range fitted to S over every block and step (not gnuplot's whole
# decades, which left half the panel empty)
_mm = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"mean\") c = i; next } c && $c + 0 > 0 { if (!n++ || $c + 0 < lo) lo = $c + 0; if ($c + 0 > hi) hi = $c + 0 } END { printf \"%%.17g %%.17g\", n ? lo : 1e-4, n ? hi : 1e-2 }' '%s'", in))
set yrange [real(word(_mm, 1)) / 1.4:real(word(_mm, 2)) * 1.4]
set xlabel "step"
set ylabel "sharpness S (mean of h)"
set key title "block"
call DIR."grouped.gp" "step" "mean" "block" "linespoints"
