# log2tics.gp - ticks at powers of two on a log-2 axis, as many as can be
# read:
#   call DIR."log2tics.gp" AXIS LO HI [MIN]
# ticks at 2^e for e a multiple of the coarsest of 1, 0.5, 0.25, 0.2, 0.1,
# 0.05 that puts at least MIN (default 4) ticks from LO to HI, on AXIS (x,
# y, x2, y2: a literal of the caller), labelled 2^{e}; over 12 octaves
# gnuplot's own ticks stay (and the caller's format). LT_BELOW and
# LT_ABOVE as in logtics.gp: the ticks at or below LO and at or above HI.
# Only numbers and the literal axis are spliced into the commands.
_la = ARG1; _llo = (ARGV[2] + 0.0); _lhi = (ARGV[3] + 0.0)
_lmin = ARGC >= 4 ? int((ARGV[4] + 0.0)) : 4
LT_BELOW = _llo; LT_ABOVE = _lhi
array _LS2[6] = [1, 0.5, 0.25, 0.2, 0.1, 0.05]
if (_llo > 0 && _lhi > _llo && log(_lhi / _llo) / log(2) <= 12) {
	_l2lo = log(_llo) / log(2); _l2hi = log(_lhi) / log(2)
	_lpick = 0
	do for [_ls = 1:6] {
		_lst = _LS2[_ls]
		_lc = floor(_l2hi / _lst + 1e-9) - ceil(_l2lo / _lst - 1e-9) + 1
		if (_lpick == 0 && _lc >= _lmin) { _lpick = _ls }
	}
	if (_lpick == 0) { _lpick = 6 }
	_lst = _LS2[_lpick]
	eval sprintf("set %stics ()", _la)
	do for [_lk = floor(_l2lo / _lst + 1e-9):ceil(_l2hi / _lst - 1e-9)] {
		_le = _lk * _lst
		eval sprintf("set %stics add ('2^{%g}' %.17g)", _la, _le, 2.0**_le)
	}
	LT_BELOW = 2.0**(floor(_l2lo / _lst + 1e-9) * _lst)
	LT_ABOVE = 2.0**(ceil(_l2hi / _lst - 1e-9) * _lst)
}
