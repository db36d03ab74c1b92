# esd.gp - the empirical spectral density of sigma_i on log-spaced bins,
# one curve per file (several files) or per matrix (one file).
#   sw-spectrum --hist 40 --role down run/ckpt-002000.h5 > h.tsv
#   gnuplot -e "in='h.tsv'; out='esd.png'" plots/esd.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"
set logscale x
set format x "10^{%L}"
set xlabel "{/Symbol s}"
set ylabel "density"
_by = words(groups("file")) > 1 ? "file" : "name"
set key title _by noenhanced
call DIR."grouped.gp" "lo" "density" _by "steps"
