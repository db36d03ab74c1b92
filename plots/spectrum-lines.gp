# spectrum-lines.gp - singular values against their index, log-log, one
# curve per file and matrix, the key saying what differs between them (the
# step, the run, the matrix) and the title what they share (common.gp's
# curves); called by spectrum.gp and spectrum-normalized.gp with the y
# label as ARG1.
_lines = curves(in)
call DIR."lines.gp" "C"
_nc = C_n - 2
if (_nc < 1) { print "no rows to plot"; exit status 65 }
set title C[_nc + 2] noenhanced
set key title C[_nc + 1] noenhanced
if (_nc == 1) { unset key }
# x: 1 to the number of values
stats in using "index" name "IX" nooutput
set logscale xy
set xrange [1:IX_max > 1 ? IX_max : 2]
call DIR."logtics.gp" "x" 1 IX_max
set format y "10^{%L}"
set xlabel "index i"
set ylabel ARG1
plot for [_i = 1:_nc] blocks("file name", "index sigma", _i) using 1:2 with lines \
	linetype (_i - 1) % 8 + 1 title C[_i]
