#!/usr/bin/python3
# make-pt-seeds.py - writes the seed corpora of fuzz-pickle and fuzz-ptzip
# under tests/fuzz/corpus/{pickle,ptzip}: small files torch.save wrote
# (Debian's python3-torch) and their data.pkl, and a few pickles torch
# would run but the unpickler refuses. Rerunning rewrites them (torch's
# zip records carry no dates, so the bytes stay the same).
#
#   /usr/bin/python3 tests/fuzz/make-pt-seeds.py     (from the top of the tree)
import collections
import io
import os
import pickle
import zipfile

import torch

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(TOP, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def saved(obj, **kw):
    b = io.BytesIO()
    torch.save(obj, b, **kw)
    return b.getvalue()


def pkl_of(zipbytes):
    z = zipfile.ZipFile(io.BytesIO(zipbytes))
    return z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])


torch.manual_seed(0)
base = torch.arange(12, dtype=torch.float32)
cases = {
    "state-dict": collections.OrderedDict(
        [("a", torch.ones(2, 3)), ("b", torch.zeros(3, dtype=torch.bfloat16)),
         ("c", torch.ones(2, dtype=torch.float16))]),
    "views": {"off": base[2:8].view(2, 3), "t": base[:6].view(2, 3).t(), "whole": base},
    "nested": {"model": {"w": torch.ones(2, 2)}, "step": 3, "lr": 0.5, "name": "x",
               "optimizer": {"state": {0: {"exp_avg": torch.zeros(2)}},
                             "param_groups": [{"params": [0], "betas": (0.9, 0.95), "amsgrad": False,
                                               "foreach": None}]}},
    "module": torch.nn.Linear(3, 2).state_dict(),
    "parameter": {"p": torch.nn.Parameter(torch.ones(3))},
    "ints": {"i": torch.arange(4), "f64": torch.ones(2, dtype=torch.float64)},
}
for name, obj in cases.items():
    z = saved(obj)
    put("ptzip", name + ".pt", z)
    put("pickle", name + ".pkl", pkl_of(z))
put("pickle", "protocol4.pkl", pkl_of(saved(cases["state-dict"], pickle_protocol=4)))


class Evil:
    def __reduce__(self):
        return (os.system, ("true",))


put("pickle", "reduce-os-system.pkl", pickle.dumps({"w": Evil()}, protocol=2))
put("pickle", "newobj.pkl", pickle.dumps(collections.Counter("ab"), protocol=2))
put("pickle", "empty-dict.pkl", pickle.dumps({}, protocol=2))
