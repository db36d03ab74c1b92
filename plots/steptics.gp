# steptics.gp - labelled ticks on a step axis that stay apart in a narrow
# panel: call DIR."steptics.gp" AXIS LO HI [MAX]
# the ticks at multiples of the smallest of 1, 2, 5 times a power of ten
# that puts at most MAX (default 5) of them from LO to HI, labelled as
# whole numbers, from 10000 on in thousands ("20k"); gnuplot's own ticks
# ran together in a half-width panel ("100200300..."). AXIS is a literal
# of the caller (x or x2); only numbers are spliced into the commands.
_ta = ARG1; _tlo = (ARGV[2] + 0.0); _thi = (ARGV[3] + 0.0)
_tmax = ARGC >= 4 ? int((ARGV[4] + 0.0)) : 5
if (_thi > _tlo) {
	_tinc = 0
	do for [_te = floor(log10(_thi - _tlo)) - 2:floor(log10(_thi - _tlo)) + 1] {
		do for [_tm in "1 2 5"] {
			_tv = real(_tm) * 10.0**_te
			if (_tinc == 0 && _tv >= 1 && floor(_thi / _tv) - ceil(_tlo / _tv) + 1 <= _tmax) { _tinc = _tv }
		}
	}
	if (_tinc == 0) { _tinc = 10.0**(floor(log10(_thi - _tlo)) + 1) }
	eval sprintf("set %stics ()", _ta)
	do for [_tk = int(ceil(_tlo / _tinc)):int(floor(_thi / _tinc))] {
		_tv = _tk * _tinc
		_tl = (abs(_tv) >= 10000 && int(_tv) % 1000 == 0) ? sprintf("%dk", int(_tv / 1000)) : sprintf("%d", int(_tv))
		eval sprintf("set %stics add ('%s' %.17g)", _ta, _tl, _tv)
	}
}
