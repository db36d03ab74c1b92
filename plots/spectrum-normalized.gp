# spectrum-normalized.gp - spectra divided by the equilibrium scale
# sqrt(lr/wd) (coupled weight decay) or lr/sqrt(wd) (independent): in the
# AdamW steady state they fall on one curve (the spectra paper's claim).
#   sw-spectrum --normalize --role down --layer 1 sweep/*.h5 > s.tsv
#   gnuplot -e "in='s.tsv'; out='spectrum-normalized.png'" plots/spectrum-normalized.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"
# the key inside, bottom left: the spectra fall from the top left to the
# bottom right
call DIR."spectrum-lines.gp" "σ_i / √(η/λ)  (the equilibrium scale)" "inside"
