# loss-curves.gp - a loss against the step, a curve per run (the studies'
# comparisons: make blockwise-study's AdamW against AdamW + Blockwise LR,
# a curve per optimizer and seed), the y axis fitted to the curves.
#   printf 'step\tloss\trun\n' >c.tsv; sw-trace --series val_loss T1 ... (one run a block)
#   gnuplot -e "in='c.tsv'; out='loss-curves.png'" plots/loss-curves.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

stats in using "step" name "SX" nooutput
stats in using "loss" name "SY" nooutput
_dx = SX_max > SX_min ? 0.04 * (SX_max - SX_min) : 1
set xrange [SX_min - _dx:SX_max + _dx]
_dy = SY_max > SY_min ? 0.06 * (SY_max - SY_min) : 0.1
set yrange [SY_min - _dy:SY_max + _dy]
set xlabel "step"
set ylabel "loss (nats/token)"
set key inside top right title "run"
call DIR."grouped.gp" "step" "loss" "run" "linespoints"
call DIR."check.gp" "loss" "-"
