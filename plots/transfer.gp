# transfer.gp - loss against the output layer's norm ||W_out||_{RMS->inf}
# for every run of a sweep, one colour per horizon D (tokens), the
# loss-optimal run of each horizon ringed (the optimal-norm paper's Fig. 1).
#   sw-transfer --table sweep/*/ckpt-*.h5 > t.tsv
#   gnuplot -e "in='t.tsv'; out='transfer.png'" plots/transfer.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"
set logscale x 2
set format x "2^{%L}"
set xlabel "||W_{out}||_{RMS->inf}"
set ylabel "loss at the horizon (nats/token)"
set key title "tokens D"
_G = groups("tokens")
_cmd = "plot "
do for [_i = 1:words(_G)] {
	_cmd = _cmd . sprintf("in using (strcol('tokens') eq '%s' ? column('out_norm') : NaN):(column('loss')) with points linetype %d pointtype 7 title '%s', ", word(_G, _i), (_i - 1) % 8 + 1, word(_G, _i))
}
_cmd = _cmd . "in using (column('optimal') == 1 ? column('out_norm') : NaN):(column('loss')) with points linetype 7 pointtype 6 pointsize 3.5 linewidth 2 title 'optimum'"
eval _cmd
