# check.gp - for the tests, how a panel came out: with check=1 on
# gnuplot's command line (gnuplot -e "in='t.tsv'; out='f.png'; check=1"
# plots/KIND.gp; sw-plot never sets it, so its figures are the same), after
# each plot one line on stderr, tab-separated:
#   check PANEL LOG XMIN XMAX YMIN YMAX DXMIN DXMAX DYMIN DYMAX
#   call DIR."check.gp" "loss" "-"
# PANEL and LOG (the log axes: x, y, xy or -) are the caller's literals;
# XMIN ... YMAX the axes' ranges as drawn (GPVAL_X_MIN ...), DXMIN ...
# DYMAX the extent of the data drawn within them (GPVAL_DATA_*: a point
# outside a range set is not counted, so a test compares the range with
# the table's own extent). Numbers only; nothing is run.
if (CHECK) {
	print sprintf("check\t%s\t%s\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g", ARG1, ARG2, \
		GPVAL_X_MIN, GPVAL_X_MAX, GPVAL_Y_MIN, GPVAL_Y_MAX, \
		GPVAL_DATA_X_MIN, GPVAL_DATA_X_MAX, GPVAL_DATA_Y_MIN, GPVAL_DATA_Y_MAX)
}
