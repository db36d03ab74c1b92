# transfer-fits.gp - the loss-optimal learning rate eta*(D) and batch size
# B*(D) against the horizon D, log-log, one colour per model size, with
# least-squares power laws drawn through them (the exponents themselves:
# sw-transfer --summary).
#   sw-transfer sweep/*/ckpt-*.h5 > g.tsv
#   gnuplot -e "in='g.tsv'; out='transfer-fits.png'" plots/transfer-fits.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"
set multiplot layout 1,2 margins 0.11,0.86,0.14,0.92 spacing 0.12
set logscale xy
set xlabel "tokens D"
set format x "10^{%L}"
_G = groups("d_model")
do for [_p = 1:2] {
	_y = _p == 1 ? "lr" : "batch"
	set ylabel (_p == 1 ? "optimal learning rate {/Symbol h}*" : "optimal batch size B*")
	if (_p == 2) { set key outside right top title "d_model" noenhanced } else { unset key }
	_cmd = "plot "
	do for [_i = 1:words(_G)] {
		_d = word(_G, _i)
		_n = int(system(sprintf("awk -F'\t' -v d='%s' 'NR > 1 && $1 == d' '%s' | wc -l", _d, in)))
		_cmd = _cmd . sprintf("in using (strcol('d_model') eq '%s' ? column('tokens') : NaN):(column('%s')) with points linetype %d pointtype 7 title '%s', ", _d, _y, _i, _d)
		if (_n >= 2) {
			# least squares of log y on log D (awk: as sw-transfer fits it)
			_ab = system(sprintf("awk -F'\t' -v d='%s' -v y='%s' 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c[\"d_model\"] == d { x = log($c[\"tokens\"]); v = log($c[y]); n++; sx += x; sy += v; sxx += x * x; sxy += x * v } END { b = (n * sxy - sx * sy) / (n * sxx - sx * sx); printf \"%%.17g %%.17g\", (sy - b * sx) / n, b }' '%s'", _d, _y, in))
			_cmd = _cmd . sprintf("exp(%s) * x**(%s) with lines linetype %d notitle, ", word(_ab, 1), word(_ab, 2), _i)
		}
	}
	eval _cmd[1:strlen(_cmd)-2]
}
unset multiplot
