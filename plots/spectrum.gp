# spectrum.gp - singular-value spectra sigma_i(W) against i, log-log, one
# curve per run or step (the spectra paper's Fig. 1-2).
#   sw-spectrum --role down --layer 1 run/ckpt-*.h5 > s.tsv
#   gnuplot -e "in='s.tsv'; out='spectrum.png'" plots/spectrum.gp
_s = ARG0; _k = strlen(_s); while (_k > 0 && _s[_k:_k] ne "/") { _k = _k - 1 }
DIR = _k > 0 ? _s[1:_k] : ""
load DIR."common.gp"
call DIR."spectrum-lines.gp" "σ_i" "outside"
