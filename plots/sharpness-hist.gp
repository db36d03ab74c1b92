# sharpness-hist.gp - the distribution of log10 h per block type (the
# sharpness paper's Fig. 2 right), the types in Principle (1)'s order as in
# sharpness.gp. The x axis spans the main modes: from the 2% quantile of
# the types' distributions (each type weighing alike) to the last bin
# with entries, so a far tail (the output head's mode near 1e-13) does not
# squeeze them; the key says what share of each type lies left of it, not
# drawn, and how many entries are exactly 0 where the table has a zeros
# column (they have no log and are in no bin). The y axis is the density
# per unit of log10 h; a table of an earlier release, with the share of
# each bin (fraction) instead, is drawn as such.
#   sw-sharpness --hist 60 run/ckpt-002000.h5 > h.tsv
#   gnuplot -e "in='h.tsv'; out='sharpness-hist.png'" plots/sharpness-hist.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# awk: line 1 "lo hi Y" (numbers; lo the 2% quantile's bin, rounded down
# to a half, hi past the last bin with entries; Y the column drawn), then a key title per type in
# order of first appearance, then "#". The bins are evenly spaced, shared
# by the types: bin k starts at the smallest start + k widths.
_hist_awk = "NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; y = (\"density\" in c) ? \"density\" : \"fraction\"; next } " \
	. "{ b = $c[\"block\"]; if (!(b in g)) { g[b] = ++ng; G[ng] = b; if (\"zeros\" in c) Z[b] = $c[\"zeros\"] } " \
	. "  n++; X[n] = $c[\"bin_lo\"] + 0; F[n] = $c[y] * (y == \"density\" ? $c[\"bin_hi\"] - $c[\"bin_lo\"] : 1); B[n] = b; " \
	. "  if (n == 1 || X[n] < x0) x0 = X[n]; if (n == 1 || X[n] > x1) x1 = X[n]; " \
	. "  if (F[n] > 0 && (!m++ || X[n] > top)) top = X[n] } " \
	. "END { if (!n) { print \"0 0 \" y; print \"#\"; exit } " \
	. "  for (i = 1; i <= n; i++) if (X[i] > x0 && (!nw++ || X[i] - x0 < w)) w = X[i] - x0; " \
	. "  if (!nw || w <= 0) w = 1; nk = int((x1 - x0) / w + 0.5); " \
	. "  for (i = 1; i <= n; i++) W[int((X[i] - x0) / w + 0.5)] += F[i] / ng; " \
	. "  s = 0; for (k = 0; k <= nk; k++) { s += W[k]; if (s >= 0.02) break } " \
	. "  lo = x0 + k * w; lo = int(lo * 2 - (lo * 2 < int(lo * 2) ? 1 : 0)) / 2; if (lo > x0 + k * w) lo -= 0.5; " \
	. "  if (lo < x0) lo = x0; " \
	. "  for (i = 1; i <= n; i++) if (X[i] + w <= lo + 1e-9) below[B[i]] += F[i]; " \
	. "  printf(\"%.17g %.17g %s\\n\", lo, (m ? top + w : x1 + w) + 0.25 * w, y); " \
	. "  for (j = 1; j <= ng; j++) { b = G[j]; t = b; " \
	. "    if (below[b] >= 0.0005) t = t sprintf(\": %.1f%% left\", 100 * below[b]); " \
	. "    if (b in Z && Z[b] + 0 > 0) t = t sprintf(\"%s %d zeros\", t == b ? \":\" : \",\", Z[b] + 0); " \
	. "    print t } print \"#\" }"
_lines = system(sprintf("awk -F'\t' '%s' '%s'", _hist_awk, in))
call DIR."lines.gp" "H"
if (H_n < 2) { print "no rows to plot"; exit status 65 }
_xlo = real(word(H[1], 1)); _xhi = real(word(H[1], 2)); _ycol = word(H[1], 3)
array GT[H_n - 1]
do for [_i = 2:H_n] { GT[_i - 1] = H[_i] }
GT_OWN = 1
if (_xhi > _xlo) {
	set xrange [_xlo:_xhi]
	set label 1 sprintf("← h < 10^{%g}: not drawn\n    (the share left in the key)", _xlo) at graph 0.01, graph 0.97 left front
}
set xlabel "log_{10} h"
set ylabel (_ycol eq "density" ? "density of log_{10} h over the type's nonzero entries" : "fraction of the type's nonzero entries")
set yrange [0:*]
set key title "block"
_lines = blockorder("block")
call DIR."lines.gp" "GO"
GO_OWN = 1
call DIR."grouped.gp" "bin_lo" _ycol "block" "steps"
call DIR."check.gp" "hist" "-"
