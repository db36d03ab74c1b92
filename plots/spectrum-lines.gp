# spectrum-lines.gp - singular values against their index, log-log, one
# curve per file and matrix, the key saying what differs between them (the
# step, the run, the matrix) and the title what they share (common.gp's
# curves), under what the matrix is in words where it is one Llama matrix
# ("layer 1 MLP down projection"); called by spectrum.gp and
# spectrum-normalized.gp with the y label as ARG1 and where the key goes
# as ARG2 (a literal: "outside" or "inside").
_lines = curves(in)
call DIR."lines.gp" "C"
_nc = C_n - 2
if (_nc < 1) { print "no rows to plot"; exit status 65 }
_lines = matrixwords(in)
call DIR."lines.gp" "MW"
_mw = MW_n > 0 ? MW[1] : ""
set title (_mw eq "" ? C[_nc + 2] : C[_nc + 2] eq "" ? _mw : _mw."\n".C[_nc + 2]) noenhanced
set key title C[_nc + 1] noenhanced
if (ARG2 eq "inside") { set key inside bottom left Left reverse samplen 1.5 }
if (_nc == 1) { unset key }
# x: 1 to the number of values; y: fitted to the values, four or more
# labelled ticks and one beyond the data at either end (no empty decade)
stats in using "index" name "IX" nooutput
stats in using ((column("sigma") > 0) ? column("sigma") : NaN) name "SG" nooutput
set logscale xy
set xrange [1:IX_max > 1 ? IX_max : 2]
call DIR."logtics.gp" "x" 1 IX_max
set format y "10^{%L}"
call DIR."logtics.gp" "y" SG_min SG_max
set yrange [(SG_min / 1.1 < LT_BELOW ? SG_min / 1.1 : LT_BELOW):(SG_max * 1.1 > LT_ABOVE ? SG_max * 1.1 : LT_ABOVE)]
set xlabel "index i"
set ylabel ARG1
plot for [_i = 1:_nc] blocks("file name", "index sigma", _i) using 1:2 with lines \
	linetype (_i - 1) % 8 + 1 title C[_i]
call DIR."check.gp" "spectrum" "xy"
