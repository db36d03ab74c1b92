# demo/study.sh - what the studies share, sourced by demo/*-study.sh after
# they set bin (the tools' directory) and out (the study's): the tools on
# PATH, out made, T0 the start, say (a heading), pair CMD1 CMD2 (two
# commands at once, two cores on one thread each; fails if either does),
# sweep and study_trained (a grid, here or as a Slurm job script), scale
# (STUDY_SCALE), and the corpus:
#   study_corpus OUT CORPUS VOCAB
# writes OUT/corpus.txt (CORPUS, or Debian's fortunes when CORPUS is
# empty), a BPE tokenizer of VOCAB tokens trained on it (OUT/tokenizer.bpe)
# and its tokens (OUT/corpus.tok, last, under a temporary name: a study cut
# short tokenizes again); nothing when OUT/corpus.tok is there. Exit 66
# without the fortunes.
PATH=$bin:$PATH
export PATH
mkdir -p "$out"
T0=$(date +%s)
say() { printf '\n== %s\n' "$*"; }

pair() {
	( eval "$1" ) & p1=$!
	( eval "$2" ) & p2=$!
	r=0
	wait $p1 || r=1
	wait $p2 || r=1
	return $r
}

# sweep ARGS: a grid (demo/sweep.sh): sw-sweep ARGS, or under STUDY_SLURM
# its job script. study_trained: after a phase's sweeps, under STUDY_SLURM
# with job scripts written, name them and stop the study (exit 0): run it
# again when they are done (the sweeps skip what is done), with
# STUDY_SLURM while a later phase remains, whose settings (a tuned lr)
# come from these runs.
STUDY_SLURM_LIST=$out/slurm-jobs.txt
export STUDY_SLURM_LIST
[ -z "${STUDY_SLURM:-}" ] || : >"$STUDY_SLURM_LIST"
sweep() {
	sh "$top/demo/sweep.sh" "$@"
}
study_trained() {
	[ -n "${STUDY_SLURM:-}" ] && [ -s "$STUDY_SLURM_LIST" ] || return 0
	say "STUDY_SLURM: submit these job scripts; when they are done, run this study again"
	sed 's/^/sbatch /' "$STUDY_SLURM_LIST"
	exit 0
}
# STUDY_SCALE=N: N times each study's steps (or tokens), its evaluation
# intervals with them
scale=${STUDY_SCALE:-1}

study_corpus() {
	[ -s "$1/corpus.tok" ] && return 0
	if [ -n "$2" ]; then
		cp "$2" "$1/corpus.txt"
	else
		FORTUNES=/usr/share/games/fortunes
		[ -d "$FORTUNES" ] ||
			{ echo "$(basename "$0"): $FORTUNES is missing: install Debian's fortunes (make deps)" >&2; exit 66; }
		cat $(ls -d "$FORTUNES"/* | grep -v -E '\.(dat|u8)$') >"$1/corpus.txt"
	fi
	sw-tokenize train --force --vocab "$3" -o "$1/tokenizer.bpe" "$1/corpus.txt" >/dev/null
	sw-tokenize encode --force -t "$1/tokenizer.bpe" -o "$1/corpus.tok.tmp" "$1/corpus.txt" >/dev/null
	mv "$1/corpus.tok.tmp" "$1/corpus.tok"
}
