#!/bin/sh
# demo/sweep.sh - a study's grid as the studies run it (demo/study.sh's
# sweep): sw-sweep ARGS, its runs here; or, with STUDY_SLURM set, the
# Slurm job script of its runs not done (sw-sweep --slurm DIR.sbatch,
# nothing run), its name added to $STUDY_SLURM_LIST for study_trained;
# nothing when every run is done. ARGS begin with --out DIR.
set -eu
[ -n "${STUDY_SLURM:-}" ] || exec sw-sweep "$@"
if [ $# -lt 2 ] || [ "$1" != --out ]; then
	echo "sweep.sh: --out DIR must come first" >&2
	exit 64
fi
dir=$2
shift 2
if sw-sweep --out "$dir" --slurm "$dir.sbatch" "$@" 2>"$dir.slurm-err"; then
	echo "$dir.sbatch" >>"$STUDY_SLURM_LIST"
elif ! grep -q "every run is done" "$dir.slurm-err"; then
	cat "$dir.slurm-err" >&2
	rm -f "$dir.slurm-err"
	exit 1
fi
rm -f "$dir.slurm-err"
