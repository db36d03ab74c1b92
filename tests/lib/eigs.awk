# eigs.awk OURS REF (awk -F'[\t ]'): lambda_1..3 of each block type in
# sw-hessian's output (OURS: block in $3, lambda in $5-$7) against
# hessian_reference.py's dense job (REF: BLOCK N L1 L2 L3 ...) to 1e-3
# relative, with a floor of 1e-7 lambda_max for values near 0; every
# block in both, at least 6; exit 1 (the rows named) otherwise.
# t0280-hessian-torch.t and t0212-rope-scaling.t.
NR == FNR { if (FNR > 1) { for (k = 1; k <= 3; k++) l[$3, k] = $(k + 4); n++ } next }
$1 == "all" { top = $3 < 0 ? -$3 : $3 }
{ r[$1] = $0 }
END {
	for (b in r) {
		split(r[b], f, " ")
		for (k = 1; k <= 3; k++) {
			d = l[b, k] - f[k + 2]; if (d < 0) d = -d
			m = f[k + 2] < 0 ? -f[k + 2] : f[k + 2]
			if (!((b, k) in l) || d > 1e-3 * m + 1e-7 * top) { print b, k, l[b, k], f[k + 2]; bad = 1 }
		}
		seen++
	}
	if (seen != n || n < 6) { print "blocks: ours " n ", reference " seen; bad = 1 }
	exit bad
}
