# spectrum-lines.gp - singular values against their index, log-log, one
# curve per file (several files) or per matrix (one file); called by
# spectrum.gp and spectrum-normalized.gp with the y label as ARG1.
set logscale xy
set format y "10^{%L}"
set xlabel "index i"
set ylabel ARG1
_by = words(groups("file")) > 1 ? "file" : "name"
set key title _by noenhanced
call DIR."grouped.gp" "index" "sigma" _by "lines"
