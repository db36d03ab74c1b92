# valaxis.gp - a value axis fitted to the data, logarithmic where it should
# be: call DIR."valaxis.gp" AXIS LO HI
# LO..HI the extent of the values drawn on AXIS (y or y2, a literal of the
# caller). Positive values spanning more than a decade get a log axis
# (logtics.gp's ticks, 10^n labels where the powers of ten suffice) with a
# tick or a margin beyond the data at either end; otherwise a linear axis
# with 8% of room above and below. VA_LOG: 1 for the log axis, else 0;
# VA_FMT: the labels' format it set (for a panel that unset and restores it).
_va = ARG1; _vlo = (ARGV[2] + 0.0); _vhi = (ARGV[3] + 0.0)
VA_LOG = (_vlo > 0 && _vhi > 10 * _vlo) ? 1 : 0
if (VA_LOG) {
	eval sprintf("set logscale %s", _va)
	eval sprintf("set format %s '10^{%%L}'", _va)
	call DIR."logtics.gp" _va _vlo _vhi
	_vb = _vlo / 1.2 < LT_BELOW ? _vlo / 1.2 : LT_BELOW
	_vt = _vhi * 1.2 > LT_ABOVE ? _vhi * 1.2 : LT_ABOVE
	eval sprintf("set %srange [%.17g:%.17g]", _va, _vb, _vt)
	VA_FMT = LT_SET == 1 ? "10^{%L}" : "%g"
} else {
	eval sprintf("unset logscale %s", _va)
	eval sprintf("set format %s '%%g'", _va)
	eval sprintf("set %stics autofreq", _va)
	_vd = _vhi > _vlo ? 0.08 * (_vhi - _vlo) : (abs(_vhi) > 0 ? 0.1 * abs(_vhi) : 1)
	eval sprintf("set %srange [%.17g:%.17g]", _va, _vlo - _vd, _vhi + _vd)
	VA_FMT = "%g"
}
