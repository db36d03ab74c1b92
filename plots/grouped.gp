# grouped.gp - one curve per value of a column:
#   call DIR."grouped.gp" XCOL YCOL GROUPCOL STYLE [FILTERCOL FILTERVALUE]
# plots column YCOL against XCOL of `in`, one curve per distinct value of
# GROUPCOL (in the order they appear), optionally only rows whose
# FILTERCOL equals FILTERVALUE. gnuplot breaks a line at every skipped
# point, so each group is first copied into a data block of its own.
_gx = ARG1; _gy = ARG2; _gg = ARG3; _gs = ARG4
_gfc = ARGC >= 6 ? ARG5 : ""; _gfv = ARGC >= 6 ? ARG6 : ""
_G = groups(_gg)
_L = labels(_gg)
if (words(_G) == 0) { print "no rows to plot in ".in; exit status 65 }
do for [_i = 1:words(_G)] {
	eval sprintf('set table $G%d', _i)
	plot in using (column(_gx)):(column(_gy)) with table \
		if (strcol(_gg) eq word(_G, _i) && (_gfc eq "" || strcol(_gfc) eq _gfv))
	unset table
}
_cmd = "plot "
do for [_i = 1:words(_G)] {
	_cmd = _cmd . sprintf("$G%d using 1:2 with %s linetype %d title '%s'%s", _i, _gs, (_i - 1) % 8 + 1, word(_L, _i), _i < words(_G) ? ", " : "")
}
eval _cmd
