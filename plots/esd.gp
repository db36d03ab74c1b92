# esd.gp - the empirical spectral density of sigma_i on log-spaced bins,
# one outlined histogram per file and matrix, the key saying what differs
# (the step, the run, the matrix) and the title what they share.
#   sw-spectrum --hist 40 --role down --layer 1 run/ckpt-002000.h5 > h.tsv
#   gnuplot -e "in='h.tsv'; out='esd.png'" plots/esd.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

_lines = curves(in)
call DIR."lines.gp" "C"
_nc = C_n - 2
if (_nc < 1) { print "no rows to plot"; exit status 65 }
# x: the bins' span
stats in using "bin_lo" name "LO" nooutput
stats in using "bin_hi" name "HI" nooutput
set title C[_nc + 2] noenhanced
set key inside top right title C[_nc + 1] noenhanced
if (_nc == 1) { unset key }
set logscale x
set xrange [LO_min:HI_max]
call DIR."logtics.gp" "x" LO_min HI_max
set yrange [0:*]
set xlabel "singular value σ"
set ylabel "density p(σ) = count / (n Δσ),  ∫p dσ = 1"
set style fill transparent solid 0.25 border
plot for [_i = 1:_nc] blocks("file name", "bin_lo bin_hi density", _i) using (sqrt($1 * $2)):($3 / 2):1:2:(0):3 \
	with boxxyerror linetype (_i - 1) % 8 + 1 title C[_i]
