# training.gp - training curves from a trace: loss and validation loss,
# learning rate, gradient norm, and the output layer's norm.
#   sw-trace --series loss,val_loss,lr,grad_norm,out_norm run/trace.h5 > t.tsv
#   gnuplot -e "in='t.tsv'; out='training.png'" plots/training.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

set multiplot layout 2,2 margins 0.1,0.97,0.12,0.96 spacing 0.11,0.16
set key inside top right
set xlabel "step"
set ylabel "loss (nats/token)"
plot in using "step":"loss" with lines linetype 1 title "train", \
     in using "step":"val_loss" with points linetype 2 pointsize 1.5 title "validation"
set ylabel "learning rate"
set format y "%.1e"
plot in using "step":"lr" with lines linetype 3 notitle
set format y "%g"
set logscale y
set ylabel "gradient norm (before clipping)"
plot in using "step":"grad_norm" with lines linetype 4 notitle
set logscale y 2
set ylabel "||W_{out}||_{RMS->inf}"
plot in using "step":"out_norm" with lines linetype 5 notitle
unset multiplot
