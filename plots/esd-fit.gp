# esd-fit.gp - the empirical spectral density of a matrix's eigenvalues
# lambda = sigma^2 / max(rows, cols) on log-spaced bins, log-log, with the
# power law fitted to its tail (Clauset-Shalizi-Newman, from x_min on) and
# the Marchenko-Pastur bulk, as WeightWatcher draws them: a colour per file
# and matrix, the histogram outlined, the power law solid, the bulk dashed.
#   sw-spectrum --esd-fit --hist 40 --role down --layer 1 run/ckpt-002000.h5 > e.tsv
#   gnuplot -e "in='e.tsv'; out='esd-fit.png'" plots/esd-fit.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

_lines = curves(in)
call DIR."lines.gp" "C"
_nc = C_n - 2
if (_nc < 1) { print "no rows to plot"; exit status 65 }
stats in using "bin_lo" name "LO" nooutput
stats in using "bin_hi" name "HI" nooutput
set title C[_nc + 2] noenhanced
set key inside top right title C[_nc + 1] noenhanced
set logscale xy
set format y "10^{%L}"
set xrange [LO_min:HI_max]
call DIR."logtics.gp" "x" LO_min HI_max
set xlabel "eigenvalue λ = σ² / max(rows, cols)"
set ylabel "density p(λ)"
# the bins drawn from a floor a decade below the smallest density
_mn = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"density\") c = i; next } c && $c + 0 > 0 && (!n++ || $c + 0 < lo) { lo = $c + 0 } END { printf \"%%.17g\", (n ? lo / 10 : 1e-3) }' '%s'", in))
FLOOR = real(_mn)
set yrange [FLOOR:*]
set style fill transparent solid 0.2 border
plot for [_i = 1:_nc] blocks("file name", "bin_lo bin_hi density", _i) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN):1:2:(FLOOR):3 \
	with boxxyerror linetype (_i - 1) % 8 + 1 title C[_i], \
     for [_i = 1:_nc] blocks("file name", "bin_lo bin_hi fit_density", _i) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN) \
	with lines linetype (_i - 1) % 8 + 1 linewidth 3 title "power law", \
     for [_i = 1:_nc] blocks("file name", "bin_lo bin_hi mp_density", _i) using (sqrt($1 * $2)):($3 > 0 ? $3 : NaN) \
	with lines linetype (_i - 1) % 8 + 1 dashtype 2 title "Marchenko-Pastur"
