# scale-vectors.gp - the norm gains over training (the scale-vectors
# paper): two panels on a shared step axis, a curve per vector: above, its
# spread (sd over its entries; 0 while it is still all ones); below, its
# coupling with the matrices that read it (the correlation of |g_i| with
# their column norms; Pre-Norm gains only, the others have none).
#   sw-norms --scale-vectors --block norm run/ckpt-*.h5 > g.tsv
#   gnuplot -e "in='g.tsv'; out='scale-vectors.png'" plots/scale-vectors.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"

stats in using "step" name "SX" nooutput
_lines = groups("name")
call DIR."lines.gp" "GV"
if (GV_n == 0) { print "no rows to plot"; exit status 65 }
# the key by role and layer: "L0 attn_norm" for
# model.layers.0.input_layernorm.weight, "final_norm" for model.norm.weight
_rep(s, a, b) = strstrt(s, a) > 0 ? s[1:strstrt(s, a) - 1].b.s[strstrt(s, a) + strlen(a):] : s
_roles(s) = _rep(_rep(_rep(_rep(_rep(_rep(_rep(s, "model.layers.", "L"), ".weight", ""), \
	"post_attention_layernorm", "ffn_norm"), "input_layernorm", "attn_norm"), "self_attn.", ""), \
	"mlp.", ""), "model.norm", "final_norm")
array GT[GV_n]
do for [_i = 1:GV_n] { GT[_i] = _rep(_roles(GV[_i]), ".", " ") }
GT_OWN = 1
_dx = SX_max > SX_min ? 0.04 * (SX_max - SX_min) : 1
set xrange [SX_min - _dx:SX_max + _dx]
set multiplot layout 2,1 margins 0.1,0.76,0.11,0.92 spacing 0.06 \
	title "scale vectors over training: spread, and coupling with the next matrices"
set key at screen 0.78, screen 0.9 left top Left reverse title "vector"
stats in using "sd" name "SD" nooutput
set yrange [0:(SD_max > 0 ? SD_max * 1.15 : 1)]
set ylabel "sd(γ)"
set format x ""
unset xlabel
call DIR."grouped.gp" "step" "sd" "name" "linespoints"
call DIR."check.gp" "sd" "-"
unset key
set ylabel "corr(|γ_i|, ‖W_{:,i}‖)"
set yrange [-1.05:1.05]
set format x "%g"
set xlabel "step"
call DIR."grouped.gp" "step" "coupling" "name" "linespoints"
call DIR."check.gp" "coupling" "-"
unset multiplot
