# demo/study.sh - what the studies share, sourced by demo/*-study.sh after
# they set bin (the tools' directory) and out (the study's): the tools on
# PATH, out made, T0 the start, say (a heading), pair CMD1 CMD2 (two sh -c
# commands at once, two cores on one thread each; fails if either does),
# and the corpus:
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
	sh -c "$1" & p1=$!
	sh -c "$2" & p2=$!
	r=0
	wait $p1 || r=1
	wait $p2 || r=1
	return $r
}

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
	sw-tokenize train --vocab "$3" -o "$1/tokenizer.bpe" "$1/corpus.txt" >/dev/null
	sw-tokenize encode -t "$1/tokenizer.bpe" -o "$1/corpus.tok.tmp" "$1/corpus.txt" >/dev/null
	mv "$1/corpus.tok.tmp" "$1/corpus.tok"
}
