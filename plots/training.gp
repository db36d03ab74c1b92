# training.gp - training curves from a trace: loss and validation loss,
# learning rate, gradient norm, and the output layer's norm.
#   sw-trace --series loss,val_loss,lr,grad_norm,out_norm run/trace.h5 > t.tsv
#   gnuplot -e "in='t.tsv'; out='training.png'" plots/training.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# the learning rate in units of 10^e, e from its largest value, so the
# ticks read 0, 1, 2, 3 and the label says x10^-3
stats in using "lr" name "LR" nooutput
_e = LR_max > 0 ? floor(log10(LR_max)) : 0
# the gradient norm's axis fitted to it: log when it spans over a decade
stats in using "grad_norm" name "GN" nooutput

# wide gaps between the panels: each y label sits clear of its neighbour
set multiplot layout 2,2 margins 0.09,0.97,0.12,0.97 spacing 0.14,0.17
set key inside top right
set xlabel "step"
set ylabel "loss (nats/token)"
plot in using "step":"loss" with lines linetype 1 title "train", \
     in using "step":"val_loss" with points linetype 2 pointtype 7 pointsize 1.3 title "validation"
set ylabel sprintf("learning rate (×10^{%d})", _e)
set yrange [0:*]
plot in using "step":(column("lr") / 10**_e) with lines linetype 3 notitle
set autoscale y
set ylabel "gradient norm (before clipping)"
if (GN_min > 0 && GN_max / GN_min > 10) {
	set logscale y
	set yrange [GN_min / 1.2:GN_max * 1.2]
} else {
	set yrange [GN_min - 0.05 * (GN_max - GN_min):GN_max + 0.05 * (GN_max - GN_min)]
}
plot in using "step":"grad_norm" with lines linetype 4 notitle
unset logscale y
set autoscale y
set logscale y 2
set format y "2^{%L}"
set ylabel OUTNORM
plot in using "step":"out_norm" with lines linetype 5 notitle
unset multiplot
