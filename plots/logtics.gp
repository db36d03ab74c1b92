# logtics.gp - readable ticks on a log (base 10) axis:
#   call DIR."logtics.gp" AXIS LO HI [MIN]
# the coarsest of the tick sets (times each power of ten) 1; 1, 2, 5;
# 1, 2, 3, 5; 1, 1.5, 2, 3, 4, 5, 7; 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8;
# 1, 1.1, ... 2, 2.2, ... 3, 3.5, ... 9.5 that puts at least MIN (default
# 4) ticks from LO to HI (so at least MIN labels, and labels that stay
# apart), on AXIS (x, y, x2, y2: a literal of the caller), labelled with
# format "%g" (a caller may set the format after, or "" to keep the ticks
# unlabelled). Where the powers of ten alone are enough, gnuplot's own
# ticks stay (and the caller's format).
# LO and HI are taken as the numbers passed (ARGV: gnuplot's real() of
# the string "1e-05" or "5e+14" fails), so pass numbers, not strings.
# LT_SET: 1 where gnuplot's ticks stay, else 2 to 6 (the set chosen).
# LT_BELOW and LT_ABOVE: the ticks of the set chosen at or below LO and at
# or above HI (LO and HI themselves with gnuplot's ticks), for a range
# whose ends have a tick beyond the data:
#   set yrange [(LO / 1.15 < LT_BELOW ? LO / 1.15 : LT_BELOW):...]
_la = ARG1; _llo = (ARGV[2] + 0.0); _lhi = (ARGV[3] + 0.0)
_lmin = ARGC >= 4 ? int((ARGV[4] + 0.0)) : 4
LT_BELOW = _llo; LT_ABOVE = _lhi; LT_SET = 1
array _LS[6] = ["1", "1 2 5", "1 2 3 5", "1 1.5 2 3 4 5 7", "1 1.2 1.5 2 2.5 3 4 5 6 7 8", \
	"1 1.1 1.2 1.3 1.4 1.5 1.6 1.8 2 2.2 2.4 2.6 2.8 3 3.5 4 4.5 5 5.5 6 6.5 7 7.5 8 8.5 9 9.5"]
if (_llo > 0 && _lhi > _llo) {
	_lpick = 0
	do for [_ls = 1:6] {
		if (_lpick == 0) {
			_lc = 0
			do for [_le = floor(log10(_llo)):ceil(log10(_lhi))] {
				do for [_lm in _LS[_ls]] {
					_lv = real(_lm) * 10.0**_le
					if (_lv >= _llo * (1 - 1e-9) && _lv <= _lhi * (1 + 1e-9)) { _lc = _lc + 1 }
				}
			}
			if (_lc >= _lmin) { _lpick = _ls }
		}
	}
	if (_lpick == 0) { _lpick = 6 }
	LT_SET = _lpick
	if (_lpick > 1) {
		eval sprintf("set %stics ()", _la)
		eval sprintf("set format %s '%%g'", _la)
		LT_BELOW = 0; LT_ABOVE = 0
		do for [_le = floor(log10(_llo)):ceil(log10(_lhi))] {
			do for [_lm in _LS[_lpick]] {
				_lv = real(_lm) * 10.0**_le
				if (_lm eq "1" || _le < ceil(log10(_lhi))) {
					eval sprintf("set %stics add (%.17g)", _la, _lv)
					if (_lv <= _llo * (1 + 1e-9)) { LT_BELOW = _lv }
					if (_lv >= _lhi * (1 - 1e-9) && LT_ABOVE == 0) { LT_ABOVE = _lv }
				}
			}
		}
	}
}
