# hessian.gp - the loss Hessian per block type over training, from
# sw-hessian on a run's checkpoints: its largest eigenvalue lambda_1 and
# its trace per parameter, a curve per type in Principle (1)'s order as
# the sharpness figures (emb, qk, ffn, vo, norm, out), then "all", the
# whole selection. A panel's value axis is logarithmic when its values are
# positive and span more than a decade, else linear (a Hessian's
# eigenvalues and trace may be negative). From sw-hessian --preconditioned
# (its table says eos_adam) the operator is Adam's preconditioned Hessian
# P^-1 H, and the title says so.
#   sw-hessian --data corpus.txt run/ckpt-*.h5 > h.tsv
#   gnuplot -e "in='h.tsv'; out='hessian.png'" plots/hessian.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

stats in using "step" name "SX" nooutput
stats in using "lambda_1" name "L1" nooutput
stats in using "trace_per_param" name "TP" nooutput
# x from the first checkpoint, not from 0; one checkpoint: a narrow span
_dx = SX_max > SX_min ? 0.04 * (SX_max - SX_min) : 1
set xrange [SX_min - _dx:SX_max + _dx]
set xlabel "step"
if (SX_max == SX_min) { set xtics (int(SX_min)) } else { call DIR."steptics.gp" "x" SX_min SX_max 5 }
_lines = blockorder("block")
call DIR."lines.gp" "GO"
_lines = groups("block")
call DIR."lines.gp" "GV"
if (GV_n == 0) { print "no rows to plot"; exit status 65 }
_what = hascol("eos_adam") ? "Adam's preconditioned Hessian P^{-1}H" : "the loss Hessian"

set multiplot layout 1,2 margins 0.1,0.86,0.13,0.88 spacing 0.13,0.1 \
	title _what." per block type: largest eigenvalue and trace per parameter"
unset key
call DIR."valaxis.gp" "y" L1_min L1_max
set ylabel "largest eigenvalue λ_1"
plot for [_i = 1:GV_n] blocks("block", "step lambda_1", int(real(GO[_i]))) using 1:2 \
	with linespoints linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title GV[int(real(GO[_i]))]
call DIR."check.gp" "lambda_1" (VA_LOG ? "y" : "-")
set key outside right top title "block"
call DIR."valaxis.gp" "y" TP_min TP_max
set ylabel "trace per parameter"
plot for [_i = 1:GV_n] blocks("block", "step trace_per_param", int(real(GO[_i]))) using 1:2 \
	with linespoints linetype (_i - 1) % 8 + 1 pointtype MARK[(_i - 1) % 6 + 1] title GV[int(real(GO[_i]))]
call DIR."check.gp" "trace_per_param" (VA_LOG ? "y" : "-")
unset multiplot
