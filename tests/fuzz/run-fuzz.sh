#!/bin/sh
# run-fuzz.sh - what `make fuzz` runs: each libFuzzer target in turn for
# SECONDS, with ASan+UBSan and leak detection, on its committed seeds
# (tests/fuzz/corpus/NAME) and regressions (tests/fuzz/regress/NAME); what
# it finds new goes to BUILD/corpus/NAME, never into git, and a crash,
# hang, leak or failed invariant to BUILD/artifacts/NAME/. Prints one line
# per target (time, executions) and fails if any target failed.
#
#   tests/fuzz/run-fuzz.sh BUILD SECONDS NAME...
set -u
build=$1
secs=$2
shift 2
top=tests/fuzz
status=0
summary=""
for t in "$@"; do
	case $t in
	st-header | st-index) maxlen=4096 dict=$top/safetensors.dict ;;
	st-config) maxlen=4096 dict=$top/config.dict ;;
	tokens) maxlen=4096 dict=$top/tokens.dict ;;
	h5ckpt) maxlen=256 dict= ;;
	tokenizer) maxlen=4096 dict=$top/tokenizer.dict ;;
	pickle) maxlen=4096 dict=$top/pickle.dict ;;
	ptzip) maxlen=8192 dict=$top/pickle.dict ;;
	gguf) maxlen=4096 dict=$top/gguf.dict ;;
	llama2c) maxlen=512 dict= ;;
	*) echo "run-fuzz: no target '$t'" >&2; exit 64 ;;
	esac
	scratch=$build/corpus/$t
	art=$build/artifacts/$t
	log=$build/logs/$t.log
	mkdir -p "$scratch" "$art" "$build/logs"
	set -- "$scratch" "$top/corpus/$t"
	[ -d "$top/regress/$t" ] && set -- "$@" "$top/regress/$t"
	echo "fuzz-$t: $secs s (log: $log)"
	start=$(date +%s)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	"$build/fuzz-$t" -max_total_time="$secs" -max_len="$maxlen" ${dict:+-dict="$dict"} \
		-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -detect_leaks=1 \
		-print_final_stats=1 -artifact_prefix="$art/" "$@" >"$log" 2>&1
	rc=$?
	end=$(date +%s)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	line="$t: $((end - start)) s, ${execs:-?} execs"
	if [ $rc -ne 0 ]; then
		status=1
		line="$line, FAILED (exit $rc; see $log and $art/)"
		tail -n 40 "$log" >&2
	else
		line="$line, 0 crashes"
	fi
	summary="$summary$line
"
done
printf "%s" "$summary"
exit $status
