#!/usr/bin/python3
"""jsonedit.py FILE CODE: the JSON object of FILE (a config.json, a
params.json) as the dict c, edited by the Python statements CODE (json
importable there), written back: how the tests make a variant of a
config (t0553-hostile3-config.t, t0212-rope-scaling.t)."""
import json
import sys

path, code = sys.argv[1:3]
c = json.load(open(path))
exec(code, {"json": json, "c": c})
json.dump(c, open(path, "w"))
