# qkdrift.gp - the Q/K pair of each layer and head over training: log2 of
# their scale ratio against their product (the multipliers paper's Fig. 4a:
# the product sets the logits, the ratio is free and drifts without weight
# decay). One trajectory per layer/head, in step order, its last step ringed.
#   sw-qkdrift run/ckpt-*.h5 > q.tsv
#   gnuplot -e "in='q.tsv'; out='qkdrift.png'" plots/qkdrift.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"
set logscale x
set xlabel "product ||Q_h||_{rms} ||K_h||_{rms}"
set ylabel "log_2(||Q_h||_{rms} / ||K_h||_{rms})"
set key title "layer/head"
_G = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } !s[$c[\"layer\"] \"/\" $c[\"head\"]]++ { print $c[\"layer\"] \"/\" $c[\"head\"] }' '%s' | tr '\\n' ' '", in))
do for [_i = 1:words(_G)] {
	eval sprintf('set table $G%d', _i)
	plot in using (column('step')):(column('product')):(column('log2_ratio')) with table \
		if (strcol('layer')."/".strcol('head') eq word(_G, _i))
	unset table
}
_cmd = "plot "
do for [_i = 1:words(_G)] {
	_cmd = _cmd . sprintf("$G%d using 2:3 with linespoints linetype %d pointsize 0.8 title '%s', ", _i, (_i - 1) % 8 + 1, word(_G, _i))
	_cmd = _cmd . sprintf("$G%d using 2:3 every ::(|$G%d|-1) with points linetype %d pointtype 6 pointsize 2.5 notitle, ", _i, _i, (_i - 1) % 8 + 1)
}
eval _cmd[1:strlen(_cmd)-2]
