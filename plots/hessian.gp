# hessian.gp - the loss Hessian per block type over training, from
# sw-hessian on a run's checkpoints: its largest eigenvalue lambda_1 and
# its trace per parameter, a curve per type in Principle (1)'s order as
# the sharpness figures (emb, qk, ffn, vo, norm, out), then "all", the
# whole selection. Both axes linear: a Hessian's eigenvalues and trace
# may be negative.
#   sw-hessian --data corpus.txt run/ckpt-*.h5 > h.tsv
#   gnuplot -e "in='h.tsv'; out='hessian.png'" plots/hessian.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

stats in using "step" name "SX" nooutput
# x from the first checkpoint, not from 0; one checkpoint: a narrow span
_dx = SX_max > SX_min ? 0.04 * (SX_max - SX_min) : 1
set xrange [SX_min - _dx:SX_max + _dx]
set xlabel "step"
if (SX_max == SX_min) { set xtics (int(SX_min)) }
_lines = blockorder("block")
call DIR."lines.gp" "GO"
_lines = groups("block")
call DIR."lines.gp" "GV"
if (GV_n == 0) { print "no rows to plot"; exit status 65 }

set multiplot layout 1,2 margins 0.09,0.86,0.13,0.88 spacing 0.12,0.1 \
	title "the loss Hessian per block type: largest eigenvalue and trace per parameter"
set key outside right top title "block"
set offsets 0, 0, graph 0.08, graph 0.08
set ylabel "largest eigenvalue λ_1"
unset key
plot for [_i = 1:GV_n] blocks("block", "step lambda_1", int(real(GO[_i]))) using 1:2 \
	with linespoints linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title GV[int(real(GO[_i]))]
call DIR."check.gp" "lambda_1" "-"
set key outside right top title "block"
set ylabel "trace per parameter"
plot for [_i = 1:GV_n] blocks("block", "step trace_per_param", int(real(GO[_i]))) using 1:2 \
	with linespoints linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title GV[int(real(GO[_i]))]
call DIR."check.gp" "trace_per_param" "-"
unset multiplot
