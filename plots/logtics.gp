# logtics.gp - readable ticks on a log axis that spans three decades or
# less (where gnuplot would label one power of ten or none):
#   call DIR."logtics.gp" AXIS LO HI
# puts ticks at 1, 2, 5 times each power of ten (1, 2, 3, 5 within about a
# decade, 1, 1.5, 2, 3, 4, 5, 7 within a factor 2.5; so labels stay apart)
# from the one below LO to the one above HI on
# AXIS (x, y, x2, y2: a literal of the caller), labelled with format "%g"
# (a caller may set the format "" after, to keep the ticks unlabelled);
# spans over three decades keep the default ticks.
_la = ARG1; _llo = real(ARG2); _lhi = real(ARG3)
if (_llo > 0 && _lhi > _llo && _lhi / _llo < 1000) {
	eval sprintf("set %stics ()", _la)
	eval sprintf("set format %s '%%g'", _la)
	do for [_le = floor(log10(_llo)):ceil(log10(_lhi))] {
		do for [_lm in (_lhi / _llo < 2.5 ? "1 1.5 2 3 4 5 7" : _lhi / _llo < 12 ? "1 2 3 5" : "1 2 5")] {
			_lv = real(_lm) * 10.0**_le
			if (_lm eq "1" || _le < ceil(log10(_lhi))) {
				eval sprintf("set %stics add (%.17g)", _la, _lv)
			}
		}
	}
}
