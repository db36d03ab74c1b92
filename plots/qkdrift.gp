# qkdrift.gp - the Q/K pair of each layer and head over training: log2 of
# their scale ratio against their product (the multipliers paper's Fig.
# 4a: the product sets the logits, the ratio is free and drifts without
# weight decay), from the effective matrices (our extension). A panel per
# layer on shared axes, a colour per head, each trajectory in step order
# with its last step ringed; over 16 layers one panel, a colour per layer
# and a marker per head. A trace's long trajectories mark about 20 points
# each on their lines.
#   sw-qkdrift run/ckpt-*.h5 > q.tsv       (or run/trace.h5)
#   gnuplot -e "in='q.tsv'; out='qkdrift.png'" plots/qkdrift.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# the trajectories, sorted by layer and head: "layer head" per line (as
# numbers), then "#"
_lines = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } !s[$c[\"layer\"] + 0, $c[\"head\"] + 0]++ { print $c[\"layer\"] + 0, $c[\"head\"] + 0 }' '%s' | sort -k1,1g -k2,2g; echo '#'", in))
call DIR."lines.gp" "Q"
_ng = Q_n
if (_ng < 1) { print "no rows to plot"; exit status 65 }
# shared axes, fitted (before any range is set: stats skip points outside)
stats in using "product" name "PX" nooutput
stats in using "log2_ratio" name "PY" nooutput
if (PX_min <= 0) { print "a Q/K product is not positive"; exit status 65 }
array NR[_ng]
array HEAD[_ng]
array LAYER[_ng]
do for [_i = 1:_ng] {
	LAYER[_i] = int(real(word(Q[_i], 1))); HEAD[_i] = int(real(word(Q[_i], 2)))
	eval sprintf('set table $G%d', _i)
	plot in using (column("step")):(column("product")):(column("log2_ratio")) with table \
		if (column("layer") == LAYER[_i] && column("head") == HEAD[_i])
	unset table
	stats sprintf('$G%d', _i) using 1 name "R" nooutput
	NR[_i] = R_records
}
# points marked on each line: all of a checkpoints' trajectory, about 20 of
# a trace's hundreds
_maxnr = 1
do for [_i = 1:_ng] { if (NR[_i] > _maxnr) { _maxnr = NR[_i] } }
_pi = _maxnr > 40 ? int(_maxnr / 20) : 1
# the layers: each a run of consecutive trajectories, from FIRST[l] to LAST[l]
_nl = 0
do for [_i = 1:_ng] { if (_i == 1 || LAYER[_i] != LAYER[_i - 1]) { _nl = _nl + 1 } }
array FIRST[_nl]
array LAST[_nl]
_l = 0
do for [_i = 1:_ng] {
	if (_i == 1 || LAYER[_i] != LAYER[_i - 1]) { _l = _l + 1; FIRST[_l] = _i }
	LAST[_l] = _i
}
_nh = 1
do for [_i = 1:_ng] { if (HEAD[_i] + 1 > _nh) { _nh = HEAD[_i] + 1 } }

# x in units of 10^e (e from the largest product), so the tick labels are
# short (0.5, 1, 2, 3, not 0.002, 0.003 running into each other in a narrow
# panel); the data columns are scaled as they are drawn
_xe = floor(log10(PX_max))
_xs = 10.0**_xe
set logscale x
set xrange [PX_min / _xs / 1.15:PX_max / _xs * 1.15]
call DIR."logtics.gp" "x" PX_min / _xs / 1.15 PX_max / _xs * 1.15
_dy = PY_max - PY_min + 0.01
set yrange [PY_min - 0.06 * _dy:PY_max + 0.06 * _dy]
_xl = _xe == 0 ? "product ‖Q_h‖_{rms} ‖K_h‖_{rms}" : sprintf("product ‖Q_h‖_{rms} ‖K_h‖_{rms}  (×10^{%d})", _xe)
_yl = "log_2(‖Q_h‖_{rms} / ‖K_h‖_{rms})"
_ring = "last step"
hc(h) = h % 8 + 1
hm(h) = MARK[(h / 8) % 6 + 1]

if (_nl <= 16) {
	_cols = _nl <= 3 ? _nl : _nl <= 4 ? 2 : _nl <= 6 ? 3 : 4
	_rows = int(ceil(_nl / real(_cols)))
	set multiplot layout _rows,_cols margins 0.1,0.8,0.12,0.9 spacing 0.05,0.07 \
		title "Q/K scales per head over training (from the effective matrices; our extension of Fig. 4a)"
	unset key
	do for [_l = 1:_nl] {
		set title sprintf("layer %d", LAYER[FIRST[_l]]) offset 0,-0.8
		if ((_l - 1) % _cols == 0) { set ylabel _yl; set format y "%g" } else { unset ylabel; set format y "" }
		if (_l > _nl - _cols) { set xlabel _xl; set format x "%g" } else { unset xlabel; set format x "" }
		if (_l == _nl) { set key at screen 0.812, 0.9 left top samplen 1.5 }
		plot for [_i = FIRST[_l]:LAST[_l]] sprintf('$G%d', _i) using ($2 / _xs):3 with linespoints \
			linetype hc(HEAD[_i]) pointtype hm(HEAD[_i]) pointsize 0.7 pointinterval _pi notitle, \
		     for [_i = FIRST[_l]:LAST[_l]] sprintf('$G%d', _i) using ($2 / _xs):3 every ::(NR[_i] - 1) \
			with points linetype hc(HEAD[_i]) pointtype 6 pointsize 2.5 notitle, \
		     for [_h = 0:_nh - 1] NaN with linespoints linetype hc(_h) pointtype hm(_h) pointsize 0.7 \
			title sprintf("head %d", _h), \
		     NaN with points linecolor rgb "#000000" pointtype 6 pointsize 2.5 title _ring
		call DIR."check.gp" "layer" "x"
	}
	unset multiplot
} else {
	set xlabel _xl
	set ylabel _yl
	set title "Q/K scales per head over training (from the effective matrices; our extension of Fig. 4a)"
	set key title ""
	plot for [_i = 1:_ng] sprintf('$G%d', _i) using ($2 / _xs):3 with linespoints \
		linetype (LAYER[_i] % 8 + 1) pointtype hm(HEAD[_i] * 8) pointsize 0.7 pointinterval _pi notitle, \
	     for [_i = 1:_ng] sprintf('$G%d', _i) using ($2 / _xs):3 every ::(NR[_i] - 1) \
		with points linetype (LAYER[_i] % 8 + 1) pointtype 6 pointsize 2 notitle, \
	     for [_l = 1:(_nl < 8 ? _nl : 8)] NaN with lines linetype _l title sprintf("layer %d (+8k)", _l - 1), \
	     for [_h = 0:(_nh < 6 ? _nh : 6) - 1] NaN with points linecolor rgb "#555555" pointtype MARK[_h + 1] \
		title sprintf("head %d (+6k)", _h), \
	     NaN with points linecolor rgb "#000000" pointtype 6 pointsize 2 title _ring
	call DIR."check.gp" "layers" "x"
}
