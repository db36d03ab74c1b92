# residual.gp - RMS of the residual stream entering each layer (or of each
# attention or MLP output) over training, the multipliers paper's Fig. 4b.
#   sw-trace --series residual_rms run/trace.h5 > r.tsv     (or attn_out_rms, mlp_out_rms)
#   gnuplot -e "in='r.tsv'; out='residual.png'" plots/residual.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# the series: the part before the dot of the second column's name
_nc = int(system(sprintf("awk -F'\t' '{ print NF; exit }' '%s'", in)))
_what = system(sprintf("awk -F'\t' '{ sub(/[.].*/, \"\", $2); print $2; exit }' '%s'", in))
if (_nc < 2) { print "no series to plot: the table has one column"; exit status 65 }
_label = _what eq "residual_rms" ? "RMS of the residual stream entering the layer" \
	: _what eq "attn_out_rms" ? "RMS of the attention block's output" \
	: _what eq "mlp_out_rms" ? "RMS of the MLP block's output" \
	: _what eq "sublayer_gain" ? "gain of the sublayer, ‖y‖_{rms} / ‖x‖_{rms}" \
	: _what eq "weight_rms" ? "RMS of the weight matrix" \
	: _what eq "q_head_rms" ? "RMS of each head's query" \
	: _what eq "k_head_rms" ? "RMS of each head's key" : ""
if (_label eq "") {
	set ylabel _what noenhanced
} else {
	set ylabel _label
}
set xlabel "step"
set logscale y
# readable ticks when the values span little: their range over every column
_mm = system(sprintf("awk -F'\t' 'NR > 1 { for (i = 2; i <= NF; i++) if ($i + 0 > 0) { if (!n++ || $i + 0 < lo) lo = $i + 0; if ($i + 0 > hi) hi = $i + 0 } } END { printf \"%%.17g %%.17g\", n ? lo : 1, n ? hi : 10 }' '%s'", in))
# and a tick beyond the data at either end (so 6.5 has 10 above it, not
# only 5 below)
_rlo = real(word(_mm, 1)); _rhi = real(word(_mm, 2))
call DIR."logtics.gp" "y" _rlo _rhi
set yrange [(_rlo / 1.15 < LT_BELOW ? _rlo / 1.15 : LT_BELOW):(_rhi * 1.15 > LT_ABOVE ? _rhi * 1.15 : LT_ABOVE)]
# layer 0's input is the embedding's output
set key title (_what eq "residual_rms" ? "entering layer" : "layer")
# the key from the header (read by awk): "residual_rms.layer3" reads "3",
# "residual_rms.final" "after the last"
_lines = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 2; i <= NF; i++) print $i; print \"#\"; exit }' '%s'", in))
call DIR."lines.gp" "HD"
_t(h) = strstrt(h, ".") > 0 ? h[strstrt(h, ".") + 1:] : h
_short(h) = _t(h) eq "final" ? "after the last" \
	: _t(h) eq "layer0" && _what eq "residual_rms" ? "0 (embedding output)" \
	: _t(h)[1:5] eq "layer" ? _t(h)[6:] : _t(h)
plot for [i = 2:_nc] in using 1:i with lines linetype ((i - 2) % 8 + 1) title _short(HD[i - 1])
call DIR."check.gp" "residual" "y"
