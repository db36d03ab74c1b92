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
stats in using "out_norm" name "ON" nooutput

# the loss axis over both losses (either may be empty), with headroom above
# the first point and room for the key
_mm = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == \"loss\") c[1] = i; if ($i == \"val_loss\") c[2] = i } next } { for (j = 1; j <= 2; j++) if (c[j] && $c[j] ~ /^[-+]?[.0-9]/) { v = $c[j] + 0; if (!n++ || v < lo) lo = v; if (n == 1 || v > hi) hi = v } } END { printf \"%%.17g %%.17g\", n ? lo : 0, n ? hi : 1 }' '%s'", in))
_llo = real(word(_mm, 1)); _lhi = real(word(_mm, 2))
_ld = _lhi > _llo ? _lhi - _llo : 1

# wide gaps between the panels: each y label sits clear of its neighbour
set multiplot layout 2,2 margins 0.11,0.97,0.12,0.9 spacing 0.14,0.17 \
	title "training: loss, learning rate, gradient norm and output-layer norm against step"
set key inside top right
set xlabel "step"
set ylabel "loss (nats/token)"
set yrange [_llo - 0.05 * _ld:_lhi + 0.1 * _ld]
plot in using "step":"loss" with lines linetype 1 title "train", \
     in using "step":"val_loss" with points linetype 2 pointtype 7 pointsize 1.3 title "validation"
call DIR."check.gp" "loss" "-"
set ylabel sprintf("learning rate (×10^{%d})", _e)
set yrange [0:(LR_max > 0 ? LR_max / 10**_e * 1.08 : 1)]
plot in using "step":(column("lr") / 10**_e) with lines linetype 3 notitle
call DIR."check.gp" "lr" "-"
set autoscale y
set ylabel "gradient norm (before clipping)"
if (GN_min > 0 && GN_max / GN_min > 10) {
	set logscale y
	set yrange [GN_min / 1.2:GN_max * 1.2]
} else {
	_gd = GN_max > GN_min ? GN_max - GN_min : (GN_max != 0 ? abs(GN_max) : 1)
	set yrange [GN_min - 0.05 * _gd:GN_max + 0.05 * _gd]
}
plot in using "step":"grad_norm" with lines linetype 4 notitle
call DIR."check.gp" "grad_norm" (GN_min > 0 && GN_max / GN_min > 10 ? "y" : "-")
unset logscale y
set autoscale y
set logscale y 2
set format y "2^{%L}"
if (ON_min > 0) {
	set yrange [ON_min / 1.1:ON_max * 1.1]
	call DIR."log2tics.gp" "y" ON_min / 1.1 ON_max * 1.1
}
set ylabel OUTNORM
plot in using "step":"out_norm" with lines linetype 5 notitle
call DIR."check.gp" "out_norm" "y"
unset multiplot
