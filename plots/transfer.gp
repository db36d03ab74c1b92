# transfer.gp - loss against the output layer's norm ||W_out||_{RMS->inf}
# for every run of a sweep (the optimal-norm paper's Fig. 1): a panel per
# horizon D (tokens) on one norm axis, a colour per learning rate (an
# ordered scale beyond eight rates), a marker
# per batch size, the loss-optimal run of each horizon ringed and its norm
# marked, so the norm transfer (the same optimal norm at every horizon)
# reads across the panels.
#   sw-transfer --table sweep/*/ckpt-*.h5 > t.tsv
#   gnuplot -e "in='t.tsv'; out='transfer.png'" plots/transfer.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# the horizons, learning rates and batch sizes, sorted; compared as numbers
_lines = sorted("tokens")
call DIR."lines.gp" "H"
_lines = sorted("lr")
call DIR."lines.gp" "LR"
_lines = sorted("batch")
call DIR."lines.gp" "BT"
_nh = H_n; _nl = LR_n; _nb = BT_n
if (_nh < 1) { print "no rows to plot"; exit status 65 }
# a colour per learning rate: the palette's eight, or for more (a sweep
# whose lr windows move with the batch) an ordered scale, dark to light
# (viridis, its yellow end left out), so no two rates share a colour
array COL[_nl]
_ramp(a, b, t) = int(a + (b - a) * t + 0.5)
do for [_i = 1:_nl] {
	if (_nl <= 8) { COL[_i] = PAL[_i] } else {
		_t = 0.85 * (_i - 1) / (_nl - 1.0) * 4; _k = int(_t); _k = _k > 3 ? 3 : _k; _f = _t - _k
		array _V[5] = [0x440154, 0x3b528b, 0x21918c, 0x5ec962, 0xfde725]
		_a = _V[_k + 1]; _b = _V[_k + 2]
		COL[_i] = sprintf("#%02x%02x%02x", _ramp(int(_a / 65536), int(_b / 65536), _f), \
			_ramp(int(_a / 256) % 256, int(_b / 256) % 256, _f), _ramp(_a % 256, _b % 256, _f))
	}
}
stats in using "out_norm" name "N" nooutput
stats in using "loss" name "L" nooutput
if (N_min <= 0) { print "an output norm is not positive"; exit status 65 }

# each horizon's optimal norm (0: none), before any range is set (stats
# skip points outside a set range)
array OPT[_nh]
do for [_p = 1:_nh] {
	_T = real(H[_p])
	stats in using ((column("tokens") == _T && column("optimal") == 1) ? column("out_norm") : NaN) name "O" nooutput
	OPT[_p] = O_records > 0 ? O_max : 0
}

# the loss the runs are ranked by, in words, from loss_kind (read by awk):
# one kind for every row, or "mixed" (validation where a run has it)
_lk = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"loss_kind\") c = i; next } { k = c ? $c : \"\"; if (NR == 2) v = k; else if (k != v) v = \"mixed\" } END { print v }' '%s'", in))
_ylab = _lk eq "val_loss" ? "validation loss at the horizon (nats/token)" \
	: _lk eq "train_loss" ? "training loss at the horizon (nats/token)" \
	: _lk eq "mixed" ? "loss at the horizon (validation where measured, else training)" \
	: "loss at the horizon (nats/token)"

_cols = _nh <= 4 ? _nh : 4
_rows = int(ceil(_nh / 4.0))
# one norm axis and one loss axis for every panel, labelled at the edges
set multiplot layout _rows,_cols margins 0.1,0.83,0.13,0.92 spacing 0.025,0.14
set logscale x 2
set format x "2^{%L}"
set xrange [N_min / 1.25:N_max * 1.25]
# three or more labelled ticks in every panel, at whole or fractional
# powers of two (a sweep of 2 learning rates spans about one octave)
call DIR."log2tics.gp" "x" N_min / 1.25 N_max * 1.25 3
set yrange [L_min - 0.06 * (L_max - L_min + 0.01):L_max + 0.06 * (L_max - L_min + 0.01)]
set xlabel OUTNORM
unset key
do for [_p = 1:_nh] {
	_T = real(H[_p])
	at(v) = column("tokens") == _T ? v : NaN
	set title sprintf("D = %s tokens", H[_p]) noenhanced
	unset arrow
	unset label
	if (OPT[_p] > 0) {
		set arrow from OPT[_p], graph 0 to OPT[_p], graph 1 nohead dashtype 2 linewidth 1 linecolor rgb "#555555"
		set label sprintf("2^{%.2f}", log(OPT[_p]) / log(2)) at OPT[_p], graph 1 offset 0.5,-1 left
	}
	if (_p == _nh) {
		# the key, right of the panels: lr by colour, batch by marker
		set key at screen 0.845, 0.92 left top title "" samplen 1
	}
	if ((_p - 1) % _cols != 0) { unset ylabel; set format y "" } else { set ylabel _ylab; set format y "%g" }
	plot for [_i = 1:_nl] for [_j = 1:_nb] in \
		using (at(column("lr") == real(LR[_i]) && column("batch") == real(BT[_j]) ? column("out_norm") : NaN)):"loss" \
		with points linecolor rgb COL[_i] pointtype MARK[(_j - 1) % 6 + 1] pointsize 1.6 notitle, \
	     in using (at(column("optimal") == 1 ? column("out_norm") : NaN)):"loss" \
		with points linecolor rgb "#000000" pointtype 6 pointsize 3.5 linewidth 2 notitle, \
	     for [_i = 1:_nl] NaN with points linecolor rgb COL[_i] pointtype 7 pointsize 1.6 title "lr ".LR[_i], \
	     for [_j = 1:_nb] NaN with points linecolor rgb "#555555" pointtype MARK[(_j - 1) % 6 + 1] pointsize 1.6 title "batch ".BT[_j], \
	     NaN with points linecolor rgb "#000000" pointtype 6 pointsize 3.5 linewidth 2 title "optimum"
	call DIR."check.gp" "horizon" "x"
}
unset multiplot
