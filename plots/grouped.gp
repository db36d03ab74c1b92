# grouped.gp - one curve per value of a column:
#   call DIR."grouped.gp" XCOL YCOL GROUPCOL STYLE
# plots column YCOL against XCOL of `in`, one curve per distinct value of
# GROUPCOL (in the order they appear), STYLE one of lines, linespoints,
# steps (literals of the caller). The key says the value, or GT[i] when
# the caller filled the array GT (one title per value of groups(GROUPCOL))
# and set GT_OWN = 1. The curves come in the order of groups(GROUPCOL), or
# in the caller's when it filled the array GO (the index in groups() of
# each curve in turn, as blockorder() prints them) and set GO_OWN = 1; the
# colours and markers go by that order.
_gx = ARG1; _gy = ARG2; _gg = ARG3; _gs = ARG4
_lines = groups(_gg)
call DIR."lines.gp" "GV"
if (GV_n == 0) { print "no rows to plot"; exit status 65 }
if (!exists("GT_OWN") || !GT_OWN) {
	array GT[GV_n]
	do for [_i = 1:GV_n] { GT[_i] = GV[_i] }
}
if (!exists("GO_OWN") || !GO_OWN) {
	array GO[GV_n]
	do for [_i = 1:GV_n] { GO[_i] = _i }
}
# only the caller's literals are spliced into the command
_gp = _gs eq "linespoints" ? "pointtype MARK[(_i - 1) % 6 + 1]" : ""
eval sprintf("plot for [_i = 1:GV_n] blocks(_gg, _gx.' '._gy, int(real(GO[_i]))) using 1:2 with %s linetype (_i - 1) %% 8 + 1 %s title GT[int(real(GO[_i]))]", _gs, _gp)
