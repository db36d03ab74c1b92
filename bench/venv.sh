#!/bin/sh
# bench/venv.sh - the peers a user would install today, pinned, in a
# virtual environment under build/ (make bench-venv; never make check):
# PyTorch from PyPI (its Linux wheel, with the CUDA libraries it names:
# the benchmarks run it on the CPU), transformers, WeightWatcher and
# PyHessian. The benchmarks run it beside Debian's python3-torch when
# build/venv/bin/python exists, and print the versions they measured.
#
# Usage: bench/venv.sh [DIR]   (DIR: build/venv)
set -eu
dir=${1:-build/venv}
PINS="torch==2.15.0 transformers==5.24.0 weightwatcher==0.7.7 pyhessian==0.1"
if [ ! -x "$dir/bin/python" ]; then
	python3 -m venv "$dir.tmp"
	"$dir.tmp/bin/pip" install --quiet --disable-pip-version-check $PINS
	mv "$dir.tmp" "$dir"
fi
"$dir/bin/python" -c '
import torch, transformers, weightwatcher, pyhessian
print("build/venv: torch %s, transformers %s, weightwatcher %s, pyhessian %s" % (
    torch.__version__, transformers.__version__, weightwatcher.__version__,
    getattr(pyhessian, "__version__", "0.1")))'
