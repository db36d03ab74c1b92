"""WeightWatcher end to end, for bench/hessian (b): what a user runs today
to fit power laws to the eigenvalue spectra of every matrix, on the same
checkpoint as sw-spectrum --esd-fit (exported by sw-convert, loaded by
transformers' LlamaForCausalLM, float32). Run by the pinned venv's python
(bench/venv.sh).

usage: ww_esd.py HF_DIR THREADS
prints: seconds, then one line per matrix WeightWatcher fitted: name alpha
xmin alpha_weighted log_spectral_norm log_norm (its scale metrics, of its
eigenvalues sv * sv, which sw-spectrum --esd-fit's same-named columns
match)
"""
import sys
import time

import torch
import weightwatcher as ww
from transformers import LlamaForCausalLM

torch.set_num_threads(int(sys.argv[2]))
model = LlamaForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32)
t0 = time.time()
details = ww.WeightWatcher(model=model).analyze()
print("%.3f" % (time.time() - t0))
for _, r in details.iterrows():
    print("%s\t%.12g\t%.12g\t%.12g\t%.12g\t%.12g" % (r["longname"], r["alpha"], r["xmin"], r["alpha_weighted"],
                                                 r["log_spectral_norm"], r["log_norm"]))
