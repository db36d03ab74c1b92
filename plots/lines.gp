# lines.gp - the lines of the string _lines (awk's answer through
# system(): lines, then a last line "#") into the array named ARG1 (a
# literal of the caller), their count into ARG1_n:
#   _lines = groups("block"); call DIR."lines.gp" "GV"
# The array has at least one element (GV_n may be 0). Only the literal
# name and integers are spliced into the commands; the values are
# assigned from a variable, never parsed.
_ls = _lines
_ln = 0
_lt = _ls
while (strlen(_lt) > 0) {
	_lp = strstrt(_lt, "\n")
	_ln = _ln + 1
	_lt = _lp > 0 ? _lt[_lp + 1:] : ""
}
_ln = _ln - 1           # the closing "#"
eval sprintf("array %s[%d]", ARG1, _ln > 0 ? _ln : 1)
eval sprintf("%s_n = %d", ARG1, _ln > 0 ? _ln : 0)
_lt = _ls
do for [_li = 1:_ln] {
	_lp = strstrt(_lt, "\n")
	_lv = _lt[1:_lp - 1]
	eval sprintf("%s[%d] = _lv", ARG1, _li)
	_lt = _lt[_lp + 1:]
}
