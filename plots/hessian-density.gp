# hessian-density.gp - the spectral density of the loss Hessian per block
# type, log scale (Zhang et al., "Why transformers need Adam: a Hessian
# perspective", their per-block figures), one curve per block, in
# Principle (1)'s order as in sharpness.gp: SLQ's Gaussian-smoothed
# density from sw-hessian --density --grid. The y axis spans six decades
# below the highest peak; a density below that floor is drawn below the
# axis (so a curve leaves the panel through its bottom and comes back the
# same way, never as a floating arc), and so is the density past either
# end of a block's grid; the x axis spans the eigenvalues where some
# density is above the floor.
#   sw-hessian --data corpus.txt --density --grid 400 run/ckpt-002000.h5 > d.tsv
#   gnuplot -e "in='d.tsv'; out='hessian-density.png'" plots/hessian-density.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

# awk: "peak lo hi": the highest density, and the smallest and largest
# lambda where a density reaches 1e-6 of it (numbers only)
_mx = system(sprintf("awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == \"density\") c = i; if ($i == \"lambda\") l = i } next } c && l { n++; L[n] = $l + 0; D[n] = $c + 0; if (D[n] > hi) hi = D[n] } END { f = hi * 1e-6; for (i = 1; i <= n; i++) if (hi > 0 && D[i] >= f) { if (!m++ || L[i] < lo) lo = L[i]; if (m == 1 || L[i] > up) up = L[i] } printf \"%%.17g %%.17g %%.17g\", (hi > 0 ? hi : 1), (m ? lo : -1), (m ? up : 1) }' '%s'", in))
_peak = real(word(_mx, 1)); _xlo = real(word(_mx, 2)); _xhi = real(word(_mx, 3))
FLOOR = _peak * 1e-6
_dx = _xhi > _xlo ? 0.05 * (_xhi - _xlo) : 1
set xrange [_xlo - _dx:_xhi + _dx]
set logscale y
set format y "10^{%L}"
set yrange [FLOOR:_peak * 3]
set xlabel "eigenvalue λ of the block's Hessian"
set ylabel "density (SLQ, Gaussian-smoothed; from 10^{-6} × the peak)"
set key title "block"
_lines = groups("block")
call DIR."lines.gp" "GV"
if (GV_n == 0) { print "no rows to plot"; exit status 65 }
_lines = blockorder("block")
call DIR."lines.gp" "GO"
# block K's rows (lambda, density), with a density 0 at either end of its
# grid, so a curve whose grid ends above the floor drops to the axis there
# instead of ending in the air (numbers only are read from it)
_hd_awk = "NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " \
	. "{ v = $c[\"block\"]; if (!(v in r)) r[v] = ++n; " \
	. "  if (r[v] == k) { if (!m++) print $c[\"lambda\"] \"\t0\"; print $c[\"lambda\"] \"\t\" $c[\"density\"]; e = $c[\"lambda\"] } } " \
	. "END { if (m) print e \"\t0\" }"
hdblock(k) = sprintf("< awk -F'\t' -v k=%d '%s' '%s'", k, _hd_awk, in)
plot for [_i = 1:GV_n] hdblock(int(real(GO[_i]))) \
	using 1:($2 >= FLOOR ? $2 : FLOOR * 1e-3) with lines linetype (_i - 1) % 8 + 1 title GV[int(real(GO[_i]))]
call DIR."check.gp" "density" "y"
